/*
 * branch.c — store_cut_back: turns a store (a fresh branch: SlateDB's clone
 * of another store, kv_clone) into the catalog as it was at an earlier
 * snapshot AT, on store records, in ONE batch:
 *   - snapshot and changelog records after AT go;
 *   - versions that began after AT go (current and history);
 *   - versions that ended after AT (and began by AT) are current again:
 *     their history key goes and their current key comes back without an
 *     end (current keys come before history keys in the walk, so a later
 *     version's delete under the same current key is added first, and the
 *     batch's later op wins);
 *   - inlined rows that began after AT go, those that ended after AT are
 *     live again; inlined tables of a later schema version go with their
 *     rows; schema_version rows after AT go;
 *   - the unversioned kinds follow what is left: stats and inlined delete
 *     tables of tables that no longer exist at all, stats of files that no
 *     longer exist at all go; tag entries are cut like versions; a file
 *     scheduled for deletion that exists again is no longer scheduled;
 *     options and column mappings stay; statistics of what stays are the
 *     store's current ones (RFC 0002 keeps no history of them);
 *   - the name and delete_target directories are rebuilt from the current
 *     records that remain (every old entry deleted, every implied entry
 *     put after the walk, so the puts win);
 *   - sys/format records the branch's own creation time (created_at = now;
 *     every other field kept);
 *   - sys/head becomes {AT, batch_count + 1} (store_write_batch).
 * One batch, so a crash leaves the whole cut or none of it.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/mr_grow.h"

/* A sorted set of (a, b) id pairs: tables (b = 0) or (table, data file). */
typedef struct pair_set {
  uint64_t (*p)[2];
  size_t n, cap; /* cap in bytes (mr_grow) */
} pair_set;

static mr_status pair_add(pair_set *s, uint64_t a, uint64_t b, mr_error *err) {
  if (mr_grow((void **)&s->p, &s->cap, (s->n + 1) * sizeof *s->p, 64 * sizeof *s->p))
    return mr_fail(err, MR_ERR_NOMEM, "cut back: out of memory");
  s->p[s->n][0] = a;
  s->p[s->n][1] = b;
  s->n++;
  return MR_OK;
}

static int pair_cmp(const void *x, const void *y) {
  const uint64_t *a = x, *b = y;
  if (a[0] != b[0])
    return a[0] < b[0] ? -1 : 1;
  return a[1] < b[1] ? -1 : a[1] > b[1];
}

static bool pair_has(const pair_set *s, uint64_t a, uint64_t b) {
  uint64_t key[2] = {a, b};
  return s->n && bsearch(key, s->p, s->n, sizeof *s->p, pair_cmp) != NULL;
}

/* The encoded directory entries to put once the walk is done. */
typedef struct key_list {
  mr_keybuf *k;
  size_t n, cap;
} key_list;

typedef struct cutter {
  store *st;
  uint64_t at;
  uint64_t schema_version; /* snapshot AT's */
  pair_set tables, files;  /* that exist at AT (some version began by then) */
  kv_batch *b;
  key_list entries;
  store_cut_result *out;
} cutter;

/* ---- pass 1: what exists at AT ---------------------------------------------- */

typedef struct exists_ctx {
  cutter *c;
  pair_set *set;
} exists_ctx;

static mr_status note_exists(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  exists_ctx *x = ctx;
  uint64_t begin = 0;
  if (!store_msg_u64(m, "begin_snapshot", &begin) || begin > x->c->at)
    return MR_OK;
  return pair_add(x->set, k->c[0], k->kind == MR_KK_FILE ? k->c[1] : 0, err);
}

/* Fills c->tables and c->files from the table and file versions of the
 * current and history subspaces. */
static mr_status find_existing(cutter *c, mr_error *err) {
  mr_key_kind kinds[2] = {MR_KK_TABLE, MR_KK_FILE};
  pair_set *sets[2] = {&c->tables, &c->files};
  for (int i = 0; i < 2; i++) {
    exists_ctx x = {c, sets[i]};
    for (int h = 0; h < 2; h++) {
      mr_key_range r;
      mr_status rc = mr_key_range_kind(kinds[i], h == 1, &r, err);
      if (rc)
        return rc;
      rc = store_scan(c->st, &r, note_exists, &x, err);
      if (rc)
        return rc;
    }
    if (sets[i]->n)
      qsort(sets[i]->p, sets[i]->n, sizeof *sets[i]->p, pair_cmp);
  }
  return MR_OK;
}

/* ---- pass 2: the walk ------------------------------------------------------------ */

static mr_status drop(cutter *c, const void *kp, size_t kl, mr_error *err) {
  c->out->records_removed++;
  return kv_batch_delete(c->b, kp, kl, err);
}

static mr_status put_msg(cutter *c, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  mr_keybuf kb;
  mr_status rc = store_key_bytes(k, &kb, err);
  if (rc)
    return rc;
  uint8_t *val = NULL;
  size_t vlen = 0;
  rc = mr_value_encode(k->kind, m, &val, &vlen, err);
  if (!rc)
    rc = kv_batch_put(c->b, kb.b, kb.len, val, vlen, err);
  free(val);
  return rc;
}

/* Remembers the directory entry a surviving current record implies. */
static mr_status want_entry(cutter *c, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  mr_key dk;
  bool has = false;
  store_name_entry_of(k, m, &dk, &has);
  if (!has)
    store_delete_target_of(k, m, &dk, &has);
  if (!has)
    return MR_OK;
  key_list *l = &c->entries;
  if (mr_grow((void **)&l->k, &l->cap, (l->n + 1) * sizeof *l->k, 64 * sizeof *l->k))
    return mr_fail(err, MR_ERR_NOMEM, "cut back: out of memory");
  mr_status rc = store_key_bytes(&dk, &l->k[l->n], err);
  if (!rc)
    l->n++;
  return rc;
}

/* Clears the optional end_snapshot of m (a decoded, owned message). */
static void clear_end(ProtobufCMessage *m) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "end_snapshot");
  if (f && f->label == PROTOBUF_C_LABEL_OPTIONAL)
    *(protobuf_c_boolean *)((uint8_t *)m + f->quantifier_offset) = 0;
}

/* A versioned record, current or history. */
static mr_status cut_versioned(cutter *c, const void *kp, size_t kl, const mr_key *k,
                               ProtobufCMessage *m, mr_error *err) {
  uint64_t begin = 0;
  if (!store_msg_u64(m, "begin_snapshot", &begin))
    return mr_fail(err, MR_ERR_CORRUPTION, "cut back: a versioned record without begin_snapshot");
  if (begin > c->at)
    return drop(c, kp, kl, err);
  if (!k->history)
    return want_entry(c, k, m, err);
  uint64_t end = k->c[mr_key_kind_get(k->kind)->ncomp];
  if (end <= c->at)
    return MR_OK;
  /* live again at AT: back to current, without its end */
  mr_status rc = drop(c, kp, kl, err);
  if (rc)
    return rc;
  mr_key cur = *k;
  cur.history = false;
  cur.c[mr_key_kind_get(k->kind)->ncomp] = 0;
  clear_end(m);
  rc = put_msg(c, &cur, m, err);
  c->out->records_removed--;
  c->out->records_restored++;
  return rc ? rc : want_entry(c, &cur, m, err);
}

static mr_status cut_tag(cutter *c, const void *kp, size_t kl, const mr_key *k, ProtobufCMessage *m,
                         mr_error *err) {
  Moraine__V1__Tag *t = (Moraine__V1__Tag *)m;
  size_t kept = 0;
  bool changed = false;
  for (size_t i = 0; i < t->n_entries; i++) {
    Moraine__V1__TagEntry *e = t->entries[i];
    if (e->begin_snapshot > (int64_t)c->at) {
      changed = true;
      continue; /* left out; freed with m through the original array below */
    }
    if (e->has_end_snapshot && e->end_snapshot > (int64_t)c->at) {
      e->has_end_snapshot = 0;
      changed = true;
    }
    /* swap rather than overwrite, so every entry stays in the array m frees */
    Moraine__V1__TagEntry *tmp = t->entries[kept];
    t->entries[kept++] = e;
    t->entries[i] = tmp;
  }
  if (!changed)
    return MR_OK;
  if (kept == 0)
    return drop(c, kp, kl, err);
  size_t all = t->n_entries;
  t->n_entries = kept;
  mr_status rc = put_msg(c, k, m, err);
  t->n_entries = all;
  return rc;
}

/* One key of the walk. */
static mr_status cut_key(cutter *c, const void *kp, size_t kl, const mr_key *k, const void *vp,
                         size_t vl, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  switch (ki->subspace) {
  case MR_SS_SYSTEM:
    return MR_OK;
  case MR_SS_SNAPSHOT:
  case MR_SS_CHANGELOG:
    return k->c[0] > c->at ? drop(c, kp, kl, err) : MR_OK;
  case MR_SS_NAME:
  case MR_SS_DELETE_TARGET:
    return kv_batch_delete(c->b, kp, kl, err); /* rebuilt after the walk */
  case MR_SS_SCHEMA_VERSION:
    return k->c[1] > c->at ? drop(c, kp, kl, err) : MR_OK;
  default:
    break;
  }
  ProtobufCMessage *m = NULL;
  mr_status rc = mr_value_decode(k, vp, vl, &m, err);
  if (rc)
    return rc;
  uint64_t begin = 0;
  if (ki->flags & MR_KF_VERSIONED) {
    rc = cut_versioned(c, kp, kl, k, m, err);
  } else {
    switch (k->kind) {
    case MR_KK_FSTAT:
      if (!pair_has(&c->files, k->c[0], k->c[1]))
        rc = drop(c, kp, kl, err);
      break;
    case MR_KK_TSTAT:
    case MR_KK_TCSTAT:
    case MR_KK_INLINE_DELETE_TABLE:
      if (!pair_has(&c->tables, k->c[0], 0))
        rc = drop(c, kp, kl, err);
      break;
    case MR_KK_TAG:
      rc = cut_tag(c, kp, kl, k, m, err);
      break;
    case MR_KK_GCFILE: {
      /* a file that exists at AT is not to be deleted */
      bool live = false;
      for (size_t i = 0; i < c->files.n && !live; i++)
        live = c->files.p[i][1] == k->c[0];
      if (live)
        rc = drop(c, kp, kl, err);
      break;
    }
    case MR_KK_INLINE_TABLE:
      if (k->c[1] > c->schema_version || !pair_has(&c->tables, k->c[0], 0))
        rc = drop(c, kp, kl, err);
      break;
    case MR_KK_INLINE_ROW: {
      Moraine__V1__InlineDataRow *row = (Moraine__V1__InlineDataRow *)m;
      if (k->c[3] > c->at || k->c[1] > c->schema_version) {
        rc = drop(c, kp, kl, err);
      } else if (row->has_end_snapshot && row->end_snapshot > (int64_t)c->at) {
        row->has_end_snapshot = 0;
        rc = put_msg(c, k, m, err);
        c->out->records_restored++;
      }
      break;
    }
    case MR_KK_INLINE_DELETE_ROW:
      if (store_msg_u64(m, "begin_snapshot", &begin) && begin > c->at)
        rc = drop(c, kp, kl, err);
      break;
    default: /* option, mapping */
      break;
    }
  }
  mr_value_free(m);
  return rc;
}

/* pass 2: every key of the store, counted and cut (store_walk_raw). */
static mr_status cut_one(void *ctx, const mr_key *k, const void *kp, size_t kl, const void *vp,
                         size_t vl, mr_error *err) {
  cutter *c = ctx;
  c->out->keys_walked++;
  return cut_key(c, kp, kl, k, vp, vl, err);
}

static mr_status walk(cutter *c, mr_error *err) {
  return store_walk_raw(c->st, NULL, 0, NULL, 0, cut_one, c, err);
}

/* Adds to c->b sys/format with created_at = now (the branch is a store
 * made now), every other field as it is (the commit-log origin included). */
static mr_status stamp_creation(cutter *c, mr_error *err) {
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(c->st, &fk, &m, err);
  if (rc)
    return mr_error_wrap(err, "reading sys/format");
  Moraine__V1__SysFormat *f = (Moraine__V1__SysFormat *)m;
  f->has_created_at = 1;
  f->created_at = store_now_us();
  rc = put_msg(c, &fk, m, err);
  mr_value_free(m);
  return rc;
}

mr_status store_cut_back(store *st, uint64_t at, store_cut_result *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  if (st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "cut back: the store is open read-only");
  store_head head = store_get_head(st);
  out->head_before = head.snapshot_id;
  if (at > head.snapshot_id)
    return mr_fail(err, MR_ERR_INVALID, "snapshot %llu is after the store's head snapshot %llu",
                   (unsigned long long)at, (unsigned long long)head.snapshot_id);
  mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {at}};
  ProtobufCMessage *snap = NULL;
  mr_status rc = store_get_msg(st, &sk, &snap, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_NOT_FOUND,
                   "snapshot %llu is not in the store (never made, or expired)",
                   (unsigned long long)at);
  if (rc)
    return mr_error_wrap(err, "reading snapshot %llu", (unsigned long long)at);
  const Moraine__V1__Snapshot *s = (const Moraine__V1__Snapshot *)snap;
  cutter c = {.st = st,
              .at = at,
              .out = out,
              .schema_version = s->has_schema_version ? (uint64_t)s->schema_version : 0};
  mr_value_free(snap);
  rc = find_existing(&c, err);
  if (!rc)
    rc = kv_batch_new(&c.b, err);
  if (!rc)
    rc = walk(&c, err);
  for (size_t i = 0; !rc && i < c.entries.n; i++)
    rc = kv_batch_put(c.b, c.entries.k[i].b, c.entries.k[i].len, NULL, 0, err);
  if (!rc)
    rc = stamp_creation(&c, err);
  if (!rc)
    rc = store_write_batch(st, c.b, &head, at, NULL, err);
  kv_batch_free(c.b);
  free(c.tables.p);
  free(c.files.p);
  free(c.entries.k);
  if (rc)
    return mr_error_wrap(err, "cutting the store back to snapshot %llu", (unsigned long long)at);
  return MR_OK;
}
