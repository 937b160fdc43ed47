/*
 * sql_result.c — sends a DuckDB result to a sink in PostgreSQL's terms:
 * RowDescription columns (OIDs from sql_types.h), DataRows in text format
 * (PostgreSQL text forms: t/f, \x.. bytea, ...) or binary format.
 *
 * Binary DataRows use DuckDB's chunk API; a column requested in text format
 * within a binary result must then be a type formatted here from its vector
 * (booleans, integers, text, bytea); others fail with 0A000.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"
#include "sql/sql_lift.h"
#include "sql/sql_state.h"

static int16_t format_of(size_t i, size_t nformats, const int16_t *formats) {
  if (nformats == 0)
    return 0;
  return nformats == 1 ? formats[0] : (i < nformats ? formats[i] : 0);
}

static mr_status describe(size_t ncols, const char *const *names, const pg_coltype *types,
                          size_t nformats, const int16_t *formats, const sql_sink *sink,
                          sql_error *err) {
  sql_column *cols = calloc(ncols ? ncols : 1, sizeof *cols);
  if (cols == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < ncols; i++) {
    cols[i].name = names[i];
    cols[i].type_oid = types[i].oid;
    cols[i].type_len = types[i].typlen;
    cols[i].typmod = types[i].typmod;
    cols[i].format = format_of(i, nformats, formats);
  }
  int stop = SQL_SINK_CALL(sink, row_description, ncols, cols);
  free(cols);
  return stop ? sql_fail_lost(err) : MR_OK;
}

mr_status sql_describe_columns(duckdb_prepared_statement ps, size_t nformats,
                               const int16_t *formats, const sql_sink *sink, sql_error *err) {
  size_t ncols = duckdb_prepared_statement_column_count(ps);
  if (ncols == 0)
    return SQL_SINK_CALL0(sink, no_data)
               ? sql_fail(err, MR_ERR_CLOSED, SQLSTATE_CONNECTION_FAILURE, "client lost")
               : MR_OK;
  const char **names = calloc(ncols, sizeof *names);
  pg_coltype *types = calloc(ncols, sizeof *types);
  mr_status rc = MR_OK;
  if (!names || !types) {
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  } else {
    for (size_t i = 0; i < ncols; i++) {
      names[i] = duckdb_prepared_statement_column_name(ps, i);
      duckdb_logical_type lt = duckdb_prepared_statement_column_logical_type(ps, i);
      pg_coltype_of(lt, names[i], &types[i]);
      duckdb_destroy_logical_type(&lt);
    }
    rc = describe(ncols, names, types, nformats, formats, sink, err);
    for (size_t i = 0; i < ncols; i++)
      duckdb_free((void *)names[i]);
  }
  free(names);
  free(types);
  return rc;
}

/* Text form of one cell from a vector, for text columns in a binary result. */
static bool vector_text(sql_strbuf *b, const pg_coltype *ct, duckdb_vector vec, uint64_t row) {
  void *data = duckdb_vector_get_data(vec);
  if (ct->oid == PG_OID_TID && ct->duck == DUCKDB_TYPE_BIGINT) {
    int64_t rid = ((int64_t *)data)[row];
    sql_strbuf_add(b, "(");
    sql_strbuf_add_i64(b, rid / PG_TID_PER_BLOCK);
    sql_strbuf_add(b, ",");
    sql_strbuf_add_i64(b, rid % PG_TID_PER_BLOCK);
    sql_strbuf_add(b, ")");
    return true;
  }
  /* integers without printf: a catalog answer can hold 100,000s of them */
  switch (ct->duck) {
  case DUCKDB_TYPE_BOOLEAN:
    sql_strbuf_add(b, ((bool *)data)[row] ? "t" : "f");
    return true;
  case DUCKDB_TYPE_TINYINT:
    sql_strbuf_add_i64(b, ((int8_t *)data)[row]);
    return true;
  case DUCKDB_TYPE_SMALLINT:
    sql_strbuf_add_i64(b, ((int16_t *)data)[row]);
    return true;
  case DUCKDB_TYPE_INTEGER:
    sql_strbuf_add_i64(b, ((int32_t *)data)[row]);
    return true;
  case DUCKDB_TYPE_BIGINT:
    sql_strbuf_add_i64(b, ((int64_t *)data)[row]);
    return true;
  case DUCKDB_TYPE_VARCHAR: {
    duckdb_string_t *s = &((duckdb_string_t *)data)[row];
    sql_strbuf_addn(b, duckdb_string_t_data(s), duckdb_string_t_length(*s));
    return true;
  }
  case DUCKDB_TYPE_BLOB: {
    duckdb_string_t *s = &((duckdb_string_t *)data)[row];
    pg_bytea_encode_hex(b, (const uint8_t *)duckdb_string_t_data(s), duckdb_string_t_length(*s));
    return true;
  }
  default:
    return false;
  }
}

static mr_status send_binary(duckdb_result *r, size_t ncols, const pg_coltype *types,
                             size_t nformats, const int16_t *formats, const sql_sink *sink,
                             uint64_t *nrows, sql_error *err) {
  sql_strbuf row = {0};
  size_t *offs = calloc(ncols ? ncols : 1, sizeof *offs);
  const char **vals = calloc(ncols ? ncols : 1, sizeof *vals);
  size_t *lens = calloc(ncols ? ncols : 1, sizeof *lens);
  mr_status rc = MR_OK;
  if (!offs || !vals || !lens)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  duckdb_data_chunk chunk;
  while (rc == MR_OK && (chunk = duckdb_fetch_chunk(*r)) != NULL) {
    idx_t n = duckdb_data_chunk_get_size(chunk);
    for (idx_t i = 0; i < n && rc == MR_OK; i++) {
      sql_strbuf_reset(&row);
      for (size_t c = 0; c < ncols; c++) {
        duckdb_vector vec = duckdb_data_chunk_get_vector(chunk, c);
        offs[c] = row.len;
        uint64_t *valid = duckdb_vector_get_validity(vec);
        if (format_of(c, nformats, formats) == 1 && types[c].binary_ok) {
          pg_encode_binary(&row, &types[c], vec, i);
        } else if (valid && !duckdb_validity_row_is_valid(valid, i)) {
          sql_strbuf_add_be32(&row, 0xFFFFFFFFu);
        } else {
          size_t at = row.len;
          sql_strbuf_add_be32(&row, 0);
          if (!vector_text(&row, &types[c], vec, i)) {
            rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                          "column %zu: this type cannot be sent in this result format", c + 1);
            break;
          }
          uint32_t len = (uint32_t)(row.len - at - 4);
          if (!row.failed) {
            row.data[at] = (char)(len >> 24);
            row.data[at + 1] = (char)(len >> 16);
            row.data[at + 2] = (char)(len >> 8);
            row.data[at + 3] = (char)len;
          }
        }
      }
      if (rc)
        break;
      if (row.failed) {
        rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        break;
      }
      for (size_t c = 0; c < ncols; c++) {
        const uint8_t *p = (const uint8_t *)row.data + offs[c];
        uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        vals[c] = len == 0xFFFFFFFFu ? NULL : (const char *)p + 4;
        lens[c] = len == 0xFFFFFFFFu ? 0 : len;
      }
      if (SQL_SINK_CALL(sink, data_row, ncols, vals, lens))
        rc = sql_fail_lost(err);
      (*nrows)++;
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  sql_strbuf_free(&row);
  free(offs);
  free(vals);
  free(lens);
  return rc;
}

static mr_status send_text(duckdb_result *r, size_t ncols, const pg_coltype *types,
                           const sql_sink *sink, uint64_t *nrows, sql_error *err) {
  idx_t n = duckdb_row_count(r);
  sql_strbuf *cells = calloc(ncols ? ncols : 1, sizeof *cells);
  const char **vals = calloc(ncols ? ncols : 1, sizeof *vals);
  size_t *lens = calloc(ncols ? ncols : 1, sizeof *lens);
  mr_status rc = MR_OK;
  if (!cells || !vals || !lens)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  for (idx_t row = 0; row < n && rc == MR_OK; row++) {
    for (size_t c = 0; c < ncols; c++) {
      sql_strbuf_reset(&cells[c]);
      if (duckdb_value_is_null(r, c, row)) {
        vals[c] = NULL;
        lens[c] = 0;
        continue;
      }
      pg_format_text(&cells[c], &types[c], r, c, row);
      sql_strbuf_addn(&cells[c], "", 0);
      if (cells[c].failed) {
        rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        break;
      }
      vals[c] = cells[c].data;
      lens[c] = cells[c].len;
    }
    if (rc)
      break;
    if (SQL_SINK_CALL(sink, data_row, ncols, vals, lens))
      rc = sql_fail_lost(err);
    (*nrows)++;
  }
  for (size_t c = 0; cells && c < ncols; c++)
    sql_strbuf_free(&cells[c]);
  free(cells);
  free(vals);
  free(lens);
  return rc;
}

/* Types duckdb_value_varchar formats itself; others are cast in SQL. */
static bool text_native(duckdb_type t) {
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
  case DUCKDB_TYPE_HUGEINT:
  case DUCKDB_TYPE_FLOAT:
  case DUCKDB_TYPE_DOUBLE:
  case DUCKDB_TYPE_DECIMAL:
  case DUCKDB_TYPE_VARCHAR:
  case DUCKDB_TYPE_BLOB:
  case DUCKDB_TYPE_DATE:
  case DUCKDB_TYPE_TIME:
  case DUCKDB_TYPE_TIMESTAMP:
  case DUCKDB_TYPE_INTERVAL:
    return true;
  default:
    return false;
  }
}

/* Types whose PostgreSQL text form vector_text writes from a chunk itself. */
static bool vector_native(duckdb_type t) {
  switch (t) {
  case DUCKDB_TYPE_BOOLEAN:
  case DUCKDB_TYPE_TINYINT:
  case DUCKDB_TYPE_SMALLINT:
  case DUCKDB_TYPE_INTEGER:
  case DUCKDB_TYPE_BIGINT:
  case DUCKDB_TYPE_VARCHAR:
  case DUCKDB_TYPE_BLOB:
    return true;
  default:
    return false;
  }
}

char *sql_text_wrap(duckdb_prepared_statement ps, const char *sql) {
  if (duckdb_prepared_statement_type(ps) != DUCKDB_STATEMENT_TYPE_SELECT)
    return NULL;
  size_t ncols = duckdb_prepared_statement_column_count(ps);
  bool need = false;
  for (size_t i = 0; i < ncols; i++)
    if (!vector_native(duckdb_prepared_statement_column_type(ps, i)))
      need = true;
  if (!need)
    return NULL;
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "SELECT ");
  for (size_t i = 0; i < ncols; i++) {
    const char *name = duckdb_prepared_statement_column_name(ps, i);
    char *q = sql_quote_ident(name ? name : "?column?");
    const char *as = q ? q : "\"x\"";
    const char *sep = i ? ", " : "";
    duckdb_type t = duckdb_prepared_statement_column_type(ps, i);
    if (vector_native(t))
      sql_strbuf_addf(&b, "%s#%zu AS %s", sep, i + 1, as);
    else if (t == DUCKDB_TYPE_LIST || t == DUCKDB_TYPE_ARRAY)
      sql_strbuf_addf(&b, "%s'{' || array_to_string(CAST(#%zu AS VARCHAR[]), ',') || '}' AS %s",
                      sep, i + 1, as);
    else if (t == DUCKDB_TYPE_FLOAT || t == DUCKDB_TYPE_DOUBLE)
      /* PostgreSQL spells the special values NaN, Infinity, -Infinity */
      sql_strbuf_addf(&b,
                      "%sCASE WHEN isnan(#%zu) THEN 'NaN' WHEN isinf(#%zu) AND #%zu > 0 THEN "
                      "'Infinity' WHEN isinf(#%zu) THEN '-Infinity' ELSE CAST(#%zu AS VARCHAR) "
                      "END AS %s",
                      sep, i + 1, i + 1, i + 1, i + 1, i + 1, as);
    else
      sql_strbuf_addf(&b, "%sCAST(#%zu AS VARCHAR) AS %s", sep, i + 1, as);
    free(q);
    duckdb_free((void *)name);
  }
  sql_strbuf_addf(&b, " FROM (%s) AS __moraine_text", sql);
  return sql_strbuf_take(&b);
}

void sql_cache_value_free(sql_cache_purpose purpose, void *value) {
  if (purpose == SQL_CACHE_PARSED) {
    sql_prepared_destroy(value);
    return;
  }
  if (purpose == SQL_CACHE_PLANS) {
    sql_plans_free(value);
  } else {
    sql_cached_query *q = value;
    if (q->ps)
      duckdb_destroy_prepare(&q->ps);
    if (q->wrapped)
      duckdb_destroy_prepare(&q->wrapped);
  }
  free(value);
}

mr_status sql_prepare(duckdb_connection con, const char *sql, duckdb_prepared_statement *ps,
                      sql_error *err) {
  if (duckdb_prepare(con, sql, ps) == DuckDBSuccess)
    return MR_OK;
  mr_status rc = sql_fail_duckdb(err, duckdb_prepare_error(*ps));
  duckdb_destroy_prepare(ps);
  *ps = NULL;
  return rc;
}

/* The entry of a lifted DML shape, made on first use: ps takes the lifted
 * values. A shape DuckDB will not prepare, or with a parameter
 * sql_lift_bind cannot fill, is kept with ps NULL, so its texts run as they
 * are without trying again. NULL when out of memory (the caller runs the
 * text). */
static sql_cached_query *dml_shape_entry(sql_session *s, const sql_lifted *l) {
  sql_cached_query *q = sql_cache_get(&s->prepared_ps, atomic_load(&s->e->ddl_gen), s->temp_gen,
                                      SQL_CACHE_DML_SHAPE, l->shape);
  if (q)
    return q;
  q = calloc(1, sizeof *q);
  if (q == NULL)
    return NULL;
  if (duckdb_prepare(s->con, l->shape, &q->ps) != DuckDBSuccess || !sql_lift_bindable(q->ps, l->n))
    duckdb_destroy_prepare(&q->ps); /* sets it NULL: the texts run */
  if (!sql_cache_put(&s->prepared_ps, SQL_CACHE_DML_SHAPE, l->shape, q)) {
    sql_cache_value_free(SQL_CACHE_DML_SHAPE, q);
    return NULL;
  }
  return q;
}

mr_status sql_query_cached(sql_session *s, sql_cache_purpose purpose, const char *text,
                           sql_query_maker make, sql_cached_query **out, sql_error *err) {
  sql_cached_query *q = sql_cache_get(&s->prepared_ps, atomic_load(&s->e->ddl_gen), s->temp_gen,
                                      purpose, text);
  if (q) {
    *out = q;
    return MR_OK;
  }
  char *sql;
  mr_status rc = sql_rewrite(text, &sql, err);
  if (rc)
    return rc;
  q = calloc(1, sizeof *q);
  if (q == NULL) {
    free(sql);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  rc = make(s, sql, q, err);
  free(sql);
  if (rc) {
    free(q);
    return rc;
  }
  if (!sql_cache_put(&s->prepared_ps, purpose, text, q)) {
    sql_cache_value_free(purpose, q);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  *out = q;
  return MR_OK;
}

duckdb_prepared_statement sql_dml_lifted(sql_session *s, const char *full) {
  sql_lifted l;
  sql_error ignore;
  if (sql_lift(full, &l, &ignore) != MR_OK || l.n == 0)
    return NULL;
  sql_cached_query *q = dml_shape_entry(s, &l);
  bool bound = q && q->ps && sql_lift_bind(q->ps, &l);
  sql_lifted_free(&l);
  return bound ? q->ps : NULL;
}

mr_status sql_execute_streaming(duckdb_prepared_statement ps, duckdb_result *r, sql_error *err) {
  memset(r, 0, sizeof *r);
  duckdb_pending_result pending = NULL;
  mr_status rc = MR_OK;
  if (duckdb_pending_prepared_streaming(ps, &pending) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_pending_error(pending));
  else if (duckdb_execute_pending(pending, r) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(r));
    duckdb_destroy_result(r);
  }
  duckdb_destroy_pending(&pending);
  return rc;
}

mr_status sql_send_result(sql_session *s, duckdb_result *r, duckdb_prepared_statement types_from,
                          bool want_describe, size_t nformats, const int16_t *formats,
                          const sql_sink *sink, uint64_t *nrows, sql_error *err) {
  (void)s;
  *nrows = 0;
  size_t ncols = duckdb_column_count(r);
  if (ncols == 0)
    return MR_OK;
  const char **names = calloc(ncols, sizeof *names);
  pg_coltype *types = calloc(ncols, sizeof *types);
  if (!names || !types) {
    free(names);
    free(types);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  bool any_binary = false;
  for (size_t i = 0; i < ncols; i++) {
    names[i] = duckdb_column_name(r, i);
    duckdb_logical_type lt = duckdb_column_logical_type(r, i);
    pg_coltype_of(lt, names[i], &types[i]);
    duckdb_destroy_logical_type(&lt);
    if (format_of(i, nformats, formats) == 1)
      any_binary = true;
  }
  mr_status rc = MR_OK;
  if (want_describe && types_from)
    rc = sql_describe_columns(types_from, nformats, formats, sink, err);
  else if (want_describe)
    rc = describe(ncols, names, types, nformats, formats, sink, err);
  /* the value API cannot read every type, nor a streaming result: those go
   * through chunks */
  for (size_t i = 0; i < ncols; i++)
    if (!text_native(types[i].duck))
      any_binary = true;
  if (duckdb_result_is_streaming(*r))
    any_binary = true;
  if (rc == MR_OK)
    rc = any_binary ? send_binary(r, ncols, types, nformats, formats, sink, nrows, err)
                    : send_text(r, ncols, types, sink, nrows, err);
  free(names);
  free(types);
  return rc;
}
