/*
 * sql_copy.c — COPY ... TO STDOUT and COPY ... FROM STDIN, text and binary.
 *
 * Binary TO STDOUT is PostgreSQL's PGCOPY stream: the 11-byte signature,
 * int32 flags 0, int32 header-extension length 0, then per row an int16
 * field count and per field an int32 length (-1 NULL) and the bytes in the
 * type's binary layout (sql_types.c), then the int16 -1 trailer. The header
 * rides in the first CopyData, the trailer in the last; every CopyData holds
 * whole rows only (DuckDB's postgres extension parses each message alone).
 * Columns of types with no binary layout are cast to VARCHAR and typed text.
 * A pure binary read (sql_plan.h) is answered from the engine's result cache
 * when it may be, and its bytes are recorded for it otherwise (sql_rcache.h).
 *
 * FROM STDIN stages the rows in a temporary table through DuckDB's appender
 * and then runs INSERT INTO target SELECT ... FROM stage RETURNING *, so the
 * inserted rows are captured like any INSERT.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"
#include "sql/sql_state.h"

#define COPY_CHUNK (64 * 1024)

static const uint8_t pgcopy_signature[11] = {'P',  'G',  'C',  'O',  'P', 'Y',
                                             '\n', 0xFF, '\r', '\n', 0};

static mr_status flush_out(const sql_sink *sink, sql_strbuf *b, sql_record *rec, sql_error *err) {
  if (b->failed)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  if (b->len == 0)
    return MR_OK;
  if (SQL_SINK_CALL(sink, copy_data, (const uint8_t *)b->data, b->len))
    return sql_fail_lost(err);
  sql_record_add(rec, b->data, b->len);
  sql_strbuf_reset(b);
  return MR_OK;
}

/* Prepares the COPY query; if a column has no binary layout, prepares
 * SELECT #1, CAST(#2 AS VARCHAR) AS "name", ... FROM (query) instead. */
/* The PostgreSQL types of r's columns: a calloc'd array of
 * duckdb_column_count(r) entries (at least one) that the caller frees. */
static mr_status result_coltypes(duckdb_result *r, pg_coltype **out, sql_error *err) {
  size_t ncols = duckdb_column_count(r);
  pg_coltype *types = calloc(ncols ? ncols : 1, sizeof *types);
  *out = types;
  if (types == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < ncols; i++) {
    duckdb_logical_type lt = duckdb_column_logical_type(r, i);
    pg_coltype_of(lt, duckdb_column_name(r, i), &types[i]);
    duckdb_destroy_logical_type(&lt);
  }
  return MR_OK;
}

/* A COPY TO's query for binary output: columns without an exact binary
 * encoding are cast to text in SQL (q->wrapped). */
static mr_status make_binary(sql_session *s, const char *sql, sql_cached_query *q,
                             sql_error *err) {
  mr_status rc = sql_prepare(s->con, sql, &q->ps, err);
  if (rc)
    return rc;
  size_t ncols = duckdb_prepared_statement_column_count(q->ps);
  bool wrap = false;
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "SELECT ");
  for (size_t i = 0; i < ncols; i++) {
    const char *name = duckdb_prepared_statement_column_name(q->ps, i);
    duckdb_logical_type lt = duckdb_prepared_statement_column_logical_type(q->ps, i);
    pg_coltype ct;
    pg_coltype_of(lt, name, &ct);
    duckdb_destroy_logical_type(&lt);
    char *qn = sql_quote_ident(name ? name : "?column?");
    if (ct.binary_ok) {
      sql_strbuf_addf(&b, "%s#%zu AS %s", i ? ", " : "", i + 1, qn ? qn : "\"x\"");
    } else {
      wrap = true;
      sql_strbuf_addf(&b, "%sCAST(#%zu AS VARCHAR) AS %s", i ? ", " : "", i + 1, qn ? qn : "\"x\"");
    }
    free(qn);
    duckdb_free((void *)name);
  }
  if (!wrap) {
    sql_strbuf_free(&b);
    return MR_OK;
  }
  sql_strbuf_addf(&b, " FROM (%s) AS __moraine_copy", sql);
  char *wrapped = sql_strbuf_take(&b);
  if (wrapped == NULL)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  else
    rc = sql_prepare(s->con, wrapped, &q->wrapped, err);
  free(wrapped);
  if (rc)
    duckdb_destroy_prepare(&q->ps);
  return rc;
}

/* Runs the read and streams its rows; with rec, also records them. */
static mr_status copy_out_run(sql_session *s, const char *query, const sql_sink *sink,
                              sql_record *rec, uint64_t *nrows, size_t *ncols_out,
                              sql_error *err) {
  sql_cached_query *q;
  mr_status rc = sql_query_cached(s, SQL_CACHE_COPY_BINARY, query, make_binary, &q, err);
  if (rc)
    return rc;
  duckdb_result r;
  /* rows leave as they are made */
  rc = sql_execute_streaming(q->wrapped ? q->wrapped : q->ps, &r, err);
  if (rc)
    return rc;
  size_t ncols = duckdb_column_count(&r);
  *ncols_out = ncols;
  pg_coltype *types = NULL;
  rc = result_coltypes(&r, &types, err);
  if (rc == MR_OK && SQL_SINK_CALL(sink, copy_out_begin, true, ncols))
    rc = sql_fail_lost(err);
  sql_strbuf b = {0};
  sql_strbuf_addn(&b, pgcopy_signature, sizeof pgcopy_signature);
  sql_strbuf_add_be32(&b, 0); /* flags */
  sql_strbuf_add_be32(&b, 0); /* header extension length */
  duckdb_data_chunk chunk;
  while (rc == MR_OK && (chunk = duckdb_fetch_chunk(r)) != NULL) {
    idx_t n = duckdb_data_chunk_get_size(chunk);
    duckdb_vector *vecs = calloc(ncols ? ncols : 1, sizeof *vecs);
    if (vecs == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    for (size_t c = 0; vecs && c < ncols; c++)
      vecs[c] = duckdb_data_chunk_get_vector(chunk, c);
    for (idx_t row = 0; rc == MR_OK && row < n; row++) {
      sql_strbuf_add_be16(&b, (uint16_t)ncols);
      for (size_t c = 0; c < ncols; c++)
        pg_encode_binary(&b, &types[c], vecs[c], row);
      (*nrows)++;
      if (b.len >= COPY_CHUNK)
        rc = flush_out(sink, &b, rec, err);
    }
    free(vecs);
    duckdb_destroy_data_chunk(&chunk);
  }
  if (rc == MR_OK) {
    sql_strbuf_add_be16(&b, 0xFFFF); /* trailer */
    rc = flush_out(sink, &b, rec, err);
  }
  if (rc == MR_OK && SQL_SINK_CALL0(sink, copy_done))
    rc = sql_fail_lost(err);
  sql_strbuf_free(&b);
  free(types);
  duckdb_destroy_result(&r);
  return rc;
}

/* A binary COPY: from the result cache when pure and allowed, else run
 * (and recorded for the cache when it may keep the answer). */
static mr_status copy_out_binary(sql_session *s, const char *query, bool pure,
                                 const sql_sink *sink, uint64_t *nrows, sql_error *err) {
  uint64_t gen = 0;
  bool cacheable = pure && sql_session_result_gen(s, &gen);
  if (cacheable && s->refresher &&
      sql_rcache_has(s->e->rcache, SQL_ANSWER_COPY_BINARY, query, gen))
    return MR_OK; /* a client read it first; the refresher's sink sends nothing */
  if (cacheable) {
    const sql_rentry *kept = sql_rcache_get(s->e->rcache, SQL_ANSWER_COPY_BINARY, query, gen);
    if (kept) {
      mr_status rc = sql_kept_copy_send(kept, sink, nrows, err);
      sql_rcache_release(s->e->rcache, kept);
      return rc;
    }
  }
  sql_record rec = {.on = cacheable, .max = sql_rcache_entry_max(s->e->rcache)};
  size_t ncols = 0;
  mr_status rc = copy_out_run(s, query, sink, cacheable ? &rec : NULL, nrows, &ncols, err);
  if (rc != MR_OK)
    rec.on = false;
  sql_record_keep(s, &rec, SQL_ANSWER_COPY_BINARY, query, gen, ncols, *nrows);
  return rc;
}

/* COPY text escaping of one field. */
static void add_text_field(sql_strbuf *out, const char *p, size_t n, char delim) {
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (ch == '\\')
      sql_strbuf_add(out, "\\\\");
    else if (ch == '\n')
      sql_strbuf_add(out, "\\n");
    else if (ch == '\r')
      sql_strbuf_add(out, "\\r");
    else if (ch == '\t' && delim == '\t')
      sql_strbuf_add(out, "\\t");
    else if (ch == delim)
      sql_strbuf_addf(out, "\\%c", delim);
    else
      sql_strbuf_addn(out, &ch, 1);
  }
}

static mr_status copy_out_text(sql_session *s, const sql_copy_stmt *c, const char *sql,
                               const sql_sink *sink, uint64_t *nrows, sql_error *err) {
  duckdb_result r;
  if (duckdb_query(s->con, sql, &r) != DuckDBSuccess) {
    mr_status rc = sql_fail_duckdb(err, duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return rc;
  }
  size_t ncols = duckdb_column_count(&r);
  pg_coltype *types = NULL;
  mr_status rc = result_coltypes(&r, &types, err);
  if (rc == MR_OK && SQL_SINK_CALL(sink, copy_out_begin, false, ncols))
    rc = sql_fail_lost(err);
  sql_strbuf b = {0}, cell = {0};
  idx_t n = duckdb_row_count(&r);
  for (idx_t row = 0; rc == MR_OK && row < n; row++) {
    for (size_t col = 0; col < ncols; col++) {
      if (col)
        sql_strbuf_addn(&b, &c->delim, 1);
      if (duckdb_value_is_null(&r, col, row)) {
        sql_strbuf_add(&b, c->null_str);
        continue;
      }
      sql_strbuf_reset(&cell);
      pg_format_text(&cell, &types[col], &r, col, row);
      add_text_field(&b, cell.data ? cell.data : "", cell.len, c->delim);
    }
    sql_strbuf_add(&b, "\n");
    (*nrows)++;
    if (b.len >= COPY_CHUNK)
      rc = flush_out(sink, &b, NULL, err);
  }
  if (rc == MR_OK)
    rc = flush_out(sink, &b, NULL, err);
  if (rc == MR_OK && SQL_SINK_CALL0(sink, copy_done))
    rc = sql_fail_lost(err);
  sql_strbuf_free(&b);
  sql_strbuf_free(&cell);
  free(types);
  duckdb_destroy_result(&r);
  return rc;
}

mr_status sql_copy_out(sql_session *s, const sql_copy_stmt *c, bool pure, const sql_sink *sink,
                       uint64_t *nrows, sql_error *err) {
  *nrows = 0;
  if (c->format == SQL_COPY_CSV)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "COPY with FORMAT csv is not supported");
  if (c->format == SQL_COPY_BINARY)
    return copy_out_binary(s, c->query, pure, sink, nrows, err);
  char *sql;
  mr_status rc = sql_rewrite(c->query, &sql, err);
  if (rc)
    return rc;
  rc = copy_out_text(s, c, sql, sink, nrows, err);
  free(sql);
  return rc;
}

/* ---- COPY FROM STDIN ---------------------------------------------------- */

typedef struct copy_in {
  duckdb_appender app;
  size_t ncols;
  pg_coltype *types;
  sql_strbuf pending; /* bytes not yet parsed */
  bool header_done;
  bool finished; /* trailer or \. seen */
  uint64_t rows;
  sql_strbuf tmp;
} copy_in;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t be64(const uint8_t *p) {
  return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static mr_status bad_binary(sql_error *err, size_t col) {
  return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_BINARY_REPRESENTATION,
                  "incorrect binary data format in column %zu", col + 1);
}

static mr_status append_binary(copy_in *ci, size_t col, const uint8_t *p, size_t n,
                               sql_error *err) {
  duckdb_appender a = ci->app;
  duckdb_state st = DuckDBSuccess;
  const pg_coltype *ct = &ci->types[col];
  switch (ct->oid) {
  case 16:
    if (n != 1)
      return bad_binary(err, col);
    st = duckdb_append_bool(a, p[0] != 0);
    break;
  case 21:
    if (n != 2)
      return bad_binary(err, col);
    st = duckdb_append_int16(a, (int16_t)(p[0] << 8 | p[1]));
    break;
  case 23:
    if (n != 4)
      return bad_binary(err, col);
    st = duckdb_append_int32(a, (int32_t)be32(p));
    break;
  case 20:
    if (n != 8)
      return bad_binary(err, col);
    st = duckdb_append_int64(a, (int64_t)be64(p));
    break;
  case 700: {
    if (n != 4)
      return bad_binary(err, col);
    uint32_t bits = be32(p);
    float f;
    memcpy(&f, &bits, 4);
    st = duckdb_append_float(a, f);
    break;
  }
  case 701: {
    if (n != 8)
      return bad_binary(err, col);
    uint64_t bits = be64(p);
    double d;
    memcpy(&d, &bits, 8);
    st = duckdb_append_double(a, d);
    break;
  }
  case 17:
    st = duckdb_append_blob(a, p, n);
    break;
  case 1082: {
    if (n != 4)
      return bad_binary(err, col);
    int32_t d = (int32_t)be32(p);
    duckdb_date dd = {d == INT32_MAX ? INT32_MAX : d == INT32_MIN ? -INT32_MAX : d + PG_EPOCH_DAYS};
    st = duckdb_append_date(a, dd);
    break;
  }
  case 1083: {
    if (n != 8)
      return bad_binary(err, col);
    duckdb_time t = {(int64_t)be64(p)};
    st = duckdb_append_time(a, t);
    break;
  }
  case 1114:
  case 1184: {
    if (n != 8)
      return bad_binary(err, col);
    int64_t us = (int64_t)be64(p);
    duckdb_timestamp ts = {us == INT64_MAX   ? INT64_MAX
                           : us == INT64_MIN ? -INT64_MAX
                                             : us + PG_EPOCH_MICROS};
    if (ct->oid == 1114) {
      st = duckdb_append_timestamp(a, ts);
    } else {
      duckdb_value v = duckdb_create_timestamp_tz(ts);
      st = duckdb_append_value(a, v);
      duckdb_destroy_value(&v);
    }
    break;
  }
  case 1186: {
    if (n != 16)
      return bad_binary(err, col);
    duckdb_interval iv = {(int32_t)be32(p + 12), (int32_t)be32(p + 8), (int64_t)be64(p)};
    st = duckdb_append_interval(a, iv);
    break;
  }
  case 2950: {
    if (n != 16)
      return bad_binary(err, col);
    char u[40];
    snprintf(u, sizeof u, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13],
             p[14], p[15]);
    st = duckdb_append_varchar(a, u);
    break;
  }
  case 1700:
    sql_strbuf_reset(&ci->tmp);
    if (!pg_decode_numeric(p, n, &ci->tmp) || ci->tmp.failed)
      return bad_binary(err, col);
    st = duckdb_append_varchar_length(a, ci->tmp.data, ci->tmp.len);
    break;
  case 3802:
    if (n < 1 || p[0] != 1)
      return bad_binary(err, col);
    st = duckdb_append_varchar_length(a, (const char *)p + 1, n - 1);
    break;
  default: /* text, varchar, json, name and every text-typed column */
    st = duckdb_append_varchar_length(a, (const char *)p, n);
    break;
  }
  if (st != DuckDBSuccess)
    return sql_fail_duckdb(err, duckdb_appender_error(a));
  return MR_OK;
}

/* Parses whole tuples from ci->pending; leaves a partial tuple there. */
static mr_status parse_binary(copy_in *ci, sql_error *err) {
  const uint8_t *p = (const uint8_t *)ci->pending.data;
  size_t n = ci->pending.len, at = 0;
  mr_status rc = MR_OK;
  if (!ci->header_done) {
    if (n < 19)
      return MR_OK;
    if (memcmp(p, pgcopy_signature, sizeof pgcopy_signature) != 0)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_BAD_COPY_FILE_FORMAT,
                      "COPY file signature not recognized");
    uint32_t ext = be32(p + 15);
    if (n < 19 + (size_t)ext)
      return MR_OK;
    at = 19 + ext;
    ci->header_done = true;
  }
  while (rc == MR_OK && !ci->finished && n - at >= 2) {
    int16_t nf = (int16_t)(p[at] << 8 | p[at + 1]);
    if (nf == -1) {
      ci->finished = true;
      at += 2;
      break;
    }
    if ((size_t)nf != ci->ncols)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_BAD_COPY_FILE_FORMAT,
                      "row field count is %d, expected %zu", nf, ci->ncols);
    /* is the whole tuple here? */
    size_t q = at + 2;
    bool whole = true;
    for (size_t c = 0; c < ci->ncols; c++) {
      if (n - q < 4) {
        whole = false;
        break;
      }
      uint32_t len = be32(p + q);
      q += 4;
      if (len == 0xFFFFFFFFu)
        continue;
      if (len > n - q) {
        whole = false;
        break;
      }
      q += len;
    }
    if (!whole)
      break;
    q = at + 2;
    for (size_t c = 0; c < ci->ncols && rc == MR_OK; c++) {
      uint32_t len = be32(p + q);
      q += 4;
      if (len == 0xFFFFFFFFu) {
        if (duckdb_append_null(ci->app) != DuckDBSuccess)
          rc = sql_fail_duckdb(err, duckdb_appender_error(ci->app));
        continue;
      }
      rc = append_binary(ci, c, p + q, len, err);
      q += len;
    }
    if (rc == MR_OK && duckdb_appender_end_row(ci->app) != DuckDBSuccess)
      rc = sql_fail_duckdb(err, duckdb_appender_error(ci->app));
    ci->rows++;
    at = q;
  }
  memmove(ci->pending.data, ci->pending.data + at, n - at);
  ci->pending.len = n - at;
  return rc;
}

/* COPY text de-escaping of one field into ci->tmp. */
static void unescape_text(copy_in *ci, const char *p, size_t n) {
  sql_strbuf_reset(&ci->tmp);
  for (size_t i = 0; i < n; i++) {
    if (p[i] != '\\' || i + 1 >= n) {
      sql_strbuf_addn(&ci->tmp, &p[i], 1);
      continue;
    }
    char e = p[++i];
    char out = e;
    switch (e) {
    case 'n':
      out = '\n';
      break;
    case 't':
      out = '\t';
      break;
    case 'r':
      out = '\r';
      break;
    case 'b':
      out = '\b';
      break;
    case 'f':
      out = '\f';
      break;
    case 'v':
      out = '\v';
      break;
    default:
      if (e >= '0' && e <= '7') {
        int v = e - '0';
        for (int k = 0; k < 2 && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '7'; k++)
          v = v * 8 + (p[++i] - '0');
        out = (char)v;
      }
    }
    sql_strbuf_addn(&ci->tmp, &out, 1);
  }
}

static mr_status parse_text(copy_in *ci, const sql_copy_stmt *c, sql_error *err) {
  char *p = ci->pending.data;
  size_t n = ci->pending.len, at = 0;
  mr_status rc = MR_OK;
  while (rc == MR_OK && !ci->finished) {
    char *nl = memchr(p + at, '\n', n - at);
    if (nl == NULL)
      break;
    size_t end = (size_t)(nl - p);
    size_t len = end - at;
    if (len > 0 && p[end - 1] == '\r')
      len--;
    if (len == 2 && p[at] == '\\' && p[at + 1] == '.') {
      ci->finished = true;
      at = end + 1;
      break;
    }
    size_t col = 0, f = at;
    for (size_t i = at; i <= at + len && rc == MR_OK; i++) {
      if (i < at + len && p[i] == '\\') {
        i++;
        continue;
      }
      if (i < at + len && p[i] != c->delim)
        continue;
      if (col >= ci->ncols) {
        rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_BAD_COPY_FILE_FORMAT,
                      "extra data after last expected column");
        break;
      }
      size_t flen = i - f;
      duckdb_state st;
      if (flen == strlen(c->null_str) && memcmp(p + f, c->null_str, flen) == 0) {
        st = duckdb_append_null(ci->app);
      } else {
        unescape_text(ci, p + f, flen);
        if (ci->types[col].oid == 17) {
          sql_strbuf raw = {0};
          bool ok = pg_bytea_decode(ci->tmp.data ? ci->tmp.data : "", ci->tmp.len, &raw);
          st = ok ? duckdb_append_blob(ci->app, raw.data ? raw.data : "", raw.len) : DuckDBError;
          sql_strbuf_free(&raw);
        } else {
          st = duckdb_append_varchar_length(ci->app, ci->tmp.data ? ci->tmp.data : "", ci->tmp.len);
        }
      }
      if (st != DuckDBSuccess) {
        const char *msg = duckdb_appender_error(ci->app);
        rc = msg ? sql_fail_duckdb(err, msg)
                 : sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                            "invalid input in column %zu", col + 1);
      }
      col++;
      f = i + 1;
    }
    if (rc == MR_OK && col != ci->ncols)
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_BAD_COPY_FILE_FORMAT,
                    "missing data for column %zu", col + 1);
    if (rc == MR_OK && duckdb_appender_end_row(ci->app) != DuckDBSuccess)
      rc = sql_fail_duckdb(err, duckdb_appender_error(ci->app));
    ci->rows++;
    at = end + 1;
  }
  memmove(ci->pending.data, ci->pending.data + at, n - at);
  ci->pending.len = n - at;
  return rc;
}

static mr_status run_sql(sql_session *s, const char *sql, sql_error *err) {
  duckdb_result r;
  mr_status rc = MR_OK;
  if (duckdb_query(s->con, sql, &r) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  duckdb_destroy_result(&r);
  return rc;
}

/* Reads the rest of the client's copy stream so the connection stays in
 * step after an error (CopyDone / CopyFail end it). */
static void drain(const sql_sink *sink) {
  const uint8_t *d;
  size_t n;
  char msg[8];
  while (SQL_SINK_CALL(sink, copy_in_read, &d, &n, msg, sizeof msg) > 0) {
  }
}

/* The select list that creates a staging table for `from` (a table or
 * column list query): pg_bytea columns become BLOB there, because DuckDB's
 * appender does not use registered casts. */
char *sql_stage_select(duckdb_connection con, const char *select_sql, sql_error *err) {
  duckdb_prepared_statement ps;
  if (duckdb_prepare(con, select_sql, &ps) != DuckDBSuccess) {
    sql_fail_duckdb(err, duckdb_prepare_error(ps));
    duckdb_destroy_prepare(&ps);
    return NULL;
  }
  sql_strbuf b = {0};
  size_t n = duckdb_prepared_statement_column_count(ps);
  for (size_t i = 0; i < n; i++) {
    const char *name = duckdb_prepared_statement_column_name(ps, i);
    duckdb_logical_type lt = duckdb_prepared_statement_column_logical_type(ps, i);
    char *alias = duckdb_logical_type_get_alias(lt);
    char *q = sql_quote_ident(name ? name : "?");
    if (alias && strcmp(alias, "pg_bytea") == 0)
      sql_strbuf_addf(&b, "%sCAST(%s AS BLOB) AS %s", i ? ", " : "", q ? q : "", q ? q : "");
    else
      sql_strbuf_addf(&b, "%s%s", i ? ", " : "", q ? q : "");
    free(q);
    if (alias)
      duckdb_free(alias);
    duckdb_destroy_logical_type(&lt);
    duckdb_free((void *)name);
  }
  duckdb_destroy_prepare(&ps);
  char *out = sql_strbuf_take(&b);
  if (out == NULL)
    sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return out;
}

mr_status sql_copy_in(sql_session *s, const sql_copy_stmt *c, const sql_sink *sink, uint64_t *nrows,
                      sql_error *err) {
  *nrows = 0;
  if (c->format == SQL_COPY_CSV)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "COPY with FORMAT csv is not supported");
  const char *schema = c->schema;
  /* unqualified names resolve through the search path (temp tables first) */
  char *qs = sql_quote_ident(schema ? schema : ""), *qt = sql_quote_ident(c->table);
  if (schema == NULL && qs) {
    free(qs);
    qs = NULL;
  }
  char *qname;
  {
    sql_strbuf nb = {0};
    if (schema)
      sql_strbuf_addf(&nb, "%s.%s", qs ? qs : "", qt ? qt : "");
    else
      sql_strbuf_addf(&nb, "%s", qt ? qt : "");
    qname = sql_strbuf_take(&nb);
  }
  sql_strbuf cols = {0};
  for (size_t i = 0; i < c->ncols; i++) {
    char *q = sql_quote_ident(c->cols[i]);
    sql_strbuf_addf(&cols, "%s%s", i ? ", " : "", q ? q : "");
    free(q);
  }
  char *collist = c->ncols ? sql_strbuf_take(&cols) : (sql_strbuf_free(&cols), sql_strdup("*"));
  sql_strbuf q = {0};
  sql_strbuf_addf(&q, "SELECT %s FROM %s LIMIT 0", collist ? collist : "*", qname ? qname : "");
  char *probe = sql_strbuf_take(&q);
  char *stage_cols = probe ? sql_stage_select(s->con, probe, err) : NULL;
  mr_status rc = MR_OK;
  if (stage_cols == NULL)
    rc = err && err->base.code ? err->base.code : MR_ERR_NOMEM;
  free(probe);
  if (rc == MR_OK) {
    sql_strbuf_addf(
        &q, "CREATE OR REPLACE TEMP TABLE __moraine_copy_stage AS SELECT %s FROM %s LIMIT 0",
        stage_cols, qname ? qname : "");
    char *create = sql_strbuf_take(&q);
    rc = (!qname || !qt || !collist || !create)
             ? sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory")
             : run_sql(s, create, err);
    free(create);
  }
  free(stage_cols);
  copy_in ci = {0};
  if (rc == MR_OK && duckdb_appender_create_ext(s->con, "temp", "main", "__moraine_copy_stage",
                                                &ci.app) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_appender_error(ci.app));
  }
  if (rc == MR_OK) {
    ci.ncols = duckdb_appender_column_count(ci.app);
    ci.types = calloc(ci.ncols ? ci.ncols : 1, sizeof *ci.types);
    if (ci.types == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < ci.ncols; i++) {
      duckdb_logical_type lt = duckdb_appender_column_type(ci.app, i);
      pg_coltype_of(lt, NULL, &ci.types[i]);
      duckdb_destroy_logical_type(&lt);
    }
  }
  if (rc) {
    /* the client has not been told to send yet: nothing to drain */
    if (ci.app)
      duckdb_appender_destroy(&ci.app);
    free(ci.types);
    free(qs);
    free(qt);
    free(qname);
    free(collist);
    return rc;
  }
  if (SQL_SINK_CALL(sink, copy_in_begin, c->format == SQL_COPY_BINARY, ci.ncols))
    rc = sql_fail_lost(err);
  while (rc == MR_OK) {
    const uint8_t *d;
    size_t n;
    char msg[256] = "";
    int got = SQL_SINK_CALL(sink, copy_in_read, &d, &n, msg, sizeof msg);
    if (got < 0) {
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_QUERY_CANCELED, "COPY from stdin failed: %s",
                    msg[0] ? msg : "connection lost");
      break;
    }
    if (got == 0)
      break;
    if (ci.finished)
      continue; /* data after the trailer is ignored, as PostgreSQL does */
    sql_strbuf_addn(&ci.pending, d, n);
    if (ci.pending.failed) {
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      drain(sink);
      break;
    }
    rc = c->format == SQL_COPY_BINARY ? parse_binary(&ci, err) : parse_text(&ci, c, err);
    if (rc)
      drain(sink);
  }
  if (rc == MR_OK && c->format == SQL_COPY_BINARY && (ci.pending.len > 0 || !ci.header_done))
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_BAD_COPY_FILE_FORMAT,
                  "unexpected end of binary COPY data");
  if (rc == MR_OK && c->format == SQL_COPY_TEXT && ci.pending.len > 0 && !ci.finished) {
    sql_strbuf_add(&ci.pending, "\n"); /* last line without newline */
    rc = parse_text(&ci, c, err);
  }
  if (duckdb_appender_destroy(&ci.app) != DuckDBSuccess && rc == MR_OK)
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                  "COPY rows could not be stored");
  if (rc == MR_OK) {
    sql_strbuf ins = {0};
    if (c->ncols)
      sql_strbuf_addf(&ins, "INSERT INTO %s (%s) SELECT * FROM temp.main.__moraine_copy_stage",
                      qname, collist);
    else
      sql_strbuf_addf(&ins, "INSERT INTO %s SELECT * FROM temp.main.__moraine_copy_stage", qname);
    char *insert = sql_strbuf_take(&ins);
    sql_dml_target d = {.schema = (char *)schema, .table = c->table, .op = SQL_CHANGE_INSERT};
    rc = insert ? sql_run_dml(s, insert, &d, nrows, err)
                : sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    free(insert);
  }
  sql_error ignore;
  if (run_sql(s, "DROP TABLE IF EXISTS temp.main.__moraine_copy_stage", &ignore)) {
  }
  sql_strbuf_free(&ci.pending);
  sql_strbuf_free(&ci.tmp);
  free(ci.types);
  free(qs);
  free(qt);
  free(qname);
  free(collist);
  return rc;
}
