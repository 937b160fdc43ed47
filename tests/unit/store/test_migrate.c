/*
 * test_migrate.c — store_migrate on real SlateDB temp folders. A catalog is
 * built natively through the store API (schemas, tables renamed and dropped,
 * data files, delete files ended and replaced), then turned into the same
 * catalog at layout 9, 10 or 11 (tests/unit/common/store_downgrade.c:
 * directories deleted, sys/format rewritten, through kv and the key tree).
 * Migrating it must give back the native store key for key (sys/head aside:
 * migration batches count as batches) with store_verify clean — in one go,
 * in many small steps, stopped and rerun, and crashed before every single
 * batch and rerun. Also: the commit-log origin (sys/format field 4)
 * survives, the open's refusals name `moraine migrate`, and
 * what cannot be migrated is refused.
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
#include "store_downgrade.h"
#include "store_test_util.h"

static void must(mr_status rc, const mr_error *e) {
  if (rc)
    fprintf(stderr, "unexpected: %s\n", e->msg);
  assert_int_equal(rc, MR_OK);
}

/* ---- the store as bytes ------------------------------------------------------ */

typedef struct raw {
  uint8_t *k, *v;
  size_t kl, vl;
} raw;

typedef struct raw_list {
  raw *r;
  size_t n, cap;
} raw_list;

static void raw_free(raw_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->r[i].k);
    free(l->r[i].v);
  }
  free(l->r);
  memset(l, 0, sizeof *l);
}

static uint8_t *dup(const void *p, size_t n) {
  uint8_t *d = malloc(n ? n : 1);
  assert_non_null(d);
  if (n)
    memcpy(d, p, n);
  return d;
}

/* Every key and value of the (closed) store at url, in key order. */
static void read_all(const char *url, raw_list *out) {
  memset(out, 0, sizeof *out);
  kv_open_options o = {.read_only = true};
  kv_db *db = NULL;
  mr_error e;
  must(kv_open(url, &o, &db, &e), &e);
  kv_iter *it = NULL;
  must(kv_iter_open(db, NULL, 0, NULL, 0, &it, &e), &e);
  const void *kp, *vp;
  size_t kl, vl;
  mr_status rc;
  while ((rc = kv_iter_next(it, &kp, &kl, &vp, &vl, &e)) == MR_OK) {
    if (out->n == out->cap) {
      out->cap = out->cap ? 2 * out->cap : 256;
      out->r = realloc(out->r, out->cap * sizeof *out->r);
      assert_non_null(out->r);
    }
    out->r[out->n++] = (raw){dup(kp, kl), dup(vp, vl), kl, vl};
  }
  assert_int_equal(rc, MR_ERR_NOT_FOUND);
  kv_iter_close(it);
  must(kv_close(db, &e), &e);
}

static bool is_key(const raw *r, mr_key_kind kind) {
  mr_key k = {.kind = kind};
  mr_keybuf kb;
  mr_error e;
  must(mr_key_encode(&k, &kb, &e), &e);
  return r->kl == kb.len && memcmp(r->k, kb.b, kb.len) == 0;
}

static void print_key(const char *side, const raw *r) {
  mr_key k;
  mr_error e;
  char text[MR_KEY_TEXT_MAX] = "?";
  if (mr_key_decode(r->k, r->kl, &k, &e) == MR_OK)
    if (mr_key_format(&k, text, sizeof text, &e) != MR_OK)
      snprintf(text, sizeof text, "?");
  fprintf(stderr, "  %s %s\n", side, text);
}

/* got equals want key for key and value for value, sys/head aside (its
 * snapshot id must agree; migration batches add to the batch count). */
static void expect_same(const raw_list *got, const raw_list *want) {
  size_t i = 0, j = 0, diffs = 0;
  while (i < got->n || j < want->n) {
    int c;
    if (i == got->n)
      c = 1;
    else if (j == want->n)
      c = -1;
    else {
      size_t n = got->r[i].kl < want->r[j].kl ? got->r[i].kl : want->r[j].kl;
      c = memcmp(got->r[i].k, want->r[j].k, n);
      if (c == 0)
        c = (got->r[i].kl > want->r[j].kl) - (got->r[i].kl < want->r[j].kl);
    }
    if (c < 0) {
      print_key("migrated only", &got->r[i++]);
      diffs++;
    } else if (c > 0) {
      print_key("native only  ", &want->r[j++]);
      diffs++;
    } else {
      const raw *g = &got->r[i++], *w = &want->r[j++];
      if (is_key(g, MR_KK_SYS_HEAD)) {
        mr_key hk = {.kind = MR_KK_SYS_HEAD};
        ProtobufCMessage *gm = NULL, *wm = NULL;
        mr_error e;
        must(mr_value_decode(&hk, g->v, g->vl, &gm, &e), &e);
        must(mr_value_decode(&hk, w->v, w->vl, &wm, &e), &e);
        const Moraine__V1__SysHead *gh = (void *)gm, *wh = (void *)wm;
        assert_int_equal(gh->snapshot_id, wh->snapshot_id);
        assert_true(gh->batch_count > wh->batch_count);
        mr_value_free(gm);
        mr_value_free(wm);
      } else if (g->vl != w->vl || memcmp(g->v, w->v, g->vl) != 0) {
        print_key("value differs", g);
        diffs++;
      }
    }
  }
  assert_int_equal(diffs, 0);
}

/* ---- helpers ------------------------------------------------------------------ */

static void downgrade(const char *url, unsigned format) {
  kv_db *db = NULL;
  mr_error e;
  must(kv_open(url, NULL, &db, &e), &e);
  size_t removed = 0;
  must(test_store_downgrade(db, format, &removed, &e), &e);
  must(kv_close(db, &e), &e);
  /* the directories held entries: the older store really lacks them */
  assert_true(removed > 0);
}

/* store_open (a server's open) refuses url with a message holding needle. */
static void expect_open_refused(const char *url, const char *needle) {
  store *st = NULL;
  mr_error e;
  assert_int_not_equal(store_open(url, NULL, &st, &e), MR_OK);
  assert_null(st);
  if (strstr(e.msg, needle) == NULL)
    fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, needle);
  assert_non_null(strstr(e.msg, needle));
}

static store *open_migrating(const char *url) {
  store *st = NULL;
  mr_error e;
  store_options o = {.migrating = true};
  must(store_open(url, &o, &st, &e), &e);
  return st;
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
  assert_true(r.keys > 0);
}

/* A store built natively, its keys and values read into *want, then
 * downgraded to `format`. */
static void native_then_old(const char *name, unsigned format, char *url, size_t cap,
                            raw_list *want) {
  st_url(name, url, cap);
  st_build_catalog(url);
  read_all(url, want);
  downgrade(url, format);
}

/* ---- cases -------------------------------------------------------------------- */

/* 9, 10 and 11 each migrate to the native store, in one go. */
static void test_each_format(void **state) {
  for (unsigned format = 9; format <= 11; format++) {
    char old[4096], name[32];
    snprintf(name, sizeof name, "each-%u", format);
    raw_list want, got;
    native_then_old(name, format, old, sizeof old, &want);
    char layout[32];
    snprintf(layout, sizeof layout, "layout %u", format);
    expect_open_refused(old, layout);
    expect_open_refused(old, "moraine migrate");
    store *st = open_migrating(old);
    store_migrate_result r;
    mr_error e;
    must(store_migrate(st, 0, NULL, NULL, &r, &e), &e);
    assert_int_equal(r.format_before, format);
    assert_int_equal(r.format_after, STORE_FORMAT_LATEST);
    assert_false(r.resumed);
    assert_false(r.stopped);
    /* one batch per hop: 9 and 10 take two hops, 11 one */
    assert_int_equal(r.steps, format == 11 ? 1 : 2);
    must(store_close(st, &e), &e);
    read_all(old, &got);
    expect_same(&got, &want);
    expect_clean(old);
    /* a migrated store serves: a server's open takes it */
    must(store_open(old, NULL, &st, &e), &e);
    uint64_t id = 0;
    bool found = false;
    must(store_lookup_name(st, MR_NAME_TABLE, 1, "renamed3", &id, &found, &e), &e);
    assert_true(found);
    assert_int_equal(id, 103);
    must(store_close(st, &e), &e);
    raw_free(&want);
    raw_free(&got);
  }
}

static bool stop_after_two(void *ctx, const store_migrate_progress *p) {
  int *calls = ctx;
  return ++*calls % 2 != 0;
}

/* Small steps, stopped every second step and rerun: the marker carries the
 * cursor, the server's open refuses the store until the end. */
static void test_steps_stop_resume(void **state) {
  char old[4096];
  raw_list want, got;
  native_then_old("steps", 9, old, sizeof old, &want);
  int runs = 0, calls = 0;
  uint64_t steps = 0;
  bool resumed_once = false;
  for (;;) {
    store *st = open_migrating(old);
    store_migrate_result r;
    mr_error e;
    must(store_migrate(st, 2, stop_after_two, &calls, &r, &e), &e);
    must(store_close(st, &e), &e);
    runs++;
    steps += r.steps;
    resumed_once |= r.resumed;
    if (!r.stopped) {
      assert_int_equal(r.format_after, STORE_FORMAT_LATEST);
      break;
    }
    expect_open_refused(old, "moraine migrate");
    assert_true(runs < 100);
  }
  assert_true(resumed_once);
  /* 1 schema + 12 table records in steps of 2 (the last one publishes
   * layout 11), then 12 current delete files and the publishing step: many
   * more steps than hops */
  assert_int_equal(steps, 7 + 7);
  assert_true(runs >= 6);
  read_all(old, &got);
  expect_same(&got, &want);
  expect_clean(old);
  raw_free(&want);
  raw_free(&got);
}

typedef struct crash_at {
  int writes_left; /* batches allowed before the crash */
  bool crashed;
} crash_at;

static mr_status crash_fault(void *ctx, const char *point, mr_error *err) {
  crash_at *c = ctx;
  if (c->writes_left-- > 0)
    return MR_OK;
  c->crashed = true;
  return mr_fail(err, MR_ERR_IO, "injected crash at %s", point);
}

/* A crash before every single batch, then a rerun: for each n, the first
 * run dies before its n-th batch; the store is then reopened and migrated
 * to the end. */
static void test_crash_before_every_batch(void **state) {
  for (int n = 0;; n++) {
    char old[4096], name[32];
    raw_list want;
    snprintf(name, sizeof name, "crash-%d", n);
    native_then_old(name, 10, old, sizeof old, &want);
    store *st = open_migrating(old);
    crash_at c = {n, false};
    store_set_fault(st, crash_fault, &c);
    store_migrate_result r;
    mr_error e;
    mr_status rc = store_migrate(st, 3, NULL, NULL, &r, &e);
    (void)store_close(st, NULL);
    if (!c.crashed) { /* n is past the last batch: the run finished */
      must(rc, &e);
      assert_true(n > 4);
      raw_free(&want);
      break;
    }
    assert_int_equal(rc, MR_ERR_IO);
    expect_open_refused(old, "moraine migrate");
    /* the rerun resumes exactly when the crash left a marker */
    store_options ro = {.read_only = true, .unchecked = true};
    store_description d;
    must(store_open(old, &ro, &st, &e), &e);
    must(store_describe(st, NULL, &d, &e), &e);
    must(store_close(st, &e), &e);
    st = open_migrating(old);
    must(store_migrate(st, 3, NULL, NULL, &r, &e), &e);
    must(store_close(st, &e), &e);
    assert_int_equal(r.format_after, STORE_FORMAT_LATEST);
    assert_int_equal(r.resumed, d.has_migration);
    assert_int_equal(r.format_before, d.format);
    raw_list got;
    read_all(old, &got);
    expect_same(&got, &want);
    raw_free(&got);
    raw_free(&want);
    expect_clean(old);
  }
}

/* sys/format field 4 (commit_log_batch_origin, RFC 0002: an imported
 * catalog's origin) survives the migration byte for byte. */
static void test_origin_survives(void **state) {
  char url[4096];
  st_url("origin", url, sizeof url);
  st_build_catalog(url);
  /* an imported catalog's origin in sys/format (field 4) */
  kv_db *db = NULL;
  mr_error e;
  must(kv_open(url, NULL, &db, &e), &e);
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  mr_keybuf kb;
  must(mr_key_encode(&fk, &kb, &e), &e);
  void *v = NULL;
  size_t vl = 0;
  must(kv_get(db, kb.b, kb.len, &v, &vl, &e), &e);
  ProtobufCMessage *m = NULL;
  must(mr_value_decode(&fk, v, vl, &m, &e), &e);
  kv_free(v);
  static char origin[] = "ducklake:/tmp/origin.ducklake";
  Moraine__V1__SysFormat *f = (Moraine__V1__SysFormat *)m;
  f->commit_log_batch_origin = origin;
  uint8_t *enc = NULL;
  size_t elen = 0;
  must(mr_value_encode(fk.kind, m, &enc, &elen, &e), &e);
  f->commit_log_batch_origin = NULL; /* a static string, not the message's to free */
  mr_value_free(m);
  kv_batch *b = NULL;
  must(kv_batch_new(&b, &e), &e);
  must(kv_batch_put(b, kb.b, kb.len, enc, elen, &e), &e);
  must(kv_write(db, b, &e), &e);
  kv_batch_free(b);
  free(enc);
  must(kv_close(db, &e), &e);

  raw_list want, got;
  read_all(url, &want);
  downgrade(url, 9);
  store *st = open_migrating(url);
  store_migrate_result r;
  must(store_migrate(st, 4, NULL, NULL, &r, &e), &e);
  must(store_close(st, &e), &e);
  read_all(url, &got);
  expect_same(&got, &want); /* sys/format included, byte for byte */
  bool seen = false;
  for (size_t i = 0; i < got.n; i++)
    if (is_key(&got.r[i], MR_KK_SYS_FORMAT))
      for (size_t j = 0; j + sizeof origin - 1 <= got.r[i].vl; j++)
        seen |= memcmp(got.r[i].v + j, origin, sizeof origin - 1) == 0;
  assert_true(seen);
  expect_clean(url);
  raw_free(&want);
  raw_free(&got);
}

/* What is not migrated: the latest layout (no step), a layout too old, a
 * marker that does not match sys/format, an older store that already holds
 * the directory its layout lacks, a read-only store. */
static void test_refusals(void **state) {
  char url[4096];
  mr_error e;
  st_url("refuse-latest", url, sizeof url);
  st_build_catalog(url);
  raw_list before, after;
  read_all(url, &before);
  store *st = open_migrating(url);
  store_migrate_result r;
  must(store_migrate(st, 0, NULL, NULL, &r, &e), &e);
  must(store_close(st, &e), &e);
  assert_int_equal(r.steps, 0);
  assert_int_equal(r.format_after, STORE_FORMAT_LATEST);
  read_all(url, &after);
  assert_int_equal(before.n, after.n);
  raw_free(&before);
  raw_free(&after);

  /* layout 8: nothing migrates it */
  Moraine__V1__SysFormat f = MORAINE__V1__SYS_FORMAT__INIT;
  f.layout_version = 8;
  f.writer_version = (char *)"0.0.8";
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  must(st_kv_put(url, &fk, &f.base, &e), &e);
  expect_open_refused(url, "migrates 9..11");
  st = open_migrating(url);
  assert_int_equal(store_migrate(st, 0, NULL, NULL, &r, &e), MR_ERR_INVALID);
  assert_non_null(strstr(e.msg, "layout 8"));
  must(store_close(st, &e), &e);

  /* layout 10 that still has its name directory (never downgraded) */
  f.layout_version = 10;
  must(st_kv_put(url, &fk, &f.base, &e), &e);
  st = open_migrating(url);
  assert_int_equal(store_migrate(st, 0, NULL, NULL, &r, &e), MR_ERR_INVALID);
  assert_non_null(strstr(e.msg, "already holds keys"));
  must(store_close(st, &e), &e);

  /* a marker for another hop than sys/format's */
  st_url("refuse-marker", url, sizeof url);
  st_build_catalog(url);
  downgrade(url, 9);
  Moraine__V1__SysMigration mg = MORAINE__V1__SYS_MIGRATION__INIT;
  mg.from_format = 11;
  mg.to_format = 12;
  mr_key mk = {.kind = MR_KK_SYS_MIGRATION};
  must(st_kv_put(url, &mk, &mg.base, &e), &e);
  expect_open_refused(url, "interrupted");
  expect_open_refused(url, "moraine migrate");
  st = open_migrating(url);
  assert_int_equal(store_migrate(st, 0, NULL, NULL, &r, &e), MR_ERR_CORRUPTION);
  assert_non_null(strstr(e.msg, "sys/migration"));
  must(store_close(st, &e), &e);

  /* an empty folder is not made a store by a migrating open */
  st_url("refuse-empty", url, sizeof url);
  store_options o = {.migrating = true};
  assert_int_not_equal(store_open(url, &o, &st, &e), MR_OK);
  assert_non_null(strstr(e.msg, "not a moraine store"));
  /* a reader cannot migrate */
  st_url("refuse-reader", url, sizeof url);
  st_build_catalog(url);
  store_options ro = {.read_only = true};
  must(store_open(url, &ro, &st, &e), &e);
  assert_int_equal(store_migrate(st, 0, NULL, NULL, &r, &e), MR_ERR_INVALID);
  must(store_close(st, &e), &e);
}

static int setup(void **state) {
  return st_tmp_setup("migrate");
}

static int teardown(void **state) {
  st_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_format),
      cmocka_unit_test(test_steps_stop_resume),
      cmocka_unit_test(test_crash_before_every_batch),
      cmocka_unit_test(test_origin_survives),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
