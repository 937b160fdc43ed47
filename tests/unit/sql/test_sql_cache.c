/* test_sql_cache.c — the session statement cache: hits by (purpose, text),
 * a new generation empties it, the least recently used entry is evicted,
 * every value is freed exactly once (counted by the free function), and a
 * taken value is the taker's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "sql/sql_cache.h"

static int freed;

static void count_free(sql_cache_purpose purpose, void *value) {
  (void)purpose;
  freed++;
  free(value);
}

static int *boxed(int v) {
  int *p = malloc(sizeof *p);
  *p = v;
  return p;
}

static void hits_by_purpose_and_text(void **state) {
  sql_cache c;
  freed = 0;
  sql_cache_init(&c, count_free, SQL_CACHE_PREPARED_SLOTS);
  assert_null(sql_cache_get(&c, 1, 1, SQL_CACHE_SELECT, "SELECT 1"));
  assert_true(sql_cache_put(&c, SQL_CACHE_SELECT, "SELECT 1", boxed(1)));
  int *v = sql_cache_get(&c, 1, 1, SQL_CACHE_SELECT, "SELECT 1");
  assert_non_null(v);
  assert_int_equal(*v, 1);
  /* the same text for another purpose is another entry */
  assert_null(sql_cache_get(&c, 1, 1, SQL_CACHE_COPY_BINARY, "SELECT 1"));
  assert_null(sql_cache_get(&c, 1, 1, SQL_CACHE_SELECT, "SELECT 1 "));
  /* replacing a key frees the old value */
  assert_true(sql_cache_put(&c, SQL_CACHE_SELECT, "SELECT 1", boxed(2)));
  assert_int_equal(freed, 1);
  assert_int_equal(*(int *)sql_cache_get(&c, 1, 1, SQL_CACHE_SELECT, "SELECT 1"), 2);
  assert_int_equal(c.hits, 2);
  sql_cache_clear(&c);
  assert_int_equal(freed, 2);
}

static void new_generation_empties(void **state) {
  sql_cache c;
  freed = 0;
  sql_cache_init(&c, count_free, SQL_CACHE_PREPARED_SLOTS);
  assert_null(sql_cache_get(&c, 5, 0, SQL_CACHE_PLANS, "q"));
  assert_true(sql_cache_put(&c, SQL_CACHE_PLANS, "q", boxed(1)));
  assert_non_null(sql_cache_get(&c, 5, 0, SQL_CACHE_PLANS, "q"));
  assert_null(sql_cache_get(&c, 6, 0, SQL_CACHE_PLANS, "q")); /* DDL happened */
  assert_int_equal(freed, 1);
  assert_true(sql_cache_put(&c, SQL_CACHE_PLANS, "q", boxed(1)));
  assert_null(sql_cache_get(&c, 6, 1, SQL_CACHE_PLANS, "q")); /* temp tables changed */
  assert_int_equal(freed, 2);
  sql_cache_clear(&c);
}

static void least_recently_used_is_evicted(void **state) {
  sql_cache c;
  freed = 0;
  sql_cache_init(&c, count_free, SQL_CACHE_PREPARED_SLOTS);
  char key[32];
  for (int i = 0; i < SQL_CACHE_PREPARED_SLOTS; i++) {
    snprintf(key, sizeof key, "q%d", i);
    assert_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, key));
    assert_true(sql_cache_put(&c, SQL_CACHE_SELECT, key, boxed(i)));
  }
  assert_int_equal(freed, 0);
  assert_non_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, "q0")); /* q1 is now the oldest */
  assert_true(sql_cache_put(&c, SQL_CACHE_SELECT, "new", boxed(-1)));
  assert_int_equal(freed, 1);
  assert_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, "q1"));
  assert_non_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, "q0"));
  assert_non_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, "new"));
  assert_non_null(sql_cache_get(&c, 0, 0, SQL_CACHE_SELECT, "q2"));
  sql_cache_clear(&c);
  assert_int_equal(freed, SQL_CACHE_PREPARED_SLOTS + 1);
}

/* take hands the value over: the cache no longer has it and never frees it */
static void take_hands_the_value_over(void **state) {
  sql_cache c;
  freed = 0;
  sql_cache_init(&c, count_free, SQL_CACHE_PREPARED_SLOTS);
  assert_null(sql_cache_take(&c, 3, 0, SQL_CACHE_PARSED, "q"));
  assert_true(sql_cache_put(&c, SQL_CACHE_PARSED, "q", boxed(7)));
  int *v = sql_cache_take(&c, 3, 0, SQL_CACHE_PARSED, "q");
  assert_non_null(v);
  assert_int_equal(*v, 7);
  assert_null(sql_cache_get(&c, 3, 0, SQL_CACHE_PARSED, "q"));
  assert_true(sql_cache_put(&c, SQL_CACHE_PARSED, "q", v)); /* parked again */
  assert_null(sql_cache_take(&c, 4, 0, SQL_CACHE_PARSED, "q")); /* DDL: gone, and freed */
  assert_int_equal(freed, 1);
  sql_cache_clear(&c);
  assert_int_equal(freed, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hits_by_purpose_and_text),
      cmocka_unit_test(new_generation_empties),
      cmocka_unit_test(least_recently_used_is_evicted),
      cmocka_unit_test(take_hands_the_value_over),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
