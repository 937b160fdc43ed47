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

/* What the server keeps of a password, as PostgreSQL stores it in
 * pg_authid.rolpassword:
 *   SCRAM-SHA-256$<iterations>:<salt base64>$<StoredKey base64>:<ServerKey base64>
 * The password itself is not needed to check a client's proof. */
typedef struct pg_scram_verifier {
  int iterations;
  uint8_t salt[32];
  size_t salt_len;
  uint8_t stored_key[32];
  uint8_t server_key[32];
} pg_scram_verifier;

/* The verifier of password with the given salt and iterations. */
mr_status pg_scram_verifier_derive(const char *password, const uint8_t *salt, size_t salt_len,
                                   int iterations, pg_scram_verifier *out,
                                   mr_error *err) MR_MUST_CHECK;
/* The same with a fresh random 16-byte salt and PG_SCRAM_ITERATIONS. */
mr_status pg_scram_verifier_make(const char *password, pg_scram_verifier *out,
                                 mr_error *err) MR_MUST_CHECK;
/* Parses PostgreSQL's text form (above); MR_ERR_INVALID with the reason. */
mr_status pg_scram_verifier_parse(const char *text, pg_scram_verifier *out,
                                  mr_error *err) MR_MUST_CHECK;
/* Writes the text form into out (cap >= 160 is always enough). */
mr_status pg_scram_verifier_format(const pg_scram_verifier *v, char *out, size_t cap,
                                   mr_error *err) MR_MUST_CHECK;

typedef struct pg_scram {
  pg_scram_verifier v;
  char server_nonce_suffix[64];
  char client_first_bare[512];
  char server_first[768];
  char nonce[256]; /* client nonce + server suffix */
} pg_scram;

/* A fresh exchange (random nonce) against verifier v. */
mr_status pg_scram_init(pg_scram *s, const pg_scram_verifier *v, mr_error *err) MR_MUST_CHECK;
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
