/*
 * catalog_follow.c — a read replica's catch-up (catalog.h): commit by
 * commit from the changelog (catalog_follow), or the whole catalog loaded
 * again (catalog_reload) when that cannot be exact.
 *
 * Commit by commit: the changelog record of each snapshot in the gap lists
 * the current, inline and schema_version keys its batch wrote or removed.
 * For each such key (and each new snapshot record) the engine's rows of
 * that entity are deleted and every version the store holds of it is
 * loaded again through the start-up load's own record -> rows code
 * (cat_loader), so the result is row for row what a full load would give;
 * all of it in one engine transaction.
 *
 * Whole catalog: loaded into a scratch DuckDB schema, then swapped into the
 * catalog's own schema in one engine transaction.
 *
 * Why a scratch schema and a swap rather than loading in place: a load can
 * fail on a value (and DuckDB then aborts the whole transaction), and it is
 * the slow part; sessions keep reading the old catalog meanwhile, and the
 * swap is plain CREATE OR REPLACE ... AS SELECT of tables of the same types,
 * which cannot fail on a value. Replacing a table (rather than emptying and
 * refilling it) lets DuckDB free the old one once no reader uses it, so a
 * replica that follows for months does not keep dead row versions.
 *
 * Invariant: c->spec_tables and c->inline_names describe the engine's copy
 * (set by catalog_load, updated here after a swap commits).
 */
#include "catalog/catalog_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mr_grow.h"

typedef struct sqlbuf {
  char *s;
  size_t len, cap;
  bool oom;
} sqlbuf;

static void add(sqlbuf *b, const char *a, const char *x, const char *y, const char *z) {
  const char *parts[] = {a, x, y, z};
  for (size_t i = 0; i < 4 && !b->oom; i++) {
    if (parts[i] == NULL)
      continue;
    size_t n = strlen(parts[i]);
    if (mr_grow((void **)&b->s, &b->cap, b->len + n + 1, 4096) != MR_OK) {
      b->oom = true;
      return;
    }
    memcpy(b->s + b->len, parts[i], n + 1);
    b->len += n;
  }
}

/* Reads through a view: tries before it counts as moved on for good. */
enum { VIEW_TRIES = 3 };

static bool same_head(store_head a, store_head b) {
  return a.snapshot_id == b.snapshot_id && a.batch_count == b.batch_count;
}

static bool has_name(const catalog *c, const char *name) {
  for (size_t i = 0; i < c->ninline; i++)
    if (strcmp(c->inline_names[i], name) == 0)
      return true;
  return false;
}

/* Appends "CREATE OR REPLACE TABLE dst.t AS SELECT * FROM src.t; ". */
static void add_copy(sqlbuf *b, const char *dst, const char *src, const char *table) {
  char *qt = cat_quote_ident(table);
  if (qt == NULL) {
    b->oom = true;
    return;
  }
  add(b, "CREATE OR REPLACE TABLE ", dst, ".", qt);
  add(b, " AS SELECT * FROM ", src, ".", qt);
  add(b, "; ", NULL, NULL, NULL);
  free(qt);
}

/* ddl: sql may create or drop tables (sql_engine_exec), else it only
 * changes rows (sql_engine_exec_data: the sessions' caches stay valid). */
static mr_status run_sql(catalog *c, const char *sql, bool ddl, const char *what,
                         mr_error *err) {
  sql_error se;
  memset(&se, 0, sizeof se);
  if ((ddl ? sql_engine_exec(c->e, sql, &se) : sql_engine_exec_data(c->e, sql, &se)) != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "%s: %s", what, se.base.msg);
  return MR_OK;
}

static mr_status engine_exec(catalog *c, const char *sql, mr_error *err) {
  return run_sql(c, sql, true, "catalog reload", err);
}

/* The swap: one transaction replacing c's tables with scratch's. */
static mr_status swap_in(catalog *c, const catalog *scratch, mr_error *err) {
  char *dst = cat_quoted_schema(c), *src = cat_quoted_schema(scratch);
  sqlbuf b = {0};
  b.oom = dst == NULL || src == NULL;
  if (!c->spec_tables && (c->schema[0] && strcmp(c->schema, "public") != 0))
    add(&b, "CREATE SCHEMA IF NOT EXISTS ", dst, "; ", NULL);
  for (size_t i = 0; i < catalog_table_count(); i++)
    add_copy(&b, dst, src, catalog_table_at(i)->name);
  for (size_t i = 0; i < scratch->ninline; i++)
    add_copy(&b, dst, src, scratch->inline_names[i]);
  for (size_t i = 0; i < c->ninline; i++) {
    if (has_name(scratch, c->inline_names[i]))
      continue;
    char *qt = cat_quote_ident(c->inline_names[i]);
    if (qt == NULL)
      b.oom = true;
    add(&b, "DROP TABLE IF EXISTS ", dst, ".", qt);
    add(&b, "; ", NULL, NULL, NULL);
    free(qt);
  }
  free(dst);
  free(src);
  if (b.oom) {
    free(b.s);
    return mr_fail(err, MR_ERR_NOMEM, "catalog reload: out of memory");
  }
  sql_error se;
  memset(&se, 0, sizeof se);
  mr_status rc = sql_engine_admin_begin(c->e, &se);
  if (rc == MR_OK) {
    rc = sql_engine_exec(c->e, b.s, &se);
    sql_error end;
    memset(&end, 0, sizeof end);
    mr_status erc = sql_engine_admin_end(c->e, rc == MR_OK, &end);
    if (rc == MR_OK && erc != MR_OK) {
      rc = erc;
      se = end;
    }
  }
  free(b.s);
  if (rc != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "catalog reload: swap: %s",
                   se.base.msg);
  return MR_OK;
}

mr_status catalog_reload(catalog *c, store_head *reached, size_t *nrows, mr_error *err) {
  static _Atomic unsigned scratch_seq;
  store *view = NULL;
  mr_status rc = store_open_view(c->st, &view, err);
  if (rc)
    return mr_error_wrap(err, "catalog reload: opening a view of the store");
  catalog scratch;
  memset(&scratch, 0, sizeof scratch);
  scratch.st = view;
  scratch.e = c->e;
  scratch.lazy_history = c->lazy_history;
  scratch.lazy_current_inline = c->lazy_current_inline;
  scratch.snapshot_tail = c->snapshot_tail;
  snprintf(scratch.schema, sizeof scratch.schema, "moraine_reload_%u",
           atomic_fetch_add(&scratch_seq, 1));
  char drop[128];
  snprintf(drop, sizeof drop, "DROP SCHEMA IF EXISTS %s CASCADE", scratch.schema);
  mr_error ignored;
  /* the view catches up once after it opens: load between two equal heads */
  store_head before = {0}, after = {0};
  for (int tries = 0; tries < VIEW_TRIES; tries++) {
    cat_inline_names_free(&scratch);
    scratch.spec_tables = false;
    rc = store_read_head(view, &before, err);
    if (rc == MR_OK)
      rc = catalog_load(&scratch, nrows, err);
    if (rc == MR_OK)
      rc = store_read_head(view, &after, err);
    if (rc == MR_OK && !same_head(before, after))
      rc = mr_fail(err, MR_ERR_CONFLICT, "the store moved on during the reload");
    if (rc != MR_ERR_CONFLICT)
      break;
    if (engine_exec(c, drop, &ignored) != MR_OK)
      break; /* the next load would find the scratch tables: give up this round */
  }
  /* no history load may run between the swap and the residency it gives */
  pthread_mutex_lock(&c->hist_mu);
  if (rc == MR_OK && scratch.spec_tables)
    rc = swap_in(c, &scratch, err);
  if (rc == MR_OK && scratch.spec_tables) {
    cat_history_free(&c->hist);
    c->hist = scratch.hist;
    memset(&scratch.hist, 0, sizeof scratch.hist);
  }
  pthread_mutex_unlock(&c->hist_mu);
  cat_history_free(&scratch.hist);
  if (engine_exec(c, drop, &ignored) != MR_OK)
    fprintf(stderr, "moraine: catalog reload: cannot drop the scratch schema %s: %s\n",
            scratch.schema, ignored.msg);
  if (rc == MR_OK && scratch.spec_tables) { /* the engine holds scratch's tables now */
    cat_inline_names_free(c);
    c->inline_names = scratch.inline_names;
    c->ninline = scratch.ninline;
    c->spec_tables = true;
    c->passes = scratch.passes;
    c->last_pass_us = scratch.last_pass_us;
    scratch.inline_names = NULL;
    scratch.ninline = 0;
  }
  if (reached)
    *reached = after;
  cat_inline_names_free(&scratch);
  if (store_close(view, &ignored) != MR_OK)
    fprintf(stderr, "moraine: catalog reload: closing the view of the store: %s\n", ignored.msg);
  return rc;
}

/* ---- maintenance mark --------------------------------------------------- */

static mr_status read_mark(store *st, size_t *passes, int64_t *last_us, mr_error *err) {
  mr_key k = {.kind = MR_KK_SYS_MAINTENANCE};
  ProtobufCMessage *m = NULL;
  *passes = 0;
  *last_us = 0;
  mr_status rc = store_get(st, &k, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (rc)
    return rc;
  const Moraine__V1__MaintenanceStatus *ms = (const Moraine__V1__MaintenanceStatus *)m;
  *passes = ms->n_pass;
  if (ms->n_pass)
    *last_us = ms->pass[ms->n_pass - 1]->start_time_us;
  mr_value_free(m);
  return MR_OK;
}

mr_status cat_mark_maintenance(catalog *c, mr_error *err) {
  return read_mark(c->st, &c->passes, &c->last_pass_us, err);
}

/* Has sys/maintenance_status, as rd sees it, changed since c's mark? */
static mr_status maintenance_moved(catalog *c, store *rd, bool *moved, mr_error *err) {
  size_t n;
  int64_t us;
  mr_status rc = read_mark(rd, &n, &us, err);
  *moved = rc == MR_OK && (n != c->passes || us != c->last_pass_us);
  return rc;
}

/* ---- commit by commit ---------------------------------------------------- */

/* The distinct keys the gap's changelog records list, plus the count of
 * records seen. */
typedef struct keyset {
  mr_key *keys;
  size_t n, cap;
  uint64_t records;
} keyset;

static mr_status keyset_add(keyset *ks, const mr_key *k, mr_error *err) {
  if (k->kind == MR_KK_NAME) /* keys never point into the record's bytes here */
    return mr_fail(err, MR_ERR_CORRUPTION, "changelog lists a name key");
  if (ks->n == ks->cap) {
    size_t cap = ks->cap ? 2 * ks->cap : 64;
    mr_key *v = realloc(ks->keys, cap * sizeof *v);
    if (v == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog follow: out of memory");
    ks->keys = v;
    ks->cap = cap;
  }
  ks->keys[ks->n++] = *k;
  return MR_OK;
}

static mr_status collect(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  keyset *ks = ctx;
  const Moraine__V1__Changelog *cl = (const Moraine__V1__Changelog *)m;
  ks->records++;
  for (size_t i = 0; i < cl->n_keys; i++) {
    mr_key ck;
    mr_status rc = mr_key_decode(cl->keys[i].data, cl->keys[i].len, &ck, err);
    if (!rc)
      rc = keyset_add(ks, &ck, err);
    if (rc)
      return rc;
  }
  return MR_OK;
}

static int key_cmp(const void *a, const void *b) {
  return mr_key_compare(a, b);
}

static void add_u64(sqlbuf *b, uint64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%llu", (unsigned long long)v);
  add(b, num, NULL, NULL, NULL);
}

/* "DELETE FROM s.t WHERE ..." for the rows of tb that belong to the entity
 * of current key k: every key component that is a column of tb must match
 * (options: their scope columns). false when tb names none of them. */
static bool add_entity_delete(sqlbuf *b, const char *qs, const catalog_table *tb, const mr_key *k) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  add(b, "DELETE FROM ", qs, ".", tb->name);
  if (tb->role == CAT_OPTION) {
    if (k->c[0] == MR_SCOPE_GLOBAL) {
      add(b, " WHERE scope IS NULL; ", NULL, NULL, NULL);
    } else {
      add(b, k->c[0] == MR_SCOPE_SCHEMA ? " WHERE scope = 'schema'" : " WHERE scope = 'table'",
          " AND scope_id = ", NULL, NULL);
      add_u64(b, k->c[1]);
      add(b, "; ", NULL, NULL, NULL);
    }
    return true;
  }
  unsigned matched = 0;
  for (unsigned i = 0; i < ki->ncomp; i++) {
    bool has = false;
    for (size_t j = 0; j < tb->ncols && !has; j++)
      has = strcmp(tb->cols[j].name, ki->comp[i]) == 0;
    if (!has)
      continue;
    add(b, matched++ ? " AND " : " WHERE ", ki->comp[i], " = ", NULL);
    add_u64(b, k->c[i]);
  }
  add(b, "; ", NULL, NULL, NULL);
  return matched > 0;
}

typedef struct follow_ctx {
  catalog *c;
  store *st; /* what the records are read from: c->st, or a view of it */
  char *qs;
  sqlbuf del;     /* deletes, run before the rows are loaded */
  sqlbuf drop;    /* inlined tables the gap removed */
  char **dropped; /* their names, to leave c->inline_names after commit */
  size_t ndropped;
  cat_loader *ld;
} follow_ctx;

static mr_status visit_one(follow_ctx *f, const mr_key *k, mr_error *err) {
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(f->st, k, &m, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (rc == MR_OK)
    rc = cat_loader_visit(f->ld, k, m, err);
  mr_value_free(m);
  return rc;
}

/* An inlined data or delete table's key: its rows go with it when the
 * store no longer has it, else its CREATE (IF NOT EXISTS) and row of
 * ducklake_inlined_data_tables are loaded. */
static mr_status apply_inline_table(follow_ctx *f, const mr_key *k, const char *name,
                                    mr_error *err) {
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(f->st, k, &m, err);
  if (rc == MR_OK) {
    rc = cat_loader_visit(f->ld, k, m, err);
    mr_value_free(m);
    return rc;
  }
  if (rc != MR_ERR_NOT_FOUND)
    return rc;
  mr_error_clear(err);
  if (!has_name(f->c, name))
    return MR_OK;
  char **v = realloc(f->dropped, (f->ndropped + 1) * sizeof *v);
  if (v == NULL || (v[f->ndropped] = strdup(name)) == NULL) {
    if (v)
      f->dropped = v;
    return mr_fail(err, MR_ERR_NOMEM, "catalog follow: out of memory");
  }
  f->dropped = v;
  f->ndropped++;
  add(&f->drop, "DROP TABLE IF EXISTS ", f->qs, ".", name);
  add(&f->drop, "; ", NULL, NULL, NULL);
  return MR_OK;
}

/* One inlined row's key: its engine row is replaced by the store's. */
static mr_status apply_inline_row(follow_ctx *f, const mr_key *k, const char *table,
                                  const char *where, mr_error *err) {
  if (has_name(f->c, table)) { /* a table new in this gap has no rows to delete */
    add(&f->del, "DELETE FROM ", f->qs, ".", table);
    add(&f->del, where, NULL, NULL, NULL);
  }
  return visit_one(f, k, err);
}

static mr_status apply_key(follow_ctx *f, const mr_key *k, mr_error *err) {
  char name[96], where[160];
  switch (k->kind) {
  case MR_KK_INLINE_TABLE:
    snprintf(name, sizeof name, "ducklake_inlined_data_%llu_%llu", (unsigned long long)k->c[0],
             (unsigned long long)k->c[1]);
    break; /* and its ducklake_inlined_data_tables row, below */
  case MR_KK_INLINE_DELETE_TABLE:
    snprintf(name, sizeof name, "ducklake_inlined_delete_%llu", (unsigned long long)k->c[0]);
    return apply_inline_table(f, k, name, err);
  case MR_KK_INLINE_ROW:
    snprintf(name, sizeof name, "ducklake_inlined_data_%llu_%llu", (unsigned long long)k->c[0],
             (unsigned long long)k->c[1]);
    snprintf(where, sizeof where, " WHERE row_id = %llu AND begin_snapshot = %llu; ",
             (unsigned long long)k->c[2], (unsigned long long)k->c[3]);
    return apply_inline_row(f, k, name, where, err);
  case MR_KK_INLINE_DELETE_ROW:
    snprintf(name, sizeof name, "ducklake_inlined_delete_%llu", (unsigned long long)k->c[0]);
    snprintf(where, sizeof where, " WHERE file_id = %llu AND row_id = %llu; ",
             (unsigned long long)k->c[1], (unsigned long long)k->c[2]);
    return apply_inline_row(f, k, name, where, err);
  default:
    break;
  }
  bool any = false;
  for (size_t i = 0; i < catalog_table_count(); i++) {
    const catalog_table *tb = catalog_table_at(i);
    if (tb->kind != k->kind)
      continue;
    any = true;
    if (!add_entity_delete(&f->del, f->qs, tb, k))
      return mr_fail(err, MR_ERR_INVALID, "%s has no column of its key", tb->name);
  }
  if (!any) /* nothing of this kind is in the engine */
    return MR_OK;
  if (k->kind == MR_KK_INLINE_TABLE)
    return apply_inline_table(f, k, name, err);
  return store_entity_versions(f->st, k, cat_loader_visit, f->ld, err);
}

/* Applies the changelog of (from, to] in one engine transaction, reading
 * from rd, whose view may move during the reads (a following reader, or a
 * view's one catch-up): sys/head is read again before anything is applied,
 * and a head other than `to` fails MR_ERR_CONFLICT (nothing applied: the
 * reads may mix two states). */
static mr_status follow_changes(catalog *c, store *rd, store_head from, store_head to,
                                size_t *nrows, mr_error *err) {
  keyset ks = {0};
  follow_ctx f = {.c = c, .st = rd};
  mr_status rc = store_changelog_replay(rd, from.snapshot_id, to.snapshot_id, collect, &ks, err);
  if (rc == MR_OK && ks.records != to.snapshot_id - from.snapshot_id)
    rc = mr_fail(err, MR_ERR_NOT_FOUND, "%llu of the %llu changelog records are missing",
                 (unsigned long long)(to.snapshot_id - from.snapshot_id - ks.records),
                 (unsigned long long)(to.snapshot_id - from.snapshot_id));
  for (uint64_t s = from.snapshot_id + 1; rc == MR_OK && s <= to.snapshot_id; s++) {
    mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {s}};
    rc = keyset_add(&ks, &sk, err);
  }
  if (rc == MR_OK && ks.n > 1) { /* each entity once, however many commits changed it */
    qsort(ks.keys, ks.n, sizeof *ks.keys, key_cmp);
    size_t n = 1;
    for (size_t i = 1; i < ks.n; i++)
      if (mr_key_compare(&ks.keys[i], &ks.keys[n - 1]) != 0)
        ks.keys[n++] = ks.keys[i];
    ks.n = n;
  }
  if (rc == MR_OK && (f.qs = cat_quoted_schema(c)) == NULL)
    rc = mr_fail(err, MR_ERR_NOMEM, "catalog follow: out of memory");
  if (rc == MR_OK)
    rc = cat_loader_new(c, &f.ld, err);
  for (size_t i = 0; rc == MR_OK && i < ks.n; i++)
    rc = apply_key(&f, &ks.keys[i], err);
  if (rc == MR_OK && (f.del.oom || f.drop.oom))
    rc = mr_fail(err, MR_ERR_NOMEM, "catalog follow: out of memory");
  store_head now;
  if (rc == MR_OK && (rc = store_read_head(rd, &now, err)) == MR_OK &&
      !same_head(now, to))
    rc = mr_fail(err, MR_ERR_CONFLICT, "the store moved on during the catch-up");
  sql_error se;
  memset(&se, 0, sizeof se);
  if (rc == MR_OK && sql_engine_admin_begin(c->e, &se) != MR_OK)
    rc = mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "catalog follow: %s", se.base.msg);
  else if (rc == MR_OK) {
    if (f.del.len)
      rc = run_sql(c, f.del.s, false, "catalog follow", err);
    if (rc == MR_OK && f.drop.len)
      rc = run_sql(c, f.drop.s, true, "catalog follow", err);
    if (rc == MR_OK)
      rc = cat_loader_finish(f.ld, nrows, err);
    sql_error end;
    memset(&end, 0, sizeof end);
    if (sql_engine_admin_end(c->e, rc == MR_OK, &end) != MR_OK && rc == MR_OK)
      rc = mr_fail(err, end.base.code ? end.base.code : MR_ERR_IO, "catalog follow: %s",
                   end.base.msg);
  }
  for (size_t i = 0; i < f.ndropped; i++) {
    for (size_t j = 0; rc == MR_OK && j < c->ninline; j++)
      if (strcmp(c->inline_names[j], f.dropped[i]) == 0) {
        free(c->inline_names[j]);
        c->inline_names[j] = c->inline_names[--c->ninline];
        break;
      }
    free(f.dropped[i]);
  }
  free(f.dropped);
  cat_loader_free(f.ld);
  free(f.del.s);
  free(f.drop.s);
  free(f.qs);
  free(ks.keys);
  return rc;
}

mr_status catalog_follow(catalog *c, store_head from, store_head to, store_head *reached,
                         size_t *nrows, bool *reloaded, mr_error *err) {
  *reloaded = false;
  *reached = to;
  if (nrows)
    *nrows = 0;
  /* after CATALOG_FOLLOW_LIVE_TRIES catch-ups the writer outran, read
   * through a view, which does not follow the writer, so the replica
   * catches up however fast the writer commits */
  store *view = NULL, *rd = c->st;
  mr_status rc = MR_OK;
  int tries = 1;
  if (c->follow_conflicts >= CATALOG_FOLLOW_LIVE_TRIES) {
    if ((rc = store_open_view(c->st, &view, err)) != MR_OK)
      return mr_error_wrap(err, "catalog follow: opening a view of the store");
    rd = view;
    tries = VIEW_TRIES;
  }
again:
  if (view && (rc = store_read_head(view, &to, err)) != MR_OK) {
    mr_error ignored;
    (void)store_close(view, &ignored);
    return rc;
  }
  *reached = to;
  const char *why = NULL;
  uint64_t commits = to.snapshot_id - from.snapshot_id;
  bool moved = false;
  if (!c->spec_tables)
    why = "the catalog is new";
  else if (to.snapshot_id <= from.snapshot_id || to.batch_count - from.batch_count != commits)
    why = "a batch without a snapshot";
  else if (commits > CATALOG_FOLLOW_MAX_GAP)
    why = "many commits";
  else if ((rc = maintenance_moved(c, rd, &moved, err)) == MR_OK && moved)
    why = "a maintenance pass removed records";
  if (rc == MR_OK && why == NULL) {
    rc = follow_changes(c, rd, from, to, nrows, err);
    if (rc == MR_ERR_CONFLICT && --tries > 0) { /* a view that caught up once: again */
      mr_error_clear(err);
      goto again;
    }
    if (rc == MR_ERR_NOT_FOUND) { /* past the writer's window: expected, not a failure */
      why = "the gap reaches past the writer's changelog window";
      mr_error_clear(err);
      rc = MR_OK;
    } else if (rc != MR_OK && rc != MR_ERR_CONFLICT) {
      fprintf(stderr,
              "moraine: replica: applying snapshots %llu to %llu one by one failed (%s); "
              "reloading the catalog\n",
              (unsigned long long)from.snapshot_id + 1, (unsigned long long)to.snapshot_id,
              err->msg);
      why = "";
      mr_error_clear(err);
      rc = MR_OK;
    } else if (rc == MR_OK) {
      c->follow_conflicts = 0;
    }
  }
  mr_error ignored;
  if (view && store_close(view, &ignored) != MR_OK)
    fprintf(stderr, "moraine: catalog follow: closing the view of the store: %s\n", ignored.msg);
  if (rc == MR_ERR_CONFLICT)
    c->follow_conflicts++;
  if (rc != MR_OK || why == NULL)
    return rc;
  if (why[0])
    fprintf(stderr, "moraine: replica: reloading the catalog at snapshot %llu: %s\n",
            (unsigned long long)to.snapshot_id, why);
  *reloaded = true;
  rc = catalog_reload(c, reached, nrows, err);
  if (rc == MR_OK)
    c->follow_conflicts = 0;
  return rc;
}
