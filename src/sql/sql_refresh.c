/*
 * sql_refresh.c — refresh ahead (see sql_refresh.h): one thread, one
 * session of its own, one waiting batch.
 *
 * The thread takes the waiting batch under mu and runs it without: a
 * commit queueing the next batch never waits for a read. Stopping sets
 * `stop`, cancels the read under way (its text stays a miss) and joins.
 */
#include "sql/sql_refresh.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"

struct sql_refresh {
  sql_engine *e;
  pthread_mutex_t mu;
  pthread_cond_t work; /* a batch waits, or stop */
  pthread_cond_t idle; /* no batch waits or runs */
  pthread_t thread;
  bool started, stop, running, joined;
  sql_session *session;           /* the thread's, while it has one (for the cancel) */
  char *batch[SQL_REFRESH_TEXTS]; /* the waiting batch */
  size_t nbatch;
  uint64_t gen; /* its commit's data generation */
  sql_refresh_counts counts;
};

/* ---- read sets ---------------------------------------------------------- */

void sql_read_set_note(sql_read_set *s, const char *text) {
  if (s->n == SQL_REFRESH_TEXTS || strlen(text) > SQL_REFRESH_TEXT_MAX)
    return;
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->text[i], text) == 0)
      return;
  char *t = sql_strdup(text);
  if (t) /* out of memory: one text fewer to refresh */
    s->text[s->n++] = t;
}

void sql_read_set_clear(sql_read_set *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->text[i]);
  s->n = 0;
}

void sql_read_set_rotate(sql_read_set *cur, sql_read_set *prev) {
  sql_read_set_clear(prev);
  *prev = *cur; /* the texts move; cur's slots are stale past n = 0 */
  cur->n = 0;
}

/* ---- the thread --------------------------------------------------------- */

static void free_texts(char **texts, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(texts[i]);
}

static bool stopping(sql_refresh *r) {
  pthread_mutex_lock(&r->mu);
  bool stop = r->stop;
  pthread_mutex_unlock(&r->mu);
  return stop;
}

/* The thread's session, opened on first use; NULL if it cannot be. */
static sql_session *session_of(sql_refresh *r) {
  if (r->session)
    return r->session;
  sql_session *s;
  sql_error err;
  if (sql_session_open(r->e, "moraine", NULL, &s, &err) != MR_OK)
    return NULL; /* the batch is dropped; the next one tries again */
  s->refresher = true;
  pthread_mutex_lock(&r->mu);
  r->session = s;
  pthread_mutex_unlock(&r->mu);
  return s;
}

/* Runs one batch; its texts are freed. */
static void run_batch(sql_refresh *r, char **texts, size_t n, uint64_t gen) {
  static const sql_sink discard = {0}; /* every callback absent: nothing is sent */
  uint64_t refreshed = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t now;
    sql_session *s = NULL;
    if (stopping(r) || !sql_data_gen(r->e, &now) || now != gen || (s = session_of(r)) == NULL) {
      skipped = n - i;
      break;
    }
    uint64_t kept = s->rcache_kept;
    sql_error err;
    if (sql_session_simple_query(s, texts[i], &discard, &err) != MR_OK) {
      /* a cancel at stop, or the read fails as it would for its client:
       * nothing is kept, and that client's next run reports it */
    }
    refreshed += s->rcache_kept - kept;
  }
  free_texts(texts, n);
  pthread_mutex_lock(&r->mu);
  r->counts.refreshed += refreshed;
  r->counts.skipped += skipped;
  pthread_mutex_unlock(&r->mu);
}

static void *refresh_main(void *arg) {
  sql_refresh *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->stop && r->nbatch == 0)
      pthread_cond_wait(&r->work, &r->mu);
    if (r->stop)
      break;
    char *texts[SQL_REFRESH_TEXTS];
    size_t n = r->nbatch;
    uint64_t gen = r->gen;
    memcpy(texts, r->batch, n * sizeof *texts);
    r->nbatch = 0;
    r->running = true;
    pthread_mutex_unlock(&r->mu);
    run_batch(r, texts, n, gen);
    pthread_mutex_lock(&r->mu);
    r->running = false;
    if (r->nbatch == 0)
      pthread_cond_broadcast(&r->idle);
  }
  sql_session *s = r->session;
  r->session = NULL;
  pthread_mutex_unlock(&r->mu);
  sql_session_close(s); /* a refresher's session is never kept idle */
  return NULL;
}

/* ---- the engine's side -------------------------------------------------- */

sql_refresh *sql_refresh_new(sql_engine *e) {
  sql_refresh *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  r->e = e;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->work, NULL);
  pthread_cond_init(&r->idle, NULL);
  return r;
}

void sql_refresh_stop(sql_refresh *r) {
  if (r == NULL)
    return;
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  if (r->session)
    sql_session_cancel(r->session);
  pthread_cond_signal(&r->work);
  bool join = r->started && !r->joined;
  r->joined = true;
  pthread_mutex_unlock(&r->mu);
  if (join)
    pthread_join(r->thread, NULL);
}

void sql_refresh_free(sql_refresh *r) {
  if (r == NULL)
    return;
  sql_refresh_stop(r);
  free_texts(r->batch, r->nbatch);
  pthread_cond_destroy(&r->work);
  pthread_cond_destroy(&r->idle);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

void sql_refresh_after_commit(sql_refresh *r, const sql_read_set *cur, const sql_read_set *prev,
                              uint64_t gen) {
  if (r == NULL)
    return;
  char *texts[SQL_REFRESH_TEXTS];
  size_t n = 0;
  for (size_t i = 0; i < cur->n; i++)
    for (size_t j = 0; j < prev->n; j++)
      if (strcmp(cur->text[i], prev->text[j]) == 0) {
        char *t = sql_strdup(cur->text[i]);
        if (t)
          texts[n++] = t;
        break;
      }
  if (n == 0)
    return;
  pthread_mutex_lock(&r->mu);
  if (!r->stop && !r->started)
    r->started = pthread_create(&r->thread, NULL, refresh_main, r) == 0;
  if (r->stop || !r->started) {
    pthread_mutex_unlock(&r->mu);
    free_texts(texts, n);
    return;
  }
  r->counts.skipped += r->nbatch; /* its generation has passed */
  free_texts(r->batch, r->nbatch);
  memcpy(r->batch, texts, n * sizeof *texts);
  r->nbatch = n;
  r->gen = gen;
  pthread_cond_signal(&r->work);
  pthread_mutex_unlock(&r->mu);
}

void sql_refresh_wait_idle(sql_refresh *r) {
  if (r == NULL)
    return;
  pthread_mutex_lock(&r->mu);
  while (r->started && !r->stop && (r->nbatch > 0 || r->running))
    pthread_cond_wait(&r->idle, &r->mu);
  pthread_mutex_unlock(&r->mu);
}

void sql_refresh_counts_get(sql_refresh *r, sql_refresh_counts *out) {
  memset(out, 0, sizeof *out);
  if (r == NULL)
    return;
  pthread_mutex_lock(&r->mu);
  *out = r->counts;
  pthread_mutex_unlock(&r->mu);
}
