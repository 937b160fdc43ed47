/*
 * test_verify.c — store_verify on real SlateDB temp folders: a clean store
 * under the window it was written with, the changelog window checked both
 * ways (records outside a smaller window, missing ones inside a larger),
 * and damage only kv can write — a history version that ends before it
 * begins, two ended versions of one entity that overlap, a migration
 * marker, inlined rows without their inlined table or of another width —
 * reported on a store the checked open refuses. The end-to-end cases
 * (tests/e2e/test_toolbox.py) damage stores a real server wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The problems of one verify run. */
typedef struct found {
  store_check check[64];
  char key[64][256];
  char what[64][512];
  size_t n;
} found;

static mr_status collect(void *ctx, const store_problem *p, mr_error *err) {
  found *f = ctx;
  if (f->n < 64) {
    f->check[f->n] = p->check;
    snprintf(f->key[f->n], sizeof f->key[0], "%s", p->key);
    snprintf(f->what[f->n], sizeof f->what[0], "%s", p->what);
    f->n++;
  }
  return MR_OK;
}

/* Verifies url (read-only, unchecked) with the given window. */
static store_verify_result verify(const char *url, uint64_t window, found *f) {
  store *st = NULL;
  mr_error e;
  store_options o = {.read_only = true, .unchecked = true};
  must(store_open(url, &o, &st, &e), &e);
  memset(f, 0, sizeof *f);
  store_verify_hooks hooks = {collect, NULL, f};
  store_verify_result r;
  must(store_verify(st, window, &hooks, &r, &e), &e);
  must(store_close(st, &e), &e);
  assert_int_equal(r.problems, f->n);
  for (size_t i = 0; i < f->n; i++)
    fprintf(stderr, "  %s %s: %s\n", store_check_text(f->check[i]), f->key[i], f->what[i]);
  return r;
}

/* True when f holds a problem of check on key whose text contains words. */
static bool has(const found *f, store_check check, const char *key, const char *words) {
  for (size_t i = 0; i < f->n; i++)
    if (f->check[i] == check && strcmp(f->key[i], key) == 0 && strstr(f->what[i], words))
      return true;
  return false;
}

/* Snapshots 0..n-1, each creating schema i+1 named "s<i>", in a store
 * keeping `window` changelog records. */
static void build(const char *url, uint64_t window, int n) {
  store *st = NULL;
  mr_error e;
  store_options o = {.changelog_window = window};
  must(store_open(url, &o, &st, &e), &e);
  for (int i = 0; i < n; i++) {
    store_commit *c = NULL;
    must(store_commit_begin(st, store_get_head(st), &c, &e), &e);
    Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
    snap.snapshot_id = i;
    Moraine__V1__Schema sc = MORAINE__V1__SCHEMA__INIT;
    sc.schema_id = i + 1;
    sc.begin_snapshot = i;
    char name[16];
    snprintf(name, sizeof name, "s%d", i);
    sc.schema_name = name;
    mr_key k = {.kind = MR_KK_SCHEMA, .c = {(uint64_t)i + 1}};
    must(store_commit_snapshot(c, &snap, &e), &e);
    must(store_commit_put(c, &k, &sc.base, &e), &e);
    must(store_commit_write(c, NULL, &e), &e);
  }
  must(store_close(st, &e), &e);
}

static void test_window(void **state) {
  char url[4096];
  st_url("verify-window", url, sizeof url);
  build(url, 2, 5); /* changelog records 3 and 4 remain */
  found f;
  store_verify_result r = verify(url, 2, &f);
  assert_int_equal(r.problems, 0);
  assert_int_equal(r.head.snapshot_id, 4);
  assert_int_equal(r.snapshots, 5);
  assert_int_equal(r.changelog_records, 2);

  r = verify(url, 1, &f); /* keeps only 4: record 3 is outside */
  assert_int_equal(r.problems, 1);
  assert_true(has(&f, STORE_CHECK_CHANGELOG, "changelog{snapshot_id=3}", "outside the window"));

  r = verify(url, 10, &f); /* keeps 0..4: records 0..2 are missing */
  assert_int_equal(r.problems, 3);
  for (int i = 0; i < 3; i++) {
    char key[64];
    snprintf(key, sizeof key, "changelog{snapshot_id=%d}", i);
    assert_true(has(&f, STORE_CHECK_CHANGELOG, key, "is missing"));
  }
}

static void test_lifecycle_and_migration(void **state) {
  char url[4096];
  st_url("verify-damage", url, sizeof url);
  build(url, 0, 3);
  /* schema 9 ended at 1 though it began at 2 */
  Moraine__V1__Schema sc = MORAINE__V1__SCHEMA__INIT;
  sc.schema_id = 9;
  sc.begin_snapshot = 2;
  sc.has_end_snapshot = true;
  sc.end_snapshot = 1;
  mr_key hk = {.kind = MR_KK_SCHEMA, .history = true, .c = {9, 1}};
  put_record(url, &hk, &sc.base);
  /* schema 8 was live over [0, 1) and, again, over [0, 2): they overlap */
  Moraine__V1__Schema a = MORAINE__V1__SCHEMA__INIT, b = MORAINE__V1__SCHEMA__INIT;
  a.schema_id = b.schema_id = 8;
  a.begin_snapshot = b.begin_snapshot = 0;
  a.has_end_snapshot = b.has_end_snapshot = true;
  a.end_snapshot = 1;
  b.end_snapshot = 2;
  mr_key ak = {.kind = MR_KK_SCHEMA, .history = true, .c = {8, 1}};
  mr_key bk = {.kind = MR_KK_SCHEMA, .history = true, .c = {8, 2}};
  put_record(url, &ak, &a.base);
  put_record(url, &bk, &b.base);
  Moraine__V1__SysMigration mg = MORAINE__V1__SYS_MIGRATION__INIT;
  mg.from_format = 11;
  mg.to_format = 12;
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  put_record(url, &mk, &mg.base);

  store *st = NULL;
  mr_error e;
  store_options checked = {.read_only = true};
  assert_int_not_equal(store_open(url, &checked, &st, &e), MR_OK);

  found f;
  store_verify_result r = verify(url, 0, &f);
  assert_int_equal(r.problems, 3);
  assert_true(has(&f, STORE_CHECK_LIFECYCLE, "history/schema{schema_id=8,end_snapshot=2}",
                  "begins at snapshot 0, before the version before it "
                  "(history/schema{schema_id=8,end_snapshot=1}) ends"));
  assert_true(has(&f, STORE_CHECK_LIFECYCLE, "history/schema{schema_id=9,end_snapshot=1}",
                  "begins at snapshot 2, after it ends at 1"));
  assert_true(has(&f, STORE_CHECK_SYSTEM, "sys/migration", "from format 11 to 12"));
}

static void test_inline_rows_need_their_tables(void **state) {
  char url[4096];
  st_url("verify-inline", url, sizeof url);
  build(url, 0, 2);
  /* table 5: data table of schema version 2 with one column; a row of
   * version 1 (no table) and a row of version 2 with two values */
  Moraine__V1__InlineColumn colv = MORAINE__V1__INLINE_COLUMN__INIT, *cols[] = {&colv};
  colv.name = "a";
  colv.type = "INTEGER";
  Moraine__V1__InlineDataTable dt = MORAINE__V1__INLINE_DATA_TABLE__INIT;
  dt.table_id = 5;
  dt.schema_version = 2;
  dt.n_column = 1;
  dt.column = cols;
  mr_key dtk = {.kind = MR_KK_INLINE_TABLE, .c = {5, 2}};
  put_record(url, &dtk, &dt.base);
  Moraine__V1__InlineCell c1 = MORAINE__V1__INLINE_CELL__INIT, *cells[] = {&c1, &c1};
  c1.value.data = (uint8_t *)"1";
  c1.value.len = 1;
  Moraine__V1__InlineDataRow row = MORAINE__V1__INLINE_DATA_ROW__INIT;
  row.table_id = 5;
  row.schema_version = 1;
  row.row_id = 0;
  row.begin_snapshot = 1;
  row.n_cell = 1;
  row.cell = cells;
  mr_key r1 = {.kind = MR_KK_INLINE_ROW, .c = {5, 1, 0, 1}};
  put_record(url, &r1, &row.base);
  row.schema_version = 2;
  row.n_cell = 2;
  mr_key r2 = {.kind = MR_KK_INLINE_ROW, .c = {5, 2, 0, 1}};
  put_record(url, &r2, &row.base);
  row.n_cell = 1; /* a row of the right width: no problem */
  row.row_id = 1;
  mr_key r3 = {.kind = MR_KK_INLINE_ROW, .c = {5, 2, 1, 1}};
  put_record(url, &r3, &row.base);
  /* a deletion of table 6, which has no inlined delete table */
  Moraine__V1__InlineDeleteRow del = MORAINE__V1__INLINE_DELETE_ROW__INIT;
  del.table_id = 6;
  del.file_id = 3;
  del.row_id = 4;
  del.begin_snapshot = 1;
  mr_key dk = {.kind = MR_KK_INLINE_DELETE_ROW, .c = {6, 3, 4}};
  put_record(url, &dk, &del.base);

  found f;
  store_verify_result r = verify(url, 0, &f);
  assert_int_equal(r.problems, 3);
  assert_true(has(&f, STORE_CHECK_INLINE,
                  "inline/data_row{table_id=5,schema_version=1,row_id=0,begin_snapshot=1}",
                  "belongs to no inlined table (inline/data_table{table_id=5,schema_version=1} is "
                  "missing)"));
  assert_true(
      has(&f, STORE_CHECK_INLINE,
          "inline/data_row{table_id=5,schema_version=2,row_id=0,begin_snapshot=1}",
          "holds 2 values, but inline/data_table{table_id=5,schema_version=2} has 1 columns"));
  assert_true(
      has(&f, STORE_CHECK_INLINE, "inline/delete_row{table_id=6,file_id=3,row_id=4}",
          "belongs to no inlined delete table (inline/delete_table{table_id=6} is missing)"));
}

static void test_unknown_format_cannot_verify(void **state) {
  char url[4096];
  st_url("verify-format", url, sizeof url);
  build(url, 0, 1);
  Moraine__V1__SysFormat fm = MORAINE__V1__SYS_FORMAT__INIT;
  fm.layout_version = STORE_FORMAT_LATEST + 1;
  fm.writer_version = "9.9.9";
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  put_record(url, &fk, &fm.base);
  store *st = NULL;
  mr_error e;
  store_options o = {.read_only = true, .unchecked = true};
  must(store_open(url, &o, &st, &e), &e);
  found f = {0};
  store_verify_hooks hooks = {collect, NULL, &f};
  store_verify_result r;
  assert_int_equal(store_verify(st, 0, &hooks, &r, &e), MR_ERR_INVALID);
  assert_non_null(strstr(e.msg, "this build verifies layouts"));
  must(store_close(st, &e), &e);
}

static int setup(void **state) {
  return st_tmp_setup("verify");
}

static int teardown(void **state) {
  st_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window),
      cmocka_unit_test(test_lifecycle_and_migration),
      cmocka_unit_test(test_inline_rows_need_their_tables),
      cmocka_unit_test(test_unknown_format_cannot_verify),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
