/*
 * test_catalog_order.c — the commit path applies the rows of one commit in
 * dependency order, whatever order the client sent them in: a child row
 * (here a column tag) sent before its parent column lands in that column; a
 * child whose parent exists nowhere refuses the whole commit with 23503,
 * naming both tables and the ids, and the store is not written; a child
 * changed with a parent that the same commit ends does not bring the parent
 * back. Real store (memory://), rows built as the capture layer hands them.
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
  catalog *c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  mr_error err;
  /* no engine: commits of catalog tables only never reach it */
  if (f == NULL || store_open("memory://", NULL, &f->st, &err) != MR_OK ||
      catalog_open(f->st, NULL, &f->c, &err) != MR_OK)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mr_error err;
  catalog_free(f->c);
  if (store_close(f->st, &err) != MR_OK)
    return -1;
  free(f);
  return 0;
}

/* One captured batch of a catalog table: one row, cells in table order. */
typedef struct rows {
  const char *names[CATALOG_MAX_COLS];
  const char *types[CATALOG_MAX_COLS];
  sql_value cells[CATALOG_MAX_COLS];
  sql_change_batch b;
} rows;

static void row_of(rows *r, sql_change_op op, const char *table, const char *const *vals) {
  const catalog_table *t = catalog_table_find(table);
  assert_non_null(t);
  memset(r, 0, sizeof *r);
  for (size_t i = 0; i < t->ncols; i++) {
    r->names[i] = t->cols[i].name;
    r->types[i] = t->cols[i].type;
    r->cells[i] = vals[i] ? SQL_VALUE_TEXT(vals[i], strlen(vals[i])) : SQL_VALUE_NULL;
  }
  r->b = (sql_change_batch){op, NULL, "public", table, t->ncols, r->names, r->types, 1, r->cells};
}

static void snapshot(rows *r, const char *id) {
  const char *v[] = {id, "2026-01-01 00:00:00+00", "1", "10", "0"};
  row_of(r, SQL_CHANGE_INSERT, "ducklake_snapshot", v);
}

/* ducklake_column (column_id, begin, end, table_id 1, order, name, INTEGER) */
static void column(rows *r, sql_change_op op, const char *id, const char *begin, const char *end) {
  const char *v[] = {id,   begin,  end,  "1",  id,  "c" /* name */, "int32", NULL,
                     NULL, "true", NULL, NULL, NULL};
  row_of(r, op, "ducklake_column", v);
}

/* ducklake_column_tag (table_id 1, column_id, begin, end, 'comment', value) */
static void tag(rows *r, sql_change_op op, const char *col, const char *begin, const char *end) {
  const char *v[] = {"1", col, begin, end, "comment", "a comment"};
  row_of(r, op, "ducklake_column_tag", v);
}

static mr_status commit(fixture *f, sql_error *err, size_t n, const rows *const *rs) {
  sql_change_batch b[8];
  assert_true(n <= 8);
  for (size_t i = 0; i < n; i++)
    b[i] = rs[i]->b;
  sql_changes ch = {.nbatches = n, .batches = b};
  memset(err, 0, sizeof *err);
  return catalog_prepare(f->c, &ch, err);
}

/* The current record of column (1, id); NULL when there is none. */
static ProtobufCMessage *stored_column(fixture *f, uint64_t id) {
  mr_key k = {.kind = MR_KK_COLUMN, .c = {1, id}};
  ProtobufCMessage *m = NULL;
  mr_error err;
  mr_status rc = store_get(f->st, &k, &m, &err);
  if (rc == MR_ERR_NOT_FOUND)
    return NULL;
  assert_int_equal(rc, MR_OK);
  return m;
}

static size_t tags_of(ProtobufCMessage *m) {
  ProtobufCMessage **arr;
  return cat_msg_nrep(m, "column_tag", &arr);
}

static void test_child_before_its_parent_lands_in_it(void **state) {
  fixture *f = *state;
  rows s, t, c;
  snapshot(&s, "1");
  tag(&t, SQL_CHANGE_INSERT, "2", "1", NULL);
  column(&c, SQL_CHANGE_INSERT, "2", "1", NULL);
  sql_error err;
  const rows *const order[] = {&s, &t, &c}; /* as DuckLake sends ADD COLUMN + COMMENT */
  assert_int_equal(commit(f, &err, 3, order), MR_OK);
  ProtobufCMessage *m = stored_column(f, 2);
  assert_non_null(m);
  assert_int_equal(tags_of(m), 1);
  mr_value_free(m);
}

static void test_child_without_parent_refuses_the_commit(void **state) {
  fixture *f = *state;
  rows s, t;
  snapshot(&s, "1");
  tag(&t, SQL_CHANGE_INSERT, "7", "1", NULL);
  store_head before = store_get_head(f->st);
  sql_error err;
  const rows *const order[] = {&s, &t};
  assert_int_not_equal(commit(f, &err, 2, order), MR_OK);
  assert_string_equal(err.sqlstate, "23503");
  assert_non_null(strstr(err.base.msg, "ducklake_column_tag row refers to ducklake_column"));
  assert_non_null(strstr(err.base.msg, "table_id 1, column_id 7"));
  store_head after = store_get_head(f->st);
  assert_memory_equal(&before, &after, sizeof before);
  assert_null(stored_column(f, 7));
}

/* Ending a column and its tag in one commit, in either order, ends both:
 * the child must not resurrect the parent it was applied after. */
static void test_child_ended_with_its_parent_in_either_order(void **state) {
  fixture *f = *state;
  sql_error err;
  rows s, c2, t2, c3, t3;
  snapshot(&s, "1");
  column(&c2, SQL_CHANGE_INSERT, "2", "1", NULL);
  tag(&t2, SQL_CHANGE_INSERT, "2", "1", NULL);
  column(&c3, SQL_CHANGE_INSERT, "3", "1", NULL);
  tag(&t3, SQL_CHANGE_INSERT, "3", "1", NULL);
  const rows *const create[] = {&s, &c2, &t2, &c3, &t3};
  assert_int_equal(commit(f, &err, 5, create), MR_OK);

  snapshot(&s, "2");
  column(&c2, SQL_CHANGE_UPDATE, "2", "1", "2");
  tag(&t2, SQL_CHANGE_UPDATE, "2", "1", "2");
  column(&c3, SQL_CHANGE_UPDATE, "3", "1", "2");
  tag(&t3, SQL_CHANGE_UPDATE, "3", "1", "2");
  const rows *const drop[] = {&s, &c2, &t2, &t3, &c3};
  assert_int_equal(commit(f, &err, 5, drop), MR_OK);
  assert_null(stored_column(f, 2));
  assert_null(stored_column(f, 3));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_child_before_its_parent_lands_in_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_child_without_parent_refuses_the_commit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_child_ended_with_its_parent_in_either_order, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
