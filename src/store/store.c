/*
 * store.c — store lifecycle: open (creating sys/format + sys/head in the
 * first batch, refusing formats and migrations it cannot serve), close,
 * the head, the failed state, the shared key/value helpers, the head-bumping
 * batch writer, and the census. Commits live in commit.c, reads in read.c,
 * expiry in expire.c.
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mr_version.h"

/* ---- helpers shared by the store's files -------------------------------- */

mr_status store_key_bytes(const mr_key *k, mr_keybuf *out, mr_error *err) {
  return mr_key_encode(k, out, err);
}

mr_status store_get_msg(store *st, const mr_key *k, ProtobufCMessage **out, mr_error *err) {
  mr_keybuf kb;
  *out = NULL;
  mr_status rc = store_key_bytes(k, &kb, err);
  if (rc)
    return rc;
  void *val = NULL;
  size_t vlen = 0;
  rc = kv_get(st->db, kb.b, kb.len, &val, &vlen, err);
  if (rc)
    return rc;
  rc = mr_value_decode(k, val, vlen, out, err);
  kv_free(val);
  return rc;
}

static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessage *m, const char *name) {
  return protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
}

bool store_msg_u64(const ProtobufCMessage *m, const char *field, uint64_t *v) {
  const ProtobufCFieldDescriptor *f = field_of(m, field);
  if (f == NULL || f->label == PROTOBUF_C_LABEL_REPEATED)
    return false;
  const uint8_t *base = (const uint8_t *)m;
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !*(const protobuf_c_boolean *)(base + f->quantifier_offset))
    return false;
  if (f->type == PROTOBUF_C_TYPE_INT64 || f->type == PROTOBUF_C_TYPE_UINT64) {
    memcpy(v, base + f->offset, sizeof *v);
    return true;
  }
  return false;
}

const char *store_msg_str(const ProtobufCMessage *m, const char *field) {
  const ProtobufCFieldDescriptor *f = field_of(m, field);
  if (f == NULL || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
    return NULL;
  const char *s;
  memcpy(&s, (const uint8_t *)m + f->offset, sizeof s);
  return s;
}

int64_t store_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Adds a put of msg under the key of kind k (no components) to b. */
static mr_status batch_put_msg(kv_batch *b, const mr_key *k, const ProtobufCMessage *msg, mr_error *err) {
  mr_keybuf kb;
  mr_status rc = store_key_bytes(k, &kb, err);
  if (rc)
    return rc;
  uint8_t *val = NULL;
  size_t vlen = 0;
  rc = mr_value_encode(k->kind, msg, &val, &vlen, err);
  if (rc)
    return rc;
  rc = kv_batch_put(b, kb.b, kb.len, val, vlen, err);
  free(val);
  return rc;
}

static mr_status head_put(kv_batch *b, store_head h, mr_error *err) {
  Moraine__V1__SysHead head = MORAINE__V1__SYS_HEAD__INIT;
  head.snapshot_id = h.snapshot_id;
  head.batch_count = h.batch_count;
  mr_key k = {.kind = MR_KK_SYS_HEAD};
  return batch_put_msg(b, &k, &head.base, err);
}

static void mark_failed(store *st, mr_status code, const mr_error *e) {
  st->failed = true;
  st->fail_code = code;
  snprintf(st->fail_msg, sizeof st->fail_msg, "%s", e ? e->msg : mr_status_text(code));
}

mr_status store_write_batch(store *st, kv_batch *b, const store_head *expected, uint64_t snapshot_id,
                            store_head *new_head, mr_error *err) {
  mr_error local;
  if (err == NULL)
    err = &local;
  pthread_mutex_lock(&st->mu);
  mr_status rc = MR_OK;
  if (st->failed) {
    rc = mr_fail(err, st->fail_code, "store failed earlier, no more commits: %s", st->fail_msg);
    goto out;
  }
  if (expected && (expected->batch_count != st->head.batch_count || expected->snapshot_id != st->head.snapshot_id)) {
    rc = mr_fail(err, MR_ERR_CONFLICT,
                 "conflict: head moved since the transaction began (began at snapshot %llu batch %llu, "
                 "head is snapshot %llu batch %llu)",
                 (unsigned long long)expected->snapshot_id, (unsigned long long)expected->batch_count,
                 (unsigned long long)st->head.snapshot_id, (unsigned long long)st->head.batch_count);
    goto out;
  }
  store_head h = {snapshot_id == UINT64_MAX ? st->head.snapshot_id : snapshot_id, st->head.batch_count + 1};
  rc = head_put(b, h, err);
  if (rc)
    goto out;
  if (st->fault) {
    rc = st->fault(st->fault_ctx, "before_write", err);
    if (rc)
      goto out;
  }
  store_write_fault wf = st->write_fault;
  st->write_fault = STORE_WRITE_FAULT_NONE;
  rc = wf == STORE_WRITE_FAULT_LOST ? MR_OK : kv_write(st->db, b, err);
  if (rc == MR_OK && wf != STORE_WRITE_FAULT_NONE)
    rc = mr_fail(err, MR_ERR_IO, "injected write fault (%s)",
                 wf == STORE_WRITE_FAULT_LOST ? "batch lost" : "batch landed");
  if (rc) {
    mark_failed(st, rc, err);
    mr_error_wrap(err, "store write failed, store refuses commits until it answers again");
    goto out;
  }
  st->head = h;
  if (new_head)
    *new_head = h;
out:
  pthread_mutex_unlock(&st->mu);
  return rc;
}

/* ---- open: format checks ------------------------------------------------ */

/* True when the store holds no key at all. */
static mr_status store_is_empty(store *st, bool *empty, mr_error *err) {
  return store_range_empty(st, NULL, 0, NULL, 0, empty, err);
}

/* The first batch of a new store: sys/format and sys/head {0, 0}. */
static mr_status format_new(store *st, mr_error *err) {
  kv_batch *b = NULL;
  mr_status rc = kv_batch_new(&b, err);
  if (rc)
    return rc;
  Moraine__V1__SysFormat f = MORAINE__V1__SYS_FORMAT__INIT;
  f.layout_version = STORE_FORMAT_LATEST;
  f.writer_version = (char *)MORAINE_VERSION;
  if (st->origin && *st->origin) /* RFC 0002: only a catalog from elsewhere has one */
    f.commit_log_batch_origin = (char *)st->origin; /* protobuf-c strings are not const */
  f.has_created_at = 1;
  f.created_at = store_now_us();
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  rc = batch_put_msg(b, &fk, &f.base, err);
  if (!rc)
    rc = head_put(b, (store_head){0, 0}, err);
  if (!rc)
    rc = kv_write(st->db, b, err);
  kv_batch_free(b);
  if (rc)
    return mr_error_wrap(err, "store_open: writing sys/format and sys/head of a new store");
  st->head = (store_head){0, 0};
  return MR_OK;
}

static mr_status check_format(store *st, const char *url, mr_error *err) {
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, &fk, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    bool empty = false;
    rc = store_is_empty(st, &empty, err);
    if (rc)
      return rc;
    if (!empty)
      return mr_fail(err, MR_ERR_INVALID, "store_open %s: the store has keys but no sys/format; not a moraine store", url);
    if (st->read_only)
      return mr_fail(err, MR_ERR_NOT_FOUND, "store_open %s: empty store, nothing to read", url);
    return format_new(st, err);
  }
  if (rc)
    return mr_error_wrap(err, "store_open %s: reading sys/format", url);
  const Moraine__V1__SysFormat *f = (const Moraine__V1__SysFormat *)m;
  unsigned ver = f->layout_version;
  char writer[64];
  snprintf(writer, sizeof writer, "%s", f->writer_version ? f->writer_version : "?");
  mr_value_free(m);
  if (ver > STORE_FORMAT_LATEST)
    return mr_fail(err, MR_ERR_INVALID,
                   "store_open %s: sys/format is layout %u written by moraine %s, newer than this build "
                   "(moraine %s reads %d..%d); upgrade moraine",
                   url, ver, writer, MORAINE_VERSION, STORE_FORMAT_OLDEST, STORE_FORMAT_LATEST);

  /* a marker means a migration was interrupted: the format it names is the
   * older one until its last step lands */
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  rc = store_get_msg(st, &mk, &m, err);
  if (rc != MR_OK && rc != MR_ERR_NOT_FOUND)
    return mr_error_wrap(err, "store_open %s: reading sys/migration", url);
  if (rc == MR_OK) {
    const Moraine__V1__SysMigration *mg = (const Moraine__V1__SysMigration *)m;
    rc = mr_fail(err, MR_ERR_INVALID,
                 "store_open %s: sys/format is layout %u and a migration to layout %u was interrupted "
                 "(sys/migration marker); run `moraine migrate %s` to finish it",
                 url, ver, mg->to_format, url);
    mr_value_free(m);
    return rc;
  }
  if (ver < STORE_FORMAT_MIGRATE_OLDEST)
    return mr_fail(err, MR_ERR_INVALID,
                   "store_open %s: sys/format is layout %u written by moraine %s, unknown to this build "
                   "(reads %d..%d, migrates %d..%d)",
                   url, ver, writer, STORE_FORMAT_OLDEST, STORE_FORMAT_LATEST, STORE_FORMAT_MIGRATE_OLDEST,
                   STORE_FORMAT_OLDEST - 1);
  if (ver < STORE_FORMAT_OLDEST)
    return mr_fail(err, MR_ERR_INVALID,
                   "store_open %s: sys/format is layout %u written by moraine %s, older than this build "
                   "serves (%d..%d); run `moraine migrate %s` to bring it to layout %d",
                   url, ver, writer, STORE_FORMAT_OLDEST, STORE_FORMAT_LATEST, url, STORE_FORMAT_LATEST);

  mr_key hk = {.kind = MR_KK_SYS_HEAD};
  rc = store_get_msg(st, &hk, &m, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_CORRUPTION, "store_open %s: sys/format present but sys/head missing", url);
  if (rc)
    return mr_error_wrap(err, "store_open %s: reading sys/head", url);
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  st->head = (store_head){h->snapshot_id, h->batch_count};
  mr_value_free(m);
  return MR_OK;
}

/* A migrating open's head: sys/format and sys/head must both be there
 * (an empty folder is not made a store). */
static mr_status read_head_strict(store *st, const char *url, mr_error *err) {
  mr_key fk = {.kind = MR_KK_SYS_FORMAT}, hk = {.kind = MR_KK_SYS_HEAD};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, &fk, &m, err);
  mr_value_free(m);
  m = NULL;
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_INVALID, "store_open %s: no sys/format; not a moraine store", url);
  if (rc == MR_OK)
    rc = store_get_msg(st, &hk, &m, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_CORRUPTION, "store_open %s: sys/format present but sys/head missing", url);
  if (rc)
    return mr_error_wrap(err, "store_open %s", url);
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  st->head = (store_head){h->snapshot_id, h->batch_count};
  mr_value_free(m);
  return MR_OK;
}

/* An unchecked open's head: sys/head if it decodes, else {0, 0} (store_verify
 * reports why). */
static void read_head_if_any(store *st) {
  mr_key hk = {.kind = MR_KK_SYS_HEAD};
  ProtobufCMessage *m = NULL;
  if (store_get_msg(st, &hk, &m, NULL) != MR_OK)
    return;
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  st->head = (store_head){h->snapshot_id, h->batch_count};
  mr_value_free(m);
}

mr_status store_refresh(store *st, store_head *head, mr_error *err) {
  if (!st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "store_refresh: the store is a writer; it is never behind");
  mr_status rc = kv_refresh(st->db, err);
  if (rc)
    return mr_error_wrap(err, "store_refresh");
  return store_read_head(st, head, err);
}

mr_status store_read_head(store *st, store_head *head, mr_error *err) {
  if (!st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "store_read_head: the store is a writer");
  mr_status rc;
  mr_key hk = {.kind = MR_KK_SYS_HEAD};
  ProtobufCMessage *m = NULL;
  rc = store_get_msg(st, &hk, &m, err);
  if (rc)
    return mr_error_wrap(err, "reading sys/head");
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  store_head now = {h->snapshot_id, h->batch_count};
  mr_value_free(m);
  pthread_mutex_lock(&st->mu);
  st->head = now;
  pthread_mutex_unlock(&st->mu);
  if (head)
    *head = now;
  return MR_OK;
}

/* ---- public lifecycle --------------------------------------------------- */

mr_status store_open(const char *url, const store_options *opts, store **out, mr_error *err) {
  *out = NULL;
  store *st = calloc(1, sizeof *st);
  if (st == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "store_open: out of memory");
  st->read_only = opts && opts->read_only;
  st->origin = opts ? opts->origin : NULL;
  st->changelog_window = opts && opts->changelog_window ? opts->changelog_window : STORE_CHANGELOG_WINDOW;
  st->deadline_ms = opts ? opts->deadline_ms : 0;
  pthread_mutex_init(&st->mu, NULL);
  st->url = strdup(url);
  st->cache_dir = opts && opts->cache_dir ? strdup(opts->cache_dir) : NULL;
  if (st->url == NULL || (opts && opts->cache_dir && st->cache_dir == NULL)) {
    pthread_mutex_destroy(&st->mu);
    free(st->url);
    free(st->cache_dir);
    free(st);
    return mr_fail(err, MR_ERR_NOMEM, "store_open: out of memory");
  }
  kv_open_options ko = {.read_only = st->read_only,
                        .cache_dir = opts ? opts->cache_dir : NULL,
                        .deadline_ms = opts ? opts->deadline_ms : 0,
                        .gc_interval_ms = opts ? opts->gc_interval_ms : 0,
                        .gc_min_age_ms = opts ? opts->gc_min_age_ms : 0,
                        .poll_ms = opts ? opts->reader_poll_ms : 0};
  mr_status rc = kv_open(url, &ko, &st->db, err);
  if (rc) {
    mr_error_wrap(err, "store_open %s", url);
    goto fail;
  }
  if (opts && opts->migrating) {
    /* store_migrate checks the format and the marker itself */
    if (st->read_only || (opts && opts->unchecked)) {
      rc = mr_fail(err, MR_ERR_INVALID, "store_open %s: a migrating open must be a checked writer", url);
      goto fail;
    }
    rc = read_head_strict(st, url, err);
    if (rc)
      goto fail;
  } else if (opts && opts->unchecked) {
    if (!st->read_only) {
      rc = mr_fail(err, MR_ERR_INVALID, "store_open %s: an unchecked open must be read-only", url);
      goto fail;
    }
    read_head_if_any(st);
  } else {
    rc = check_format(st, url, err);
    st->origin = NULL; /* borrowed for format_new only */
    if (rc)
      goto fail;
  }
  *out = st;
  return MR_OK;
fail:
  kv_close(st->db, NULL);
  pthread_mutex_destroy(&st->mu);
  free(st->url);
  free(st->cache_dir);
  free(st);
  return rc;
}

mr_status store_open_view(const store *st, store **out, mr_error *err) {
  store_options o = {.read_only = true,
                     .changelog_window = st->changelog_window,
                     .cache_dir = st->cache_dir,
                     .deadline_ms = st->deadline_ms,
                     .reader_poll_ms = STORE_VIEW_POLL_MS};
  return store_open(st->url, &o, out, err);
}

/* SlateDB freezes a memtable that a write fills at the WAL object before
 * that write's own, and close flushes a memtable only when it holds
 * something. So when the last write of a session filled one, the WAL object
 * holding that write stays after the replay point, and every later open
 * reads it again only to skip it: 2.3 MB, about 20 ms of every start, after
 * an import of 10,000 snapshots. Writing sys/head again as it stands changes
 * nothing a reader can see (no commit, the same bytes) and gives close's
 * memtable flush a write to carry; that flush then puts every WAL object
 * behind the replay point. A store that failed, or a session that wrote
 * nothing, is left as it is; a failed rewrite only costs the next start that
 * read, so close goes on and reports its own errors. */
static void settle_replay_point(store *st) {
  pthread_mutex_lock(&st->mu);
  bool failed = st->failed;
  store_head h = st->head;
  pthread_mutex_unlock(&st->mu);
  if (st->read_only || failed || !kv_has_written(st->db))
    return;
  kv_batch *b = NULL;
  mr_error ignored;
  if (kv_batch_new(&b, &ignored) != MR_OK)
    return;
  if (head_put(b, h, &ignored) == MR_OK) {
    mr_status rc = kv_write(st->db, b, &ignored);
    (void)rc;
  }
  kv_batch_free(b);
}

mr_status store_close(store *st, mr_error *err) {
  if (st == NULL)
    return MR_OK;
  settle_replay_point(st);
  mr_status rc = kv_close(st->db, err);
  pthread_mutex_destroy(&st->mu);
  free(st->url);
  free(st->cache_dir);
  free(st);
  return rc;
}

bool store_read_only(const store *st) {
  return st->read_only;
}

store_head store_get_head(const store *st) {
  store *s = (store *)st; /* the lock is not part of the logical state */
  pthread_mutex_lock(&s->mu);
  store_head h = s->head;
  pthread_mutex_unlock(&s->mu);
  return h;
}

void store_set_fault(store *st, store_fault_fn fn, void *ctx) {
  pthread_mutex_lock(&st->mu);
  st->fault = fn;
  st->fault_ctx = ctx;
  pthread_mutex_unlock(&st->mu);
}

mr_status store_probe(store *st, mr_error *err) {
  mr_key k = {.kind = MR_KK_SYS_HEAD};
  ProtobufCMessage *head = NULL;
  mr_status rc = store_get_msg(st, &k, &head, err);
  if (head)
    mr_value_free(head);
  if (rc == MR_ERR_FENCED) {
    pthread_mutex_lock(&st->mu);
    if (!st->failed)
      mark_failed(st, rc, err);
    pthread_mutex_unlock(&st->mu);
  }
  return rc;
}

void store_set_write_fault(store *st, store_write_fault f) {
  pthread_mutex_lock(&st->mu);
  st->write_fault = f;
  pthread_mutex_unlock(&st->mu);
}

void store_set_in_doubt(store *st, const char *why) {
  pthread_mutex_lock(&st->mu);
  st->reload_needed = true;
  if (!st->failed || st->fail_code != MR_ERR_FENCED) {
    st->failed = true;
    st->fail_code = MR_ERR_IO;
    snprintf(st->fail_msg, sizeof st->fail_msg, "%s", why);
  }
  pthread_mutex_unlock(&st->mu);
}

mr_status store_recover(store *st, bool *reload, mr_error *err) {
  *reload = false;
  pthread_mutex_lock(&st->mu);
  bool failed = st->failed, fenced = st->fail_code == MR_ERR_FENCED;
  *reload = failed && !fenced && st->reload_needed;
  store_head mine = st->head;
  pthread_mutex_unlock(&st->mu);
  if (!failed || *reload)
    return MR_OK;
  if (fenced)
    return mr_fail(err, MR_ERR_FENCED, "store_recover: another writer has taken the store over");
  /* Nothing commits while failed, so the only write in flight is the one in
   * doubt: once the WAL is flushed it is durable or was never taken. */
  mr_status rc = kv_sync(st->db, err);
  ProtobufCMessage *m = NULL;
  mr_key hk = {.kind = MR_KK_SYS_HEAD};
  if (rc == MR_OK)
    rc = store_get_msg(st, &hk, &m, err);
  if (rc) {
    if (rc == MR_ERR_FENCED) {
      pthread_mutex_lock(&st->mu);
      mark_failed(st, rc, err);
      pthread_mutex_unlock(&st->mu);
    }
    return mr_error_wrap(err, "store_recover");
  }
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  store_head durable = {h->snapshot_id, h->batch_count};
  mr_value_free(m);
  pthread_mutex_lock(&st->mu);
  if (durable.batch_count == mine.batch_count && durable.snapshot_id == mine.snapshot_id) {
    st->failed = false;
    st->fail_msg[0] = '\0';
  } else {
    st->reload_needed = true;
    *reload = true;
    snprintf(st->fail_msg, sizeof st->fail_msg,
             "a write reported failed landed after all (the store is at snapshot %llu batch %llu, "
             "this server at snapshot %llu batch %llu); reload needed",
             (unsigned long long)durable.snapshot_id, (unsigned long long)durable.batch_count,
             (unsigned long long)mine.snapshot_id, (unsigned long long)mine.batch_count);
  }
  pthread_mutex_unlock(&st->mu);
  return MR_OK;
}

mr_status store_failed(const store *st, mr_error *err) {
  store *s = (store *)st;
  pthread_mutex_lock(&s->mu);
  mr_status rc = MR_OK;
  if (s->failed)
    rc = mr_fail(err, s->fail_code, "store failed: %s", s->fail_msg);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

uint64_t store_keys_read(const store *st) {
  kv_read_stats s;
  kv_stats(st->db, &s);
  return s.keys_read;
}

/* ---- description ------------------------------------------------------- */

mr_status store_describe(store *st, const char *skip_top, store_description *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  out->head = store_get_head(st);
  ProtobufCMessage *m = NULL;
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  mr_status rc = store_get_msg(st, &fk, &m, err);
  if (rc)
    return mr_error_wrap(err, "reading sys/format");
  const Moraine__V1__SysFormat *f = (const Moraine__V1__SysFormat *)m;
  out->format = f->layout_version;
  snprintf(out->writer_version, sizeof out->writer_version, "%s",
           f->writer_version ? f->writer_version : "?");
  snprintf(out->origin, sizeof out->origin, "%s",
           f->commit_log_batch_origin ? f->commit_log_batch_origin : "");
  out->has_created_at = f->has_created_at;
  out->created_at_us = f->created_at;
  mr_value_free(m);
  mr_key gk = {.kind = MR_KK_SYS_MIGRATION};
  rc = store_get_msg(st, &gk, &m, err);
  if (rc == MR_OK) {
    const Moraine__V1__SysMigration *mg = (const Moraine__V1__SysMigration *)m;
    out->has_migration = true;
    out->migration_from = mg->from_format;
    out->migration_to = mg->to_format;
    mr_value_free(m);
  } else if (rc != MR_ERR_NOT_FOUND) {
    return mr_error_wrap(err, "reading sys/migration");
  }
  mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {out->head.snapshot_id}};
  rc = store_get_msg(st, &sk, &m, err);
  if (rc == MR_OK) {
    const Moraine__V1__Snapshot *s = (const Moraine__V1__Snapshot *)m;
    out->has_head_time = s->has_snapshot_time;
    out->head_time_us = s->snapshot_time;
    mr_value_free(m);
  } else if (rc != MR_ERR_NOT_FOUND) {
    return mr_error_wrap(err, "reading the head snapshot");
  }
  mr_key mk = {.kind = MR_KK_SYS_MAINTENANCE};
  rc = store_get_msg(st, &mk, &m, err);
  if (rc == MR_OK) {
    const Moraine__V1__MaintenanceStatus *ms = (const Moraine__V1__MaintenanceStatus *)m;
    out->maintenance_passes = ms->n_pass;
    if (ms->n_pass > 0) {
      const Moraine__V1__MaintenancePass *p = ms->pass[ms->n_pass - 1];
      out->last_pass_us = p->start_time_us;
      snprintf(out->last_pass_trigger, sizeof out->last_pass_trigger, "%s",
               p->trigger ? p->trigger : "");
      size_t used = 0;
      for (size_t i = 0; i < p->n_step && used < sizeof out->last_pass_steps; i++) {
        int w = snprintf(out->last_pass_steps + used, sizeof out->last_pass_steps - used, "%s%s: %s, %s",
                         i ? "; " : "", p->step[i]->name, p->step[i]->outcome, p->step[i]->detail);
        if (w < 0)
          break;
        used += (size_t)w;
      }
    }
    mr_value_free(m);
  } else if (rc != MR_ERR_NOT_FOUND) {
    return mr_error_wrap(err, "reading sys/maintenance_status");
  }
  rc = kv_usage(st->db, skip_top, &out->objects, &out->bytes, err);
  if (rc)
    return mr_error_wrap(err, "listing the store's objects");
  mr_error_clear(err);
  return MR_OK;
}

/* ---- census ------------------------------------------------------------- */

static mr_status census_one(void *ctx, const mr_key *k, const void *kp, size_t kl, const void *vp,
                            size_t vl, mr_error *err) {
  store_census *out = ctx;
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  mr_subspace ss = k->history ? MR_SS_HISTORY : ki->subspace;
  out->subspace[ss].keys++;
  out->subspace[ss].bytes += kl + vl;
  if (ki->subspace == MR_SS_CURRENT) {
    store_census_row *r = k->history ? &out->history_kind[k->kind] : &out->current_kind[k->kind];
    r->keys++;
    r->bytes += kl + vl;
  }
  return MR_OK;
}

mr_status store_take_census(store *st, store_census *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  return store_walk_raw(st, NULL, 0, NULL, 0, census_one, out, err);
}
