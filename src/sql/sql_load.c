/*
 * sql_load.c — the bulk pre-load of sql.h: sql_engine_load_rows puts rows
 * the catalog store kept back into a table of the embedded DuckDB.
 *
 * A cell is an sql_value: DuckDB's text form of the value (what
 * CAST(v AS VARCHAR) gave when it was captured) or, for BLOB-backed columns
 * (BLOB, pg_bytea), the raw bytes. Every type goes back the same way:
 *
 *   1. the target's columns are read (their types as DuckDB spells them);
 *   2. a staging temp table gets one column per target column: BLOB for
 *      BLOB-backed ones, VARCHAR for every other;
 *   3. the appender fills the staging table (it only ever appends text or
 *      bytes, so no appender conversion is involved);
 *   4. one INSERT INTO target SELECT CAST(c AS <column type>), ... moves the
 *      rows, so each value goes through DuckDB's VARCHAR cast, the inverse
 *      of the cast that produced its text (INTERVAL, HUGEINT, DECIMAL,
 *      infinities, nested types, ...).
 *
 * Invariants: the admin lock is held for the whole call; the staging table
 * never outlives it; a failed call leaves the target without any of the
 * rows (the INSERT is one statement) and names the column and a value that
 * did not load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"
#include "sql/sql_state.h"

#define STAGE "temp.main.__moraine_load"

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
  sql_strbuf_addf(&b, "DESCRIBE %s", target);
  char *desc = sql_strbuf_take(&b);
  if (probe == NULL || desc == NULL) {
    free(probe);
    free(desc);
    return oom(err);
  }
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
  duckdb_result r;
  if (rc == MR_OK) {
    if (duckdb_query(con, desc, &r) != DuckDBSuccess) {
      rc = sql_fail_duckdb(err, duckdb_result_error(&r));
    } else if (duckdb_row_count(&r) != ncols) {
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "%s: DESCRIBE gave %llu columns, not %zu", target,
                    (unsigned long long)duckdb_row_count(&r), ncols);
    } else {
      for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
        char *name = duckdb_value_varchar(&r, 0, i);
        char *type = duckdb_value_varchar(&r, 1, i);
        cols[i].name = sql_strdup(name ? name : "?");
        cols[i].type = sql_strdup(type ? type : "VARCHAR");
        duckdb_free(name);
        duckdb_free(type);
        if (cols[i].name == NULL || cols[i].type == NULL)
          rc = oom(err);
        else
          cols[i].text = strcmp(cols[i].type, "VARCHAR") == 0;
      }
    }
    duckdb_destroy_result(&r);
  }
  free(probe);
  free(desc);
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
  load_col *cols = NULL;
  size_t n = 0;
  mr_status rc = describe(e->admin, target, &cols, &n, err);
  if (rc == MR_OK && n != ncols)
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                  "%s.%s has %zu columns, %zu given", schema, table, n, ncols);
  if (rc == MR_OK && nrows > 0) {
    rc = create_stage(e->admin, cols, n, err);
    if (rc == MR_OK)
      rc = append_rows(e->admin, cols, n, nrows, values, err);
    if (rc == MR_OK)
      rc = move_rows(e->admin, target, cols, n, err);
    sql_error ignore;
    if (sql_exec(e->admin, "DROP TABLE IF EXISTS " STAGE, &ignore) != MR_OK) {
      /* the next call replaces it anyway */
    }
  }
  pthread_mutex_unlock(&e->admin_lock);
  cols_free(cols, n);
  free(target);
  return rc;
}
