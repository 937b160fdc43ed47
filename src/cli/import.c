/*
 * import.c — `moraine import SOURCE STORE`: adopts an existing DuckLake
 * catalog (a DuckDB file, SQLite or PostgreSQL) into a new store, with every
 * retained snapshot, so time travel over them works through moraine.
 *
 * How: the source is replayed as the server would have captured it, one
 * store commit per retained snapshot (import_plan.h), each commit built as
 * the captured changes of a DuckLake transaction (sql_changes) and handed
 * to the catalog layer's own prepare hook (catalog_prepare). So the rows
 * become records through the one mapping (catalog_map.c), and the store
 * gets what a native one has: a batch per snapshot, sys/head, the name and
 * delete_target directories, the changelog.
 *
 * What goes into which commit: versioned rows (begin_snapshot /
 * end_snapshot: entities, tags, column tags, schema versions, inlined rows
 * and deletes) are inserted by the commit of their begin and updated with
 * their end by the commit of their end; child rows without snapshots
 * (partition columns, file partition values, macro implementations, ...)
 * come with their parent's first version; options with the first commit;
 * the unversioned records (statistics, column mappings, files scheduled for
 * deletion) with the last, as the store keeps no history of them. An
 * inlined data table comes with the commit of the schema version that
 * minted it, its columns in the types DuckLake on PostgreSQL gives them
 * (lake_types.c), as moraine's own clients make them.
 *
 * The new store records its origin in sys/format (commit_log_batch_origin,
 * RFC 0002) and is verified (store_verify) before the command succeeds. A
 * failure removes a local store folder the import made; an object store
 * prefix is left, and the message says so.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "catalog/catalog.h"
#include "cli/cli.h"
#include "cli/import_plan.h"
#include "cli/import_source.h"
#include "cli/lake_types.h"
#include "cli/tool.h"
#include "mr_version.h"

static const char import_usage[] =
    "usage: moraine import SOURCE STORE [--extension-dir DIR] [--metadata-schema NAME] [--json]\n"
    "  Adopts the DuckLake catalog SOURCE into STORE, a new moraine store (a folder path,\n"
    "  or a file://, s3://, gs://, az:// URL; it must not exist or be empty), with every\n"
    "  retained snapshot, so time travel over them works through moraine serve.\n"
    "  SOURCE is a DuckLake attach string of spec version 1.0 (DuckLake 1.5):\n"
    "    ducklake:FILE or FILE           a DuckDB database file\n"
    "    ducklake:sqlite:FILE            a SQLite file (DuckDB's sqlite_scanner extension)\n"
    "    ducklake:postgres:CONNSTR       a PostgreSQL database (postgres_scanner)\n"
    "  --extension-dir DIR   load the scanner from DIR/<name>.duckdb_extension (DuckDB\n"
    "                        the same DuckDB version's); default: DuckDB's extension folder.\n"
    "                        Nothing is downloaded.\n"
    "  --metadata-schema NAME  the schema of the catalog's tables (DuckLake's\n"
    "                        METADATA_SCHEMA; default main, public for PostgreSQL)\n"
    "  The source is opened read-only. The store records where it came from\n"
    "  (moraine info: origin) and is verified before the command succeeds.\n";

/* ---- the source, read whole ----------------------------------------------- */

/* A parent table's rows by key (its kind's key columns, '|'-joined), with
 * the first commit of any version under that key. */
typedef struct pkey {
  char *key;
  size_t group;
} pkey;

/* One source table: its rows as batch columns, and the commit of each row. */
typedef struct stable {
  const catalog_table *tb; /* NULL for an inlined data / delete table */
  char name[96];
  import_rows rows;
  const char **types; /* the batch's column types (ncols) */
  int ibegin, iend;   /* begin_snapshot / end_snapshot columns, -1 if none */
  size_t *ins, *del;  /* per row: the commit inserting / ending it */
  size_t *ins_order, *del_order; /* rows sorted by ins / del */
  size_t nins, ndel, ci, cd;     /* rows with a commit; cursors */
  bool own_types;                /* types[i] are malloc'd (inlined tables) */
  size_t ntypes;
  char *ddl;                     /* inlined tables: their CREATE TABLE */
  size_t ddl_group;
  int64_t tid, ver; /* inlined tables */
  pkey *pidx;        /* a parent table's rows by key (parent_group) */
  size_t npidx;
  bool pidx_built;
} stable;

typedef struct importer {
  import_source *src;
  int64_t *ids; /* the retained snapshots, ascending */
  size_t n;     /* groups */
  stable *t;
  size_t nt;
  size_t rows;    /* rows put */
  size_t orphans; /* child rows whose parent is in no commit */
  mr_error *err;
} importer;

static void stable_free(stable *s) {
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

static bool cell_i64(const import_rows *r, size_t row, int col, int64_t *v) {
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

static const char *cell_text(const import_rows *r, size_t row, int col) {
  if (col < 0)
    return NULL;
  const sql_value *c = &r->values[row * r->ncols + (size_t)col];
  return c->is_null ? NULL : c->data;
}

/* Appends s as a quoted identifier. */
static void put_ident(FILE *f, const char *s) {
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
      put_ident(f, tb->cols[i].name);
      fprintf(f, " AS %s) AS VARCHAR)", tb->cols[i].type);
    } else {
      fputs("CAST(NULL AS VARCHAR)", f);
    }
    fputs(" AS ", f);
    put_ident(f, tb->cols[i].name);
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

static stable *find_table(importer *im, const char *name) {
  for (size_t i = 0; i < im->nt; i++)
    if (strcmp(im->t[i].name, name) == 0)
      return &im->t[i];
  return NULL;
}

static mr_status add_table(importer *im, stable **out) {
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
  stable *m = find_table(im, "ducklake_metadata");
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
    const char *k = cell_text(&m->rows, r, ik), *v = cell_text(&m->rows, r, iv);
    if (k && strcmp(k, "version") == 0 && cell_text(&m->rows, r, is) == NULL) {
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
  stable *sv = find_table(im, "ducklake_schema_versions");
  int it = import_rows_col(&sv->rows, "table_id"), iv = import_rows_col(&sv->rows, "schema_version"),
      ib = import_rows_col(&sv->rows, "begin_snapshot");
  int64_t best = -1, at = -1;
  for (size_t r = 0; r < sv->rows.nrows; r++) {
    int64_t t, v, b;
    if (cell_i64(&sv->rows, r, it, &t) && t == tid && cell_i64(&sv->rows, r, iv, &v) && v <= ver &&
        v >= best && cell_i64(&sv->rows, r, ib, &b)) {
      best = v;
      at = b;
    }
  }
  return at;
}

/* The DuckLake type of top-level column `name` of table tid at snapshot s. */
static const char *lake_type_of(importer *im, int64_t tid, int64_t s, const char *name) {
  stable *c = find_table(im, "ducklake_column");
  const import_rows *r = &c->rows;
  int it = import_rows_col(r, "table_id"), in = import_rows_col(r, "column_name"),
      ity = import_rows_col(r, "column_type"), ip = import_rows_col(r, "parent_column"),
      ib = import_rows_col(r, "begin_snapshot"), ie = import_rows_col(r, "end_snapshot");
  for (size_t row = 0; row < r->nrows; row++) {
    int64_t t, b, e;
    const char *n = cell_text(r, row, in);
    if (!cell_i64(r, row, it, &t) || t != tid || n == NULL || strcmp(n, name) != 0 ||
        cell_text(r, row, ip) != NULL || !cell_i64(r, row, ib, &b) || b > s)
      continue;
    if (cell_i64(r, row, ie, &e) && e <= s)
      continue;
    return cell_text(r, row, ity);
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
  rc = add_table(im, &s);
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
    const char *cn = cell_text(&cols, i, 0), *dt = cell_text(&cols, i, 1);
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
    put_ident(fd, cn);
    fprintf(fd, " %s", pg[i]);
    if (strcmp(pg[i], "pg_bytea") != 0) {
      fputs("CAST(", fs);
      put_ident(fs, cn);
      fputs(" AS VARCHAR)", fs);
    } else if (strcmp(dt, "BLOB") == 0) {
      put_ident(fs, cn); /* the bytes themselves */
    } else {
      fputs("encode(CAST(", fs); /* a string's UTF-8 bytes */
      put_ident(fs, cn);
      fputs(" AS VARCHAR))", fs);
    }
    fputs(" AS ", fs);
    put_ident(fs, cn);
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
  mr_status rc = add_table(im, &s);
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
  stable *it = find_table(im, "ducklake_inlined_data_tables");
  size_t n = it->rows.nrows;
  int itid = import_rows_col(&it->rows, "table_id"), iname = import_rows_col(&it->rows, "table_name"),
      iver = import_rows_col(&it->rows, "schema_version");
  for (size_t r = 0; r < n; r++) {
    it = find_table(im, "ducklake_inlined_data_tables"); /* add_table moves the array */
    int64_t tid, ver;
    const char *name = cell_text(&it->rows, r, iname);
    if (!cell_i64(&it->rows, r, itid, &tid) || !cell_i64(&it->rows, r, iver, &ver) || name == NULL)
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
    const char *name = cell_text(&dels, r, 0);
    char *end;
    long long tid = name ? strtoll(name + strlen("ducklake_inlined_delete_"), &end, 10) : 0;
    if (name && *end == '\0')
      rc = read_inline_delete(im, name, tid);
  }
  import_rows_free(&dels);
  return rc;
}

/* ---- commit groups ----------------------------------------------------------- */

/* Sorts the rows that have a group by it (a counting pass; groups ascend). */
static mr_status order_rows(importer *im, const size_t *grp, size_t nrows, size_t **order,
                            size_t *n) {
  *n = 0;
  *order = malloc((nrows ? nrows : 1) * sizeof **order);
  if (*order == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  for (size_t r = 0; r < nrows; r++)
    if (grp[r] != IMPORT_NO_GROUP)
      (*order)[(*n)++] = r;
  /* stable insertion by group would be O(n^2); sort pairs instead */
  size_t m = *n;
  size_t *tmp = malloc((m ? m : 1) * sizeof *tmp);
  if (tmp == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  /* bottom-up merge sort on grp[], stable (rows keep their source order) */
  size_t *src = *order, *dst = tmp;
  for (size_t w = 1; w < m; w *= 2) {
    for (size_t lo = 0; lo < m; lo += 2 * w) {
      size_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        dst[k++] = grp[src[j]] < grp[src[i]] ? src[j++] : src[i++];
      while (i < mid)
        dst[k++] = src[i++];
      while (j < hi)
        dst[k++] = src[j++];
    }
    size_t *sw = src;
    src = dst;
    dst = sw;
  }
  if (src != *order) {
    memcpy(*order, src, m * sizeof *src);
    free(src);
  } else {
    free(dst);
  }
  return MR_OK;
}

static int cmp_pkey(const void *a, const void *b) {
  return strcmp(((const pkey *)a)->key, ((const pkey *)b)->key);
}

/* The key text of row r of rows, by the columns cols[0..n). */
static char *key_text(const import_rows *rows, size_t r, const int *cols, unsigned n) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (f == NULL)
    return NULL;
  for (unsigned i = 0; i < n; i++) {
    const char *t = cell_text(rows, r, cols[i]);
    fprintf(f, "%s%s", i ? "|" : "", t ? t : "");
  }
  fclose(f);
  return out;
}

/* The key columns of kind that rows has (all of them, or false). */
static bool key_cols(const import_rows *rows, mr_key_kind kind, int *cols, unsigned *n) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  *n = ki->ncomp;
  for (unsigned i = 0; i < ki->ncomp; i++)
    if ((cols[i] = import_rows_col(rows, ki->comp[i])) < 0)
      return false;
  return true;
}

static mr_status build_pidx(importer *im, stable *p) {
  int cols[MR_KEY_MAX_COMP];
  unsigned n;
  p->pidx_built = true;
  if (!key_cols(&p->rows, p->tb->kind, cols, &n))
    return MR_OK;
  p->pidx = calloc(p->rows.nrows ? p->rows.nrows : 1, sizeof *p->pidx);
  if (p->pidx == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  for (size_t r = 0; r < p->rows.nrows; r++) {
    /* a version at no retained snapshot is written (ended) by its del commit */
    size_t g = p->ins[r] != IMPORT_NO_GROUP ? p->ins[r] : p->del[r];
    if (g == IMPORT_NO_GROUP)
      continue;
    char *k = key_text(&p->rows, r, cols, n);
    if (k == NULL)
      return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
    p->pidx[p->npidx++] = (pkey){k, g};
  }
  qsort(p->pidx, p->npidx, sizeof *p->pidx, cmp_pkey);
  return MR_OK;
}

/* The first commit of any version of the parent record a child row names;
 * IMPORT_NO_GROUP when no commit has it. An unversioned parent (statistics,
 * a column mapping) comes with the last commit, and its children too. */
static mr_status parent_group(importer *im, const stable *child, size_t row, size_t *out) {
  *out = IMPORT_NO_GROUP;
  /* the parent: the mapping's table whose rows are the records of the kind */
  const catalog_table *ptb = NULL;
  for (size_t i = 0; ptb == NULL && i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    if (t->kind == child->tb->kind && t->field == NULL)
      ptb = t;
  }
  stable *p = ptb ? find_table(im, ptb->name) : NULL;
  if (p == NULL)
    return MR_OK;
  if (p->ibegin < 0) {
    *out = im->n - 1;
    return MR_OK;
  }
  mr_status rc = p->pidx_built ? MR_OK : build_pidx(im, p);
  int cols[MR_KEY_MAX_COMP];
  unsigned n;
  if (rc || p->npidx == 0 || !key_cols(&child->rows, child->tb->kind, cols, &n))
    return rc;
  pkey want = {key_text(&child->rows, row, cols, n), 0};
  if (want.key == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  pkey *hit = bsearch(&want, p->pidx, p->npidx, sizeof *p->pidx, cmp_pkey);
  /* several versions may share the key: the earliest commit of them */
  while (hit && hit > p->pidx && strcmp(hit[-1].key, want.key) == 0)
    hit--;
  for (pkey *e = hit; e && e < p->pidx + p->npidx && strcmp(e->key, want.key) == 0; e++)
    if (e->group < *out)
      *out = e->group;
  free(want.key);
  return MR_OK;
}

/* The commits of every row of s. Versioned tables first (parents are). */
static mr_status plan_table(importer *im, stable *s, bool children) {
  size_t n = s->rows.nrows, last = im->n - 1;
  const catalog_table *tb = s->tb;
  bool child = tb && tb->role == CAT_CHILD && s->ibegin < 0;
  if (child != children)
    return MR_OK;
  s->ins = malloc((n ? n : 1) * sizeof *s->ins);
  s->del = malloc((n ? n : 1) * sizeof *s->del);
  if (s->ins == NULL || s->del == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  int isid = tb ? import_rows_col(&s->rows, "snapshot_id") : -1;
  for (size_t r = 0; r < n; r++) {
    s->ins[r] = s->del[r] = IMPORT_NO_GROUP;
    int64_t b, e, sid;
    if (s->ibegin >= 0) {
      if (!cell_i64(&s->rows, r, s->ibegin, &b))
        return mr_fail(im->err, MR_ERR_INVALID, "%s: a row without begin_snapshot", s->name);
      bool has_end = cell_i64(&s->rows, r, s->iend, &e), bad;
      import_row_groups(im->ids, im->n, b, has_end, e, &s->ins[r], &s->del[r], &bad);
      if (bad)
        return mr_fail(im->err, MR_ERR_INVALID,
                       "%s: a row of snapshots %lld..%lld, after the newest snapshot %lld or "
                       "ending before it begins",
                       s->name, (long long)b, has_end ? (long long)e : -1LL,
                       (long long)im->ids[im->n - 1]);
    } else if (tb && (tb->role == CAT_SNAPSHOT || tb->role == CAT_SNAPSHOT_CHANGES)) {
      if (!cell_i64(&s->rows, r, isid, &sid))
        return mr_fail(im->err, MR_ERR_INVALID, "%s: a row without snapshot_id", s->name);
      size_t g = import_group_of(im->ids, im->n, sid);
      if (g != IMPORT_NO_GROUP && im->ids[g] == sid)
        s->ins[r] = g; /* the changes of an expired snapshot go with it */
    } else if (tb && tb->role == CAT_OPTION) {
      s->ins[r] = 0; /* DuckLake writes its options as it creates the catalog */
    } else if (child) {
      mr_status rc = parent_group(im, s, r, &s->ins[r]);
      if (rc)
        return rc;
      if (s->ins[r] == IMPORT_NO_GROUP)
        im->orphans++;
    } else if (tb && tb->role == CAT_INLINE_TABLES) {
      int64_t tid, ver;
      char nm[96];
      if (cell_i64(&s->rows, r, import_rows_col(&s->rows, "table_id"), &tid) &&
          cell_i64(&s->rows, r, import_rows_col(&s->rows, "schema_version"), &ver)) {
        snprintf(nm, sizeof nm, "ducklake_inlined_data_%lld_%lld", (long long)tid, (long long)ver);
        stable *d = find_table(im, nm);
        s->ins[r] = d && d->ddl_group != IMPORT_NO_GROUP ? d->ddl_group : last;
      } else {
        s->ins[r] = last;
      }
    } else {
      s->ins[r] = last; /* statistics, mappings, files scheduled for deletion */
    }
  }
  /* an inlined table is created no later than its first row */
  if (s->ddl) {
    for (size_t r = 0; r < n; r++)
      if (s->ins[r] != IMPORT_NO_GROUP &&
          (s->ddl_group == IMPORT_NO_GROUP || s->ins[r] < s->ddl_group))
        s->ddl_group = s->ins[r];
    if (s->ddl_group == IMPORT_NO_GROUP)
      s->ddl_group = last;
  }
  mr_status rc = order_rows(im, s->ins, n, &s->ins_order, &s->nins);
  if (!rc)
    rc = order_rows(im, s->del, n, &s->del_order, &s->ndel);
  return rc;
}

/* ---- one commit -------------------------------------------------------------- */

typedef struct commit_build {
  sql_change_batch *b;
  size_t nb, cap;
  sql_value **vals; /* per batch, owned arrays */
} commit_build;

static void build_reset(commit_build *cb) {
  for (size_t i = 0; i < cb->nb; i++)
    free(cb->vals[i]);
  cb->nb = 0;
}

static void build_free(commit_build *cb) {
  build_reset(cb);
  free(cb->b);
  free(cb->vals);
}

static sql_change_batch *new_batch(importer *im, commit_build *cb) {
  if (cb->nb == cb->cap) {
    size_t nc = cb->cap ? 2 * cb->cap : 64;
    sql_change_batch *nb = realloc(cb->b, nc * sizeof *nb);
    if (nb)
      cb->b = nb;
    sql_value **nv = nb ? realloc(cb->vals, nc * sizeof *nv) : NULL;
    if (nv)
      cb->vals = nv;
    if (nb == NULL || nv == NULL) {
      mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
      return NULL;
    }
    cb->cap = nc;
  }
  sql_change_batch *b = &cb->b[cb->nb];
  memset(b, 0, sizeof *b);
  cb->vals[cb->nb++] = NULL;
  b->schema = "public";
  return b;
}

/* A row batch of s with the rows order[from..to); insert rows have their
 * end_snapshot blanked (it is set by the later commit ending them). */
static mr_status rows_batch(importer *im, commit_build *cb, stable *s, sql_change_op op,
                            const size_t *order, size_t from, size_t to) {
  if (to <= from)
    return MR_OK;
  sql_change_batch *b = new_batch(im, cb);
  if (b == NULL)
    return im->err->code;
  size_t nc = s->rows.ncols, nr = to - from;
  sql_value *v = malloc(nc * nr * sizeof *v);
  if (v == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  cb->vals[cb->nb - 1] = v;
  for (size_t i = 0; i < nr; i++) {
    memcpy(&v[i * nc], &s->rows.values[order[from + i] * nc], nc * sizeof *v);
    if (op == SQL_CHANGE_INSERT && s->iend >= 0)
      v[i * nc + (size_t)s->iend] = (sql_value){NULL, 0, true};
  }
  b->op = op;
  b->table = s->name;
  b->ncols = nc;
  b->col_names = (const char *const *)s->rows.names;
  b->col_types = s->types;
  b->nrows = nr;
  b->values = v;
  im->rows += nr;
  return MR_OK;
}

/* The batches of commit g: its snapshot, the inlined tables it creates, then
 * every table's ends and inserts. */
static mr_status build_commit(importer *im, commit_build *cb, size_t g) {
  build_reset(cb);
  mr_status rc = MR_OK;
  /* the snapshot rows first, as DuckLake writes them */
  for (int pass = 0; pass < 3 && !rc; pass++) {
    for (size_t i = 0; !rc && i < im->nt; i++) {
      stable *s = &im->t[i];
      bool snap = s->tb && (s->tb->role == CAT_SNAPSHOT || s->tb->role == CAT_SNAPSHOT_CHANGES);
      if (pass == 1 && s->ddl && s->ddl_group == g) {
        sql_change_batch *b = new_batch(im, cb);
        if (b == NULL)
          return im->err->code;
        b->op = SQL_CHANGE_DDL;
        b->sql = s->ddl;
        b->table = s->name;
      }
      if ((pass == 0) != snap || pass == 1)
        continue;
      size_t from = s->cd;
      while (s->cd < s->ndel && s->del[s->del_order[s->cd]] == g)
        s->cd++;
      rc = rows_batch(im, cb, s, SQL_CHANGE_UPDATE, s->del_order, from, s->cd);
      from = s->ci;
      while (!rc && s->ci < s->nins && s->ins[s->ins_order[s->ci]] == g)
        s->ci++;
      if (!rc)
        rc = rows_batch(im, cb, s, SQL_CHANGE_INSERT, s->ins_order, from, s->ci);
    }
  }
  return rc;
}

/* ---- the import -------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static mr_status read_source(importer *im, const char *source) {
  for (size_t i = 0; i < catalog_table_count(); i++) {
    stable *s;
    mr_status rc = add_table(im, &s);
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
  stable *snaps = find_table(im, "ducklake_snapshot");
  if (snaps == NULL || snaps->rows.nrows == 0)
    return mr_fail(im->err, MR_ERR_INVALID, "%s has no snapshot", source);
  im->n = snaps->rows.nrows;
  im->ids = malloc(im->n * sizeof *im->ids);
  if (im->ids == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  int isid = import_rows_col(&snaps->rows, "snapshot_id");
  for (size_t r = 0; r < im->n; r++)
    if (!cell_i64(&snaps->rows, r, isid, &im->ids[r]))
      return mr_fail(im->err, MR_ERR_INVALID, "ducklake_snapshot: a row without snapshot_id");
  qsort(im->ids, im->n, sizeof *im->ids, cmp_i64); /* the source's row order is its own */
  for (size_t r = 1; r < im->n; r++)
    if (im->ids[r] == im->ids[r - 1] || im->ids[r] < 0)
      return mr_fail(im->err, MR_ERR_INVALID, "ducklake_snapshot: snapshot %lld twice",
                     (long long)im->ids[r]);
  mr_status rc = read_inlined(im);
  for (int children = 0; !rc && children < 2; children++)
    for (size_t i = 0; !rc && i < im->nt; i++)
      rc = plan_table(im, &im->t[i], children == 1);
  return rc;
}

static void importer_free(importer *im) {
  for (size_t i = 0; i < im->nt; i++)
    stable_free(&im->t[i]);
  free(im->t);
  free(im->ids);
}

/* Replays the commits into st. */
static mr_status replay(importer *im, store *st, tool_progress *pr) {
  sql_engine_options eo = {.database_path = NULL, .server_version = "moraine import " MORAINE_VERSION};
  sql_engine *e = NULL;
  sql_error se;
  memset(&se, 0, sizeof se);
  /* the catalog layer's load-back check casts inlined values in an engine */
  if (sql_engine_open(&eo, &e, &se) != MR_OK)
    return mr_fail(im->err, se.base.code ? se.base.code : MR_ERR_IO, "%s", se.base.msg);
  catalog *c = NULL;
  mr_status rc = catalog_open(st, e, &c, im->err);
  commit_build cb = {0};
  for (size_t g = 0; !rc && g < im->n; g++) {
    tool_progress_note(pr, "snapshot %lld (%zu of %zu)", (long long)im->ids[g], g + 1, im->n);
    rc = build_commit(im, &cb, g);
    if (rc)
      break;
    sql_changes ch = {.nbatches = cb.nb, .batches = cb.b, .begin_seq = 0, .commit_seq = 0};
    memset(&se, 0, sizeof se);
    if (catalog_prepare(c, &ch, &se) != MR_OK)
      rc = mr_fail(im->err, se.base.code ? se.base.code : MR_ERR_IO, "snapshot %lld: %s",
                   (long long)im->ids[g], se.base.msg);
  }
  build_free(&cb);
  catalog_free(c);
  sql_engine_close(e);
  return rc;
}

typedef struct verify_count {
  uint64_t problems;
  char first[512];
} verify_count;

static mr_status on_problem(void *ctx, const store_problem *p, mr_error *err) {
  verify_count *v = ctx;
  if (v->problems++ == 0)
    snprintf(v->first, sizeof v->first, "%s %s: %s", store_check_text(p->check), p->key, p->what);
  return MR_OK;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path);
}

/* The folder of a local store (a path, or file://PATH), else NULL. */
static const char *local_folder(const char *where) {
  if (strncmp(where, "file://", 7) == 0)
    return where + 7;
  return strstr(where, "://") ? NULL : where;
}

static bool folder_empty(const char *path, bool *exists) {
  DIR *d = opendir(path);
  *exists = d != NULL || errno != ENOENT;
  if (d == NULL)
    return errno == ENOENT;
  struct dirent *de;
  bool empty = true;
  while (empty && (de = readdir(d)) != NULL)
    empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
  closedir(d);
  return empty;
}

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "moraine: import: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return TOOL_EXIT_FAILED;
}

/* Refuses a STORE that holds anything (a local folder with entries, or an
 * object store prefix a reader opens). */
static int check_new_store(const char *where, const char *url) {
  const char *folder = local_folder(where);
  if (folder) {
    bool exists;
    if (!folder_empty(folder, &exists))
      return fail("%s exists and is not empty; import makes a new store%s", folder, "");
    return TOOL_EXIT_OK;
  }
  store_options o = {.read_only = true, .deadline_ms = TOOL_OPEN_DEADLINE_MS};
  store *st = NULL;
  mr_error err;
  mr_status rc = store_open(url, &o, &st, &err);
  if (rc == MR_OK) {
    (void)store_close(st, NULL);
    return fail("%s holds a store already; import makes a new store%s", url, "");
  }
  if (rc != MR_ERR_NOT_FOUND)
    return fail("%s: %s", url, err.msg);
  return TOOL_EXIT_OK;
}

static int run_import(const char *source, const char *where, const char *ext_dir,
                      const char *schema, bool json) {
  char url[4096];
  snprintf(url, sizeof url, strstr(where, "://") ? "%s" : "file://%s", where);
  import_spec spec;
  mr_error err;
  mr_error_clear(&err);
  if (import_spec_parse(source, &spec, &err) != MR_OK)
    return fail("%s%s", err.msg, "");
  struct stat sb;
  if (spec.kind != IMPORT_POSTGRES && stat(spec.target, &sb) != 0)
    return fail("%s: %s", spec.target, strerror(errno));
  int status = check_new_store(where, url);
  if (status)
    return status;
  const char *folder = local_folder(where);
  bool made_folder = folder && access(folder, F_OK) != 0;

  tool_progress pr;
  tool_progress_init(&pr, "import");
  tool_progress_start(&pr, "reading %s", spec.origin);
  importer im = {.err = &err};
  mr_status rc = import_source_open(&spec, ext_dir, schema, &im.src, &err);
  if (!rc)
    rc = read_source(&im, spec.origin);
  import_source_close(im.src);
  im.src = NULL;
  store *st = NULL;
  if (!rc) {
    store_options o = {.origin = spec.origin};
    rc = store_open(url, &o, &st, &err);
    if (!rc && store_get_head(st).batch_count != 0) /* someone else's, made meanwhile */
      rc = mr_fail(&err, MR_ERR_INVALID, "%s holds a store already; import makes a new store", url);
  }
  if (!rc)
    rc = replay(&im, st, &pr);
  verify_count vc = {0};
  store_verify_result vr;
  if (!rc) {
    tool_progress_start(&pr, "verifying the new store");
    store_verify_hooks h = {.problem = on_problem, .ctx = &vc};
    rc = store_verify(st, 0, &h, &vr, &err);
    if (!rc && vc.problems)
      rc = mr_fail(&err, MR_ERR_CORRUPTION, "the new store does not verify (%llu problems; %s)",
                   (unsigned long long)vc.problems, vc.first);
  }
  tool_progress_done(&pr);
  store_head head = st ? store_get_head(st) : (store_head){0, 0};
  mr_error cerr;
  if (st && store_close(st, &cerr) != MR_OK && !rc)
    rc = mr_fail(&err, cerr.code, "closing the store: %s", cerr.msg);
  if (rc) {
    char why[MR_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err.msg);
    for (char *p = why; *p; p++)
      if (*p == '\n')
        *p = ' ';
    if (folder && st) { /* leave nothing half-made */
      if (made_folder)
        nftw(folder, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
      else { /* the folder was there, empty: empty it again */
        DIR *d = opendir(folder);
        struct dirent *de;
        char path[4300];
        while (d && (de = readdir(d)) != NULL) {
          if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
          snprintf(path, sizeof path, "%s/%s", folder, de->d_name);
          nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
        if (d)
          closedir(d);
      }
    } else if (st) {
      fprintf(stderr, "moraine: import: %s (the partial store at %s is left: delete it before "
              "importing again)\n", why, url);
      importer_free(&im);
      return TOOL_EXIT_FAILED;
    }
    importer_free(&im);
    return fail("%s%s", why, "");
  }
  if (json) {
    printf("{\"origin\": ");
    tool_json_str(stdout, spec.origin);
    printf(", \"store\": ");
    tool_json_str(stdout, url);
    printf(", \"snapshots\": %zu, \"first_snapshot\": %lld, \"head_snapshot\": %llu, "
           "\"batch_count\": %llu, \"rows\": %zu, \"keys\": %llu, \"orphans\": %zu}\n",
           im.n, (long long)im.ids[0], (unsigned long long)head.snapshot_id,
           (unsigned long long)head.batch_count, im.rows, (unsigned long long)vr.keys, im.orphans);
  } else {
    printf("imported %zu snapshots (%lld..%llu) and %zu catalog rows from %s into %s "
           "(%llu keys, verified clean)\n",
           im.n, (long long)im.ids[0], (unsigned long long)head.snapshot_id, im.rows, spec.origin,
           url, (unsigned long long)vr.keys);
    if (im.orphans)
      printf("left out %zu child rows whose parent is at no retained snapshot\n", im.orphans);
  }
  importer_free(&im);
  return fflush(stdout) == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
}

int cli_import(int argc, char **argv) {
  const char *source = NULL, *where = NULL, *ext_dir = NULL, *schema = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(import_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--extension-dir") == 0 || strcmp(argv[i], "--metadata-schema") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "moraine: import: %s takes a value\n", argv[i]);
        return TOOL_EXIT_USAGE;
      }
      *(argv[i][2] == 'e' ? &ext_dir : &schema) = argv[i + 1];
      i++;
    } else if (argv[i][0] != '-' && source == NULL) {
      source = argv[i];
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: import: unexpected '%s' (see moraine import --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (source == NULL || where == NULL) {
    fprintf(stderr, "moraine: import: %s (see moraine import --help)\n",
            source == NULL ? "import what?" : "into which store?");
    return TOOL_EXIT_USAGE;
  }
  return run_import(source, where, ext_dir, schema, json);
}
