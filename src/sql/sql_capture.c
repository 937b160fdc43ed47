/*
 * sql_capture.c — a transaction's change set (see "Capture" in sql.h).
 *
 * Rows come from the RETURNING * result of each DML statement, so capture
 * costs O(rows changed). Consecutive statements on the same table with the
 * same op extend one batch. All memory is owned here and freed by
 * sql_capture_clear.
 */
#include <stdlib.h>
#include <string.h>

#include "base/mr_format.h"
#include "sql/sql_internal.h"
#include "sql/sql_state.h"

static void free_batch(sql_change_batch *b) {
  free((char *)b->sql);
  free((char *)b->schema);
  free((char *)b->table);
  for (size_t i = 0; i < b->ncols; i++) {
    free((char *)b->col_names[i]);
    free((char *)b->col_types[i]);
  }
  free((void *)b->col_names);
  free((void *)b->col_types);
  for (size_t i = 0; i < b->nrows * b->ncols; i++)
    free((char *)b->values[i].data);
  free((void *)b->values);
}

void sql_capture_clear(sql_capture *c) {
  for (size_t i = 0; i < c->n; i++)
    free_batch(&c->batches[i]);
  free(c->batches);
  memset(c, 0, sizeof *c);
}

static sql_change_batch *new_batch(sql_capture *c) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    sql_change_batch *v = realloc(c->batches, cap * sizeof *v);
    if (v == NULL)
      return NULL;
    c->batches = v;
    c->cap = cap;
  }
  sql_change_batch *b = &c->batches[c->n++];
  memset(b, 0, sizeof *b);
  return b;
}

mr_status sql_capture_ddl(sql_capture *c, const char *sql, const char *schema, sql_error *err) {
  sql_change_batch *b = new_batch(c);
  if (b == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  b->op = SQL_CHANGE_DDL;
  b->sql = sql_strdup(sql);
  b->schema = sql_strdup(schema);
  if (b->sql == NULL || b->schema == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

/* The table's DuckDB column type names, in column order, from DESCRIBE of
 * that one table: it binds only the table named, so its cost does not grow
 * with the catalog (duckdb_columns() would build a row for every column of
 * every table, inlined-data tables included, before filtering). DESCRIBE's
 * column_type is the same LogicalType spelling duckdb_columns() gives
 * (DECIMAL(18,3), STRUCT(...), INTERVAL, ...). */
static mr_status column_types(duckdb_connection con, const char *dbname, const char *schema,
                              const char *table, size_t ncols, char **types, sql_error *err) {
  char *qd = sql_quote_ident(dbname), *qs = sql_quote_ident(schema), *qt = sql_quote_ident(table);
  sql_strbuf b = {0};
  if (qd && qs && qt)
    sql_strbuf_addf(&b, "DESCRIBE %s.%s.%s", qd, qs, qt);
  char *sql = sql_strbuf_take(&b);
  free(qd);
  free(qs);
  free(qt);
  if (sql == NULL || !(qd && qs && qt)) {
    free(sql);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  duckdb_result r;
  mr_status rc = MR_OK;
  if (duckdb_query(con, sql, &r) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  } else if (duckdb_row_count(&r) != ncols) {
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                  "%s.%s: DESCRIBE gave %llu columns, not %zu", schema, table,
                  (unsigned long long)duckdb_row_count(&r), ncols);
  } else {
    for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
      char *v = duckdb_value_varchar(&r, 1, i); /* column_type */
      types[i] = sql_strdup(v ? v : "VARCHAR");
      duckdb_free(v);
      if (types[i] == NULL)
        rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    }
  }
  duckdb_destroy_result(&r);
  free(sql);
  return rc;
}

static bool same_table(const sql_change_batch *b, int op, const char *schema, const char *table,
                       duckdb_result *r) {
  if (b->op == SQL_CHANGE_DDL || (int)b->op != op || strcmp(b->schema, schema) != 0 ||
      strcmp(b->table, table) != 0 || b->ncols != duckdb_column_count(r))
    return false;
  for (size_t i = 0; i < b->ncols; i++)
    if (strcmp(b->col_names[i], duckdb_column_name(r, i)) != 0)
      return false;
  return true;
}

/* The column types whose text capture forms itself (cell_text), exactly as
 * DuckDB's CAST(... AS VARCHAR) spells them: integers in decimal, booleans
 * as true / false, text as is; BLOB is kept as its bytes. Every other type
 * is cast by the engine in the RETURNING list. A CAST per column costs as
 * much as the DML it follows (DuckLake's commit batch: 6.8 ms with casts,
 * 3.9 ms returning the columns as they are), and DuckLake's catalog tables
 * are nearly all integers and text. cell_text has a case for each of them
 * (and fails the capture, never guesses, on a type it lacks). */
static bool returned_as_is(duckdb_type t) {
  switch (t) {
  case DUCKDB_TYPE_BOOLEAN:
  case DUCKDB_TYPE_TINYINT:
  case DUCKDB_TYPE_SMALLINT:
  case DUCKDB_TYPE_INTEGER:
  case DUCKDB_TYPE_BIGINT:
  case DUCKDB_TYPE_UTINYINT:
  case DUCKDB_TYPE_USMALLINT:
  case DUCKDB_TYPE_UINTEGER:
  case DUCKDB_TYPE_UBIGINT:
  case DUCKDB_TYPE_VARCHAR:
  case DUCKDB_TYPE_BLOB:
    return true;
  default:
    return false;
  }
}

char *sql_capture_returning(duckdb_connection con, const char *schema, const char *table,
                            size_t *ncols, sql_error *err) {
  char *qs = sql_quote_ident(schema), *qt = sql_quote_ident(table);
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "SELECT * FROM %s.%s LIMIT 0", qs ? qs : "", qt ? qt : "");
  char *probe = sql_strbuf_take(&b);
  duckdb_prepared_statement ps = NULL;
  char *out = NULL;
  if (probe && duckdb_prepare(con, probe, &ps) != DuckDBSuccess) {
    sql_fail_duckdb(err, duckdb_prepare_error(ps));
  } else if (probe) {
    size_t n = duckdb_prepared_statement_column_count(ps);
    *ncols = n;
    for (size_t i = 0; i < n; i++) {
      const char *name = duckdb_prepared_statement_column_name(ps, i);
      char *qc = sql_quote_ident(name ? name : "?");
      if (returned_as_is(duckdb_prepared_statement_column_type(ps, i)))
        sql_strbuf_addf(&b, "%s%s.%s AS %s", i ? ", " : "", qt, qc, qc);
      else
        sql_strbuf_addf(&b, "%sCAST(%s.%s AS VARCHAR) AS %s", i ? ", " : "", qt, qc, qc);
      free(qc);
      duckdb_free((void *)name);
    }
    out = sql_strbuf_take(&b);
    if (out == NULL)
      sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  } else {
    sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  if (ps)
    duckdb_destroy_prepare(&ps);
  free(probe);
  free(qs);
  free(qt);
  return out;
}

/* ---- table shapes (cached per session) ---------------------------------- */

static void shape_free(sql_shape *sh) {
  free(sh->schema);
  free(sh->table);
  free(sh->returning);
  for (size_t i = 0; sh->types && i < sh->ncols; i++)
    free(sh->types[i]);
  free(sh->types);
  memset(sh, 0, sizeof *sh);
}

void sql_shapes_clear(sql_shapes *cache) {
  for (size_t i = 0; i < cache->n; i++)
    shape_free(&cache->v[i]);
  free(cache->v);
  shape_free(&cache->scratch);
  memset(cache, 0, sizeof *cache);
}

static mr_status shape_fill(sql_shape *sh, duckdb_connection con, const char *dbname,
                            const char *schema, const char *table, sql_error *err) {
  sh->schema = sql_strdup(schema);
  sh->table = sql_strdup(table);
  if (sh->schema == NULL || sh->table == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  sh->returning = sql_capture_returning(con, schema, table, &sh->ncols, err);
  if (sh->returning == NULL)
    return err ? err->base.code : MR_ERR_INVALID;
  sh->types = calloc(sh->ncols ? sh->ncols : 1, sizeof *sh->types);
  if (sh->types == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return column_types(con, dbname, schema, table, sh->ncols, sh->types, err);
}

const sql_shape *sql_shape_get(sql_shapes *cache, duckdb_connection con, const char *dbname,
                               const char *schema, const char *table, uint64_t seen_gen,
                               uint64_t now_gen, sql_error *err) {
  if (cache->gen != now_gen) { /* DDL ran somewhere since these were read */
    for (size_t i = 0; i < cache->n; i++)
      shape_free(&cache->v[i]);
    cache->n = 0;
    cache->gen = now_gen;
  }
  for (size_t i = 0; i < cache->n; i++)
    if (strcmp(cache->v[i].table, table) == 0 && strcmp(cache->v[i].schema, schema) == 0)
      return &cache->v[i];
  sql_shape *sh = &cache->scratch;
  /* a transaction that began before the latest DDL may see an older shape:
   * it is used once, never kept */
  if (seen_gen == now_gen) {
    sql_shape *v = realloc(cache->v, (cache->n + 1) * sizeof *v);
    if (v == NULL) {
      sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      return NULL;
    }
    cache->v = v;
    sh = &cache->v[cache->n];
  }
  if (sh == &cache->scratch)
    shape_free(sh);
  else
    memset(sh, 0, sizeof *sh); /* the new slot realloc gave */
  if (shape_fill(sh, con, dbname, schema, table, err) != MR_OK) {
    shape_free(sh);
    return NULL;
  }
  if (sh != &cache->scratch)
    cache->n++;
  return sh;
}

/* Cell `row` of a vector of type t (one returned_as_is admits, or the
 * VARCHAR of a cast) as its text: *p, *len, with buf holding integers. */
static bool cell_text(duckdb_type t, void *data, idx_t row, char buf[MR_INT_CHARS], const char **p,
                      size_t *len) {
  int64_t i;
  switch (t) {
  case DUCKDB_TYPE_VARCHAR:
  case DUCKDB_TYPE_BLOB: {
    duckdb_string_t *s = &((duckdb_string_t *)data)[row];
    *p = duckdb_string_t_data(s);
    *len = duckdb_string_t_length(*s);
    return true;
  }
  case DUCKDB_TYPE_BOOLEAN:
    *p = ((bool *)data)[row] ? "true" : "false";
    *len = strlen(*p);
    return true;
  case DUCKDB_TYPE_UBIGINT:
    *len = mr_format_u64(((uint64_t *)data)[row], buf);
    *p = buf;
    return true;
  case DUCKDB_TYPE_TINYINT:
    i = ((int8_t *)data)[row];
    break;
  case DUCKDB_TYPE_SMALLINT:
    i = ((int16_t *)data)[row];
    break;
  case DUCKDB_TYPE_INTEGER:
    i = ((int32_t *)data)[row];
    break;
  case DUCKDB_TYPE_BIGINT:
    i = ((int64_t *)data)[row];
    break;
  case DUCKDB_TYPE_UTINYINT:
    i = ((uint8_t *)data)[row];
    break;
  case DUCKDB_TYPE_USMALLINT:
    i = ((uint16_t *)data)[row];
    break;
  case DUCKDB_TYPE_UINTEGER:
    i = ((uint32_t *)data)[row];
    break;
  default:
    return false;
  }
  *len = mr_format_i64(i, buf);
  *p = buf;
  return true;
}

/* Appends one chunk's rows to batch b as text (types: the result's). */
static mr_status add_chunk(sql_change_batch *b, duckdb_data_chunk chunk, const duckdb_type *types,
                           sql_error *err) {
  size_t ncols = b->ncols;
  idx_t n = duckdb_data_chunk_get_size(chunk);
  sql_value *vals = realloc((void *)b->values, (b->nrows + n) * ncols * sizeof *vals);
  if (vals == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  memset(vals + b->nrows * ncols, 0, n * ncols * sizeof *vals);
  b->values = vals;
  mr_status rc = MR_OK;
  for (size_t col = 0; col < ncols; col++) {
    duckdb_vector vec = duckdb_data_chunk_get_vector(chunk, col);
    void *data = duckdb_vector_get_data(vec);
    uint64_t *valid = duckdb_vector_get_validity(vec);
    for (idx_t row = 0; row < n; row++) {
      sql_value *out = &vals[(b->nrows + row) * ncols + col];
      if (valid && !duckdb_validity_row_is_valid(valid, row)) {
        out->is_null = true;
        continue;
      }
      char buf[MR_INT_CHARS];
      const char *text;
      size_t len;
      if (!cell_text(types[col], data, row, buf, &text, &len)) {
        out->is_null = true;
        rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                      "%s.%s: column %zu came back as type %d, not as text", b->schema, b->table,
                      col + 1, (int)types[col]);
        continue;
      }
      char *copy = sql_strndup(text, len);
      if (copy == NULL) {
        out->is_null = true;
        rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        continue;
      }
      out->data = copy;
      out->len = len;
    }
  }
  b->nrows += n;
  return rc;
}

mr_status sql_capture_result(sql_capture *c, const sql_shape *shape, int op, duckdb_result *r,
                             uint64_t *count, sql_error *err) {
  const char *schema = shape->schema, *table = shape->table;
  *count = 0;
  size_t ncols = duckdb_column_count(r);
  duckdb_type *vec_types = calloc(ncols ? ncols : 1, sizeof *vec_types);
  if (vec_types == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < ncols; i++)
    vec_types[i] = duckdb_column_type(r, i);
  sql_change_batch *b = NULL;
  mr_status rc = MR_OK;
  duckdb_data_chunk chunk;
  while (rc == MR_OK && (chunk = duckdb_fetch_chunk(*r)) != NULL) {
    if (b == NULL) {
      b = c->n ? &c->batches[c->n - 1] : NULL;
      if (b == NULL || !same_table(b, op, schema, table, r)) {
        b = new_batch(c);
        if (b == NULL)
          rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        char **names = NULL, **types = NULL;
        if (rc == MR_OK) {
          b->op = (sql_change_op)op;
          b->schema = sql_strdup(schema);
          b->table = sql_strdup(table);
          names = calloc(ncols ? ncols : 1, sizeof *names);
          types = calloc(ncols ? ncols : 1, sizeof *types);
          b->col_names = (const char *const *)names;
          b->col_types = (const char *const *)types;
          if (!b->schema || !b->table || !names || !types)
            rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
          else
            b->ncols = ncols;
        }
        for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
          names[i] = sql_strdup(duckdb_column_name(r, i));
          if (names[i] == NULL)
            rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        }
        for (size_t i = 0; rc == MR_OK && i < ncols; i++) {
          types[i] = sql_strdup(i < shape->ncols ? shape->types[i] : "VARCHAR");
          if (types[i] == NULL)
            rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        }
      }
    }
    if (rc == MR_OK) {
      *count += duckdb_data_chunk_get_size(chunk);
      rc = add_chunk(b, chunk, vec_types, err);
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  free(vec_types);
  return rc;
}

sql_changes sql_capture_view(const sql_capture *c) {
  sql_changes v = {.nbatches = c->n, .batches = c->batches};
  return v;
}
