/*
 * pg_auth.c — SCRAM-SHA-256 (server side) and the password file; see
 * pg_auth.h. Crypto primitives come from OpenSSL (PBKDF2, HMAC, SHA-256,
 * base64, RAND_bytes). Proofs are compared in constant time.
 */
#include "pgwire/pg_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t b64_encode(const uint8_t *in, size_t n, char *out) {
  return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* Decodes base64; returns the byte count or -1. */
static int b64_decode(const char *in, size_t n, uint8_t *out, size_t cap) {
  if (n % 4 != 0 || (n / 4) * 3 > cap)
    return -1;
  int k = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
  if (k < 0)
    return -1;
  if (n >= 1 && in[n - 1] == '=')
    k--;
  if (n >= 2 && in[n - 2] == '=')
    k--;
  return k;
}

static void hmac(const uint8_t *key, size_t klen, const void *data, size_t n,
                 uint8_t out[SHA256_DIGEST_LENGTH]) {
  unsigned int olen = SHA256_DIGEST_LENGTH;
  HMAC(EVP_sha256(), key, (int)klen, data, n, out, &olen);
}

mr_status pg_scram_verifier_derive(const char *password, const uint8_t *salt, size_t salt_len,
                                   int iterations, pg_scram_verifier *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  if (salt_len == 0 || salt_len > sizeof out->salt || iterations < 1)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM: bad salt or iteration count");
  uint8_t salted[SHA256_DIGEST_LENGTH], client_key[SHA256_DIGEST_LENGTH];
  if (PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iterations,
                        EVP_sha256(), sizeof salted, salted) != 1)
    return mr_fail(err, MR_ERR_IO, "PBKDF2 failed");
  hmac(salted, sizeof salted, "Client Key", 10, client_key);
  SHA256(client_key, sizeof client_key, out->stored_key);
  hmac(salted, sizeof salted, "Server Key", 10, out->server_key);
  memcpy(out->salt, salt, salt_len);
  out->salt_len = salt_len;
  out->iterations = iterations;
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client_key, sizeof client_key);
  return MR_OK;
}

mr_status pg_scram_verifier_make(const char *password, pg_scram_verifier *out, mr_error *err) {
  uint8_t salt[16];
  if (RAND_bytes(salt, sizeof salt) != 1)
    return mr_fail(err, MR_ERR_IO, "no randomness for a SCRAM salt");
  return pg_scram_verifier_derive(password, salt, sizeof salt, PG_SCRAM_ITERATIONS, out, err);
}

/* Decodes the base64 field [p, end) into out of exactly want bytes (want 0:
 * any length up to cap); the length decoded, or -1. */
static int b64_field(const char *p, const char *end, uint8_t *out, size_t cap, size_t want) {
  uint8_t buf[96]; /* decoding rounds up to whole 3-byte groups */
  if ((size_t)(end - p) > 4 * (sizeof buf / 3))
    return -1;
  int n = b64_decode(p, (size_t)(end - p), buf, sizeof buf);
  if (n < 0 || (want && (size_t)n != want) || (size_t)n > cap)
    return -1;
  memcpy(out, buf, (size_t)n);
  return n;
}

mr_status pg_scram_verifier_parse(const char *text, pg_scram_verifier *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  static const char prefix[] = "SCRAM-SHA-256$";
  if (strncmp(text, prefix, sizeof prefix - 1) != 0)
    return mr_fail(err, MR_ERR_INVALID, "not a SCRAM-SHA-256 verifier (want %s...)", prefix);
  const char *p = text + sizeof prefix - 1;
  char *end;
  long iter = strtol(p, &end, 10);
  const char *salt_end = *end == ':' ? strchr(end + 1, '$') : NULL;
  const char *stored_end = salt_end ? strchr(salt_end + 1, ':') : NULL;
  if (end == p || iter < 1 || iter > 100000000 || stored_end == NULL)
    return mr_fail(err, MR_ERR_INVALID,
                   "malformed SCRAM verifier (want SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY)");
  const char *server_end = stored_end + 1 + strlen(stored_end + 1);
  int salt_len = b64_field(end + 1, salt_end, out->salt, sizeof out->salt, 0);
  if (salt_len <= 0 ||
      b64_field(salt_end + 1, stored_end, out->stored_key, sizeof out->stored_key, 32) < 0 ||
      b64_field(stored_end + 1, server_end, out->server_key, sizeof out->server_key, 32) < 0)
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM verifier: bad base64 in salt or keys");
  out->salt_len = (size_t)salt_len;
  out->iterations = (int)iter;
  return MR_OK;
}

mr_status pg_scram_verifier_format(const pg_scram_verifier *v, char *out, size_t cap,
                                   mr_error *err) {
  char salt64[64], stored64[64], server64[64];
  b64_encode(v->salt, v->salt_len, salt64);
  b64_encode(v->stored_key, sizeof v->stored_key, stored64);
  b64_encode(v->server_key, sizeof v->server_key, server64);
  int n = snprintf(out, cap, "SCRAM-SHA-256$%d:%s$%s:%s", v->iterations, salt64, stored64,
                   server64);
  if (n < 0 || (size_t)n >= cap)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM verifier does not fit its buffer");
  return MR_OK;
}

static mr_status scram_start(pg_scram *s, const pg_scram_verifier *v,
                             const char *server_nonce_suffix, mr_error *err) {
  memset(s, 0, sizeof *s);
  if (strlen(server_nonce_suffix) >= sizeof s->server_nonce_suffix)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM parameters too long");
  s->v = *v;
  snprintf(s->server_nonce_suffix, sizeof s->server_nonce_suffix, "%s", server_nonce_suffix);
  return MR_OK;
}

mr_status pg_scram_init_fixed(pg_scram *s, const char *password, const uint8_t *salt,
                              size_t salt_len, int iterations, const char *server_nonce_suffix,
                              mr_error *err) {
  pg_scram_verifier v;
  mr_status rc = pg_scram_verifier_derive(password, salt, salt_len, iterations, &v, err);
  return rc ? rc : scram_start(s, &v, server_nonce_suffix, err);
}

mr_status pg_scram_init(pg_scram *s, const pg_scram_verifier *v, mr_error *err) {
  uint8_t raw[18];
  char nonce[32];
  if (RAND_bytes(raw, sizeof raw) != 1)
    return mr_fail(err, MR_ERR_IO, "no randomness for SCRAM");
  b64_encode(raw, sizeof raw, nonce);
  return scram_start(s, v, nonce, err);
}

/* Finds "k=" attribute in a comma-separated SCRAM message. */
static const char *attr(const char *msg, char k, size_t *vlen) {
  const char *p = msg;
  while (p && *p) {
    if (p[0] == k && p[1] == '=') {
      const char *end = strchr(p + 2, ',');
      *vlen = end ? (size_t)(end - p - 2) : strlen(p + 2);
      return p + 2;
    }
    p = strchr(p, ',');
    if (p)
      p++;
  }
  return NULL;
}

mr_status pg_scram_client_first(pg_scram *s, const char *msg, size_t len, char *out, size_t outcap,
                                mr_error *err) {
  char m[512];
  if (len >= sizeof m || memchr(msg, 0, len))
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM client-first-message");
  memcpy(m, msg, len);
  m[len] = '\0';
  /* gs2-header: "n,," or "y,," (no channel binding), then the bare part */
  if (!(m[0] == 'n' || m[0] == 'y') || m[1] != ',')
    return mr_fail(err, MR_ERR_INVALID, "SCRAM channel binding is not supported");
  const char *second = strchr(m + 2, ',');
  if (second == NULL)
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM client-first-message");
  snprintf(s->client_first_bare, sizeof s->client_first_bare, "%s", second + 1);
  size_t nlen;
  const char *cnonce = attr(s->client_first_bare, 'r', &nlen);
  if (cnonce == NULL || nlen == 0 || nlen + strlen(s->server_nonce_suffix) >= sizeof s->nonce)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM client nonce missing");
  snprintf(s->nonce, sizeof s->nonce, "%.*s%s", (int)nlen, cnonce, s->server_nonce_suffix);
  char salt64[64];
  b64_encode(s->v.salt, s->v.salt_len, salt64);
  int n = snprintf(s->server_first, sizeof s->server_first, "r=%s,s=%s,i=%d", s->nonce, salt64,
                   s->v.iterations);
  if (n < 0 || (size_t)n >= outcap || (size_t)n >= sizeof s->server_first)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM message too long");
  memcpy(out, s->server_first, (size_t)n + 1);
  return MR_OK;
}

mr_status pg_scram_client_final(pg_scram *s, const char *msg, size_t len, char *out, size_t outcap,
                                mr_error *err) {
  char m[1024];
  if (len >= sizeof m || memchr(msg, 0, len))
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM client-final-message");
  memcpy(m, msg, len);
  m[len] = '\0';
  size_t cblen, rlen, plen;
  const char *cb = attr(m, 'c', &cblen);
  const char *r = attr(m, 'r', &rlen);
  const char *p = attr(m, 'p', &plen);
  if (!cb || !r || !p)
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM client-final-message");
  if (!((cblen == 4 && memcmp(cb, "biws", 4) == 0) || (cblen == 4 && memcmp(cb, "eSws", 4) == 0)))
    return mr_fail(err, MR_ERR_INVALID, "SCRAM channel binding is not supported");
  if (rlen != strlen(s->nonce) || memcmp(r, s->nonce, rlen) != 0)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM nonce mismatch");
  /* the proof is the last attribute, after the others: ",p=" then the end */
  if (p < m + 3 || p[-3] != ',' || p + plen != m + len)
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM client-final-message");
  /* client-final-message-without-proof: everything before ",p=" */
  size_t without = (size_t)(p - 3 - m);
  uint8_t proof[64];
  int prlen = b64_decode(p, plen, proof, sizeof proof);
  if (prlen != SHA256_DIGEST_LENGTH)
    return mr_fail(err, MR_ERR_INVALID, "malformed SCRAM proof");

  const uint8_t *stored_key = s->v.stored_key, *server_key = s->v.server_key;
  uint8_t client_sig[SHA256_DIGEST_LENGTH], server_sig[SHA256_DIGEST_LENGTH];

  char auth_msg[2048];
  int an = snprintf(auth_msg, sizeof auth_msg, "%s,%s,%.*s", s->client_first_bare, s->server_first,
                    (int)without, m);
  if (an < 0 || (size_t)an >= sizeof auth_msg)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM message too long");
  hmac(stored_key, SHA256_DIGEST_LENGTH, auth_msg, (size_t)an, client_sig);
  uint8_t recovered[SHA256_DIGEST_LENGTH], check[SHA256_DIGEST_LENGTH];
  for (size_t i = 0; i < sizeof recovered; i++)
    recovered[i] = proof[i] ^ client_sig[i];
  SHA256(recovered, sizeof recovered, check);
  if (CRYPTO_memcmp(check, stored_key, sizeof check) != 0)
    return mr_fail(err, MR_ERR_INVALID, "password authentication failed");
  hmac(server_key, SHA256_DIGEST_LENGTH, auth_msg, (size_t)an, server_sig);
  char sig64[64];
  b64_encode(server_sig, sizeof server_sig, sig64);
  int n = snprintf(out, outcap, "v=%s", sig64);
  if (n < 0 || (size_t)n >= outcap)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM message too long");
  return MR_OK;
}

mr_status pg_password_file_read(const char *path, char *out, size_t cap, mr_error *err) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return mr_fail(err, MR_ERR_IO, "cannot read password file %s", path);
  if (fgets(out, (int)cap, f) == NULL) {
    fclose(f);
    return mr_fail(err, MR_ERR_INVALID, "password file %s is empty", path);
  }
  fclose(f);
  out[strcspn(out, "\r\n")] = '\0';
  if (out[0] == '\0')
    return mr_fail(err, MR_ERR_INVALID, "password file %s holds an empty password", path);
  return MR_OK;
}
