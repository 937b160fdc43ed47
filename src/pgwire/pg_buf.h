/*
 * pg_buf.h — the message buffers of the PostgreSQL v3 protocol.
 *
 * pg_buf (outgoing): every backend message is built here. pg_buf_begin
 * writes the type byte and a length placeholder, pg_buf_end patches the
 * length in — the only place lengths are computed. An allocation failure
 * sets the sticky `failed` flag; later appends do nothing and pg_buf_flush
 * reports it, so builders check once, never per field.
 *
 * pg_msg (incoming): a received message body with a read cursor. Every
 * getter is bounds-checked; reading past the end (or a missing string
 * terminator) sets the sticky `bad` flag and returns zero/empty values, so a
 * parser checks `bad` once at the end.
 *
 * Ownership: both own their memory; pg_buf_free / pg_msg_free release it.
 */
#ifndef MR_PG_BUF_H
#define MR_PG_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"
#include "pgwire/pg_tls.h"

typedef struct pg_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
  size_t msg_start; /* offset of the open message's type byte */
  bool open;
  bool failed;
} pg_buf;

void pg_buf_begin(pg_buf *b, char type);
void pg_buf_end(pg_buf *b);
void pg_buf_u8(pg_buf *b, uint8_t v);
void pg_buf_i16(pg_buf *b, int16_t v);
void pg_buf_i32(pg_buf *b, int32_t v);
void pg_buf_bytes(pg_buf *b, const void *p, size_t n);
void pg_buf_str(pg_buf *b, const char *s); /* with its NUL */
/* Writes everything buffered to io (blocking; EINTR-safe) and empties the
 * buffer. MR_ERR_NOMEM if the buffer failed, MR_ERR_IO if the socket did. */
mr_status pg_buf_flush(pg_buf *b, pg_io *io, mr_error *err) MR_MUST_CHECK;
void pg_buf_free(pg_buf *b);

typedef struct pg_msg {
  char type;     /* 0 for the startup packet */
  uint8_t *data; /* body, without type and length */
  size_t len;
  size_t pos;
  bool bad;
} pg_msg;

uint8_t pg_msg_u8(pg_msg *m);
int16_t pg_msg_i16(pg_msg *m);
int32_t pg_msg_i32(pg_msg *m);
const char *pg_msg_str(pg_msg *m);                /* NUL-terminated, inside data */
const uint8_t *pg_msg_bytes(pg_msg *m, size_t n); /* n bytes inside data */
bool pg_msg_at_end(const pg_msg *m);
void pg_msg_free(pg_msg *m);

/* Buffered reader of messages from a socket. */
typedef struct pg_reader {
  pg_io *io; /* the connection's stream (plain or TLS) */
  uint8_t buf[65536];
  size_t have;
  size_t pos;
  size_t max_message; /* cap on bodies; per type see pg_message_limit */
} pg_reader;

/* Reads the startup packet (int32 length, body) or a regular message (type,
 * int32 length, body). MR_ERR_CLOSED on a clean EOF between messages,
 * MR_ERR_IO on socket errors or EOF inside a message, MR_ERR_INVALID on a
 * malformed length or one over the type's limit (pg_message_limit in
 * pg_proto.h; startup packets: PG_STARTUP_MAX). Memory grows with the bytes
 * received, not with the declared length. The body is NUL-terminated one
 * past its end (not counted in len). */
mr_status pg_read_startup(pg_reader *r, pg_msg *out, mr_error *err) MR_MUST_CHECK;
mr_status pg_read_message(pg_reader *r, pg_msg *out, mr_error *err) MR_MUST_CHECK;
/* Bytes received but not yet consumed (after an SSLRequest there must be
 * none: the handshake comes next). */
size_t pg_reader_buffered(const pg_reader *r);

#endif /* MR_PG_BUF_H */
