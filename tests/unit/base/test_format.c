/* test_format.c — mr_format: every integer's decimal text equals printf's
 * (the independent oracle), at the edges and over a spread of values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/mr_format.h"

static void check_i64(int64_t v) {
  char got[MR_INT_CHARS], want[32];
  size_t n = mr_format_i64(v, got);
  snprintf(want, sizeof want, "%lld", (long long)v);
  assert_string_equal(got, want);
  assert_int_equal(n, strlen(want));
}

static void check_u64(uint64_t v) {
  char got[MR_INT_CHARS], want[32];
  size_t n = mr_format_u64(v, got);
  snprintf(want, sizeof want, "%llu", (unsigned long long)v);
  assert_string_equal(got, want);
  assert_int_equal(n, strlen(want));
}

static void edges(void **state) {
  (void)state;
  const int64_t s[] = {0, 1, -1, 9, 10, -10, 99, 100, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                       INT64_MAX - 1, INT64_MIN + 1};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    check_i64(s[i]);
  const uint64_t u[] = {0, 1, 9, 10, UINT32_MAX, UINT64_MAX, UINT64_MAX - 1,
                        (uint64_t)INT64_MAX + 1};
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
    check_u64(u[i]);
}

static void spread(void **state) {
  (void)state;
  uint64_t x = 0x9E3779B97F4A7C15u; /* xorshift: every digit count, both signs */
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint64_t v = x >> (x % 64);
    check_u64(v);
    check_i64((int64_t)v);
    check_i64(-(int64_t)(v >> 1));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(edges),
      cmocka_unit_test(spread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
