/*
 * test_catalog_feed.c — cat_feed (catalog_feed.c) on a real embedded
 * engine: statements and row chunks run in the order queued, more of them
 * than the feed holds at once; after a failure nothing more runs, a failed
 * statement batch leaves no transaction open, and the failure reaches the
 * loader (from a later queue call or from finish) naming the statement; a
 * discarded feed runs nothing more; an unthreaded feed (a cat_loader's)
 * runs each job inside its queue call; whatever the outcome, each chunk's text
 * is freed exactly once (the leak checks of `make sanitize` see the rest).
 *
 * Table contents are checked inside the engine: a query calls error() when
 * a count is not as expected, so a mismatch fails the exec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog_internal.h"
#include "test_engine.h"

enum { CHUNKS = 7, ROWS = 1000 };

static int text_frees;

static void count_text_free(void *text) {
  text_frees++;
  free(text);
}

/* The rows first .. first+ROWS-1 of (id BIGINT, name VARCHAR), the names'
 * text in one block the feed must free. */
static mr_status queue_chunk(cat_feed *f, const char *table, int first, mr_error *e) {
  sql_value *v = calloc(2 * ROWS, sizeof *v);
  char *text = malloc(ROWS * 32);
  assert_non_null(v);
  assert_non_null(text);
  for (int i = 0; i < ROWS; i++) {
    char *id = text + 32 * i, *name = id + 16;
    int n = snprintf(id, 16, "%d", first + i);
    v[2 * i] = SQL_VALUE_TEXT(id, (size_t)n);
    n = snprintf(name, 16, "n%d", first + i);
    v[2 * i + 1] = SQL_VALUE_TEXT(name, (size_t)n);
  }
  return cat_feed_rows(f, table, 2, ROWS, v, text, count_text_free, e);
}

static void count_is(sql_engine *e, const char *table, long long want) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT CASE WHEN (SELECT count(*) FROM public.%s) = %lld AND (SELECT count(DISTINCT "
           "id) FROM public.%s) = %lld THEN 1 ELSE error('%s: wrong row count') END",
           table, want, table, want, table);
  test_engine_exec(e, sql);
}

static void test_jobs_run_in_queue_order(void **state) {
  sql_engine *e = *state;
  mr_error err;
  cat_feed *f = NULL;
  text_frees = 0;
  assert_int_equal(cat_feed_start(e, "public", true, &f, &err), MR_OK);
  /* the table is created by the first job: the rows after it need it */
  char *ddl = strdup("BEGIN; CREATE TABLE public.ordered(id BIGINT PRIMARY KEY, name VARCHAR); "
                     "COMMIT");
  assert_int_equal(cat_feed_sql(f, ddl, true, &err), MR_OK);
  for (int c = 0; c < CHUNKS; c++)
    assert_int_equal(queue_chunk(f, "ordered", c * ROWS, &err), MR_OK);
  assert_int_equal(cat_feed_finish(f, false, &err), MR_OK);
  assert_int_equal(text_frees, CHUNKS);
  count_is(e, "ordered", (long long)CHUNKS * ROWS);
  test_engine_exec(e,
                   "SELECT CASE WHEN (SELECT name FROM public.ordered WHERE id = 6999) = 'n6999' "
                   "THEN 1 ELSE error('the last row is not as queued') END");
}

static void test_a_failure_stops_the_feed_and_reaches_the_loader(void **state) {
  sql_engine *e = *state;
  mr_error err;
  cat_feed *f = NULL;
  text_frees = 0;
  test_engine_exec(e, "CREATE TABLE public.after(id BIGINT, name VARCHAR)");
  assert_int_equal(cat_feed_start(e, "public", true, &f, &err), MR_OK);
  char *bad = strdup("BEGIN; CREATE TABLE public.broken(x NO_SUCH_TYPE); COMMIT");
  assert_int_equal(cat_feed_sql(f, bad, true, &err), MR_OK);
  /* queued behind the failure: refused once the feed has failed, or taken
   * and never run */
  int refused = 0;
  for (int c = 0; c < CHUNKS; c++) {
    mr_error qe;
    mr_status rc = queue_chunk(f, "after", c * ROWS, &qe);
    if (rc != MR_OK) {
      refused++;
      assert_non_null(strstr(qe.msg, "NO_SUCH_TYPE"));
    }
  }
  /* the feed holds two jobs at most: the loader learns of the failure
   * before it has queued them all */
  assert_true(refused > 0);
  mr_status rc = cat_feed_finish(f, false, &err);
  assert_int_not_equal(rc, MR_OK);
  assert_non_null(strstr(err.msg, "catalog load: BEGIN; CREATE TABLE public.broken"));
  assert_int_equal(text_frees, CHUNKS);
  count_is(e, "after", 0);
  /* no transaction was left open by the failed batch */
  test_engine_exec(e, "BEGIN; COMMIT");
  test_engine_exec(e, "SELECT CASE WHEN (SELECT count(*) FROM duckdb_tables() WHERE table_name = "
                      "'broken') = 0 THEN 1 ELSE error('the failed batch left a table') END");
}

static void test_a_discarded_feed_runs_nothing_more(void **state) {
  sql_engine *e = *state;
  mr_error err;
  cat_feed *f = NULL;
  text_frees = 0;
  test_engine_exec(e, "CREATE TABLE public.discarded(id BIGINT, name VARCHAR)");
  assert_int_equal(cat_feed_start(e, "public", true, &f, &err), MR_OK);
  assert_int_equal(queue_chunk(f, "discarded", 0, &err), MR_OK);
  assert_int_equal(queue_chunk(f, "discarded", ROWS, &err), MR_OK);
  /* what runs before the discard is taken ran whole; nothing after it */
  assert_int_equal(cat_feed_finish(f, true, &err), MR_OK);
  assert_int_equal(text_frees, 2);
  test_engine_exec(e, "SELECT CASE WHEN (SELECT count(*) FROM public.discarded) IN (0, 1000, 2000) "
                      "THEN 1 ELSE error('a chunk ran in part') END");
}

/* A cat_loader's feed: each job runs inside its queue call, on the
 * caller's thread, and a failure is that call's. */
static void test_an_unthreaded_feed_runs_each_job_as_queued(void **state) {
  sql_engine *e = *state;
  mr_error err;
  cat_feed *f = NULL;
  text_frees = 0;
  assert_int_equal(cat_feed_start(e, "public", false, &f, &err), MR_OK);
  char *ddl = strdup("CREATE TABLE public.inline_feed(id BIGINT, name VARCHAR)");
  assert_int_equal(cat_feed_sql(f, ddl, false, &err), MR_OK);
  assert_int_equal(queue_chunk(f, "inline_feed", 0, &err), MR_OK);
  count_is(e, "inline_feed", ROWS); /* already there, before finish */
  assert_int_equal(text_frees, 1);
  char *bad = strdup("CREATE TABLE public.inline_bad(x NO_SUCH_TYPE)");
  assert_int_not_equal(cat_feed_sql(f, bad, false, &err), MR_OK);
  assert_non_null(strstr(err.msg, "NO_SUCH_TYPE"));
  mr_error again;
  assert_int_not_equal(queue_chunk(f, "inline_feed", ROWS, &again), MR_OK);
  assert_string_equal(again.msg, err.msg);
  assert_int_equal(text_frees, 2);
  count_is(e, "inline_feed", ROWS);
  assert_int_not_equal(cat_feed_finish(f, false, &again), MR_OK);
  assert_string_equal(again.msg, err.msg);
}

static void test_an_unstarted_feed_finishes_as_nothing(void **state) {
  mr_error err;
  assert_int_equal(cat_feed_finish(NULL, false, &err), MR_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jobs_run_in_queue_order),
      cmocka_unit_test(test_a_failure_stops_the_feed_and_reaches_the_loader),
      cmocka_unit_test(test_a_discarded_feed_runs_nothing_more),
      cmocka_unit_test(test_an_unthreaded_feed_runs_each_job_as_queued),
      cmocka_unit_test(test_an_unstarted_feed_finishes_as_nothing),
  };
  return cmocka_run_group_tests(tests, test_engine_setup, test_engine_teardown);
}
