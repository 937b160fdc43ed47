/* test_pg_proto.c — the pure frontend-message decoders: well-formed bodies
 * of every decoded type, and malformed ones (bad counts, lengths past the
 * end, every truncation, trailing bytes, bad format codes) failing with
 * PostgreSQL's SQLSTATEs instead of reading out of bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pgwire/pg_proto.h"

/* ---- building bodies ------------------------------------------------------- */

typedef struct body {
  uint8_t b[512];
  size_t n;
} body;

static void put(body *x, const void *p, size_t n) {
  assert_true(x->n + n <= sizeof x->b);
  memcpy(x->b + x->n, p, n);
  x->n += n;
}

static void put_i16(body *x, int v) {
  uint8_t b[2] = {(uint8_t)((unsigned)v >> 8), (uint8_t)v};
  put(x, b, 2);
}

static void put_i32(body *x, int32_t v) {
  uint32_t u = (uint32_t)v;
  uint8_t b[4] = {(uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u};
  put(x, b, 4);
}

static void put_str(body *x, const char *s) {
  put(x, s, strlen(s) + 1);
}

/* A Bind: portal, statement, formats, values (NULL = SQL NULL), results. */
static body bind_body(int nfmt, const int *fmts, int nvals, const char *const *vals, int nres,
                      const int *res) {
  body x = {{0}, 0};
  put_str(&x, "p1");
  put_str(&x, "s1");
  put_i16(&x, nfmt);
  for (int i = 0; i < nfmt; i++)
    put_i16(&x, fmts[i]);
  put_i16(&x, nvals);
  for (int i = 0; i < nvals; i++) {
    if (vals[i] == NULL) {
      put_i32(&x, -1);
    } else {
      put_i32(&x, (int32_t)strlen(vals[i]));
      put(&x, vals[i], strlen(vals[i]));
    }
  }
  put_i16(&x, nres);
  for (int i = 0; i < nres; i++)
    put_i16(&x, res[i]);
  return x;
}

static void assert_state(const pg_error *e, const char *sqlstate) {
  assert_string_equal(e->sqlstate, sqlstate);
  assert_int_equal(e->base.code, MR_ERR_INVALID);
  assert_true(e->base.msg[0] != '\0');
}

/* ---- Bind ------------------------------------------------------------------- */

static void bind_decodes_values_and_formats(void **state) {
  static const char *const vals[] = {"42", NULL, ""};
  static const int fmts[] = {0, 1, 0};
  static const int res[] = {1};
  body x = bind_body(3, fmts, 3, vals, 1, res);
  pg_bind b;
  pg_error e;
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_OK);
  assert_string_equal(b.portal, "p1");
  assert_string_equal(b.stmt, "s1");
  assert_int_equal(b.nparams, 3);
  assert_int_equal(b.nparam_formats, 3);
  assert_int_equal(pg_format_code(b.param_formats, b.nparam_formats, 1), 1);
  assert_int_equal(pg_format_code(b.result_formats, b.nresult_formats, 5), 1); /* one for all */
  size_t pos = 0, n;
  const uint8_t *d;
  assert_true(pg_bind_next_value(&b, &pos, &d, &n));
  assert_int_equal(n, 2);
  assert_memory_equal(d, "42", 2);
  assert_true(pg_bind_next_value(&b, &pos, &d, &n));
  assert_null(d);
  assert_true(pg_bind_next_value(&b, &pos, &d, &n));
  assert_non_null(d);
  assert_int_equal(n, 0);
  assert_false(pg_bind_next_value(&b, &pos, &d, &n));
  assert_int_equal(pg_bind_check(&b, 3, -1, &e), MR_OK);
}

static void format_code_rules(void **state) {
  static const uint8_t two[] = {0, 1, 0, 0};
  assert_int_equal(pg_format_code(NULL, 0, 3), 0); /* none: text */
  assert_int_equal(pg_format_code(two, 1, 9), 1);  /* one: for all */
  assert_int_equal(pg_format_code(two, 2, 0), 1);
  assert_int_equal(pg_format_code(two, 2, 1), 0);
  assert_int_equal(pg_format_code(two, 2, 2), 0); /* past the end: text */
}

static void bind_with_two_formats_for_one_parameter_is_08P01(void **state) {
  static const char *const vals[] = {"1"};
  static const int fmts[] = {0, 0};
  body x = bind_body(2, fmts, 1, vals, 0, NULL);
  pg_bind b;
  pg_error e;
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_non_null(strstr(e.base.msg, "2 parameter formats but 1 parameters"));
}

static void bind_format_codes_must_be_0_or_1(void **state) {
  static const char *const vals[] = {"1"};
  static const int bad[] = {7};
  static const int good[] = {0};
  pg_bind b;
  pg_error e;
  body x = bind_body(1, bad, 1, vals, 0, NULL);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "22023");
  assert_non_null(strstr(e.base.msg, "unsupported format code: 7"));
  x = bind_body(1, good, 1, vals, 1, bad);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "22023");
  static const int negative[] = {-1};
  x = bind_body(0, NULL, 1, vals, 1, negative);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "22023");
}

static void bind_value_lengths_are_checked(void **state) {
  pg_bind b;
  pg_error e;
  body x = {{0}, 0};
  put_str(&x, "");
  put_str(&x, "");
  put_i16(&x, 0);
  put_i16(&x, 1);
  put_i32(&x, 1000); /* longer than the message */
  put(&x, "abc", 3);
  put_i16(&x, 0);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  x.n = 0;
  put_str(&x, "");
  put_str(&x, "");
  put_i16(&x, 0);
  put_i16(&x, 1);
  put_i32(&x, -2);
  put_i16(&x, 0);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  x.n = 0;
  put_str(&x, "");
  put_str(&x, "");
  put_i16(&x, 0);
  put_i32(&x, 0x7FFFFFFF); /* 32767 values announced, then only 2 bytes */
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void bind_huge_counts_fail_without_reading(void **state) {
  pg_bind b;
  pg_error e;
  body x = {{0}, 0};
  put_str(&x, "");
  put_str(&x, "");
  put_i16(&x, 0xFFFF); /* 65535 formats, none present */
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  x.n = 0;
  put_str(&x, "");
  put_str(&x, "");
  put_i16(&x, 0);
  put_i16(&x, 0xFFFF); /* 65535 values, none present */
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void every_truncated_bind_fails(void **state) {
  static const char *const vals[] = {"hello", NULL, "x"};
  static const int fmts[] = {1};
  static const int res[] = {0, 1};
  body x = bind_body(1, fmts, 3, vals, 2, res);
  pg_bind b;
  pg_error e;
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_OK);
  for (size_t cut = 0; cut < x.n; cut++) {
    /* a private copy of exactly `cut` bytes, so ASan sees any overread */
    uint8_t *part = malloc(cut ? cut : 1);
    memcpy(part, x.b, cut);
    assert_int_equal(pg_decode_bind(part, cut, &b, &e), MR_ERR_INVALID);
    assert_state(&e, "08P01");
    free(part);
  }
  x.b[x.n++] = 0; /* a trailing byte */
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_int_equal(pg_decode_bind(NULL, 0, &b, &e), MR_ERR_INVALID);
}

static void bind_unterminated_names_fail(void **state) {
  static const uint8_t x[] = {'p', '1'};
  pg_bind b;
  pg_error e;
  assert_int_equal(pg_decode_bind(x, sizeof x, &b, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void bind_checked_against_statement(void **state) {
  static const char *const vals[] = {"1", "2"};
  static const int res[] = {0, 1, 0};
  body x = bind_body(0, NULL, 2, vals, 3, res);
  pg_bind b;
  pg_error e;
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_OK);
  assert_int_equal(pg_bind_check(&b, 1, -1, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_non_null(strstr(e.base.msg, "supplies 2 parameters"));
  assert_int_equal(pg_bind_check(&b, 2, 3, &e), MR_OK);
  assert_int_equal(pg_bind_check(&b, 2, -1, &e), MR_OK); /* columns unknown */
  assert_int_equal(pg_bind_check(&b, 2, 2, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_non_null(strstr(e.base.msg, "3 result formats but query has 2 columns"));
  static const int one[] = {1};
  x = bind_body(0, NULL, 2, vals, 1, one);
  assert_int_equal(pg_decode_bind(x.b, x.n, &b, &e), MR_OK);
  assert_int_equal(pg_bind_check(&b, 2, 7, &e), MR_OK); /* one code applies to all */
}

/* ---- Parse, Describe, Close, Execute, Query, CopyFail ------------------------ */

static void parse_decodes_and_checks_type_count(void **state) {
  body x = {{0}, 0};
  put_str(&x, "s1");
  put_str(&x, "SELECT $1, $2");
  put_i16(&x, 2);
  put_i32(&x, 23);
  put_i32(&x, 0);
  pg_parse p;
  pg_error e;
  assert_int_equal(pg_decode_parse(x.b, x.n, &p, &e), MR_OK);
  assert_string_equal(p.name, "s1");
  assert_string_equal(p.query, "SELECT $1, $2");
  assert_int_equal(p.ntypes, 2);
  assert_int_equal(pg_parse_type(&p, 0), 23);
  assert_int_equal(pg_parse_type(&p, 1), 0);
  assert_int_equal(pg_parse_type(&p, 2), 0);
  for (size_t cut = 0; cut < x.n; cut++) {
    uint8_t *part = malloc(cut ? cut : 1);
    memcpy(part, x.b, cut);
    assert_int_equal(pg_decode_parse(part, cut, &p, &e), MR_ERR_INVALID);
    assert_state(&e, "08P01");
    free(part);
  }
  x.n = 0;
  put_str(&x, "");
  put_str(&x, "SELECT 1");
  put_i16(&x, 0xFFFF); /* 65535 types announced, none sent */
  assert_int_equal(pg_decode_parse(x.b, x.n, &p, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void describe_and_close_targets(void **state) {
  static const uint8_t stmt[] = {'S', 'a', 0};
  static const uint8_t portal[] = {'P', 0};
  static const uint8_t bad_kind[] = {'X', 0};
  static const uint8_t no_name[] = {'S'};
  static const uint8_t trailing[] = {'S', 0, 'z'};
  pg_target t;
  pg_error e;
  assert_int_equal(pg_decode_describe(stmt, sizeof stmt, &t, &e), MR_OK);
  assert_int_equal(t.kind, 'S');
  assert_string_equal(t.name, "a");
  assert_int_equal(pg_decode_close(portal, sizeof portal, &t, &e), MR_OK);
  assert_int_equal(t.kind, 'P');
  assert_string_equal(t.name, "");
  assert_int_equal(pg_decode_describe(bad_kind, sizeof bad_kind, &t, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_non_null(strstr(e.base.msg, "DESCRIBE"));
  assert_int_equal(pg_decode_close(bad_kind, sizeof bad_kind, &t, &e), MR_ERR_INVALID);
  assert_non_null(strstr(e.base.msg, "CLOSE"));
  assert_int_equal(pg_decode_describe(no_name, sizeof no_name, &t, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_int_equal(pg_decode_close(trailing, sizeof trailing, &t, &e), MR_ERR_INVALID);
  assert_int_equal(pg_decode_describe(NULL, 0, &t, &e), MR_ERR_INVALID);
}

static void execute_query_and_copy_fail(void **state) {
  static const uint8_t exec[] = {'p', 0, 0, 0, 0, 5};
  static const uint8_t exec_short[] = {'p', 0, 0, 0};
  pg_execute x;
  pg_error e;
  assert_int_equal(pg_decode_execute(exec, sizeof exec, &x, &e), MR_OK);
  assert_string_equal(x.portal, "p");
  assert_int_equal(x.max_rows, 5);
  assert_int_equal(pg_decode_execute(exec_short, sizeof exec_short, &x, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  static const uint8_t q[] = {'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0};
  static const uint8_t q_open[] = {'S', 'E', 'L'};
  static const uint8_t q_trailing[] = {'S', 0, 'x', 0};
  const char *s;
  assert_int_equal(pg_decode_query(q, sizeof q, &s, &e), MR_OK);
  assert_string_equal(s, "SELECT 1");
  assert_int_equal(pg_decode_query(q_open, sizeof q_open, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_int_equal(pg_decode_query(q_trailing, sizeof q_trailing, &s, &e), MR_ERR_INVALID);
  assert_int_equal(pg_decode_copy_fail(q, sizeof q, &s, &e), MR_OK);
  assert_int_equal(pg_decode_copy_fail(q_open, sizeof q_open, &s, &e), MR_ERR_INVALID);
  assert_int_equal(pg_decode_copy_fail(NULL, 0, &s, &e), MR_ERR_INVALID);
}

/* ---- startup, SASL, limits --------------------------------------------------- */

static body startup_body(uint32_t code) {
  body x = {{0}, 0};
  put_i32(&x, (int32_t)code);
  return x;
}

static void startup_v3_parameters(void **state) {
  body x = startup_body(PG_PROTO_V3);
  put_str(&x, "user");
  put_str(&x, "alice");
  put_str(&x, "application_name");
  put_str(&x, "psql");
  put_str(&x, "database");
  put_str(&x, "lake");
  put(&x, "", 1);
  pg_startup s;
  pg_error e;
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_OK);
  assert_int_equal(s.kind, PG_STARTUP_V3);
  assert_string_equal(s.user, "alice");
  assert_string_equal(s.database, "lake");
  for (size_t cut = 4; cut < x.n; cut++) {
    uint8_t *part = malloc(cut);
    memcpy(part, x.b, cut);
    assert_int_equal(pg_decode_startup(part, cut, &s, &e), MR_ERR_INVALID);
    assert_state(&e, "08P01");
    free(part);
  }
  put(&x, "x", 1); /* bytes after the terminator */
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  body bare = startup_body(PG_PROTO_V3);
  put(&bare, "", 1);
  assert_int_equal(pg_decode_startup(bare.b, bare.n, &s, &e), MR_OK);
  assert_null(s.user);
  assert_null(s.database);
}

static void startup_requests_and_versions(void **state) {
  pg_startup s;
  pg_error e;
  body x = startup_body(PG_SSL_REQUEST);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_OK);
  assert_int_equal(s.kind, PG_STARTUP_SSL);
  put_i32(&x, 0);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  x = startup_body(PG_GSSENC_REQUEST);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_OK);
  assert_int_equal(s.kind, PG_STARTUP_GSSENC);
  x = startup_body(PG_CANCEL_REQUEST);
  put_i32(&x, 1234);
  put_i32(&x, 5678);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_OK);
  assert_int_equal(s.kind, PG_STARTUP_CANCEL);
  assert_int_equal(s.cancel_pid, 1234);
  assert_int_equal(s.cancel_key, 5678);
  assert_int_equal(pg_decode_startup(x.b, x.n - 1, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  x = startup_body(0x00020000); /* protocol 2.0 */
  put(&x, "", 1);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "0A000");
  x = startup_body(PG_PROTO_V3 + 1); /* 3.1 */
  put(&x, "", 1);
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "0A000");
  assert_int_equal(pg_decode_startup(x.b, 3, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
  assert_int_equal(pg_decode_startup(NULL, 0, &s, &e), MR_ERR_INVALID);
}

static void startup_parameter_without_value(void **state) {
  body x = startup_body(PG_PROTO_V3);
  put_str(&x, "user");
  pg_startup s;
  pg_error e;
  assert_int_equal(pg_decode_startup(x.b, x.n, &s, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void sasl_initial_response(void **state) {
  body x = {{0}, 0};
  put_str(&x, "SCRAM-SHA-256");
  put_i32(&x, 3);
  put(&x, "n,,", 3);
  pg_sasl_initial si;
  pg_error e;
  assert_int_equal(pg_decode_sasl_initial(x.b, x.n, &si, &e), MR_OK);
  assert_string_equal(si.mechanism, "SCRAM-SHA-256");
  assert_int_equal(si.len, 3);
  assert_memory_equal(si.data, "n,,", 3);
  for (size_t cut = 0; cut < x.n; cut++) {
    uint8_t *part = malloc(cut ? cut : 1);
    memcpy(part, x.b, cut);
    assert_int_equal(pg_decode_sasl_initial(part, cut, &si, &e), MR_ERR_INVALID);
    assert_state(&e, "08P01");
    free(part);
  }
  x.n = 0;
  put_str(&x, "SCRAM-SHA-256");
  put_i32(&x, -1);
  assert_int_equal(pg_decode_sasl_initial(x.b, x.n, &si, &e), MR_OK);
  assert_null(si.data);
  x.n = 0;
  put_str(&x, "SCRAM-SHA-256");
  put_i32(&x, -5);
  assert_int_equal(pg_decode_sasl_initial(x.b, x.n, &si, &e), MR_ERR_INVALID);
  x.n = 0;
  put_str(&x, "SCRAM-SHA-256");
  put_i32(&x, 0x7FFFFFFF);
  put(&x, "n,,", 3);
  assert_int_equal(pg_decode_sasl_initial(x.b, x.n, &si, &e), MR_ERR_INVALID);
  assert_state(&e, "08P01");
}

static void message_limits_per_type(void **state) {
  size_t big = (size_t)256 << 20;
  assert_int_equal(pg_message_limit('Q', big), big);
  assert_int_equal(pg_message_limit('B', big), big);
  assert_int_equal(pg_message_limit('P', big), big);
  assert_int_equal(pg_message_limit('d', big), big);
  assert_int_equal(pg_message_limit('S', big), PG_SMALL_MESSAGE);
  assert_int_equal(pg_message_limit('E', big), PG_SMALL_MESSAGE);
  assert_int_equal(pg_message_limit('p', big), PG_AUTH_MESSAGE);
  assert_int_equal(pg_message_limit('\x01', big), PG_SMALL_MESSAGE);
  assert_int_equal(pg_message_limit('S', 100), 100);
  assert_int_equal(pg_message_limit('Q', 100), 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bind_decodes_values_and_formats),
      cmocka_unit_test(format_code_rules),
      cmocka_unit_test(bind_with_two_formats_for_one_parameter_is_08P01),
      cmocka_unit_test(bind_format_codes_must_be_0_or_1),
      cmocka_unit_test(bind_value_lengths_are_checked),
      cmocka_unit_test(bind_huge_counts_fail_without_reading),
      cmocka_unit_test(every_truncated_bind_fails),
      cmocka_unit_test(bind_unterminated_names_fail),
      cmocka_unit_test(bind_checked_against_statement),
      cmocka_unit_test(parse_decodes_and_checks_type_count),
      cmocka_unit_test(describe_and_close_targets),
      cmocka_unit_test(execute_query_and_copy_fail),
      cmocka_unit_test(startup_v3_parameters),
      cmocka_unit_test(startup_requests_and_versions),
      cmocka_unit_test(startup_parameter_without_value),
      cmocka_unit_test(sasl_initial_response),
      cmocka_unit_test(message_limits_per_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
