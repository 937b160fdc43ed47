/*
 * test_registry.c — the catalogs of one server (registry.h): how a database
 * name becomes a store url under the root, and the open / idle-close
 * lifecycle — a catalog opens on its first session, stays while sessions
 * use it, closes after the idle timeout, reopens with its data, and an
 * unknown database is refused (3D000) when creating is off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "registry/registry.h"
#include "test_tmp.h"

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void test_encode(void **state) {
  (void)state;
  char out[256];
  mr_error err;
  assert_int_equal(cat_registry_encode("lake_del", out, sizeof out, &err), MR_OK);
  assert_string_equal(out, "lake_del");
  assert_int_equal(cat_registry_encode("Lake.2", out, sizeof out, &err), MR_OK);
  assert_string_equal(out, "-4cake-2e2");
  assert_int_equal(cat_registry_encode("a-b/../c", out, sizeof out, &err), MR_OK);
  assert_string_equal(out, "a-2db-2f-2e-2e-2fc");
  assert_int_equal(cat_registry_encode("caf\xc3\xa9", out, sizeof out, &err), MR_OK);
  assert_string_equal(out, "caf-c3-a9");
  assert_int_equal(cat_registry_encode("", out, sizeof out, &err), MR_ERR_INVALID);
  char longname[80];
  memset(longname, 'a', 64);
  longname[64] = '\0';
  assert_int_equal(cat_registry_encode(longname, out, sizeof out, &err), MR_ERR_INVALID);
  longname[63] = '\0';
  assert_int_equal(cat_registry_encode(longname, out, sizeof out, &err), MR_OK);
  /* the worst case fits the documented bound */
  memset(longname, '.', 63);
  assert_int_equal(cat_registry_encode(longname, out, 3 * CAT_REGISTRY_MAX_NAME + 1, &err), MR_OK);
  assert_int_equal(strlen(out), 3 * CAT_REGISTRY_MAX_NAME);
  assert_int_equal(cat_registry_encode("ab", out, 3, &err), MR_OK);
  assert_int_equal(cat_registry_encode("abc", out, 3, &err), MR_ERR_INVALID);
}

static void test_store_url(void **state) {
  (void)state;
  char out[512];
  mr_error err;
#define URL(root, def, db, schema) cat_registry_store_url(root, def, db, schema, out, sizeof out, &err)
  assert_int_equal(URL("file:///s", "lake", "lake", "public"), MR_OK);
  assert_string_equal(out, "file:///s");
  assert_int_equal(URL("file:///s", "lake", "lake", "meta_s2"), MR_OK);
  assert_string_equal(out, "file:///s/catalogs/lake/meta_s2");
  assert_int_equal(URL("file:///s", "lake", "lake2", "public"), MR_OK);
  assert_string_equal(out, "file:///s/catalogs/lake2/public");
  assert_int_equal(URL("file:///s/", "lake", "Lake", "My Schema"), MR_OK);
  assert_string_equal(out, "file:///s/catalogs/-4cake/-4dy-20-53chema");
  assert_int_equal(URL("s3://b/p", "main", "lake", "public"), MR_OK);
  assert_string_equal(out, "s3://b/p/catalogs/lake/public");
  assert_int_equal(URL("memory://", "lake", "x", "public"), MR_OK);
  assert_string_equal(out, "memory://catalogs/x/public");
  assert_int_equal(URL("memory://t", "lake", "x", "public"), MR_OK);
  assert_string_equal(out, "memory://t/catalogs/x/public");
  assert_int_equal(URL("file:///s", "lake", "a", ""), MR_ERR_INVALID);
  assert_int_equal(cat_registry_store_url("file:///s", "lake", "a", "public", out, 10, &err),
                   MR_ERR_INVALID);
#undef URL
}

static void test_decode(void **state) {
  (void)state;
  const char *names[] = {"lake", "Lake.2", "a-b/../c", "caf\xc3\xa9", "My Schema", "_x_"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char enc[256], dec[128];
    mr_error err;
    assert_int_equal(cat_registry_encode(names[i], enc, sizeof enc, &err), MR_OK);
    assert_int_equal(cat_registry_decode(enc, dec, sizeof dec, &err), MR_OK);
    assert_string_equal(dec, names[i]);
  }
  char dec[128];
  mr_error err;
  /* text enc never writes: one name, one spelling */
  assert_int_equal(cat_registry_decode("A", dec, sizeof dec, &err), MR_ERR_INVALID);
  assert_int_equal(cat_registry_decode("-61", dec, sizeof dec, &err), MR_ERR_INVALID);
  assert_int_equal(cat_registry_decode("-4", dec, sizeof dec, &err), MR_ERR_INVALID);
  assert_int_equal(cat_registry_decode("-00", dec, sizeof dec, &err), MR_ERR_INVALID);
  assert_int_equal(cat_registry_decode("", dec, sizeof dec, &err), MR_ERR_INVALID);
  assert_int_equal(cat_registry_decode(".x", dec, sizeof dec, &err), MR_ERR_INVALID);
}

/* Waits (up to 2 minutes: valgrind is slow) until r has n catalogs open;
 * the reaper thread may be closing one while the test reaps too. */
static size_t wait_open(cat_registry *r, size_t n) {
  for (int i = 0; i < 1200 && cat_registry_open_count(r) != n; i++) {
    (void)cat_registry_reap(r);
    sleep_ms(100);
  }
  return cat_registry_open_count(r);
}

static cat_registry_config config(const char *root, bool create, uint64_t idle_ms) {
  cat_registry_config c = {0};
  c.store_url = root;
  c.default_database = "lake";
  c.create = create;
  c.idle_ms = idle_ms;
  c.engine_opts.server_version = "15.0 (test)";
  c.engine_opts.threads = 1;
  return c;
}

static void test_open_on_demand_and_idle_close(void **state) {
  (void)state;
  char root[512];
  test_tmp_url("lifecycle", root, sizeof root);
  cat_registry_config cfg = config(root, true, 100);
  cat_registry *r;
  mr_error err;
  assert_int_equal(cat_registry_open(&cfg, &r, &err), MR_OK);
  assert_int_equal(cat_registry_open_count(r), 1); /* the default catalog */

  sql_session *a1, *a2, *b, *d;
  void *ha1, *ha2, *hb, *hd;
  sql_error se;
  assert_int_equal(cat_registry_session_open(r, "u", "a", &a1, &ha1, &se), MR_OK);
  assert_int_equal(cat_registry_session_open(r, "u", "a", &a2, &ha2, &se), MR_OK);
  assert_ptr_equal(ha1, ha2); /* one catalog, two sessions */
  assert_int_equal(cat_registry_session_open(r, "u", "b", &b, &hb, &se), MR_OK);
  assert_ptr_not_equal(ha1, hb);
  assert_int_equal(cat_registry_session_open(r, "u", "lake", &d, &hd, &se), MR_OK);
  assert_int_equal(cat_registry_open_count(r), 3);
  assert_int_equal(cat_registry_opened_total(r), 3);

  /* a catalog in use is never closed */
  sleep_ms(200);
  assert_int_equal(cat_registry_reap(r), 0);
  cat_registry_session_close(r, a1, ha1);
  cat_registry_session_close(r, b, hb);
  cat_registry_session_close(r, d, hd);
  /* b idle now; a still has a session; the default one is kept */
  assert_int_equal(wait_open(r, 2), 2);
  sleep_ms(300);
  assert_int_equal(cat_registry_open_count(r), 2);
  cat_registry_session_close(r, a2, ha2);
  assert_int_equal(wait_open(r, 1), 1);

  /* reopens on demand: its store is there (a folder under the root) */
  assert_int_equal(cat_registry_session_open(r, "u", "b", &b, &hb, &se), MR_OK);
  assert_int_equal(cat_registry_open_count(r), 2);
  assert_int_equal(cat_registry_opened_total(r), 4);
  cat_registry_session_close(r, b, hb);

  /* names: empty and too long refused with PostgreSQL's SQLSTATE */
  assert_int_equal(cat_registry_session_open(r, "u", "", &b, &hb, &se), MR_ERR_INVALID);
  assert_string_equal(se.sqlstate, "42602");
  assert_int_equal(cat_registry_close(r, &err), MR_OK);

  /* creating off: known databases open, unknown ones get 3D000 */
  cfg = config(root, false, 100);
  assert_int_equal(cat_registry_open(&cfg, &r, &err), MR_OK);
  assert_int_equal(cat_registry_session_open(r, "u", "b", &b, &hb, &se), MR_OK);
  cat_registry_session_close(r, b, hb);
  assert_int_equal(cat_registry_session_open(r, "u", "nope", &b, &hb, &se), MR_ERR_NOT_FOUND);
  assert_string_equal(se.sqlstate, "3D000");
  assert_non_null(strstr(se.base.msg, "database \"nope\" does not exist"));
  assert_int_equal(cat_registry_session_open(r, "u", "lake", &d, &hd, &se), MR_OK);
  cat_registry_session_close(r, d, hd);
  assert_int_equal(cat_registry_close(r, &err), MR_OK);
}

static void test_many_in_turn(void **state) {
  (void)state;
  cat_registry_config cfg = config("memory://many", true, 1);
  cat_registry *r;
  mr_error err;
  assert_int_equal(cat_registry_open(&cfg, &r, &err), MR_OK);
  for (int i = 0; i < 50; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", i);
    sql_session *s;
    void *h;
    sql_error se;
    assert_int_equal(cat_registry_session_open(r, "u", name, &s, &h, &se), MR_OK);
    cat_registry_session_close(r, s, h);
    sleep_ms(2);
    (void)cat_registry_reap(r);
    assert_true(cat_registry_open_count(r) <= 3); /* the reaper may be closing one */
  }
  assert_int_equal(cat_registry_opened_total(r), 51);
  assert_int_equal(cat_registry_close(r, &err), MR_OK);
}

static int setup(void **state) {
  (void)state;
  return test_tmp_setup("registry");
}

static int teardown(void **state) {
  (void)state;
  test_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_encode),
      cmocka_unit_test(test_store_url),
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_open_on_demand_and_idle_close),
      cmocka_unit_test(test_many_in_turn),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
