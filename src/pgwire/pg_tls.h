/*
 * pg_tls.h — TLS for client connections (OpenSSL): the server's certificate
 * and key, the handshake after an SSLRequest, and encrypted socket I/O.
 *
 * A pg_tls holds one OpenSSL context built from a certificate chain file and
 * a key file (PEM). pg_tls_reload builds a new context from the same files
 * and swaps it in: connections accepted afterwards use it, established ones
 * keep theirs (each SSL holds a reference to its context). A reload that
 * fails keeps the old context and says why.
 *
 * pg_io is one connection's byte stream: the socket, plus its SSL once the
 * handshake is done. pg_buf_flush and pg_reader go through it.
 *
 * Threads: pg_tls_accept and pg_tls_reload may run concurrently (the swap is
 * under a lock); a pg_io is used by its connection's thread only.
 */
#ifndef MR_PG_TLS_H
#define MR_PG_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/mr_error.h"

typedef struct ssl_st SSL; /* OpenSSL's, opaque here */

typedef struct pg_io {
  int fd;
  SSL *ssl; /* NULL: plain */
} pg_io;

/* Reads up to n bytes: > 0 read, 0 at EOF, -1 on error (errno, or EIO). */
ssize_t pg_io_read(pg_io *io, void *buf, size_t n);
/* Writes up to n bytes: > 0 written, -1 on error (errno, or EIO). */
ssize_t pg_io_write(pg_io *io, const void *buf, size_t n);
/* Sends close_notify (best effort) and frees the SSL; the fd stays open. */
void pg_io_end_tls(pg_io *io);

typedef struct pg_tls pg_tls;

/* Loads cert_file (the chain, leaf first) and key_file; checks they match.
 * TLS 1.2 or later. *out: pg_tls_free. */
mr_status pg_tls_open(const char *cert_file, const char *key_file, pg_tls **out,
                      mr_error *err) MR_MUST_CHECK;
/* Reloads both files; on failure the current context stays. */
mr_status pg_tls_reload(pg_tls *t, mr_error *err) MR_MUST_CHECK;
void pg_tls_free(pg_tls *t);

/* The server side of the handshake on io->fd; on MR_OK io->ssl is set.
 * Blocking: the connection's authentication deadline bounds it. */
mr_status pg_tls_accept(pg_tls *t, pg_io *io, mr_error *err) MR_MUST_CHECK;

#endif /* MR_PG_TLS_H */
