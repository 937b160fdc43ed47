/* test_grow.c — mr_grow: doubling, keeping contents, refusing overflow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/mr_grow.h"

static void grows_by_doubling_and_keeps_bytes(void **state) {
  void *data = NULL;
  size_t cap = 0;
  assert_int_equal(mr_grow(&data, &cap, 10, 16), MR_OK);
  assert_int_equal(cap, 16);
  memcpy(data, "0123456789", 10);
  assert_int_equal(mr_grow(&data, &cap, 100, 16), MR_OK);
  assert_int_equal(cap, 128);
  assert_memory_equal(data, "0123456789", 10);
  assert_int_equal(mr_grow(&data, &cap, 50, 16), MR_OK); /* already fits */
  assert_int_equal(cap, 128);
  free(data);
}

static void refuses_sizes_past_size_max(void **state) {
  char block[8];
  void *data = block;
  size_t cap = SIZE_MAX / 2 + 1;
  assert_int_equal(mr_grow(&data, &cap, SIZE_MAX, 16), MR_ERR_NOMEM);
  assert_ptr_equal(data, block); /* unchanged on failure */
  assert_int_equal(cap, SIZE_MAX / 2 + 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grows_by_doubling_and_keeps_bytes),
      cmocka_unit_test(refuses_sizes_past_size_max),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
