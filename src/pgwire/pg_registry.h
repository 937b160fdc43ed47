/*
 * pg_registry.h — the live connections of one server, and everything that
 * acts on a connection from outside its own thread: the connection limits,
 * the BackendKeyData keys and CancelRequest, the authentication timeout,
 * the statement timeout, cancelling the work of a client that went away,
 * and the drain at shutdown.
 *
 * A connection's thread reports what it does: pg_registry_add at accept,
 * pg_registry_claim after its startup packet (takes one of max_connections
 * slots), pg_registry_authenticated with its session, pg_registry_begin /
 * _restart / _end around each message (and each statement of a message),
 * pg_registry_detach before it closes its session, pg_registry_remove
 * last. Others act on it: the watchdog (pg_registry_tick, every
 * PG_WATCH_INTERVAL_MS on its own thread once pg_registry_watch started
 * it) and CancelRequests (pg_registry_cancel, from other connection
 * threads) call the configured cancel function on its session, or shut its
 * socket down.
 *
 * One mutex guards everything. A session is cancelled only with that mutex
 * held, and a connection detaches its session under the same mutex before
 * closing it, so a canceller never touches a freed session. Sockets are
 * only shut down from outside (never closed): the owning thread closes its
 * fd after pg_registry_remove, so a descriptor number is never reused while
 * the registry still knows it.
 *
 * A cancel (user request, statement timeout, client gone, shutdown) is
 * recorded as the reason of the running message and fired again every
 * PG_REFIRE_MS while that message runs, since an interrupt that lands
 * between two engine calls is lost; pg_registry_end clears it.
 *
 * Ownership: the registry owns its entries; an entry is valid from
 * pg_registry_add until pg_registry_remove.
 */
#ifndef MR_PG_REGISTRY_H
#define MR_PG_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

#define PG_WATCH_INTERVAL_MS 50
#define PG_REFIRE_MS 1000

typedef struct pg_registry pg_registry;
typedef struct pg_entry pg_entry;

typedef struct pg_registry_config {
  int max_connections;           /* connections past their startup packet */
  int max_pending;               /* connections before it */
  uint64_t auth_timeout_ms;      /* accept -> authenticated; 0: none */
  void (*cancel)(void *session); /* interrupts the session's statement */
  uint64_t (*now_ms)(void);      /* a monotonic clock; NULL: CLOCK_MONOTONIC */
} pg_registry_config;

typedef enum pg_cancel_reason {
  PG_CANCEL_NONE = 0,
  PG_CANCEL_USER,     /* a CancelRequest with the right key */
  PG_CANCEL_TIMEOUT,  /* statement_timeout passed */
  PG_CANCEL_GONE,     /* the client closed its socket */
  PG_CANCEL_SHUTDOWN, /* the drain at shutdown ran out of time */
} pg_cancel_reason;

typedef enum pg_cancel_result {
  PG_CANCEL_NO_MATCH, /* no live connection with that process id and key */
  PG_CANCEL_IDLE,     /* matched; nothing was running */
  PG_CANCEL_SENT,     /* matched; its running message is being cancelled */
} pg_cancel_result;

mr_status pg_registry_new(const pg_registry_config *cfg, pg_registry **out,
                          mr_error *err) MR_MUST_CHECK;
/* Starts the watchdog thread (pg_registry_tick every PG_WATCH_INTERVAL_MS). */
mr_status pg_registry_watch(pg_registry *r, mr_error *err) MR_MUST_CHECK;
/* Stops the watchdog; every entry must have been removed. */
void pg_registry_free(pg_registry *r);

/* A new connection on fd. MR_ERR_CONFLICT when max_pending connections are
 * already waiting for their startup packet, MR_ERR_CLOSED while stopping,
 * MR_ERR_IO when no random key could be made. */
mr_status pg_registry_add(pg_registry *r, int fd, pg_entry **out, mr_error *err) MR_MUST_CHECK;
/* Its BackendKeyData: a process id unique in this server, a random key. */
void pg_registry_key(const pg_entry *e, uint32_t *pid, uint32_t *secret);
/* After the startup packet: takes a connection slot. MR_ERR_CONFLICT when
 * all max_connections are taken, MR_ERR_CLOSED while stopping. */
mr_status pg_registry_claim(pg_registry *r, pg_entry *e, mr_error *err) MR_MUST_CHECK;
/* Authentication done, session open: the authentication deadline ends. */
void pg_registry_authenticated(pg_registry *r, pg_entry *e, void *session);
/* True when the watchdog shut the socket because authentication took
 * longer than auth_timeout_ms. */
bool pg_registry_timed_out(pg_registry *r, pg_entry *e);

/* A message starts: the first statement's deadline is timeout_ms from now
 * (0: none), no cancel reason. */
void pg_registry_begin(pg_registry *r, pg_entry *e, uint64_t timeout_ms);
/* The next statement of the same message: a fresh deadline; a timeout
 * reason of the finished statement is forgotten (others stay). */
void pg_registry_restart(pg_registry *r, pg_entry *e, uint64_t timeout_ms);
/* Why the running message is being cancelled; PG_CANCEL_NONE if it is not. */
pg_cancel_reason pg_registry_reason(pg_registry *r, pg_entry *e);
/* The message is done. idle: the connection now waits for a new
 * transaction (ReadyForQuery 'I'). True when the server is stopping and the
 * connection, idle, should end now. */
bool pg_registry_end(pg_registry *r, pg_entry *e, bool idle);
/* The session is about to be closed: no canceller will touch it again. */
void pg_registry_detach(pg_registry *r, pg_entry *e);
/* Last call for an entry: frees it (the caller then closes its fd). */
void pg_registry_remove(pg_registry *r, pg_entry *e);

/* A CancelRequest: cancels the running message of the connection with
 * this process id when the key matches (compared in constant time). */
pg_cancel_result pg_registry_cancel(pg_registry *r, uint32_t pid, uint32_t secret);

/* The watchdog's step: shuts the socket of a connection past its
 * authentication deadline, cancels a message past its statement deadline
 * or whose client closed its socket (poll POLLRDHUP), fires recorded
 * cancels again every PG_REFIRE_MS. */
void pg_registry_tick(pg_registry *r);

/* Shutdown, step 1: refuse new connections and slots; shut the sockets of
 * connections not yet authenticated, and the read side of every idle one
 * (its thread then ends it). Busy connections go on until pg_registry_end
 * reports them idle. */
void pg_registry_stop(pg_registry *r);
bool pg_registry_stopping(pg_registry *r);
/* Shutdown, step 2 (the drain ran out of time): cancel every running
 * message (reason PG_CANCEL_SHUTDOWN) and shut the read side of every
 * socket, so each thread can still tell its client why; hard: shut both
 * sides (a thread blocked sending to a client that does not read).
 * Returns how many connections were left. */
size_t pg_registry_abort_all(pg_registry *r, bool hard);
/* Waits until no connection is left or timeout_ms passed (UINT64_MAX:
 * forever); true when none is left. */
bool pg_registry_wait_empty(pg_registry *r, uint64_t timeout_ms);

#endif /* MR_PG_REGISTRY_H */
