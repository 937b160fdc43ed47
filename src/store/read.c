/*
 * read.c — the store's read paths: the current load (current subspace only),
 * reads at a snapshot (current with begin <= S plus history with
 * begin <= S < end, unversioned kinds as now, embedded tag rows filtered),
 * snapshot listing, name lookup, delete files by target, changelog replay.
 * Every read is an ascending scan of exactly the ranges asked for, or a
 * point read. Not here: commits (commit.c), census (store.c).
 */
#include "store/store_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The one scan loop: fn sees every key of [start, end) with its raw bytes,
 * and may write a key into *seek (len > 0) for the scan to jump to. */
typedef mr_status (*walk_fn)(void *ctx, const mr_key *k, const void *kp, size_t kl,
                             const void *vp, size_t vl, mr_keybuf *seek, mr_error *err);

static mr_status walk(store *st, const void *start, size_t slen, const void *end, size_t elen,
                      walk_fn fn, void *ctx, mr_error *err) {
  kv_iter *it = NULL;
  mr_status rc = kv_iter_open(st->db, start, slen, end, elen, &it, err);
  if (rc)
    return rc;
  mr_keybuf seek;
  for (;;) {
    const void *kp, *vp;
    size_t kl, vl;
    rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err);
    if (rc == MR_ERR_NOT_FOUND) {
      mr_error_clear(err);
      rc = MR_OK;
      break;
    }
    mr_key k;
    seek.len = 0;
    if (!rc)
      rc = mr_key_decode(kp, kl, &k, err);
    if (!rc)
      rc = fn(ctx, &k, kp, kl, vp, vl, &seek, err);
    if (!rc && seek.len > 0)
      rc = kv_iter_seek(it, seek.b, seek.len, err);
    if (rc)
      break;
  }
  kv_iter_close(it);
  return rc;
}

typedef struct raw_ctx {
  store_raw_fn fn;
  void *ctx;
} raw_ctx;

static mr_status walk_raw_one(void *ctx, const mr_key *k, const void *kp, size_t kl,
                              const void *vp, size_t vl, mr_keybuf *seek, mr_error *err) {
  (void)seek;
  raw_ctx *r = ctx;
  return r->fn(r->ctx, k, kp, kl, vp, vl, err);
}

mr_status store_walk_raw(store *st, const void *start, size_t slen, const void *end, size_t elen,
                         store_raw_fn fn, void *ctx, mr_error *err) {
  raw_ctx r = {fn, ctx};
  return walk(st, start, slen, end, elen, walk_raw_one, &r, err);
}

mr_status store_range_empty(store *st, const void *start, size_t slen, const void *end,
                            size_t elen, bool *empty, mr_error *err) {
  kv_iter *it = NULL;
  mr_status rc = kv_iter_open(st->db, start, slen, end, elen, &it, err);
  if (rc)
    return rc;
  const void *kp, *vp;
  size_t kl, vl;
  rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err);
  kv_iter_close(it);
  if (rc != MR_OK && rc != MR_ERR_NOT_FOUND)
    return rc;
  *empty = rc == MR_ERR_NOT_FOUND;
  mr_error_clear(err);
  return MR_OK;
}

/* Per-record callback of scan_range; the message is freed after it. */
typedef mr_status (*scan_fn)(void *ctx, const mr_key *k, ProtobufCMessage *msg, mr_error *err);

typedef struct decode_ctx {
  scan_fn fn;
  void *ctx;
} decode_ctx;

static mr_status decode_one(void *ctx, const mr_key *k, const void *kp, size_t kl, const void *vp,
                            size_t vl, mr_error *err) {
  decode_ctx *d = ctx;
  ProtobufCMessage *m = NULL;
  mr_status rc = mr_value_decode(k, vp, vl, &m, err);
  if (!rc)
    rc = d->fn(d->ctx, k, m, err);
  mr_value_free(m);
  return rc;
}

/* Decodes and hands every record of [start, end) to fn, in key order. */
static mr_status scan_range(store *st, const mr_keybuf *start, const mr_keybuf *end, scan_fn fn, void *ctx,
                            mr_error *err) {
  decode_ctx d = {fn, ctx};
  return store_walk_raw(st, start->b, start->len, end->b, end->len, decode_one, &d, err);
}

static mr_status scan_r(store *st, const mr_key_range *r, scan_fn fn, void *ctx, mr_error *err) {
  return scan_range(st, &r->start, &r->end, fn, ctx, err);
}

/* ---- current load -------------------------------------------------------- */

typedef struct visit_ctx {
  store_visit_fn fn;
  void *ctx;
  uint64_t s; /* read_at snapshot */
} visit_ctx;

static mr_status visit_all(void *ctx, const mr_key *k, ProtobufCMessage *m, mr_error *err) {
  visit_ctx *v = ctx;
  return v->fn(v->ctx, k, m, err);
}

mr_status store_load_current(store *st, store_visit_fn fn, void *ctx, mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(MR_SS_CURRENT, &r, err);
  if (rc)
    return rc;
  visit_ctx v = {fn, ctx, 0};
  return scan_r(st, &r, visit_all, &v, err);
}

mr_status store_load_subspace(store *st, mr_subspace ss, store_visit_fn fn, void *ctx, mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(ss, &r, err);
  if (rc)
    return rc;
  visit_ctx v = {fn, ctx, 0};
  return scan_r(st, &r, visit_all, &v, err);
}

mr_status store_scan(store *st, const mr_key_range *r, store_visit_fn fn, void *ctx, mr_error *err) {
  visit_ctx v = {fn, ctx, 0};
  return scan_r(st, r, visit_all, &v, err);
}

/* ---- picked scans: the store read ahead, in batches ---------------------- */

/* A reader thread runs the scan and pick, copying the taken records into
 * the batch it fills; a ring of PICK_BATCHES batches passes between it and
 * the visits. A batch is handed over at PICK_BATCH_RECORDS records or
 * PICK_BATCH_BYTES bytes, so what the read-ahead holds stays bounded
 * whatever the range (about 16 MiB at most). The ring is deep because the
 * visits pause (a start-up load waits whenever its engine feed is full),
 * and a reader that could only get one batch ahead sat idle through each
 * pause: a 10,000-table start took 7.0 s with two batches, 5.7 s with
 * sixteen (with the engine's appends still on the visits' thread). Values
 * are decoded by the visits, not the reader: decoding on the reader cost
 * more in all (the messages then cross cores) and gained nothing. */
enum { PICK_BATCHES = 16, PICK_BATCH_RECORDS = 4096, PICK_BATCH_BYTES = 1 << 20 };

typedef struct pick_rec {
  size_t koff, klen, voff, vlen; /* into the batch's bytes */
} pick_rec;

typedef struct pick_batch {
  pick_rec *rec;
  size_t n, cap;
  uint8_t *bytes;
  size_t used, bcap;
  bool full; /* handed to the visits and not yet given back (under mu) */
} pick_batch;

typedef struct pick_pipe {
  store *st;
  const mr_key_range *r;
  store_pick_fn pick;
  void *ctx;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pick_batch b[PICK_BATCHES];
  int fill;  /* the batch the reader fills (the reader's alone) */
  bool done; /* the reader has ended; its outcome in rc, err (under mu) */
  bool stop; /* the visits failed: the reader ends (under mu) */
  mr_status rc;
  mr_error err;
} pick_pipe;

static mr_status batch_add(pick_batch *b, const void *kp, size_t kl, const void *vp, size_t vl,
                           mr_error *err) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 256;
    pick_rec *nr = realloc(b->rec, cap * sizeof *nr);
    if (nr == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "store scan: out of memory");
    b->rec = nr;
    b->cap = cap;
  }
  if (kl + vl > b->bcap - b->used) {
    size_t cap = b->bcap ? 2 * b->bcap : 64 * 1024;
    while (cap - b->used < kl + vl)
      cap *= 2;
    uint8_t *nb = realloc(b->bytes, cap);
    if (nb == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "store scan: out of memory");
    b->bytes = nb;
    b->bcap = cap;
  }
  pick_rec *r = &b->rec[b->n++];
  *r = (pick_rec){b->used, kl, b->used + kl, vl};
  memcpy(b->bytes + r->koff, kp, kl);
  if (vl)
    memcpy(b->bytes + r->voff, vp, vl);
  b->used += kl + vl;
  return MR_OK;
}

/* The reader's full batch goes to the visits; it then waits for the next
 * one in the ring. MR_ERR_CLOSED (never returned to a caller): the visits
 * stopped. */
static mr_status hand_over(pick_pipe *p) {
  pthread_mutex_lock(&p->mu);
  p->b[p->fill].full = true;
  pthread_cond_broadcast(&p->cv);
  p->fill = (p->fill + 1) % PICK_BATCHES;
  while (p->b[p->fill].full && !p->stop)
    pthread_cond_wait(&p->cv, &p->mu);
  bool stop = p->stop;
  pthread_mutex_unlock(&p->mu);
  return stop ? MR_ERR_CLOSED : MR_OK;
}

static mr_status pick_one(void *ctx, const mr_key *k, const void *kp, size_t kl, const void *vp,
                          size_t vl, mr_keybuf *seek, mr_error *err) {
  pick_pipe *p = ctx;
  store_pick how = p->pick(p->ctx, k, seek, err);
  if (how == STORE_PICK_FAIL)
    return err->code ? err->code : MR_ERR_INVALID;
  if (how != STORE_PICK_SEEK)
    seek->len = 0;
  if (how != STORE_PICK_TAKE)
    return MR_OK;
  pick_batch *b = &p->b[p->fill];
  mr_status rc = batch_add(b, kp, kl, vp, vl, err);
  if (!rc && (b->n >= PICK_BATCH_RECORDS || b->used >= PICK_BATCH_BYTES))
    rc = hand_over(p);
  return rc;
}

static void *pick_reader(void *arg) {
  pick_pipe *p = arg;
  mr_error err;
  mr_error_clear(&err);
  mr_status rc =
      walk(p->st, p->r->start.b, p->r->start.len, p->r->end.b, p->r->end.len, pick_one, p, &err);
  pthread_mutex_lock(&p->mu);
  if (!rc && p->b[p->fill].n > 0)
    p->b[p->fill].full = true; /* the last, partial batch */
  p->done = true;
  p->rc = rc;
  p->err = err;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static mr_status visit_batch(const pick_batch *b, store_visit_fn fn, void *ctx, mr_error *err) {
  mr_status rc = MR_OK;
  for (size_t i = 0; !rc && i < b->n; i++) {
    const pick_rec *r = &b->rec[i];
    mr_key k;
    ProtobufCMessage *m = NULL;
    rc = mr_key_decode(b->bytes + r->koff, r->klen, &k, err);
    if (!rc)
      rc = mr_value_decode(&k, b->bytes + r->voff, r->vlen, &m, err);
    if (!rc)
      rc = fn(ctx, &k, m, err);
    mr_value_free(m);
  }
  return rc;
}

mr_status store_scan_picked(store *st, const mr_key_range *r, store_pick_fn pick,
                            store_visit_fn fn, void *ctx, mr_error *err) {
  pick_pipe p;
  memset(&p, 0, sizeof p);
  p.st = st;
  p.r = r;
  p.pick = pick;
  p.ctx = ctx;
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  pthread_t reader;
  mr_status rc = MR_OK;
  if (pthread_create(&reader, NULL, pick_reader, &p) != 0) {
    rc = mr_fail(err, MR_ERR_NOMEM, "store scan: cannot start the reader thread");
  } else {
    for (int next = 0;; next = (next + 1) % PICK_BATCHES) {
      pthread_mutex_lock(&p.mu);
      while (!p.b[next].full && !p.done)
        pthread_cond_wait(&p.cv, &p.mu);
      /* the reader fills in the order the visits take: a batch not full
       * once it has ended means nothing is left */
      bool have = p.b[next].full;
      pthread_mutex_unlock(&p.mu);
      if (!have)
        break;
      rc = visit_batch(&p.b[next], fn, ctx, err);
      pthread_mutex_lock(&p.mu);
      p.b[next].n = 0;
      p.b[next].used = 0;
      p.b[next].full = false;
      p.stop = rc != MR_OK;
      pthread_cond_broadcast(&p.cv);
      pthread_mutex_unlock(&p.mu);
      if (rc)
        break;
    }
    pthread_join(reader, NULL);
    if (!rc && p.rc) {
      rc = p.rc;
      *err = p.err;
    }
  }
  for (int i = 0; i < PICK_BATCHES; i++) {
    free(p.b[i].rec);
    free(p.b[i].bytes);
  }
  pthread_cond_destroy(&p.cv);
  pthread_mutex_destroy(&p.mu);
  return rc;
}

mr_status store_get(store *st, const mr_key *k, ProtobufCMessage **out, mr_error *err) {
  return store_get_msg(st, k, out, err);
}

mr_status store_list_snapshots(store *st, store_visit_fn fn, void *ctx, mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(MR_SS_SNAPSHOT, &r, err);
  if (rc)
    return rc;
  visit_ctx v = {fn, ctx, 0};
  return scan_r(st, &r, visit_all, &v, err);
}

/* ---- read at a snapshot -------------------------------------------------- */

/* begin <= s < end (no end: live). */
static bool live_at(uint64_t begin, bool has_end, uint64_t end, uint64_t s) {
  return begin <= s && (!has_end || s < end);
}

/* Moves the embedded tag rows (tag entries, column tags) live at s to the
 * front of their array, in order, and shortens the count to them; the rest
 * stay in the array's tail (see visit_filtered). */
static void filter_tags(ProtobufCMessage *m, mr_key_kind kind, uint64_t s) {
  if (kind == MR_KK_TAG) {
    Moraine__V1__Tag *t = (Moraine__V1__Tag *)m;
    size_t n = 0;
    for (size_t i = 0; i < t->n_entries; i++) {
      Moraine__V1__TagEntry *e = t->entries[i];
      if (live_at((uint64_t)e->begin_snapshot, e->has_end_snapshot, (uint64_t)e->end_snapshot, s)) {
        t->entries[i] = t->entries[n];
        t->entries[n++] = e;
      }
    }
    t->n_entries = n;
  } else if (kind == MR_KK_COLUMN) {
    Moraine__V1__Column *c = (Moraine__V1__Column *)m;
    size_t n = 0;
    for (size_t i = 0; i < c->n_column_tag; i++) {
      Moraine__V1__ColumnTag *e = c->column_tag[i];
      if (live_at((uint64_t)e->begin_snapshot, e->has_end_snapshot, (uint64_t)e->end_snapshot, s)) {
        c->column_tag[i] = c->column_tag[n];
        c->column_tag[n++] = e;
      }
    }
    c->n_column_tag = n;
  }
}

/*
 * Visits m after filtering its tag rows; the filtered-out rows are moved to
 * the array's tail, so resetting the count before freeing frees them all.
 */
static mr_status visit_filtered(visit_ctx *v, const mr_key *k, ProtobufCMessage *m, mr_error *err) {
  size_t *count = NULL;
  if (k->kind == MR_KK_TAG)
    count = &((Moraine__V1__Tag *)m)->n_entries;
  else if (k->kind == MR_KK_COLUMN)
    count = &((Moraine__V1__Column *)m)->n_column_tag;
  size_t all = count ? *count : 0;
  filter_tags(m, k->kind, v->s);
  mr_status rc = v->fn(v->ctx, k, m, err);
  if (count)
    *count = all;
  return rc;
}

/* Versioned (current or history) and inline rows: visit those live at s. */
static mr_status visit_at(void *ctx, const mr_key *k, ProtobufCMessage *m, mr_error *err) {
  visit_ctx *v = ctx;
  uint64_t begin = 0, end = 0;
  if (store_msg_u64(m, "begin_snapshot", &begin)) {
    bool has_end = store_msg_u64(m, "end_snapshot", &end);
    if (!live_at(begin, has_end, end, v->s))
      return MR_OK;
  }
  return visit_filtered(v, k, m, err);
}

/* One kind's records at s: current range then (versioned) history range. */
static mr_status read_kind_at(store *st, mr_key_kind kind, uint64_t table_id, visit_ctx *v, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  for (int h = 0; h < 2; h++) {
    if (h == 1 && !(ki->flags & MR_KF_VERSIONED))
      break;
    mr_key_range r;
    mr_status rc = table_id ? mr_key_range_table(kind, h == 1, table_id, &r, err)
                            : mr_key_range_kind(kind, h == 1, &r, err);
    if (!rc)
      rc = scan_r(st, &r, visit_at, v, err);
    if (rc)
      return rc;
  }
  return MR_OK;
}

/* A single point record visited as of s (tag container, option record). */
static mr_status read_point_at(store *st, const mr_key *k, visit_ctx *v, mr_error *err) {
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, k, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (!rc)
    rc = visit_filtered(v, k, m, err);
  mr_value_free(m);
  return rc;
}

mr_status store_read_at(store *st, uint64_t s, uint64_t table_id, store_visit_fn fn, void *ctx, mr_error *err) {
  visit_ctx v = {fn, ctx, s};
  for (unsigned kind = 0; kind < MR_KK_COUNT; kind++) {
    const mr_key_kind_info *ki = mr_key_kind_get((mr_key_kind)kind);
    bool entity = ki->subspace == MR_SS_CURRENT || ki->subspace == MR_SS_INLINE ||
                  ki->subspace == MR_SS_SCHEMA_VERSION;
    if (!entity || (table_id && !(ki->flags & MR_KF_TABLE_SCOPED)))
      continue;
    mr_status rc = read_kind_at(st, (mr_key_kind)kind, table_id, &v, err);
    if (rc)
      return rc;
  }
  if (table_id == 0)
    return MR_OK;
  /* The table's own tag container and table-scope options. */
  mr_key tk = {.kind = MR_KK_TAG, .c = {table_id}};
  mr_status rc = read_point_at(st, &tk, &v, err);
  if (rc)
    return rc;
  mr_key ok = {.kind = MR_KK_OPTION, .c = {MR_SCOPE_TABLE, table_id}};
  return read_point_at(st, &ok, &v, err);
}

mr_status store_read_kind_at(store *st, mr_key_kind kind, uint64_t s, uint64_t table_id, store_visit_fn fn,
                             void *ctx, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  if (ki == NULL || (table_id && !(ki->flags & MR_KF_TABLE_SCOPED)))
    return mr_fail(err, MR_ERR_INVALID, "store_read_kind_at: kind %d is unknown or not table-scoped", (int)kind);
  visit_ctx v = {fn, ctx, s};
  return read_kind_at(st, kind, table_id, &v, err);
}

mr_status store_entity_versions(store *st, const mr_key *k, store_visit_fn fn, void *ctx, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  if (ki == NULL || k->history)
    return mr_fail(err, MR_ERR_INVALID, "store_entity_versions: not a current key");
  visit_ctx v = {fn, ctx, 0};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, k, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    rc = MR_OK;
  } else if (rc == MR_OK) {
    rc = fn(ctx, k, m, err);
    mr_value_free(m);
  }
  if (rc || !(ki->flags & MR_KF_VERSIONED))
    return rc;
  mr_key hk = *k;
  hk.history = true;
  mr_key_range r;
  rc = mr_key_range_prefix(&hk, ki->ncomp, &r, err);
  return rc ? rc : scan_r(st, &r, visit_all, &v, err);
}

/* ---- name lookup ---------------------------------------------------------- */

typedef struct name_ctx {
  uint64_t id;
  bool found;
} name_ctx;

static mr_status name_last(void *ctx, const mr_key *k, ProtobufCMessage *m, mr_error *err) {
  name_ctx *n = ctx;
  n->id = k->c[2];
  n->found = true;
  return MR_OK;
}

mr_status store_lookup_name(store *st, mr_name_kind nk, uint64_t parent_id, const char *name, uint64_t *entity_id,
                            bool *found, mr_error *err) {
  *found = false;
  *entity_id = 0;
  mr_key_range r;
  mr_status rc = mr_key_range_name(nk, parent_id, name, strlen(name), &r, err);
  if (rc)
    return rc;
  name_ctx n = {0, false};
  rc = scan_r(st, &r, name_last, &n, err);
  if (rc || !n.found)
    return rc;
  mr_key ek = {.kind = nk == MR_NAME_SCHEMA ? MR_KK_SCHEMA : MR_KK_TABLE, .c = {n.id}};
  ProtobufCMessage *m = NULL;
  rc = store_get_msg(st, &ek, &m, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_CORRUPTION, "name directory: \"%s\" names entity %llu, which is not current", name,
                   (unsigned long long)n.id);
  if (rc)
    return rc;
  const char *cur = store_msg_str(m, nk == MR_NAME_SCHEMA ? "schema_name" : "table_name");
  uint64_t parent = 0;
  bool parent_ok = nk == MR_NAME_SCHEMA || (store_msg_u64(m, "schema_id", &parent) && parent == parent_id);
  bool ok = cur != NULL && strcmp(cur, name) == 0 && parent_ok;
  mr_value_free(m);
  if (!ok)
    return mr_fail(err, MR_ERR_CORRUPTION, "name directory: \"%s\" names entity %llu, whose current name differs",
                   name, (unsigned long long)n.id);
  *entity_id = n.id;
  *found = true;
  return MR_OK;
}

/* ---- delete files by target ---------------------------------------------- */

typedef struct target_ctx {
  store *st;
  store_visit_fn fn;
  void *ctx;
} target_ctx;

static mr_status visit_target(void *ctx, const mr_key *k, ProtobufCMessage *unused, mr_error *err) {
  target_ctx *t = ctx;
  mr_key dk = {.kind = MR_KK_DELFILE, .c = {k->c[0], k->c[2]}};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(t->st, &dk, &m, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_CORRUPTION, "delete_target: delete file %llu of table %llu is not current",
                   (unsigned long long)k->c[2], (unsigned long long)k->c[0]);
  if (rc)
    return rc;
  uint64_t target = 0;
  if (!store_msg_u64(m, "data_file_id", &target) || target != k->c[1]) {
    mr_value_free(m);
    return mr_fail(err, MR_ERR_CORRUPTION, "delete_target: delete file %llu does not target data file %llu",
                   (unsigned long long)k->c[2], (unsigned long long)k->c[1]);
  }
  rc = t->fn(t->ctx, &dk, m, err);
  mr_value_free(m);
  return rc;
}

mr_status store_delete_files_for(store *st, uint64_t table_id, uint64_t data_file_id, store_visit_fn fn, void *ctx,
                                 mr_error *err) {
  mr_key k = {.kind = MR_KK_DELETE_TARGET, .c = {table_id, data_file_id, 0}};
  mr_key_range r;
  mr_status rc = mr_key_range_prefix(&k, 2, &r, err);
  if (rc)
    return rc;
  target_ctx t = {st, fn, ctx};
  return scan_r(st, &r, visit_target, &t, err);
}

/* ---- changelog ------------------------------------------------------------ */

mr_status store_changelog_replay(store *st, uint64_t from, uint64_t to, store_visit_fn fn, void *ctx,
                                 mr_error *err) {
  if (to <= from)
    return MR_OK;
  mr_key_range all;
  mr_status rc = mr_key_range_subspace(MR_SS_CHANGELOG, &all, err);
  if (rc)
    return rc;
  mr_key a = {.kind = MR_KK_CHANGELOG, .c = {from + 1}};
  mr_keybuf start, end = all.end;
  rc = store_key_bytes(&a, &start, err);
  if (!rc && to != UINT64_MAX) {
    mr_key b = {.kind = MR_KK_CHANGELOG, .c = {to + 1}};
    rc = store_key_bytes(&b, &end, err);
  }
  if (rc)
    return rc;
  visit_ctx v = {fn, ctx, 0};
  return scan_range(st, &start, &end, visit_all, &v, err);
}
