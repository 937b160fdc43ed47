/*
 * catalog_history.c — history residency (catalog.h): what a lazy load
 * leaves in the store, and loading it when a statement may read it.
 *
 * Left out by a lazy load whose head snapshot is H0:
 *   - snapshot records below floor = H0 - snapshot_tail;
 *   - ended data file and delete file versions (history keys, all ended at
 *     or before H0). Versions ended later were current at the load, so the
 *     engine holds them already (their end came as an UPDATE); loading
 *     skips every history key whose end (its last key component) is past H0;
 *   - the column stats (fstat records, current keys that outlive their
 *     file's live version) of data files that ended at or before H0: they
 *     load, apart from the files, when a statement may read them;
 *   - inlined data rows that have ended (an INLINE_ROW value with an
 *     end_snapshot, at or before H0): a table's churn of inlined updates
 *     and deletes. They share the current rows' key range, so the load
 *     reads their keys and decodes them, but does not materialize them;
 *   - on a writer (lazy_current_inline), every inlined data row: the load
 *     seeks past them all. A table's rows current at H0 load when the
 *     first statement names one of its inlined-data tables, a write
 *     included (sql_history.h), so no row reaches such a table before the
 *     rows the store holds for it: a later load never puts one in twice.
 * Schemas, tables, views, macros, columns, partitions and sorts keep their
 * whole history resident: it grows with DDL, not with commits, and their
 * embedded child rows (column tags, partition columns, ...) have no
 * end_snapshot of their own that a statement's predicates could bound.
 *
 * Invariant: a row of the store is in the engine unless it is one of the
 * above and not yet recorded as loaded in c->hist. Loading holds hist_mu
 * (one load at a time, none while a reload swaps the tables in) and appends
 * through cat_loader inside one pre-load transaction.
 */
#include "catalog/catalog_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mr_key_kind FILE_KINDS[2] = {MR_KK_FILE, MR_KK_DELFILE};

/* A set of data file ids (unique across tables: DuckLake's next_file_id),
 * open addressing, 0 stored as 1 + id. */
typedef struct fileset {
  uint64_t *v;
  size_t n, cap; /* cap a power of two, at least 2n */
} fileset;

static bool fileset_has(const fileset *s, uint64_t id) {
  if (s->cap == 0)
    return false;
  for (size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (s->v[i] == 0)
      return false;
    if (s->v[i] == id + 1)
      return true;
  }
}

static mr_status fileset_add(fileset *s, uint64_t id, mr_error *err) {
  if (2 * (s->n + 1) > s->cap) {
    fileset g = {calloc(s->cap ? 2 * s->cap : 1024, sizeof(uint64_t)), 0,
                 s->cap ? 2 * s->cap : 1024};
    if (g.v == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog history: out of memory");
    for (size_t i = 0; i < s->cap; i++)
      if (s->v[i] && fileset_add(&g, s->v[i] - 1, err))
        return err->code; /* cannot fail: g has room */
    free(s->v);
    *s = g;
  }
  size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & (s->cap - 1);
  while (s->v[i] != 0 && s->v[i] != id + 1)
    i = (i + 1) & (s->cap - 1);
  if (s->v[i] == 0) {
    s->v[i] = id + 1;
    s->n++;
  }
  return MR_OK;
}

/* The current subspace, less the stats of files that are not current. In
 * key order every current file record (table_id, data_file_id) precedes
 * every fstat record (table_id, data_file_id, column_id), so the current
 * files arrive sorted and the stats scan walks them with one cursor,
 * seeking past the stats of ended files instead of reading them: the keys
 * read stay those of the current catalog however many files have ended. */
typedef struct file_ref {
  uint64_t table_id, file_id;
} file_ref;

typedef struct current_filter {
  store_visit_fn fn;
  void *ctx;
  file_ref *files; /* current data files, ascending */
  size_t n, cap, next;
  mr_keybuf stats_end; /* just past every fstat key */
} current_filter;

static bool file_ref_before(const file_ref *f, uint64_t table_id, uint64_t file_id) {
  return f->table_id < table_id || (f->table_id == table_id && f->file_id < file_id);
}

/* Runs on the scan's reader thread: the file list is pick's alone. */
static store_pick pick_current(void *ctx, const mr_key *k, mr_keybuf *seek, mr_error *err) {
  current_filter *cf = ctx;
  if (k->kind == MR_KK_FILE) {
    if (cf->n == cf->cap) {
      size_t cap = cf->cap ? 2 * cf->cap : 1024;
      file_ref *v = realloc(cf->files, cap * sizeof *v);
      if (v == NULL) {
        mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
        return STORE_PICK_FAIL;
      }
      cf->files = v;
      cf->cap = cap;
    }
    cf->files[cf->n++] = (file_ref){k->c[0], k->c[1]};
  }
  if (k->kind != MR_KK_FSTAT)
    return STORE_PICK_TAKE;
  while (cf->next < cf->n && file_ref_before(&cf->files[cf->next], k->c[0], k->c[1]))
    cf->next++;
  if (cf->next == cf->n) {
    *seek = cf->stats_end;
    return STORE_PICK_SEEK;
  }
  const file_ref *f = &cf->files[cf->next];
  if (f->table_id == k->c[0] && f->file_id == k->c[1])
    return STORE_PICK_TAKE;
  mr_key to = {.kind = MR_KK_FSTAT, .c = {f->table_id, f->file_id, 0}};
  mr_error e;
  return mr_key_encode(&to, seek, &e) == MR_OK ? STORE_PICK_SEEK : STORE_PICK_SKIP;
}

static mr_status visit_current(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                               mr_error *err) {
  const current_filter *cf = ctx;
  return cf->fn(cf->ctx, k, m, err);
}

mr_status cat_history_load_current(catalog *c, store_visit_fn fn, void *ctx, mr_error *err) {
  if (!c->lazy_history)
    return store_load_subspace(c->st, MR_SS_CURRENT, fn, ctx, err);
  current_filter cf = {.fn = fn, .ctx = ctx};
  mr_key_range all, stats;
  mr_status rc = mr_key_range_subspace(MR_SS_CURRENT, &all, err);
  if (rc == MR_OK)
    rc = mr_key_range_kind(MR_KK_FSTAT, false, &stats, err);
  if (rc == MR_OK) {
    cf.stats_end = stats.end;
    rc = store_scan_picked(c->st, &all, pick_current, visit_current, &cf, err);
  }
  free(cf.files);
  return rc;
}

typedef struct inline_filter {
  store_visit_fn fn;
  void *ctx;
} inline_filter;

static bool inline_row_ended(const ProtobufCMessage *m, uint64_t h0) {
  const Moraine__V1__InlineDataRow *r = (const Moraine__V1__InlineDataRow *)m;
  return r->has_end_snapshot && r->end_snapshot >= 0 && (uint64_t)r->end_snapshot <= h0;
}

static mr_status visit_inline(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                              mr_error *err) {
  inline_filter *fi = ctx;
  if (k->kind == MR_KK_INLINE_ROW && inline_row_ended(m, UINT64_MAX))
    return MR_OK; /* every end in the store is at or before the load's head */
  return fi->fn(fi->ctx, k, m, err);
}

/* Every inlined data row is left out: one seek past the kind's range. */
typedef struct no_inline_rows {
  store_visit_fn fn;
  void *ctx;
  mr_keybuf rows_end;
} no_inline_rows;

static store_pick pick_no_inline_rows(void *ctx, const mr_key *k, mr_keybuf *seek, mr_error *err) {
  const no_inline_rows *nr = ctx;
  if (k->kind != MR_KK_INLINE_ROW)
    return STORE_PICK_TAKE;
  *seek = nr->rows_end;
  return STORE_PICK_SEEK;
}

static mr_status visit_no_inline_rows(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                      mr_error *err) {
  const no_inline_rows *nr = ctx;
  return nr->fn(nr->ctx, k, m, err);
}

mr_status cat_history_load_inline(catalog *c, store_visit_fn fn, void *ctx, mr_error *err) {
  if (!c->lazy_history)
    return store_load_subspace(c->st, MR_SS_INLINE, fn, ctx, err);
  if (c->lazy_current_inline) {
    mr_key_range all, rows;
    mr_status rc = mr_key_range_subspace(MR_SS_INLINE, &all, err);
    if (rc == MR_OK)
      rc = mr_key_range_kind(MR_KK_INLINE_ROW, false, &rows, err);
    if (rc)
      return rc;
    no_inline_rows nr = {fn, ctx, rows.end};
    return store_scan_picked(c->st, &all, pick_no_inline_rows, visit_no_inline_rows, &nr, err);
  }
  inline_filter fi = {fn, ctx};
  return store_load_subspace(c->st, MR_SS_INLINE, visit_inline, &fi, err);
}

/* Most ids one class marks one by one. The ids come from statements, and
 * a client may name any number that exist nowhere; past this many the
 * class loads whole instead (what --load-history all does at start), so the
 * marks stay small and their linear checks cheap. */
#define CAT_HIST_MAX_MARKS 1024

static bool idset_has(const cat_idset *s, uint64_t id) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == id)
      return true;
  return false;
}

static mr_status idset_add(cat_idset *s, uint64_t id, mr_error *err) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    uint64_t *v = realloc(s->v, cap * sizeof *v);
    if (v == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog history: out of memory");
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = id;
  return MR_OK;
}

void cat_history_free(cat_history *h) {
  free(h->snap_points.v);
  for (int i = 0; i < CAT_HIST_NTABLE_CLASSES; i++)
    free(h->file_tables[i].v);
  memset(h, 0, sizeof *h);
}

void cat_history_reset(cat_history *h, bool lazy, uint64_t h0, uint64_t tail) {
  cat_history_free(h);
  h->lazy = lazy;
  h->h0 = h0;
  h->snap_floor = lazy && h0 > tail ? h0 - tail : 0;
}

void catalog_set_lazy_history(catalog *c, bool lazy, uint64_t snapshot_tail) {
  c->lazy_history = lazy;
  c->snapshot_tail = snapshot_tail;
}

void catalog_set_lazy_current_inline(catalog *c, bool lazy) {
  c->lazy_current_inline = lazy;
}

static bool lazy_kind(mr_key_kind k) {
  return k == MR_KK_FILE || k == MR_KK_DELFILE;
}

mr_status cat_history_load(catalog *c, store_visit_fn fn, void *ctx, mr_error *err) {
  bool lazy = c->lazy_history;
  uint64_t h0 = store_get_head(c->st).snapshot_id;
  cat_history_reset(&c->hist, lazy, h0, c->snapshot_tail);
  c->hist.inline_out = lazy && c->lazy_current_inline;
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(MR_SS_SNAPSHOT, &r, err);
  if (rc == MR_OK && c->hist.snap_floor > 0) {
    mr_key from = {.kind = MR_KK_SNAPSHOT, .c = {c->hist.snap_floor}};
    rc = mr_key_encode(&from, &r.start, err);
  }
  if (rc == MR_OK)
    rc = store_scan(c->st, &r, fn, ctx, err);
  if (rc == MR_OK && !lazy)
    return store_load_subspace(c->st, MR_SS_HISTORY, fn, ctx, err);
  for (unsigned k = 0; rc == MR_OK && k < MR_KK_COUNT; k++) {
    const mr_key_kind_info *ki = mr_key_kind_get((mr_key_kind)k);
    if (ki == NULL || !(ki->flags & MR_KF_VERSIONED) || lazy_kind((mr_key_kind)k))
      continue;
    rc = mr_key_range_kind((mr_key_kind)k, true, &r, err);
    if (rc == MR_OK)
      rc = store_scan(c->st, &r, fn, ctx, err);
  }
  return rc;
}

/* ---- loading on demand ----------------------------------------------------- */

typedef struct fault {
  catalog *c;
  cat_loader *ld;
  fileset ended; /* a stats load: the data files ended at or before H0 */
  const cat_idset *skip_tables; /* a whole-kind load: tables loaded before */
  const cat_idset *skip_snaps;  /* a whole snapshot load: points loaded before */
  size_t records;
} fault;

static mr_status visit_file(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                            mr_error *err) {
  fault *f = ctx;
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  if (k->c[ki->ncomp] > f->c->hist.h0) /* ended after the load: in the engine */
    return MR_OK;
  if (f->skip_tables && idset_has(f->skip_tables, k->c[0]))
    return MR_OK;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* Inlined rows that ended at or before H0 (later ones were current at the
 * load: the engine has them). */
static mr_status visit_ended_inline(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                    mr_error *err) {
  fault *f = ctx;
  if (!inline_row_ended(m, f->c->hist.h0) ||
      (f->skip_tables && idset_has(f->skip_tables, k->c[0])))
    return MR_OK;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* Inlined rows current at H0 (a table's first statement loads them before
 * any row is written to it, so the store's are all there is to load). */
static mr_status visit_current_inline(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                      mr_error *err) {
  fault *f = ctx;
  if (inline_row_ended(m, f->c->hist.h0) ||
      (f->skip_tables && idset_has(f->skip_tables, k->c[0])))
    return MR_OK;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* A stats load's first pass: which data files ended at or before H0. */
static mr_status visit_ended_id(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                mr_error *err) {
  (void)m;
  fault *f = ctx;
  if (k->c[2] > f->c->hist.h0 || (f->skip_tables && idset_has(f->skip_tables, k->c[0])))
    return MR_OK;
  return fileset_add(&f->ended, k->c[1], err);
}

static mr_status visit_stats(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                             mr_error *err) {
  fault *f = ctx;
  if (!fileset_has(&f->ended, k->c[1]))
    return MR_OK;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* The column stats of the data files that ended at or before H0 (those of
 * files current at the load, or made since, are in the engine): table tid's,
 * or (tid 0) every table's but f->skip_tables'. They load apart from the
 * files themselves: a scan of ducklake_data_file does not read them, and
 * they are most of the history's records (one per column per file). */
static mr_status load_stats(fault *f, uint64_t tid, mr_error *err) {
  mr_key_range r;
  mr_status rc = tid ? mr_key_range_table(MR_KK_FILE, true, tid, &r, err)
                     : mr_key_range_kind(MR_KK_FILE, true, &r, err);
  if (rc == MR_OK)
    rc = store_scan(f->c->st, &r, visit_ended_id, f, err);
  if (rc == MR_OK && f->ended.n > 0)
    rc = tid ? mr_key_range_table(MR_KK_FSTAT, false, tid, &r, err)
             : mr_key_range_kind(MR_KK_FSTAT, false, &r, err);
  if (rc == MR_OK && f->ended.n > 0)
    rc = store_scan(f->c->st, &r, visit_stats, f, err);
  free(f->ended.v);
  f->ended = (fileset){NULL, 0, 0};
  return rc;
}

/* Index of a class in cat_history's per-table marks: data files, delete
 * files, data files' column stats, ended inlined rows; CURRENT_INLINE, the
 * inlined rows current at H0, has no class of its own: every need of
 * SQL_HIST_INLINE_ROW names it too, whatever its bound. */
enum { CURRENT_INLINE = 4 };

static int file_class(sql_hist_class cls) {
  return cls == SQL_HIST_DELETE_FILE ? 1 : cls == SQL_HIST_FILE_STATS ? 2
                                       : cls == SQL_HIST_INLINE_ROW   ? 3
                                                                      : 0;
}

/* Loads one table's (tid 0: every table's but f->skip_tables') history of
 * file class i. */
static mr_status load_file_class(fault *f, int i, uint64_t tid, mr_error *err) {
  if (i == 2)
    return load_stats(f, tid, err);
  mr_key_range r;
  if (i == 3 || i == CURRENT_INLINE) {
    mr_status rc = tid ? mr_key_range_table(MR_KK_INLINE_ROW, false, tid, &r, err)
                       : mr_key_range_kind(MR_KK_INLINE_ROW, false, &r, err);
    return rc ? rc
              : store_scan(f->c->st, &r, i == 3 ? visit_ended_inline : visit_current_inline, f,
                           err);
  }
  mr_status rc = tid ? mr_key_range_table(FILE_KINDS[i], true, tid, &r, err)
                     : mr_key_range_kind(FILE_KINDS[i], true, &r, err);
  if (rc == MR_OK)
    rc = store_scan(f->c->st, &r, visit_file, f, err);
  return rc;
}

static mr_status visit_snapshot(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                mr_error *err) {
  fault *f = ctx;
  if (f->skip_snaps && idset_has(f->skip_snaps, k->c[0]))
    return MR_OK;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* Appends one item to a load's log line: " a, b, c". */
static void what_add(char *what, size_t wn, const char *fmt, ...) {
  size_t n = strlen(what);
  if (n + 2 >= wn)
    return; /* the line is full: the counts at its end still tell the size */
  if (n > 0) {
    memcpy(what + n, ",", 2);
    n++;
  }
  what[n++] = ' ';
  what[n] = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what + n, wn - n, fmt, ap);
  va_end(ap);
}

static mr_status visit_any_inline(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                  mr_error *err) {
  fault *f = ctx;
  f->records++;
  return cat_loader_visit(f->ld, k, m, err);
}

/* Every inlined row of table tid: its current and its ended ones. */
static mr_status load_inline_all(fault *f, uint64_t tid, mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_table(MR_KK_INLINE_ROW, false, tid, &r, err);
  return rc ? rc : store_scan(f->c->st, &r, visit_any_inline, f, err);
}

/* Snapshots: the points named, or every one below the floor. */
static mr_status load_snapshots(fault *f, const sql_hist_need *n, char *what, size_t wn,
                                mr_error *err) {
  cat_history *h = &f->c->hist;
  if (h->snap_all || n->bound >= (int64_t)h->snap_floor)
    return MR_OK;
  if (n->nids > 0 && h->snap_points.n + n->nids <= CAT_HIST_MAX_MARKS) {
    for (size_t i = 0; i < n->nids; i++) {
      uint64_t id = (uint64_t)n->ids[i];
      if (n->ids[i] < 0 || id >= h->snap_floor || idset_has(&h->snap_points, id))
        continue;
      mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {id}};
      ProtobufCMessage *m = NULL;
      mr_status rc = store_get(f->c->st, &k, &m, err);
      if (rc == MR_ERR_NOT_FOUND) {
        mr_error_clear(err);
      } else if (rc == MR_OK) {
        rc = visit_snapshot(f, &k, m, err);
        mr_value_free(m);
      }
      if (rc == MR_OK)
        rc = idset_add(&h->snap_points, id, err);
      if (rc)
        return rc;
      what_add(what, wn, "snapshot %llu", (unsigned long long)id);
    }
    return MR_OK;
  }
  mr_key_range r;
  mr_key to = {.kind = MR_KK_SNAPSHOT, .c = {h->snap_floor}};
  mr_status rc = mr_key_range_subspace(MR_SS_SNAPSHOT, &r, err);
  if (rc == MR_OK)
    rc = mr_key_encode(&to, &r.end, err);
  f->skip_snaps = &h->snap_points;
  if (rc == MR_OK)
    rc = store_scan(f->c->st, &r, visit_snapshot, f, err);
  f->skip_snaps = NULL;
  if (rc == MR_OK) {
    h->snap_all = true;
    what_add(what, wn, "snapshots below %llu",
             (unsigned long long)h->snap_floor);
  }
  return rc;
}

/* Whether marks i lack a table of need n (n->bound aside). */
static bool class_lacks(const cat_history *h, int i, const sql_hist_need *n) {
  if (h->files_all[i])
    return false;
  if (n->nids == 0)
    return true;
  for (size_t j = 0; j < n->nids; j++)
    if (n->ids[j] > 0 && !idset_has(&h->file_tables[i], (uint64_t)n->ids[j]))
      return true;
  return false;
}

/* Of the tables need n names, or of every table: ended file versions, their
 * stats, ended inlined rows (i = file_class: n's bound may spare them), or
 * (i = CURRENT_INLINE) the inlined rows current at H0. */
static mr_status load_files(fault *f, const sql_hist_need *n, int i, char *what, size_t wn,
                            mr_error *err) {
  cat_history *h = &f->c->hist;
  if (!class_lacks(h, i, n) || (i != CURRENT_INLINE && n->bound > (int64_t)h->h0))
    return MR_OK;
  const char *name = i == CURRENT_INLINE ? "current inlined rows" : sql_hist_class_name(n->cls);
  mr_status rc = MR_OK;
  bool by_table = h->file_tables[i].n + n->nids <= CAT_HIST_MAX_MARKS;
  for (size_t j = 0; by_table && j < n->nids; j++) {
    uint64_t tid = (uint64_t)n->ids[j];
    if (n->ids[j] <= 0 || idset_has(&h->file_tables[i], tid))
      continue;
    /* a table's first load, when the need also reaches its ended rows:
     * one scan of its range takes both (nothing of it has changed since
     * H0, so every row there is one or the other) */
    bool both = i == CURRENT_INLINE && n->bound <= (int64_t)h->h0 && !h->files_all[3] &&
                h->file_tables[3].n < CAT_HIST_MAX_MARKS && !idset_has(&h->file_tables[3], tid);
    rc = both ? load_inline_all(f, tid, err) : load_file_class(f, i, tid, err);
    if (rc == MR_OK)
      rc = idset_add(&h->file_tables[i], tid, err);
    if (rc == MR_OK && both)
      rc = idset_add(&h->file_tables[3], tid, err);
    if (rc)
      return rc;
    what_add(what, wn, "%s of table %llu", name,
             (unsigned long long)tid);
    if (both)
      what_add(what, wn, "%s of table %llu", sql_hist_class_name(n->cls),
               (unsigned long long)tid);
  }
  if (by_table && n->nids > 0)
    return MR_OK;
  f->skip_tables = &h->file_tables[i];
  rc = load_file_class(f, i, 0, err);
  f->skip_tables = NULL;
  if (rc == MR_OK) {
    h->files_all[i] = true;
    what_add(what, wn, "%s of every table", name);
  }
  return rc;
}

/* Whether need n asks for anything not resident yet. A statement whose
 * history is all in memory (the common case: every read after the first)
 * must not pay for the loader and its engine transaction. */
static bool need_loads(const cat_history *h, const sql_hist_need *n) {
  if (n->cls == SQL_HIST_SNAPSHOT) {
    if (h->snap_all || n->bound >= (int64_t)h->snap_floor)
      return false;
    if (n->nids == 0)
      return true;
    for (size_t i = 0; i < n->nids; i++)
      if (n->ids[i] >= 0 && (uint64_t)n->ids[i] < h->snap_floor &&
          !idset_has(&h->snap_points, (uint64_t)n->ids[i]))
        return true;
    return false;
  }
  if (n->cls == SQL_HIST_INLINE_ROW && h->inline_out && class_lacks(h, CURRENT_INLINE, n))
    return true;
  return n->bound <= (int64_t)h->h0 && class_lacks(h, file_class(n->cls), n);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

mr_status catalog_history_ensure(catalog *c, const sql_hist_needs *needs, bool *loaded,
                                 sql_error *err) {
  *loaded = false;
  pthread_mutex_lock(&c->hist_mu);
  if (!c->hist.lazy) {
    pthread_mutex_unlock(&c->hist_mu);
    return MR_OK;
  }
  struct timespec t0 = {0, 0};
  uint64_t keys0 = 0;
  mr_error me;
  mr_error_clear(&me);
  fault f = {c, NULL, {NULL, 0, 0}, NULL, NULL, 0};
  cat_history before = c->hist; /* flags and set sizes, to undo a failed load */
  char what[512] = "";
  bool began = false;
  mr_status rc = MR_OK;
  for (size_t i = 0; rc == MR_OK && i < needs->n; i++) {
    const sql_hist_need *n = &needs->v[i];
    if (!need_loads(&c->hist, n))
      continue;
    if (f.ld == NULL) { /* the first need that loads: open the loader */
      clock_gettime(CLOCK_MONOTONIC, &t0); /* only a load is timed and counted */
      keys0 = store_keys_read(c->st);
      if (sql_engine_admin_begin(c->e, err) != MR_OK) {
        pthread_mutex_unlock(&c->hist_mu);
        return err->base.code;
      }
      began = true;
      rc = cat_loader_new(c, &f.ld, &me);
      if (rc)
        break;
    }
    if (n->cls == SQL_HIST_SNAPSHOT) {
      rc = load_snapshots(&f, n, what, sizeof what, &me);
      continue;
    }
    if (n->cls == SQL_HIST_INLINE_ROW && c->hist.inline_out)
      rc = load_files(&f, n, CURRENT_INLINE, what, sizeof what, &me);
    if (rc == MR_OK)
      rc = load_files(&f, n, file_class(n->cls), what, sizeof what, &me);
  }
  size_t rows = 0;
  if (rc == MR_OK && f.ld)
    rc = cat_loader_finish(f.ld, &rows, &me);
  cat_loader_free(f.ld);
  free(f.ended.v);
  if (began) {
    sql_error se;
    if (sql_engine_admin_end(c->e, rc == MR_OK, &se) != MR_OK && rc == MR_OK)
      rc = mr_fail(&me, se.base.code, "%s", se.base.msg);
  }
  if (rc) {
    /* the engine rolled this call's rows back: so are its marks */
    cat_history *h = &c->hist;
    h->snap_all = before.snap_all;
    h->snap_points.n = before.snap_points.n;
    for (int i = 0; i < CAT_HIST_NTABLE_CLASSES; i++) {
      h->files_all[i] = before.files_all[i];
      h->file_tables[i].n = before.file_tables[i].n;
    }
    pthread_mutex_unlock(&c->hist_mu);
    fprintf(stderr, "moraine: loading catalog history failed: %s\n", me.msg);
    return sql_fail(err, rc, "58030", "loading catalog history: %s", me.msg);
  }
  pthread_mutex_unlock(&c->hist_mu);
  if (what[0]) {
    *loaded = rows > 0;
    fprintf(stderr, "moraine: loaded catalog history:%s (%zu records, %zu rows, %llu keys read, "
                    "%.1f ms)\n",
            what, f.records, rows, (unsigned long long)(store_keys_read(c->st) - keys0),
            ms_since(&t0));
  }
  return MR_OK;
}
