/* test_pg_log.c — the operator log: level names, gating, and the shape of
 * a line (prefix, level, control characters flattened, one newline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "pgwire/pg_log.h"

static void levels_parse(void **state) {
  pg_log_level l;
  mr_error err;
  assert_int_equal(pg_log_parse_level("error", &l, &err), MR_OK);
  assert_int_equal(l, PG_LOG_ERROR);
  assert_int_equal(pg_log_parse_level("debug", &l, &err), MR_OK);
  assert_int_equal(l, PG_LOG_DEBUG);
  assert_int_equal(pg_log_parse_level("verbose", &l, &err), MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "verbose"));
}

/* Runs pg_log with stderr sent into a pipe; returns what it wrote. */
static size_t capture(pg_log_level level, const char *text, char *out, size_t cap) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  int saved = dup(STDERR_FILENO);
  dup2(p[1], STDERR_FILENO);
  pg_log(level, "%s", text);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(p[1]);
  ssize_t n = read(p[0], out, cap - 1);
  close(p[0]);
  out[n > 0 ? n : 0] = '\0';
  return n > 0 ? (size_t)n : 0;
}

static void lines_are_gated_and_flat(void **state) {
  char got[2048];
  pg_log_set_level(PG_LOG_WARN);
  assert_true(pg_log_enabled(PG_LOG_ERROR));
  assert_false(pg_log_enabled(PG_LOG_INFO));
  assert_int_equal(capture(PG_LOG_INFO, "hidden", got, sizeof got), 0);
  capture(PG_LOG_WARN, "two\nlines", got, sizeof got);
  assert_string_equal(got, "moraine: warn: two lines\n");
  pg_log_set_level(PG_LOG_DEBUG);
  capture(PG_LOG_DEBUG, "shown", got, sizeof got);
  assert_string_equal(got, "moraine: debug: shown\n");
  char longer[1500];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  size_t n = capture(PG_LOG_ERROR, longer, got, sizeof got);
  assert_int_equal(n, strlen("moraine: error: ") + 1000 + 1); /* cut, one newline */
  assert_int_equal(got[n - 1], '\n');
  pg_log_set_level(PG_LOG_INFO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(levels_parse),
      cmocka_unit_test(lines_are_gated_and_flat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
