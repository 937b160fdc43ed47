/*
 * test_branch.c — branches on real SlateDB temp folders: kv_clone of a
 * store built through the store API (st_build_catalog), cut back with
 * store_cut_back to every snapshot in turn. At each, the branch's current
 * load must be the source's catalog at that snapshot (store_read_at, ended
 * versions read as live), its head that snapshot, store_verify clean, and
 * the source unchanged; then both take commits and neither sees the
 * other's. Also the refusals: a snapshot after the head, a store that
 * already exists, a memory:// store.
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

/* A visitor collecting records as the current catalog holds them: history
 * keys and end_snapshot dropped (a version live at the snapshot). */
static mr_status collect_live(void *ctx, const mr_key *k, const ProtobufCMessage *v,
                              mr_error *err) {
  uint8_t *b = NULL;
  size_t n = 0;
  mr_status rc = mr_value_encode(k->kind, v, &b, &n, err);
  if (rc)
    return rc;
  ProtobufCMessage *m = NULL;
  mr_key cur = *k;
  if (cur.history) {
    cur.history = false;
    cur.c[mr_key_kind_get(k->kind)->ncomp] = 0;
  }
  rc = mr_value_decode(k, b, n, &m, err);
  free(b);
  if (rc)
    return rc;
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "end_snapshot");
  if (f && f->label == PROTOBUF_C_LABEL_OPTIONAL)
    *(protobuf_c_boolean *)((uint8_t *)m + f->quantifier_offset) = 0;
  rc = st_collect(ctx, &cur, m, err);
  mr_value_free(m);
  return rc;
}

static mr_status show_problem(void *ctx, const store_problem *p, mr_error *err) {
  fprintf(stderr, "  %s %s: %s\n", store_check_text(p->check), p->key, p->what);
  return MR_OK;
}

static void expect_clean(const char *url) {
  store *st = NULL;
  mr_error e;
  store_options o = {.read_only = true, .unchecked = true};
  must(store_open(url, &o, &st, &e), &e);
  store_verify_result r;
  store_verify_hooks hooks = {show_problem, NULL, NULL};
  must(store_verify(st, 0, &hooks, &r, &e), &e);
  must(store_close(st, &e), &e);
  assert_int_equal(r.problems, 0);
}

/* The source's catalog at snapshot s, as live records. */
static void source_at(const char *url, uint64_t s, st_list *out) {
  store *st = NULL;
  mr_error e;
  store_options o = {.read_only = true};
  must(store_open(url, &o, &st, &e), &e);
  memset(out, 0, sizeof *out);
  must(store_read_at(st, s, 0, collect_live, out, &e), &e);
  must(store_close(st, &e), &e);
  st_list_sort(out);
}

/* A commit of snapshot head+1 creating schema `id` named `name`. */
static void commit_schema(const char *url, uint64_t id, const char *name) {
  store *st = NULL;
  mr_error e;
  must(store_open(url, NULL, &st, &e), &e);
  store_head h = store_get_head(st);
  store_commit *c = NULL;
  must(store_commit_begin(st, h, &c, &e), &e);
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = (int64_t)h.snapshot_id + 1;
  Moraine__V1__Schema sc = MORAINE__V1__SCHEMA__INIT;
  sc.schema_id = (int64_t)id;
  sc.begin_snapshot = snap.snapshot_id;
  sc.schema_name = (char *)name;
  mr_key k = {.kind = MR_KK_SCHEMA, .c = {id}};
  must(store_commit_snapshot(c, &snap, &e), &e);
  must(store_commit_put(c, &k, &sc.base, &e), &e);
  must(store_commit_write(c, NULL, &e), &e);
  must(store_close(st, &e), &e);
}

static bool has_schema(const char *url, const char *name) {
  store *st = NULL;
  mr_error e;
  must(store_open(url, NULL, &st, &e), &e);
  uint64_t id = 0;
  bool found = false;
  must(store_lookup_name(st, MR_NAME_SCHEMA, 0, name, &id, &found, &e), &e);
  must(store_close(st, &e), &e);
  return found;
}

static store_head head_of(const char *url) {
  store *st = NULL;
  mr_error e;
  store_options o = {.read_only = true};
  must(store_open(url, &o, &st, &e), &e);
  store_head h = store_get_head(st);
  must(store_close(st, &e), &e);
  return h;
}

static void test_every_snapshot(void **state) {
  char src[4096];
  st_url("branch-source", src, sizeof src);
  st_build_catalog(src);
  store_head top = head_of(src);
  assert_true(top.snapshot_id > 10);
  for (uint64_t at = 0; at <= top.snapshot_id; at++) {
    char dst[4096], name[32];
    snprintf(name, sizeof name, "branch-%llu", (unsigned long long)at);
    st_url(name, dst, sizeof dst);
    mr_error e;
    must(kv_clone(src, dst, 0, &e), &e);
    store *st = NULL;
    must(store_open(dst, NULL, &st, &e), &e);
    store_cut_result r;
    must(store_cut_back(st, at, &r, &e), &e);
    assert_int_equal(r.head_before, top.snapshot_id);
    assert_int_equal(store_get_head(st).snapshot_id, at);
    st_list got = {0}, want;
    must(store_load_current(st, st_collect, &got, &e), &e);
    must(store_close(st, &e), &e);
    st_list_sort(&got);
    source_at(src, at, &want);
    assert_true(st_list_equal(&got, &want, name));
    st_list_free(&got);
    st_list_free(&want);
    expect_clean(dst);
    /* the source is as it was */
    store_head h = head_of(src);
    assert_int_equal(h.snapshot_id, top.snapshot_id);
    assert_int_equal(h.batch_count, top.batch_count);
  }
  expect_clean(src);
}

/* Branch and source take commits each, and neither sees the other's. */
static void test_diverge(void **state) {
  char src[4096], dst[4096];
  st_url("diverge-source", src, sizeof src);
  st_url("diverge-branch", dst, sizeof dst);
  st_build_catalog(src);
  mr_error e;
  must(kv_clone(src, dst, 0, &e), &e);
  store *st = NULL;
  must(store_open(dst, NULL, &st, &e), &e);
  store_cut_result r;
  must(store_cut_back(st, 5, &r, &e), &e);
  must(store_close(st, &e), &e);
  /* at 5 schema 2 "scratch" was there and table 100 was not renamed yet */
  assert_true(has_schema(dst, "scratch"));
  assert_false(has_schema(src, "scratch"));
  commit_schema(dst, 500, "only_on_the_branch");
  commit_schema(src, 600, "only_on_the_source");
  assert_true(has_schema(dst, "only_on_the_branch"));
  assert_false(has_schema(dst, "only_on_the_source"));
  assert_true(has_schema(src, "only_on_the_source"));
  assert_false(has_schema(src, "only_on_the_branch"));
  assert_int_equal(head_of(dst).snapshot_id, 6);
  expect_clean(dst);
  expect_clean(src);
}

static void test_refusals(void **state) {
  char src[4096], dst[4096];
  st_url("refuse-source", src, sizeof src);
  st_url("refuse-branch", dst, sizeof dst);
  st_build_catalog(src);
  mr_error e;
  /* into itself, into an existing store, between memory stores */
  assert_int_not_equal(kv_clone(src, src, 0, &e), MR_OK);
  must(kv_clone(src, dst, 0, &e), &e);
  assert_int_not_equal(kv_clone(src, dst, 0, &e), MR_OK);
  assert_non_null(strstr(e.msg, "already holds a store"));
  assert_int_not_equal(kv_clone("memory://a", "memory://b", 0, &e), MR_OK);
  /* a snapshot after the head, or not there */
  store *st = NULL;
  must(store_open(dst, NULL, &st, &e), &e);
  store_cut_result r;
  assert_int_equal(store_cut_back(st, 1000, &r, &e), MR_ERR_INVALID);
  must(store_close(st, &e), &e);
}

static int setup(void **state) {
  return st_tmp_setup("branch");
}

static int teardown(void **state) {
  st_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_snapshot),
      cmocka_unit_test(test_diverge),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
