/*
 * catalog_feed.c — the engine's side of a catalog load: the statements and
 * row chunks catalog_load.c gathers run here, in the order they were
 * queued. A start-up load's feed runs them on a thread of its own while the
 * load goes on reading the store and building the next chunk (on a catalog
 * of a million data files the engine's appends cost about as much as the
 * store's iteration and the rows' building together, so on two cores the
 * three overlap); a cat_loader's feed runs each on the caller's thread as
 * it is queued, inside the caller's pre-load transaction.
 *
 * Invariants: at most FEED_DEPTH jobs are queued or running (the loader
 * waits for room), so what the feed holds stays bounded; jobs run one at a
 * time, in queue order, each as its own engine call (a DDL batch carries
 * its own BEGIN ... COMMIT and is rolled back if it fails); after the first
 * failure nothing more runs, and the next queue call or cat_feed_finish
 * returns that failure. The feed owns what a queue call hands it, even
 * when the call fails.
 */
#include "catalog/catalog_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FEED_DEPTH = 2 };

typedef struct feed_job {
  struct feed_job *next;
  char *sql;     /* a statement batch, or NULL for rows */
  bool rollback; /* sql opened a transaction: ROLLBACK if it fails */
  char *table;   /* rows: the target table */
  size_t ncols, nrows;
  sql_value *vals;
  void *text; /* what the cells point into, freed by text_free */
  void (*text_free)(void *text);
} feed_job;

struct cat_feed {
  sql_engine *e;
  char *schema;
  bool threaded; /* false: each job runs inside its queue call */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  feed_job *head, *tail; /* queued, not yet taken (under mu) */
  size_t pending;        /* queued plus running (under mu) */
  bool closing;          /* no more jobs come (under mu) */
  bool discard;          /* drop what is queued (under mu) */
  mr_status rc;          /* the first failure (under mu) */
  mr_error err;
};

static void job_free(feed_job *j) {
  free(j->sql);
  free(j->table);
  free(j->vals);
  if (j->text_free)
    j->text_free(j->text);
  free(j);
}

static mr_status run_job(cat_feed *f, const feed_job *j, mr_error *err) {
  sql_error se;
  memset(&se, 0, sizeof se);
  if (j->sql) {
    if (sql_engine_exec(f->e, j->sql, &se) == MR_OK)
      return MR_OK;
    mr_status rc = mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "catalog load: %s: %s",
                           j->sql, se.base.msg);
    sql_error ignore;
    if (j->rollback && sql_engine_exec(f->e, "ROLLBACK", &ignore) != MR_OK) {
      /* no transaction was left open */
    }
    return rc;
  }
  if (sql_engine_load_rows(f->e, f->schema, j->table, j->ncols, j->nrows, j->vals, &se) == MR_OK)
    return MR_OK;
  return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "catalog load: %s: %s", j->table,
                 se.base.msg);
}

static void *feed_main(void *arg) {
  cat_feed *f = arg;
  pthread_mutex_lock(&f->mu);
  for (;;) {
    while (f->head == NULL && !f->closing)
      pthread_cond_wait(&f->cv, &f->mu);
    feed_job *j = f->head;
    if (j == NULL)
      break;
    f->head = j->next;
    if (f->head == NULL)
      f->tail = NULL;
    bool run = f->rc == MR_OK && !f->discard;
    pthread_mutex_unlock(&f->mu);
    mr_error e;
    mr_error_clear(&e);
    mr_status rc = run ? run_job(f, j, &e) : MR_OK;
    job_free(j);
    pthread_mutex_lock(&f->mu);
    if (rc && f->rc == MR_OK) {
      f->rc = rc;
      f->err = e;
    }
    f->pending--;
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

mr_status cat_feed_start(sql_engine *e, const char *schema, bool threaded, cat_feed **out,
                         mr_error *err) {
  *out = NULL;
  cat_feed *f = calloc(1, sizeof *f);
  if (f == NULL || (f->schema = strdup(schema)) == NULL) {
    free(f);
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  }
  f->e = e;
  f->threaded = threaded;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  if (threaded && pthread_create(&f->thread, NULL, feed_main, f) != 0) {
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f->schema);
    free(f);
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: cannot start the engine feed thread");
  }
  *out = f;
  return MR_OK;
}

/* Queues j once there is room (runs it, unthreaded); the feed's first
 * failure instead, if any. */
static mr_status enqueue(cat_feed *f, feed_job *j, mr_error *err) {
  if (!f->threaded) {
    mr_status rc = f->rc ? f->rc : run_job(f, j, &f->err);
    job_free(j);
    if (rc && f->rc == MR_OK)
      f->rc = rc;
    if (rc)
      *err = f->err;
    return rc;
  }
  pthread_mutex_lock(&f->mu);
  while (f->pending >= FEED_DEPTH && f->rc == MR_OK)
    pthread_cond_wait(&f->cv, &f->mu);
  mr_status rc = f->rc;
  if (rc) {
    *err = f->err;
  } else {
    if (f->tail)
      f->tail->next = j;
    else
      f->head = j;
    f->tail = j;
    f->pending++;
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  if (rc)
    job_free(j);
  return rc;
}

mr_status cat_feed_sql(cat_feed *f, char *sql, bool rollback, mr_error *err) {
  feed_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    free(sql);
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  }
  j->sql = sql;
  j->rollback = rollback;
  return enqueue(f, j, err);
}

mr_status cat_feed_rows(cat_feed *f, const char *table, size_t ncols, size_t nrows, sql_value *vals,
                        void *text, void (*text_free)(void *text), mr_error *err) {
  feed_job *j = calloc(1, sizeof *j);
  if (j == NULL || (j->table = strdup(table)) == NULL) {
    free(j);
    free(vals);
    if (text_free)
      text_free(text);
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  }
  j->ncols = ncols;
  j->nrows = nrows;
  j->vals = vals;
  j->text = text;
  j->text_free = text_free;
  return enqueue(f, j, err);
}

static mr_status feed_close(cat_feed *f, bool discard, mr_error *err) {
  if (f == NULL)
    return MR_OK;
  pthread_mutex_lock(&f->mu);
  f->closing = true;
  f->discard = discard;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  if (f->threaded)
    pthread_join(f->thread, NULL);
  mr_status rc = discard ? MR_OK : f->rc;
  if (rc)
    *err = f->err;
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f->schema);
  free(f);
  return rc;
}

mr_status cat_feed_finish(cat_feed *f, bool discard, mr_error *err) {
  return feed_close(f, discard, err);
}

void cat_feed_discard(cat_feed *f) {
  mr_error unused; /* a discarding close reports no failure */
  feed_close(f, true, &unused);
}
