/*
 * pg_server.h — the PostgreSQL v3 protocol server: a listening socket and
 * one thread per client connection (pg_conn.c runs the protocol; the live
 * connections, their limits, deadlines and cancels are in pg_registry.h).
 * The SQL behind it is an sql_engine (sql/sql.h); this layer knows nothing
 * of DuckDB.
 *
 * Lifecycle: pg_server_start binds and listens (so "address in use" is
 * reported before anything is served); pg_server_run accepts until
 * pg_server_stop, then drains: no new connections, idle ones are ended
 * (FATAL 57P01), running statements and open transactions get up to
 * shutdown_timeout_ms to finish, then whatever is left is cancelled and its
 * socket shut; it returns once every connection thread has ended.
 * pg_server_stop is async-signal-safe.
 */
#ifndef MR_PG_SERVER_H
#define MR_PG_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"
#include "pgwire/pg_tls.h"
#include "pgwire/pg_users.h"
#include "sql/sql.h"

typedef struct pg_server pg_server;

/*
 * Where sessions come from when a server serves many catalogs: open gets the
 * startup packet's user and database and returns a session (and an opaque
 * handle given back to close); a refusal's sql_error reaches the client as
 * FATAL (e.g. 3D000 for a database that does not exist). close ends the
 * session and releases what open took. Both are called from connection
 * threads, concurrently.
 */
typedef struct pg_session_source {
  void *ctx;
  mr_status (*open)(void *ctx, const char *user, const char *database, sql_session **out,
                    void **handle, sql_error *err);
  void (*close)(void *ctx, sql_session *session, void *handle);
} pg_session_source;

typedef struct pg_server_config {
  const char *host;             /* numeric IPv4/IPv6 address or a name */
  const char *port;             /* "0" picks a free port */
  pg_users *users;              /* who may connect (borrowed); NULL: trust, only on
                                   loopback unless TLS is on */
  int max_connections;          /* sessions; beyond it clients get 53300 */
  size_t max_message;           /* larger messages close the connection */
  uint64_t auth_timeout_ms;     /* accept -> authenticated, else closed */
  uint64_t shutdown_timeout_ms; /* the drain's bound at stop */
  uint64_t auth_fail_delay_ms;  /* a failed authentication waits this long */
  int64_t slow_statement_ms;    /* log statements that take this long; <0: never */
  bool log_commit_phases;       /* log where each commit's time went */
  pg_tls *tls;                  /* certificate for SSLRequest, or NULL: answer 'N' */
  bool tls_required;            /* refuse connections that did not negotiate TLS */
  const pg_session_source *sessions; /* NULL: every session on the engine given
                                      * to pg_server_start */
} pg_server_config;

/* Zero in a config field means its default. */
#define PG_DEFAULT_MAX_CONNECTIONS 256
#define PG_DEFAULT_MAX_MESSAGE ((size_t)256 << 20)
#define PG_DEFAULT_AUTH_TIMEOUT_MS 10000
#define PG_DEFAULT_SHUTDOWN_TIMEOUT_MS 10000
#define PG_DEFAULT_AUTH_FAIL_DELAY_MS 1000
#define PG_DEFAULT_SLOW_STATEMENT_MS 1000 /* serve's default; 0 here logs all */
/* Connections that have not sent their startup packet yet: at most
 * max(PG_MIN_PENDING, max_connections) at once; more are refused at accept. */
#define PG_MIN_PENDING 64

/* engine may be NULL when cfg->sessions is set. */
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
typedef struct pg_registry pg_registry;
typedef struct pg_entry pg_entry;

typedef struct pg_conn_args {
  int fd;
  const char *peer; /* "address:port" of the client */
  pg_registry *registry;
  pg_entry *entry; /* this connection in the registry */
  sql_engine *engine;
  pg_users *users; /* NULL: trust (everyone writes) */
  const pg_session_source *sessions; /* or NULL: sessions on engine */
  size_t max_message;
  uint64_t auth_timeout_ms; /* for the log line when it passes */
  uint64_t auth_fail_delay_ms;
  int64_t slow_statement_ms; /* <0: never log statement durations */
  bool log_commit_phases;    /* one line per commit: its phases' times */
  pg_tls *tls;               /* NULL: SSLRequest answered 'N' */
  bool tls_required;
} pg_conn_args;

/* Runs one connection to its end (closes nothing: the caller owns fd and
 * removes the entry). */
void pg_conn_run(const pg_conn_args *a);

#endif /* MR_PG_SERVER_H */
