/* test_sql_history.c — the history needs the planner reads from a
 * statement (sql_history.h): DuckLake's own catalog queries at the current
 * snapshot need nothing beyond a bound the server can check, time travel
 * and change feeds name the tables they read, and every shape whose
 * predicates do not keep ended rows out (outer joins, parameters, NOT,
 * COPY) is unbounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_plan.h"

static sql_plans plans;

/* The needs of the one statement sql. */
static const sql_hist_needs *needs(const char *sql) {
  sql_plans_free(&plans);
  sql_error err;
  memset(&err, 0, sizeof err);
  if (sql_plan_query(sql, NULL, &plans, &err) != MR_OK)
    fail_msg("%s: refused: %s", sql, err.base.msg);
  assert_int_equal(plans.n, 1);
  return &plans.v[0].hist;
}

/* Exactly one need, of class cls with that bound and ids. */
static void expect_one(const char *sql, sql_hist_class cls, int64_t bound, size_t nids,
                       const int64_t *ids) {
  const sql_hist_needs *n = needs(sql);
  if (n->n != 1)
    fail_msg("%s: %zu needs, expected 1", sql, n->n);
  if (n->v[0].cls != cls || n->v[0].bound != bound || n->v[0].nids != nids)
    fail_msg("%s: got class %s bound %lld ids %zu", sql, sql_hist_class_name(n->v[0].cls),
             (long long)n->v[0].bound, n->v[0].nids);
  for (size_t i = 0; i < nids; i++)
    assert_int_equal(n->v[0].ids[i], ids[i]);
}

static void expect_none(const char *sql) {
  const sql_hist_needs *n = needs(sql);
  if (n->n != 0)
    fail_msg("%s: %zu needs (class %s bound %lld), expected none", sql, n->n,
             sql_hist_class_name(n->v[0].cls), (long long)n->v[0].bound);
}


#define U SQL_HIST_UNBOUNDED

static void ducklake_current_reads(void **state) {
  (void)state;
  static const int64_t t7[] = {7};
  /* the file list of a table at snapshot 40: both tables, bounded, one table id */
  const sql_hist_needs *n = needs(
      "SELECT data_file_id FROM public.ducklake_data_file data LEFT JOIN (SELECT * FROM "
      "public.ducklake_delete_file WHERE table_id=7 AND 40 >= begin_snapshot AND (40 < "
      "end_snapshot OR end_snapshot IS NULL)) del ON del.data_file_id = data.data_file_id "
      "WHERE data.table_id=7 AND 40 >= data.begin_snapshot AND (40 < data.end_snapshot OR "
      "data.end_snapshot IS NULL)");
  assert_int_equal(n->n, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(n->v[i].bound, 41);
    assert_int_equal(n->v[i].nids, 1);
    assert_int_equal(n->v[i].ids[0], t7[0]);
  }
  assert_int_equal(n->v[0].cls, SQL_HIST_DATA_FILE);
  assert_int_equal(n->v[1].cls, SQL_HIST_DELETE_FILE);
  /* a WHERE on the NULL-supplying side does not bound it; its ON does */
  expect_none("SELECT d.path FROM ducklake_table t LEFT JOIN ducklake_data_file d ON d.table_id = "
              "t.table_id AND d.end_snapshot IS NULL WHERE t.end_snapshot IS NULL");
  /* ending files: never history */
  expect_none("UPDATE ducklake_data_file SET end_snapshot = 9 WHERE end_snapshot IS NULL AND "
              "data_file_id IN (1, 2)");
  expect_none("INSERT INTO ducklake_data_file (data_file_id, table_id) VALUES (1, 2)");
  expect_none("COPY ducklake_data_file FROM STDIN (FORMAT binary)");
  /* the snapshot query of every transaction */
  expect_none("SELECT snapshot_id, schema_version FROM ducklake_snapshot WHERE snapshot_id = "
              "(SELECT MAX(snapshot_id) FROM ducklake_snapshot)");
  expect_one("SELECT COALESCE((SELECT STRING_AGG(changes_made, ',') FROM "
             "ducklake_snapshot_changes c WHERE c.snapshot_id > 40), '')",
             SQL_HIST_SNAPSHOT, 41, 0, NULL);
  /* the postgres extension's pushed-down scan: quoted numbers, no end bound */
  expect_one("COPY (SELECT \"data_file_id\" FROM \"public\".\"ducklake_data_file\" WHERE "
             "\"table_id\" = '1' AND \"begin_snapshot\" <= '5') TO STDOUT (FORMAT \"binary\")",
             SQL_HIST_DATA_FILE, U, 1, (const int64_t[]){1});
  /* snapshot ids past int32 arrive as float constants */
  expect_one("SELECT * FROM ducklake_snapshot WHERE snapshot_id >= 5000000000",
             SQL_HIST_SNAPSHOT, 5000000000LL, 0, NULL);
}

static void file_stats_follow_their_file(void **state) {
  (void)state;
  static const int64_t t7[] = {7};
  /* DuckLake's stats read: the stats are joined to a bounded file */
  const sql_hist_needs *n = needs(
      "SELECT data.data_file_id, stats.min_value FROM ducklake_data_file data LEFT JOIN "
      "ducklake_file_column_stats stats ON stats.data_file_id = data.data_file_id WHERE "
      "data.table_id = 7 AND 40 >= data.begin_snapshot AND (40 < data.end_snapshot OR "
      "data.end_snapshot IS NULL)");
  assert_int_equal(n->n, 2);
  assert_int_equal(n->v[1].cls, SQL_HIST_FILE_STATS);
  assert_int_equal(n->v[1].bound, 41);
  assert_int_equal(n->v[1].nids, 1);
  assert_int_equal(n->v[1].ids[0], t7[0]);
  expect_none("SELECT s.min_value FROM ducklake_data_file d JOIN ducklake_file_column_stats s ON "
              "s.data_file_id = d.data_file_id WHERE d.end_snapshot IS NULL");
  /* alone, or joined to something that is not a bounded file: unbounded */
  expect_one("SELECT data_file_id, min_value FROM ducklake_file_column_stats WHERE column_id = 1 "
             "AND table_id = 7",
             SQL_HIST_FILE_STATS, U, 1, t7);
  expect_one("SELECT * FROM ducklake_file_column_stats s LEFT JOIN ducklake_data_file d ON "
             "s.data_file_id = d.data_file_id AND d.end_snapshot IS NULL",
             SQL_HIST_FILE_STATS, U, 0, NULL);
  expect_one("DELETE FROM ducklake_file_column_stats WHERE data_file_id IN (1, 2)",
             SQL_HIST_FILE_STATS, U, 0, NULL);
}

static void time_travel_names_what_it_reads(void **state) {
  (void)state;
  static const int64_t s3[] = {3}, t5[] = {5}, t56[] = {5, 6};
  expect_one("SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id = 3", SQL_HIST_SNAPSHOT,
             3, 1, s3);
  expect_one("SELECT * FROM ducklake_data_file WHERE table_id = 5 AND end_snapshot >= 2 AND "
             "end_snapshot <= 9",
             SQL_HIST_DATA_FILE, 2, 1, t5);
  expect_one("SELECT * FROM ducklake_data_file WHERE table_id IN (5, 6) AND (end_snapshot > 3 "
             "OR end_snapshot IS NULL)",
             SQL_HIST_DATA_FILE, 4, 2, t56);
  expect_one("SELECT * FROM ducklake_data_file WHERE 5 = table_id AND 3 < end_snapshot",
             SQL_HIST_DATA_FILE, 4, 1, t5);
  expect_one("SELECT * FROM ducklake_data_file WHERE table_id = 5 AND end_snapshot BETWEEN 3 "
             "AND 8",
             SQL_HIST_DATA_FILE, 3, 1, t5);
}

static void unknown_shapes_are_unbounded(void **state) {
  (void)state;
  /* outer join, preserved side filtered by WHERE on the other side */
  expect_one("SELECT * FROM ducklake_table t LEFT JOIN ducklake_data_file d USING (table_id) "
             "WHERE d.end_snapshot IS NULL",
             SQL_HIST_DATA_FILE, U, 0, NULL);
  expect_one("SELECT * FROM ducklake_data_file WHERE end_snapshot IS NOT NULL", SQL_HIST_DATA_FILE,
             U, 0, NULL);
  expect_one("SELECT * FROM ducklake_data_file WHERE NOT (end_snapshot IS NULL)",
             SQL_HIST_DATA_FILE, U, 0, NULL);
  expect_one("SELECT * FROM ducklake_data_file WHERE end_snapshot > $1", SQL_HIST_DATA_FILE, U, 0,
             NULL);
  expect_one("SELECT * FROM ducklake_data_file WHERE end_snapshot NOT IN (1, 2)",
             SQL_HIST_DATA_FILE, U, 0, NULL);
  expect_one("SELECT * FROM ducklake_data_file WHERE end_snapshot IS NULL OR table_id = 1",
             SQL_HIST_DATA_FILE, U, 0, NULL);
  expect_one("COPY (SELECT * FROM ducklake_snapshot) TO STDOUT", SQL_HIST_SNAPSHOT, U, 0, NULL);
  expect_one("DELETE FROM ducklake_data_file WHERE end_snapshot < 5", SQL_HIST_DATA_FILE, U, 0,
             NULL);
  /* unqualified column, two candidates: unresolved */
  expect_one("SELECT * FROM ducklake_data_file a, ducklake_delete_file b WHERE end_snapshot IS "
             "NULL AND b.end_snapshot IS NULL",
             SQL_HIST_DATA_FILE, U, 0, NULL);
  /* max() with a WHERE is not the newest snapshot */
  expect_one("SELECT max(snapshot_id) FROM ducklake_snapshot WHERE snapshot_time < now()",
             SQL_HIST_SNAPSHOT, U, 0, NULL);
  /* DuckLake's list of snapshots */
  const sql_hist_needs *n = needs("SELECT * FROM ducklake_snapshot LEFT JOIN "
                                  "ducklake_snapshot_changes USING (snapshot_id)");
  assert_int_equal(n->n, 2);
  assert_int_equal(n->v[0].bound, U);
  assert_int_equal(n->v[1].bound, U);
}

/* Inlined data tables: the table id is in the name, never in a column
 * (the other columns are the user's and may be called table_id). */
static void inlined_rows_name_their_table(void **state) {
  (void)state;
  static const int64_t t12[] = {12};
  /* no history seen, still a need: a writer may hold the current rows out */
  expect_one("SELECT * FROM ducklake_inlined_data_12_3 WHERE end_snapshot IS NULL",
             SQL_HIST_INLINE_ROW, SQL_HIST_NONE_SEEN, 1, t12);
  expect_one("COPY (SELECT \"row_id\", \"x\" FROM \"public\".\"ducklake_inlined_data_12_3\" "
             "WHERE \"begin_snapshot\" <= '9') TO STDOUT (FORMAT \"binary\")",
             SQL_HIST_INLINE_ROW, U, 1, t12);
  expect_one("SELECT * FROM ducklake_inlined_data_12_3 WHERE table_id = 7 AND (end_snapshot > 4 "
             "OR end_snapshot IS NULL)",
             SQL_HIST_INLINE_ROW, 5, 1, t12);
  expect_one("DELETE FROM ducklake_inlined_data_12_3 WHERE end_snapshot < 5", SQL_HIST_INLINE_ROW,
             U, 1, t12);
  expect_one("UPDATE ducklake_inlined_data_12_3 SET end_snapshot = 8 WHERE row_id = 1 AND "
             "end_snapshot IS NULL",
             SQL_HIST_INLINE_ROW, SQL_HIST_NONE_SEEN, 1, t12);
  /* a write reads nothing, but lands next to the current rows */
  expect_one("INSERT INTO ducklake_inlined_data_12_3 VALUES (1, 9, NULL, 4)", SQL_HIST_INLINE_ROW,
             SQL_HIST_NONE_SEEN, 1, t12);
  expect_one("COPY ducklake_inlined_data_12_3 FROM STDIN", SQL_HIST_INLINE_ROW,
             SQL_HIST_NONE_SEEN, 1, t12);
  expect_none("INSERT INTO ducklake_data_file VALUES (1)");
  /* not an inlined data table's name */
  expect_none("SELECT * FROM ducklake_inlined_data_12");
  expect_none("SELECT * FROM ducklake_inlined_data_x_3");
  expect_none("SELECT * FROM ducklake_inlined_delete_12");
  expect_none("SELECT * FROM ducklake_inlined_data_tables");
}

static void other_tables_need_nothing(void **state) {
  (void)state;
  expect_none("SELECT * FROM ducklake_table WHERE end_snapshot IS NOT NULL");
  expect_none("SELECT 1");
  expect_none("SELECT * FROM pg_catalog.pg_class");
}

static int teardown(void **state) {
  (void)state;
  sql_plans_free(&plans);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ducklake_current_reads),
      cmocka_unit_test(time_travel_names_what_it_reads),
      cmocka_unit_test(file_stats_follow_their_file),
      cmocka_unit_test(unknown_shapes_are_unbounded),
      cmocka_unit_test(inlined_rows_name_their_table),
      cmocka_unit_test(other_tables_need_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, teardown);
}
