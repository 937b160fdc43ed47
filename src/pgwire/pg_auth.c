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

mr_status pg_scram_init_fixed(pg_scram *s, const char *password, const uint8_t *salt,
                              size_t salt_len, int iterations, const char *server_nonce_suffix,
                              mr_error *err) {
  memset(s, 0, sizeof *s);
  if (strlen(password) >= sizeof s->password || salt_len > sizeof s->salt ||
      strlen(server_nonce_suffix) >= sizeof s->server_nonce_suffix)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM parameters too long");
  snprintf(s->password, sizeof s->password, "%s", password);
  memcpy(s->salt, salt, salt_len);
  s->salt_len = salt_len;
  s->iterations = iterations;
  snprintf(s->server_nonce_suffix, sizeof s->server_nonce_suffix, "%s", server_nonce_suffix);
  return MR_OK;
}

mr_status pg_scram_init(pg_scram *s, const char *password, mr_error *err) {
  uint8_t salt[16], raw[18];
  char nonce[32];
  if (RAND_bytes(salt, sizeof salt) != 1 || RAND_bytes(raw, sizeof raw) != 1)
    return mr_fail(err, MR_ERR_IO, "no randomness for SCRAM");
  b64_encode(raw, sizeof raw, nonce);
  return pg_scram_init_fixed(s, password, salt, sizeof salt, PG_SCRAM_ITERATIONS, nonce, err);
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
  b64_encode(s->salt, s->salt_len, salt64);
  int n = snprintf(s->server_first, sizeof s->server_first, "r=%s,s=%s,i=%d", s->nonce, salt64,
                   s->iterations);
  if (n < 0 || (size_t)n >= outcap || (size_t)n >= sizeof s->server_first)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM message too long");
  memcpy(out, s->server_first, (size_t)n + 1);
  return MR_OK;
}

static void hmac(const uint8_t *key, size_t klen, const void *data, size_t n,
                 uint8_t out[SHA256_DIGEST_LENGTH]) {
  unsigned int olen = SHA256_DIGEST_LENGTH;
  HMAC(EVP_sha256(), key, (int)klen, data, n, out, &olen);
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

  uint8_t salted[SHA256_DIGEST_LENGTH], client_key[SHA256_DIGEST_LENGTH];
  uint8_t stored_key[SHA256_DIGEST_LENGTH], server_key[SHA256_DIGEST_LENGTH];
  uint8_t client_sig[SHA256_DIGEST_LENGTH], server_sig[SHA256_DIGEST_LENGTH];
  if (PKCS5_PBKDF2_HMAC(s->password, (int)strlen(s->password), s->salt, (int)s->salt_len,
                        s->iterations, EVP_sha256(), sizeof salted, salted) != 1)
    return mr_fail(err, MR_ERR_IO, "PBKDF2 failed");
  hmac(salted, sizeof salted, "Client Key", 10, client_key);
  SHA256(client_key, sizeof client_key, stored_key);
  hmac(salted, sizeof salted, "Server Key", 10, server_key);

  char auth_msg[2048];
  int an = snprintf(auth_msg, sizeof auth_msg, "%s,%s,%.*s", s->client_first_bare, s->server_first,
                    (int)without, m);
  if (an < 0 || (size_t)an >= sizeof auth_msg)
    return mr_fail(err, MR_ERR_INVALID, "SCRAM message too long");
  hmac(stored_key, sizeof stored_key, auth_msg, (size_t)an, client_sig);
  uint8_t recovered[SHA256_DIGEST_LENGTH], check[SHA256_DIGEST_LENGTH];
  for (size_t i = 0; i < sizeof recovered; i++)
    recovered[i] = proof[i] ^ client_sig[i];
  SHA256(recovered, sizeof recovered, check);
  if (CRYPTO_memcmp(check, stored_key, sizeof check) != 0)
    return mr_fail(err, MR_ERR_INVALID, "password authentication failed");
  hmac(server_key, sizeof server_key, auth_msg, (size_t)an, server_sig);
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
