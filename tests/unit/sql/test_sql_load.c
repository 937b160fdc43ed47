/*
 * test_sql_load.c — sql_engine_load_rows (sql_load.c): every type DuckDB
 * can hold, given as its text form (raw bytes for BLOB-backed columns),
 * loads into a column of that type and reads back equal — equal to an
 * independent SQL literal of the value, and with the same text form. Also:
 * a value the column's cast refuses fails the load with 22P02 naming the
 * column and leaves the table empty; integer and BOOLEAN columns (parsed by
 * moraine, not cast) take exactly what the cast takes; a wrong column count
 * is refused; many rows load in one call.
 *
 * The checks run inside the engine through sql_engine_exec: a query calls
 * error() on any row that is not as expected, so a mismatch fails the exec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sql/sql.h"
#include "sql/sql_util.h"
#include "test_engine.h"

/* One value of a type: its text form as loaded (raw bytes for blobs, len
 * given then) and a DuckDB expression of the same value. */
typedef struct tval {
  const char *text;
  const char *expr;
  size_t len; /* 0: strlen(text) */
} tval;

/* A column type and its values (NULL text: SQL NULL). blob: the text is raw
 * bytes, so only the value is compared, not the text form. */
typedef struct tcase {
  const char *type;
  bool blob;
  tval vals[12];
} tcase;

#define V(text, expr)                                                                              \
  { text, expr, 0 }
#define B(bytes, expr, len)                                                                        \
  { bytes, expr, len }

static const tcase CASES[] = {
    {"INTERVAL",
     false,
     {V("1 month 2 days 00:00:03", "INTERVAL '1 month 2 days 3 seconds'"),
      V("-1 year 03:00:00.000001", "INTERVAL '-1 year 3 hours 0.000001 seconds'"),
      V("178000000 years", "INTERVAL '178000000 years'"), V("00:00:00", "INTERVAL '0 seconds'")}},
    {"HUGEINT",
     false,
     {V("170141183460469231731687303715884105727",
        "170141183460469231731687303715884105727::HUGEINT"),
      V("-170141183460469231731687303715884105728",
        "(-170141183460469231731687303715884105727)::HUGEINT - 1")}},
    {"UHUGEINT",
     false,
     {V("340282366920938463463374607431768211455",
        "340282366920938463463374607431768211455::UHUGEINT"),
      V("0", "0::UHUGEINT")}},
    {"UUID",
     false,
     {V("00000000-0000-0000-0000-000000000000", "'00000000-0000-0000-0000-000000000000'::UUID"),
      V("ffffffff-ffff-ffff-ffff-ffffffffffff", "'ffffffff-ffff-ffff-ffff-ffffffffffff'::UUID"),
      V("0189d4e2-7b1c-7cc0-8a4e-3f1f2d0c9b11", "'0189d4e2-7b1c-7cc0-8a4e-3f1f2d0c9b11'::UUID")}},
    {"BLOB",
     true,
     {B("\x00\xff"
        "ab",
        "'\\x00\\xFFab'::BLOB", 4),
      V("", "''::BLOB")}},
    {"BYTEA", true, {B("\x00\x01\\", "'\\x00\\x01\\x5C'::BLOB", 3)}},
    {"DECIMAL(38,10)",
     false,
     {V("9999999999999999999999999999.9999999999",
        "9999999999999999999999999999.9999999999::DECIMAL(38,10)"),
      V("-0.0000000001", "-0.0000000001::DECIMAL(38,10)")}},
    {"DECIMAL(4,1)", false, {V("-999.9", "-999.9::DECIMAL(4,1)")}},
    {"DECIMAL(18,3)", false, {V("123456789012345.678", "123456789012345.678::DECIMAL(18,3)")}},
    {"DATE",
     false,
     {V("infinity", "'infinity'::DATE"), V("-infinity", "'-infinity'::DATE"),
      V("5877642-06-25 (BC)", "'5877642-06-25 (BC)'::DATE"),
      V("5881580-07-10", "'5881580-07-10'::DATE"), V("0001-12-31 (BC)", "'0001-01-01'::DATE - 1"),
      V("2024-02-29", "DATE '2024-02-29'")}},
    {"TIMESTAMP",
     false,
     {V("infinity", "'infinity'::TIMESTAMP"), V("-infinity", "'-infinity'::TIMESTAMP"),
      V("290309-12-22 (BC) 00:00:00", "'290309-12-22 (BC) 00:00:00'::TIMESTAMP"),
      V("294247-01-10 04:00:54.775806", "'294247-01-10 04:00:54.775806'::TIMESTAMP")}},
    {"TIMESTAMP_NS",
     false,
     {V("1677-09-22 00:00:00.000000001", "'1677-09-22 00:00:00.000000001'::TIMESTAMP_NS"),
      V("2262-04-11 23:47:16.854775806", "'2262-04-11 23:47:16.854775806'::TIMESTAMP_NS"),
      V("infinity", "'infinity'::TIMESTAMP_NS")}},
    {"TIMESTAMP_S", false, {V("2020-01-01 01:02:03", "'2020-01-01 01:02:03'::TIMESTAMP_S")}},
    {"TIMESTAMP_MS",
     false,
     {V("2020-01-01 01:02:03.123", "'2020-01-01 01:02:03.123'::TIMESTAMP_MS")}},
    {"TIMESTAMP WITH TIME ZONE",
     false,
     {V("2020-01-01 01:02:03.123456+05:30", "'2020-01-01 01:02:03.123456+05:30'::TIMESTAMPTZ"),
      V("infinity", "'infinity'::TIMESTAMPTZ"), V("-infinity", "'-infinity'::TIMESTAMPTZ")}},
    {"TIME",
     false,
     {V("24:00:00", "'24:00:00'::TIME"), V("00:00:00.000001", "'00:00:00.000001'::TIME"),
      V("12:34:56", "TIME '12:34:56'")}},
    {"TIME WITH TIME ZONE",
     false,
     {V("10:11:12.5+15:59", "'10:11:12.5+15:59'::TIMETZ"),
      V("00:00:00-15:59", "'00:00:00-15:59'::TIMETZ"),
      V("24:00:00-15:59", "'24:00:00-15:59'::TIMETZ")}},
    {"INTEGER[]", false, {V("[1, NULL, 3]", "[1, NULL, 3]::INTEGER[]"), V("[]", "[]::INTEGER[]")}},
    {"VARCHAR[]",
     false,
     {V("[a, 'b,c', 'd\\'e', 'f\"g', NULL, 'NULL', '', ' x ', '[', ']']",
        "['a', 'b,c', 'd''e', 'f\"g', NULL, 'NULL', '', ' x ', '[', ']']::VARCHAR[]")}},
    {"INTEGER[3]", false, {V("[1, 2, 3]", "[1, 2, 3]::INTEGER[3]")}},
    {"STRUCT(a INTEGER, \"b c\" VARCHAR)",
     false,
     {V("{'a': 1, 'b c': 'x, y}'}", "{'a': 1, 'b c': 'x, y}'}"),
      V("{'a': NULL, 'b c': ''}", "{'a': NULL, 'b c': ''}")}},
    {"MAP(VARCHAR, INTEGER[])",
     false,
     {V("{'k=1'=[1, 2], x=NULL}", "MAP {'k=1': [1, 2], 'x': NULL}")}},
    {"STRUCT(l INTEGER[], m MAP(VARCHAR, VARCHAR))[]",
     false,
     {V("[{'l': [1], 'm': {a='b: c'}}]", "[{'l': [1], 'm': MAP {'a': 'b: c'}}]")}},
    {"UNION(n INTEGER, s VARCHAR)", false, {V("x", "union_value(s := 'x')")}},
    /* a UNION nested in a STRUCT or LIST: the NULL row must stay NULL */
    {"STRUCT(u UNION(n INTEGER, s VARCHAR))",
     false,
     {V("{'u': x}", "{'u': union_value(s := 'x')}")}},
    {"UNION(n INTEGER, s VARCHAR)[]", false, {V("[x]", "[union_value(s := 'x')]")}},
    {"VARCHAR",
     false,
     {V("h\xc3\xa9llo \xe2\x98\x83 \xf0\x9d\x84\x9e 'q' \"d\" \\",
        "'h\xc3\xa9llo \xe2\x98\x83 "
        "\xf0\x9d\x84\x9e ''q'' \"d\" \\'"),
      V("", "''"), V("NULL", "'NULL'")}},
    {"JSON",
     false,
     {V("{\"a\":[1,\"x\\\"y\"],\"b\":null}", "'{\"a\":[1,\"x\\\"y\"],\"b\":null}'::JSON")}},
    {"ENUM('sad', 'it''s ok')", false, {V("it's ok", "'it''s ok'"), V("sad", "'sad'")}},
    {"BOOLEAN", false, {V("true", "true"), V("false", "false")}},
    {"TINYINT", false, {V("-128", "(-128)::TINYINT"), V("127", "127::TINYINT")}},
    {"SMALLINT", false, {V("-32768", "(-32768)::SMALLINT")}},
    {"INTEGER", false, {V("-2147483648", "(-2147483648)::INTEGER")}},
    {"BIGINT", false, {V("-9223372036854775808", "(-9223372036854775807)::BIGINT - 1")}},
    {"UTINYINT", false, {V("255", "255::UTINYINT")}},
    {"USMALLINT", false, {V("65535", "65535::USMALLINT")}},
    {"UINTEGER", false, {V("4294967295", "4294967295::UINTEGER")}},
    {"UBIGINT", false, {V("18446744073709551615", "18446744073709551615::UBIGINT")}},
    {"REAL",
     false,
     {V("nan", "'nan'::REAL"), V("inf", "'inf'::REAL"), V("-inf", "'-inf'::REAL"),
      V("-0.0", "'-0.0'::REAL"), V("1e-45", "'1e-45'::REAL"),
      V("3.4028235e+38", "'3.4028235e+38'::REAL")}},
    {"DOUBLE",
     false,
     {V("nan", "'nan'::DOUBLE"), V("-inf", "'-inf'::DOUBLE"), V("5e-324", "5e-324::DOUBLE"),
      V("1.7976931348623157e+308", "1.7976931348623157e+308::DOUBLE"), V("0.1", "0.1::DOUBLE")}},
    {"BIT", false, {V("0101", "'0101'::BIT")}},
};

static char *fmt(const char *f, ...) MR_PRINTF(1, 2);
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  assert_true(n >= 0);
  char *out = malloc((size_t)n + 1);
  assert_non_null(out);
  va_start(ap, f);
  vsnprintf(out, (size_t)n + 1, f, ap);
  va_end(ap);
  return out;
}

static size_t nvals(const tcase *c) {
  size_t n = 0;
  while (n < sizeof c->vals / sizeof c->vals[0] && c->vals[n].text)
    n++;
  return n;
}

static void test_every_type_round_trips(void **state) {
  sql_engine *e = *state;
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
    const tcase *c = &CASES[k];
    size_t n = nvals(c);
    char *sql = fmt("CREATE TABLE public.t%zu(id INTEGER, v %s)", k, c->type);
    test_engine_exec(e, sql);
    free(sql);
    /* the values, then one NULL row */
    sql_value *rows = calloc(2 * (n + 1), sizeof *rows);
    char(*ids)[16] = calloc(n + 1, sizeof *ids);
    assert_non_null(rows);
    assert_non_null(ids);
    for (size_t i = 0; i <= n; i++) {
      snprintf(ids[i], sizeof ids[i], "%zu", i);
      rows[2 * i] = SQL_VALUE_TEXT(ids[i], strlen(ids[i]));
      if (i < n) {
        const tval *v = &c->vals[i];
        rows[2 * i + 1] = SQL_VALUE_TEXT(v->text, v->len ? v->len : strlen(v->text));
      } else {
        rows[2 * i + 1] = SQL_VALUE_NULL;
      }
    }
    sql_error err;
    char *table = fmt("t%zu", k);
    if (sql_engine_load_rows(e, "public", table, 2, n + 1, rows, &err) != MR_OK)
      fail_msg("load %s: %s %s", c->type, err.sqlstate, err.base.msg);
    /* read back: the same value, and (for text-form types) the same text */
    for (size_t i = 0; i < n; i++) {
      const tval *v = &c->vals[i];
      sql = fmt("SELECT error('case %zu row ' || id || ' reads back as ' || CAST(v AS VARCHAR)) "
                "FROM public.%s WHERE id = %zu AND NOT (v IS NOT DISTINCT FROM (%s)%s%s%s)",
                k, table, i, v->expr, c->blob ? "" : " AND CAST(v AS VARCHAR) = CAST((",
                c->blob ? "" : v->expr, c->blob ? "" : ") AS VARCHAR)");
      test_engine_exec(e, sql);
      free(sql);
    }
    sql = fmt("SELECT error('case %zu: ' || count(*) || ' rows, ' || count(v) || ' values') FROM "
              "public.%s HAVING count(*) <> %zu OR count(v) <> %zu",
              k, table, n + 1, n);
    test_engine_exec(e, sql);
    free(sql);
    free(table);
    free(rows);
    free(ids);
  }
}

static void test_refused_value_names_the_column(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.bad(id INTEGER, iv INTERVAL)");
  sql_value rows[] = {SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("1 day", 5), SQL_VALUE_TEXT("2", 1),
                      SQL_VALUE_TEXT("not an interval", 15)};
  sql_error err;
  assert_int_not_equal(sql_engine_load_rows(e, "public", "bad", 2, 2, rows, &err), MR_OK);
  assert_string_equal(err.sqlstate, "22P02");
  assert_non_null(strstr(err.base.msg, "iv (INTERVAL)"));
  assert_non_null(strstr(err.base.msg, "not an interval"));
  /* nothing of the failed call is left */
  test_engine_exec(e,
                   "SELECT error('rows left: ' || count(*)) FROM public.bad HAVING count(*) <> 0");
  /* and the engine still loads */
  assert_int_equal(sql_engine_load_rows(e, "public", "bad", 2, 1, rows, &err), MR_OK);
  test_engine_exec(e, "SELECT error('rows: ' || count(*)) FROM public.bad HAVING count(*) <> 1");
}

/* Integer and BOOLEAN columns are parsed by moraine itself when their text
 * is the canonical one DuckDB prints; any other text DuckDB's cast takes
 * ('+7', 'T') still loads (through the cast), and one it refuses fails the
 * call naming the column, leaving nothing behind. */
static void test_direct_columns_take_what_the_cast_takes(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.direct(a BIGINT, b BOOLEAN, c UTINYINT)");
  sql_value rows[] = {SQL_VALUE_TEXT("+7", 2),    SQL_VALUE_TEXT("T", 1),
                      SQL_VALUE_TEXT("7", 1),     SQL_VALUE_TEXT("8", 1),
                      SQL_VALUE_TEXT("false", 5), SQL_VALUE_TEXT("255", 3)};
  sql_error err;
  if (sql_engine_load_rows(e, "public", "direct", 3, 2, rows, &err) != MR_OK)
    fail_msg("%s", err.base.msg);
  test_engine_exec(
      e, "SELECT error('direct rows') FROM (SELECT count(*) AS n, "
         "count(*) FILTER (WHERE (a = 7 AND b AND c = 7) OR (a = 8 AND NOT b AND c = 255)) "
         "AS good FROM public.direct) WHERE n <> 2 OR good <> 2");
  sql_value over[] = {SQL_VALUE_TEXT("9", 1), SQL_VALUE_TEXT("true", 4), SQL_VALUE_TEXT("256", 3)};
  assert_int_not_equal(sql_engine_load_rows(e, "public", "direct", 3, 1, over, &err), MR_OK);
  assert_non_null(strstr(err.base.msg, "c (UTINYINT)"));
  assert_non_null(strstr(err.base.msg, "256"));
  test_engine_exec(e, "SELECT error('rows: ' || count(*)) FROM public.direct HAVING count(*) <> 2");
}

/* An integer column's edges through the direct parse: the extremes load
 * exactly, one past them is refused through the cast (naming the column);
 * a cell that carries its integer (a store load's) loads that integer and
 * is range-checked like text. */
static sql_value int_cell(const char *text, int64_t v) {
  sql_value c = SQL_VALUE_TEXT(text, strlen(text));
  c.has_int = true;
  c.int_value = v;
  return c;
}

static void test_integer_edges_and_carried_integers(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.edges(a BIGINT, b INTEGER, c UINTEGER)");
  sql_value rows[] = {SQL_VALUE_TEXT("-9223372036854775808", 20),
                      SQL_VALUE_TEXT("-2147483648", 11),
                      SQL_VALUE_TEXT("4294967295", 10),
                      SQL_VALUE_TEXT("9223372036854775807", 19),
                      SQL_VALUE_TEXT("2147483647", 10),
                      SQL_VALUE_TEXT("0000000000000000000042", 22),
                      int_cell("-5", -5),
                      int_cell("-6", -6),
                      int_cell("7", 7)};
  sql_error err;
  if (sql_engine_load_rows(e, "public", "edges", 3, 3, rows, &err) != MR_OK)
    fail_msg("%s", err.base.msg);
  test_engine_exec(
      e, "SELECT error('edge rows') FROM (SELECT count(*) AS n, count(*) FILTER (WHERE "
         "(a = -9223372036854775808 AND b = -2147483648 AND c = 4294967295) OR "
         "(a = 9223372036854775807 AND b = 2147483647 AND c = 42) OR "
         "(a = -5 AND b = -6 AND c = 7)) AS good FROM public.edges) WHERE n <> 3 OR good <> 3");
  sql_value past[][3] = {
      {SQL_VALUE_TEXT("9223372036854775808", 19), SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("1", 1)},
      {SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("-2147483649", 11), SQL_VALUE_TEXT("1", 1)},
      {SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("-1", 2)},
      {SQL_VALUE_TEXT("1", 1), int_cell("4294967296", 4294967296LL), SQL_VALUE_TEXT("1", 1)},
      {SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("1", 1), int_cell("-1", -1)}};
  const char *culprit[] = {"a (BIGINT)", "b (INTEGER)", "c (UINTEGER)", "b (INTEGER)",
                           "c (UINTEGER)"};
  for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
    assert_int_not_equal(sql_engine_load_rows(e, "public", "edges", 3, 1, past[i], &err), MR_OK);
    if (strstr(err.base.msg, culprit[i]) == NULL)
      fail_msg("row %zu: %s", i, err.base.msg);
  }
  test_engine_exec(e, "SELECT error('rows: ' || count(*)) FROM public.edges HAVING count(*) <> 3");
}

static void test_wrong_width_and_missing_table(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.w(a BIGINT, b VARCHAR)");
  sql_value rows[] = {SQL_VALUE_TEXT("1", 1)};
  sql_error err;
  assert_int_not_equal(sql_engine_load_rows(e, "public", "w", 1, 1, rows, &err), MR_OK);
  assert_string_equal(err.sqlstate, "22023");
  assert_int_not_equal(sql_engine_load_rows(e, "public", "w", 1, 0, rows, &err), MR_OK);
  assert_int_not_equal(sql_engine_load_rows(e, "public", "nope", 1, 1, rows, &err), MR_OK);
}

static void test_many_rows_in_one_call(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.many(id BIGINT, name VARCHAR, d DECIMAL(9,2))");
  enum { N = 50000 };
  sql_value *rows = calloc(3 * N, sizeof *rows);
  char(*txt)[2][24] = calloc(N, sizeof *txt);
  assert_non_null(rows);
  assert_non_null(txt);
  for (size_t i = 0; i < N; i++) {
    snprintf(txt[i][0], sizeof txt[i][0], "%zu", i);
    snprintf(txt[i][1], sizeof txt[i][1], "%zu.%02zu", i, i % 100);
    rows[3 * i] = SQL_VALUE_TEXT(txt[i][0], strlen(txt[i][0]));
    rows[3 * i + 1] = SQL_VALUE_TEXT(txt[i][0], strlen(txt[i][0]));
    rows[3 * i + 2] = SQL_VALUE_TEXT(txt[i][1], strlen(txt[i][1]));
  }
  sql_error err;
  if (sql_engine_load_rows(e, "public", "many", 3, N, rows, &err) != MR_OK)
    fail_msg("%s", err.base.msg);
  test_engine_exec(
      e, "SELECT error('bad rows') FROM (SELECT count(*) AS n, sum(id) AS s, "
         "count(*) FILTER (WHERE name <> CAST(id AS VARCHAR) OR d <> id + (id % 100) / 100) "
         "AS bad FROM public.many) WHERE n <> 50000 OR s <> 1249975000 OR bad <> 0");
  free(rows);
  free(txt);
}

/* More rows than one appender flush takes (DuckDB flushes every 204,800):
 * a value refused in the last row still leaves none of the rows. */
static void test_refusal_after_many_rows_leaves_nothing(void **state) {
  sql_engine *e = *state;
  test_engine_exec(e, "CREATE TABLE public.huge(id BIGINT, d DECIMAL(9,2))");
  enum { N = 250000 };
  sql_value *rows = calloc(2 * N, sizeof *rows);
  char(*txt)[24] = calloc(N, sizeof *txt);
  assert_non_null(rows);
  assert_non_null(txt);
  for (size_t i = 0; i < N; i++) {
    snprintf(txt[i], sizeof txt[i], "%zu", i);
    rows[2 * i] = SQL_VALUE_TEXT(txt[i], strlen(txt[i]));
    rows[2 * i + 1] = SQL_VALUE_TEXT(txt[i], strlen(txt[i]));
  }
  rows[2 * (N - 1) + 1] = SQL_VALUE_TEXT("not a number", 12);
  sql_error err;
  assert_int_not_equal(sql_engine_load_rows(e, "public", "huge", 2, N, rows, &err), MR_OK);
  assert_non_null(strstr(err.base.msg, "not a number"));
  test_engine_exec(e,
                   "SELECT error('rows left: ' || count(*)) FROM public.huge HAVING count(*) <> 0");
  /* and all of them load when the last one is good */
  rows[2 * (N - 1) + 1] = SQL_VALUE_TEXT("1.5", 3);
  if (sql_engine_load_rows(e, "public", "huge", 2, N, rows, &err) != MR_OK)
    fail_msg("%s", err.base.msg);
  test_engine_exec(e,
                   "SELECT error('rows: ' || count(*)) FROM public.huge HAVING count(*) <> 250000");
  free(rows);
  free(txt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type_round_trips),
      cmocka_unit_test(test_refused_value_names_the_column),
      cmocka_unit_test(test_direct_columns_take_what_the_cast_takes),
      cmocka_unit_test(test_integer_edges_and_carried_integers),
      cmocka_unit_test(test_wrong_width_and_missing_table),
      cmocka_unit_test(test_many_rows_in_one_call),
      cmocka_unit_test(test_refusal_after_many_rows_leaves_nothing),
  };
  return cmocka_run_group_tests(tests, test_engine_setup, test_engine_teardown);
}
