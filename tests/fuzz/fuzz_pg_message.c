/*
 * fuzz_pg_message.c — libFuzzer target for pgwire's frontend-message
 * decoders (pg_proto.h), the message reader (pg_buf.h) and the SCRAM
 * message parsers (pg_auth.h).
 *
 * The first input byte picks the mode; the rest is the payload:
 *   a message type (B P D C E Q f p 0 for the startup packet):
 *       the payload is one body for that type's decoder. A body that
 *       decodes must re-encode to exactly the payload, and its Bind values
 *       must walk to exactly the announced count inside the body.
 *   's' the payload is a SCRAM client-final-message for a fixed exchange
 *       (client nonce "a", server suffix "b", 1 iteration).
 *   anything else: the payload is a byte stream written to a pipe and read
 *       like a connection: one startup packet, then messages until an
 *       error, each body decoded by its type.
 * Any invariant broken aborts, which libFuzzer reports as a crash; ASan
 * and UBSan catch reads outside the body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pgwire/pg_auth.h"
#include "pgwire/pg_buf.h"
#include "pgwire/pg_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what) {
  fprintf(stderr, "fuzz_pg_message: %s\n", what);
  abort();
}

/* A failed decode must say why, with a SQLSTATE. */
static void check_failure(const pg_error *e) {
  if (e->base.code != MR_ERR_INVALID || e->base.msg[0] == '\0' || strlen(e->sqlstate) != 5)
    die("decode failed without an error code, message and SQLSTATE");
}

/* The re-encoded body in b (after its 5-byte header) must equal the input. */
static void check_same(pg_buf *b, const uint8_t *body, size_t len, const char *what) {
  pg_buf_end(b);
  if (b->failed || b->len != len + 5 || (len && memcmp(b->data + 5, body, len) != 0))
    die(what);
  pg_buf_free(b);
}

static void put_codes(pg_buf *b, const uint8_t *codes, size_t n) {
  pg_buf_i16(b, (int16_t)n);
  pg_buf_bytes(b, codes, n * 2);
}

static void fuzz_bind(const uint8_t *body, size_t len) {
  pg_bind m;
  pg_error e;
  if (pg_decode_bind(body, len, &m, &e) != MR_OK) {
    check_failure(&e);
    return;
  }
  if (m.nparam_formats > 1 && m.nparam_formats != m.nparams)
    die("Bind accepted with a wrong parameter-format count");
  for (size_t i = 0; i < m.nparams + 2; i++) {
    int16_t f = pg_format_code(m.param_formats, m.nparam_formats, i);
    int16_t r = pg_format_code(m.result_formats, m.nresult_formats, i);
    if ((f != 0 && f != 1) || (r != 0 && r != 1))
      die("Bind accepted with a format code other than 0 or 1");
  }
  pg_buf b = {0};
  pg_buf_begin(&b, 'B');
  pg_buf_str(&b, m.portal);
  pg_buf_str(&b, m.stmt);
  put_codes(&b, m.param_formats, m.nparam_formats);
  pg_buf_i16(&b, (int16_t)m.nparams);
  size_t pos = 0, count = 0, n;
  const uint8_t *d;
  while (pg_bind_next_value(&m, &pos, &d, &n)) {
    if (d && (d < body || d + n > body + len))
      die("Bind value outside the body");
    pg_buf_i32(&b, d ? (int32_t)n : -1);
    pg_buf_bytes(&b, d, n);
    count++;
  }
  if (count != m.nparams || pos != m.values_len)
    die("Bind values do not walk to the announced count");
  put_codes(&b, m.result_formats, m.nresult_formats);
  check_same(&b, body, len, "Bind does not re-encode to its input");
  pg_error ce;
  if (pg_bind_check(&m, m.nparams, (long)m.nresult_formats, &ce) != MR_OK)
    die("Bind refused against a matching statement");
  if (pg_bind_check(&m, m.nparams + 1, -1, &ce) == MR_OK)
    die("Bind accepted against a statement with another parameter count");
}

static void fuzz_parse(const uint8_t *body, size_t len) {
  pg_parse m;
  pg_error e;
  if (pg_decode_parse(body, len, &m, &e) != MR_OK) {
    check_failure(&e);
    return;
  }
  pg_buf b = {0};
  pg_buf_begin(&b, 'P');
  pg_buf_str(&b, m.name);
  pg_buf_str(&b, m.query);
  pg_buf_i16(&b, (int16_t)m.ntypes);
  for (size_t i = 0; i < m.ntypes; i++)
    pg_buf_i32(&b, (int32_t)pg_parse_type(&m, i));
  check_same(&b, body, len, "Parse does not re-encode to its input");
}

static void fuzz_target(const uint8_t *body, size_t len, char type) {
  pg_target m;
  pg_error e;
  mr_status rc =
      type == 'D' ? pg_decode_describe(body, len, &m, &e) : pg_decode_close(body, len, &m, &e);
  if (rc != MR_OK) {
    check_failure(&e);
    return;
  }
  if (m.kind != 'S' && m.kind != 'P')
    die("Describe/Close accepted with a bad subtype");
  pg_buf b = {0};
  pg_buf_begin(&b, type);
  pg_buf_u8(&b, (uint8_t)m.kind);
  pg_buf_str(&b, m.name);
  check_same(&b, body, len, "Describe/Close does not re-encode to its input");
}

static void fuzz_execute(const uint8_t *body, size_t len) {
  pg_execute m;
  pg_error e;
  if (pg_decode_execute(body, len, &m, &e) != MR_OK) {
    check_failure(&e);
    return;
  }
  pg_buf b = {0};
  pg_buf_begin(&b, 'E');
  pg_buf_str(&b, m.portal);
  pg_buf_i32(&b, m.max_rows);
  check_same(&b, body, len, "Execute does not re-encode to its input");
}

static void fuzz_string(const uint8_t *body, size_t len, char type) {
  const char *s;
  pg_error e;
  mr_status rc =
      type == 'Q' ? pg_decode_query(body, len, &s, &e) : pg_decode_copy_fail(body, len, &s, &e);
  if (rc != MR_OK) {
    check_failure(&e);
    return;
  }
  pg_buf b = {0};
  pg_buf_begin(&b, type);
  pg_buf_str(&b, s);
  check_same(&b, body, len, "Query/CopyFail does not re-encode to its input");
}

static void fuzz_startup(const uint8_t *body, size_t len) {
  pg_startup m;
  pg_error e;
  if (pg_decode_startup(body, len, &m, &e) != MR_OK) {
    check_failure(&e);
    return;
  }
  const char *end = (const char *)body + len;
  if ((m.user && (m.user < (const char *)body || m.user + strlen(m.user) >= end)) ||
      (m.database && (m.database < (const char *)body || m.database + strlen(m.database) >= end)))
    die("startup parameter outside the body");
  if (m.kind == PG_STARTUP_V3 && (len < 5 || body[len - 1] != 0))
    die("startup packet accepted without its terminator");
}

static void fuzz_sasl(const uint8_t *body, size_t len) {
  pg_sasl_initial m;
  pg_error e;
  if (pg_decode_sasl_initial(body, len, &m, &e) != MR_OK) {
    check_failure(&e);
    return;
  }
  pg_buf b = {0};
  pg_buf_begin(&b, 'p');
  pg_buf_str(&b, m.mechanism);
  pg_buf_i32(&b, m.data ? (int32_t)m.len : -1);
  pg_buf_bytes(&b, m.data, m.len);
  check_same(&b, body, len, "SASLInitialResponse does not re-encode to its input");
  if (m.data == NULL)
    return;
  pg_scram s;
  mr_error err;
  static const uint8_t salt[4] = {1, 2, 3, 4};
  char out[1024];
  if (pg_scram_init_fixed(&s, "pw", salt, sizeof salt, 1, "b", &err) != MR_OK)
    die("pg_scram_init_fixed failed");
  (void)pg_scram_client_first(&s, (const char *)m.data, m.len, out, sizeof out, &err);
}

static void fuzz_scram_final(const uint8_t *msg, size_t len) {
  pg_scram s;
  mr_error err;
  static const uint8_t salt[4] = {1, 2, 3, 4};
  static const char first[] = "n,,n=,r=a";
  char out[1024];
  if (pg_scram_init_fixed(&s, "pw", salt, sizeof salt, 1, "b", &err) != MR_OK ||
      pg_scram_client_first(&s, first, strlen(first), out, sizeof out, &err) != MR_OK)
    die("fixed SCRAM exchange failed to start");
  if (pg_scram_client_final(&s, (const char *)msg, len, out, sizeof out, &err) == MR_OK &&
      strncmp(out, "v=", 2) != 0)
    die("SCRAM final accepted without a server signature");
}

static void decode_by_type(char type, const uint8_t *body, size_t len) {
  switch (type) {
  case 'B':
    fuzz_bind(body, len);
    break;
  case 'P':
    fuzz_parse(body, len);
    break;
  case 'D':
  case 'C':
    fuzz_target(body, len, type);
    break;
  case 'E':
    fuzz_execute(body, len);
    break;
  case 'Q':
  case 'f':
    fuzz_string(body, len, type);
    break;
  case 'p':
    fuzz_sasl(body, len);
    break;
  case 0:
    fuzz_startup(body, len);
    break;
  default:
    break;
  }
}

/* The payload as a connection's byte stream, through a pipe. */
static void fuzz_stream(const uint8_t *bytes, size_t len) {
  static pg_reader r; /* 64 KiB buffer: not on the stack */
  int fds[2];
  if (len > 60000) /* stay inside the pipe's buffer: the write never blocks */
    len = 60000;
  if (pipe(fds) != 0)
    die("pipe failed");
  if (len && write(fds[1], bytes, len) != (ssize_t)len)
    die("short write to the pipe");
  close(fds[1]);
  memset(&r, 0, sizeof r);
  static pg_io io;
  io = (pg_io){fds[0], NULL};
  r.io = &io;
  r.max_message = (size_t)1 << 20;
  pg_msg m;
  mr_error err;
  if (pg_read_startup(&r, &m, &err) == MR_OK) {
    if (m.data[m.len] != 0)
      die("startup body not NUL-terminated past its end");
    decode_by_type(0, m.data, m.len);
    pg_msg_free(&m);
    while (pg_read_message(&r, &m, &err) == MR_OK) {
      if (m.len > pg_message_limit(m.type, r.max_message))
        die("message over its type's limit was read");
      decode_by_type(m.type, m.data, m.len);
      pg_msg_free(&m);
    }
  }
  close(fds[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const uint8_t *body = data + 1;
  size_t len = size - 1;
  switch (data[0]) {
  case 'B':
  case 'P':
  case 'D':
  case 'C':
  case 'E':
  case 'Q':
  case 'f':
  case 'p':
  case 0:
    decode_by_type((char)data[0], body, len);
    break;
  case 's':
    fuzz_scram_final(body, len);
    break;
  default:
    fuzz_stream(body, len);
    break;
  }
  return 0;
}
