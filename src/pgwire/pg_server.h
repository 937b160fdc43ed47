/*
 * pg_server.h — the PostgreSQL v3 protocol server: a listening socket and
 * one thread per client connection (pg_conn.c runs the protocol). The SQL
 * behind it is an sql_engine (sql/sql.h); this layer knows nothing of DuckDB.
 *
 * Lifecycle: pg_server_start binds and listens (so "address in use" is
 * reported before anything is served); pg_server_run accepts until
 * pg_server_stop; then it closes every client connection, waits for their
 * threads and returns. pg_server_stop is async-signal-safe.
 */
#ifndef MR_PG_SERVER_H
#define MR_PG_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"
#include "sql/sql.h"

typedef struct pg_server pg_server;

typedef struct pg_server_config {
  const char *host;        /* numeric IPv4/IPv6 address or a name */
  const char *port;        /* "0" picks a free port */
  const char *password;    /* NULL: trust (only allowed on loopback) */
  int max_connections;     /* beyond it clients get 53300 */
  size_t max_message;      /* larger messages close the connection */
} pg_server_config;

#define PG_DEFAULT_MAX_CONNECTIONS 64
#define PG_DEFAULT_MAX_MESSAGE ((size_t)256 << 20)

mr_status pg_server_start(const pg_server_config *cfg, sql_engine *engine, pg_server **out,
                          mr_error *err) MR_MUST_CHECK;
/* "host:port" as bound (the real port when 0 was asked). Valid until free. */
const char *pg_server_address(const pg_server *s);
mr_status pg_server_run(pg_server *s, mr_error *err) MR_MUST_CHECK;
void pg_server_stop(pg_server *s);
void pg_server_free(pg_server *s);

/* True for 127.0.0.0/8, ::1 and "localhost". */
bool pg_host_is_loopback(const char *host);

/* ---- for pg_conn.c ---- */
typedef struct pg_conn_args {
  int fd;
  uint32_t id;          /* BackendKeyData process id */
  uint32_t secret;
  sql_engine *engine;
  const char *password; /* NULL: trust */
  size_t max_message;
  int over_limit;       /* answer 53300 after the startup packet */
} pg_conn_args;

/* Runs one connection to its end (closes nothing: the caller owns fd). */
void pg_conn_run(const pg_conn_args *a);

#endif /* MR_PG_SERVER_H */
