/*
 * import_read.c — `moraine import` reads the source whole: each of the
 * mapping table's catalog tables (catalog_map.c), its columns cast to the
 * mapping's types and then to text, as the server's capture hands them to
 * the commit path; the spec version; every inlined data table, its columns
 * given the types DuckLake on PostgreSQL inlines them as (lake_types.c),
 * strings and blobs read as bytes; every inlined delete table.
 */
#include "cli/import_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/lake_types.h"

void imp_stable_free(stable *s) {
  for (size_t i = 0; i < s->npidx; i++)
    free(s->pidx[i].key);
  free(s->pidx);
  import_rows_free(&s->rows);
  for (size_t i = 0; s->own_types && i < s->ntypes; i++)
    free((char *)s->types[i]);
  free(s->types);
  free(s->ins);
  free(s->del);
  free(s->ins_order);
  free(s->del_order);
  free(s->ddl);
}

bool imp_cell_i64(const import_rows *r, size_t row, int col, int64_t *v) {
  if (col < 0)
    return false;
  const sql_value *c = &r->values[row * r->ncols + (size_t)col];
  if (c->is_null)
    return false;
  char *end;
  errno = 0;
  long long x = strtoll(c->data, &end, 10);
  if (end == c->data || *end || errno)
    return false;
  *v = x;
  return true;
}

const char *imp_cell_text(const import_rows *r, size_t row, int col) {
  if (col < 0)
    return NULL;
  const sql_value *c = &r->values[row * r->ncols + (size_t)col];
  return c->is_null ? NULL : c->data;
}

/* Appends s as a quoted identifier. */
void imp_put_ident(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Reads mapped table tb: each column cast to its mapping type, then text. */
static mr_status read_mapped(importer *im, const catalog_table *tb, stable *s) {
  s->tb = tb;
  snprintf(s->name, sizeof s->name, "%s", tb->name);
  bool has;
  mr_status rc = import_source_has_table(im->src, tb->name, &has, im->err);
  if (rc)
    return rc;
  char *sql = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&sql, &len);
  if (f == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  fputs("SELECT ", f);
  for (size_t i = 0; i < tb->ncols; i++) {
    /* the mapping's type first: a SQLite or PostgreSQL column reads as its own */
    fputs(i ? ", " : "", f);
    if (has) {
      fputs("CAST(CAST(", f);
      imp_put_ident(f, tb->cols[i].name);
      fprintf(f, " AS %s) AS VARCHAR)", tb->cols[i].type);
    } else {
      fputs("CAST(NULL AS VARCHAR)", f);
    }
    fputs(" AS ", f);
    imp_put_ident(f, tb->cols[i].name);
  }
  if (has) {
    char q[400];
    import_source_table(im->src, tb->name, q, sizeof q);
    fprintf(f, " FROM %s", q);
  } else {
    fputs(" LIMIT 0", f); /* a table the source lacks is empty */
  }
  fclose(f);
  rc = import_source_query(im->src, sql, &s->rows, im->err);
  free(sql);
  if (rc)
    return mr_error_wrap(im->err, "reading %s", tb->name);
  s->types = calloc(tb->ncols ? tb->ncols : 1, sizeof *s->types);
  if (s->types == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < tb->ncols; i++)
    s->types[i] = tb->cols[i].type;
  return MR_OK;
}

stable *imp_find_table(importer *im, const char *name) {
  for (size_t i = 0; i < im->nt; i++)
    if (strcmp(im->t[i].name, name) == 0)
      return &im->t[i];
  return NULL;
}

mr_status imp_add_table(importer *im, stable **out) {
  stable *nt = realloc(im->t, (im->nt + 1) * sizeof *nt);
  if (nt == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  im->t = nt;
  *out = &im->t[im->nt++];
  memset(*out, 0, sizeof **out);
  (*out)->ibegin = (*out)->iend = -1;
  return MR_OK;
}

/* ---- the spec version -------------------------------------------------------- */

static mr_status check_version(importer *im, const char *source) {
  stable *m = imp_find_table(im, "ducklake_metadata");
  bool has = false;
  mr_status rc = import_source_has_table(im->src, "ducklake_metadata", &has, im->err);
  if (rc)
    return rc;
  if (!has)
    return mr_fail(im->err, MR_ERR_INVALID,
                   "%s holds no DuckLake catalog (no ducklake_metadata table in its metadata "
                   "schema)",
                   source);
  int ik = import_rows_col(&m->rows, "key"), iv = import_rows_col(&m->rows, "value"),
      is = import_rows_col(&m->rows, "scope");
  for (size_t r = 0; r < m->rows.nrows; r++) {
    const char *k = imp_cell_text(&m->rows, r, ik), *v = imp_cell_text(&m->rows, r, iv);
    if (k && strcmp(k, "version") == 0 && imp_cell_text(&m->rows, r, is) == NULL) {
      if (v && strcmp(v, "1.0") == 0)
        return MR_OK;
      return mr_fail(im->err, MR_ERR_INVALID,
                     "%s is a DuckLake catalog of spec version %s; moraine imports spec version "
                     "1.0 (attach it once with DuckLake 1.5 to upgrade it)",
                     source, v ? v : "NULL");
    }
  }
  return mr_fail(im->err, MR_ERR_INVALID,
                 "%s names no DuckLake spec version (ducklake_metadata has no 'version' row)",
                 source);
}

/* ---- inlined tables ---------------------------------------------------------- */

/* The snapshot that minted schema version ver of table tid: the begin of its
 * newest ducklake_schema_versions row at or before ver; -1 if none. */
static int64_t minting_snapshot(importer *im, int64_t tid, int64_t ver) {
  stable *sv = imp_find_table(im, "ducklake_schema_versions");
  int it = import_rows_col(&sv->rows, "table_id"), iv = import_rows_col(&sv->rows, "schema_version"),
      ib = import_rows_col(&sv->rows, "begin_snapshot");
  int64_t best = -1, at = -1;
  for (size_t r = 0; r < sv->rows.nrows; r++) {
    int64_t t, v, b;
    if (imp_cell_i64(&sv->rows, r, it, &t) && t == tid && imp_cell_i64(&sv->rows, r, iv, &v) && v <= ver &&
        v >= best && imp_cell_i64(&sv->rows, r, ib, &b)) {
      best = v;
      at = b;
    }
  }
  return at;
}

/* The DuckLake type of top-level column `name` of table tid at snapshot s. */
static const char *lake_type_of(importer *im, int64_t tid, int64_t s, const char *name) {
  stable *c = imp_find_table(im, "ducklake_column");
  const import_rows *r = &c->rows;
  int it = import_rows_col(r, "table_id"), in = import_rows_col(r, "column_name"),
      ity = import_rows_col(r, "column_type"), ip = import_rows_col(r, "parent_column"),
      ib = import_rows_col(r, "begin_snapshot"), ie = import_rows_col(r, "end_snapshot");
  for (size_t row = 0; row < r->nrows; row++) {
    int64_t t, b, e;
    const char *n = imp_cell_text(r, row, in);
    if (!imp_cell_i64(r, row, it, &t) || t != tid || n == NULL || strcmp(n, name) != 0 ||
        imp_cell_text(r, row, ip) != NULL || !imp_cell_i64(r, row, ib, &b) || b > s)
      continue;
    if (imp_cell_i64(r, row, ie, &e) && e <= s)
      continue;
    return imp_cell_text(r, row, ity);
  }
  return NULL;
}

/*
 * Reads ducklake_inlined_data_{tid}_{ver}: its columns get the types
 * DuckLake on PostgreSQL inlines them as, and the CREATE TABLE the server
 * would have captured; strings and blobs are read as bytes, the rest as
 * DuckDB's text.
 */
static mr_status read_inline_data(importer *im, const char *name, int64_t tid, int64_t ver,
                                  size_t group) {
  int64_t minted = minting_snapshot(im, tid, ver);
  if (minted < 0)
    return mr_fail(im->err, MR_ERR_INVALID,
                   "%s: table %lld has no schema version at or before %lld (ducklake_schema_versions)",
                   name, (long long)tid, (long long)ver);
  char q[400], sql[1024];
  import_source_table(im->src, name, q, sizeof q);
  import_rows cols;
  /* the source's own column order and types */
  snprintf(sql, sizeof sql,
           "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM %s)", q);
  mr_status rc = import_source_query(im->src, sql, &cols, im->err);
  if (rc)
    return mr_error_wrap(im->err, "reading the columns of %s", name);
  stable *s;
  rc = imp_add_table(im, &s);
  if (rc) {
    import_rows_free(&cols);
    return rc;
  }
  snprintf(s->name, sizeof s->name, "%s", name);
  s->tid = tid;
  s->ver = ver;
  s->ddl_group = group;
  char *sel = NULL, *ddl = NULL;
  size_t sl = 0, dl = 0;
  FILE *fs = open_memstream(&sel, &sl), *fd = open_memstream(&ddl, &dl);
  s->types = calloc(cols.nrows ? cols.nrows : 1, sizeof *s->types);
  char (*pg)[64] = calloc(cols.nrows ? cols.nrows : 1, sizeof *pg);
  if (fs == NULL || fd == NULL || s->types == NULL || pg == NULL)
    rc = mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  if (!rc) {
    fputs("SELECT ", fs);
    fprintf(fd, "CREATE TABLE %s(", name);
  }
  for (size_t i = 0; !rc && i < cols.nrows; i++) {
    const char *cn = imp_cell_text(&cols, i, 0), *dt = imp_cell_text(&cols, i, 1);
    if (cn == NULL || dt == NULL) {
      rc = mr_fail(im->err, MR_ERR_INVALID, "%s: a column without a name or type", name);
      break;
    }
    bool meta = i < 3;
    static const char *const META[] = {"row_id", "begin_snapshot", "end_snapshot"};
    if (meta && strcmp(cn, META[i]) != 0) {
      rc = mr_fail(im->err, MR_ERR_INVALID, "%s: column %zu is %s, not %s", name, i + 1, cn,
                   META[i]);
      break;
    }
    if (meta) {
      snprintf(pg[i], sizeof pg[i], "BIGINT");
    } else {
      const char *lt = lake_type_of(im, tid, minted, cn);
      if (lt == NULL) {
        rc = mr_fail(im->err, MR_ERR_INVALID,
                     "%s: column %s is not a column of table %lld at snapshot %lld", name, cn,
                     (long long)tid, (long long)minted);
        break;
      }
      if (lake_type_inline_pg(lt, pg[i], sizeof pg[i]) == NULL) {
        rc = mr_fail(im->err, MR_ERR_INVALID,
                     "%s: column %s has the DuckLake type '%s', which moraine does not inline",
                     name, cn, lt);
        break;
      }
    }
    fputs(i ? ", " : "", fs);
    fputs(i ? ", " : "", fd);
    imp_put_ident(fd, cn);
    fprintf(fd, " %s", pg[i]);
    if (strcmp(pg[i], "pg_bytea") != 0) {
      fputs("CAST(", fs);
      imp_put_ident(fs, cn);
      fputs(" AS VARCHAR)", fs);
    } else if (strcmp(dt, "BLOB") == 0) {
      imp_put_ident(fs, cn); /* the bytes themselves */
    } else {
      fputs("encode(CAST(", fs); /* a string's UTF-8 bytes */
      imp_put_ident(fs, cn);
      fputs(" AS VARCHAR))", fs);
    }
    fputs(" AS ", fs);
    imp_put_ident(fs, cn);
  }
  if (fs) {
    fprintf(fs, " FROM %s", q);
    fclose(fs);
  }
  if (fd) {
    fputs(")", fd);
    fclose(fd);
  }
  size_t cols_n = cols.nrows;
  import_rows_free(&cols);
  if (!rc)
    rc = import_source_query(im->src, sel, &s->rows, im->err);
  free(sel);
  s->ddl = ddl;
  /* the types outlive pg: each its own copy (own_types) */
  s->own_types = true;
  for (size_t i = 0; s->types && pg && i < cols_n; i++) {
    s->types[i] = strdup(pg[i]);
    if (s->types[i] == NULL && !rc)
      rc = mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  }
  s->ntypes = s->types && pg ? cols_n : 0;
  free(pg);
  s->ibegin = import_rows_col(&s->rows, "begin_snapshot");
  s->iend = import_rows_col(&s->rows, "end_snapshot");
  return rc ? mr_error_wrap(im->err, "reading %s", name) : MR_OK;
}

/* Reads ducklake_inlined_delete_{tid} (its columns are all BIGINT). */
static mr_status read_inline_delete(importer *im, const char *name, int64_t tid) {
  char q[400], sql[1024];
  import_source_table(im->src, name, q, sizeof q);
  snprintf(sql, sizeof sql,
           "SELECT CAST(file_id AS VARCHAR) AS file_id, CAST(row_id AS VARCHAR) AS row_id, "
           "CAST(begin_snapshot AS VARCHAR) AS begin_snapshot FROM %s",
           q);
  stable *s;
  mr_status rc = imp_add_table(im, &s);
  if (rc)
    return rc;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->tid = tid;
  s->ddl_group = IMPORT_NO_GROUP;
  rc = import_source_query(im->src, sql, &s->rows, im->err);
  if (rc)
    return mr_error_wrap(im->err, "reading %s", name);
  static const char *const BIG3[] = {"BIGINT", "BIGINT", "BIGINT"};
  s->types = calloc(3, sizeof *s->types);
  if (s->types == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  memcpy(s->types, BIG3, sizeof BIG3);
  static const char DDL[] = "CREATE TABLE %s(file_id BIGINT, row_id BIGINT, begin_snapshot BIGINT)";
  size_t cap = sizeof DDL + strlen(name);
  s->ddl = malloc(cap);
  if (s->ddl == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  snprintf(s->ddl, cap, DDL, name);
  s->ibegin = 2;
  return MR_OK;
}

/* Every inlined data table ducklake_inlined_data_tables names, and every
 * inlined delete table in the metadata schema. */
static mr_status read_inlined(importer *im) {
  stable *it = imp_find_table(im, "ducklake_inlined_data_tables");
  size_t n = it->rows.nrows;
  int itid = import_rows_col(&it->rows, "table_id"), iname = import_rows_col(&it->rows, "table_name"),
      iver = import_rows_col(&it->rows, "schema_version");
  for (size_t r = 0; r < n; r++) {
    it = imp_find_table(im, "ducklake_inlined_data_tables"); /* imp_add_table moves the array */
    int64_t tid, ver;
    const char *name = imp_cell_text(&it->rows, r, iname);
    if (!imp_cell_i64(&it->rows, r, itid, &tid) || !imp_cell_i64(&it->rows, r, iver, &ver) || name == NULL)
      return mr_fail(im->err, MR_ERR_INVALID, "ducklake_inlined_data_tables: a row without its ids");
    char nm[96];
    snprintf(nm, sizeof nm, "%s", name);
    bool has;
    mr_status rc = import_source_has_table(im->src, nm, &has, im->err);
    if (rc)
      return rc;
    if (!has)
      return mr_fail(im->err, MR_ERR_INVALID,
                     "ducklake_inlined_data_tables names %s, which the source does not hold", nm);
    int64_t minted = minting_snapshot(im, tid, ver);
    size_t g = minted < 0 ? IMPORT_NO_GROUP : import_group_of(im->ids, im->n, minted);
    rc = read_inline_data(im, nm, tid, ver, g);
    if (rc)
      return rc;
  }
  char sql[1024], lit[300];
  import_rows dels;
  import_source_literal(import_source_schema(im->src), lit, sizeof lit);
  snprintf(sql, sizeof sql,
           "SELECT table_name FROM duckdb_tables() WHERE database_name = 'src' AND schema_name = %s "
           "AND table_name LIKE 'ducklake\\_inlined\\_delete\\_%%' ESCAPE '\\' ORDER BY table_name",
           lit);
  mr_status rc = import_source_query(im->src, sql, &dels, im->err);
  if (rc)
    return rc;
  for (size_t r = 0; !rc && r < dels.nrows; r++) {
    const char *name = imp_cell_text(&dels, r, 0);
    char *end;
    long long tid = name ? strtoll(name + strlen("ducklake_inlined_delete_"), &end, 10) : 0;
    if (name && *end == '\0')
      rc = read_inline_delete(im, name, tid);
  }
  import_rows_free(&dels);
  return rc;
}

/* ---- the whole source ------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

mr_status import_read_source(importer *im, const char *source) {
  for (size_t i = 0; i < catalog_table_count(); i++) {
    stable *s;
    mr_status rc = imp_add_table(im, &s);
    if (!rc)
      rc = read_mapped(im, catalog_table_at(i), s);
    if (rc)
      return rc;
    s->ibegin = import_rows_col(&s->rows, "begin_snapshot");
    s->iend = import_rows_col(&s->rows, "end_snapshot");
    if (i == 0) {
      rc = check_version(im, source); /* ducklake_metadata is the mapping's first table */
      if (rc)
        return rc;
    }
  }
  stable *snaps = imp_find_table(im, "ducklake_snapshot");
  if (snaps == NULL || snaps->rows.nrows == 0)
    return mr_fail(im->err, MR_ERR_INVALID, "%s has no snapshot", source);
  im->n = snaps->rows.nrows;
  im->ids = malloc(im->n * sizeof *im->ids);
  if (im->ids == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  int isid = import_rows_col(&snaps->rows, "snapshot_id");
  for (size_t r = 0; r < im->n; r++)
    if (!imp_cell_i64(&snaps->rows, r, isid, &im->ids[r]))
      return mr_fail(im->err, MR_ERR_INVALID, "ducklake_snapshot: a row without snapshot_id");
  qsort(im->ids, im->n, sizeof *im->ids, cmp_i64); /* the source's row order is its own */
  for (size_t r = 1; r < im->n; r++)
    if (im->ids[r] == im->ids[r - 1] || im->ids[r] < 0)
      return mr_fail(im->err, MR_ERR_INVALID, "ducklake_snapshot: snapshot %lld twice",
                     (long long)im->ids[r]);
  return read_inlined(im);
}

