/*
 * pg_buf.c — message writing (pg_buf), reading (pg_reader) and body
 * parsing (pg_msg) for the PostgreSQL v3 protocol. See pg_buf.h.
 */
#include "pgwire/pg_buf.h"

#include "base/mr_grow.h"
#include "pgwire/pg_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- pg_buf ------------------------------------------------------------- */

static bool reserve(pg_buf *b, size_t extra) {
  if (b->failed)
    return false;
  void *d = b->data;
  if (extra > SIZE_MAX - b->len || mr_grow(&d, &b->cap, b->len + extra, 8192) != MR_OK) {
    b->failed = true;
    return false;
  }
  b->data = d;
  return true;
}

void pg_buf_bytes(pg_buf *b, const void *p, size_t n) {
  if (!reserve(b, n))
    return;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
}

void pg_buf_u8(pg_buf *b, uint8_t v) {
  pg_buf_bytes(b, &v, 1);
}

void pg_buf_i16(pg_buf *b, int16_t v) {
  uint8_t x[2] = {(uint8_t)((uint16_t)v >> 8), (uint8_t)v};
  pg_buf_bytes(b, x, 2);
}

void pg_buf_i32(pg_buf *b, int32_t v) {
  uint32_t u = (uint32_t)v;
  uint8_t x[4] = {(uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u};
  pg_buf_bytes(b, x, 4);
}

void pg_buf_str(pg_buf *b, const char *s) {
  pg_buf_bytes(b, s, strlen(s) + 1);
}

void pg_buf_begin(pg_buf *b, char type) {
  b->msg_start = b->len;
  b->open = true;
  pg_buf_u8(b, (uint8_t)type);
  pg_buf_i32(b, 0); /* patched by pg_buf_end */
}

void pg_buf_end(pg_buf *b) {
  if (!b->open)
    return;
  b->open = false;
  if (b->failed)
    return;
  size_t body = b->len - b->msg_start - 1; /* length counts itself, not the type */
  if (body > INT32_MAX) {
    b->failed = true;
    return;
  }
  uint32_t u = (uint32_t)body;
  uint8_t *p = b->data + b->msg_start + 1;
  p[0] = (uint8_t)(u >> 24);
  p[1] = (uint8_t)(u >> 16);
  p[2] = (uint8_t)(u >> 8);
  p[3] = (uint8_t)u;
}

mr_status pg_buf_flush(pg_buf *b, pg_io *io, mr_error *err) {
  if (b->failed) {
    b->len = 0;
    return mr_fail(err, MR_ERR_NOMEM, "out of memory building a message");
  }
  size_t off = 0;
  while (off < b->len) {
    ssize_t n = pg_io_write(io, b->data + off, b->len - off);
    if (n <= 0) {
      b->len = 0;
      return mr_fail(err, MR_ERR_IO, "send: %s", n < 0 ? strerror(errno) : "closed");
    }
    off += (size_t)n;
  }
  b->len = 0;
  return MR_OK;
}

void pg_buf_free(pg_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* ---- pg_msg ------------------------------------------------------------- */

const uint8_t *pg_msg_bytes(pg_msg *m, size_t n) {
  if (m->bad || n > m->len - m->pos) {
    m->bad = true;
    return NULL;
  }
  const uint8_t *p = m->data + m->pos;
  m->pos += n;
  return p;
}

uint8_t pg_msg_u8(pg_msg *m) {
  const uint8_t *p = pg_msg_bytes(m, 1);
  return p ? p[0] : 0;
}

int16_t pg_msg_i16(pg_msg *m) {
  const uint8_t *p = pg_msg_bytes(m, 2);
  return p ? (int16_t)(uint16_t)(p[0] << 8 | p[1]) : 0;
}

int32_t pg_msg_i32(pg_msg *m) {
  const uint8_t *p = pg_msg_bytes(m, 4);
  return p ? (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
           : 0;
}

const char *pg_msg_str(pg_msg *m) {
  if (m->bad)
    return "";
  const uint8_t *start = m->data + m->pos;
  const uint8_t *nul = memchr(start, 0, m->len - m->pos);
  if (nul == NULL) {
    m->bad = true;
    return "";
  }
  m->pos += (size_t)(nul - start) + 1;
  return (const char *)start;
}

bool pg_msg_at_end(const pg_msg *m) {
  return m->pos == m->len;
}

void pg_msg_free(pg_msg *m) {
  free(m->data);
  memset(m, 0, sizeof *m);
}

/* ---- pg_reader ---------------------------------------------------------- */

/* Copies n bytes out of the socket; *eof_clean when EOF came before any. */
static mr_status read_exact(pg_reader *r, void *out, size_t n, bool *eof_clean, mr_error *err) {
  uint8_t *o = out;
  size_t got = 0;
  if (eof_clean)
    *eof_clean = false;
  while (got < n) {
    if (r->pos < r->have) {
      size_t take = r->have - r->pos < n - got ? r->have - r->pos : n - got;
      memcpy(o + got, r->buf + r->pos, take);
      r->pos += take;
      got += take;
      continue;
    }
    ssize_t k = pg_io_read(r->io, r->buf, sizeof r->buf);
    if (k < 0)
      return mr_fail(err, MR_ERR_IO, "read: %s", strerror(errno));
    if (k == 0) {
      if (got == 0 && eof_clean) {
        *eof_clean = true;
        return mr_fail(err, MR_ERR_CLOSED, "client closed the connection");
      }
      return mr_fail(err, MR_ERR_IO, "connection closed inside a message");
    }
    r->have = (size_t)k;
    r->pos = 0;
  }
  return MR_OK;
}

/* The first piece of a body is read into at most this much memory; the
 * buffer then doubles as bytes arrive, so memory follows what the client
 * really sent, never only what it declared. */
#define READ_STEP ((size_t)64 * 1024)

static mr_status read_body(pg_reader *r, uint32_t declared, size_t limit, pg_msg *out,
                           mr_error *err) {
  if (declared < 4)
    return mr_fail(err, MR_ERR_INVALID, "invalid message length %u", declared);
  size_t n = declared - 4;
  if (n > limit)
    return mr_fail(err, MR_ERR_INVALID, "message of %u bytes exceeds the %zu-byte limit", declared,
                   limit);
  size_t cap = n < READ_STEP ? n : READ_STEP;
  uint8_t *data = malloc(cap + 1);
  if (data == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory for a %zu-byte message", n);
  size_t got = 0;
  while (got < n) {
    if (got == cap) {
      size_t next = cap > n / 2 ? n : cap * 2;
      uint8_t *grown = realloc(data, next + 1);
      if (grown == NULL) {
        free(data);
        return mr_fail(err, MR_ERR_NOMEM, "out of memory for a %zu-byte message", n);
      }
      data = grown;
      cap = next;
    }
    mr_status rc = read_exact(r, data + got, cap - got, NULL, err);
    if (rc) {
      free(data);
      return rc;
    }
    got = cap;
  }
  data[n] = 0;
  out->data = data;
  out->len = n;
  out->pos = 0;
  out->bad = false;
  return MR_OK;
}

mr_status pg_read_startup(pg_reader *r, pg_msg *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  uint8_t h[4];
  bool eof;
  mr_status rc = read_exact(r, h, 4, &eof, err);
  if (rc)
    return rc;
  uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
  if (len < 8 || len > PG_STARTUP_MAX)
    return mr_fail(err, MR_ERR_INVALID, "invalid length of startup packet (%u bytes)", len);
  return read_body(r, len, PG_STARTUP_MAX, out, err);
}

mr_status pg_read_message(pg_reader *r, pg_msg *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  uint8_t h[5];
  bool eof;
  mr_status rc = read_exact(r, h, 1, &eof, err);
  if (rc)
    return rc;
  rc = read_exact(r, h + 1, 4, NULL, err);
  if (rc)
    return rc;
  uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
  rc = read_body(r, len, pg_message_limit((char)h[0], r->max_message), out, err);
  if (rc == MR_OK)
    out->type = (char)h[0];
  return rc;
}

size_t pg_reader_buffered(const pg_reader *r) {
  return r->have - r->pos;
}
