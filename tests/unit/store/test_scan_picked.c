/*
 * test_scan_picked.c — store_scan_picked on a real store of N_FILES data
 * file records (many read-ahead batches): the visits see exactly what pick
 * takes, in key order, seeks included; a failing visit or pick ends the
 * scan with its own error, and the reader stops reading early; a value
 * that does not decode fails the scan with the decode's error before any
 * later record is visited; the store still serves afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_test_util.h"

/* more files than the read-ahead holds (16 batches of 4096 taken records,
 * every other key taken), so a stopped reader provably stopped early */
enum { TABLE_ID = 7, N_FILES = 140000, SEEK_FROM = 15000, SEEK_TO = 17000 };

static store *the_store;

static void must(mr_status rc, const mr_error *e) {
  if (rc)
    fprintf(stderr, "unexpected: %s\n", e->msg);
  assert_int_equal(rc, MR_OK);
}

/* One commit into st: snapshot 1 and data files 0 .. n-1 of table TABLE_ID. */
static mr_status commit_files(store *st, uint64_t n, mr_error *e) {
  store_commit *c = NULL;
  mr_status rc = store_commit_begin(st, store_get_head(st), &c, e);
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = 1;
  if (!rc)
    rc = store_commit_snapshot(c, &snap, e);
  for (uint64_t id = 0; !rc && id < n; id++) {
    Moraine__V1__DataFile f = MORAINE__V1__DATA_FILE__INIT;
    f.data_file_id = (int64_t)id;
    f.table_id = TABLE_ID;
    f.begin_snapshot = 1;
    f.path = (char *)"f.parquet";
    mr_key k = {.kind = MR_KK_FILE, .c = {TABLE_ID, id}};
    rc = store_commit_put(c, &k, &f.base, e);
  }
  if (!rc)
    rc = store_commit_write(c, NULL, e);
  else if (c)
    store_commit_abort(c);
  return rc;
}

static int setup(void **state) {
  if (st_tmp_setup("scan-picked"))
    return -1;
  char url[1024];
  st_url("files", url, sizeof url);
  mr_error e;
  mr_status rc = store_open(url, NULL, &the_store, &e);
  if (!rc)
    rc = commit_files(the_store, N_FILES, &e);
  if (rc) {
    fprintf(stderr, "building the store: %s\n", e.msg);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  mr_error e;
  mr_status rc = store_close(the_store, &e);
  st_tmp_teardown();
  return rc == MR_OK ? 0 : -1;
}

/* pick's side and fn's side of the shared ctx, apart as the API asks. */
typedef struct scan_probe {
  /* pick's */
  size_t keys_picked;
  size_t fail_pick_at; /* 0: never */
  /* fn's */
  uint64_t *seen;
  size_t nseen;
  size_t fail_visit_at; /* 0: never */
} scan_probe;

/* Takes even file ids, skips odd ones, and at SEEK_FROM jumps to SEEK_TO. */
static store_pick pick_even(void *ctx, const mr_key *k, mr_keybuf *seek, mr_error *err) {
  scan_probe *p = ctx;
  if (k->kind != MR_KK_FILE)
    return STORE_PICK_TAKE;
  if (++p->keys_picked == p->fail_pick_at) {
    mr_fail(err, MR_ERR_INVALID, "pick refuses key %zu", p->keys_picked);
    return STORE_PICK_FAIL;
  }
  if (k->c[1] == SEEK_FROM) {
    mr_key to = {.kind = MR_KK_FILE, .c = {TABLE_ID, SEEK_TO}};
    return mr_key_encode(&to, seek, err) == MR_OK ? STORE_PICK_SEEK : STORE_PICK_FAIL;
  }
  return k->c[1] % 2 == 0 ? STORE_PICK_TAKE : STORE_PICK_SKIP;
}

static mr_status visit_file(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  scan_probe *p = ctx;
  if (k->kind != MR_KK_FILE)
    return MR_OK;
  const Moraine__V1__DataFile *f = (const Moraine__V1__DataFile *)m;
  if ((uint64_t)f->data_file_id != k->c[1])
    return mr_fail(err, MR_ERR_CORRUPTION, "value of file %llu is file %lld",
                   (unsigned long long)k->c[1], (long long)f->data_file_id);
  p->seen[p->nseen++] = k->c[1];
  if (p->nseen == p->fail_visit_at)
    return mr_fail(err, MR_ERR_CORRUPTION, "visit refuses record %zu", p->nseen);
  return MR_OK;
}

static mr_status scan_files(scan_probe *p, mr_error *e) {
  mr_key_range r;
  mr_status rc = mr_key_range_kind(MR_KK_FILE, false, &r, e);
  assert_int_equal(rc, MR_OK);
  p->seen = calloc(N_FILES, sizeof *p->seen);
  assert_non_null(p->seen);
  return store_scan_picked(the_store, &r, pick_even, visit_file, p, e);
}

static void test_visits_see_what_pick_takes_in_order(void **state) {
  scan_probe p = {0};
  mr_error e;
  must(scan_files(&p, &e), &e);
  size_t want = 0;
  for (uint64_t id = 0; id < N_FILES; id++) {
    if ((id > SEEK_FROM && id < SEEK_TO) || id % 2 || id == SEEK_FROM)
      continue;
    if (want >= p.nseen || p.seen[want] != id)
      fail_msg("visit %zu: want file %llu, got %s%llu", want, (unsigned long long)id,
               want >= p.nseen ? "none " : "",
               want < p.nseen ? (unsigned long long)p.seen[want] : 0);
    want++;
  }
  assert_int_equal(p.nseen, want);
  /* the keys the seek jumped over were never read */
  assert_int_equal(p.keys_picked, N_FILES - (SEEK_TO - SEEK_FROM - 1));
  free(p.seen);
}

static void test_a_failed_visit_ends_the_scan_early(void **state) {
  scan_probe p = {.fail_visit_at = 2500};
  mr_error e;
  mr_status rc = scan_files(&p, &e);
  assert_int_equal(rc, MR_ERR_CORRUPTION);
  assert_non_null(strstr(e.msg, "visit refuses record 2500"));
  assert_int_equal(p.nseen, 2500);
  /* the reader stopped within its read-ahead, far from the end */
  assert_true(p.keys_picked < N_FILES);
  free(p.seen);
  /* and the store serves the next scan whole */
  scan_probe again = {0};
  must(scan_files(&again, &e), &e);
  assert_int_equal(again.keys_picked, N_FILES - (SEEK_TO - SEEK_FROM - 1));
  free(again.seen);
}

static void test_a_failed_pick_fails_the_scan(void **state) {
  scan_probe p = {.fail_pick_at = 9001};
  mr_error e;
  mr_status rc = scan_files(&p, &e);
  assert_int_equal(rc, MR_ERR_INVALID);
  assert_non_null(strstr(e.msg, "pick refuses key 9001"));
  assert_int_equal(p.keys_picked, 9001);
  /* no record at or past the refused key reached a visit */
  assert_true(p.nseen <= 4500);
  for (size_t i = 0; i < p.nseen; i++)
    assert_true(p.seen[i] < 9000);
  free(p.seen);
}

static void test_an_empty_range_visits_nothing(void **state) {
  mr_key_range r;
  mr_error e;
  must(mr_key_range_kind(MR_KK_DELFILE, false, &r, &e), &e);
  scan_probe p = {0};
  p.seen = calloc(1, sizeof *p.seen);
  must(store_scan_picked(the_store, &r, pick_even, visit_file, &p, &e), &e);
  assert_int_equal(p.nseen, 0);
  assert_int_equal(p.keys_picked, 0);
  free(p.seen);
}

/* The value under file key DAMAGED_ID names another file: damage the
 * decode's key check catches. Written through kv into a store of its own,
 * the scan must fail with that check's error, and no record at or past the
 * damaged one reaches a visit. */
enum { DAMAGED_ID = 3000 };
static void test_a_value_that_does_not_decode_fails_the_scan(void **state) {
  char url[1024];
  st_url("damaged", url, sizeof url);
  mr_error e;
  store *st = NULL;
  must(store_open(url, NULL, &st, &e), &e);
  must(commit_files(st, 2 * DAMAGED_ID, &e), &e);
  must(store_close(st, &e), &e);

  Moraine__V1__DataFile bad = MORAINE__V1__DATA_FILE__INIT;
  bad.data_file_id = 1; /* under the key of file DAMAGED_ID */
  bad.table_id = TABLE_ID;
  bad.begin_snapshot = 1;
  bad.path = (char *)"f.parquet";
  mr_key bk = {.kind = MR_KK_FILE, .c = {TABLE_ID, DAMAGED_ID}};
  must(st_kv_put(url, &bk, &bad.base, &e), &e);

  must(store_open(url, NULL, &st, &e), &e);
  mr_key_range r;
  must(mr_key_range_kind(MR_KK_FILE, false, &r, &e), &e);
  scan_probe p = {0};
  p.seen = calloc(2 * DAMAGED_ID, sizeof *p.seen);
  assert_non_null(p.seen);
  mr_status rc = store_scan_picked(st, &r, pick_even, visit_file, &p, &e);
  assert_int_equal(rc, MR_ERR_CORRUPTION);
  assert_non_null(strstr(e.msg, "data_file_id is 1 in the value"));
  for (size_t i = 0; i < p.nseen; i++)
    assert_true(p.seen[i] < DAMAGED_ID);
  free(p.seen);
  must(store_close(st, &e), &e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_visits_see_what_pick_takes_in_order),
      cmocka_unit_test(test_a_failed_visit_ends_the_scan_early),
      cmocka_unit_test(test_a_failed_pick_fails_the_scan),
      cmocka_unit_test(test_an_empty_range_visits_nothing),
      cmocka_unit_test(test_a_value_that_does_not_decode_fails_the_scan),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
