/*
 * test_catalog_check.c — what the commit path refuses before the store is
 * written.
 * - The load-back guarantee (catalog_check.c): captured inlined values of
 *   types that are not text-safe are cast as the load casts them; one that
 *   does not cast refuses the whole commit with 22P02 naming table, column
 *   and type. Commits touching only text-safe columns never reach the
 *   engine (checked with a catalog that has none).
 * - One row per stored key (catalog_commit.c): an INSERT of a key the
 *   store holds, or that the commit inserted already, refuses the commit
 *   with 23505, unless the commit removes the stored row first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "catalog/catalog.h"
#include "catalog/catalog_internal.h"

typedef struct fixture {
  store *st;
  sql_engine *e;
  catalog *c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  mr_error err;
  sql_error serr;
  sql_engine_options o = {.server_version = "15.0 (moraine test)"};
  if (f == NULL || store_open("memory://", NULL, &f->st, &err) != MR_OK ||
      sql_engine_open(&o, &f->e, &serr) != MR_OK || catalog_open(f->st, f->e, &f->c, &err) != MR_OK)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mr_error err;
  catalog_free(f->c);
  sql_engine_close(f->e);
  if (store_close(f->st, &err) != MR_OK)
    return -1;
  free(f);
  return 0;
}

static const char *const NAMES[] = {"row_id", "begin_snapshot", "end_snapshot", "v"};

/* A batch of ducklake_inlined_data_1_1 rows (row_id, begin, end, v) with v
 * of type vtype; vals: one v per row (NULL: SQL NULL). */
typedef struct batch {
  const char *types[4];
  sql_value cells[4 * 8];
  sql_change_batch b;
} batch;

static void make(batch *bt, sql_change_op op, const char *vtype, size_t n,
                 const char *const *vals) {
  memset(bt, 0, sizeof *bt);
  bt->types[0] = bt->types[1] = bt->types[2] = "BIGINT";
  bt->types[3] = vtype;
  assert_true(n <= 8);
  for (size_t r = 0; r < n; r++) {
    sql_value *row = &bt->cells[4 * r];
    row[0] = SQL_VALUE_TEXT("0", 1);
    row[1] = SQL_VALUE_TEXT("1", 1);
    row[2] = SQL_VALUE_NULL;
    row[3] = vals[r] ? SQL_VALUE_TEXT(vals[r], strlen(vals[r])) : SQL_VALUE_NULL;
  }
  bt->b = (sql_change_batch){op,        NULL, "public", "ducklake_inlined_data_1_1", 4, NAMES,
                             bt->types, n,    bt->cells};
}

static mr_status check(catalog *c, const sql_change_batch *b, sql_error *err) {
  sql_changes ch = {.nbatches = 1, .batches = b};
  memset(err, 0, sizeof *err);
  return cat_check_loadable(c, &ch, err);
}

static void test_values_that_load_pass(void **state) {
  fixture *f = *state;
  sql_error err;
  batch bt;
  const char *iv[] = {"1 month 2 days 00:00:03", NULL, "-1 year 03:00:00.000001"};
  make(&bt, SQL_CHANGE_INSERT, "INTERVAL", 3, iv);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
  const char *fl[] = {"nan", "-inf", "3.4028235e+38", "1e-45"};
  make(&bt, SQL_CHANGE_INSERT, "FLOAT", 4, fl);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
  const char *dec[] = {"-999.9", "0.0"};
  make(&bt, SQL_CHANGE_UPDATE, "DECIMAL(4,1)", 2, dec);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
  const char *lst[] = {"['it\\'s', x, NULL]", "[]"};
  make(&bt, SQL_CHANGE_INSERT, "VARCHAR[]", 2, lst);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
  const char *tz[] = {"24:00:00-15:59", "10:11:12.5+05:30"};
  make(&bt, SQL_CHANGE_INSERT, "TIME WITH TIME ZONE", 2, tz);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
  const char *nul[] = {NULL, NULL};
  make(&bt, SQL_CHANGE_INSERT, "INTERVAL", 2, nul);
  assert_int_equal(check(f->c, &bt.b, &err), MR_OK);
}

static void test_a_value_that_would_not_load_refuses_the_commit(void **state) {
  fixture *f = *state;
  sql_error err;
  batch bt;
  const char *iv[] = {"1 day", "not an interval"};
  make(&bt, SQL_CHANGE_INSERT, "INTERVAL", 2, iv);
  store_head before = store_get_head(f->st);
  sql_changes ch = {.nbatches = 1, .batches = &bt.b};
  memset(&err, 0, sizeof err);
  assert_int_not_equal(catalog_prepare(f->c, &ch, &err), MR_OK);
  assert_string_equal(err.sqlstate, "22P02");
  assert_non_null(strstr(err.base.msg, "ducklake_inlined_data_1_1.v (INTERVAL)"));
  assert_non_null(strstr(err.base.msg, "not an interval"));
  store_head after = store_get_head(f->st);
  assert_memory_equal(&before, &after, sizeof before);
  /* the column is named even when another column in the commit is fine */
  batch ok;
  const char *dec[] = {"1.5"};
  make(&ok, SQL_CHANGE_INSERT, "DECIMAL(4,1)", 1, dec);
  sql_change_batch two[] = {ok.b, bt.b};
  sql_changes ch2 = {.nbatches = 2, .batches = two};
  memset(&err, 0, sizeof err);
  assert_int_not_equal(cat_check_loadable(f->c, &ch2, &err), MR_OK);
  assert_string_equal(err.sqlstate, "22P02");
  assert_non_null(strstr(err.base.msg, ".v (INTERVAL)"));
  const char *big[] = {"12345.6"};
  make(&bt, SQL_CHANGE_INSERT, "DECIMAL(4,1)", 1, big);
  assert_int_not_equal(check(f->c, &bt.b, &err), MR_OK);
  assert_string_equal(err.sqlstate, "22P02");
  assert_non_null(strstr(err.base.msg, "DECIMAL(4,1)"));
}

static void test_deletes_and_text_safe_columns_never_reach_the_engine(void **state) {
  (void)state;
  catalog *none; /* no store, no engine: any engine call would crash */
  mr_error e;
  assert_int_equal(catalog_open(NULL, NULL, &none, &e), MR_OK);
  sql_error err;
  batch bt;
  const char *bad[] = {"not an interval"};
  make(&bt, SQL_CHANGE_DELETE, "INTERVAL", 1, bad); /* removed rows are never loaded */
  assert_int_equal(check(none, &bt.b, &err), MR_OK);
  const char *txt[] = {"x", NULL};
  static const char *const safe[] = {"VARCHAR",  "BIGINT", "INTEGER", "SMALLINT", "BOOLEAN", "UUID",
                                     "pg_bytea", "BLOB",   "HUGEINT", "UBIGINT",  "TINYINT"};
  for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++) {
    make(&bt, SQL_CHANGE_INSERT, safe[i], 2, txt);
    assert_int_equal(check(none, &bt.b, &err), MR_OK);
  }
  /* catalog tables: cells are parsed into typed fields, not re-cast */
  make(&bt, SQL_CHANGE_INSERT, "INTERVAL", 1, bad);
  bt.b.table = "ducklake_table";
  assert_int_equal(check(none, &bt.b, &err), MR_OK);
  catalog_free(none);
}

static const char *const STATS_COLS[] = {"table_id", "record_count", "next_row_id",
                                         "file_size_bytes"};
static const char *const STATS_TYPES[] = {"BIGINT", "BIGINT", "BIGINT", "BIGINT"};

/* A ducklake_table_stats batch of one row (id, n, n, n). */
static sql_change_batch stats_row(sql_change_op op, sql_value *cells, const char *id,
                                  const char *n) {
  cells[0] = SQL_VALUE_TEXT(id, strlen(id));
  for (int i = 1; i < 4; i++)
    cells[i] = SQL_VALUE_TEXT(n, strlen(n));
  return (sql_change_batch){op, NULL, "public", "ducklake_table_stats", 4, STATS_COLS, STATS_TYPES,
                            1, cells};
}

static mr_status commit(catalog *c, size_t n, const sql_change_batch *b, sql_error *err) {
  sql_changes ch = {.nbatches = n, .batches = b};
  memset(err, 0, sizeof *err);
  return catalog_prepare(c, &ch, err);
}

static void test_a_stored_key_takes_one_row(void **state) {
  fixture *f = *state;
  sql_error err;
  sql_value a[4], b[4];
  sql_change_batch first = stats_row(SQL_CHANGE_INSERT, a, "7", "1");
  assert_int_equal(commit(f->c, 1, &first, &err), MR_OK);
  /* the same key again: the engine would hold two rows, the store one */
  store_head before = store_get_head(f->st);
  sql_change_batch again = stats_row(SQL_CHANGE_INSERT, b, "7", "2");
  assert_int_not_equal(commit(f->c, 1, &again, &err), MR_OK);
  assert_string_equal(err.sqlstate, "23505");
  assert_non_null(strstr(err.base.msg, "ducklake_table_stats"));
  assert_non_null(strstr(err.base.msg, "table_id 7"));
  store_head after = store_get_head(f->st);
  assert_memory_equal(&before, &after, sizeof before);
  /* twice in one commit, for a new key */
  sql_value c1[4], c2[4];
  sql_change_batch twice[] = {stats_row(SQL_CHANGE_INSERT, c1, "8", "1"),
                              stats_row(SQL_CHANGE_INSERT, c2, "8", "2")};
  assert_int_not_equal(commit(f->c, 2, twice, &err), MR_OK);
  assert_string_equal(err.sqlstate, "23505");
  /* removed and inserted again in one commit: one row still */
  sql_value d1[4], d2[4];
  sql_change_batch replace[] = {stats_row(SQL_CHANGE_DELETE, d1, "7", "1"),
                                stats_row(SQL_CHANGE_INSERT, d2, "7", "3")};
  assert_int_equal(commit(f->c, 2, replace, &err), MR_OK);
  /* an UPDATE of the stored row is no INSERT; an INSERT after it is */
  sql_change_batch upd = stats_row(SQL_CHANGE_UPDATE, a, "7", "4");
  assert_int_equal(commit(f->c, 1, &upd, &err), MR_OK);
  sql_change_batch upd_ins[] = {stats_row(SQL_CHANGE_UPDATE, c1, "7", "5"),
                                stats_row(SQL_CHANGE_INSERT, c2, "7", "6")};
  assert_int_not_equal(commit(f->c, 2, upd_ins, &err), MR_OK);
  assert_string_equal(err.sqlstate, "23505");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_that_load_pass),
      cmocka_unit_test(test_a_value_that_would_not_load_refuses_the_commit),
      cmocka_unit_test(test_deletes_and_text_safe_columns_never_reach_the_engine),
      cmocka_unit_test(test_a_stored_key_takes_one_row),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
