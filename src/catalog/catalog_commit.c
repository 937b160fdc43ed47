/*
 * catalog_commit.c — the prepare hook: one DuckDB transaction's captured
 * changes become exactly one store commit.
 *
 * The batches are replayed in execution order into a set of pending record
 * operations (put / end / delete), keyed by store key: a row of a versioned
 * table is a put (INSERT) or an end (UPDATE ... end_snapshot); a child row
 * merges into its parent record, read from this commit's pending set or from
 * the store; stats, options, tags, gc files, schema versions and inline rows
 * are overwritten or deleted in place. Child rows are replayed after every
 * other row of the commit (DuckLake may send a column's tag before the
 * column), so a child finds a parent created anywhere in the commit; one
 * whose parent exists nowhere refuses the commit (23503). The pending set is
 * then written as
 * one store_commit conditioned on the head (sql_changes.begin_seq must equal
 * commit_seq: nothing else committed since the transaction began).
 */
#include "catalog/catalog_internal.h"
#include "sql/sql_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* OP_FORGET: a record removed outright with no history (DuckLake's expiry and
 * compaction): a snapshot, a history version, or a current version (msg =
 * that version, for its directory entries). */
typedef enum pend_op { OP_PUT, OP_END, OP_DEL, OP_FORGET } pend_op;

typedef struct pend {
  mr_key k;
  pend_op op;
  ProtobufCMessage *msg; /* owned; NULL for OP_DEL */
  bool dead;             /* dropped later in the commit */
  /* An INSERT's put (add_insert): finish checks that its key is new. Not
   * when it follows a removal of the same key in this commit. */
  bool inserted, after_removal;
  const char *table; /* the DuckLake table it came from, for the error */
} pend;

typedef struct inline_layout {
  char *name;
  cat_ddl_col *cols;
  size_t ncols;
} inline_layout;

typedef struct inline_ref {
  int64_t table_id, schema_version;
} inline_ref;

typedef struct txn {
  catalog *c;
  pend *p;
  size_t n, cap;
  /* slot (key, put-or-end) -> 1 + index of its newest op in p; open
   * addressing, icap a power of two at least twice n. Each slot holds at most
   * one live op, the newest (add kills the older), so a lookup is one probe
   * sequence instead of a walk over every op of the commit. */
  size_t *idx;
  size_t icap;
  uint64_t *seen; /* targets as an open-addressed set (0 = empty, file + 1) */
  size_t seencap;
  ProtobufCMessage *snap; /* Moraine__V1__Snapshot */
  inline_layout *lay;
  size_t nlay;
  uint64_t *targets; /* data files targeted by delete files / inline deletes */
  size_t ntargets, targetcap;
  bool untargeted;
  /* inlined data tables (table_id, schema_version) this commit drops, and
   * whose ducklake_inlined_data_tables row it deletes: the two go together
   * (the store keeps one record for both) */
  inline_ref *dropped, *unlisted;
  size_t ndropped, nunlisted;
  const char *sqlstate; /* set by a failure that is the client's, not ours */
  mr_error *err;
} txn;

static bool versioned(mr_key_kind k) {
  const mr_key_kind_info *ki = mr_key_kind_get(k);
  return ki && (ki->flags & MR_KF_VERSIONED);
}

/* k's slot: versioned kinds have a put and an end slot, every other kind a
 * single slot (the last op wins). */
static bool end_slot(const mr_key *k, pend_op op) {
  return op == OP_END && versioned(k->kind);
}

static bool same_slot(const pend *p, const mr_key *k, pend_op op) {
  return end_slot(&p->k, p->op) == end_slot(k, op) && mr_key_compare(&p->k, k) == 0;
}

/* The index position of (k, op)'s slot: where it is, or the empty one to
 * take. */
static size_t idx_probe(const txn *t, const mr_key *k, pend_op op) {
  size_t mask = t->icap - 1;
  size_t i = (size_t)(mr_key_hash(k) ^ (end_slot(k, op) ? 0x9e3779b97f4a7c15ULL : 0)) & mask;
  while (t->idx[i] != 0 && !same_slot(&t->p[t->idx[i] - 1], k, op))
    i = (i + 1) & mask;
  return i;
}

/* Grows the index to hold n ops, re-inserting in order so the newest op of
 * each slot wins. */
static mr_status idx_reserve(txn *t, size_t n) {
  if (2 * n <= t->icap)
    return MR_OK;
  size_t cap = t->icap ? t->icap : 64;
  while (cap < 2 * n)
    cap *= 2;
  size_t *ni = calloc(cap, sizeof *ni);
  if (ni == NULL)
    return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  free(t->idx);
  t->idx = ni;
  t->icap = cap;
  for (size_t j = 0; j < t->n; j++)
    t->idx[idx_probe(t, &t->p[j].k, t->p[j].op)] = j + 1;
  return MR_OK;
}

/* The live pending op of key k in k's slot, or NULL. */
static pend *find(txn *t, const mr_key *k, pend_op op) {
  if (t->icap == 0)
    return NULL;
  size_t i = t->idx[idx_probe(t, k, op)];
  return i == 0 || t->p[i - 1].dead ? NULL : &t->p[i - 1];
}

static void pend_kill(pend *p) {
  mr_value_free(p->msg);
  p->msg = NULL;
  p->dead = true;
}

/* Adds (or replaces in its slot) an op; msg ownership moves in. */
static mr_status add(txn *t, const mr_key *k, pend_op op, ProtobufCMessage *msg) {
  pend *old = find(t, k, op);
  if (old)
    pend_kill(old);
  if (t->n == t->cap) {
    size_t nc = t->cap ? 2 * t->cap : 32;
    pend *np = realloc(t->p, nc * sizeof *np);
    if (np == NULL) {
      mr_value_free(msg);
      return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
    }
    t->p = np;
    t->cap = nc;
  }
  if (idx_reserve(t, t->n + 1)) {
    mr_value_free(msg);
    return MR_ERR_NOMEM;
  }
  t->p[t->n] = (pend){.k = *k, .op = op, .msg = msg};
  t->idx[idx_probe(t, k, op)] = ++t->n;
  return MR_OK;
}

/* k's components as "table_id 3, column_id 7", for an error message. */
static void key_ids(const mr_key *k, char *out, size_t cap) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  size_t n = 0;
  out[0] = '\0';
  for (unsigned i = 0; ki && i < ki->ncomp && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%s %lld", i ? ", " : "", ki->comp[i],
                          (long long)k->c[i]);
}

/* Does the store hold k (before this commit)? */
static mr_status stored(txn *t, const mr_key *k, bool *found) {
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(t->c->st, k, &m, t->err);
  *found = rc == MR_OK;
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(t->err);
    rc = MR_OK;
  }
  mr_value_free(m);
  return rc;
}

/* A second row for a stored key: the engine would keep both rows, the
 * store one, so the commit is refused as a unique violation. */
static mr_status duplicate_key(txn *t, const char *table, const mr_key *k) {
  char ids[160];
  key_ids(k, ids, sizeof ids);
  t->sqlstate = SQLSTATE_UNIQUE_VIOLATION;
  return mr_fail(t->err, MR_ERR_INVALID,
                 "duplicate key: %s already has a row with %s; moraine's store keeps one row per "
                 "key",
                 table, ids);
}

/* An INSERT's put of k (msg ownership moves in). A put of k earlier in
 * this commit makes it a duplicate at once; one in the store is checked at
 * finish, once every removal of the commit is known. */
static mr_status add_insert(txn *t, const mr_key *k, const char *table, ProtobufCMessage *msg) {
  pend *old = find(t, k, OP_PUT);
  if (old && old->op == OP_PUT) {
    mr_value_free(msg);
    return duplicate_key(t, table, k);
  }
  bool after_removal = old && (old->op == OP_DEL || old->op == OP_FORGET);
  mr_status rc = add(t, k, OP_PUT, msg);
  if (rc == MR_OK) {
    pend *p = &t->p[t->n - 1];
    p->inserted = true;
    p->after_removal = after_removal;
    p->table = table;
  }
  return rc;
}

/* Every INSERT's key is new to the store, unless this commit removes or
 * ends what the store holds there. */
static mr_status check_inserted_keys(txn *t) {
  for (size_t i = 0; i < t->n; i++) {
    pend *p = &t->p[i];
    if (p->dead || p->op != OP_PUT || !p->inserted || p->after_removal)
      continue;
    if (versioned(p->k.kind) && find(t, &p->k, OP_END) != NULL)
      continue; /* the stored version ends in this commit: this one follows it */
    bool found;
    mr_status rc = stored(t, &p->k, &found);
    if (rc || found)
      return rc ? rc : duplicate_key(t, p->table, &p->k);
  }
  return MR_OK;
}

static mr_status note_inline(txn *t, inline_ref **arr, size_t *n, int64_t tid, int64_t ver) {
  inline_ref *na = realloc(*arr, (*n + 1) * sizeof *na);
  if (na == NULL)
    return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  na[(*n)++] = (inline_ref){tid, ver};
  *arr = na;
  return MR_OK;
}

static bool has_inline(const inline_ref *arr, size_t n, int64_t tid, int64_t ver) {
  for (size_t i = 0; i < n; i++)
    if (arr[i].table_id == tid && arr[i].schema_version == ver)
      return true;
  return false;
}

/* Does inlined data table (tid, ver) hold a row after this commit? */
typedef struct rows_left_ctx {
  txn *t;
  uint64_t tid, ver;
  bool any;
} rows_left_ctx;

static mr_status row_left(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  rows_left_ctx *r = ctx;
  if (r->any || k->kind != MR_KK_INLINE_ROW || k->c[0] != r->tid || k->c[1] != r->ver)
    return MR_OK;
  pend *p = find(r->t, k, OP_PUT);
  r->any = !(p && (p->op == OP_DEL || p->op == OP_FORGET)); /* unless removed now */
  return MR_OK;
}

static mr_status inline_rows_left(txn *t, const inline_ref *d, bool *any) {
  rows_left_ctx r = {t, (uint64_t)d->table_id, (uint64_t)d->schema_version, false};
  for (size_t i = 0; !r.any && i < t->n; i++) {
    const pend *p = &t->p[i];
    r.any = !p->dead && p->op == OP_PUT && p->k.kind == MR_KK_INLINE_ROW && p->k.c[0] == r.tid &&
            p->k.c[1] == r.ver;
  }
  mr_status rc = r.any ? MR_OK : store_load_subspace(t->c->st, MR_SS_INLINE, row_left, &r, t->err);
  *any = r.any;
  return rc;
}

/*
 * The store keeps one record for an inlined data table and its
 * ducklake_inlined_data_tables row, so the two must not part in a way a
 * restart would show. DuckLake deletes the row of a table once it is
 * empty, with a DROP TABLE IF EXISTS that the postgres extension may not
 * even send: a deleted row is refused only while its table still holds
 * rows (the store would keep rows without their table). A DROP of a
 * listed table needs its row deleted in the same commit (the engine would
 * keep listing a table the store forgot).
 */
static mr_status check_inline_drops(txn *t) {
  for (size_t i = 0; i < t->nunlisted; i++) {
    const inline_ref *u = &t->unlisted[i];
    if (has_inline(t->dropped, t->ndropped, u->table_id, u->schema_version))
      continue; /* the DROP removes its rows */
    bool any;
    mr_status rc = inline_rows_left(t, u, &any);
    if (rc)
      return rc;
    if (any) {
      t->sqlstate = SQLSTATE_FEATURE_NOT_SUPPORTED;
      return mr_fail(t->err, MR_ERR_INVALID,
                     "ducklake_inlined_data_tables: the row of ducklake_inlined_data_%lld_%lld "
                     "may only be deleted once that table is empty or dropped",
                     (long long)u->table_id, (long long)u->schema_version);
    }
  }
  for (size_t i = 0; i < t->ndropped; i++) {
    const inline_ref *d = &t->dropped[i];
    if (has_inline(t->unlisted, t->nunlisted, d->table_id, d->schema_version))
      continue;
    mr_key k = {.kind = MR_KK_INLINE_TABLE,
                .c = {(uint64_t)d->table_id, (uint64_t)d->schema_version}};
    bool found;
    mr_status rc = stored(t, &k, &found);
    if (rc)
      return rc;
    if (!found) /* never listed: nothing to keep apart */
      continue;
    t->sqlstate = SQLSTATE_FEATURE_NOT_SUPPORTED;
    return mr_fail(t->err, MR_ERR_INVALID,
                   "DROP TABLE ducklake_inlined_data_%lld_%lld needs its "
                   "ducklake_inlined_data_tables row deleted in the same transaction",
                   (long long)d->table_id, (long long)d->schema_version);
  }
  return MR_OK;
}

/* Adds a data file to the snapshot's targets once, keeping first-seen
 * order. */
static mr_status add_target(txn *t, uint64_t file) {
  if (2 * (t->ntargets + 1) > t->seencap) {
    size_t cap = t->seencap ? 2 * t->seencap : 64;
    uint64_t *ns = calloc(cap, sizeof *ns);
    if (ns == NULL)
      return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
    for (size_t i = 0; i < t->ntargets; i++) {
      size_t h = (size_t)(t->targets[i] * 0x9e3779b97f4a7c15ULL) & (cap - 1);
      while (ns[h] != 0)
        h = (h + 1) & (cap - 1);
      ns[h] = t->targets[i] + 1;
    }
    free(t->seen);
    t->seen = ns;
    t->seencap = cap;
  }
  size_t h = (size_t)(file * 0x9e3779b97f4a7c15ULL) & (t->seencap - 1);
  for (; t->seen[h] != 0; h = (h + 1) & (t->seencap - 1))
    if (t->seen[h] == file + 1)
      return MR_OK;
  if (t->ntargets == t->targetcap) {
    size_t cap = t->targetcap ? 2 * t->targetcap : 16;
    uint64_t *nt = realloc(t->targets, cap * sizeof *nt);
    if (nt == NULL)
      return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
    t->targets = nt;
    t->targetcap = cap;
  }
  t->seen[h] = file + 1;
  t->targets[t->ntargets++] = file;
  return MR_OK;
}

/* ---- rows ------------------------------------------------------------------- */

static const sql_value *cell(const sql_change_batch *b, size_t row, const char *col) {
  for (size_t i = 0; i < b->ncols; i++)
    if (strcmp(b->col_names[i], col) == 0)
      return &b->values[row * b->ncols + i];
  return NULL;
}

static bool cell_i64(const sql_change_batch *b, size_t row, const char *col, int64_t *v) {
  const sql_value *c = cell(b, row, col);
  if (c == NULL || c->is_null)
    return false;
  char *end;
  long long x = strtoll(c->data, &end, 10);
  if (end == c->data || *end)
    return false;
  *v = x;
  return true;
}

/* Sets every mapped column of table tb present in the batch into msg. */
static mr_status fill(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row,
                      ProtobufCMessage *msg) {
  for (size_t i = 0; i < tb->ncols; i++) {
    const catalog_column *col = &tb->cols[i];
    if (col->field == NULL)
      continue;
    const sql_value *v = cell(b, row, col->name);
    if (v == NULL)
      continue;
    mr_status rc = catalog_set_field(msg, col->field, col->type, v, t->err);
    if (rc)
      return mr_error_wrap(t->err, "%s", tb->name);
  }
  return MR_OK;
}

static mr_status row_msg(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row,
                         ProtobufCMessage **out) {
  *out = cat_msg_new(tb->msg);
  if (*out == NULL)
    return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  mr_status rc = fill(t, tb, b, row, *out);
  if (rc) {
    mr_value_free(*out);
    *out = NULL;
  }
  return rc;
}

/* The record under k as this commit sees it: a pending put, else the store's
 * (copied into a new pending put). NOT_FOUND when neither has it. */
static mr_status current_msg(txn *t, const mr_key *k, ProtobufCMessage **out) {
  pend *p = find(t, k, OP_PUT);
  if (p && p->op == OP_PUT) {
    *out = p->msg;
    return MR_OK;
  }
  if (p && (p->op == OP_DEL || p->op == OP_FORGET)) /* removed by this commit */
    return mr_fail(t->err, MR_ERR_NOT_FOUND, "catalog: the record is removed by this commit");
  pend *e = p == NULL && versioned(k->kind) ? find(t, k, OP_END) : NULL;
  if (e) { /* ended by this commit, no successor: its children change with it */
    *out = e->msg;
    return MR_OK;
  }
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(t->c->st, k, &m, t->err);
  if (rc)
    return rc;
  rc = add(t, k, OP_PUT, m);
  if (rc)
    return rc;
  *out = m;
  return MR_OK;
}

static mr_status unsupported(txn *t, const char *what, const char *table) {
  return mr_fail(t->err, MR_ERR_INVALID, "moraine: %s on %s is not supported by the catalog store",
                 what, table);
}

/* ---- roles -------------------------------------------------------------------- */

static mr_status do_entity(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row) {
  ProtobufCMessage *r;
  mr_status rc = row_msg(t, tb, b, row, &r);
  if (rc)
    return rc;
  mr_key k;
  if (!cat_key_from_msg(tb->kind, r, &k)) {
    mr_value_free(r);
    return mr_fail(t->err, MR_ERR_INVALID, "catalog: %s row without its key columns", tb->name);
  }
  if (b->op == SQL_CHANGE_INSERT)
    return add_insert(t, &k, tb->name, r);
  int64_t begin = 0, end = 0, pbegin = -1;
  cat_msg_i64(r, "begin_snapshot", &begin);
  bool ended = cat_msg_i64(r, "end_snapshot", &end);
  pend *put = find(t, &k, OP_PUT);
  if (put && put->op == OP_PUT)
    cat_msg_i64(put->msg, "begin_snapshot", &pbegin);
  else
    put = NULL;
  if (b->op == SQL_CHANGE_DELETE) {
    /*
     * DuckLake's expiry / compaction removes a version outright: one put by
     * this commit is dropped; one ended by this commit (its end still
     * pending) or never ended is the current key; one ended earlier is its
     * history key (c[ncomp] = end_snapshot).
     */
    if (put && pbegin == begin) {
      mr_value_free(r);
      pend_kill(put);
      return MR_OK;
    }
    pend *endp = find(t, &k, OP_END);
    int64_t ebegin = -1;
    if (endp && endp->op == OP_END && cat_msg_i64(endp->msg, "begin_snapshot", &ebegin) &&
        ebegin == begin) {
      pend_kill(endp);
      ended = false;
    }
    if (ended) {
      mr_value_free(r);
      mr_key hk = k;
      hk.history = true;
      hk.c[mr_key_kind_get(k.kind)->ncomp] = (uint64_t)end;
      return add(t, &hk, OP_FORGET, NULL);
    }
    return add(t, &k, OP_FORGET, r);
  }
  /* UPDATE: the row as updated, over the record it updates (children kept). */
  ProtobufCMessage *base = NULL;
  if (put && pbegin == begin) {
    base = cat_msg_copy(put->msg);
  } else {
    rc = store_get(t->c->st, &k, &base, t->err);
    if (rc == MR_ERR_NOT_FOUND) {
      mr_error_clear(t->err);
      base = NULL;
    } else if (rc) {
      mr_value_free(r);
      return rc;
    }
  }
  if (base) {
    rc = fill(t, tb, b, row, base);
    mr_value_free(r);
    if (rc) {
      mr_value_free(base);
      return rc;
    }
    r = base;
  }
  if (!ended)
    return add(t, &k, OP_PUT, r);
  if (put && pbegin == begin)
    pend_kill(put); /* created and ended by this commit */
  if (end == begin) {
    mr_value_free(r); /* never visible at any snapshot */
    return MR_OK;
  }
  return add(t, &k, OP_END, r);
}

static mr_status parent_key(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row,
                            mr_key *k) {
  const mr_key_kind_info *ki = mr_key_kind_get(tb->kind);
  memset(k, 0, sizeof *k);
  k->kind = tb->kind;
  if (tb->kind == MR_KK_MAPPING) {
    /* name_mapping rows carry mapping_id only: the mapping is in this commit */
    int64_t mid;
    if (!cell_i64(b, row, "mapping_id", &mid))
      return mr_fail(t->err, MR_ERR_INVALID, "catalog: %s row without mapping_id", tb->name);
    for (size_t i = t->n; i-- > 0;) {
      pend *p = &t->p[i];
      int64_t v;
      if (!p->dead && p->k.kind == MR_KK_MAPPING && p->op == OP_PUT &&
          cat_msg_i64(p->msg, "mapping_id", &v) && v == mid) {
        *k = p->k;
        return MR_OK;
      }
    }
    return mr_fail(t->err, MR_ERR_INVALID,
                   "catalog: name mapping rows for mapping %lld outside the commit creating it",
                   (long long)mid);
  }
  for (unsigned i = 0; i < ki->ncomp; i++) {
    int64_t v;
    if (!cell_i64(b, row, ki->comp[i], &v))
      return mr_fail(t->err, MR_ERR_INVALID, "catalog: %s row without %s", tb->name, ki->comp[i]);
    k->c[i] = (uint64_t)v;
  }
  return MR_OK;
}

/* Option rows: scope NULL/'schema'/'table' -> scope_kind 0/1/2. */
static mr_status option_key(txn *t, const sql_change_batch *b, size_t row, mr_key *k) {
  memset(k, 0, sizeof *k);
  k->kind = MR_KK_OPTION;
  const sql_value *sc = cell(b, row, "scope");
  int64_t sid = 0;
  if (sc == NULL || sc->is_null) {
    k->c[0] = MR_SCOPE_GLOBAL;
  } else if (strcmp(sc->data, "schema") == 0) {
    k->c[0] = MR_SCOPE_SCHEMA;
  } else if (strcmp(sc->data, "table") == 0) {
    k->c[0] = MR_SCOPE_TABLE;
  } else {
    return mr_fail(t->err, MR_ERR_INVALID, "catalog: ducklake_metadata scope '%s' is unknown",
                   sc->data);
  }
  if (k->c[0] != MR_SCOPE_GLOBAL)
    cell_i64(b, row, "scope_id", &sid);
  k->c[1] = (uint64_t)sid;
  return MR_OK;
}

/* Refuses a child row whose parent record is neither stored nor created by
 * this commit: the store has nowhere to keep it, and dropping it silently
 * would lose what the client wrote. */
static mr_status missing_parent(txn *t, const catalog_table *tb, const mr_key *k) {
  char ids[160];
  key_ids(k, ids, sizeof ids);
  t->sqlstate = SQLSTATE_FOREIGN_KEY_VIOLATION;
  return mr_fail(t->err, MR_ERR_INVALID,
                 "%s row refers to %s (%s), which neither exists nor is created by this commit",
                 tb->name, catalog_parent_table(k->kind), ids);
}

/* Children, tag entries and option entries: merge into the container. */
static mr_status do_child(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row) {
  mr_key k;
  mr_status rc = tb->role == CAT_OPTION ? option_key(t, b, row, &k) : parent_key(t, tb, b, row, &k);
  if (rc)
    return rc;
  ProtobufCMessage *parent = NULL;
  rc = current_msg(t, &k, &parent);
  if (rc == MR_ERR_NOT_FOUND && b->op == SQL_CHANGE_DELETE) {
    mr_error_clear(t->err); /* the parent is gone (expired) or goes in this commit */
    return MR_OK;
  }
  if (rc == MR_ERR_NOT_FOUND && (tb->role == CAT_TAG || tb->role == CAT_OPTION)) {
    mr_error_clear(t->err);
    parent = cat_msg_new(mr_value_descriptor(k.kind));
    if (parent == NULL)
      return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
    const mr_key_kind_info *ki = mr_key_kind_get(k.kind);
    for (unsigned i = 0; i < ki->ncomp; i++)
      cat_msg_set_i64(parent, ki->comp[i], (int64_t)k.c[i]);
    rc = add(t, &k, OP_PUT, parent);
  } else if (rc == MR_ERR_NOT_FOUND) {
    return missing_parent(t, tb, &k);
  }
  if (rc)
    return rc;
  ProtobufCMessage *child;
  rc = row_msg(t, tb, b, row, &child);
  if (rc)
    return rc;
  ProtobufCMessage **arr;
  size_t n = cat_msg_nrep(parent, tb->field, &arr);
  /* the entry this row replaces or removes */
  const char *skip = tb->role == CAT_OPTION       ? "value"
                     : b->op == SQL_CHANGE_UPDATE ? "end_snapshot"
                                                  : NULL;
  bool replace = b->op != SQL_CHANGE_INSERT || tb->role == CAT_OPTION;
  if (replace) {
    for (size_t i = 0; i < n; i++) {
      if (cat_msg_same(arr[i], child, skip)) {
        if (tb->role == CAT_OPTION && b->op == SQL_CHANGE_INSERT) {
          /* the engine would hold both rows, the store one */
          const sql_value *key = cell(b, row, "key");
          mr_value_free(child);
          t->sqlstate = SQLSTATE_UNIQUE_VIOLATION;
          return mr_fail(t->err, MR_ERR_INVALID,
                         "duplicate key: ducklake_metadata already has option '%s' in this "
                         "scope; update its value instead",
                         key && !key->is_null ? key->data : "");
        }
        cat_msg_remove(parent, tb->field, i);
        break;
      }
    }
  }
  if (b->op == SQL_CHANGE_DELETE) {
    mr_value_free(child);
    return MR_OK;
  }
  return cat_msg_append(parent, tb->field, child, t->err);
}

static mr_status do_record(txn *t, const catalog_table *tb, const sql_change_batch *b, size_t row) {
  ProtobufCMessage *r;
  mr_status rc = row_msg(t, tb, b, row, &r);
  if (rc)
    return rc;
  mr_key k;
  if (!cat_key_from_msg(tb->kind, r, &k)) {
    mr_value_free(r);
    return mr_fail(t->err, MR_ERR_INVALID, "catalog: %s row without its key columns", tb->name);
  }
  if (b->op == SQL_CHANGE_DELETE) {
    mr_value_free(r);
    if (tb->role == CAT_INLINE_TABLES) {
      rc = note_inline(t, &t->unlisted, &t->nunlisted, (int64_t)k.c[0], (int64_t)k.c[1]);
      if (rc)
        return rc;
    }
    return add(t, &k, OP_DEL, NULL);
  }
  pend *p = find(t, &k, OP_PUT);
  if (b->op == SQL_CHANGE_INSERT && !(p && p->op == OP_PUT))
    return add_insert(t, &k, tb->name, r);
  if (p && p->op == OP_PUT) { /* keep embedded children gathered so far */
    mr_value_free(r);
    if (b->op == SQL_CHANGE_INSERT) /* inserted or updated already: it exists */
      return duplicate_key(t, tb->name, &k);
    return fill(t, tb, b, row, p->msg);
  }
  return add(t, &k, OP_PUT, r);
}

static mr_status do_snapshot(txn *t, const catalog_table *tb, const sql_change_batch *b,
                             size_t row) {
  if (b->op == SQL_CHANGE_DELETE) { /* ducklake_expire_snapshots */
    int64_t sid;
    if (!cell_i64(b, row, "snapshot_id", &sid))
      return mr_fail(t->err, MR_ERR_INVALID, "catalog: %s row without snapshot_id", tb->name);
    mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {(uint64_t)sid}};
    return add(t, &k, OP_FORGET, NULL);
  }
  if (b->op != SQL_CHANGE_INSERT)
    return unsupported(t, "UPDATE", tb->name);
  if (t->snap == NULL) {
    t->snap = cat_msg_new(&moraine__v1__snapshot__descriptor);
    if (t->snap == NULL)
      return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  }
  return fill(t, tb, b, row, t->snap);
}

/* ducklake_inlined_data_{T}_{V} rows. */
static mr_status do_inline_row(txn *t, const sql_change_batch *b, size_t row, int64_t tid,
                               int64_t ver) {
  Moraine__V1__InlineDataRow *m =
      (Moraine__V1__InlineDataRow *)cat_msg_new(&moraine__v1__inline_data_row__descriptor);
  if (m == NULL)
    return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  m->table_id = tid;
  m->schema_version = ver;
  int64_t end;
  bool ok = cell_i64(b, row, "row_id", &m->row_id) &&
            cell_i64(b, row, "begin_snapshot", &m->begin_snapshot);
  if (cell_i64(b, row, "end_snapshot", &end)) {
    m->has_end_snapshot = 1;
    m->end_snapshot = end;
  }
  mr_status rc = MR_OK;
  if (!ok)
    rc = mr_fail(t->err, MR_ERR_INVALID, "catalog: inlined row without row_id/begin_snapshot");
  for (size_t i = 0; !rc && i < b->ncols; i++) {
    const char *cn = b->col_names[i];
    if (strcmp(cn, "row_id") == 0 || strcmp(cn, "begin_snapshot") == 0 ||
        strcmp(cn, "end_snapshot") == 0)
      continue;
    Moraine__V1__InlineCell *c =
        (Moraine__V1__InlineCell *)cat_msg_new(&moraine__v1__inline_cell__descriptor);
    if (c == NULL) {
      rc = mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
      break;
    }
    const sql_value *v = &b->values[row * b->ncols + i];
    c->is_null = v->is_null;
    if (!v->is_null && v->len) {
      c->value.data = malloc(v->len);
      if (c->value.data == NULL) {
        mr_value_free(&c->base);
        rc = mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
        break;
      }
      memcpy(c->value.data, v->data, v->len);
      c->value.len = v->len;
    }
    rc = cat_msg_append(&m->base, "cell", &c->base, t->err);
  }
  if (rc) {
    mr_value_free(&m->base);
    return rc;
  }
  /*
   * Keyed (T, V, row_id, begin_snapshot): an UPDATE of an inlined row ends
   * the old version and inserts a new one with the same row_id, so each
   * version is its own key. Ending a version (UPDATE SET end_snapshot) sends
   * the full new row, whose begin_snapshot names the version it overwrites.
   */
  mr_key k;
  cat_key_from_msg(MR_KK_INLINE_ROW, &m->base, &k);
  if (b->op == SQL_CHANGE_DELETE) {
    mr_value_free(&m->base);
    return add(t, &k, OP_DEL, NULL);
  }
  if (b->op == SQL_CHANGE_UPDATE && m->has_end_snapshot)
    t->untargeted = true; /* an inlined row deleted: no data file names it */
  if (b->op == SQL_CHANGE_INSERT)
    return add_insert(t, &k, b->table, &m->base);
  return add(t, &k, OP_PUT, &m->base);
}

static mr_status do_inline_delete(txn *t, const sql_change_batch *b, size_t row, int64_t tid) {
  Moraine__V1__InlineDeleteRow *m =
      (Moraine__V1__InlineDeleteRow *)cat_msg_new(&moraine__v1__inline_delete_row__descriptor);
  if (m == NULL)
    return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
  m->table_id = tid;
  if (!cell_i64(b, row, "file_id", &m->file_id) || !cell_i64(b, row, "row_id", &m->row_id) ||
      !cell_i64(b, row, "begin_snapshot", &m->begin_snapshot)) {
    mr_value_free(&m->base);
    return mr_fail(t->err, MR_ERR_INVALID, "catalog: inlined delete row without its columns");
  }
  mr_key k;
  cat_key_from_msg(MR_KK_INLINE_DELETE_ROW, &m->base, &k);
  if (b->op == SQL_CHANGE_DELETE) {
    mr_value_free(&m->base);
    return add(t, &k, OP_DEL, NULL);
  }
  mr_status rc = add_target(t, (uint64_t)m->file_id);
  if (rc) {
    mr_value_free(&m->base);
    return rc;
  }
  if (b->op == SQL_CHANGE_INSERT)
    return add_insert(t, &k, b->table, &m->base);
  return add(t, &k, OP_PUT, &m->base);
}

/* Deletes every stored inline key of kind under (tid[, ver]) — a DROP. */
typedef struct drop_ctx {
  txn *t;
  mr_key_kind kind;
  uint64_t tid, ver;
  bool by_ver;
} drop_ctx;

static mr_status drop_visit(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  drop_ctx *d = ctx;
  if (k->kind != d->kind || k->c[0] != d->tid || (d->by_ver && k->c[1] != d->ver))
    return MR_OK;
  return add(d->t, k, OP_DEL, NULL);
}

static mr_status do_ddl(txn *t, const sql_change_batch *b) {
  char *name = NULL;
  cat_ddl_col *cols = NULL;
  size_t ncols = 0;
  int64_t tid, ver;
  mr_status rc = MR_OK;
  if (cat_parse_create(b->sql, &name, &cols, &ncols)) {
    if (cat_inline_data_name(name, &tid, &ver)) {
      inline_layout *nl = realloc(t->lay, (t->nlay + 1) * sizeof *nl);
      if (nl == NULL) {
        rc = mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
      } else {
        t->lay = nl;
        t->lay[t->nlay++] = (inline_layout){name, cols, ncols};
        return MR_OK;
      }
    } else if (cat_inline_delete_name(name, &tid)) {
      Moraine__V1__InlineDeleteTable *m = (Moraine__V1__InlineDeleteTable *)cat_msg_new(
          &moraine__v1__inline_delete_table__descriptor);
      if (m == NULL) {
        rc = mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
      } else {
        m->table_id = tid;
        m->table_name = name;
        name = NULL;
        mr_key k = {.kind = MR_KK_INLINE_DELETE_TABLE, .c = {(uint64_t)tid}};
        rc = add(t, &k, OP_PUT, &m->base);
      }
    }
    /* other CREATEs: DuckLake's own tables, known statically */
  } else if (cat_parse_drop(b->sql, &name)) {
    drop_ctx d = {t, MR_KK_INLINE_ROW, 0, 0, true};
    bool data = cat_inline_data_name(name, &tid, &ver);
    bool del = !data && cat_inline_delete_name(name, &tid);
    if (data || del) {
      mr_key k = {.kind = data ? MR_KK_INLINE_TABLE : MR_KK_INLINE_DELETE_TABLE,
                  .c = {(uint64_t)tid, (uint64_t)ver}};
      if (del)
        k.c[1] = 0;
      rc = add(t, &k, OP_DEL, NULL);
      d.kind = data ? MR_KK_INLINE_ROW : MR_KK_INLINE_DELETE_ROW;
      d.tid = (uint64_t)tid;
      d.ver = (uint64_t)ver;
      d.by_ver = data;
      if (!rc && data)
        rc = note_inline(t, &t->dropped, &t->ndropped, tid, ver);
      if (!rc)
        rc = store_load_subspace(t->c->st, MR_SS_INLINE, drop_visit, &d, t->err);
      /* rows of this table put earlier in the same commit go too */
      for (size_t i = 0; !rc && i < t->n; i++) {
        pend *p = &t->p[i];
        if (!p->dead && p->op == OP_PUT && p->k.kind == d.kind && p->k.c[0] == d.tid &&
            (!d.by_ver || p->k.c[1] == d.ver))
          pend_kill(p);
      }
    }
  }
  cat_ddl_cols_free(cols, ncols);
  free(name);
  return rc;
}

static mr_status do_batch(txn *t, const sql_change_batch *b) {
  if (b->op == SQL_CHANGE_DDL)
    return do_ddl(t, b);
  int64_t tid, ver;
  mr_status rc = MR_OK;
  if (cat_inline_data_name(b->table, &tid, &ver)) {
    for (size_t r = 0; !rc && r < b->nrows; r++)
      rc = do_inline_row(t, b, r, tid, ver);
    return rc;
  }
  if (cat_inline_delete_name(b->table, &tid)) {
    for (size_t r = 0; !rc && r < b->nrows; r++)
      rc = do_inline_delete(t, b, r, tid);
    return rc;
  }
  const catalog_table *tb = catalog_table_find(b->table);
  if (tb == NULL)
    return MR_OK; /* not a catalog table: not persisted */
  for (size_t r = 0; !rc && r < b->nrows; r++) {
    switch (tb->role) {
    case CAT_SNAPSHOT:
    case CAT_SNAPSHOT_CHANGES:
      rc = do_snapshot(t, tb, b, r);
      break;
    case CAT_ENTITY:
      rc = do_entity(t, tb, b, r);
      break;
    case CAT_CHILD:
    case CAT_TAG:
    case CAT_OPTION:
      rc = do_child(t, tb, b, r);
      break;
    case CAT_RECORD:
    case CAT_SCHEMA_VERSION:
    case CAT_INLINE_TABLES:
      rc = do_record(t, tb, b, r);
      break;
    }
  }
  return rc;
}

/* Rows embedded in a parent record (column tags, partition columns, ...). */
static bool child_batch(const sql_change_batch *b) {
  if (b->op == SQL_CHANGE_DDL)
    return false;
  const catalog_table *tb = catalog_table_find(b->table);
  return tb && tb->role == CAT_CHILD;
}

/* ---- finishing ------------------------------------------------------------------ */

static mr_status finish(txn *t) {
  mr_status krc = check_inserted_keys(t);
  if (krc == MR_OK)
    krc = check_inline_drops(t);
  if (krc)
    return krc;
  for (size_t i = 0; i < t->n; i++) {
    pend *p = &t->p[i];
    if (p->dead)
      continue;
    /* an inlined data table's column layout comes from its CREATE */
    if (p->op == OP_PUT && p->k.kind == MR_KK_INLINE_TABLE) {
      Moraine__V1__InlineDataTable *m = (Moraine__V1__InlineDataTable *)p->msg;
      char want[96];
      snprintf(want, sizeof want, "ducklake_inlined_data_%lld_%lld", (long long)m->table_id,
               (long long)m->schema_version);
      for (size_t j = 0; m->n_column == 0 && j < t->nlay; j++) {
        if (strcmp(t->lay[j].name, want) != 0)
          continue;
        for (size_t c = 3; c < t->lay[j].ncols; c++) {
          Moraine__V1__InlineColumn *ic =
              (Moraine__V1__InlineColumn *)cat_msg_new(&moraine__v1__inline_column__descriptor);
          if (ic == NULL)
            return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
          ic->name = strdup(t->lay[j].cols[c].name);
          ic->type = strdup(t->lay[j].cols[c].type);
          mr_status rc = cat_msg_append(p->msg, "column", &ic->base, t->err);
          if (rc)
            return rc;
        }
      }
    }
    /* column tags live in the newest version of their column */
    if (p->op == OP_END && p->k.kind == MR_KK_COLUMN) {
      pend *succ = find(t, &p->k, OP_PUT);
      if (succ && succ->op == OP_PUT) {
        ProtobufCMessage **arr;
        while (cat_msg_nrep(p->msg, "column_tag", &arr) > 0) {
          ProtobufCMessage *tag = cat_msg_copy(arr[0]);
          cat_msg_remove(p->msg, "column_tag", 0);
          if (tag == NULL)
            return mr_fail(t->err, MR_ERR_NOMEM, "catalog: out of memory");
          mr_status rc = cat_msg_append(succ->msg, "column_tag", tag, t->err);
          if (rc)
            return rc;
        }
      }
    }
    if (p->op == OP_PUT && p->k.kind == MR_KK_DELFILE) {
      int64_t df;
      if (cat_msg_i64(p->msg, "data_file_id", &df)) {
        mr_status rc = add_target(t, (uint64_t)df);
        if (rc)
          return rc;
      } else {
        t->untargeted = true;
      }
    }
  }
  if (t->snap) {
    Moraine__V1__Snapshot *s = (Moraine__V1__Snapshot *)t->snap;
    s->deletes_untargeted_files = t->untargeted;
    s->n_deleted_from_data_files = t->ntargets;
    s->deleted_from_data_files = t->targets; /* borrowed; detached before free */
  }
  return MR_OK;
}

static mr_status write_commit(txn *t, store_head expected) {
  store_commit *sc = NULL;
  mr_status rc = store_commit_begin(t->c->st, expected, &sc, t->err);
  if (rc)
    return rc;
  if (t->snap)
    rc = store_commit_snapshot(sc, (Moraine__V1__Snapshot *)t->snap, t->err);
  for (size_t i = 0; !rc && i < t->n; i++) {
    pend *p = &t->p[i];
    if (p->dead)
      continue;
    if (p->op == OP_PUT)
      rc = store_commit_put(sc, &p->k, p->msg, t->err);
    else if (p->op == OP_END)
      rc = store_commit_end(sc, &p->k, p->msg, t->err);
    else if (p->op == OP_FORGET)
      rc = store_commit_forget(sc, &p->k, p->msg, t->err);
    else
      rc = store_commit_delete(sc, &p->k, t->err);
  }
  if (rc) {
    store_commit_abort(sc);
    return rc;
  }
  store_commit_counts n;
  store_commit_get_counts(sc, &n);
  store_head h;
  rc = store_commit_write(sc, &h, t->err);
  if (!rc && (n.snapshots_forgotten || n.inline_deleted))
    fprintf(stderr,
            "moraine: maintenance: snapshot %llu removed %llu snapshots, %llu ended versions, %llu current "
            "records and %llu inlined rows (recorded in sys/maintenance_status); the store's space comes "
            "back as SlateDB merges and collects (docs/operations.md, \"Space\")\n",
            (unsigned long long)h.snapshot_id, (unsigned long long)n.snapshots_forgotten,
            (unsigned long long)n.history_forgotten, (unsigned long long)n.current_forgotten,
            (unsigned long long)n.inline_deleted);
  return rc;
}

static void txn_free(txn *t) {
  for (size_t i = 0; i < t->n; i++)
    mr_value_free(t->p[i].msg);
  free(t->p);
  if (t->snap) {
    Moraine__V1__Snapshot *s = (Moraine__V1__Snapshot *)t->snap;
    s->deleted_from_data_files = NULL;
    s->n_deleted_from_data_files = 0;
    mr_value_free(t->snap);
  }
  for (size_t i = 0; i < t->nlay; i++) {
    free(t->lay[i].name);
    cat_ddl_cols_free(t->lay[i].cols, t->lay[i].ncols);
  }
  free(t->lay);
  free(t->targets);
  free(t->dropped);
  free(t->unlisted);
  free(t->seen);
  free(t->idx);
}

/* The SQLSTATE a client gets for a store failure, by its cause. */
static const char *store_sqlstate(mr_status code) {
  switch (code) {
  case MR_ERR_NOSPACE:
    return SQLSTATE_DISK_FULL;
  case MR_ERR_TIMEOUT:
  case MR_ERR_CLOSED:
    return SQLSTATE_CANNOT_CONNECT_NOW; /* the store does not answer */
  case MR_ERR_FENCED:
    return SQLSTATE_ADMIN_SHUTDOWN; /* another writer owns the store */
  default:
    return SQLSTATE_IO_ERROR;
  }
}

mr_status catalog_prepare(void *ctx, const sql_changes *changes, sql_error *err) {
  catalog *c = ctx;
  mr_error e;
  mr_error_clear(&e);
  mr_status frc = store_failed(c->st, &e);
  if (frc)
    return sql_fail(err, frc, store_sqlstate(frc),
                    "moraine: the catalog store failed; this server accepts no writes until it "
                    "recovers (reads go on): %s",
                    e.msg);
  if (changes->begin_seq != changes->commit_seq)
    return sql_fail(err, MR_ERR_CONFLICT, SQLSTATE_SERIALIZATION_FAILURE,
                    "could not serialize access: write-write conflict (another transaction "
                    "committed since this one began)");
  /* nothing is written that the start-up load could not read back */
  mr_status rc = cat_check_loadable(c, changes, err);
  if (rc)
    return rc;
  if (getenv("MORAINE_CATALOG_TRACE")) { /* debugging aid: the captured batches */
    for (size_t i = 0; i < changes->nbatches; i++) {
      const sql_change_batch *b = &changes->batches[i];
      if (b->op == SQL_CHANGE_DDL)
        fprintf(stderr, "catalog: DDL %s\n", b->sql);
      else
        fprintf(stderr, "catalog: %s %s x%zu\n",
                b->op == SQL_CHANGE_INSERT   ? "INSERT"
                : b->op == SQL_CHANGE_UPDATE ? "UPDATE"
                                             : "DELETE",
                b->table, b->nrows);
    }
  }
  txn t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.err = &e;
  store_head head = store_get_head(c->st);
  /* parents before children: pass 0 replays every batch but child rows */
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; !rc && i < changes->nbatches; i++)
      if (child_batch(&changes->batches[i]) == (pass == 1))
        rc = do_batch(&t, &changes->batches[i]);
  if (!rc)
    rc = finish(&t);
  const char *sqlstate = t.sqlstate;
  bool any = t.snap != NULL;
  for (size_t i = 0; !any && i < t.n; i++)
    any = !t.p[i].dead;
  if (!rc && any) {
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    rc = write_commit(&t, head);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    if (changes->times)
      changes->times->store_write += (double)(w1.tv_sec - w0.tv_sec) * 1e3 +
                                     (double)(w1.tv_nsec - w0.tv_nsec) / 1e6;
  }
  txn_free(&t);
  if (rc == MR_ERR_CONFLICT)
    return sql_fail(err, rc, SQLSTATE_SERIALIZATION_FAILURE, "could not serialize access: %s",
                    e.msg);
  mr_error fe;
  if (rc && store_failed(c->st, &fe)) {
    /* the write's fate is in doubt (a timed-out write may still land): the
     * store refuses commits until its watcher settles that (store_recover) */
    fprintf(stderr, "moraine: store write failed (%s): %s\n", mr_status_text(rc), e.msg);
    return sql_fail(err, rc, store_sqlstate(rc),
                    "moraine: the catalog store failed (%s); this server accepts no writes until "
                    "it recovers (reads go on): %s",
                    mr_status_text(rc), e.msg);
  }
  if (rc)
    return sql_fail(err, rc, sqlstate ? sqlstate : SQLSTATE_INTERNAL_ERROR,
                    "moraine: catalog commit failed: %s", e.msg);
  return MR_OK;
}

/* The spec tables the mapping table persists: the only ones a client may
 * create (sql_plan admits their CREATE, the session asks this). */
static bool catalog_known_table(void *ctx, const char *table) {
  return catalog_table_find(table) != NULL;
}

/* Is `column` one of `kind`'s key components? */
static bool key_component(mr_key_kind kind, const char *column) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  for (unsigned i = 0; ki && i < ki->ncomp; i++)
    if (strcmp(ki->comp[i], column) == 0)
      return true;
  return false;
}

/*
 * What an UPDATE may assign (sql_commit_hooks.may_update): never a column
 * that identifies the row in the store, since the capture brings only the
 * new row and do_batch would store it beside the old one. Records and
 * versioned entities are found by their key components; inlined rows by
 * row_id and begin_snapshot (table and version are in the table's name);
 * child and tag rows by every field but end_snapshot, options by every
 * field but value. Snapshots, inlined deletes and the inlined tables'
 * directory (whose table_name follows from its key) are never updated.
 */
static bool catalog_may_update(void *ctx, const char *table, const char *column) {
  int64_t tid, ver;
  if (cat_inline_data_name(table, &tid, &ver))
    return strcmp(column, "row_id") != 0 && strcmp(column, "begin_snapshot") != 0;
  if (cat_inline_delete_name(table, &tid))
    return false;
  const catalog_table *tb = catalog_table_find(table);
  if (tb == NULL)
    return true; /* not persisted */
  switch (tb->role) {
  case CAT_SNAPSHOT:
  case CAT_SNAPSHOT_CHANGES:
  case CAT_INLINE_TABLES:
    return false;
  case CAT_CHILD:
  case CAT_TAG:
    return strcmp(column, "end_snapshot") == 0;
  case CAT_OPTION:
    return strcmp(column, "value") == 0;
  case CAT_ENTITY:
  case CAT_RECORD:
  case CAT_SCHEMA_VERSION:
    return !key_component(tb->kind, column);
  }
  return false;
}

static void catalog_finished(void *ctx, const sql_changes *changes, bool committed) {
  catalog *c = ctx;
  if (!committed) {
    /* the store holds a commit DuckDB refused: no writes until reloaded */
    fprintf(stderr, "moraine: a commit reached the store but the SQL engine refused it\n");
    store_set_in_doubt(c->st, "a commit reached the store but the SQL engine refused it; "
                              "reload needed");
  }
}

mr_status catalog_open(store *st, sql_engine *e, catalog **out, mr_error *err) {
  catalog *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
  c->st = st;
  c->e = e;
  pthread_mutex_init(&c->hist_mu, NULL);
  *out = c;
  return MR_OK;
}

void catalog_free(catalog *c) {
  if (c == NULL)
    return;
  cat_inline_names_free(c);
  cat_history_free(&c->hist);
  pthread_mutex_destroy(&c->hist_mu);
  free(c);
}

/* pg_database_size: the bytes of every key and value of the store (one
 * scan; history and time travel included, as they are the catalog's). */
static mr_status catalog_size(void *ctx, uint64_t *bytes, mr_error *err) {
  catalog *c = ctx;
  store_census cs;
  mr_status rc = store_take_census(c->st, &cs, err);
  if (rc)
    return rc;
  *bytes = 0;
  for (size_t i = 0; i < MR_SS_COUNT; i++)
    *bytes += cs.subspace[i].bytes;
  return MR_OK;
}

void catalog_hooks(catalog *c, sql_commit_hooks *out) {
  sql_commit_hooks h = {c, catalog_prepare, catalog_finished, catalog_known_table,
                        catalog_may_update};
  *out = h;
}

void catalog_install_hooks(catalog *c) {
  sql_commit_hooks h;
  catalog_hooks(c, &h);
  sql_engine_set_commit_hooks(c->e, &h);
  sql_engine_set_size_fn(c->e, catalog_size, c);
}
