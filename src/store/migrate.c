/*
 * migrate.c — structural migration (RFC 0015 as RFC 0002 describes it):
 * brings a store of an older layout format up to STORE_FORMAT_LATEST.
 *
 * The formats: 9 and 10 have neither the name directory nor the
 * delete_target directory, 11 has the name directory, 12 both. A migration
 * is a chain of hops, each building one directory from the current records
 * that imply its entries (store_name_entry_of, store_delete_target_of — the
 * one definition commits and verify use too):
 *   9 or 10 -> 11   name entries of current schemas and tables;
 *   11 -> 12        delete_target entries of current delete files.
 *
 * Invariants:
 *  - every step is ONE head-bumping batch that writes the entries of at most
 *    step_records current records AND sets sys/migration {from, to, cursor}
 *    with cursor = the encoded current key of the last record done; entries
 *    of records at or before the cursor are in the store, none after it;
 *  - a hop's last step deletes the marker and puts sys/format with the
 *    hop's target format (every other field of sys/format kept, fields this
 *    build does not know included) in that same batch;
 * so a crash at any point leaves either the old format with no marker and
 * no entries, a marker whose cursor says where to go on, or the new format:
 * running the migration again resumes where it stopped. While the marker is
 * there (and while the format is old) store_open refuses the store.
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One hop of the chain. */
typedef struct hop {
  unsigned from, to;
  const char *what;      /* the directory it builds */
  mr_subspace directory; /* where the entries go */
  mr_key_kind kinds[2];  /* the current kinds implying them, key order */
  size_t nkinds;
} hop;

static const hop hops[] = {
    {9, 11, "name directory", MR_SS_NAME, {MR_KK_SCHEMA, MR_KK_TABLE}, 2},
    {10, 11, "name directory", MR_SS_NAME, {MR_KK_SCHEMA, MR_KK_TABLE}, 2},
    {11, 12, "delete_target directory", MR_SS_DELETE_TARGET, {MR_KK_DELFILE}, 1},
};

static const hop *hop_from(unsigned format) {
  for (size_t i = 0; i < sizeof hops / sizeof hops[0]; i++)
    if (hops[i].from == format)
      return &hops[i];
  return NULL;
}

/* A migration under way. */
typedef struct run {
  store *st;
  size_t step_records;
  store_migrate_fn progress;
  void *pctx;
  store_migrate_result *out;
  store_migrate_progress prog;
} run;

/* sys/format as stored (decoded; the caller frees it). */
static mr_status read_format(store *st, Moraine__V1__SysFormat **out, mr_error *err) {
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, &fk, &m, err);
  if (rc == MR_ERR_NOT_FOUND)
    return mr_fail(err, MR_ERR_INVALID, "the store has no sys/format; not a moraine store");
  if (rc)
    return mr_error_wrap(err, "reading sys/format");
  *out = (Moraine__V1__SysFormat *)m;
  return MR_OK;
}

/* sys/migration if present (*out NULL when absent; the caller frees it). */
static mr_status read_marker(store *st, Moraine__V1__SysMigration **out, mr_error *err) {
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  ProtobufCMessage *m = NULL;
  *out = NULL;
  mr_status rc = store_get_msg(st, &mk, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (rc)
    return mr_error_wrap(err, "reading sys/migration");
  *out = (Moraine__V1__SysMigration *)m;
  return MR_OK;
}

/* Fails unless subspace ss holds no key: a hop starting afresh must not
 * find entries of a directory its format does not have. */
static mr_status expect_empty(store *st, const hop *h, mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(h->directory, &r, err);
  if (rc)
    return rc;
  bool empty = false;
  rc = store_range_empty(st, r.start.b, r.start.len, r.end.b, r.end.len, &empty, err);
  if (rc || empty)
    return rc;
  return mr_fail(
      err, MR_ERR_INVALID,
      "sys/format is layout %u, yet the %s subspace already holds keys (layout %u has no %s); "
      "the store is not what its format says, refusing to migrate it",
      h->from, mr_subspace_text(h->directory), h->from, h->what);
}

/* Adds to b the put of sys/migration {h->from, h->to, cursor}. */
static mr_status put_marker(kv_batch *b, const hop *h, const mr_keybuf *cursor, mr_error *err) {
  Moraine__V1__SysMigration m = MORAINE__V1__SYS_MIGRATION__INIT;
  m.from_format = h->from;
  m.to_format = h->to;
  m.cursor.data = (uint8_t *)cursor->b;
  m.cursor.len = cursor->len;
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  mr_keybuf kb;
  mr_status rc = store_key_bytes(&mk, &kb, err);
  if (rc)
    return rc;
  uint8_t *val = NULL;
  size_t vlen = 0;
  rc = mr_value_encode(mk.kind, &m.base, &val, &vlen, err);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, vlen, err);
  free(val);
  return rc;
}

/* Adds to b the hop's end: the marker goes, sys/format says h->to. */
static mr_status put_finish(store *st, kv_batch *b, const hop *h, mr_error *err) {
  Moraine__V1__SysFormat *f = NULL;
  mr_status rc = read_format(st, &f, err);
  if (rc)
    return rc;
  /* only the layout changes: creator, creation time, a commit-log origin
   * and any field this build does not know are re-encoded as they are */
  f->layout_version = h->to;
  mr_key fk = {.kind = MR_KK_SYS_FORMAT}, mk = {.kind = MR_KK_SYS_MIGRATION};
  mr_keybuf kb;
  uint8_t *val = NULL;
  size_t vlen = 0;
  rc = store_key_bytes(&fk, &kb, err);
  if (!rc)
    rc = mr_value_encode(fk.kind, &f->base, &val, &vlen, err);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, vlen, err);
  free(val);
  mr_value_free(&f->base);
  if (!rc)
    rc = store_key_bytes(&mk, &kb, err);
  if (!rc)
    rc = kv_batch_delete(b, kb.b, kb.len, err);
  return rc;
}

/* Byte order of two encoded keys (the store's order). */
static int bytes_cmp(const mr_keybuf *a, const mr_keybuf *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->b, b->b, n);
  if (c)
    return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* Adds to b the directory entry current record (k, value bytes) implies. */
static mr_status add_entry(run *r, kv_batch *b, const mr_key *k, const void *vp, size_t vl,
                           mr_error *err) {
  ProtobufCMessage *m = NULL;
  mr_status rc = mr_value_decode(k, vp, vl, &m, err);
  if (rc)
    return rc;
  mr_key dk;
  bool has = false;
  store_name_entry_of(k, m, &dk, &has);
  if (!has)
    store_delete_target_of(k, m, &dk, &has);
  mr_keybuf kb;
  if (has) {
    rc = store_key_bytes(&dk, &kb, err);
    if (!rc)
      rc = kv_batch_put(b, kb.b, kb.len, NULL, 0, err);
    if (!rc) {
      r->prog.entries++;
      r->out->entries++;
    }
  }
  mr_value_free(m);
  return rc;
}

/*
 * Reads up to step_records current records of the hop's kinds after
 * *cursor (all of them when cursor->len is 0), adding their entries to b;
 * *cursor becomes the last key read, *done tells whether none is left.
 */
static mr_status fill_step(run *r, const hop *h, kv_batch *b, mr_keybuf *cursor, bool *done,
                           mr_error *err) {
  size_t taken = 0;
  *done = false;
  for (size_t i = 0; i < h->nkinds; i++) {
    mr_key_range kr;
    mr_status rc = mr_key_range_kind(h->kinds[i], false, &kr, err);
    if (rc)
      return rc;
    mr_keybuf start = kr.start;
    if (cursor->len > 0) {
      if (cursor->len + 1 > sizeof start.b)
        return mr_fail(err, MR_ERR_CORRUPTION, "sys/migration cursor too long (%zu bytes)",
                       cursor->len);
      /* the least key after the cursor: the cursor with a 0x00 appended */
      mr_keybuf after = *cursor;
      after.b[after.len++] = 0;
      if (bytes_cmp(&after, &kr.end) >= 0)
        continue; /* this kind was done */
      if (bytes_cmp(&after, &kr.start) > 0)
        start = after;
    }
    kv_iter *it = NULL;
    rc = kv_iter_open(r->st->db, start.b, start.len, kr.end.b, kr.end.len, &it, err);
    if (rc)
      return rc;
    for (;;) {
      if (taken == r->step_records) {
        kv_iter_close(it);
        return MR_OK; /* more may follow: the next step looks */
      }
      const void *kp, *vp;
      size_t kl, vl;
      rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err);
      if (rc == MR_ERR_NOT_FOUND) {
        mr_error_clear(err);
        break;
      }
      mr_key k;
      if (!rc)
        rc = mr_key_decode(kp, kl, &k, err);
      if (!rc)
        rc = add_entry(r, b, &k, vp, vl, err);
      if (rc) {
        kv_iter_close(it);
        return mr_error_wrap(err, "building the %s", h->what);
      }
      memcpy(cursor->b, kp, kl);
      cursor->len = kl;
      taken++;
      r->prog.records++;
    }
    kv_iter_close(it);
  }
  *done = true;
  return MR_OK;
}

/* Runs hop h from cursor (empty: from the start) to its end. */
static mr_status run_hop(run *r, const hop *h, mr_keybuf cursor, mr_error *err) {
  r->prog.from_format = h->from;
  r->prog.to_format = h->to;
  r->prog.what = h->what;
  r->prog.records = 0;
  r->prog.entries = 0;
  r->prog.hop_done = false;
  for (;;) {
    kv_batch *b = NULL;
    mr_status rc = kv_batch_new(&b, err);
    if (rc)
      return rc;
    bool done = false;
    rc = fill_step(r, h, b, &cursor, &done, err);
    if (!rc)
      rc = done ? put_finish(r->st, b, h, err) : put_marker(b, h, &cursor, err);
    if (!rc)
      rc = store_write_batch(r->st, b, NULL, UINT64_MAX, NULL, err);
    kv_batch_free(b);
    if (rc)
      return mr_error_wrap(err, "migrating layout %u to %u", h->from, h->to);
    r->out->steps++;
    r->prog.steps = r->out->steps;
    r->prog.hop_done = done;
    if (done)
      r->out->format_after = h->to;
    if (r->progress && !r->progress(r->pctx, &r->prog) && !done) {
      r->out->stopped = true;
      return MR_OK;
    }
    if (done)
      return MR_OK;
  }
}

mr_status store_migrate(store *st, size_t step_records, store_migrate_fn progress, void *ctx,
                        store_migrate_result *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  if (st->read_only)
    return mr_fail(err, MR_ERR_INVALID, "store_migrate: the store is open read-only");
  run r = {.st = st,
           .step_records = step_records ? step_records : 1000,
           .progress = progress,
           .pctx = ctx,
           .out = out};
  Moraine__V1__SysFormat *f = NULL;
  mr_status rc = read_format(st, &f, err);
  if (rc)
    return rc;
  unsigned format = f->layout_version;
  mr_value_free(&f->base);
  out->format_before = out->format_after = format;
  if (format > STORE_FORMAT_LATEST)
    return mr_fail(err, MR_ERR_INVALID,
                   "sys/format is layout %u, newer than this build (it migrates %d..%d to %d); "
                   "upgrade moraine",
                   format, STORE_FORMAT_MIGRATE_OLDEST, STORE_FORMAT_LATEST - 1,
                   STORE_FORMAT_LATEST);
  Moraine__V1__SysMigration *mg = NULL;
  rc = read_marker(st, &mg, err);
  if (rc)
    return rc;
  mr_keybuf cursor = {0};
  if (mg) {
    const hop *h = hop_from(format);
    bool ok = h && mg->from_format == format && mg->to_format == h->to &&
              mg->cursor.len <= sizeof cursor.b;
    unsigned mf = mg->from_format, mt = mg->to_format;
    if (ok) {
      memcpy(cursor.b, mg->cursor.data, mg->cursor.len);
      cursor.len = mg->cursor.len;
    }
    mr_value_free(&mg->base);
    if (!ok)
      return mr_fail(err, MR_ERR_CORRUPTION,
                     "sys/migration says layout %u -> %u but sys/format is layout %u; "
                     "this build cannot finish that migration",
                     mf, mt, format);
    out->resumed = true;
  }
  if (format == STORE_FORMAT_LATEST)
    return MR_OK; /* nothing to do */
  if (format < STORE_FORMAT_MIGRATE_OLDEST || hop_from(format) == NULL)
    return mr_fail(err, MR_ERR_INVALID,
                   "sys/format is layout %u; this build migrates layouts %d..%d only", format,
                   STORE_FORMAT_MIGRATE_OLDEST, STORE_FORMAT_LATEST - 1);
  while (format < STORE_FORMAT_LATEST && !out->stopped) {
    const hop *h = hop_from(format);
    if (h == NULL)
      return mr_fail(err, MR_ERR_INVALID, "no migration from layout %u", format);
    if (!out->resumed || format != out->format_before) {
      /* a hop starting afresh: its directory must not be there yet */
      cursor.len = 0;
      rc = expect_empty(st, h, err);
      if (rc)
        return rc;
    }
    rc = run_hop(&r, h, cursor, err);
    if (rc)
      return rc;
    format = out->format_after;
  }
  mr_error_clear(err);
  return MR_OK;
}
