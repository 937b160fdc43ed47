/*
 * pg_proto.h — pure decoders for the bodies of the frontend messages of the
 * PostgreSQL v3 protocol: the startup packet (StartupMessage, SSLRequest,
 * GSSENCRequest, CancelRequest), Query, Parse, Bind, Describe, Execute,
 * Close, CopyFail and SASLInitialResponse; the checks of a Bind against its
 * prepared statement; and the size limit of each message type.
 *
 * A decoder takes a body (the bytes after the type byte and the length) and
 * either fills a struct whose strings and arrays point into that body, or
 * fails with a SQLSTATE and a message worded as PostgreSQL words it. Every
 * count and length is checked against the bytes left before it is used, a
 * decoder never allocates and never reads outside [body, body + len), and
 * a body must be used up exactly (trailing bytes are an error, 08P01).
 * Counts are unsigned 16-bit, as PostgreSQL reads them.
 *
 * No sockets here: pg_conn.c reads messages (pg_buf.h) and decides what a
 * failure does to the connection; tests and the fuzzer call these directly.
 *
 * Ownership: decoded structs borrow the body and are valid while it is.
 */
#ifndef MR_PG_PROTO_H
#define MR_PG_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

/* A decoding failure: code (MR_ERR_INVALID), message and SQLSTATE. */
typedef struct pg_error {
  mr_error base;
  char sqlstate[6];
} pg_error;

/* ---- message sizes --------------------------------------------------------- */

#define PG_STARTUP_MAX 10000   /* the startup packet, its length included */
#define PG_SMALL_MESSAGE 10000 /* Sync, Describe, Execute, Close, CopyFail, ... */
#define PG_AUTH_MESSAGE 65535  /* SASL messages ('p') */
/* Every message before authentication is done (SASL responses included):
 * pg_conn.c passes it as max_message until then, so an unauthenticated
 * client can make the server hold at most this much (plus the startup
 * packet's PG_STARTUP_MAX). */
#define PG_PRE_AUTH_MESSAGE 8192

/* The largest body accepted for a message of this type: max_message for
 * Query, Parse, Bind and CopyData, PG_AUTH_MESSAGE for 'p', PG_SMALL_MESSAGE
 * for every other type (never more than max_message). */
size_t pg_message_limit(char type, size_t max_message);

/* ---- the startup packet ---------------------------------------------------- */

#define PG_PROTO_V3 196608u
#define PG_SSL_REQUEST 80877103u
#define PG_GSSENC_REQUEST 80877104u
#define PG_CANCEL_REQUEST 80877102u

typedef enum pg_startup_kind {
  PG_STARTUP_V3,
  PG_STARTUP_SSL,
  PG_STARTUP_GSSENC,
  PG_STARTUP_CANCEL,
} pg_startup_kind;

typedef struct pg_startup {
  pg_startup_kind kind;
  const char *user;     /* V3: NULL when not given */
  const char *database; /* V3: NULL when not given */
  uint32_t cancel_pid;  /* CANCEL */
  uint32_t cancel_key;  /* CANCEL */
} pg_startup;

/* The body of a startup packet (after its int32 length). Protocol versions
 * other than 3.0: 0A000. Wrong sizes, a bad parameter list: 08P01. */
mr_status pg_decode_startup(const uint8_t *body, size_t len, pg_startup *out,
                            pg_error *err) MR_MUST_CHECK;

/* ---- extended and simple query --------------------------------------------- */

typedef struct pg_parse {
  const char *name;
  const char *query;
  size_t ntypes;
  const uint8_t *types; /* ntypes int32 OIDs */
} pg_parse;

mr_status pg_decode_parse(const uint8_t *body, size_t len, pg_parse *out,
                          pg_error *err) MR_MUST_CHECK;
/* Parameter type i of a decoded Parse (0 when i >= ntypes). */
uint32_t pg_parse_type(const pg_parse *p, size_t i);

typedef struct pg_bind {
  const char *portal;
  const char *stmt;
  size_t nparam_formats;        /* 0, 1 or nparams */
  const uint8_t *param_formats; /* int16 each, every one 0 or 1 */
  size_t nparams;
  const uint8_t *values; /* nparams x (int32 length, bytes); -1 = NULL */
  size_t values_len;     /* bytes of that section */
  size_t nresult_formats;
  const uint8_t *result_formats; /* int16 each, every one 0 or 1 */
} pg_bind;

/* Format code i of a Bind format list as PostgreSQL applies it: an empty
 * list means text (0), one code applies to all, else the i-th (0 past the
 * end). */
int16_t pg_format_code(const uint8_t *codes, size_t n, size_t i);

/* Steps through the values of a decoded Bind: *pos starts at 0; sets *data
 * (NULL for SQL NULL) and *n. False when no value is left. */
bool pg_bind_next_value(const pg_bind *b, size_t *pos, const uint8_t **data, size_t *n);

mr_status pg_decode_bind(const uint8_t *body, size_t len, pg_bind *out,
                         pg_error *err) MR_MUST_CHECK;

/* A decoded Bind against its prepared statement: the parameter count must
 * be stmt_nparams (08P01); with more than one result format, their number
 * must be ncolumns when that is known (ncolumns >= 0; 08P01). */
mr_status pg_bind_check(const pg_bind *b, size_t stmt_nparams, long ncolumns,
                        pg_error *err) MR_MUST_CHECK;

/* Describe and Close: 'S' (statement) or 'P' (portal), then a name. */
typedef struct pg_target {
  char kind;
  const char *name;
} pg_target;

mr_status pg_decode_describe(const uint8_t *body, size_t len, pg_target *out,
                             pg_error *err) MR_MUST_CHECK;
mr_status pg_decode_close(const uint8_t *body, size_t len, pg_target *out,
                          pg_error *err) MR_MUST_CHECK;

typedef struct pg_execute {
  const char *portal;
  int32_t max_rows; /* <= 0: all */
} pg_execute;

mr_status pg_decode_execute(const uint8_t *body, size_t len, pg_execute *out,
                            pg_error *err) MR_MUST_CHECK;

/* Query and CopyFail: exactly one string. */
mr_status pg_decode_query(const uint8_t *body, size_t len, const char **sql,
                          pg_error *err) MR_MUST_CHECK;
mr_status pg_decode_copy_fail(const uint8_t *body, size_t len, const char **msg,
                              pg_error *err) MR_MUST_CHECK;

/* ---- authentication ---------------------------------------------------------- */

typedef struct pg_sasl_initial {
  const char *mechanism;
  const uint8_t *data; /* NULL when the client sent length -1 */
  size_t len;
} pg_sasl_initial;

mr_status pg_decode_sasl_initial(const uint8_t *body, size_t len, pg_sasl_initial *out,
                                 pg_error *err) MR_MUST_CHECK;

#endif /* MR_PG_PROTO_H */
