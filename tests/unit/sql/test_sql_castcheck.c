/*
 * test_sql_castcheck.c — the engine's load-back cast check
 * (sql_engine_check_casts, sql_castcheck.h) in a real in-memory engine:
 * values that cast pass, the first column that does not is named with
 * DuckDB's reason on one line, a NUL byte is refused, a type's text cannot
 * add a statement, more type lists than the statement slots still check
 * each list with its own types, and a check changes no rows.
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
#include "sql/sql_castcheck.h"
#include "sql/sql_internal.h"

static int setup(void **state) {
  sql_engine_options o = {.server_version = "15.0 (moraine test)"};
  sql_error err;
  sql_engine *e;
  if (sql_engine_open(&o, &e, &err) != MR_OK)
    return -1;
  *state = e;
  return 0;
}

static int teardown(void **state) {
  sql_engine_close(*state);
  return 0;
}

/* A column of n texts (NULL: SQL NULL) in v, one value per row. */
static sql_cast_column column(const char *type, sql_value *v, size_t n, const char *const *texts) {
  for (size_t i = 0; i < n; i++)
    v[i] = texts[i] ? SQL_VALUE_TEXT(texts[i], strlen(texts[i])) : SQL_VALUE_NULL;
  return (sql_cast_column){type, v, 1, n};
}

static void values_that_cast_pass(void **state) {
  sql_engine *e = *state;
  sql_value v[4][3];
  const char *dbl[] = {"1.5", NULL, "-inf"};
  const char *day[] = {"2024-02-29"};
  const char *st[] = {"{'a': 1, 'b c': 'it\\'s'}", NULL}; /* as DuckDB prints it */
  const char *none[] = {NULL, NULL};
  sql_cast_column cols[] = {
      column("DOUBLE", v[0], 3, dbl), column("DATE", v[1], 1, day),
      column("STRUCT(a INTEGER, \"b c\" VARCHAR)", v[2], 2, st),
      column("INTERVAL", v[3], 2, none), /* all NULL: an empty list */
  };
  size_t bad = 99;
  sql_error err;
  if (sql_engine_check_casts(e, 4, cols, &bad, &err) != MR_OK)
    fail_msg("%s", err.base.msg);
  assert_int_equal(bad, 4);
  assert_int_equal(sql_engine_check_casts(e, 0, cols, &bad, &err), MR_OK);
  assert_int_equal(bad, 0);
}

static void the_first_failing_column_is_named(void **state) {
  sql_engine *e = *state;
  sql_value v[3][2];
  const char *ok1[] = {"1.5", "2"};
  const char *ok2[] = {"2024-01-01"};
  const char *no[] = {"3", "three"};
  /* two DOUBLE columns: DuckDB's reason alone cannot tell them apart */
  sql_cast_column cols[] = {column("DOUBLE", v[0], 2, ok1), column("DATE", v[1], 1, ok2),
                            column("DOUBLE", v[2], 2, no)};
  size_t bad = 99;
  sql_error err;
  memset(&err, 0, sizeof err);
  assert_int_equal(sql_engine_check_casts(e, 3, cols, &bad, &err), MR_ERR_INVALID);
  assert_int_equal(bad, 2);
  assert_string_equal(err.sqlstate, "22P02");
  assert_non_null(strstr(err.base.msg, "three"));
  assert_null(strchr(err.base.msg, '\n')); /* not moraine's own statement */
  /* the same list again, now with its failing value in the first column */
  cols[0] = column("DOUBLE", v[0], 2, no);
  cols[2] = column("DOUBLE", v[2], 2, ok1);
  assert_int_equal(sql_engine_check_casts(e, 3, cols, &bad, &err), MR_ERR_INVALID);
  assert_int_equal(bad, 0);
  /* an unknown type is refused at prepare and named too */
  cols[0] = column("NO_SUCH_TYPE", v[0], 2, ok1);
  cols[2] = column("DOUBLE", v[2], 2, ok1);
  assert_int_equal(sql_engine_check_casts(e, 3, cols, &bad, &err), MR_ERR_INVALID);
  assert_int_equal(bad, 0);
}

static void a_nul_byte_is_refused(void **state) {
  sql_engine *e = *state;
  sql_value v[2] = {SQL_VALUE_TEXT("1 day", 5), SQL_VALUE_TEXT("1\0 day", 6)};
  const char *ok[] = {"1.5"};
  sql_value w[1];
  sql_cast_column cols[] = {column("DOUBLE", w, 1, ok), {"INTERVAL", v, 1, 2}};
  size_t bad = 99;
  sql_error err;
  memset(&err, 0, sizeof err);
  assert_int_equal(sql_engine_check_casts(e, 2, cols, &bad, &err), MR_ERR_INVALID);
  assert_int_equal(bad, 1);
  assert_non_null(strstr(err.base.msg, "NUL"));
}

static void a_type_text_cannot_add_a_statement(void **state) {
  sql_engine *e = *state;
  sql_value v[1];
  const char *one[] = {"1"};
  sql_cast_column c =
      column("INTEGER[]) FROM (SELECT 1); CREATE TABLE planted (i INTEGER); SELECT (1", v, 1, one);
  size_t bad = 99;
  sql_error err;
  assert_int_equal(sql_engine_check_casts(e, 1, &c, &bad, &err), MR_ERR_INVALID);
  assert_int_equal(bad, 0);
  assert_int_equal(sql_engine_exec(e, "SELECT * FROM planted", &err), MR_ERR_INVALID);
}

/* DECIMAL(p,1) holds p-1 integer digits: "9..9.9" casts, "10..0.0" not. */
static void check_decimal(sql_engine *e, int p) {
  char type[32], fits[48], over[48];
  snprintf(type, sizeof type, "DECIMAL(%d,1)", p);
  memset(fits, '9', (size_t)p - 1);
  strcpy(fits + p - 1, ".9");
  over[0] = '1';
  memset(over + 1, '0', (size_t)p - 1);
  strcpy(over + p, ".0");
  sql_value v[2][1];
  const char *a[] = {fits}, *b[] = {over};
  sql_cast_column cols[] = {column(type, v[0], 1, a),
                            column("DATE", v[1], 1, (const char *[]){NULL})};
  size_t bad;
  sql_error err;
  if (sql_engine_check_casts(e, 2, cols, &bad, &err) != MR_OK)
    fail_msg("%s refused %s: %s", type, fits, err.base.msg);
  cols[0] = column(type, v[0], 1, b);
  if (sql_engine_check_casts(e, 2, cols, &bad, &err) != MR_ERR_INVALID || bad != 0)
    fail_msg("%s took %s", type, over);
}

static void more_type_lists_than_slots_each_check_their_own(void **state) {
  sql_engine *e = *state;
  /* 2 x 37 lists over SQL_CASTCHECK_STATEMENTS slots, the second round
   * backwards: every list is prepared again after its slot was taken */
  assert_true(37 > SQL_CASTCHECK_STATEMENTS);
  for (int p = 2; p <= 38; p++)
    check_decimal(e, p);
  for (int p = 38; p >= 2; p--)
    check_decimal(e, p);
}

static void a_check_changes_no_rows(void **state) {
  sql_engine *e = *state;
  uint64_t before, after;
  assert_true(sql_data_gen(e, &before));
  sql_value v[1];
  const char *no[] = {"not a date"};
  sql_cast_column c = column("DATE", v, 1, no);
  size_t bad;
  sql_error err;
  assert_int_equal(sql_engine_check_casts(e, 1, &c, &bad, &err), MR_ERR_INVALID);
  const char *ok[] = {"2024-01-01"};
  c = column("DATE", v, 1, ok);
  assert_int_equal(sql_engine_check_casts(e, 1, &c, &bad, &err), MR_OK);
  assert_true(sql_data_gen(e, &after));
  assert_int_equal(before, after);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(values_that_cast_pass),
      cmocka_unit_test(the_first_failing_column_is_named),
      cmocka_unit_test(a_nul_byte_is_refused),
      cmocka_unit_test(a_type_text_cannot_add_a_statement),
      cmocka_unit_test(more_type_lists_than_slots_each_check_their_own),
      cmocka_unit_test(a_check_changes_no_rows),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
