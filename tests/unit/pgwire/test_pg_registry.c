/* test_pg_registry.c — the live-connection registry: keys and
 * CancelRequest matching, the two connection limits, the authentication
 * deadline, statement deadlines and their re-firing, a client that went
 * away, detach, and the shutdown steps. A fake clock drives the watchdog's
 * step (pg_registry_tick) directly; one test runs the real watchdog thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pgwire/pg_registry.h"

static uint64_t fake_now = 1000;
static atomic_int cancels;
static void *_Atomic last_cancelled;

static uint64_t fake_clock(void) {
  return fake_now;
}

static void count_cancel(void *session) {
  atomic_fetch_add(&cancels, 1);
  atomic_store(&last_cancelled, session);
}

static pg_registry *make(int max_connections, int max_pending, uint64_t auth_ms, bool real_clock) {
  fake_now = 1000;
  atomic_store(&cancels, 0);
  atomic_store(&last_cancelled, NULL);
  pg_registry_config cfg = {max_connections, max_pending, auth_ms, count_cancel,
                            real_clock ? NULL : fake_clock};
  pg_registry *r = NULL;
  mr_error err;
  assert_int_equal(pg_registry_new(&cfg, &r, &err), MR_OK);
  return r;
}

/* A socket pair: sv[0] is the server's end given to the registry. */
static void pair(int sv[2]) {
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

/* True when the client end sees EOF at once (the server end was shut). */
static bool client_sees_eof(int fd) {
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char b;
  return read(fd, &b, 1) == 0;
}

static int session_a, session_b; /* fake sessions: only their addresses matter */

static void keys_are_distinct(void **state) {
  pg_registry *r = make(8, 8, 0, false);
  pg_entry *e[4];
  uint32_t pid[4], key[4];
  mr_error err;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pg_registry_add(r, -1, &e[i], &err), MR_OK);
    pg_registry_key(e[i], &pid[i], &key[i]);
    assert_true(pid[i] > 0 && pid[i] <= 0x7fffffffu);
    for (int j = 0; j < i; j++)
      assert_int_not_equal(pid[i], pid[j]);
  }
  /* random keys: four equal 32-bit keys would mean no randomness */
  assert_false(key[0] == key[1] && key[1] == key[2] && key[2] == key[3]);
  for (int i = 0; i < 4; i++)
    pg_registry_remove(r, e[i]);
  pg_registry_free(r);
}

static void pending_and_session_limits(void **state) {
  pg_registry *r = make(1, 2, 0, false);
  pg_entry *a, *b, *c;
  mr_error err;
  assert_int_equal(pg_registry_add(r, -1, &a, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, -1, &b, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, -1, &c, &err), MR_ERR_CONFLICT); /* 2 pending */
  assert_int_equal(pg_registry_claim(r, a, &err), MR_OK);              /* a: a session slot */
  assert_int_equal(pg_registry_add(r, -1, &c, &err), MR_OK);           /* a left pending */
  assert_int_equal(pg_registry_claim(r, b, &err), MR_ERR_CONFLICT);    /* 1 session max */
  assert_non_null(strstr(err.msg, "too many"));
  pg_registry_remove(r, a);
  assert_int_equal(pg_registry_claim(r, c, &err), MR_OK); /* a's slot came back */
  pg_registry_remove(r, b);
  pg_registry_remove(r, c);
  assert_true(pg_registry_wait_empty(r, 0));
  pg_registry_free(r);
}

static void cancel_needs_the_right_key(void **state) {
  pg_registry *r = make(4, 4, 0, false);
  pg_entry *e;
  mr_error err;
  assert_int_equal(pg_registry_add(r, -1, &e, &err), MR_OK);
  uint32_t pid, key;
  pg_registry_key(e, &pid, &key);
  /* not authenticated yet: nothing to cancel even with the right key */
  assert_int_equal(pg_registry_cancel(r, pid, key), PG_CANCEL_NO_MATCH);
  pg_registry_authenticated(r, e, &session_a);
  assert_int_equal(pg_registry_cancel(r, pid, key), PG_CANCEL_IDLE); /* nothing running */
  assert_int_equal(atomic_load(&cancels), 0);
  pg_registry_begin(r, e, 0);
  assert_int_equal(pg_registry_cancel(r, pid, key ^ 1u), PG_CANCEL_NO_MATCH);
  assert_int_equal(pg_registry_cancel(r, pid + 1000, key), PG_CANCEL_NO_MATCH);
  assert_int_equal(atomic_load(&cancels), 0);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_NONE);
  assert_int_equal(pg_registry_cancel(r, pid, key), PG_CANCEL_SENT);
  assert_int_equal(atomic_load(&cancels), 1);
  assert_ptr_equal(atomic_load(&last_cancelled), &session_a);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_USER);
  assert_false(pg_registry_end(r, e, true));
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_NONE);
  /* detached: a late cancel never reaches the (closing) session */
  pg_registry_begin(r, e, 0);
  pg_registry_detach(r, e);
  assert_int_equal(pg_registry_cancel(r, pid, key), PG_CANCEL_NO_MATCH);
  fake_now += 100000;
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 1);
  pg_registry_remove(r, e);
  pg_registry_free(r);
}

static void statement_deadline_fires_and_refires(void **state) {
  pg_registry *r = make(4, 4, 0, false);
  pg_entry *e, *other;
  mr_error err;
  assert_int_equal(pg_registry_add(r, -1, &e, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, -1, &other, &err), MR_OK);
  pg_registry_authenticated(r, e, &session_a);
  pg_registry_authenticated(r, other, &session_b);
  pg_registry_begin(r, e, 200);
  pg_registry_begin(r, other, 0); /* no timeout: never fired */
  fake_now += 150;
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 0);
  fake_now += 100;
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 1);
  assert_ptr_equal(atomic_load(&last_cancelled), &session_a);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_TIMEOUT);
  pg_registry_tick(r); /* not again at once */
  assert_int_equal(atomic_load(&cancels), 1);
  fake_now += PG_REFIRE_MS;
  pg_registry_tick(r); /* still running: fired again */
  assert_int_equal(atomic_load(&cancels), 2);
  /* the next statement of the message: a fresh deadline, the timeout forgotten */
  pg_registry_restart(r, e, 200);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_NONE);
  fake_now += 199;
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 2);
  assert_false(pg_registry_end(r, e, true));
  fake_now += 10000; /* ended: no deadline left */
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 2);
  assert_int_equal(pg_registry_reason(r, other), PG_CANCEL_NONE);
  pg_registry_remove(r, e);
  pg_registry_remove(r, other);
  pg_registry_free(r);
}

static void auth_deadline_shuts_the_socket(void **state) {
  pg_registry *r = make(4, 4, 1000, false);
  int slow[2], done[2];
  pair(slow);
  pair(done);
  pg_entry *s, *d;
  mr_error err;
  assert_int_equal(pg_registry_add(r, slow[0], &s, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, done[0], &d, &err), MR_OK);
  fake_now += 500;
  pg_registry_tick(r);
  assert_false(pg_registry_timed_out(r, s));
  pg_registry_authenticated(r, d, &session_b);
  fake_now += 600;
  pg_registry_tick(r);
  assert_true(pg_registry_timed_out(r, s));
  assert_false(pg_registry_timed_out(r, d));
  assert_true(client_sees_eof(slow[1]));
  assert_int_equal(write(done[1], "x", 1), 1); /* the authenticated one still works */
  char b;
  assert_int_equal(read(done[0], &b, 1), 1);
  pg_registry_remove(r, s);
  pg_registry_remove(r, d);
  for (int i = 0; i < 2; i++) {
    close(slow[i]);
    close(done[i]);
  }
  pg_registry_free(r);
}

static void client_gone_cancels(void **state) {
  pg_registry *r = make(4, 4, 0, false);
  int sv[2];
  pair(sv);
  pg_entry *e;
  mr_error err;
  assert_int_equal(pg_registry_add(r, sv[0], &e, &err), MR_OK);
  pg_registry_authenticated(r, e, &session_a);
  pg_registry_begin(r, e, 0);
  assert_int_equal(write(sv[1], "pipelined", 9), 9); /* data pending is not "gone" */
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 0);
  close(sv[1]);
  pg_registry_tick(r);
  assert_int_equal(atomic_load(&cancels), 1);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_GONE);
  pg_registry_end(r, e, true);
  pg_registry_remove(r, e);
  close(sv[0]);
  pg_registry_free(r);
}

static void stop_ends_idle_and_waits_for_busy(void **state) {
  pg_registry *r = make(4, 4, 0, false);
  int idle[2], busy[2], unauth[2];
  pair(idle);
  pair(busy);
  pair(unauth);
  pg_entry *i, *b, *u, *late;
  mr_error err;
  assert_int_equal(pg_registry_add(r, idle[0], &i, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, busy[0], &b, &err), MR_OK);
  assert_int_equal(pg_registry_add(r, unauth[0], &u, &err), MR_OK);
  assert_int_equal(pg_registry_claim(r, i, &err), MR_OK);
  assert_int_equal(pg_registry_claim(r, b, &err), MR_OK);
  pg_registry_authenticated(r, i, &session_a);
  pg_registry_authenticated(r, b, &session_b);
  pg_registry_begin(r, i, 0);
  assert_false(pg_registry_end(r, i, true)); /* idle again */
  pg_registry_begin(r, b, 0);
  assert_false(pg_registry_stopping(r));
  pg_registry_stop(r);
  assert_true(pg_registry_stopping(r));
  assert_true(client_sees_eof(unauth[1])); /* not authenticated: shut */
  char c;
  assert_int_equal(read(idle[0], &c, 1), 0);   /* idle: its read side shut */
  assert_int_equal(write(busy[1], "x", 1), 1); /* busy: untouched */
  assert_int_equal(read(busy[0], &c, 1), 1);
  assert_int_equal(pg_registry_add(r, -1, &late, &err), MR_ERR_CLOSED);
  assert_int_equal(pg_registry_claim(r, u, &err), MR_ERR_CLOSED);
  assert_false(pg_registry_end(r, b, false)); /* inside a transaction: goes on */
  pg_registry_begin(r, b, 0);
  assert_false(pg_registry_wait_empty(r, 10));
  assert_int_equal(pg_registry_abort_all(r, false), 3);
  assert_int_equal(atomic_load(&cancels), 1); /* only the running one */
  assert_ptr_equal(atomic_load(&last_cancelled), &session_b);
  assert_int_equal(pg_registry_reason(r, b), PG_CANCEL_SHUTDOWN);
  assert_int_equal(read(busy[0], &c, 1), 0);   /* read side shut: the thread ends... */
  assert_int_equal(write(busy[0], "y", 1), 1); /* ...but can still tell its client */
  assert_int_equal(read(busy[1], &c, 1), 1);
  assert_int_equal(pg_registry_abort_all(r, true), 3);
  assert_int_equal(atomic_load(&cancels), 1); /* not cancelled twice */
  assert_true(client_sees_eof(busy[1]));
  assert_true(pg_registry_end(r, b, true)); /* idle while stopping: end now */
  pg_registry_remove(r, i);
  pg_registry_remove(r, b);
  pg_registry_remove(r, u);
  assert_true(pg_registry_wait_empty(r, 10));
  for (int k = 0; k < 2; k++) {
    close(idle[k]);
    close(busy[k]);
    close(unauth[k]);
  }
  pg_registry_free(r);
}

static void watchdog_thread_enforces_a_deadline(void **state) {
  pg_registry *r = make(4, 4, 0, true);
  mr_error err;
  assert_int_equal(pg_registry_watch(r, &err), MR_OK);
  pg_entry *e;
  assert_int_equal(pg_registry_add(r, -1, &e, &err), MR_OK);
  pg_registry_authenticated(r, e, &session_a);
  pg_registry_begin(r, e, 50);
  for (int i = 0; i < 500 && atomic_load(&cancels) == 0; i++) { /* up to 5 s */
    struct timespec ts = {0, 10000000L};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(atomic_load(&cancels), 1);
  assert_int_equal(pg_registry_reason(r, e), PG_CANCEL_TIMEOUT);
  pg_registry_end(r, e, true);
  pg_registry_remove(r, e);
  pg_registry_free(r); /* stops and joins the watchdog */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(keys_are_distinct),
      cmocka_unit_test(pending_and_session_limits),
      cmocka_unit_test(cancel_needs_the_right_key),
      cmocka_unit_test(statement_deadline_fires_and_refires),
      cmocka_unit_test(auth_deadline_shuts_the_socket),
      cmocka_unit_test(client_gone_cancels),
      cmocka_unit_test(stop_ends_idle_and_waits_for_busy),
      cmocka_unit_test(watchdog_thread_enforces_a_deadline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
