/*
 * sql_keep.c — an answer recorded for the result cache (sql_rcache.h) as
 * it is sent, kept when the rows it read were the engine's rows all along,
 * and a kept answer sent again: a binary COPY's CopyData chunks, or a
 * SELECT's RowDescription and DataRows.
 *
 * A kept SELECT is chunk 0 its RowDescription (per column: the name and
 * its NUL, then type OID u32, length i16, typmod i32, format i16), then one
 * chunk per DataRow (per column an i32 length, -1 for NULL, then the
 * bytes); native byte order, for these bytes never leave the process.
 */
#include <stdlib.h>
#include <string.h>

#include "base/mr_grow.h"
#include "sql/sql_internal.h"
#include "sql/sql_state.h"

void sql_record_free(sql_record *rec) {
  sql_strbuf_free(&rec->bytes);
  free(rec->chunks);
  rec->chunks = NULL;
  rec->nchunks = rec->cap = 0;
}

void sql_record_add(sql_record *rec, const void *data, size_t len) {
  if (rec == NULL || !rec->on)
    return;
  if (rec->bytes.len + len > rec->max ||
      mr_grow((void **)&rec->chunks, &rec->cap, (rec->nchunks + 1) * sizeof *rec->chunks,
              8 * sizeof *rec->chunks) != MR_OK) {
    rec->on = false; /* not kept: what was recorded goes now, not after the read */
    sql_record_free(rec);
    return;
  }
  sql_strbuf_addn(&rec->bytes, data, len);
  rec->chunks[rec->nchunks++] = len;
  if (rec->bytes.failed) {
    rec->on = false;
    sql_record_free(rec);
  }
}

void sql_record_keep(sql_session *s, sql_record *rec, sql_answer_kind kind, const char *key,
                     uint64_t gen, size_t ncols, uint64_t nrows) {
  /* kept only if no change to the rows began or ended while it ran */
  uint64_t gen_after;
  if (rec->on && sql_session_result_gen(s, &gen_after) && gen_after == gen) {
    size_t len = rec->bytes.len;
    uint8_t *bytes = (uint8_t *)sql_strbuf_take(&rec->bytes);
    uint8_t *fit = bytes ? realloc(bytes, len + 1) : NULL; /* the budget counts len */
    if (fit)
      bytes = fit;
    if (bytes) {
      if (sql_rcache_put(s->e->rcache, kind, key, gen, bytes, len, rec->chunks, rec->nchunks, ncols,
                         nrows))
        s->rcache_kept++;
      rec->chunks = NULL; /* the cache's now, kept or freed */
    }
  }
  sql_record_free(rec);
}

mr_status sql_kept_copy_send(const sql_rentry *r, const sql_sink *sink, uint64_t *nrows,
                             sql_error *err) {
  if (SQL_SINK_CALL(sink, copy_out_begin, true, r->ncols))
    return sql_fail_lost(err);
  size_t at = 0;
  for (size_t i = 0; i < r->nchunks; i++) {
    if (SQL_SINK_CALL(sink, copy_data, r->bytes + at, r->chunks[i]))
      return sql_fail_lost(err);
    at += r->chunks[i];
  }
  if (SQL_SINK_CALL0(sink, copy_done))
    return sql_fail_lost(err);
  *nrows = r->nrows;
  return MR_OK;
}

/* ---- SELECT ------------------------------------------------------------- */

static int rec_row_description(void *ctx, size_t ncols, const sql_column *cols) {
  sql_select_recorder *r = ctx;
  if (r->rec.on) {
    sql_strbuf *b = &r->row;
    sql_strbuf_reset(b);
    for (size_t i = 0; i < ncols; i++) {
      const char *name = cols[i].name ? cols[i].name : "";
      sql_strbuf_addn(b, name, strlen(name) + 1);
      sql_strbuf_addn(b, &cols[i].type_oid, sizeof cols[i].type_oid);
      sql_strbuf_addn(b, &cols[i].type_len, sizeof cols[i].type_len);
      sql_strbuf_addn(b, &cols[i].typmod, sizeof cols[i].typmod);
      sql_strbuf_addn(b, &cols[i].format, sizeof cols[i].format);
    }
    if (b->failed)
      r->rec.on = false;
    sql_record_add(&r->rec, b->data, b->len);
    r->ncols = ncols;
  }
  return SQL_SINK_CALL(r->inner, row_description, ncols, cols);
}

static int rec_data_row(void *ctx, size_t ncols, const char *const *vals, const size_t *lens) {
  sql_select_recorder *r = ctx;
  if (r->rec.on) {
    sql_strbuf *b = &r->row;
    sql_strbuf_reset(b);
    for (size_t i = 0; i < ncols; i++) {
      int32_t n = vals[i] ? (int32_t)lens[i] : -1;
      if (vals[i] && (size_t)n != lens[i])
        r->rec.on = false; /* no DataRow field is this long; never kept */
      sql_strbuf_addn(b, &n, sizeof n);
      if (vals[i])
        sql_strbuf_addn(b, vals[i], lens[i]);
    }
    if (b->failed)
      r->rec.on = false;
    sql_record_add(&r->rec, b->data, b->len);
  }
  return SQL_SINK_CALL(r->inner, data_row, ncols, vals, lens);
}

void sql_select_recorder_init(sql_select_recorder *r, const sql_sink *inner, size_t max) {
  memset(r, 0, sizeof *r);
  r->inner = inner;
  r->rec.on = true;
  r->rec.max = max;
  r->sink = (sql_sink){.ctx = r, .row_description = rec_row_description, .data_row = rec_data_row};
}

void sql_select_recorder_keep(sql_session *s, sql_select_recorder *r, const char *key, uint64_t gen,
                              uint64_t nrows) {
  if (key)
    sql_record_keep(s, &r->rec, SQL_ANSWER_SELECT, key, gen, r->ncols, nrows);
  sql_record_free(&r->rec);
  sql_strbuf_free(&r->row);
}

mr_status sql_kept_select_send(const sql_rentry *r, const sql_sink *sink, uint64_t *nrows,
                               sql_error *err) {
  *nrows = 0;
  if (r->nchunks == 0)
    return MR_OK; /* no columns: neither description nor rows */
  size_t n = r->ncols ? r->ncols : 1;
  sql_column *cols = calloc(n, sizeof *cols);
  const char **vals = calloc(n, sizeof *vals);
  size_t *lens = calloc(n, sizeof *lens);
  mr_status rc = MR_OK;
  if (!cols || !vals || !lens)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  const uint8_t *p = r->bytes;
  for (size_t i = 0; rc == MR_OK && i < r->ncols; i++) {
    cols[i].name = (const char *)p;
    p += strlen((const char *)p) + 1;
    memcpy(&cols[i].type_oid, p, sizeof cols[i].type_oid);
    p += sizeof cols[i].type_oid;
    memcpy(&cols[i].type_len, p, sizeof cols[i].type_len);
    p += sizeof cols[i].type_len;
    memcpy(&cols[i].typmod, p, sizeof cols[i].typmod);
    p += sizeof cols[i].typmod;
    memcpy(&cols[i].format, p, sizeof cols[i].format);
    p += sizeof cols[i].format;
  }
  if (rc == MR_OK && SQL_SINK_CALL(sink, row_description, r->ncols, cols))
    rc = sql_fail_lost(err);
  p = r->bytes + r->chunks[0];
  for (size_t row = 1; rc == MR_OK && row < r->nchunks; row++) {
    for (size_t i = 0; i < r->ncols; i++) {
      int32_t len;
      memcpy(&len, p, sizeof len);
      p += sizeof len;
      vals[i] = len < 0 ? NULL : (const char *)p;
      lens[i] = len < 0 ? 0 : (size_t)len;
      p += lens[i];
    }
    if (SQL_SINK_CALL(sink, data_row, r->ncols, vals, lens))
      rc = sql_fail_lost(err);
  }
  if (rc == MR_OK)
    *nrows = r->nrows;
  free(cols);
  free(vals);
  free(lens);
  return rc;
}
