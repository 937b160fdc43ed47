/*
 * kv.c — the kv.h contract on top of the slatedb-binding crate (sdb.h).
 *
 * Owns: the C handle types (each wraps one binding handle), the mapping of
 * binding result codes onto mr_status, the read counters, and the count of
 * open children that keeps kv_close / kv_refresh from pulling a store out
 * from under a live iterator, snapshot or transaction. SlateDB itself, the
 * object stores and the segment extractor live in the crate.
 */
#include "kv/kv.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kv/slatedb-binding/sdb.h"

struct kv_db {
  sdb_db *h;
  int read_only;
  atomic_int children; /* open iterators, snapshots and transactions */
  atomic_uint_fast64_t gets;
  atomic_uint_fast64_t keys_read;
  atomic_uint_fast64_t bytes_read;
  atomic_bool wrote; /* a batch or transaction was written through this handle */
};

struct kv_iter {
  sdb_iter *h;
  kv_db *db; /* counters and child count; outlives the iterator */
};

struct kv_snapshot {
  sdb_snapshot *h;
  kv_db *db;
};

struct kv_txn {
  sdb_txn *h;
  kv_db *db;
};

struct kv_batch {
  sdb_batch *h;
  size_t ops;
};

static mr_status status_of(int code) {
  switch (code) {
  case SDB_OK:
    return MR_OK;
  case SDB_NOT_FOUND:
    return MR_ERR_NOT_FOUND;
  case SDB_CONFLICT:
    return MR_ERR_CONFLICT;
  case SDB_FENCED:
    return MR_ERR_FENCED;
  case SDB_CLOSED:
    return MR_ERR_CLOSED;
  case SDB_INVALID:
    return MR_ERR_INVALID;
  case SDB_DATA:
    return MR_ERR_CORRUPTION;
  case SDB_NOMEM:
    return MR_ERR_NOMEM;
  case SDB_TIMEOUT:
    return MR_ERR_TIMEOUT;
  default: /* SDB_UNAVAILABLE, SDB_INTERNAL */
    return MR_ERR_IO;
  }
}

/* Turns a binding result into an mr_status, recording "op: message". */
static mr_status done(int code, const char *msg, const char *op, mr_error *err) {
  if (code == SDB_OK)
    return MR_OK;
  mr_status st = status_of(code);
  /* a full disk surfaces as an I/O error whose text carries ENOSPC */
  if (st == MR_ERR_IO && (strstr(msg, "os error 28") || strstr(msg, "No space left")))
    st = MR_ERR_NOSPACE;
  return mr_fail(err, st, "%s: %s", op, msg);
}

static void count_get(kv_db *db, mr_status rc, size_t klen, size_t vlen) {
  atomic_fetch_add_explicit(&db->gets, 1, memory_order_relaxed);
  if (rc != MR_OK)
    return;
  atomic_fetch_add_explicit(&db->keys_read, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&db->bytes_read, klen + vlen, memory_order_relaxed);
}

static void child_opened(kv_db *db) {
  atomic_fetch_add_explicit(&db->children, 1, memory_order_relaxed);
}

static void child_closed(kv_db *db) {
  atomic_fetch_sub_explicit(&db->children, 1, memory_order_relaxed);
}

static mr_status refuse_if_children(kv_db *db, const char *op, mr_error *err) {
  int n = atomic_load(&db->children);
  if (n == 0)
    return MR_OK;
  return mr_fail(err, MR_ERR_INVALID,
                 "%s: %d iterator(s), snapshot(s) or transaction(s) still open", op, n);
}

/* ---- open / close ------------------------------------------------------ */

mr_status kv_open(const char *url, const kv_open_options *opts, kv_db **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_open: NULL out");
  *out = NULL;
  if (url == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_open: NULL url");
  kv_open_options o = {0};
  if (opts != NULL)
    o = *opts;

  sdb_open_args args = {
      .url = url,
      .read_only = o.read_only ? 1 : 0,
      .extractor = (uint32_t)o.extractor_override,
      .wal_flush_ms = o.wal_flush_ms ? o.wal_flush_ms : KV_DEFAULT_WAL_FLUSH_MS,
      .poll_ms = o.poll_ms,
      .deadline_ms = o.deadline_ms ? o.deadline_ms : KV_DEFAULT_DEADLINE_MS,
      .cache_dir = o.cache_dir,
      .l0_sst_bytes = o.l0_sst_bytes ? o.l0_sst_bytes : KV_DEFAULT_L0_SST_BYTES,
      .gc_interval_ms = o.gc_interval_ms ? o.gc_interval_ms : KV_DEFAULT_GC_INTERVAL_MS,
      .gc_min_age_ms = o.gc_min_age_ms ? o.gc_min_age_ms : KV_DEFAULT_GC_MIN_AGE_MS,
  };
  kv_db *db = calloc(1, sizeof *db);
  if (db == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "kv_open: out of memory");
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_open(&args, &db->h, msg, sizeof msg);
  if (rc != SDB_OK) {
    free(db);
    return mr_fail(err, status_of(rc), "kv_open %s: %s", url, msg);
  }
  db->read_only = args.read_only;
  *out = db;
  return MR_OK;
}

mr_status kv_list_folders(const char *url, char **names, mr_error *err) {
  *names = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_list_folders(url, KV_DEFAULT_DEADLINE_MS, &buf, &len, msg, sizeof msg);
  if (rc != SDB_OK)
    return mr_fail(err, status_of(rc), "listing %s: %s", url, msg);
  char *text = malloc(len + 1);
  if (text == NULL) {
    free(buf);
    return mr_fail(err, MR_ERR_NOMEM, "kv_list_folders: out of memory");
  }
  memcpy(text, buf, len);
  text[len] = '\0';
  free(buf);
  *names = text;
  return MR_OK;
}

mr_status kv_clone(const char *src, const char *dst, uint32_t deadline_ms, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_clone(src, dst, deadline_ms, msg, sizeof msg);
  if (rc != SDB_OK)
    return mr_fail(err, status_of(rc), "kv_clone %s -> %s: %s", src, dst, msg);
  return MR_OK;
}

mr_status kv_close(kv_db *db, mr_error *err) {
  if (db == NULL)
    return MR_OK;
  mr_status st = refuse_if_children(db, "kv_close", err);
  if (st != MR_OK)
    return st;
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_close(db->h, msg, sizeof msg);
  free(db);
  return done(rc, msg, "kv_close", err);
}

int kv_is_read_only(const kv_db *db) {
  return db->read_only;
}

mr_status kv_flush(kv_db *db, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  return done(sdb_flush(db->h, msg, sizeof msg), msg, "kv_flush", err);
}

mr_status kv_sync(kv_db *db, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  return done(sdb_sync(db->h, msg, sizeof msg), msg, "kv_sync", err);
}

mr_status kv_usage(kv_db *db, const char *skip_top, uint64_t *objects, uint64_t *bytes,
                   mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  return done(sdb_usage(db->h, skip_top, objects, bytes, msg, sizeof msg), msg, "kv_usage", err);
}

mr_status kv_refresh(kv_db *db, mr_error *err) {
  mr_status st = refuse_if_children(db, "kv_refresh", err);
  if (st != MR_OK)
    return st;
  char msg[MR_ERROR_MSG_MAX];
  return done(sdb_refresh(db->h, msg, sizeof msg), msg, "kv_refresh", err);
}

void kv_stats(const kv_db *db, kv_read_stats *out) {
  /* The counters are only ever added to; atomic_load needs a non-const
   * object in C11, so read through a cast. */
  kv_db *d = (kv_db *)db;
  out->gets = atomic_load_explicit(&d->gets, memory_order_relaxed);
  out->keys_read = atomic_load_explicit(&d->keys_read, memory_order_relaxed);
  out->bytes_read = atomic_load_explicit(&d->bytes_read, memory_order_relaxed);
}

void kv_stats_reset(kv_db *db) {
  atomic_store(&db->gets, 0);
  atomic_store(&db->keys_read, 0);
  atomic_store(&db->bytes_read, 0);
}

/* ---- point reads ------------------------------------------------------- */

/* Shared tail of the three gets: checks outputs, counts, maps the result. */
static mr_status finish_get(kv_db *db, int rc, const char *msg, size_t klen, size_t vlen,
                            const char *op, mr_error *err) {
  mr_status st = done(rc, msg, op, err);
  count_get(db, st, klen, vlen);
  return st;
}

mr_status kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen, mr_error *err) {
  if (val == NULL || vlen == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_get: NULL output");
  *val = NULL;
  *vlen = 0;
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_get(db->h, key, klen, (uint8_t **)val, vlen, msg, sizeof msg);
  return finish_get(db, rc, msg, klen, *vlen, "kv_get", err);
}

void kv_free(void *p) {
  free(p);
}

/* ---- scans ------------------------------------------------------------- */

/* Wraps a freshly opened binding iterator, or frees it on NOMEM. */
static mr_status wrap_iter(kv_db *db, sdb_iter *h, kv_iter **out, mr_error *err) {
  kv_iter *it = malloc(sizeof *it);
  if (it == NULL) {
    sdb_iter_free(h);
    return mr_fail(err, MR_ERR_NOMEM, "kv_iter: out of memory");
  }
  it->h = h;
  it->db = db;
  child_opened(db);
  *out = it;
  return MR_OK;
}

mr_status kv_iter_open(kv_db *db, const void *start, size_t start_len, const void *end,
                       size_t end_len, kv_iter **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_iter_open: NULL out");
  *out = NULL;
  char msg[MR_ERROR_MSG_MAX];
  sdb_iter *h = NULL;
  int rc = sdb_scan(db->h, start, start_len, end, end_len, &h, msg, sizeof msg);
  if (rc != SDB_OK)
    return done(rc, msg, "kv_iter_open", err);
  return wrap_iter(db, h, out, err);
}

mr_status kv_iter_next(kv_iter *it, const void **key, size_t *klen, const void **val, size_t *vlen,
                       mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_iter_next(it->h, (const uint8_t **)key, klen, (const uint8_t **)val, vlen, msg,
                         sizeof msg);
  if (rc != SDB_OK)
    return done(rc, msg, "kv_iter_next", err);
  atomic_fetch_add_explicit(&it->db->keys_read, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&it->db->bytes_read, *klen + *vlen, memory_order_relaxed);
  return MR_OK;
}

mr_status kv_iter_seek(kv_iter *it, const void *key, size_t klen, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  size_t dropped = 0;
  int rc = sdb_iter_seek(it->h, key, klen, &dropped, msg, sizeof msg);
  atomic_fetch_add_explicit(&it->db->keys_read, dropped, memory_order_relaxed);
  if (rc != SDB_OK)
    return done(rc, msg, "kv_iter_seek", err);
  return MR_OK;
}

void kv_iter_close(kv_iter *it) {
  if (it == NULL)
    return;
  sdb_iter_free(it->h);
  child_closed(it->db);
  free(it);
}

/* ---- atomic write batches ---------------------------------------------- */

mr_status kv_batch_new(kv_batch **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_batch_new: NULL out");
  kv_batch *b = malloc(sizeof *b);
  if (b == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "kv_batch_new: out of memory");
  b->h = sdb_batch_new();
  b->ops = 0;
  *out = b;
  return MR_OK;
}

mr_status kv_batch_put(kv_batch *b, const void *key, size_t klen, const void *val, size_t vlen,
                       mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_batch_put(b->h, key, klen, val, vlen, msg, sizeof msg);
  if (rc == SDB_OK)
    b->ops++;
  return done(rc, msg, "kv_batch_put", err);
}

mr_status kv_batch_delete(kv_batch *b, const void *key, size_t klen, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_batch_delete(b->h, key, klen, msg, sizeof msg);
  if (rc == SDB_OK)
    b->ops++;
  return done(rc, msg, "kv_batch_delete", err);
}

size_t kv_batch_count(const kv_batch *b) {
  return b->ops;
}

void kv_batch_free(kv_batch *b) {
  if (b == NULL)
    return;
  sdb_batch_free(b->h);
  free(b);
}

mr_status kv_write(kv_db *db, const kv_batch *b, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  mr_status rc = done(sdb_write(db->h, b->h, msg, sizeof msg), msg, "kv_write", err);
  if (rc == MR_OK)
    atomic_store(&db->wrote, true);
  return rc;
}

bool kv_has_written(const kv_db *db) {
  return atomic_load((atomic_bool *)&db->wrote); /* C11 loads need a non-const object */
}

/* ---- pinned snapshots -------------------------------------------------- */

mr_status kv_snapshot_open(kv_db *db, kv_snapshot **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_snapshot_open: NULL out");
  *out = NULL;
  kv_snapshot *s = malloc(sizeof *s);
  if (s == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "kv_snapshot_open: out of memory");
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_snapshot_open(db->h, &s->h, msg, sizeof msg);
  if (rc != SDB_OK) {
    free(s);
    return done(rc, msg, "kv_snapshot_open", err);
  }
  s->db = db;
  child_opened(db);
  *out = s;
  return MR_OK;
}

mr_status kv_snapshot_get(kv_snapshot *s, const void *key, size_t klen, void **val, size_t *vlen,
                          mr_error *err) {
  if (val == NULL || vlen == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_snapshot_get: NULL output");
  *val = NULL;
  *vlen = 0;
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_snapshot_get(s->h, key, klen, (uint8_t **)val, vlen, msg, sizeof msg);
  return finish_get(s->db, rc, msg, klen, *vlen, "kv_snapshot_get", err);
}

mr_status kv_snapshot_iter(kv_snapshot *s, const void *start, size_t start_len, const void *end,
                           size_t end_len, kv_iter **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_snapshot_iter: NULL out");
  *out = NULL;
  char msg[MR_ERROR_MSG_MAX];
  sdb_iter *h = NULL;
  int rc = sdb_snapshot_scan(s->h, start, start_len, end, end_len, &h, msg, sizeof msg);
  if (rc != SDB_OK)
    return done(rc, msg, "kv_snapshot_iter", err);
  return wrap_iter(s->db, h, out, err);
}

void kv_snapshot_close(kv_snapshot *s) {
  if (s == NULL)
    return;
  sdb_snapshot_free(s->h);
  child_closed(s->db);
  free(s);
}

/* ---- transactions ------------------------------------------------------ */

mr_status kv_txn_begin(kv_db *db, kv_txn **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_txn_begin: NULL out");
  *out = NULL;
  kv_txn *t = malloc(sizeof *t);
  if (t == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "kv_txn_begin: out of memory");
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_txn_begin(db->h, &t->h, msg, sizeof msg);
  if (rc != SDB_OK) {
    free(t);
    return done(rc, msg, "kv_txn_begin", err);
  }
  t->db = db;
  child_opened(db);
  *out = t;
  return MR_OK;
}

mr_status kv_txn_get(kv_txn *t, const void *key, size_t klen, void **val, size_t *vlen,
                     mr_error *err) {
  if (val == NULL || vlen == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_txn_get: NULL output");
  *val = NULL;
  *vlen = 0;
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_txn_get(t->h, key, klen, (uint8_t **)val, vlen, msg, sizeof msg);
  return finish_get(t->db, rc, msg, klen, *vlen, "kv_txn_get", err);
}

mr_status kv_txn_iter(kv_txn *t, const void *start, size_t start_len, const void *end,
                      size_t end_len, kv_iter **out, mr_error *err) {
  if (out == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_txn_iter: NULL out");
  *out = NULL;
  char msg[MR_ERROR_MSG_MAX];
  sdb_iter *h = NULL;
  int rc = sdb_txn_scan(t->h, start, start_len, end, end_len, &h, msg, sizeof msg);
  if (rc != SDB_OK)
    return done(rc, msg, "kv_txn_iter", err);
  return wrap_iter(t->db, h, out, err);
}

mr_status kv_txn_put(kv_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
                     mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_txn_put(t->h, key, klen, val, vlen, msg, sizeof msg);
  return done(rc, msg, "kv_txn_put", err);
}

mr_status kv_txn_delete(kv_txn *t, const void *key, size_t klen, mr_error *err) {
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_txn_delete(t->h, key, klen, msg, sizeof msg);
  return done(rc, msg, "kv_txn_delete", err);
}

mr_status kv_txn_commit(kv_txn *t, mr_error *err) {
  if (t == NULL)
    return mr_fail(err, MR_ERR_INVALID, "kv_txn_commit: NULL transaction");
  char msg[MR_ERROR_MSG_MAX];
  int rc = sdb_txn_commit(t->h, msg, sizeof msg);
  if (rc == SDB_OK)
    atomic_store(&t->db->wrote, true);
  child_closed(t->db);
  free(t);
  return done(rc, msg, "kv_txn_commit", err);
}

void kv_txn_rollback(kv_txn *t) {
  if (t == NULL)
    return;
  sdb_txn_rollback(t->h);
  child_closed(t->db);
  free(t);
}
