/* test_error.c — mr_error: codes, messages, wrapping, visible truncation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/mr_error.h"

static void fail_records_code_and_message(void **state) {
  mr_error err;
  assert_int_equal(mr_fail(&err, MR_ERR_CONFLICT, "head moved from %d", 7), MR_ERR_CONFLICT);
  assert_int_equal(err.code, MR_ERR_CONFLICT);
  assert_string_equal(err.msg, "head moved from 7");
  assert_int_equal(mr_fail(NULL, MR_ERR_IO, "ignored"), MR_ERR_IO);
}

static void wrap_prefixes_context(void **state) {
  mr_error err;
  mr_fail(&err, MR_ERR_IO, "disk full");
  assert_int_equal(mr_error_wrap(&err, "commit %u", 3u), MR_ERR_IO);
  assert_string_equal(err.msg, "commit 3: disk full");
}

static void long_message_is_marked_cut(void **state) {
  char big[2 * MR_ERROR_MSG_MAX];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  mr_error err;
  mr_fail(&err, MR_ERR_INVALID, "%s", big);
  size_t n = strlen(err.msg);
  assert_int_equal(n, MR_ERROR_MSG_MAX - 1);
  assert_string_equal(err.msg + n - 3, "...");
}

static void every_status_has_text(void **state) {
  for (int c = 0; c < MR_STATUS_COUNT; c++)
    assert_non_null(mr_status_text((mr_status)c));
  assert_string_equal(mr_status_text(MR_ERR_FENCED), "fenced");
  assert_string_equal(mr_status_text((mr_status)999), "unknown status");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fail_records_code_and_message),
      cmocka_unit_test(wrap_prefixes_context),
      cmocka_unit_test(long_message_is_marked_cut),
      cmocka_unit_test(every_status_has_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
