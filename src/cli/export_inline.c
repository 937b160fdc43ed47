/*
 * export_inline.c — gives the inlined data tables of an exported catalog
 * the types DuckLake uses for them in a DuckDB file.
 *
 * Why: moraine's clients are DuckLake on PostgreSQL, which inlines rows
 * into tables of PostgreSQL-friendly types — dates, timestamps, nested and
 * 128-bit values as text, VARCHAR and BLOB as bytea (pg_bytea in the
 * engine) — and the store keeps those tables as the client made them. A
 * DuckDB-file catalog holds inlined rows in the columns' own DuckDB types,
 * and DuckLake's reader there fails on the text forms. So each
 * ducklake_inlined_data_T_V is rebuilt with the DuckDB type of each column
 * (from table T's ducklake_column rows at the snapshot that minted schema
 * version V), its values cast into it.
 *
 * The DuckLake type names -> DuckDB types table is lake_types.c's (the one
 * statement of that part of DuckLake's format).
 */
#include "cli/export_inline.h"
#include "cli/lake_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One ducklake_column row of the table at the minting snapshot. */
typedef struct col {
  int64_t id, order, parent;
  bool has_parent;
  char *name, *type;
} col;

typedef struct cols {
  col *c;
  size_t n, cap;
} cols;

static void cols_free(cols *cs) {
  for (size_t i = 0; i < cs->n; i++) {
    free(cs->c[i].name);
    free(cs->c[i].type);
  }
  free(cs->c);
  memset(cs, 0, sizeof *cs);
}

static mr_status on_column(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  cols *cs = ctx;
  const Moraine__V1__Column *c = (const Moraine__V1__Column *)m;
  if (cs->n == cs->cap) {
    size_t cap = cs->cap ? 2 * cs->cap : 16;
    col *n = realloc(cs->c, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "out of memory");
    cs->c = n;
    cs->cap = cap;
  }
  col *e = &cs->c[cs->n];
  memset(e, 0, sizeof *e);
  e->id = c->column_id;
  e->order = c->has_column_order ? c->column_order : c->column_id;
  e->has_parent = c->has_parent_column;
  e->parent = c->parent_column;
  e->name = strdup(c->column_name ? c->column_name : "");
  e->type = strdup(c->column_type ? c->column_type : "");
  cs->n++;
  if (e->name == NULL || e->type == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  return MR_OK;
}

static int by_order(const void *a, const void *b) {
  const col *x = a, *y = b;
  return (x->order > y->order) - (x->order < y->order);
}

static void put_ident(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Writes the DuckDB type of column c (children from the same table) to f. */
static mr_status put_type(FILE *f, const cols *cs, const col *c, int depth, mr_error *err) {
  if (depth > 64)
    return mr_fail(err, MR_ERR_CORRUPTION, "column %lld nests too deep", (long long)c->id);
  bool list = strcmp(c->type, "list") == 0, map = strcmp(c->type, "map") == 0;
  if (list || map || strcmp(c->type, "struct") == 0) {
    fputs(list ? "" : map ? "MAP(" : "STRUCT(", f);
    size_t seen = 0;
    for (size_t i = 0; i < cs->n; i++) {
      const col *ch = &cs->c[i];
      if (!ch->has_parent || ch->parent != c->id)
        continue;
      if (seen++)
        fputs(", ", f);
      if (!list && !map) {
        put_ident(f, ch->name);
        fputc(' ', f);
      }
      mr_status rc = put_type(f, cs, ch, depth + 1, err);
      if (rc)
        return rc;
    }
    if (seen != (list ? 1u : map ? 2u : seen) || seen == 0)
      return mr_fail(err, MR_ERR_CORRUPTION, "column %lld (%s) has %zu child columns",
                     (long long)c->id, c->type, seen);
    fputs(list ? "[]" : ")", f);
    return MR_OK;
  }
  if (strncmp(c->type, "decimal(", 8) == 0) {
    fprintf(f, "DECIMAL%s", c->type + 7);
    return MR_OK;
  }
  const char *duck = lake_type_duckdb(c->type);
  if (duck) {
    fputs(duck, f);
    return MR_OK;
  }
  return mr_fail(err, MR_ERR_INVALID,
                 "column %s has the DuckLake type '%s', which export cannot map", c->name, c->type);
}

/* ---- the minting snapshot of (table, schema version) ----------------------- */

typedef struct minted {
  int64_t version;
  bool found;
  uint64_t begin; /* the newest begin_snapshot whose schema_version <= version */
  int64_t best;
} minted;

static mr_status on_schema_version(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                   mr_error *err) {
  minted *mt = ctx;
  const Moraine__V1__SchemaVersion *sv = (const Moraine__V1__SchemaVersion *)m;
  if (sv->has_schema_version && sv->schema_version <= mt->version &&
      (!mt->found || sv->schema_version >= mt->best)) {
    mt->found = true;
    mt->best = sv->schema_version;
    mt->begin = (uint64_t)sv->begin_snapshot;
  }
  return MR_OK;
}

/* ---- one table --------------------------------------------------------------- */

typedef struct rebuild_ctx {
  store *st;
  sql_engine *e;
} rebuild_ctx;

static mr_status engine_exec(sql_engine *e, const char *sql, mr_error *err) {
  sql_error se;
  memset(&se, 0, sizeof se);
  if (sql_engine_exec(e, sql, &se) != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "%s: %s", sql, se.base.msg);
  return MR_OK;
}

/* The SELECT list item turning stored column ic (of the type the client
 * made it) into column c's DuckDB type. */
static mr_status put_item(FILE *f, const cols *cs, const col *c,
                          const Moraine__V1__InlineColumn *ic, mr_error *err) {
  char *type = NULL;
  size_t len = 0;
  FILE *t = open_memstream(&type, &len);
  if (t == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  mr_status rc = put_type(t, cs, c, 0, err);
  fclose(t);
  if (!rc) {
    bool bytea = strcasecmp(ic->type, "pg_bytea") == 0;
    bool text = strcmp(type, "VARCHAR") == 0 || strcmp(type, "JSON") == 0;
    if (bytea && text) /* the bytes of the text, checked as UTF-8 */
      fputs("CAST(decode(CAST(", f);
    else
      fputs("CAST(", f);
    put_ident(f, ic->name);
    if (bytea && text)
      fprintf(f, " AS BLOB)) AS %s) AS ", type);
    else
      fprintf(f, " AS %s) AS ", type);
    put_ident(f, ic->name);
  }
  free(type);
  return rc;
}

static mr_status rebuild(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  rebuild_ctx *r = ctx;
  const Moraine__V1__InlineDataTable *it = (const Moraine__V1__InlineDataTable *)m;
  minted mt = {.version = it->schema_version};
  mr_status rc = store_read_kind_at(r->st, MR_KK_SCHEMA_VERSION, UINT64_MAX, (uint64_t)it->table_id,
                                    on_schema_version, &mt, err);
  if (rc)
    return rc;
  if (!mt.found)
    return mr_fail(err, MR_ERR_CORRUPTION, "table %lld has no schema version at or before %lld",
                   (long long)it->table_id, (long long)it->schema_version);
  cols cs = {0};
  rc = store_read_kind_at(r->st, MR_KK_COLUMN, mt.begin, (uint64_t)it->table_id, on_column, &cs,
                          err);
  if (cs.n)
    qsort(cs.c, cs.n, sizeof *cs.c, by_order);
  char name[96], *sql = NULL;
  size_t len = 0;
  snprintf(name, sizeof name, "ducklake_inlined_data_%lld_%lld", (long long)it->table_id,
           (long long)it->schema_version);
  FILE *f = rc ? NULL : open_memstream(&sql, &len);
  if (!rc && f == NULL)
    rc = mr_fail(err, MR_ERR_NOMEM, "out of memory");
  if (!rc) {
    fprintf(f, "CREATE TABLE main.%s_native AS SELECT row_id, begin_snapshot, end_snapshot", name);
    for (size_t i = 0; !rc && i < it->n_column; i++) {
      const col *c = NULL;
      for (size_t j = 0; j < cs.n && c == NULL; j++)
        if (!cs.c[j].has_parent && strcmp(cs.c[j].name, it->column[i]->name) == 0)
          c = &cs.c[j];
      if (c == NULL) {
        rc = mr_fail(err, MR_ERR_CORRUPTION,
                     "%s: column %s is not a column of table %lld at snapshot %llu", name,
                     it->column[i]->name, (long long)it->table_id, (unsigned long long)mt.begin);
        break;
      }
      fputs(", ", f);
      rc = put_item(f, &cs, c, it->column[i], err);
    }
    fprintf(f, " FROM main.%s", name);
    fclose(f);
  }
  cols_free(&cs);
  if (!rc)
    rc = engine_exec(r->e, sql, err);
  free(sql);
  char step[256];
  if (!rc) {
    snprintf(step, sizeof step, "DROP TABLE main.%s", name);
    rc = engine_exec(r->e, step, err);
  }
  if (!rc) {
    snprintf(step, sizeof step, "ALTER TABLE main.%s_native RENAME TO %s", name, name);
    rc = engine_exec(r->e, step, err);
  }
  return rc ? mr_error_wrap(err, "inlined rows of table %lld", (long long)it->table_id) : MR_OK;
}

mr_status export_native_inline(store *st, sql_engine *e, mr_error *err) {
  rebuild_ctx r = {st, e};
  return store_read_kind_at(st, MR_KK_INLINE_TABLE, UINT64_MAX, 0, rebuild, &r, err);
}
