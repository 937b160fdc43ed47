/*
 * sql_load.c — the bulk pre-load of sql.h: sql_engine_load_rows puts rows
 * the catalog store kept back into a table of the embedded DuckDB.
 *
 * A cell is an sql_value: DuckDB's text form of the value (what
 * CAST(v AS VARCHAR) gave when it was captured) or, for BLOB-backed columns
 * (BLOB, pg_bytea), the raw bytes. Each value must come back exactly, so a
 * column is filled one of two ways:
 *
 *   - direct: VARCHAR, BLOB-backed, BOOLEAN and the integer types. Their
 *     text is canonical (what DuckDB's cast printed: decimal digits, true /
 *     false), so moraine parses it itself and appends the typed value; a
 *     text it does not parse sends the whole call to the staged path below.
 *   - cast: every other type goes through DuckDB's VARCHAR cast, the inverse
 *     of the cast that produced its text (INTERVAL, HUGEINT, DECIMAL,
 *     DOUBLE, temporal types, infinities, nested types, ...).
 *
 * The fast path makes no SQL statement for a table of direct columns only
 * (one appender on the target); a table with cast columns takes one query
 * appender running INSERT INTO target SELECT c0, c1, ... FROM appended_data
 * (the INSERT binds the cast from VARCHAR to each column's type; a type
 * holding a UNION is DESCRIBEd and cast explicitly, see add_moved). The
 * staged path (used when the fast one fails, to name the culprit, and for
 * text the direct parse refuses) is the original one: a VARCHAR / BLOB
 * staging temp table, then INSERT ... SELECT CAST(...) FROM it.
 *
 * Invariants: the admin lock is held for the whole call; the staging table
 * never outlives it; a failed call leaves the target without any of the
 * rows (the direct append is flushed only after every cell parsed; the
 * INSERTs are one statement each, or run in one transaction when the
 * appender may flush more than once) and names the column and a value
 * that did not load.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"
#include "sql/sql_state.h"

#define STAGE "temp.main.__moraine_load"

/* Rows below this go to an appender that flushes exactly once. */
enum { SINGLE_FLUSH_ROWS = 100000 };

/* One target column. */
typedef struct load_col {
  char *name; /* as DuckDB names it */
  char *type; /* DuckDB's spelling (DESCRIBE's column_type) */
  bool blob;  /* BLOB-backed: staged and moved as raw bytes */
  bool text;  /* plain VARCHAR: moved without a cast */
} load_col;

static void cols_free(load_col *cols, size_t n) {
  for (size_t i = 0; cols && i < n; i++) {
    free(cols[i].name);
    free(cols[i].type);
  }
  free(cols);
}

static mr_status oom(sql_error *err) {
  return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
}

/* DESCRIBE target (cheap: it binds this one table, whatever the number of
 * tables) into cols[0..ncols): each type spelling, and each name too when
 * with_names. A column count other than ncols is an internal error. */
static mr_status read_describe(duckdb_connection con, const char *target, load_col *cols,
                               size_t ncols, bool with_names, sql_error *err) {
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "DESCRIBE %s", target);
  char *sql = sql_strbuf_take(&b);
  if (sql == NULL)
    return oom(err);
  duckdb_result r;
  mr_status rc = MR_OK;
  if (duckdb_query(con, sql, &r) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  } else if (duckdb_row_count(&r) != ncols) {
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                  "%s: DESCRIBE gave %llu columns, not %zu", target,
                  (unsigned long long)duckdb_row_count(&r), ncols);
  } else {
    for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
      char *type = duckdb_value_varchar(&r, 1, i);
      cols[i].type = sql_strdup(type ? type : "VARCHAR");
      duckdb_free(type);
      if (with_names) {
        char *name = duckdb_value_varchar(&r, 0, i);
        cols[i].name = sql_strdup(name ? name : "?");
        duckdb_free(name);
      }
      if (cols[i].type == NULL || (with_names && cols[i].name == NULL))
        rc = oom(err);
    }
  }
  duckdb_destroy_result(&r);
  free(sql);
  return rc;
}

/* The target's columns: BLOB-ness from the bound types (pg_bytea is an
 * alias of BLOB), names and type spellings from DESCRIBE (cheap: it binds
 * this one table, whatever the number of tables). */
static mr_status describe(duckdb_connection con, const char *target, load_col **out, size_t *n,
                          sql_error *err) {
  *out = NULL;
  *n = 0;
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "SELECT * FROM %s LIMIT 0", target);
  char *probe = sql_strbuf_take(&b);
  if (probe == NULL)
    return oom(err);
  mr_status rc = MR_OK;
  duckdb_prepared_statement ps = NULL;
  load_col *cols = NULL;
  size_t ncols = 0;
  if (duckdb_prepare(con, probe, &ps) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_prepare_error(ps));
  } else {
    ncols = duckdb_prepared_statement_column_count(ps);
    cols = calloc(ncols ? ncols : 1, sizeof *cols);
    if (cols == NULL)
      rc = oom(err);
    for (size_t i = 0; rc == MR_OK && i < ncols; i++)
      cols[i].blob = duckdb_prepared_statement_column_type(ps, i) == DUCKDB_TYPE_BLOB;
  }
  duckdb_destroy_prepare(&ps);
  free(probe);
  if (rc == MR_OK)
    rc = read_describe(con, target, cols, ncols, true, err);
  for (size_t i = 0; rc == MR_OK && i < ncols; i++)
    cols[i].text = strcmp(cols[i].type, "VARCHAR") == 0;
  if (rc) {
    cols_free(cols, ncols);
    return rc;
  }
  *out = cols;
  *n = ncols;
  return MR_OK;
}

/* CREATE OR REPLACE TEMP TABLE STAGE(c0 VARCHAR, c1 BLOB, ...). */
static mr_status create_stage(duckdb_connection con, const load_col *cols, size_t n,
                              sql_error *err) {
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "CREATE OR REPLACE TEMP TABLE __moraine_load(");
  for (size_t i = 0; i < n; i++)
    sql_strbuf_addf(&b, "%sc%zu %s", i ? ", " : "", i, cols[i].blob ? "BLOB" : "VARCHAR");
  sql_strbuf_add(&b, ")");
  char *sql = sql_strbuf_take(&b);
  mr_status rc = sql ? sql_exec(con, sql, err) : oom(err);
  free(sql);
  return rc;
}

static mr_status append_rows(duckdb_connection con, const load_col *cols, size_t ncols,
                             size_t nrows, const sql_value *values, sql_error *err) {
  duckdb_appender app = NULL;
  mr_status rc = MR_OK;
  if (duckdb_appender_create_ext(con, "temp", "main", "__moraine_load", &app) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_appender_error(app));
  for (size_t r = 0; rc == MR_OK && r < nrows; r++) {
    for (size_t c = 0; rc == MR_OK && c < ncols; c++) {
      const sql_value *v = &values[r * ncols + c];
      duckdb_state st = v->is_null     ? duckdb_append_null(app)
                        : cols[c].blob ? duckdb_append_blob(app, v->data, v->len)
                                       : duckdb_append_varchar_length(app, v->data, v->len);
      if (st != DuckDBSuccess)
        rc = sql_fail_duckdb(err, duckdb_appender_error(app));
    }
    if (rc == MR_OK && duckdb_appender_end_row(app) != DuckDBSuccess)
      rc = sql_fail_duckdb(err, duckdb_appender_error(app));
  }
  if (rc == MR_OK && duckdb_appender_flush(app) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_appender_error(app));
  if (app)
    duckdb_appender_destroy(&app);
  return rc;
}

/* The select list moving staged column i into its target column. A NULL
 * stays NULL: DuckDB casts a NULL VARCHAR to a non-NULL UNION (whose VARCHAR
 * member is NULL), so types holding a UNION get an explicit guard. */
static void add_moved(sql_strbuf *b, const load_col *col, size_t i) {
  if (col->blob || col->text)
    sql_strbuf_addf(b, "c%zu", i);
  else if (strstr(col->type, "UNION("))
    sql_strbuf_addf(b, "CASE WHEN c%zu IS NULL THEN NULL ELSE CAST(c%zu AS %s) END", i, i,
                    col->type);
  else
    sql_strbuf_addf(b, "CAST(c%zu AS %s)", i, col->type);
}

/* After a failed INSERT: the first column holding a value its cast refuses,
 * and that value, added to err's message (best effort: err is kept as is
 * when no column is found). */
static void name_culprit(duckdb_connection con, const char *target, const load_col *cols, size_t n,
                         sql_error *err) {
  for (size_t i = 0; i < n; i++) {
    if (cols[i].blob || cols[i].text)
      continue;
    sql_strbuf b = {0};
    sql_strbuf_addf(&b,
                    "SELECT c%zu FROM " STAGE " WHERE c%zu IS NOT NULL AND TRY_CAST(c%zu AS %s) "
                    "IS NULL LIMIT 1",
                    i, i, i, cols[i].type);
    char *sql = sql_strbuf_take(&b);
    duckdb_result r;
    if (sql == NULL)
      return;
    bool found = false;
    if (duckdb_query(con, sql, &r) == DuckDBSuccess && duckdb_row_count(&r) > 0) {
      char *v = duckdb_value_varchar(&r, 0, 0);
      char cause[sizeof err->base.msg], state[sizeof err->sqlstate];
      snprintf(cause, sizeof cause, "%s", err->base.msg);
      snprintf(state, sizeof state, "%s", err->sqlstate);
      sql_fail(err, err->base.code, state,
               "%s column %s (%s) cannot take the stored value '%s': %s", target, cols[i].name,
               cols[i].type, v ? v : "?", cause);
      duckdb_free(v);
      found = true;
    }
    duckdb_destroy_result(&r);
    free(sql);
    if (found)
      return;
  }
}

/* INSERT INTO target SELECT <moved columns> FROM STAGE. */
static mr_status move_rows(duckdb_connection con, const char *target, const load_col *cols,
                           size_t n, sql_error *err) {
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "INSERT INTO %s SELECT ", target);
  for (size_t i = 0; i < n; i++) {
    if (i)
      sql_strbuf_add(&b, ", ");
    add_moved(&b, &cols[i], i);
  }
  sql_strbuf_add(&b, " FROM " STAGE);
  char *sql = sql_strbuf_take(&b);
  if (sql == NULL)
    return oom(err);
  mr_status rc = sql_exec(con, sql, err);
  free(sql);
  if (rc && err)
    name_culprit(con, target, cols, n, err);
  return rc;
}

/* ---- the fast path ------------------------------------------------------ */

/* How the fast path fills a column (see the header). */
typedef enum fill_kind {
  FILL_CAST,     /* through DuckDB's VARCHAR cast */
  FILL_TEXT,     /* VARCHAR: the text itself */
  FILL_BLOB,     /* BLOB-backed: the raw bytes */
  FILL_BOOL,     /* "true" / "false" */
  FILL_SIGNED,   /* TINYINT .. BIGINT: decimal digits */
  FILL_UNSIGNED, /* UTINYINT .. UBIGINT: decimal digits */
} fill_kind;

typedef struct fill_col {
  fill_kind kind;
  duckdb_type id; /* the column's type id, for the typed append */
  bool bytea;     /* pg_bytea: BLOB-backed, but only its registered cast
                     takes a BLOB into it (the appender has no such cast) */
  bool has_union; /* the type holds a UNION somewhere: see add_moved */
  int64_t min, max;
  uint64_t umax;
} fill_col;

/* Does t hold a UNION, at the top or nested in a LIST, ARRAY, MAP or
 * STRUCT? */
static bool holds_union(duckdb_logical_type t) {
  duckdb_logical_type kids[2] = {NULL, NULL};
  bool found = false;
  switch (duckdb_get_type_id(t)) {
  case DUCKDB_TYPE_UNION:
    return true;
  case DUCKDB_TYPE_LIST:
    kids[0] = duckdb_list_type_child_type(t);
    break;
  case DUCKDB_TYPE_ARRAY:
    kids[0] = duckdb_array_type_child_type(t);
    break;
  case DUCKDB_TYPE_MAP:
    kids[0] = duckdb_map_type_key_type(t);
    kids[1] = duckdb_map_type_value_type(t);
    break;
  case DUCKDB_TYPE_STRUCT:
    for (idx_t i = 0; !found && i < duckdb_struct_type_child_count(t); i++) {
      duckdb_logical_type k = duckdb_struct_type_child_type(t, i);
      found = holds_union(k);
      duckdb_destroy_logical_type(&k);
    }
    return found;
  default:
    return false;
  }
  for (size_t i = 0; i < 2; i++)
    if (kids[i]) {
      found = found || holds_union(kids[i]);
      duckdb_destroy_logical_type(&kids[i]);
    }
  return found;
}

/* The fill of a column of type t. An aliased type other than pg_bytea
 * (JSON is an alias of VARCHAR) takes the cast: its cast may check or
 * normalize what plain VARCHAR would take as is. */
static fill_col classify(duckdb_logical_type t) {
  fill_col c = {FILL_CAST, duckdb_get_type_id(t), false, holds_union(t), 0, 0, 0};
  char *alias = duckdb_logical_type_get_alias(t);
  c.bytea = alias && strcmp(alias, "pg_bytea") == 0;
  bool aliased = alias != NULL;
  duckdb_free(alias);
  if (aliased && !c.bytea)
    return c;
  switch (c.id) {
  case DUCKDB_TYPE_VARCHAR:
    c.kind = FILL_TEXT;
    break;
  case DUCKDB_TYPE_BLOB:
    c.kind = FILL_BLOB;
    break;
  case DUCKDB_TYPE_BOOLEAN:
    c.kind = FILL_BOOL;
    break;
  case DUCKDB_TYPE_TINYINT:
    c = (fill_col){FILL_SIGNED, c.id, false, false, INT8_MIN, INT8_MAX, 0};
    break;
  case DUCKDB_TYPE_SMALLINT:
    c = (fill_col){FILL_SIGNED, c.id, false, false, INT16_MIN, INT16_MAX, 0};
    break;
  case DUCKDB_TYPE_INTEGER:
    c = (fill_col){FILL_SIGNED, c.id, false, false, INT32_MIN, INT32_MAX, 0};
    break;
  case DUCKDB_TYPE_BIGINT:
    c = (fill_col){FILL_SIGNED, c.id, false, false, INT64_MIN, INT64_MAX, 0};
    break;
  case DUCKDB_TYPE_UTINYINT:
    c = (fill_col){FILL_UNSIGNED, c.id, false, false, 0, 0, UINT8_MAX};
    break;
  case DUCKDB_TYPE_USMALLINT:
    c = (fill_col){FILL_UNSIGNED, c.id, false, false, 0, 0, UINT16_MAX};
    break;
  case DUCKDB_TYPE_UINTEGER:
    c = (fill_col){FILL_UNSIGNED, c.id, false, false, 0, 0, UINT32_MAX};
    break;
  case DUCKDB_TYPE_UBIGINT:
    c = (fill_col){FILL_UNSIGNED, c.id, false, false, 0, 0, UINT64_MAX};
    break;
  default:
    break;
  }
  return c;
}

/* A parsed direct cell. */
typedef union parsed {
  int64_t i;
  uint64_t u;
  bool b;
} parsed;

/* The value of a digit string (an optional '-' already cut) of at most 18
 * digits, where no overflow is possible; longer ones go to strtoull. */
static bool digits_value(const char *s, size_t n, uint64_t *out) {
  if (n == 0 || n >= 24)
    return false;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    x = x * 10 + (uint64_t)(s[i] - '0');
  }
  if (n > 18) {
    char buf[24], *end = NULL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    x = strtoull(buf, &end, 10);
    if (errno || *end)
      return false;
  }
  *out = x;
  return true;
}

/* Parses v as col's canonical text; false: not canonical (the staged path
 * decides). Only what DuckDB's cast prints is taken: an optional '-' and
 * digits for integers (no spaces, '+', or other forms the cast would also
 * read), "true" / "false". A cell that carries its integer (has_int) is
 * taken as that integer, range-checked the same way. */
static bool parse_direct(const fill_col *col, const sql_value *v, parsed *out) {
  if (col->kind == FILL_BOOL) {
    if (v->len == 4 && memcmp(v->data, "true", 4) == 0)
      out->b = true;
    else if (v->len == 5 && memcmp(v->data, "false", 5) == 0)
      out->b = false;
    else
      return false;
    return true;
  }
  if (v->has_int) {
    if (col->kind == FILL_SIGNED) {
      if (v->int_value < col->min || v->int_value > col->max)
        return false;
      out->i = v->int_value;
      return true;
    }
    if (v->int_value < 0 || (uint64_t)v->int_value > col->umax)
      return false;
    out->u = (uint64_t)v->int_value;
    return true;
  }
  bool neg = v->len > 0 && v->data[0] == '-';
  uint64_t x;
  if (!digits_value(v->data + neg, v->len - neg, &x))
    return false;
  if (col->kind == FILL_SIGNED) {
    /* INT64_MIN's magnitude is one more than INT64_MAX */
    if (neg ? x > (uint64_t)INT64_MAX + 1 : x > (uint64_t)INT64_MAX)
      return false;
    int64_t i = neg ? (int64_t)(0 - x) : (int64_t)x;
    if (i < col->min || i > col->max)
      return false;
    out->i = i;
    return true;
  }
  if (neg || x > col->umax)
    return false;
  out->u = x;
  return true;
}

static duckdb_state append_parsed(duckdb_appender app, const fill_col *col, parsed p) {
  switch (col->id) {
  case DUCKDB_TYPE_BOOLEAN:
    return duckdb_append_bool(app, p.b);
  case DUCKDB_TYPE_TINYINT:
    return duckdb_append_int8(app, (int8_t)p.i);
  case DUCKDB_TYPE_SMALLINT:
    return duckdb_append_int16(app, (int16_t)p.i);
  case DUCKDB_TYPE_INTEGER:
    return duckdb_append_int32(app, (int32_t)p.i);
  case DUCKDB_TYPE_BIGINT:
    return duckdb_append_int64(app, p.i);
  case DUCKDB_TYPE_UTINYINT:
    return duckdb_append_uint8(app, (uint8_t)p.u);
  case DUCKDB_TYPE_USMALLINT:
    return duckdb_append_uint16(app, (uint16_t)p.u);
  case DUCKDB_TYPE_UINTEGER:
    return duckdb_append_uint32(app, (uint32_t)p.u);
  default:
    return duckdb_append_uint64(app, p.u);
  }
}

/* Every direct cell parses (checked before anything is appended, so a
 * refusal leaves nothing behind). */
static bool all_direct_parse(const fill_col *cols, size_t ncols, size_t nrows,
                             const sql_value *values) {
  for (size_t r = 0; r < nrows; r++)
    for (size_t c = 0; c < ncols; c++) {
      const sql_value *v = &values[r * ncols + c];
      parsed p;
      if (!v->is_null && cols[c].kind >= FILL_BOOL && !parse_direct(&cols[c], v, &p))
        return false;
    }
  return true;
}

/* Appends the rows to app: direct cells typed, cast cells as text (app is
 * a query appender then, whose appended_data columns are VARCHAR / BLOB). */
static mr_status append_fill(duckdb_appender app, const fill_col *cols, size_t ncols, size_t nrows,
                             const sql_value *values, bool typed, sql_error *err) {
  for (size_t r = 0; r < nrows; r++) {
    for (size_t c = 0; c < ncols; c++) {
      const sql_value *v = &values[r * ncols + c];
      const fill_col *col = &cols[c];
      duckdb_state st;
      parsed p = {0};
      if (v->is_null)
        st = duckdb_append_null(app);
      else if (col->kind == FILL_BLOB)
        st = duckdb_append_blob(app, v->data, v->len);
      else if (typed && col->kind >= FILL_BOOL && parse_direct(col, v, &p))
        st = append_parsed(app, col, p);
      else
        st = duckdb_append_varchar_length(app, v->data, v->len);
      if (st != DuckDBSuccess)
        return sql_fail_duckdb(err, duckdb_appender_error(app));
    }
    if (duckdb_appender_end_row(app) != DuckDBSuccess)
      return sql_fail_duckdb(err, duckdb_appender_error(app));
  }
  if (duckdb_appender_flush(app) != DuckDBSuccess)
    return sql_fail_duckdb(err, duckdb_appender_error(app));
  return MR_OK;
}

/* A table with cast columns: one query appender running
 * INSERT INTO target SELECT <moved> FROM appended_data over text / bytes.
 * The INSERT casts each VARCHAR column to its target column's type with the
 * same cast an explicit CAST binds (DuckDB adds it to the select list), so
 * a column is moved as plain cN and no type needs spelling; only a type
 * holding a UNION does (add_moved's NULL guard names it), and only then is
 * the table DESCRIBEd. */
static mr_status load_by_query(duckdb_connection con, const char *target, const fill_col *fill,
                               size_t ncols, size_t nrows, const sql_value *values,
                               sql_error *err) {
  load_col *cols = calloc(ncols ? ncols : 1, sizeof *cols);
  duckdb_logical_type *types = calloc(ncols ? ncols : 1, sizeof *types);
  const char **names = calloc(ncols ? ncols : 1, sizeof *names);
  char(*namebuf)[24] = calloc(ncols ? ncols : 1, sizeof *namebuf);
  mr_status rc = cols && types && names && namebuf ? MR_OK : oom(err);
  bool spelled = false;
  for (size_t i = 0; i < ncols; i++)
    spelled = spelled || fill[i].has_union;
  if (rc == MR_OK && spelled)
    rc = read_describe(con, target, cols, ncols, false, err);
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "INSERT INTO %s SELECT ", target);
  for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
    cols[i].blob = fill[i].kind == FILL_BLOB;
    cols[i].text = fill[i].kind == FILL_TEXT || !spelled; /* moved as cN */
    if (i)
      sql_strbuf_add(&b, ", ");
    add_moved(&b, &cols[i], i);
    snprintf(namebuf[i], sizeof namebuf[i], "c%zu", i);
    names[i] = namebuf[i];
    types[i] = duckdb_create_logical_type(cols[i].blob ? DUCKDB_TYPE_BLOB : DUCKDB_TYPE_VARCHAR);
  }
  sql_strbuf_add(&b, " FROM appended_data");
  char *sql = sql_strbuf_take(&b);
  if (rc == MR_OK && sql == NULL)
    rc = oom(err);
  duckdb_appender app = NULL;
  if (rc == MR_OK && duckdb_appender_create_query(con, sql, ncols, types, "appended_data", names,
                                                  &app) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_appender_error(app));
  if (rc == MR_OK)
    rc = append_fill(app, fill, ncols, nrows, values, false, err);
  if (app) {
    if (rc != MR_OK)
      duckdb_appender_clear(app); /* destroy must not run the INSERT again */
    duckdb_appender_destroy(&app);
  }
  for (size_t i = 0; types && i < ncols; i++)
    if (types[i])
      duckdb_destroy_logical_type(&types[i]);
  free(sql);
  free(types);
  free((void *)names);
  free(namebuf);
  cols_free(cols, ncols);
  return rc;
}

/* Outcome of the fast path. */
typedef enum fast_outcome { FAST_DONE, FAST_STAGED } fast_outcome;

/* Loads through the target's own appender (direct columns only) or one
 * query appender. *out = FAST_STAGED (with MR_OK): the staged path must
 * run, because a direct text was not canonical or the INSERT failed (the
 * staged path names the culprit). */
static mr_status load_fast(duckdb_connection con, const char *db, const char *schema,
                           const char *table, const char *target, size_t ncols, size_t nrows,
                           const sql_value *values, fast_outcome *out, sql_error *err) {
  *out = FAST_DONE;
  duckdb_appender app = NULL;
  if (duckdb_appender_create_ext(con, db, schema, table, &app) != DuckDBSuccess) {
    mr_status rc = sql_fail_duckdb(err, duckdb_appender_error(app));
    duckdb_appender_destroy(&app);
    return rc;
  }
  size_t n = (size_t)duckdb_appender_column_count(app);
  fill_col *cols = calloc(n ? n : 1, sizeof *cols);
  mr_status rc = cols ? MR_OK : oom(err);
  if (rc == MR_OK && n != ncols)
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                  "%s.%s has %zu columns, %zu given", schema, table, n, ncols);
  bool all_direct = true;
  for (size_t i = 0; rc == MR_OK && i < n; i++) {
    duckdb_logical_type t = duckdb_appender_column_type(app, i);
    cols[i] = classify(t);
    duckdb_destroy_logical_type(&t);
    all_direct = all_direct && cols[i].kind != FILL_CAST && !cols[i].bytea;
  }
  if (rc == MR_OK && nrows > 0) {
    if (!all_direct_parse(cols, ncols, nrows, values)) {
      *out = FAST_STAGED;
    } else if (all_direct) {
      rc = append_fill(app, cols, ncols, nrows, values, true, err);
      if (rc != MR_OK)
        duckdb_appender_clear(app);
    } else {
      duckdb_appender_destroy(&app); /* nothing appended: nothing flushed */
      sql_error ignore;
      if (load_by_query(con, target, cols, ncols, nrows, values, &ignore) != MR_OK)
        *out = FAST_STAGED;
    }
  }
  if (app)
    duckdb_appender_destroy(&app);
  free(cols);
  return rc;
}

/* ---- the call ----------------------------------------------------------- */

/* The staged path: describe, stage as text / bytes, INSERT ... SELECT CAST. */
static mr_status load_staged(duckdb_connection con, const char *schema, const char *table,
                             const char *target, size_t ncols, size_t nrows,
                             const sql_value *values, sql_error *err) {
  load_col *cols = NULL;
  size_t n = 0;
  mr_status rc = describe(con, target, &cols, &n, err);
  if (rc == MR_OK && n != ncols)
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                  "%s.%s has %zu columns, %zu given", schema, table, n, ncols);
  if (rc == MR_OK && nrows > 0) {
    rc = create_stage(con, cols, n, err);
    if (rc == MR_OK)
      rc = append_rows(con, cols, n, nrows, values, err);
    if (rc == MR_OK)
      rc = move_rows(con, target, cols, n, err);
    sql_error ignore;
    if (sql_exec(con, "DROP TABLE IF EXISTS " STAGE, &ignore) != MR_OK) {
      /* the next call replaces it anyway */
    }
  }
  cols_free(cols, n);
  return rc;
}

mr_status sql_engine_load_rows(sql_engine *e, const char *schema, const char *table, size_t ncols,
                               size_t nrows, const sql_value *values, sql_error *err) {
  char *qd = sql_quote_ident(e->dbname), *qs = sql_quote_ident(schema),
       *qt = sql_quote_ident(table);
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "%s.%s.%s", qd ? qd : "", qs ? qs : "", qt ? qt : "");
  char *target = sql_strbuf_take(&b);
  bool ok = qd && qs && qt;
  free(qd);
  free(qs);
  free(qt);
  if (target == NULL || !ok) {
    free(target);
    return oom(err);
  }
  pthread_mutex_lock(&e->admin_lock);
  /* An appender flushes by itself every so many rows (DuckDB's flush
   * count, 204,800), so above SINGLE_FLUSH_ROWS the fast path may take
   * more than one statement: it runs in a transaction then, so a failure
   * still leaves none of the rows. */
  bool txn = nrows >= SINGLE_FLUSH_ROWS && !e->admin_in_txn;
  bool own_change = !e->admin_in_txn; /* admin_begin marked one otherwise */
  if (own_change)
    sql_data_change_begin(e);
  mr_status rc = txn ? sql_exec(e->admin, "BEGIN", err) : MR_OK;
  fast_outcome how = FAST_DONE;
  if (rc == MR_OK)
    rc = load_fast(e->admin, e->dbname, schema, table, target, ncols, nrows, values, &how, err);
  if (txn) {
    sql_error end_err;
    bool keep = rc == MR_OK && how == FAST_DONE;
    if (sql_exec(e->admin, keep ? "COMMIT" : "ROLLBACK", &end_err) != MR_OK && keep)
      rc = sql_fail(err, end_err.base.code, end_err.sqlstate, "%s", end_err.base.msg);
  }
  if (rc == MR_OK && how == FAST_STAGED)
    rc = load_staged(e->admin, schema, table, target, ncols, nrows, values, err);
  if (own_change)
    sql_data_change_end(e);
  pthread_mutex_unlock(&e->admin_lock);
  free(target);
  return rc;
}
