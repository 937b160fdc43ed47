/*
 * test_store.c — direct store cases on real SlateDB temp folders: creating
 * and reopening, format refusals (newer/unknown format, migration marker,
 * keys without sys/format, a store without the segment extractor), head
 * conflicts, create-only mappings, the changelog window, expiry that is
 * stopped or crashes mid-way and is rerun, the last-16 maintenance status,
 * a fenced writer turning failed, what a read replica reads (every
 * version of one entity, a reader that follows the writer, a view that
 * does not), and a clean close that leaves no WAL object to replay.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "kv/kv.h"
#include "store_test_util.h"

static void must(mr_status rc, const mr_error *e) {
  if (rc)
    fprintf(stderr, "unexpected: %s\n", e->msg);
  assert_int_equal(rc, MR_OK);
}

/* One record straight through kv (the store at url must be closed). */
static void put_record(const char *url, const mr_key *k, const ProtobufCMessage *msg) {
  mr_error e;
  must(st_kv_put(url, k, msg, &e), &e);
}

static store *open_new(const char *name, char *url, size_t cap, uint64_t window) {
  st_url(name, url, cap);
  store *st = NULL;
  mr_error e;
  store_options o = {.changelog_window = window};
  must(store_open(url, &o, &st, &e), &e);
  return st;
}

static void expect_refused(const char *url, const char *needle) {
  store *st = NULL;
  mr_error e;
  mr_status rc = store_open(url, NULL, &st, &e);
  assert_int_not_equal(rc, MR_OK);
  assert_null(st);
  if (strstr(e.msg, needle) == NULL)
    fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, needle);
  assert_non_null(strstr(e.msg, needle));
}

/* A commit with snapshot s and one schema (id, name, path; path may be NULL). */
static mr_status commit_schema_at(store *st, store_head h, uint64_t s, uint64_t id,
                                  const char *name, const char *path, mr_error *e) {
  store_commit *c = NULL;
  mr_status rc = store_commit_begin(st, h, &c, e);
  if (rc)
    return rc;
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = (int64_t)s;
  Moraine__V1__Schema sc = MORAINE__V1__SCHEMA__INIT;
  sc.schema_id = (int64_t)id;
  sc.begin_snapshot = (int64_t)s;
  sc.schema_name = (char *)name;
  sc.path = (char *)path;
  mr_key k = {.kind = MR_KK_SCHEMA, .c = {id}};
  rc = store_commit_snapshot(c, &snap, e);
  if (!rc)
    rc = store_commit_put(c, &k, &sc.base, e);
  if (rc) {
    store_commit_abort(c);
    return rc;
  }
  return store_commit_write(c, NULL, e);
}

/* A commit with snapshot s and one schema (id, name). */
static mr_status commit_schema(store *st, store_head h, uint64_t s, uint64_t id, const char *name,
                               mr_error *e) {
  return commit_schema_at(st, h, s, id, name, NULL, e);
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void test_create_reopen(void **state) {
  char url[4096];
  int64_t before = now_us();
  store *st = open_new("create", url, sizeof url, 0);
  int64_t after = now_us();
  store_description d;
  mr_error de;
  must(store_describe(st, NULL, &d, &de), &de);
  /* sys/format records when the store was created */
  assert_true(d.has_created_at);
  assert_true(d.created_at_us >= before && d.created_at_us <= after);
  store_head h = store_get_head(st);
  assert_int_equal(h.snapshot_id, 0);
  assert_int_equal(h.batch_count, 0);
  store_census cs;
  mr_error e;
  must(store_take_census(st, &cs, &e), &e);
  assert_int_equal(cs.subspace[MR_SS_SYSTEM].keys, 2);
  must(commit_schema(st, h, 0, 1, "main", &e), &e);
  h = store_get_head(st);
  assert_int_equal(h.batch_count, 1);
  must(store_close(st, &e), &e);
  must(store_open(url, NULL, &st, &e), &e);
  h = store_get_head(st);
  assert_int_equal(h.snapshot_id, 0);
  assert_int_equal(h.batch_count, 1);
  uint64_t id = 0;
  bool found = false;
  must(store_lookup_name(st, MR_NAME_SCHEMA, 0, "main", &id, &found, &e), &e);
  assert_true(found);
  assert_int_equal(id, 1);
  /* reopening keeps the creation time */
  store_description d2;
  must(store_describe(st, NULL, &d2, &e), &e);
  assert_true(d2.has_created_at);
  assert_true(d2.created_at_us == d.created_at_us);
  must(store_close(st, &e), &e);
}

/* A store created before sys/format recorded its creation time describes
 * itself without one. */
static void test_no_creation_time(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("no-created-at", url, sizeof url, 0);
  must(store_close(st, &e), &e);
  Moraine__V1__SysFormat f = MORAINE__V1__SYS_FORMAT__INIT;
  f.layout_version = STORE_FORMAT_LATEST;
  f.writer_version = (char *)"0.0.1";
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  put_record(url, &fk, &f.base);
  must(store_open(url, NULL, &st, &e), &e);
  store_description d;
  must(store_describe(st, NULL, &d, &e), &e);
  assert_false(d.has_created_at);
  assert_string_equal(d.writer_version, "0.0.1");
  must(store_close(st, &e), &e);
}

static void test_format_refusals(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("newer", url, sizeof url, 0);
  must(store_close(st, &e), &e);
  Moraine__V1__SysFormat f = MORAINE__V1__SYS_FORMAT__INIT;
  f.layout_version = STORE_FORMAT_LATEST + 1;
  f.writer_version = (char *)"9.9.9";
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  put_record(url, &fk, &f.base);
  expect_refused(url, "newer");
  expect_refused(url, "9.9.9");

  f.layout_version = 3;
  put_record(url, &fk, &f.base);
  expect_refused(url, "layout 3");

  st = open_new("migration", url, sizeof url, 0);
  must(store_close(st, &e), &e);
  Moraine__V1__SysMigration m = MORAINE__V1__SYS_MIGRATION__INIT;
  m.from_format = 11;
  m.to_format = 12;
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  put_record(url, &mk, &m.base);
  expect_refused(url, "sys/migration");

  /* keys but no sys/format */
  st_url("foreign", url, sizeof url);
  Moraine__V1__SysHead hd = MORAINE__V1__SYS_HEAD__INIT;
  mr_key hk = {.kind = MR_KK_SYS_HEAD};
  put_record(url, &hk, &hd.base);
  expect_refused(url, "no sys/format");

  /* a store created without the segment extractor: kv refuses, we say so */
  st_url("noextractor", url, sizeof url);
  kv_db *db = NULL;
  kv_open_options ko = {.extractor_override = KV_EXTRACTOR_NONE};
  must(kv_open(url, &ko, &db, &e), &e);
  kv_batch *b = NULL;
  must(kv_batch_new(&b, &e), &e);
  must(kv_batch_put(b, "\x02\x02", 2, "x", 1, &e), &e);
  must(kv_write(db, b, &e), &e);
  kv_batch_free(b);
  must(kv_close(db, &e), &e);
  expect_refused(url, "extractor");
}

static void test_conflict(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("conflict", url, sizeof url, 0);
  store_head h = store_get_head(st);
  must(commit_schema(st, h, 0, 1, "a", &e), &e);
  store_census before, after;
  must(store_take_census(st, &before, &e), &e);
  assert_int_equal(commit_schema(st, h, 1, 2, "b", &e), MR_ERR_CONFLICT);
  assert_non_null(strstr(e.msg, "conflict"));
  must(store_take_census(st, &after, &e), &e);
  assert_memory_equal(&before, &after, sizeof before);
  assert_int_equal(store_get_head(st).batch_count, 1);
  /* the store is still usable */
  must(commit_schema(st, store_get_head(st), 1, 2, "b", &e), &e);
  must(store_close(st, &e), &e);
}

static mr_status put_mapping(store *st, uint64_t table, uint64_t id, mr_error *e) {
  store_commit *c = NULL;
  mr_status rc = store_commit_begin(st, store_get_head(st), &c, e);
  if (rc)
    return rc;
  Moraine__V1__ColumnMapping m = MORAINE__V1__COLUMN_MAPPING__INIT;
  m.mapping_id = (int64_t)id;
  m.table_id = (int64_t)table;
  mr_key k = {.kind = MR_KK_MAPPING, .c = {table, id}};
  rc = store_commit_put(c, &k, &m.base, e);
  if (rc) {
    store_commit_abort(c);
    return rc;
  }
  return store_commit_write(c, NULL, e);
}

static void test_mapping_create_only(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("mapping", url, sizeof url, 0);
  must(put_mapping(st, 5, 7, &e), &e);
  assert_int_equal(put_mapping(st, 5, 7, &e), MR_ERR_INVALID);
  assert_non_null(strstr(e.msg, "create-only"));
  must(put_mapping(st, 5, 8, &e), &e);
  must(store_close(st, &e), &e);
}

/* store_commit_forget removes a snapshot record, an ended (history) version
 * and a live version with its name entry; other kinds are refused. */
static void test_forget(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("forget", url, sizeof url, 0);
  must(commit_schema(st, store_get_head(st), 0, 1, "a", &e), &e);

  /* snapshot 1: schema 1 ends, schema 2 begins */
  store_commit *c = NULL;
  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = 1;
  must(store_commit_snapshot(c, &snap, &e), &e);
  Moraine__V1__Schema old = MORAINE__V1__SCHEMA__INIT;
  old.schema_id = 1;
  old.begin_snapshot = 0;
  old.has_end_snapshot = true;
  old.end_snapshot = 1;
  old.schema_name = "a";
  mr_key k1 = {.kind = MR_KK_SCHEMA, .c = {1}};
  must(store_commit_end(c, &k1, &old.base, &e), &e);
  Moraine__V1__Schema live = MORAINE__V1__SCHEMA__INIT;
  live.schema_id = 2;
  live.begin_snapshot = 1;
  live.schema_name = "b";
  mr_key k2 = {.kind = MR_KK_SCHEMA, .c = {2}};
  must(store_commit_put(c, &k2, &live.base, &e), &e);
  must(store_commit_write(c, NULL, &e), &e);

  store_census cs;
  must(store_take_census(st, &cs, &e), &e);
  assert_int_equal(cs.history_kind[MR_KK_SCHEMA].keys, 1);
  assert_int_equal(cs.current_kind[MR_KK_SCHEMA].keys, 1);
  assert_int_equal(cs.subspace[MR_SS_NAME].keys, 1);
  assert_int_equal(cs.subspace[MR_SS_SNAPSHOT].keys, 2);

  /* an unversioned kind cannot be forgotten */
  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  mr_key tk = {.kind = MR_KK_TSTAT, .c = {9}};
  assert_int_equal(store_commit_forget(c, &tk, NULL, &e), MR_ERR_INVALID);
  store_commit_abort(c);

  /* snapshot 2 forgets snapshot 0, the ended version and the live one */
  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  snap.snapshot_id = 2;
  must(store_commit_snapshot(c, &snap, &e), &e);
  mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {0}};
  must(store_commit_forget(c, &sk, NULL, &e), &e);
  mr_key hk = {.kind = MR_KK_SCHEMA, .history = true, .c = {1, 1}};
  must(store_commit_forget(c, &hk, NULL, &e), &e);
  must(store_commit_forget(c, &k2, &live.base, &e), &e);
  must(store_commit_write(c, NULL, &e), &e);

  must(store_take_census(st, &cs, &e), &e);
  assert_int_equal(cs.history_kind[MR_KK_SCHEMA].keys, 0);
  assert_int_equal(cs.current_kind[MR_KK_SCHEMA].keys, 0);
  assert_int_equal(cs.subspace[MR_SS_NAME].keys, 0);
  assert_int_equal(cs.subspace[MR_SS_SNAPSHOT].keys, 2); /* 1 and 2 */
  uint64_t id = 0;
  bool found = true;
  must(store_lookup_name(st, MR_NAME_SCHEMA, 0, "b", &id, &found, &e), &e);
  assert_false(found);
  must(store_close(st, &e), &e);
}

typedef struct cl_seen {
  uint64_t ids[64];
  size_t n;
  size_t keys_of_last;
} cl_seen;

static mr_status cl_visit(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  cl_seen *s = ctx;
  const Moraine__V1__Changelog *cl = (const Moraine__V1__Changelog *)v;
  s->ids[s->n++] = cl->snapshot_id;
  s->keys_of_last = cl->n_keys;
  return MR_OK;
}

static void test_changelog_window(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("changelog", url, sizeof url, 4);
  for (uint64_t s = 0; s < 10; s++) {
    char name[16];
    snprintf(name, sizeof name, "s%llu", (unsigned long long)s);
    must(commit_schema(st, store_get_head(st), s, s + 1, name, &e), &e);
  }
  cl_seen seen = {0};
  must(store_changelog_replay(st, 0, 100, cl_visit, &seen, &e), &e);
  assert_int_equal(seen.n, 4); /* 6, 7, 8, 9: each commit deleted S - 4 */
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(seen.ids[i], 6 + i);
  assert_int_equal(seen.keys_of_last, 1); /* current/schema{10} */
  memset(&seen, 0, sizeof seen);
  must(store_changelog_replay(st, 7, 8, cl_visit, &seen, &e), &e);
  assert_int_equal(seen.n, 1);
  assert_int_equal(seen.ids[0], 8);
  must(store_close(st, &e), &e);
}

/* ---- what a read replica reads -------------------------------------------- */

/* Snapshot s renames schema 1: its version begun at s - 1 ends, one begins. */
static void rename_schema(store *st, uint64_t s, const char *from, const char *to) {
  mr_error e;
  store_commit *c = NULL;
  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = (int64_t)s;
  must(store_commit_snapshot(c, &snap, &e), &e);
  Moraine__V1__Schema old = MORAINE__V1__SCHEMA__INIT;
  old.schema_id = 1;
  old.begin_snapshot = (int64_t)s - 1;
  old.has_end_snapshot = true;
  old.end_snapshot = (int64_t)s;
  old.schema_name = (char *)from;
  mr_key k = {.kind = MR_KK_SCHEMA, .c = {1}};
  must(store_commit_end(c, &k, &old.base, &e), &e);
  Moraine__V1__Schema live = MORAINE__V1__SCHEMA__INIT;
  live.schema_id = 1;
  live.begin_snapshot = (int64_t)s;
  live.schema_name = (char *)to;
  must(store_commit_put(c, &k, &live.base, &e), &e);
  must(store_commit_write(c, NULL, &e), &e);
}

typedef struct names_seen {
  char names[8][8];
  bool history[8];
  size_t n;
} names_seen;

static mr_status name_visit(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  names_seen *s = ctx;
  if (s->n < 8) {
    snprintf(s->names[s->n], sizeof s->names[0], "%s", ((const Moraine__V1__Schema *)v)->schema_name);
    s->history[s->n++] = k->history;
  }
  return MR_OK;
}

static void test_entity_versions(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("versions", url, sizeof url, 0);
  must(commit_schema(st, store_get_head(st), 0, 1, "a", &e), &e);
  must(commit_schema(st, store_get_head(st), 1, 2, "other", &e), &e);
  rename_schema(st, 2, "a", "b");
  rename_schema(st, 3, "b", "c");
  names_seen seen = {0};
  mr_key k = {.kind = MR_KK_SCHEMA, .c = {1}};
  must(store_entity_versions(st, &k, name_visit, &seen, &e), &e);
  /* the current version, then the ended ones oldest end first; schema 2 is not visited */
  assert_int_equal(seen.n, 3);
  assert_string_equal(seen.names[0], "c");
  assert_false(seen.history[0]);
  assert_string_equal(seen.names[1], "a");
  assert_true(seen.history[1]);
  assert_string_equal(seen.names[2], "b");
  mr_key gone = {.kind = MR_KK_SCHEMA, .c = {7}};
  memset(&seen, 0, sizeof seen);
  must(store_entity_versions(st, &gone, name_visit, &seen, &e), &e);
  assert_int_equal(seen.n, 0);
  mr_key hist = {.kind = MR_KK_SCHEMA, .history = true, .c = {1, 2}};
  assert_int_equal(store_entity_versions(st, &hist, name_visit, &seen, &e), MR_ERR_INVALID);
  must(store_close(st, &e), &e);
}

/* A following reader reaches the writer's new head by itself; a view
 * opened from it, once its one catch-up after the open is done, stays. */
static void test_following_reader_and_view(void **state) {
  char url[4096];
  mr_error e;
  store *w = open_new("follow", url, sizeof url, 0);
  must(commit_schema(w, store_get_head(w), 0, 1, "a", &e), &e);
  store *r = NULL, *view = NULL;
  store_options ro = {.read_only = true, .reader_poll_ms = 20};
  must(store_open(url, &ro, &r, &e), &e);
  must(store_open_view(r, &view, &e), &e);
  struct timespec settle = {1, 0}; /* a view's one catch-up, right after the open */
  nanosleep(&settle, NULL);
  store_head h;
  must(store_read_head(view, &h, &e), &e);
  assert_int_equal(h.snapshot_id, 0);
  assert_int_equal(store_read_head(w, &h, &e), MR_ERR_INVALID); /* a writer is never behind */
  must(commit_schema(w, store_get_head(w), 1, 2, "b", &e), &e);
  h.snapshot_id = 0;
  for (int i = 0; i < 500 && h.snapshot_id != 1; i++) { /* up to 10 s */
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
    must(store_read_head(r, &h, &e), &e);
  }
  assert_int_equal(h.snapshot_id, 1);
  assert_int_equal(store_get_head(r).snapshot_id, 1);
  must(store_read_head(view, &h, &e), &e);
  assert_int_equal(h.snapshot_id, 0);
  mr_key k2 = {.kind = MR_KK_SCHEMA, .c = {2}};
  ProtobufCMessage *m = NULL;
  assert_int_equal(store_get(view, &k2, &m, &e), MR_ERR_NOT_FOUND);
  must(store_close(view, &e), &e);
  must(store_close(r, &e), &e);
  must(store_close(w, &e), &e);
}

/* ---- expiry -------------------------------------------------------------- */

/* Snapshots 0..n: a table whose single file is replaced every snapshot,
 * with fstat per file and a tag entry added and ended. */
static void build_history(store *st, uint64_t n) {
  mr_error e;
  for (uint64_t s = 0; s <= n; s++) {
    store_commit *c = NULL;
    must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
    Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
    snap.snapshot_id = (int64_t)s;
    must(store_commit_snapshot(c, &snap, &e), &e);
    if (s > 0) {
      Moraine__V1__DataFile old = MORAINE__V1__DATA_FILE__INIT;
      old.data_file_id = (int64_t)(100 + s - 1);
      old.table_id = 1;
      old.begin_snapshot = (int64_t)s - 1;
      old.has_end_snapshot = 1;
      old.end_snapshot = (int64_t)s;
      mr_key ok = {.kind = MR_KK_FILE, .c = {1, 100 + s - 1}};
      must(store_commit_end(c, &ok, &old.base, &e), &e);
    }
    Moraine__V1__DataFile f = MORAINE__V1__DATA_FILE__INIT;
    f.data_file_id = (int64_t)(100 + s);
    f.table_id = 1;
    f.begin_snapshot = (int64_t)s;
    mr_key fk = {.kind = MR_KK_FILE, .c = {1, 100 + s}};
    must(store_commit_put(c, &fk, &f.base, &e), &e);
    Moraine__V1__FileColumnStats fs = MORAINE__V1__FILE_COLUMN_STATS__INIT;
    fs.data_file_id = (int64_t)(100 + s);
    fs.table_id = 1;
    fs.column_id = 1;
    mr_key sk = {.kind = MR_KK_FSTAT, .c = {1, 100 + s, 1}};
    must(store_commit_put(c, &sk, &fs.base, &e), &e);
    Moraine__V1__SchemaVersion sv = MORAINE__V1__SCHEMA_VERSION__INIT;
    sv.begin_snapshot = (int64_t)s;
    sv.table_id = 1;
    mr_key vk = {.kind = MR_KK_SCHEMA_VERSION, .c = {1, s}};
    must(store_commit_put(c, &vk, &sv.base, &e), &e);
    /* the tag container: entry i began at i, ended at i+1 (the last is live) */
    Moraine__V1__TagEntry ents[64], *ep[64];
    for (uint64_t i = 0; i <= s; i++) {
      moraine__v1__tag_entry__init(&ents[i]);
      ents[i].key = (char *)"k";
      ents[i].begin_snapshot = (int64_t)i;
      ents[i].has_end_snapshot = i < s;
      ents[i].end_snapshot = (int64_t)i + 1;
      ep[i] = &ents[i];
    }
    Moraine__V1__Tag tag = MORAINE__V1__TAG__INIT;
    tag.object_id = 1;
    tag.n_entries = s + 1;
    tag.entries = ep;
    mr_key tk = {.kind = MR_KK_TAG, .c = {1}};
    must(store_commit_put(c, &tk, &tag.base, &e), &e);
    must(store_commit_write(c, NULL, &e), &e);
  }
}

typedef struct stopper {
  uint64_t stop_after;
  uint64_t seen;
} stopper;

static bool stop_after(void *ctx, const store_expire_progress *p) {
  stopper *s = ctx;
  s->seen = p->batches;
  return p->batches < s->stop_after;
}

/* Everything but the system subspace (head count and status differ). */
static void same_data(store *a, store *b) {
  mr_error e;
  store_census ca, cb;
  must(store_take_census(a, &ca, &e), &e);
  must(store_take_census(b, &cb, &e), &e);
  for (int ss = 1; ss < MR_SS_COUNT; ss++) {
    if (ss == MR_SS_CHANGELOG)
      continue;
    assert_int_equal(ca.subspace[ss].keys, cb.subspace[ss].keys);
    assert_int_equal(ca.subspace[ss].bytes, cb.subspace[ss].bytes);
  }
  for (uint64_t s = 10; s <= 20; s++) {
    st_list la = {0}, lb = {0};
    must(store_read_at(a, s, 0, st_collect, &la, &e), &e);
    must(store_read_at(b, s, 0, st_collect, &lb, &e), &e);
    st_list_sort(&la);
    st_list_sort(&lb);
    assert_true(st_list_equal(&la, &lb, "read after expiry"));
    st_list_free(&la);
    st_list_free(&lb);
  }
}

static int crash_after;
static mr_status crash_fault(void *ctx, const char *point, mr_error *err) {
  if (crash_after-- > 0)
    return MR_OK;
  return mr_fail(err, MR_ERR_IO, "simulated crash at %s", point);
}

static void test_expire_resumable(void **state) {
  char ua[4096], ub[4096], uc[4096];
  mr_error e;
  store *a = open_new("expire-a", ua, sizeof ua, 0);
  store *b = open_new("expire-b", ub, sizeof ub, 0);
  store *c = open_new("expire-c", uc, sizeof uc, 0);
  build_history(a, 20);
  build_history(b, 20);
  build_history(c, 20);

  store_expire_progress p;
  must(store_expire(a, 10, "test", 0, NULL, NULL, &p, &e), &e);
  assert_int_equal(p.snapshots_dropped, 10);
  assert_int_equal(p.history_dropped, 10);
  assert_int_equal(p.fstat_dropped, 10);
  assert_int_equal(p.tag_entries_dropped, 10);
  assert_false(p.stopped);

  /* b: batches of 2, stopped after 3 batches, then rerun to the end */
  stopper s = {3, 0};
  must(store_expire(b, 10, "test", 2, stop_after, &s, &p, &e), &e);
  assert_true(p.stopped);
  assert_int_equal(p.batches, 3);
  must(store_close(b, &e), &e);
  must(store_open(ub, NULL, &b, &e), &e);
  must(store_expire(b, 10, "test", 2, NULL, NULL, &p, &e), &e);
  assert_false(p.stopped);
  same_data(a, b);

  /* c: a crash before the 4th batch's write, then rerun */
  crash_after = 3;
  store_set_fault(c, crash_fault, NULL);
  assert_int_equal(store_expire(c, 10, "test", 3, NULL, NULL, &p, &e), MR_ERR_IO);
  store_set_fault(c, NULL, NULL);
  must(store_close(c, &e), &e);
  must(store_open(uc, NULL, &c, &e), &e);
  must(store_expire(c, 10, "test", 3, NULL, NULL, &p, &e), &e);
  same_data(a, c);

  /* schema_version rows survive expiry */
  store_census cs;
  must(store_take_census(a, &cs, &e), &e);
  assert_int_equal(cs.subspace[MR_SS_SCHEMA_VERSION].keys, 21);
  assert_int_equal(cs.subspace[MR_SS_SNAPSHOT].keys, 11);
  must(store_close(a, &e), &e);
  must(store_close(b, &e), &e);
  must(store_close(c, &e), &e);
}

static void test_maintenance_status(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("status", url, sizeof url, 0);
  build_history(st, 3);
  for (int i = 0; i < 20; i++) {
    char trig[16];
    snprintf(trig, sizeof trig, "run%d", i);
    must(store_expire(st, 1, trig, 0, NULL, NULL, NULL, &e), &e);
  }
  must(store_close(st, &e), &e);
  kv_db *db = NULL;
  must(kv_open(url, NULL, &db, &e), &e);
  mr_key k = {.kind = MR_KK_SYS_MAINTENANCE};
  mr_keybuf kb;
  must(mr_key_encode(&k, &kb, &e), &e);
  void *val = NULL;
  size_t len = 0;
  must(kv_get(db, kb.b, kb.len, &val, &len, &e), &e);
  ProtobufCMessage *m = NULL;
  must(mr_value_decode(&k, val, len, &m, &e), &e);
  kv_free(val);
  const Moraine__V1__MaintenanceStatus *ms = (const Moraine__V1__MaintenanceStatus *)m;
  assert_int_equal(ms->n_pass, 16);
  assert_string_equal(ms->pass[0]->trigger, "run4");
  assert_string_equal(ms->pass[15]->trigger, "run19");
  for (size_t i = 1; i < ms->n_pass; i++)
    assert_true(ms->pass[i]->start_time_us >= ms->pass[i - 1]->start_time_us);
  assert_int_equal(ms->pass[15]->n_step, 4);
  assert_string_equal(ms->pass[15]->step[1]->name, "history");
  assert_string_equal(ms->pass[15]->step[1]->outcome, "done");
  mr_value_free(m);
  must(kv_close(db, &e), &e);
}

/* A commit that forgets snapshots and ended versions (DuckLake's expiry)
 * records a maintenance pass in its own batch; an ordinary commit does not. */
static void test_expiry_commit_records_a_pass(void **state) {
  char url[4096];
  mr_error e;
  store *st = open_new("expiry_pass", url, sizeof url, 0);
  build_history(st, 3);
  store_description d;
  must(store_describe(st, NULL, &d, &e), &e);
  assert_int_equal(d.maintenance_passes, 0);
  assert_true(d.objects > 0 && d.bytes > 0);

  store_commit *c = NULL;
  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = 4;
  must(store_commit_snapshot(c, &snap, &e), &e);
  for (uint64_t s = 0; s < 2; s++) {
    mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {s}};
    must(store_commit_forget(c, &sk, NULL, &e), &e);
    mr_key hk = {.kind = MR_KK_FILE, .history = true, .c = {1, 100 + s, s + 1}};
    must(store_commit_forget(c, &hk, NULL, &e), &e);
  }
  store_commit_counts n;
  store_commit_get_counts(c, &n);
  assert_int_equal(n.snapshots_forgotten, 2);
  assert_int_equal(n.history_forgotten, 2);
  assert_int_equal(n.inline_deleted, 0);
  must(store_commit_write(c, NULL, &e), &e);

  must(store_describe(st, NULL, &d, &e), &e);
  assert_int_equal(d.maintenance_passes, 1);
  assert_string_equal(d.last_pass_trigger, "ducklake expiry");
  assert_non_null(strstr(d.last_pass_steps,
                         "2 snapshots, 2 ended versions, 0 current records removed at snapshot 4"));
  store_census cs;
  must(store_take_census(st, &cs, &e), &e);
  assert_int_equal(cs.subspace[MR_SS_SNAPSHOT].keys, 3);
  assert_int_equal(cs.subspace[MR_SS_CHANGELOG].keys, 3); /* 0 and 1 went with their snapshots */

  must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
  snap.snapshot_id = 5;
  must(store_commit_snapshot(c, &snap, &e), &e);
  must(store_commit_write(c, NULL, &e), &e);
  must(store_close(st, &e), &e);
  must(store_open(url, NULL, &st, &e), &e);
  must(store_describe(st, NULL, &d, &e), &e);
  assert_int_equal(d.maintenance_passes, 1); /* the plain commit added none */
  must(store_close(st, &e), &e);
}

static void test_fenced_fails(void **state) {
  char url[4096];
  mr_error e;
  store *a = open_new("fence", url, sizeof url, 0);
  must(commit_schema(a, store_get_head(a), 0, 1, "main", &e), &e);
  store *b = NULL;
  must(store_open(url, NULL, &b, &e), &e);
  mr_status rc = commit_schema(a, store_get_head(a), 1, 2, "x", &e);
  assert_int_not_equal(rc, MR_OK);
  assert_int_not_equal(store_failed(a, &e), MR_OK);
  store_commit *c = NULL;
  assert_int_not_equal(store_commit_begin(a, store_get_head(a), &c, &e), MR_OK);
  assert_null(c);
  must(commit_schema(b, store_get_head(b), 1, 2, "x", &e), &e);
  store_close(a, NULL);
  must(store_close(b, &e), &e);
}

/* Overwrites every WAL object that holds data under the store folder at
 * url with bytes that do not decode; returns how many it overwrote. */
static int spoil_wal_objects(const char *url) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/wal", url + strlen("file://"));
  DIR *d = opendir(dir);
  assert_non_null(d);
  int spoiled = 0;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (de->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
      continue; /* zero bytes: a writer's fence, which holds nothing to replay */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    for (off_t i = 0; i < sb.st_size; i++)
      fputc('x', f);
    assert_int_equal(fclose(f), 0);
    spoiled++;
  }
  closedir(d);
  return spoiled;
}

/* After a clean close every write is behind SlateDB's replay point, so the
 * next open reads no WAL object, even when the session's last commit filled
 * the memtable by itself (SlateDB then freezes it at the WAL object before
 * that commit's; store_close writes sys/head again to move the point on).
 * Shown by spoiling every WAL object that holds data: the open must not
 * notice, and the commits must all be there, from L0. */
static void test_clean_close_leaves_no_wal_to_replay(void **state) {
  (void)state;
  char url[4096];
  mr_error e;
  store *st = open_new("settle", url, sizeof url, 0);
  must(commit_schema(st, store_get_head(st), 0, 1, "main", &e), &e);
  enum { BIG = 3 * KV_DEFAULT_L0_SST_BYTES / 2 }; /* fills a memtable alone */
  char *big = malloc(BIG + 1);
  assert_non_null(big);
  memset(big, 'b', BIG);
  big[BIG] = '\0';
  must(commit_schema_at(st, store_get_head(st), 1, 2, "big", big, &e), &e);
  store_head h = store_get_head(st);
  must(store_close(st, &e), &e);

  assert_true(spoil_wal_objects(url) > 0);
  must(store_open(url, NULL, &st, &e), &e);
  store_head h2 = store_get_head(st);
  assert_int_equal(h2.snapshot_id, h.snapshot_id);
  assert_int_equal(h2.batch_count, h.batch_count);
  const char *names[] = {"main", "big"};
  for (uint64_t i = 0; i < 2; i++) {
    uint64_t id = 0;
    bool found = false;
    must(store_lookup_name(st, MR_NAME_SCHEMA, 0, names[i], &id, &found, &e), &e);
    assert_true(found);
    assert_int_equal(id, i + 1);
  }
  mr_key k = {.kind = MR_KK_SCHEMA, .c = {2}};
  ProtobufCMessage *m = NULL;
  must(store_get(st, &k, &m, &e), &e);
  assert_string_equal(((Moraine__V1__Schema *)m)->path, big);
  mr_value_free(m);
  must(store_close(st, &e), &e);
  free(big);
}

/* A failed write whose batch never landed: recovery resumes commits, the
 * head is where it was, and a reopen finds nothing of the lost batch. */
static void test_recover_lost_write(void **state) {
  char url[4096];
  mr_error e;
  bool reload = true;
  store *st = open_new("recover-lost", url, sizeof url, 0);
  must(commit_schema(st, store_get_head(st), 1, 1, "main", &e), &e);
  store_head before = store_get_head(st);
  store_set_write_fault(st, STORE_WRITE_FAULT_LOST);
  assert_int_equal(commit_schema(st, before, 2, 2, "lost", &e), MR_ERR_IO);
  assert_int_equal(store_failed(st, &e), MR_ERR_IO);
  assert_int_equal(commit_schema(st, before, 2, 2, "refused", &e), MR_ERR_IO);
  must(store_recover(st, &reload, &e), &e);
  assert_false(reload);
  must(store_failed(st, &e), &e);
  store_head h = store_get_head(st);
  assert_int_equal(h.batch_count, before.batch_count);
  must(commit_schema(st, h, 2, 3, "after", &e), &e);
  must(store_close(st, &e), &e);
  must(store_open(url, NULL, &st, &e), &e);
  assert_int_equal(store_get_head(st).batch_count, before.batch_count + 1);
  assert_int_equal(store_get_head(st).snapshot_id, 2);
  must(store_close(st, &e), &e);
}

/* A failed write whose batch landed after all: recovery asks for a reload
 * and the store keeps refusing commits; a reopen has the batch. */
static void test_recover_landed_write(void **state) {
  char url[4096];
  mr_error e;
  bool reload = false;
  store *st = open_new("recover-landed", url, sizeof url, 0);
  must(commit_schema(st, store_get_head(st), 1, 1, "main", &e), &e);
  store_head before = store_get_head(st);
  store_set_write_fault(st, STORE_WRITE_FAULT_LANDED);
  assert_int_equal(commit_schema(st, before, 2, 2, "landed", &e), MR_ERR_IO);
  must(store_recover(st, &reload, &e), &e);
  assert_true(reload);
  assert_int_not_equal(store_failed(st, &e), MR_OK);
  assert_non_null(strstr(e.msg, "landed after all"));
  reload = false;
  must(store_recover(st, &reload, &e), &e); /* asked again: the same answer */
  assert_true(reload);
  must(store_close(st, &e), &e);
  must(store_open(url, NULL, &st, &e), &e);
  assert_int_equal(store_get_head(st).batch_count, before.batch_count + 1);
  assert_int_equal(store_get_head(st).snapshot_id, 2);
  must(store_close(st, &e), &e);
}

/* The owner's own doubt (a commit it could not apply) also means reload. */
static void test_in_doubt_means_reload(void **state) {
  char url[4096];
  mr_error e;
  bool reload = false;
  store *st = open_new("in-doubt", url, sizeof url, 0);
  must(store_recover(st, &reload, &e), &e); /* not failed: nothing to do */
  assert_false(reload);
  store_set_in_doubt(st, "the engine refused a commit");
  assert_int_not_equal(commit_schema(st, store_get_head(st), 1, 1, "main", &e), MR_OK);
  must(store_recover(st, &reload, &e), &e);
  assert_true(reload);
  must(store_close(st, &e), &e);
}

static int setup(void **state) { return st_tmp_setup("store"); }
static int teardown(void **state) {
  st_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_reopen),     cmocka_unit_test(test_no_creation_time),     cmocka_unit_test(test_format_refusals),
      cmocka_unit_test(test_conflict),          cmocka_unit_test(test_mapping_create_only),
      cmocka_unit_test(test_forget),
      cmocka_unit_test(test_changelog_window),  cmocka_unit_test(test_expire_resumable),
      cmocka_unit_test(test_entity_versions),   cmocka_unit_test(test_following_reader_and_view),
      cmocka_unit_test(test_maintenance_status), cmocka_unit_test(test_expiry_commit_records_a_pass),
      cmocka_unit_test(test_fenced_fails),
      cmocka_unit_test(test_recover_lost_write), cmocka_unit_test(test_recover_landed_write),
      cmocka_unit_test(test_in_doubt_means_reload),
      cmocka_unit_test(test_clean_close_leaves_no_wal_to_replay),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
