/*
 * pg_tls.c — the OpenSSL side of pg_tls.h: server contexts (built, checked,
 * swapped on reload), the handshake, and reads and writes on a pg_io.
 */
#include "pgwire/pg_tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

struct pg_tls {
  char *cert_file;
  char *key_file;
  pthread_mutex_t mu; /* guards ctx */
  SSL_CTX *ctx;
};

/* The newest OpenSSL error as text (the queue is emptied). */
static const char *ssl_reason(char *buf, size_t cap) {
  unsigned long e = ERR_get_error();
  unsigned long last = e;
  while (e) {
    last = e;
    e = ERR_get_error();
  }
  if (last == 0)
    snprintf(buf, cap, "unknown OpenSSL error");
  else
    ERR_error_string_n(last, buf, cap);
  return buf;
}

static mr_status build_ctx(const char *cert_file, const char *key_file, SSL_CTX **out,
                           mr_error *err) {
  char why[256];
  *out = NULL;
  ERR_clear_error();
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "TLS: cannot create a context: %s",
                   ssl_reason(why, sizeof why));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* no session tickets or cache: every connection does a full handshake,
   * so a reloaded certificate takes effect at once */
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  mr_status rc = MR_OK;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1)
    rc = mr_fail(err, MR_ERR_INVALID, "TLS: cannot load the certificate %s: %s", cert_file,
                 ssl_reason(why, sizeof why));
  else if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1)
    rc = mr_fail(err, MR_ERR_INVALID, "TLS: cannot load the key %s: %s", key_file,
                 ssl_reason(why, sizeof why));
  else if (SSL_CTX_check_private_key(ctx) != 1)
    rc = mr_fail(err, MR_ERR_INVALID, "TLS: the key %s does not match the certificate %s", key_file,
                 cert_file);
  if (rc) {
    SSL_CTX_free(ctx);
    return rc;
  }
  *out = ctx;
  return MR_OK;
}

mr_status pg_tls_open(const char *cert_file, const char *key_file, pg_tls **out, mr_error *err) {
  *out = NULL;
  pg_tls *t = calloc(1, sizeof *t);
  if (t == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "TLS: out of memory");
  t->cert_file = strdup(cert_file);
  t->key_file = strdup(key_file);
  pthread_mutex_init(&t->mu, NULL);
  mr_status rc = t->cert_file && t->key_file ? build_ctx(cert_file, key_file, &t->ctx, err)
                                             : mr_fail(err, MR_ERR_NOMEM, "TLS: out of memory");
  if (rc) {
    pg_tls_free(t);
    return rc;
  }
  *out = t;
  return MR_OK;
}

mr_status pg_tls_reload(pg_tls *t, mr_error *err) {
  SSL_CTX *ctx;
  mr_status rc = build_ctx(t->cert_file, t->key_file, &ctx, err);
  if (rc)
    return rc;
  pthread_mutex_lock(&t->mu);
  SSL_CTX *old = t->ctx;
  t->ctx = ctx;
  pthread_mutex_unlock(&t->mu);
  SSL_CTX_free(old); /* connections using it hold their own reference */
  return MR_OK;
}

void pg_tls_free(pg_tls *t) {
  if (t == NULL)
    return;
  SSL_CTX_free(t->ctx);
  pthread_mutex_destroy(&t->mu);
  free(t->cert_file);
  free(t->key_file);
  free(t);
}

mr_status pg_tls_accept(pg_tls *t, pg_io *io, mr_error *err) {
  char why[256];
  ERR_clear_error();
  pthread_mutex_lock(&t->mu);
  SSL *ssl = SSL_new(t->ctx);
  pthread_mutex_unlock(&t->mu);
  if (ssl == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "TLS: %s", ssl_reason(why, sizeof why));
  if (SSL_set_fd(ssl, io->fd) != 1) {
    SSL_free(ssl);
    return mr_fail(err, MR_ERR_IO, "TLS: %s", ssl_reason(why, sizeof why));
  }
  int r;
  while ((r = SSL_accept(ssl)) != 1) {
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_SYSCALL && errno == EINTR)
      continue;
    mr_status rc = mr_fail(err, MR_ERR_IO, "TLS handshake failed: %s",
                           e == SSL_ERROR_SYSCALL ? (errno ? strerror(errno) : "connection closed")
                                                  : ssl_reason(why, sizeof why));
    SSL_free(ssl);
    return rc;
  }
  io->ssl = ssl;
  return MR_OK;
}

ssize_t pg_io_read(pg_io *io, void *buf, size_t n) {
  if (io->ssl == NULL) {
    ssize_t k;
    do
      k = read(io->fd, buf, n);
    while (k < 0 && errno == EINTR);
    return k;
  }
  for (;;) {
    int k = SSL_read(io->ssl, buf, n > (size_t)INT32_MAX ? INT32_MAX : (int)n);
    if (k > 0)
      return k;
    int e = SSL_get_error(io->ssl, k);
    if (e == SSL_ERROR_ZERO_RETURN)
      return 0;
    if (e == SSL_ERROR_SYSCALL && errno == EINTR)
      continue;
    if (e == SSL_ERROR_SYSCALL && k == 0)
      return 0; /* the peer closed without close_notify */
    ERR_clear_error();
    if (e != SSL_ERROR_SYSCALL)
      errno = EIO;
    return -1;
  }
}

ssize_t pg_io_write(pg_io *io, const void *buf, size_t n) {
  if (io->ssl == NULL) {
    ssize_t k;
    do
      k = send(io->fd, buf, n, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    return k;
  }
  for (;;) {
    int k = SSL_write(io->ssl, buf, n > (size_t)INT32_MAX ? INT32_MAX : (int)n);
    if (k > 0)
      return k;
    int e = SSL_get_error(io->ssl, k);
    if (e == SSL_ERROR_SYSCALL && errno == EINTR)
      continue;
    ERR_clear_error();
    if (e != SSL_ERROR_SYSCALL || errno == 0)
      errno = EIO;
    return -1;
  }
}

void pg_io_end_tls(pg_io *io) {
  if (io->ssl == NULL)
    return;
  (void)SSL_shutdown(io->ssl);
  ERR_clear_error();
  SSL_free(io->ssl);
  io->ssl = NULL;
}
