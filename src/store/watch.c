/*
 * watch.c — the store watcher (store_watch_* of store.h): one thread that
 * probes a writer's store at a fixed interval, so that an operator learns of
 * a store that stops answering, of its recovery, and of a takeover by
 * another writer, each once, in the log — even when no client is writing.
 * While the store is failed it runs store_recover instead of the probe, so
 * that writes resume by themselves once the store answers again.
 *
 * After a maintenance commit it also flushes the memtable
 * (store_flush_if_wanted), so removals are merged away on an idle store.
 *
 * On a read-only store it follows the writer instead (follow_once): it
 * tells the owner when the head the reader caught up to moved.
 *
 * On fencing, or when recovery finds the owner must reload, it calls the
 * owner's hook once and stops; what to do then (serve exits, or restarts
 * itself) is the owner's policy, not the store's.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "store/store_internal.h"

struct store_watch {
  store *st;
  unsigned interval_ms;
  store_watch_hooks hooks;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
};

/* Waits interval_ms or until stopped; true when stopped. */
static bool wait_or_stop(store_watch *w) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += w->interval_ms / 1000;
  until.tv_nsec += (long)(w->interval_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->mu);
  while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0) {
  }
  bool stop = w->stop;
  pthread_mutex_unlock(&w->mu);
  return stop;
}

/* One recovery attempt of a failed store; true when the watcher is done
 * (fenced, or the owner must reload). */
static bool recover_once(store_watch *w, bool *down) {
  mr_error err;
  bool reload = false;
  mr_status rc = store_recover(w->st, &reload, &err);
  if (rc == MR_ERR_FENCED) {
    fprintf(stderr, "moraine: fenced: another server has taken over this store: %s\n", err.msg);
    w->hooks.fenced(w->hooks.ctx);
    return true;
  }
  if (rc == MR_OK && reload) {
    mr_error why;
    (void)store_failed(w->st, &why);
    fprintf(stderr, "moraine: the store answers again, but %s\n", why.msg);
    w->hooks.reload(w->hooks.ctx);
    return true;
  }
  if (rc == MR_OK) {
    fprintf(stderr, "moraine: the store answers again; writes resume\n");
    *down = false;
    return false;
  }
  if (!*down)
    fprintf(stderr, "moraine: store unavailable, retrying every %u ms (%s): %s\n", w->interval_ms,
            mr_status_text(rc), err.msg);
  *down = true;
  return false;
}

/* A reader's round: read the head the reader has caught up to, and hand a
 * moved head to the owner. */
static void follow_once(store_watch *w, store_head *have, bool *down) {
  mr_error err;
  store_head now;
  mr_status rc = store_read_head(w->st, &now, &err);
  if (rc != MR_OK) {
    if (!*down)
      fprintf(stderr, "moraine: replica: the store does not answer (%s), retrying every %u ms: %s\n",
              mr_status_text(rc), w->interval_ms, err.msg);
    *down = true;
    return;
  }
  if (*down)
    fprintf(stderr, "moraine: replica: the store answers again\n");
  *down = false;
  if (w->hooks.advanced == NULL ||
      (now.snapshot_id == have->snapshot_id && now.batch_count == have->batch_count))
    return;
  store_head reached = now;
  rc = w->hooks.advanced(w->hooks.ctx, *have, now, &reached, &err);
  if (rc == MR_OK)
    *have = reached;
  else if (rc != MR_ERR_CONFLICT) /* a conflict: the store moved on meanwhile; next round */
    fprintf(stderr, "moraine: replica: cannot apply snapshot %llu (retried next round): %s\n",
            (unsigned long long)now.snapshot_id, err.msg);
}

static void *watch_main(void *arg) {
  store_watch *w = arg;
  bool down = false;
  store_head have = store_get_head(w->st);
  while (!wait_or_stop(w)) {
    if (store_read_only(w->st)) {
      follow_once(w, &have, &down);
      continue;
    }
    if (store_failed(w->st, NULL) != MR_OK) {
      if (recover_once(w, &down))
        return NULL;
      continue;
    }
    mr_error err;
    mr_status rc = store_probe(w->st, &err);
    if (rc == MR_ERR_FENCED) {
      fprintf(stderr, "moraine: fenced: another server has taken over this store: %s\n", err.msg);
      w->hooks.fenced(w->hooks.ctx);
      return NULL;
    }
    if (rc != MR_OK && !down)
      fprintf(stderr, "moraine: store unavailable (%s): %s\n", mr_status_text(rc), err.msg);
    else if (rc == MR_OK && down)
      fprintf(stderr, "moraine: store answers again\n");
    down = rc != MR_OK;
    if (rc == MR_OK && store_flush_if_wanted(w->st, &err) != MR_OK)
      fprintf(stderr, "moraine: maintenance: memtable flush failed (retried next round): %s\n",
              err.msg);
  }
  return NULL;
}

mr_status store_watch_start(store *st, unsigned interval_ms, const store_watch_hooks *hooks,
                            store_watch **out, mr_error *err) {
  *out = NULL;
  store_watch *w = calloc(1, sizeof *w);
  if (w == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "store watch: out of memory");
  w->st = st;
  w->interval_ms = interval_ms ? interval_ms : 1000;
  w->hooks = *hooks;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    return mr_fail(err, MR_ERR_NOMEM, "store watch: cannot start its thread");
  }
  *out = w;
  return MR_OK;
}

void store_watch_stop(store_watch *w) {
  if (w == NULL)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}
