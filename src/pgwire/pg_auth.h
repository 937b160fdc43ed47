/*
 * pg_auth.h — client authentication: the SCRAM-SHA-256 server side (RFC
 * 5802 / RFC 7677, as PostgreSQL speaks it) and the password file.
 *
 * A scram exchange is two steps: the client-first-message yields the
 * server-first-message, the client-final-message yields the
 * server-final-message ("v=...") when the proof is right. Channel binding
 * is not offered (clients send "n,,"), as with PostgreSQL without TLS.
 * The user name inside the SCRAM messages is ignored (PostgreSQL does the
 * same: the startup packet names the user).
 *
 * Ownership: pg_scram is a caller-owned value holding only fixed buffers;
 * returned strings are written into caller buffers.
 */
#ifndef MR_PG_AUTH_H
#define MR_PG_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

#define PG_SCRAM_ITERATIONS 4096

typedef struct pg_scram {
  char password[256];
  uint8_t salt[32];
  size_t salt_len;
  int iterations;
  char server_nonce_suffix[64];
  char client_first_bare[512];
  char server_first[768];
  char nonce[256]; /* client nonce + server suffix */
} pg_scram;

/* A fresh exchange with a random salt and nonce. */
mr_status pg_scram_init(pg_scram *s, const char *password, mr_error *err) MR_MUST_CHECK;
/* A fixed exchange (tests: RFC 7677's vector). */
mr_status pg_scram_init_fixed(pg_scram *s, const char *password, const uint8_t *salt,
                              size_t salt_len, int iterations, const char *server_nonce_suffix,
                              mr_error *err) MR_MUST_CHECK;

/* client-first-message -> server-first-message (NUL-terminated into out). */
mr_status pg_scram_client_first(pg_scram *s, const char *msg, size_t len, char *out,
                                size_t outcap, mr_error *err) MR_MUST_CHECK;
/* client-final-message -> server-final-message; MR_ERR_INVALID when the
 * proof is wrong ("password authentication failed"). */
mr_status pg_scram_client_final(pg_scram *s, const char *msg, size_t len, char *out,
                                size_t outcap, mr_error *err) MR_MUST_CHECK;

/* Reads the password: the file's first line, without its line ending. */
mr_status pg_password_file_read(const char *path, char *out, size_t cap,
                                mr_error *err) MR_MUST_CHECK;

#endif /* MR_PG_AUTH_H */
