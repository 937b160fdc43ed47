/*
 * sql_castcheck.c — the load-back cast check on prepared statements, one
 * per list of column types (sql_castcheck.h says why and what it owns).
 */
#include "sql/sql_castcheck.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_state.h"
#include "sql/sql_util.h"

typedef struct cast_stmt {
  char *key; /* the type list: each type as "<length>:<type>"; NULL: free slot */
  size_t ncols;
  duckdb_prepared_statement ps;
} cast_stmt;

struct sql_castcheck {
  pthread_mutex_t mu;
  duckdb_connection con;
  duckdb_logical_type varchar;
  cast_stmt slot[SQL_CASTCHECK_STATEMENTS];
  size_t next; /* the slot a miss takes when all are in use */
};

sql_castcheck *sql_castcheck_new(duckdb_database db) {
  sql_castcheck *cc = calloc(1, sizeof *cc);
  if (cc == NULL)
    return NULL;
  if (duckdb_connect(db, &cc->con) != DuckDBSuccess) {
    free(cc);
    return NULL;
  }
  cc->varchar = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
  pthread_mutex_init(&cc->mu, NULL);
  return cc;
}

static void slot_clear(cast_stmt *s) {
  if (s->key)
    duckdb_destroy_prepare(&s->ps);
  free(s->key);
  memset(s, 0, sizeof *s);
}

void sql_castcheck_free(sql_castcheck *cc) {
  if (cc == NULL)
    return;
  for (size_t i = 0; i < SQL_CASTCHECK_STATEMENTS; i++)
    slot_clear(&cc->slot[i]);
  duckdb_destroy_logical_type(&cc->varchar);
  duckdb_disconnect(&cc->con);
  pthread_mutex_destroy(&cc->mu);
  free(cc);
}

/* DuckDB's message up to its first line: the rest quotes moraine's own
 * statement, which says nothing to the client. */
static mr_status fail_cast(sql_error *err, const char *msg) {
  if (msg == NULL)
    msg = "unknown DuckDB error";
  size_t n = strcspn(msg, "\n");
  return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION, "%.*s", (int)n, msg);
}

/* The prepared statement for cols' types, prepared on a miss. */
static mr_status statement_for(sql_castcheck *cc, size_t ncols, const sql_cast_column *cols,
                               cast_stmt **out, sql_error *err) {
  sql_strbuf key = {0};
  for (size_t i = 0; i < ncols; i++)
    sql_strbuf_addf(&key, "%zu:%s", strlen(cols[i].type), cols[i].type);
  char *k = sql_strbuf_take(&key);
  if (k == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  cast_stmt *free_slot = NULL;
  for (size_t i = 0; i < SQL_CASTCHECK_STATEMENTS; i++) {
    cast_stmt *s = &cc->slot[i];
    if (s->key && strcmp(s->key, k) == 0) {
      free(k);
      *out = s;
      return MR_OK;
    }
    if (s->key == NULL && free_slot == NULL)
      free_slot = s;
  }
  sql_strbuf sql = {0};
  sql_strbuf_add(&sql, "SELECT ");
  for (size_t i = 0; i < ncols; i++)
    sql_strbuf_addf(&sql, "%sCAST(x%zu AS %s[])", i ? ", " : "", i, cols[i].type);
  sql_strbuf_add(&sql, " FROM (SELECT ");
  for (size_t i = 0; i < ncols; i++)
    sql_strbuf_addf(&sql, "%sCAST($%zu AS VARCHAR[]) AS x%zu", i ? ", " : "", i + 1, i);
  sql_strbuf_add(&sql, ")");
  char *text = sql_strbuf_take(&sql);
  if (text == NULL) {
    free(k);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  /* DuckDB prepares one statement only, so a type's text cannot add one */
  duckdb_prepared_statement ps;
  mr_status rc = MR_OK;
  if (duckdb_prepare(cc->con, text, &ps) != DuckDBSuccess)
    rc = fail_cast(err, duckdb_prepare_error(ps));
  free(text);
  if (rc) {
    duckdb_destroy_prepare(&ps);
    free(k);
    return rc;
  }
  if (free_slot == NULL) {
    free_slot = &cc->slot[cc->next];
    cc->next = (cc->next + 1) % SQL_CASTCHECK_STATEMENTS;
    slot_clear(free_slot);
  }
  *free_slot = (cast_stmt){k, ncols, ps};
  *out = free_slot;
  return MR_OK;
}

/* Binds column c's non-NULL values as parameter i + 1. */
static mr_status bind_column(sql_castcheck *cc, duckdb_prepared_statement ps, size_t i,
                             const sql_cast_column *c, sql_error *err) {
  duckdb_value *vals = c->n ? calloc(c->n, sizeof *vals) : NULL;
  if (c->n && vals == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  mr_status rc = MR_OK;
  size_t nvals = 0;
  for (size_t r = 0; !rc && r < c->n; r++) {
    const sql_value *v = &c->values[r * c->stride];
    if (v->is_null)
      continue;
    if (memchr(v->data, '\0', v->len))
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                    "a value holds a NUL byte");
    else if ((vals[nvals++] = duckdb_create_varchar_length(v->data, v->len)) == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  duckdb_value list = rc ? NULL : duckdb_create_list_value(cc->varchar, vals, nvals);
  if (!rc && (list == NULL || duckdb_bind_value(ps, i + 1, list) != DuckDBSuccess))
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "cannot bind a value list");
  if (list)
    duckdb_destroy_value(&list);
  for (size_t r = 0; r < nvals; r++)
    if (vals[r])
      duckdb_destroy_value(&vals[r]);
  free(vals);
  return rc;
}

/* Checks cols in one statement; *bad_bind: the column whose values could
 * not be bound (ncols when the statement ran). */
static mr_status check_together(sql_castcheck *cc, size_t ncols, const sql_cast_column *cols,
                                size_t *bad_bind, sql_error *err) {
  *bad_bind = ncols;
  cast_stmt *s = NULL;
  mr_status rc = statement_for(cc, ncols, cols, &s, err);
  for (size_t i = 0; !rc && i < ncols; i++)
    if ((rc = bind_column(cc, s->ps, i, &cols[i], err)) != MR_OK)
      *bad_bind = i;
  if (rc) {
    if (s)
      duckdb_clear_bindings(s->ps);
    return rc;
  }
  duckdb_result r;
  if (duckdb_execute_prepared(s->ps, &r) != DuckDBSuccess)
    rc = fail_cast(err, duckdb_result_error(&r));
  duckdb_destroy_result(&r);
  duckdb_clear_bindings(s->ps); /* a big commit's lists are not kept until the next check */
  return rc;
}

mr_status sql_castcheck_run(sql_castcheck *cc, size_t ncols, const sql_cast_column *cols,
                            size_t *bad, sql_error *err) {
  *bad = ncols;
  if (ncols == 0)
    return MR_OK;
  pthread_mutex_lock(&cc->mu);
  size_t bad_bind;
  mr_status rc = check_together(cc, ncols, cols, &bad_bind, err);
  if (rc && bad_bind < ncols) {
    *bad = bad_bind;
  } else if (rc && ncols > 1) {
    /* name the column: the first that fails on its own (a slow path) */
    for (size_t i = 0; i < ncols; i++) {
      sql_error one;
      memset(&one, 0, sizeof one);
      if (check_together(cc, 1, &cols[i], &bad_bind, &one) != MR_OK) {
        *err = one;
        *bad = i;
        break;
      }
    }
  } else if (rc) {
    *bad = 0;
  }
  pthread_mutex_unlock(&cc->mu);
  return rc;
}
