/* test_sql_types.c — bytea input translation, numeric binary encoding and
 * decoding, and the type mapping table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_types.h"

static void bytea_input(void **state) {
  sql_strbuf b = {0};
  assert_true(pg_bytea_decode("\\x0102ff", 8, &b));
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.data, "\x01\x02\xff", 3);
  sql_strbuf_reset(&b);
  assert_true(pg_bytea_decode("\\x", 2, &b));
  assert_int_equal(b.len, 0);
  sql_strbuf_reset(&b);
  assert_true(pg_bytea_decode("\\x6F 6e", 7, &b)); /* whitespace between pairs */
  assert_memory_equal(b.data, "on", 2);
  sql_strbuf_reset(&b);
  assert_true(pg_bytea_decode("a\\\\b\\000c", 9, &b)); /* escape format */
  assert_int_equal(b.len, 5);
  assert_memory_equal(b.data, "a\\b\0c", 5);
  sql_strbuf_reset(&b);
  assert_false(pg_bytea_decode("\\x0", 3, &b));
  assert_false(pg_bytea_decode("\\xzz", 4, &b));
  assert_false(pg_bytea_decode("a\\q", 3, &b));
  sql_strbuf_reset(&b);
  pg_bytea_encode_hex(&b, (const uint8_t *)"\x01\xab", 2);
  assert_int_equal(b.len, 6);
  assert_memory_equal(b.data, "\\x01ab", 6);
  sql_strbuf_free(&b);
}

static void numeric_encoding(void **state) {
  sql_strbuf b = {0};
  pg_encode_numeric(&b, "1234567", false, 2); /* 12345.67 */
  static const uint8_t want[] = {0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 2,
                                 0, 1,  /* 1      */
                                 0x09, 0x29, /* 2345 */
                                 0x1a, 0x2c /* 6700 */};
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.data, want, sizeof want);
  sql_strbuf_free(&b);
  const char *cases[][3] = {{"1", "3", "-0.001"}, {"0", "0", "0"}, {"10000", "0", "10000"},
                            {"123450", "3", "123.450"}, {"5", "0", "-5"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sql_strbuf enc = {0}, dec = {0};
    bool neg = cases[i][2][0] == '-';
    pg_encode_numeric(&enc, cases[i][0], neg, atoi(cases[i][1]));
    assert_true(pg_decode_numeric((const uint8_t *)enc.data + 4, enc.len - 4, &dec));
    sql_strbuf_addn(&dec, "", 0);
    assert_string_equal(dec.data, cases[i][2]);
    sql_strbuf_free(&enc);
    sql_strbuf_free(&dec);
  }
  sql_strbuf bad = {0};
  static const uint8_t truncated[] = {0, 2, 0, 0, 0, 0, 0, 0, 0, 1};
  assert_false(pg_decode_numeric(truncated, sizeof truncated, &bad));
  sql_strbuf_free(&bad);
}

static void type_table(void **state) {
  const char *name;
  int16_t len;
  assert_true(pg_type_info(1184, &name, &len));
  assert_string_equal(name, "timestamptz");
  assert_int_equal(len, 8);
  assert_true(pg_type_info(17, &name, &len));
  assert_string_equal(name, "bytea");
  assert_int_equal(len, -1);
  assert_false(pg_type_info(999999, &name, &len));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bytea_input),
      cmocka_unit_test(numeric_encoding),
      cmocka_unit_test(type_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
