/*
 * expire.c — snapshot expiry (RFC 0007 as far as the store goes): drops
 * snapshot records older than the horizon, history versions that ended at
 * or before it, fstat records of files with neither a current version nor
 * history left, and tag-container entries that ended at or before it;
 * schema_version rows stay. Then records the pass in sys/maintenance_status.
 *
 * Every step is a sweep over one range that turns what it finds into
 * deletes (or container rewrites) and writes them in batches of at most
 * batch_keys mutations, each an ordinary head-bumping batch. Each decision
 * depends only on the store's state, never on what an earlier pass did, so
 * every step is idempotent: after a crash or a stop, running expiry again
 * finds what is left and finishes the job. Every intermediate state reads
 * the same at every snapshot >= horizon.
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sweep {
  store *st;
  uint64_t horizon;
  size_t batch_keys;
  kv_batch *b;   /* pending mutations, written by flush */
  size_t pending;
  store_expire_progress *prog;
  store_progress_fn progress;
  void *pctx;
  uint64_t *counter; /* the progress counter of the running step */
  /* fstat step: the last (table, file) decided */
  bool have_last;
  uint64_t last_t, last_f;
  bool last_drop;
} sweep;

typedef mr_status (*decide_fn)(sweep *sw, const uint8_t *kp, size_t kl, const mr_key *k, const uint8_t *vp,
                               size_t vl, mr_error *err);

/* Writes the pending mutations as one batch and reports progress. */
static mr_status flush(sweep *sw, mr_error *err) {
  if (sw->pending == 0)
    return MR_OK;
  mr_status rc = store_write_batch(sw->st, sw->b, NULL, UINT64_MAX, NULL, err);
  kv_batch_free(sw->b);
  sw->b = NULL;
  sw->pending = 0;
  if (rc)
    return rc;
  rc = kv_batch_new(&sw->b, err);
  if (rc)
    return rc;
  sw->prog->batches++;
  if (sw->progress && !sw->progress(sw->pctx, sw->prog))
    sw->prog->stopped = true;
  return MR_OK;
}

static mr_status drop_key(sweep *sw, const uint8_t *kp, size_t kl, mr_error *err) {
  mr_status rc = kv_batch_delete(sw->b, kp, kl, err);
  if (rc)
    return rc;
  sw->pending++;
  (*sw->counter)++;
  return MR_OK;
}

/*
 * Runs decide over [r.start, r.end) in key order, flushing every batch_keys
 * mutations (the scan resumes after the last key seen) and once at the end.
 */
static mr_status sweep_range(sweep *sw, const mr_key_range *r, decide_fn decide, mr_error *err) {
  mr_keybuf cursor = r->start;
  while (!sw->prog->stopped) {
    kv_iter *it = NULL;
    mr_status rc = kv_iter_open(sw->st->db, cursor.b, cursor.len, r->end.b, r->end.len, &it, err);
    if (rc)
      return rc;
    bool more = false;
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
      if (!rc)
        rc = mr_key_decode(kp, kl, &k, err);
      if (!rc)
        rc = decide(sw, kp, kl, &k, vp, vl, err);
      if (rc)
        break;
      if (sw->pending >= sw->batch_keys) {
        if (kl + 1 > sizeof cursor.b) {
          rc = mr_fail(err, MR_ERR_CORRUPTION, "store_expire: a key of %zu bytes is longer than any key", kl);
          break;
        }
        memcpy(cursor.b, kp, kl); /* resume just after this key */
        cursor.b[kl] = 0;
        cursor.len = kl + 1;
        more = true;
        break;
      }
    }
    kv_iter_close(it);
    if (!rc)
      rc = flush(sw, err);
    if (rc || !more)
      return rc;
  }
  return MR_OK;
}

/* ---- the steps ----------------------------------------------------------- */

static mr_status decide_snapshot(sweep *sw, const uint8_t *kp, size_t kl, const mr_key *k, const uint8_t *vp,
                                 size_t vl, mr_error *err) {
  return k->c[0] < sw->horizon ? drop_key(sw, kp, kl, err) : MR_OK;
}

static mr_status decide_history(sweep *sw, const uint8_t *kp, size_t kl, const mr_key *k, const uint8_t *vp,
                                size_t vl, mr_error *err) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  return k->c[ki->ncomp] <= sw->horizon ? drop_key(sw, kp, kl, err) : MR_OK;
}

/* True when the key range holds at least one key. */
static mr_status range_nonempty(store *st, const mr_key_range *r, bool *yes, mr_error *err) {
  kv_iter *it = NULL;
  mr_status rc = kv_iter_open(st->db, r->start.b, r->start.len, r->end.b, r->end.len, &it, err);
  if (rc)
    return rc;
  const void *kp, *vp;
  size_t kl, vl;
  rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err);
  kv_iter_close(it);
  *yes = rc == MR_OK;
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    rc = MR_OK;
  }
  return rc;
}

/* fstat of (t, f) goes once the file has no current version and no history. */
static mr_status decide_fstat(sweep *sw, const uint8_t *kp, size_t kl, const mr_key *k, const uint8_t *vp,
                              size_t vl, mr_error *err) {
  if (!sw->have_last || sw->last_t != k->c[0] || sw->last_f != k->c[1]) {
    mr_key fk = {.kind = MR_KK_FILE, .c = {k->c[0], k->c[1]}};
    mr_key_range r;
    bool present = false;
    mr_status rc = mr_key_range_prefix(&fk, 2, &r, err);
    if (!rc)
      rc = range_nonempty(sw->st, &r, &present, err);
    if (!rc && !present) {
      fk.history = true;
      rc = mr_key_range_prefix(&fk, 2, &r, err);
      if (!rc)
        rc = range_nonempty(sw->st, &r, &present, err);
    }
    if (rc)
      return rc;
    sw->have_last = true;
    sw->last_t = k->c[0];
    sw->last_f = k->c[1];
    sw->last_drop = !present;
  }
  return sw->last_drop ? drop_key(sw, kp, kl, err) : MR_OK;
}

/* Rewrites a tag container without its entries that ended <= horizon. */
static mr_status decide_tag(sweep *sw, const uint8_t *kp, size_t kl, const mr_key *k, const uint8_t *vp,
                            size_t vl, mr_error *err) {
  ProtobufCMessage *m = NULL;
  mr_status rc = mr_value_decode(k, vp, vl, &m, err);
  if (rc)
    return rc;
  Moraine__V1__Tag *t = (Moraine__V1__Tag *)m;
  size_t all = t->n_entries, n = 0;
  for (size_t i = 0; i < all; i++) {
    Moraine__V1__TagEntry *e = t->entries[i];
    if (e->has_end_snapshot && (uint64_t)e->end_snapshot <= sw->horizon)
      continue;
    t->entries[i] = t->entries[n];
    t->entries[n++] = e;
  }
  if (n < all) {
    t->n_entries = n;
    if (n == 0) {
      rc = kv_batch_delete(sw->b, kp, kl, err);
    } else {
      uint8_t *val = NULL;
      size_t len = 0;
      rc = mr_value_encode(MR_KK_TAG, m, &val, &len, err);
      if (!rc)
        rc = kv_batch_put(sw->b, kp, kl, val, len, err);
      free(val);
    }
    t->n_entries = all;
    if (!rc) {
      sw->pending++;
      *sw->counter += all - n;
    }
  }
  mr_value_free(m);
  return rc;
}

/* ---- maintenance status -------------------------------------------------- */

#define EXPIRE_STEPS 4

/* Appends one pass to sys/maintenance_status, as its own batch. */
static mr_status record_pass(store *st, int64_t start_us, const char *trigger, store_maint_step *steps,
                             size_t nsteps, mr_error *err) {
  kv_batch *b = NULL;
  mr_status rc = kv_batch_new(&b, err);
  if (!rc)
    rc = store_maintenance_append(st, b, start_us, trigger, steps, nsteps, err);
  if (!rc)
    rc = store_write_batch(st, b, NULL, UINT64_MAX, NULL, err);
  kv_batch_free(b);
  return rc;
}

/* ---- the pass ------------------------------------------------------------ */

typedef struct expire_step {
  const char *name;
  mr_status (*range)(mr_key_range *r, mr_error *err);
  decide_fn decide;
  size_t counter_off; /* offsetof the step's counter in store_expire_progress */
} expire_step;

static mr_status range_snapshots(mr_key_range *r, mr_error *err) {
  return mr_key_range_subspace(MR_SS_SNAPSHOT, r, err);
}
static mr_status range_history(mr_key_range *r, mr_error *err) {
  return mr_key_range_subspace(MR_SS_HISTORY, r, err);
}
static mr_status range_fstat(mr_key_range *r, mr_error *err) {
  return mr_key_range_kind(MR_KK_FSTAT, false, r, err);
}
static mr_status range_tags(mr_key_range *r, mr_error *err) {
  return mr_key_range_kind(MR_KK_TAG, false, r, err);
}

/* Order matters only for fstat, which must see the history step's result. */
static const expire_step steps[EXPIRE_STEPS] = {
    {"snapshots", range_snapshots, decide_snapshot, offsetof(store_expire_progress, snapshots_dropped)},
    {"history", range_history, decide_history, offsetof(store_expire_progress, history_dropped)},
    {"fstat", range_fstat, decide_fstat, offsetof(store_expire_progress, fstat_dropped)},
    {"tags", range_tags, decide_tag, offsetof(store_expire_progress, tag_entries_dropped)},
};

mr_status store_expire(store *st, uint64_t horizon, const char *trigger, size_t batch_keys,
                       store_progress_fn progress, void *ctx, store_expire_progress *out, mr_error *err) {
  store_expire_progress local;
  if (out == NULL)
    out = &local;
  memset(out, 0, sizeof *out);
  if (st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "store_expire: the store is open read-only");
  store_head h = store_get_head(st);
  if (horizon > h.snapshot_id)
    return mr_fail(err, MR_ERR_INVALID, "store_expire: horizon %llu is past the head snapshot %llu",
                   (unsigned long long)horizon, (unsigned long long)h.snapshot_id);
  int64_t start = store_now_us();
  sweep sw = {.st = st, .horizon = horizon, .batch_keys = batch_keys ? batch_keys : 1000, .prog = out,
              .progress = progress, .pctx = ctx};
  store_maint_step rec[EXPIRE_STEPS];
  size_t nrec = 0;
  mr_status rc = kv_batch_new(&sw.b, err);
  for (size_t i = 0; !rc && i < EXPIRE_STEPS; i++) {
    const expire_step *s = &steps[i];
    uint64_t *counter = (uint64_t *)((char *)out + s->counter_off);
    uint64_t before = *counter;
    sw.counter = counter;
    mr_key_range r;
    rc = s->range(&r, err);
    if (!rc)
      rc = sweep_range(&sw, &r, s->decide, err);
    rec[nrec].name = s->name;
    rec[nrec].outcome = rc ? "failed" : out->stopped ? "stopped" : "done";
    snprintf(rec[nrec].detail, sizeof rec[nrec].detail, "%llu dropped below horizon %llu",
             (unsigned long long)(*counter - before), (unsigned long long)horizon);
    nrec++;
    if (out->stopped)
      break;
  }
  kv_batch_free(sw.b);
  if (rc) {
    mr_error_wrap(err, "store_expire");
    mr_error ignored;
    (void)record_pass(st, start, trigger ? trigger : "manual", rec, nrec, &ignored);
    return rc;
  }
  rc = record_pass(st, start, trigger ? trigger : "manual", rec, nrec, err);
  return rc ? mr_error_wrap(err, "store_expire: recording sys/maintenance_status") : MR_OK;
}
