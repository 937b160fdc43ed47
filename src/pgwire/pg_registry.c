/*
 * pg_registry.c — the live connections of a server (pg_registry.h): one
 * mutex, a list of entries, the counters behind the limits, and the
 * watchdog thread that enforces deadlines.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "pgwire/pg_registry.h"

#include <errno.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct pg_entry {
  int fd;
  uint32_t pid;
  uint32_t secret;
  bool pending;           /* counted in r->pending (before the startup packet) */
  bool claimed;           /* holds one of max_connections */
  void *session;          /* NULL before authentication and after detach */
  uint64_t auth_deadline; /* 0: authenticated (or no timeout) */
  bool timed_out;         /* shut by the watchdog at auth_deadline */
  bool in_message;        /* between begin and end */
  bool busy;              /* in a message or inside a transaction */
  bool shut_rd;           /* read side shut by pg_registry_stop */
  bool shut;              /* both sides shut */
  uint64_t deadline;      /* the running statement's; 0: none */
  pg_cancel_reason reason;
  uint64_t next_fire;
  struct pg_entry *next;
};

struct pg_registry {
  pg_registry_config cfg;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* an entry left, or the watchdog should stop */
  pg_entry *entries;
  size_t count;
  int pending;
  int active;
  uint32_t next_pid;
  bool stopping;
  bool watching;
  bool watch_stop;
  pthread_t watcher;
};

static uint64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t now_of(const pg_registry *r) {
  return r->cfg.now_ms ? r->cfg.now_ms() : monotonic_ms();
}

/* A deadline on CLOCK_MONOTONIC (the condition variable's clock). */
static struct timespec abs_after(uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000u);
  ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

mr_status pg_registry_new(const pg_registry_config *cfg, pg_registry **out, mr_error *err) {
  *out = NULL;
  if (cfg->max_connections <= 0 || cfg->max_pending <= 0 || cfg->cancel == NULL)
    return mr_fail(err, MR_ERR_INVALID, "registry: limits must be positive and cancel set");
  pg_registry *r = calloc(1, sizeof *r);
  if (r == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  r->cfg = *cfg;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->changed, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&r->lock, NULL);
  r->next_pid = ((uint32_t)getpid() & 0x7fffffu) << 8;
  *out = r;
  return MR_OK;
}

static void *watch_main(void *arg) {
  pg_registry *r = arg;
  for (;;) {
    pg_registry_tick(r);
    pthread_mutex_lock(&r->lock);
    if (!r->watch_stop) {
      struct timespec ts = abs_after(PG_WATCH_INTERVAL_MS);
      pthread_cond_timedwait(&r->changed, &r->lock, &ts);
    }
    bool stop = r->watch_stop;
    pthread_mutex_unlock(&r->lock);
    if (stop)
      return NULL;
  }
}

mr_status pg_registry_watch(pg_registry *r, mr_error *err) {
  if (r->watching)
    return MR_OK;
  int rc = pthread_create(&r->watcher, NULL, watch_main, r);
  if (rc != 0)
    return mr_fail(err, MR_ERR_IO, "cannot start the connection watchdog: error %d", rc);
  r->watching = true;
  return MR_OK;
}

void pg_registry_free(pg_registry *r) {
  if (r == NULL)
    return;
  if (r->watching) {
    pthread_mutex_lock(&r->lock);
    r->watch_stop = true;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->watcher, NULL);
  }
  while (r->entries) { /* only after a caller error; never leak */
    pg_entry *e = r->entries;
    r->entries = e->next;
    free(e);
  }
  pthread_cond_destroy(&r->changed);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

mr_status pg_registry_add(pg_registry *r, int fd, pg_entry **out, mr_error *err) {
  *out = NULL;
  uint8_t key[4];
  if (RAND_bytes(key, sizeof key) != 1)
    return mr_fail(err, MR_ERR_IO, "no random bytes for a cancel key");
  pg_entry *e = calloc(1, sizeof *e);
  if (e == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  e->fd = fd;
  e->secret = (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
  e->pending = true;
  pthread_mutex_lock(&r->lock);
  mr_status rc = MR_OK;
  if (r->stopping)
    rc = mr_fail(err, MR_ERR_CLOSED, "the server is shutting down");
  else if (r->pending >= r->cfg.max_pending)
    rc = mr_fail(err, MR_ERR_CONFLICT, "%d connections are already waiting to authenticate",
                 r->pending);
  if (rc == MR_OK) {
    r->next_pid = (r->next_pid + 1) & 0x7fffffffu;
    if (r->next_pid == 0)
      r->next_pid = 1;
    e->pid = r->next_pid;
    if (r->cfg.auth_timeout_ms)
      e->auth_deadline = now_of(r) + r->cfg.auth_timeout_ms;
    e->next = r->entries;
    r->entries = e;
    r->count++;
    r->pending++;
  }
  pthread_mutex_unlock(&r->lock);
  if (rc) {
    free(e);
    return rc;
  }
  *out = e;
  return MR_OK;
}

void pg_registry_key(const pg_entry *e, uint32_t *pid, uint32_t *secret) {
  *pid = e->pid; /* both fixed at add: no lock needed */
  *secret = e->secret;
}

mr_status pg_registry_claim(pg_registry *r, pg_entry *e, mr_error *err) {
  mr_status rc = MR_OK;
  pthread_mutex_lock(&r->lock);
  if (e->pending) {
    e->pending = false;
    r->pending--;
  }
  if (r->stopping)
    rc = mr_fail(err, MR_ERR_CLOSED, "the database system is shutting down");
  else if (!e->claimed && r->active >= r->cfg.max_connections)
    rc = mr_fail(err, MR_ERR_CONFLICT, "sorry, too many clients already (too many connections)");
  else if (!e->claimed) {
    e->claimed = true;
    r->active++;
  }
  pthread_mutex_unlock(&r->lock);
  return rc;
}

void pg_registry_authenticated(pg_registry *r, pg_entry *e, void *session) {
  pthread_mutex_lock(&r->lock);
  e->session = session;
  e->auth_deadline = 0;
  pthread_mutex_unlock(&r->lock);
}

bool pg_registry_timed_out(pg_registry *r, pg_entry *e) {
  pthread_mutex_lock(&r->lock);
  bool t = e->timed_out;
  pthread_mutex_unlock(&r->lock);
  return t;
}

void pg_registry_begin(pg_registry *r, pg_entry *e, uint64_t timeout_ms) {
  uint64_t now = now_of(r);
  pthread_mutex_lock(&r->lock);
  e->in_message = true;
  e->busy = true;
  e->reason = PG_CANCEL_NONE;
  e->deadline = timeout_ms ? now + timeout_ms : 0;
  pthread_mutex_unlock(&r->lock);
}

void pg_registry_restart(pg_registry *r, pg_entry *e, uint64_t timeout_ms) {
  uint64_t now = now_of(r);
  pthread_mutex_lock(&r->lock);
  e->deadline = timeout_ms ? now + timeout_ms : 0;
  if (e->reason == PG_CANCEL_TIMEOUT)
    e->reason = PG_CANCEL_NONE;
  pthread_mutex_unlock(&r->lock);
}

pg_cancel_reason pg_registry_reason(pg_registry *r, pg_entry *e) {
  pthread_mutex_lock(&r->lock);
  pg_cancel_reason why = e->reason;
  pthread_mutex_unlock(&r->lock);
  return why;
}

bool pg_registry_end(pg_registry *r, pg_entry *e, bool idle) {
  pthread_mutex_lock(&r->lock);
  e->in_message = false;
  e->deadline = 0;
  e->reason = PG_CANCEL_NONE;
  e->busy = !idle;
  bool stop = r->stopping && idle;
  pthread_mutex_unlock(&r->lock);
  return stop;
}

void pg_registry_detach(pg_registry *r, pg_entry *e) {
  pthread_mutex_lock(&r->lock);
  e->session = NULL;
  e->in_message = false;
  pthread_mutex_unlock(&r->lock);
}

void pg_registry_remove(pg_registry *r, pg_entry *e) {
  pthread_mutex_lock(&r->lock);
  for (pg_entry **p = &r->entries; *p; p = &(*p)->next) {
    if (*p == e) {
      *p = e->next;
      break;
    }
  }
  if (e->pending)
    r->pending--;
  if (e->claimed)
    r->active--;
  r->count--;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->lock);
  free(e);
}

/* Interrupts e's session now and records why (the first reason stays).
 * Called with the lock held, so the session cannot be detached meanwhile. */
static void fire(pg_registry *r, pg_entry *e, pg_cancel_reason why, uint64_t now) {
  if (e->reason == PG_CANCEL_NONE)
    e->reason = why;
  r->cfg.cancel(e->session);
  e->next_fire = now + PG_REFIRE_MS;
}

pg_cancel_result pg_registry_cancel(pg_registry *r, uint32_t pid, uint32_t secret) {
  pg_cancel_result res = PG_CANCEL_NO_MATCH;
  uint64_t now = now_of(r);
  pthread_mutex_lock(&r->lock);
  for (pg_entry *e = r->entries; e; e = e->next) {
    if (e->pid != pid)
      continue;
    volatile uint32_t diff = e->secret ^ secret; /* no early exit on the key */
    if (diff != 0 || e->session == NULL)
      break;
    res = PG_CANCEL_IDLE;
    if (e->in_message) {
      fire(r, e, PG_CANCEL_USER, now);
      res = PG_CANCEL_SENT;
    }
    break;
  }
  pthread_mutex_unlock(&r->lock);
  return res;
}

static void shut(pg_entry *e) {
  if (!e->shut) {
    shutdown(e->fd, SHUT_RDWR);
    e->shut = true;
  }
}

/* True when the client closed its end (FIN or reset) while a statement runs. */
static bool peer_gone(int fd) {
  struct pollfd p = {fd, POLLRDHUP, 0};
  int n = poll(&p, 1, 0);
  return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void pg_registry_tick(pg_registry *r) {
  uint64_t now = now_of(r);
  pthread_mutex_lock(&r->lock);
  for (pg_entry *e = r->entries; e; e = e->next) {
    if (e->auth_deadline && now >= e->auth_deadline && !e->timed_out) {
      e->timed_out = true;
      shut(e);
    }
    if (!e->in_message || e->session == NULL)
      continue;
    if (e->reason != PG_CANCEL_NONE) {
      if (now >= e->next_fire)
        fire(r, e, e->reason, now);
    } else if (e->deadline && now >= e->deadline) {
      fire(r, e, PG_CANCEL_TIMEOUT, now);
    } else if (!e->shut_rd && !e->shut && peer_gone(e->fd)) {
      fire(r, e, PG_CANCEL_GONE, now);
    }
  }
  pthread_mutex_unlock(&r->lock);
}

void pg_registry_stop(pg_registry *r) {
  pthread_mutex_lock(&r->lock);
  r->stopping = true;
  for (pg_entry *e = r->entries; e; e = e->next) {
    if (e->session == NULL) {
      shut(e);
    } else if (!e->busy && !e->shut_rd) {
      shutdown(e->fd, SHUT_RD);
      e->shut_rd = true;
    }
  }
  pthread_mutex_unlock(&r->lock);
}

bool pg_registry_stopping(pg_registry *r) {
  pthread_mutex_lock(&r->lock);
  bool s = r->stopping;
  pthread_mutex_unlock(&r->lock);
  return s;
}

size_t pg_registry_abort_all(pg_registry *r, bool hard) {
  uint64_t now = now_of(r);
  pthread_mutex_lock(&r->lock);
  for (pg_entry *e = r->entries; e; e = e->next) {
    if (e->session && e->in_message && e->reason == PG_CANCEL_NONE)
      fire(r, e, PG_CANCEL_SHUTDOWN, now);
    if (hard) {
      shut(e);
    } else if (!e->shut_rd && !e->shut) {
      shutdown(e->fd, SHUT_RD);
      e->shut_rd = true;
    }
  }
  size_t n = r->count;
  pthread_mutex_unlock(&r->lock);
  return n;
}

bool pg_registry_wait_empty(pg_registry *r, uint64_t timeout_ms) {
  struct timespec ts = abs_after(timeout_ms == UINT64_MAX ? 0 : timeout_ms);
  pthread_mutex_lock(&r->lock);
  while (r->count > 0) {
    if (timeout_ms == UINT64_MAX) {
      pthread_cond_wait(&r->changed, &r->lock);
    } else if (pthread_cond_timedwait(&r->changed, &r->lock, &ts) == ETIMEDOUT) {
      break;
    }
  }
  bool empty = r->count == 0;
  pthread_mutex_unlock(&r->lock);
  return empty;
}
