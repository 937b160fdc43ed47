/*
 * commit.c — one DuckLake commit as one SlateDB WriteBatch (RFC 0002
 * "Atomicity invariant"): the snapshot record, entity puts and
 * current->history moves, the name and delete_target entries derived from
 * them, unversioned overwrites, create-only mappings, the changelog record
 * and its window deletion, and sys/head — written only if the head has not
 * moved since the commit began (store_write_batch).
 *
 * Ops are collected first and turned into a kv batch at write time, removals
 * before writes, so an end and the put of its successor may come in any
 * order. Not here: reading (read.c), expiry (expire.c).
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct commit_op {
  bool is_put;       /* put (write phase) or delete (removal phase) */
  uint8_t *key;      /* encoded key, owned */
  size_t klen;
  uint8_t *val;      /* encoded value, owned; NULL for deletes and empty values */
  size_t vlen;
} commit_op;

typedef struct bytes_ref {
  uint8_t *p;
  size_t len;
} bytes_ref;

struct store_commit {
  store *st;
  store_head expected;
  bool has_snapshot;
  uint64_t snapshot_id;
  commit_op *ops;
  size_t nops, capops;
  bytes_ref *changed; /* changelog keys (borrowed from ops) */
  size_t nchanged, capchanged;
  store_commit_counts counts; /* removals that make this a maintenance commit */
};

mr_status store_commit_begin(store *st, store_head expected, store_commit **out, mr_error *err) {
  *out = NULL;
  if (st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "store_commit_begin: the store is open read-only");
  mr_status rc = store_failed(st, err);
  if (rc)
    return rc;
  store_commit *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "store_commit_begin: out of memory");
  c->st = st;
  c->expected = expected;
  *out = c;
  return MR_OK;
}

void store_commit_abort(store_commit *c) {
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->nops; i++) {
    free(c->ops[i].key);
    free(c->ops[i].val);
  }
  free(c->ops);
  free(c->changed);
  free(c);
}

/* Appends an op taking ownership of nothing: key and val are copied. */
static mr_status add_op(store_commit *c, bool is_put, const mr_keybuf *kb, const uint8_t *val, size_t vlen,
                        bool changelog, mr_error *err) {
  if (c->nops == c->capops) {
    size_t cap = c->capops ? 2 * c->capops : 16;
    commit_op *n = realloc(c->ops, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "store_commit: out of memory");
    c->ops = n;
    c->capops = cap;
  }
  commit_op *op = &c->ops[c->nops];
  memset(op, 0, sizeof *op);
  op->is_put = is_put;
  op->key = malloc(kb->len);
  if (op->key == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "store_commit: out of memory");
  memcpy(op->key, kb->b, kb->len);
  op->klen = kb->len;
  if (val != NULL && vlen > 0) {
    op->val = malloc(vlen);
    if (op->val == NULL) {
      free(op->key);
      return mr_fail(err, MR_ERR_NOMEM, "store_commit: out of memory");
    }
    memcpy(op->val, val, vlen);
    op->vlen = vlen;
  }
  c->nops++;
  if (!changelog)
    return MR_OK;
  if (c->nchanged == c->capchanged) {
    size_t cap = c->capchanged ? 2 * c->capchanged : 16;
    bytes_ref *n = realloc(c->changed, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "store_commit: out of memory");
    c->changed = n;
    c->capchanged = cap;
  }
  c->changed[c->nchanged++] = (bytes_ref){op->key, op->klen};
  return MR_OK;
}

static mr_status add_key_op(store_commit *c, bool is_put, const mr_key *k, const ProtobufCMessage *msg,
                            bool changelog, mr_error *err) {
  mr_keybuf kb;
  mr_status rc = store_key_bytes(k, &kb, err);
  if (rc)
    return rc;
  uint8_t *val = NULL;
  size_t vlen = 0;
  if (is_put) {
    rc = mr_value_encode(k->kind, msg, &val, &vlen, err);
    if (rc)
      return rc;
  }
  rc = add_op(c, is_put, &kb, val, vlen, changelog, err);
  free(val);
  return rc;
}

/* ---- derived directory entries ------------------------------------------ */

/* store_name_entry_of and store_delete_target_of (store_internal.h) are the
 * one definition of which directory entry a record implies; verify.c checks
 * stores against them. */
void store_name_entry_of(const mr_key *k, const ProtobufCMessage *v, mr_key *nk, bool *has) {
  *has = false;
  const char *name = NULL;
  uint64_t parent = 0;
  if (k->kind == MR_KK_SCHEMA) {
    name = store_msg_str(v, "schema_name");
    nk->c[0] = MR_NAME_SCHEMA;
  } else if (k->kind == MR_KK_TABLE) {
    name = store_msg_str(v, "table_name");
    if (!store_msg_u64(v, "schema_id", &parent))
      return;
    nk->c[0] = MR_NAME_TABLE;
  } else {
    return;
  }
  if (name == NULL)
    return;
  nk->kind = MR_KK_NAME;
  nk->history = false;
  nk->c[1] = parent;
  nk->c[2] = k->c[0];
  nk->name = (const uint8_t *)name;
  nk->name_len = strlen(name);
  nk->name_escaped = false;
  *has = true;
}

void store_delete_target_of(const mr_key *k, const ProtobufCMessage *v, mr_key *tk, bool *has) {
  uint64_t data_file = 0;
  *has = k->kind == MR_KK_DELFILE && store_msg_u64(v, "data_file_id", &data_file);
  if (!*has)
    return;
  memset(tk, 0, sizeof *tk);
  tk->kind = MR_KK_DELETE_TARGET;
  tk->c[0] = k->c[0];
  tk->c[1] = data_file;
  tk->c[2] = k->c[1];
}

/* Adds (is_put) or removes the directory entries a value implies. */
static mr_status directory_ops(store_commit *c, bool is_put, const mr_key *k, const ProtobufCMessage *v,
                               mr_error *err) {
  mr_key dk;
  bool has = false;
  store_name_entry_of(k, v, &dk, &has);
  if (!has)
    store_delete_target_of(k, v, &dk, &has);
  if (!has)
    return MR_OK;
  return add_key_op(c, is_put, &dk, NULL, false, err);
}

/* ---- public commit calls ------------------------------------------------ */

mr_status store_commit_snapshot(store_commit *c, const Moraine__V1__Snapshot *snap, mr_error *err) {
  if (c->has_snapshot)
    return mr_fail(err, MR_ERR_INVALID, "store_commit_snapshot: this commit already has snapshot %llu",
                   (unsigned long long)c->snapshot_id);
  if (snap->snapshot_id < 0 || (uint64_t)snap->snapshot_id < c->expected.snapshot_id ||
      ((uint64_t)snap->snapshot_id == c->expected.snapshot_id && c->expected.batch_count > 0))
    return mr_fail(err, MR_ERR_INVALID,
                   "store_commit_snapshot: snapshot %lld does not follow the head snapshot %llu",
                   (long long)snap->snapshot_id, (unsigned long long)c->expected.snapshot_id);
  mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {(uint64_t)snap->snapshot_id}};
  mr_status rc = add_key_op(c, true, &k, &snap->base, false, err);
  if (rc)
    return rc;
  c->has_snapshot = true;
  c->snapshot_id = (uint64_t)snap->snapshot_id;
  return MR_OK;
}

/* Kinds a commit may put: entities and records below the system subspace. */
static bool committable(const mr_key *k) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  return ki != NULL && !k->history &&
         (ki->subspace == MR_SS_CURRENT || ki->subspace == MR_SS_INLINE || ki->subspace == MR_SS_SCHEMA_VERSION);
}

/* Create-only: refuse when the mapping exists in the store or in this commit. */
static mr_status check_mapping_new(store_commit *c, const mr_key *k, mr_error *err) {
  mr_keybuf kb;
  mr_status rc = store_key_bytes(k, &kb, err);
  if (rc)
    return rc;
  for (size_t i = 0; i < c->nops; i++)
    if (c->ops[i].is_put && c->ops[i].klen == kb.len && memcmp(c->ops[i].key, kb.b, kb.len) == 0)
      goto exists;
  void *val = NULL;
  size_t vlen = 0;
  rc = kv_get(c->st->db, kb.b, kb.len, &val, &vlen, err);
  kv_free(val);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (rc)
    return rc;
exists:
  return mr_fail(err, MR_ERR_INVALID,
                 "store_commit_put: mapping {table_id=%llu,mapping_id=%llu} exists; mappings are create-only",
                 (unsigned long long)k->c[0], (unsigned long long)k->c[1]);
}

mr_status store_commit_put(store_commit *c, const mr_key *k, const ProtobufCMessage *value, mr_error *err) {
  if (!committable(k))
    return mr_fail(err, MR_ERR_INVALID, "store_commit_put: kind %d is not a current, inline or schema_version record",
                   (int)k->kind);
  mr_status rc = mr_value_check_key(k, value, err);
  if (rc)
    return mr_error_wrap(err, "store_commit_put");
  if (k->kind == MR_KK_MAPPING && (rc = check_mapping_new(c, k, err)))
    return rc;
  rc = add_key_op(c, true, k, value, true, err);
  if (rc)
    return rc;
  return directory_ops(c, true, k, value, err);
}

mr_status store_commit_end(store_commit *c, const mr_key *k, const ProtobufCMessage *ended, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  if (ki == NULL || !(ki->flags & MR_KF_VERSIONED) || k->history)
    return mr_fail(err, MR_ERR_INVALID, "store_commit_end: kind %d is not a versioned current entity", (int)k->kind);
  uint64_t end = 0;
  if (!store_msg_u64(ended, "end_snapshot", &end))
    return mr_fail(err, MR_ERR_INVALID, "store_commit_end: the ended version has no end_snapshot");
  mr_key hk = *k;
  hk.history = true;
  hk.c[ki->ncomp] = end;
  mr_status rc = mr_value_check_key(&hk, ended, err);
  if (rc)
    return mr_error_wrap(err, "store_commit_end");
  rc = add_key_op(c, false, k, NULL, true, err);
  if (!rc)
    rc = add_key_op(c, true, &hk, ended, false, err);
  if (!rc)
    rc = directory_ops(c, false, k, ended, err);
  return rc;
}

mr_status store_commit_delete(store_commit *c, const mr_key *k, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  if (!committable(k) || (ki->flags & MR_KF_VERSIONED))
    return mr_fail(err, MR_ERR_INVALID,
                   "store_commit_delete: kind %d is versioned or not a record (end versioned entities instead)",
                   (int)k->kind);
  if (ki->subspace == MR_SS_INLINE)
    c->counts.inline_deleted++;
  return add_key_op(c, false, k, NULL, true, err);
}

mr_status store_commit_forget(store_commit *c, const mr_key *k, const ProtobufCMessage *value, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  if (ki != NULL && k->kind == MR_KK_SNAPSHOT && !k->history) {
    c->counts.snapshots_forgotten++;
    /* its changelog record goes with it: a reader whose gap reaches back
     * past an expired snapshot reloads in full anyway (RFC 0009), and an
     * expired catalog should not keep a window of records for snapshots it
     * no longer has */
    mr_key ck = {.kind = MR_KK_CHANGELOG, .c = {k->c[0]}};
    mr_status rc = add_key_op(c, false, &ck, NULL, false, err);
    return rc ? rc : add_key_op(c, false, k, NULL, false, err);
  }
  if (ki == NULL || !(ki->flags & MR_KF_VERSIONED) || ki->subspace != MR_SS_CURRENT)
    return mr_fail(err, MR_ERR_INVALID, "store_commit_forget: kind %d is not a snapshot or a versioned entity",
                   (int)k->kind);
  if (k->history) {
    c->counts.history_forgotten++;
    return add_key_op(c, false, k, NULL, false, err);
  }
  c->counts.current_forgotten++;
  if (value == NULL)
    return mr_fail(err, MR_ERR_INVALID, "store_commit_forget: a current version needs its value");
  mr_status rc = add_key_op(c, false, k, NULL, true, err);
  if (!rc)
    rc = directory_ops(c, false, k, value, err);
  return rc;
}

/* ---- write -------------------------------------------------------------- */

static int cmp_bytes(const void *a, const void *b) {
  const bytes_ref *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int r = memcmp(x->p, y->p, n);
  return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* The changelog record of this commit and the deletion N snapshots back. */
static mr_status changelog_ops(store_commit *c, kv_batch *b, mr_error *err) {
  if (c->nchanged > 1) /* a commit may change no listed key: changed is NULL then */
    qsort(c->changed, c->nchanged, sizeof *c->changed, cmp_bytes);
  size_t n = 0;
  for (size_t i = 0; i < c->nchanged; i++)
    if (n == 0 || cmp_bytes(&c->changed[n - 1], &c->changed[i]) != 0)
      c->changed[n++] = c->changed[i];
  ProtobufCBinaryData *keys = calloc(n ? n : 1, sizeof *keys);
  if (keys == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "store_commit: out of memory");
  for (size_t i = 0; i < n; i++)
    keys[i] = (ProtobufCBinaryData){c->changed[i].len, c->changed[i].p};
  Moraine__V1__Changelog cl = MORAINE__V1__CHANGELOG__INIT;
  cl.snapshot_id = c->snapshot_id;
  cl.n_keys = n;
  cl.keys = keys;
  mr_key k = {.kind = MR_KK_CHANGELOG, .c = {c->snapshot_id}};
  mr_keybuf kb;
  uint8_t *val = NULL;
  size_t vlen = 0;
  mr_status rc = store_key_bytes(&k, &kb, err);
  if (!rc)
    rc = mr_value_encode(MR_KK_CHANGELOG, &cl.base, &val, &vlen, err);
  free(keys);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, vlen, err);
  free(val);
  uint64_t window = c->st->changelog_window;
  if (!rc && c->snapshot_id >= window) {
    k.c[0] = c->snapshot_id - window;
    rc = store_key_bytes(&k, &kb, err);
    if (!rc)
      rc = kv_batch_delete(b, kb.b, kb.len, err);
  }
  return rc;
}

static mr_status build_batch(store_commit *c, kv_batch *b, mr_error *err) {
  for (int phase = 0; phase < 2; phase++)
    for (size_t i = 0; i < c->nops; i++) {
      commit_op *op = &c->ops[i];
      if (op->is_put != (phase == 1))
        continue;
      mr_status rc = op->is_put ? kv_batch_put(b, op->key, op->klen, op->val, op->vlen, err)
                                : kv_batch_delete(b, op->key, op->klen, err);
      if (rc)
        return rc;
    }
  return c->has_snapshot ? changelog_ops(c, b, err) : MR_OK;
}

void store_commit_get_counts(const store_commit *c, store_commit_counts *out) {
  *out = c->counts;
}

/* A commit that expired snapshots or removed inlined rows is recorded as a
 * maintenance pass in this commit's batch: the record lands with the
 * removals or not at all. (Two such commits cannot both land: each is
 * conditioned on the head, so neither loses the other's pass.) */
static mr_status maintenance_ops(store_commit *c, kv_batch *b, mr_error *err) {
  const store_commit_counts *n = &c->counts;
  if (n->snapshots_forgotten == 0 && n->inline_deleted == 0)
    return MR_OK;
  store_maint_step steps[2] = {{.name = "records", .outcome = "done"},
                               {.name = "inlined rows", .outcome = "done"}};
  snprintf(steps[0].detail, sizeof steps[0].detail,
           "%llu snapshots, %llu ended versions, %llu current records removed at snapshot %llu",
           (unsigned long long)n->snapshots_forgotten, (unsigned long long)n->history_forgotten,
           (unsigned long long)n->current_forgotten,
           (unsigned long long)(c->has_snapshot ? c->snapshot_id : c->expected.snapshot_id));
  snprintf(steps[1].detail, sizeof steps[1].detail, "%llu inlined rows removed",
           (unsigned long long)n->inline_deleted);
  const char *trigger = n->snapshots_forgotten ? "ducklake expiry" : "ducklake inlined rows removed";
  return store_maintenance_append(c->st, b, store_now_us(), trigger, steps, 2, err);
}

mr_status store_commit_write(store_commit *c, store_head *new_head, mr_error *err) {
  kv_batch *b = NULL;
  mr_status rc = kv_batch_new(&b, err);
  if (!rc)
    rc = build_batch(c, b, err);
  if (!rc)
    rc = maintenance_ops(c, b, err);
  if (!rc)
    rc = store_write_batch(c->st, b, &c->expected, c->has_snapshot ? c->snapshot_id : UINT64_MAX, new_head, err);
  if (!rc && (c->counts.snapshots_forgotten || c->counts.inline_deleted))
    atomic_store(&c->st->flush_wanted, true);
  kv_batch_free(b);
  store_commit_abort(c);
  return rc;
}
