/* test_sql_lift.c — literal lifting: which literals of an INSERT become
 * parameters (and which never do), and that a shape prepared in a real
 * DuckDB and run with the lifted values stores exactly the rows the
 * literal text stores, or refuses to bind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <duckdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_lift.h"

static sql_lifted lift(const char *sql) {
  sql_lifted l;
  sql_error err;
  assert_int_equal(sql_lift(sql, &l, &err), MR_OK);
  return l;
}

static void assert_not_lifted(const char *sql) {
  sql_lifted l = lift(sql);
  if (l.n != 0)
    fail_msg("lifted %zu literal(s) of: %s", l.n, sql);
  assert_null(l.shape);
  sql_lifted_free(&l);
}

static void lifts_a_ducklake_insert(void **state) {
  (void)state;
  sql_lifted l = lift("INSERT INTO \"public\".ducklake_snapshot_changes VALUES (22, "
                      "'inlined_insert:1', NULL, NULL, NULL)\nRETURNING CAST(snapshot_id AS VARCHAR)");
  assert_int_equal(l.n, 2);
  assert_string_equal(l.shape, "INSERT INTO \"public\".ducklake_snapshot_changes VALUES ($1, $2, "
                               "NULL, NULL, NULL)\nRETURNING CAST(snapshot_id AS VARCHAR)");
  assert_false(l.v[0].is_string);
  assert_string_equal(l.v[0].text, "22");
  assert_true(l.v[1].is_string);
  assert_string_equal(l.v[1].text, "inlined_insert:1");
  assert_int_equal(l.v[1].len, 16);
  sql_lifted_free(&l);
}

static void lifts_every_row_and_a_column_list(void **state) {
  (void)state;
  sql_lifted l = lift("insert into s.t (a, \"b c\") values (1,'it''s'), (2, '') returning a");
  assert_int_equal(l.n, 4);
  assert_string_equal(l.shape, "insert into s.t (a, \"b c\") values ($1,$2), ($3, $4) returning a");
  assert_string_equal(l.v[1].text, "it's");
  assert_int_equal(l.v[1].len, 4);
  assert_string_equal(l.v[3].text, "");
  assert_int_equal(l.v[3].len, 0);
  sql_lifted_free(&l);
  /* an integer past int32 is an FCONST to PostgreSQL's scanner: still digits */
  l = lift("INSERT INTO t VALUES (12345678901234)");
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].text, "12345678901234");
  sql_lifted_free(&l);
}

static void leaves_what_is_not_a_plain_constant(void **state) {
  (void)state;
  /* signed, decimal, prefixed or continued literals stay in the text */
  sql_lifted l = lift("INSERT INTO t VALUES (-1, 2.5, E'a\\n', 'a'\n'b', 7)");
  assert_int_equal(l.n, 1);
  assert_string_equal(l.shape, "INSERT INTO t VALUES (-1, 2.5, E'a\\n', 'a'\n'b', $1)");
  sql_lifted_free(&l);
  /* an element that is more than a literal */
  l = lift("INSERT INTO t VALUES (1 + 2, 3)");
  assert_int_equal(l.n, 1);
  assert_string_equal(l.shape, "INSERT INTO t VALUES (1 + 2, $1)");
  sql_lifted_free(&l);
}

static void lifts_nothing_elsewhere(void **state) {
  (void)state;
  /* a function in a row makes DuckDB plan the statement at every run */
  assert_not_lifted("INSERT INTO \"public\".ducklake_snapshot VALUES (22, NOW(), 1, 2, 21)");
  assert_not_lifted("INSERT INTO t VALUES ('1'::BIGINT)");
  assert_not_lifted("INSERT INTO t VALUES (X'00')");
  assert_not_lifted("SELECT * FROM t WHERE a = 1");
  assert_not_lifted("UPDATE t SET a = 1 WHERE b = 2");
  assert_not_lifted("DELETE FROM t WHERE a = 1");
  assert_not_lifted("INSERT INTO t SELECT 1");
  assert_not_lifted("WITH v AS (SELECT 1) INSERT INTO t VALUES (1)");
  assert_not_lifted("INSERT INTO t VALUES ($1, 2)");
  assert_not_lifted("INSERT INTO t (ctid) VALUES ('(0,1)')");
  assert_not_lifted("INSERT INTO t VALUES (NULL, true)");
  assert_not_lifted("INSERT INTO t VALUES ('unterminated");
  assert_not_lifted("INSERT INTO t VALUES (f(1))");
  /* what follows the rows is not theirs */
  sql_lifted l = lift("INSERT INTO t VALUES (1) ON CONFLICT DO UPDATE SET a = 2");
  assert_int_equal(l.n, 1);
  assert_string_equal(l.shape, "INSERT INTO t VALUES ($1) ON CONFLICT DO UPDATE SET a = 2");
  sql_lifted_free(&l);
}

/* ---- with DuckDB --------------------------------------------------------- */

typedef struct db {
  duckdb_database db;
  duckdb_connection con;
} db;

static void query(db *d, const char *sql) {
  duckdb_result r;
  if (duckdb_query(d->con, sql, &r) != DuckDBSuccess)
    fail_msg("%s: %s", sql, duckdb_result_error(&r));
  duckdb_destroy_result(&r);
}

static int setup(void **state) {
  db *d = calloc(1, sizeof *d);
  assert_int_equal(duckdb_open(NULL, &d->db), DuckDBSuccess);
  assert_int_equal(duckdb_connect(d->db, &d->con), DuckDBSuccess);
  query(d, "CREATE TABLE lit (b BIGINT, i INTEGER, s SMALLINT, v VARCHAR, d DOUBLE, x BLOB)");
  query(d, "CREATE TABLE par (b BIGINT, i INTEGER, s SMALLINT, v VARCHAR, d DOUBLE, x BLOB)");
  *state = d;
  return 0;
}

static int teardown(void **state) {
  db *d = *state;
  duckdb_disconnect(&d->con);
  duckdb_close(&d->db);
  free(d);
  return 0;
}

/* Runs `INSERT INTO lit VALUES row` as text and through its lifted shape
 * into par; returns whether the shape bound. Both tables must then hold the
 * same rows. */
static bool insert_both(db *d, const char *row) {
  char sql[512];
  snprintf(sql, sizeof sql, "INSERT INTO lit VALUES %s", row);
  query(d, sql);
  snprintf(sql, sizeof sql, "INSERT INTO par VALUES %s", row);
  sql_lifted l = lift(sql);
  assert_true(l.n > 0);
  duckdb_prepared_statement ps;
  assert_int_equal(duckdb_prepare(d->con, l.shape, &ps), DuckDBSuccess);
  bool bound = sql_lift_bind(ps, &l);
  duckdb_result r;
  if (bound)
    assert_int_equal(duckdb_execute_prepared(ps, &r), DuckDBSuccess);
  else
    assert_int_equal(duckdb_query(d->con, sql, &r), DuckDBSuccess); /* what the caller does */
  duckdb_destroy_result(&r);
  duckdb_destroy_prepare(&ps);
  sql_lifted_free(&l);
  return bound;
}

static void bound_rows_equal_literal_rows(void **state) {
  db *d = *state;
  query(d, "DELETE FROM lit");
  query(d, "DELETE FROM par");
  assert_true(insert_both(d, "(9223372036854775807, 2147483647, 32767, 'it''s', 1.5, NULL)"));
  assert_true(insert_both(d, "('-9223372036854775808', '-2147483648', '-32768', '', NULL, NULL)"));
  assert_true(insert_both(d, "('007', 0, 1, '\\x41 é', 2.0, NULL)"));
  /* a value that reads like SQL is data in the shape, never text of it */
  assert_true(insert_both(d, "(1, 1, 1, '$1''), (2, 2, 2, ''x''); DROP TABLE lit; --', NULL, NULL)"));
  /* a blob, a number for text, a double: refused, and the text runs */
  assert_false(insert_both(d, "(1, 1, 1, 'a', NULL, '\\x41')"));
  assert_false(insert_both(d, "(1, 1, 1, 42, NULL, NULL)"));
  assert_false(insert_both(d, "(1, 1, 1, 'a', 3, NULL)"));
  duckdb_result r;
  assert_int_equal(duckdb_query(d->con,
                                "SELECT count(*) FROM (SELECT * FROM lit EXCEPT ALL SELECT * FROM par "
                                "UNION ALL (SELECT * FROM par EXCEPT ALL SELECT * FROM lit))",
                                &r),
                   DuckDBSuccess);
  assert_int_equal(duckdb_value_int64(&r, 0, 0), 0);
  duckdb_destroy_result(&r);
  assert_int_equal(duckdb_query(d->con, "SELECT count(*) FROM par", &r), DuckDBSuccess);
  assert_int_equal(duckdb_value_int64(&r, 0, 0), 7);
  duckdb_destroy_result(&r);
}

/* Does `literal` bind to ps's INTEGER parameter (ps: INSERT INTO par (i, v))? */
static bool binds_to_integer(duckdb_prepared_statement ps, const char *literal) {
  char sql[128];
  snprintf(sql, sizeof sql, "INSERT INTO par (i, v) VALUES (%s, 'x')", literal);
  sql_lifted l = lift(sql);
  assert_int_equal(l.n, 2);
  bool bound = sql_lift_bind(ps, &l);
  sql_lifted_free(&l);
  return bound;
}

/* Values DuckDB might cast but not the way sql_lift_bind would: refused. */
static void refuses_inexact_values(void **state) {
  db *d = *state;
  duckdb_prepared_statement ps;
  assert_int_equal(duckdb_prepare(d->con, "INSERT INTO par (i, v) VALUES ($1, $2)", &ps),
                   DuckDBSuccess);
  const char *ints[] = {"'2147483648'", "'-2147483649'", "' 5'", "'+5'", "'5.0'", "'1e3'",
                        "''", "'-'", "'99999999999999999999'", "2147483648"};
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
    if (binds_to_integer(ps, ints[i]))
      fail_msg("bound %s to INTEGER", ints[i]);
  const char *fits[] = {"'-2147483648'", "'-0'", "'0'", "2147483647"};
  for (size_t i = 0; i < sizeof fits / sizeof *fits; i++)
    if (!binds_to_integer(ps, fits[i]))
      fail_msg("did not bind %s to INTEGER", fits[i]);
  duckdb_destroy_prepare(&ps);
}

static void bindable_only_for_exact_types(void **state) {
  db *d = *state;
  duckdb_prepared_statement ps;
  assert_int_equal(duckdb_prepare(d->con, "INSERT INTO par (b, i, s, v) VALUES ($1, $2, $3, $4)", &ps),
                   DuckDBSuccess);
  assert_true(sql_lift_bindable(ps, 4));
  assert_false(sql_lift_bindable(ps, 3)); /* the count must match */
  duckdb_destroy_prepare(&ps);
  assert_int_equal(duckdb_prepare(d->con, "INSERT INTO par (b, d) VALUES ($1, $2)", &ps),
                   DuckDBSuccess);
  assert_false(sql_lift_bindable(ps, 2)); /* DOUBLE */
  duckdb_destroy_prepare(&ps);
  query(d, "CREATE TYPE mr_test_bytea AS BLOB"); /* like moraine's pg_bytea */
  query(d, "CREATE TABLE aliased (a mr_test_bytea)");
  assert_int_equal(duckdb_prepare(d->con, "INSERT INTO aliased VALUES ($1)", &ps), DuckDBSuccess);
  assert_false(sql_lift_bindable(ps, 1));
  duckdb_destroy_prepare(&ps);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lifts_a_ducklake_insert),
      cmocka_unit_test(lifts_every_row_and_a_column_list),
      cmocka_unit_test(leaves_what_is_not_a_plain_constant),
      cmocka_unit_test(lifts_nothing_elsewhere),
      cmocka_unit_test(bound_rows_equal_literal_rows),
      cmocka_unit_test(refuses_inexact_values),
      cmocka_unit_test(bindable_only_for_exact_types),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
