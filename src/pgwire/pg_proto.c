/*
 * pg_proto.c — the frontend message decoders of pg_proto.h: a bounds-checked
 * read cursor over a const body, then one function per message layout.
 * Nothing here allocates or touches a socket.
 */
#include "pgwire/pg_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const uint8_t no_bytes[1];

static mr_status fail(pg_error *err, const char *sqlstate, const char *fmt, ...) MR_PRINTF(3, 4);

static mr_status fail(pg_error *err, const char *sqlstate, const char *fmt, ...) {
  if (err == NULL)
    return MR_ERR_INVALID;
  char msg[MR_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err->sqlstate, sizeof err->sqlstate, "%s", sqlstate);
  return mr_fail(&err->base, MR_ERR_INVALID, "%s", msg);
}

/* ---- the cursor ------------------------------------------------------------ */

/* A read position in a body. The first failed read sets `why`; every later
 * read fails too and returns zero/empty, so decoders check once. */
typedef struct cursor {
  const uint8_t *p;
  size_t len;
  size_t pos;
  const char *why; /* NULL while every read fit */
} cursor;

static cursor cursor_of(const uint8_t *body, size_t len) {
  cursor c = {body ? body : no_bytes, body ? len : 0, 0, NULL};
  if (body == NULL && len > 0)
    c.why = "insufficient data left in message";
  return c;
}

static const uint8_t *take(cursor *c, size_t n) {
  if (c->why)
    return NULL;
  if (n > c->len - c->pos) {
    c->why = "insufficient data left in message";
    return NULL;
  }
  const uint8_t *at = c->p + c->pos;
  c->pos += n;
  return at;
}

static uint16_t be16(const uint8_t *b) {
  return (uint16_t)((unsigned)b[0] << 8 | b[1]);
}

static uint32_t be32(const uint8_t *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint8_t get_u8(cursor *c) {
  const uint8_t *b = take(c, 1);
  return b ? b[0] : 0;
}

static size_t get_count(cursor *c) {
  const uint8_t *b = take(c, 2);
  return b ? be16(b) : 0;
}

static int32_t get_i32(cursor *c) {
  const uint8_t *b = take(c, 4);
  return b ? (int32_t)be32(b) : 0;
}

static const char *get_str(cursor *c) {
  if (c->why)
    return "";
  const uint8_t *start = c->p + c->pos;
  const uint8_t *nul = memchr(start, 0, c->len - c->pos);
  if (nul == NULL) {
    c->why = "invalid string in message";
    return "";
  }
  c->pos += (size_t)(nul - start) + 1;
  return (const char *)start;
}

/* n int16 codes, checked to fit before they are taken. */
static const uint8_t *get_codes(cursor *c, size_t n) {
  const uint8_t *b = take(c, n * 2);
  return b ? b : no_bytes;
}

/* The body must be used up exactly. */
static mr_status finish(cursor *c, pg_error *err) {
  if (c->why == NULL && c->pos != c->len)
    c->why = "invalid message format";
  return c->why ? fail(err, "08P01", "%s", c->why) : MR_OK;
}

/* ---- sizes ------------------------------------------------------------------ */

size_t pg_message_limit(char type, size_t max_message) {
  size_t limit;
  switch (type) {
  case 'Q':
  case 'P':
  case 'B':
  case 'd':
    return max_message;
  case 'p':
    limit = PG_AUTH_MESSAGE;
    break;
  default:
    limit = PG_SMALL_MESSAGE;
    break;
  }
  return limit < max_message ? limit : max_message;
}

/* ---- startup ---------------------------------------------------------------- */

mr_status pg_decode_startup(const uint8_t *body, size_t len, pg_startup *out, pg_error *err) {
  memset(out, 0, sizeof *out);
  cursor c = cursor_of(body, len);
  if (len < 4 || len > PG_STARTUP_MAX - 4)
    return fail(err, "08P01", "invalid length of startup packet");
  uint32_t code = (uint32_t)get_i32(&c);
  if (code == PG_SSL_REQUEST || code == PG_GSSENC_REQUEST) {
    if (len != 4)
      return fail(err, "08P01", "invalid length of startup packet");
    out->kind = code == PG_SSL_REQUEST ? PG_STARTUP_SSL : PG_STARTUP_GSSENC;
    return MR_OK;
  }
  if (code == PG_CANCEL_REQUEST) {
    if (len != 12)
      return fail(err, "08P01", "invalid length of cancel request packet");
    out->kind = PG_STARTUP_CANCEL;
    out->cancel_pid = (uint32_t)get_i32(&c);
    out->cancel_key = (uint32_t)get_i32(&c);
    return MR_OK;
  }
  if (code != PG_PROTO_V3)
    return fail(err, "0A000", "unsupported frontend protocol %u.%u: server supports 3.0 to 3.0",
                code >> 16, code & 0xFFFF);
  out->kind = PG_STARTUP_V3;
  /* name/value pairs, then one NUL that must be the last byte */
  for (;;) {
    if (c.pos == c.len)
      return fail(err, "08P01", "invalid startup packet layout: expected terminator as last byte");
    const char *name = get_str(&c);
    if (c.why)
      return fail(err, "08P01", "invalid startup packet layout: %s", c.why);
    if (name[0] == '\0')
      break;
    const char *value = get_str(&c);
    if (c.why)
      return fail(err, "08P01", "invalid startup packet layout: parameter \"%.64s\" has no value",
                  name);
    if (strcmp(name, "user") == 0)
      out->user = value;
    else if (strcmp(name, "database") == 0)
      out->database = value;
  }
  if (c.pos != c.len)
    return fail(err, "08P01", "invalid startup packet layout: expected terminator as last byte");
  return MR_OK;
}

/* ---- Query, Parse, Bind, Describe, Execute, Close, CopyFail ------------------ */

mr_status pg_decode_query(const uint8_t *body, size_t len, const char **sql, pg_error *err) {
  cursor c = cursor_of(body, len);
  *sql = get_str(&c);
  return finish(&c, err);
}

mr_status pg_decode_copy_fail(const uint8_t *body, size_t len, const char **msg, pg_error *err) {
  cursor c = cursor_of(body, len);
  *msg = get_str(&c);
  return finish(&c, err);
}

uint32_t pg_parse_type(const pg_parse *p, size_t i) {
  return i < p->ntypes ? be32(p->types + 4 * i) : 0;
}

mr_status pg_decode_parse(const uint8_t *body, size_t len, pg_parse *out, pg_error *err) {
  cursor c = cursor_of(body, len);
  out->name = get_str(&c);
  out->query = get_str(&c);
  out->ntypes = get_count(&c);
  out->types = take(&c, out->ntypes * 4);
  if (out->types == NULL) {
    out->types = no_bytes;
    out->ntypes = 0;
  }
  return finish(&c, err);
}

int16_t pg_format_code(const uint8_t *codes, size_t n, size_t i) {
  if (n == 0)
    return 0;
  size_t at = n == 1 ? 0 : i;
  return at < n ? (int16_t)be16(codes + 2 * at) : 0;
}

bool pg_bind_next_value(const pg_bind *b, size_t *pos, const uint8_t **data, size_t *n) {
  if (*pos > b->values_len || b->values_len - *pos < 4)
    return false;
  int32_t len = (int32_t)be32(b->values + *pos);
  size_t left = b->values_len - *pos - 4;
  if (len < -1 || (len >= 0 && (size_t)len > left))
    return false;
  *data = len < 0 ? NULL : b->values + *pos + 4;
  *n = len < 0 ? 0 : (size_t)len;
  *pos += 4 + *n;
  return true;
}

static mr_status check_codes(const uint8_t *codes, size_t n, pg_error *err) {
  for (size_t i = 0; i < n; i++) {
    int16_t f = (int16_t)be16(codes + 2 * i);
    if (f != 0 && f != 1)
      return fail(err, "22023", "unsupported format code: %d", f);
  }
  return MR_OK;
}

mr_status pg_decode_bind(const uint8_t *body, size_t len, pg_bind *out, pg_error *err) {
  memset(out, 0, sizeof *out);
  cursor c = cursor_of(body, len);
  out->portal = get_str(&c);
  out->stmt = get_str(&c);
  out->nparam_formats = get_count(&c);
  out->param_formats = get_codes(&c, out->nparam_formats);
  out->nparams = get_count(&c);
  size_t start = c.pos;
  for (size_t i = 0; i < out->nparams && c.why == NULL; i++) {
    int32_t n = get_i32(&c);
    if (n < -1)
      return fail(err, "08P01", "invalid length %d of parameter %zu in Bind message", (int)n,
                  i + 1);
    if (n > 0)
      (void)take(&c, (size_t)n);
  }
  out->values = c.p + start;
  out->values_len = c.pos - start;
  out->nresult_formats = get_count(&c);
  out->result_formats = get_codes(&c, out->nresult_formats);
  mr_status rc = finish(&c, err);
  if (rc)
    return rc;
  if (out->nparam_formats > 1 && out->nparam_formats != out->nparams)
    return fail(err, "08P01", "bind message has %zu parameter formats but %zu parameters",
                out->nparam_formats, out->nparams);
  rc = check_codes(out->param_formats, out->nparam_formats, err);
  return rc ? rc : check_codes(out->result_formats, out->nresult_formats, err);
}

mr_status pg_bind_check(const pg_bind *b, size_t stmt_nparams, long ncolumns, pg_error *err) {
  if (b->nparams != stmt_nparams)
    return fail(err, "08P01",
                "bind message supplies %zu parameters, but prepared statement \"%.64s\" requires "
                "%zu",
                b->nparams, b->stmt, stmt_nparams);
  if (b->nresult_formats > 1 && ncolumns >= 0 && b->nresult_formats != (size_t)ncolumns)
    return fail(err, "08P01", "bind message has %zu result formats but query has %ld columns",
                b->nresult_formats, ncolumns);
  return MR_OK;
}

static mr_status decode_target(const uint8_t *body, size_t len, pg_target *out, const char *what,
                               pg_error *err) {
  cursor c = cursor_of(body, len);
  out->kind = (char)get_u8(&c);
  out->name = get_str(&c);
  mr_status rc = finish(&c, err);
  if (rc)
    return rc;
  if (out->kind != 'S' && out->kind != 'P')
    return fail(err, "08P01", "invalid %s message subtype %d", what, (unsigned char)out->kind);
  return MR_OK;
}

mr_status pg_decode_describe(const uint8_t *body, size_t len, pg_target *out, pg_error *err) {
  return decode_target(body, len, out, "DESCRIBE", err);
}

mr_status pg_decode_close(const uint8_t *body, size_t len, pg_target *out, pg_error *err) {
  return decode_target(body, len, out, "CLOSE", err);
}

mr_status pg_decode_execute(const uint8_t *body, size_t len, pg_execute *out, pg_error *err) {
  cursor c = cursor_of(body, len);
  out->portal = get_str(&c);
  out->max_rows = get_i32(&c);
  return finish(&c, err);
}

/* ---- SASL ------------------------------------------------------------------- */

mr_status pg_decode_sasl_initial(const uint8_t *body, size_t len, pg_sasl_initial *out,
                                 pg_error *err) {
  memset(out, 0, sizeof *out);
  cursor c = cursor_of(body, len);
  out->mechanism = get_str(&c);
  int32_t n = get_i32(&c);
  if (c.why == NULL && n < -1)
    return fail(err, "08P01", "invalid SASL response length %d", (int)n);
  if (n >= 0) {
    out->data = take(&c, (size_t)n);
    out->len = out->data ? (size_t)n : 0;
  }
  return finish(&c, err);
}
