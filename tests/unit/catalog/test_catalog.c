/*
 * test_catalog.c — the catalog mapping table: every DuckLake v1.0 table has
 * a home, every column maps to a field of the right type (or is a parent key
 * column), and cell text <-> field conversion round-trips, NULL included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "catalog/catalog.h"
#include "catalog/catalog_internal.h"

static void test_every_table_has_a_home(void **state) {
  (void)state;
  assert_int_equal(catalog_table_count(), 28);
  for (size_t i = 0; i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    assert_non_null(t);
    assert_non_null(t->msg);
    assert_true(t->ncols > 0);
    assert_ptr_equal(catalog_table_find(t->name), t);
    assert_true(strncmp(t->name, "ducklake_", 9) == 0);
    if (t->role == CAT_CHILD || t->role == CAT_TAG || t->role == CAT_OPTION)
      assert_non_null(t->field);
  }
  assert_null(catalog_table_find("ducklake_nope"));
}

/* Is col a component of the parent kind's key (the child omits it)? */
static bool parent_key_col(const catalog_table *t, const char *col) {
  const mr_key_kind_info *ki = mr_key_kind_get(t->kind);
  for (unsigned i = 0; i < ki->ncomp; i++)
    if (strcmp(ki->comp[i], col) == 0)
      return true;
  if (t->role == CAT_OPTION)
    return strcmp(col, "scope") == 0 || strcmp(col, "scope_id") == 0;
  return false;
}

static void test_every_column_maps_to_a_typed_field(void **state) {
  (void)state;
  for (size_t i = 0; i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    for (size_t j = 0; j < t->ncols; j++) {
      const catalog_column *c = &t->cols[j];
      if (c->field == NULL) {
        if (!parent_key_col(t, c->name))
          fail_msg("%s.%s has no field in %s", t->name, c->name, t->msg->name);
        continue;
      }
      ProtobufCType ft = c->field->type;
      if (strcasecmp(c->type, "BIGINT") == 0 || strcasecmp(c->type, "TIMESTAMP WITH TIME ZONE") == 0)
        assert_true(ft == PROTOBUF_C_TYPE_INT64 || ft == PROTOBUF_C_TYPE_UINT64);
      else if (strcasecmp(c->type, "VARCHAR") == 0)
        assert_int_equal(ft, PROTOBUF_C_TYPE_STRING);
      else if (strcasecmp(c->type, "BOOLEAN") == 0)
        assert_int_equal(ft, PROTOBUF_C_TYPE_BOOL);
      else if (strcasecmp(c->type, "UUID") == 0)
        assert_int_equal(ft, PROTOBUF_C_TYPE_BYTES);
      else
        fail_msg("%s.%s: unexpected type %s", t->name, c->name, c->type);
      assert_int_not_equal(c->field->label, PROTOBUF_C_LABEL_REPEATED);
    }
  }
}

static const catalog_column *col_of(const catalog_table *t, const char *name) {
  for (size_t j = 0; j < t->ncols; j++)
    if (strcmp(t->cols[j].name, name) == 0)
      return &t->cols[j];
  return NULL;
}

static void roundtrip(const char *table, const char *col, const char *in, const char *want) {
  const catalog_table *t = catalog_table_find(table);
  const catalog_column *c = col_of(t, col);
  assert_non_null(c);
  ProtobufCMessage *m = cat_msg_new(t->msg);
  mr_error err;
  sql_value v = in ? SQL_VALUE_TEXT(in, strlen(in)) : SQL_VALUE_NULL;
  assert_int_equal(catalog_set_field(m, c->field, c->type, &v, &err), MR_OK);
  catalog_cell out;
  assert_int_equal(catalog_get_field(m, c->field, c->type, &out, &err), MR_OK);
  if (want == NULL) {
    assert_null(out.text);
    assert_false(out.has_int);
  } else {
    assert_non_null(out.text);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.text, want, out.len);
    /* an integer cell carries the value its text spells */
    if (out.has_int) {
      char spelled[24];
      snprintf(spelled, sizeof spelled, "%lld", (long long)out.int_value);
      assert_string_equal(spelled, want);
    }
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

static void test_text_conversion(void **state) {
  (void)state;
  roundtrip("ducklake_column", "column_order", "42", "42");
  roundtrip("ducklake_column", "column_order", "-7", "-7");
  roundtrip("ducklake_column", "column_order", NULL, NULL);
  roundtrip("ducklake_column", "column_name", "", "");
  roundtrip("ducklake_column", "column_name", NULL, NULL);
  roundtrip("ducklake_column", "column_name", "café", "café");
  roundtrip("ducklake_column", "nulls_allowed", "true", "true");
  roundtrip("ducklake_column", "nulls_allowed", "false", "false");
  roundtrip("ducklake_column", "nulls_allowed", NULL, NULL);
  roundtrip("ducklake_table", "table_uuid", "0190f0a2-1c2d-7e3f-8a9b-0c1d2e3f4a5b",
            "0190f0a2-1c2d-7e3f-8a9b-0c1d2e3f4a5b");
  roundtrip("ducklake_snapshot", "snapshot_time", "2026-07-08 10:11:12.123456+00",
            "2026-07-08 10:11:12.123456+00");
  roundtrip("ducklake_snapshot", "snapshot_time", "2026-07-08 12:11:12+02",
            "2026-07-08 10:11:12.000000+00");
  roundtrip("ducklake_snapshot", "snapshot_time", "1969-12-31 23:59:59.5+00",
            "1969-12-31 23:59:59.500000+00");
  roundtrip("ducklake_file_column_stats", "min_value", "009", "009");
}

static void test_bad_text_and_required_null(void **state) {
  (void)state;
  const catalog_table *t = catalog_table_find("ducklake_column");
  ProtobufCMessage *m = cat_msg_new(t->msg);
  mr_error err;
  sql_value bad = SQL_VALUE_TEXT("12x", 3), null = SQL_VALUE_NULL;
  assert_int_equal(catalog_set_field(m, col_of(t, "column_order")->field, "BIGINT", &bad, &err),
                   MR_ERR_INVALID);
  assert_int_equal(catalog_set_field(m, col_of(t, "begin_snapshot")->field, "BIGINT", &null, &err),
                   MR_ERR_INVALID);
  protobuf_c_message_free_unpacked(m, NULL);
}

static void test_ddl_parse_and_inline_names(void **state) {
  (void)state;
  char *name;
  cat_ddl_col *cols;
  size_t n;
  assert_true(cat_parse_create("CREATE TABLE IF NOT EXISTS \"public\".ducklake_inlined_data_1_2(row_id "
                               "BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, \"a,b\" "
                               "DECIMAL(18,3), s STRUCT(x INTEGER, y VARCHAR))",
                               &name, &cols, &n));
  assert_string_equal(name, "ducklake_inlined_data_1_2");
  assert_int_equal(n, 5);
  assert_string_equal(cols[3].name, "a,b");
  assert_string_equal(cols[3].type, "DECIMAL(18,3)");
  assert_string_equal(cols[4].type, "STRUCT(x INTEGER, y VARCHAR)");
  cat_ddl_cols_free(cols, n);
  int64_t tid, ver;
  assert_true(cat_inline_data_name(name, &tid, &ver));
  assert_int_equal(tid, 1);
  assert_int_equal(ver, 2);
  free(name);
  assert_true(cat_inline_delete_name("ducklake_inlined_delete_17", &tid));
  assert_int_equal(tid, 17);
  assert_false(cat_inline_data_name("ducklake_inlined_data_tables", &tid, &ver));
  assert_true(cat_parse_drop("DROP TABLE IF EXISTS public.ducklake_inlined_delete_3", &name));
  assert_string_equal(name, "ducklake_inlined_delete_3");
  free(name);
}

/*
 * An UPDATE of an inlined row keeps its row_id: the ended version and the
 * new one must get distinct inline/data_row keys (begin_snapshot is one of
 * its components), and ending a version keeps its key.
 */
static void test_inline_row_versions_have_distinct_keys(void **state) {
  (void)state;
  Moraine__V1__InlineDataRow *m =
      (Moraine__V1__InlineDataRow *)cat_msg_new(&moraine__v1__inline_data_row__descriptor);
  assert_non_null(m);
  m->table_id = 5;
  m->schema_version = 3;
  m->row_id = 0;
  m->begin_snapshot = 7;
  mr_key old_k, ended_k, new_k;
  assert_true(cat_key_from_msg(MR_KK_INLINE_ROW, &m->base, &old_k));
  m->has_end_snapshot = 1;
  m->end_snapshot = 9;
  assert_true(cat_key_from_msg(MR_KK_INLINE_ROW, &m->base, &ended_k));
  m->has_end_snapshot = 0;
  m->begin_snapshot = 9;
  assert_true(cat_key_from_msg(MR_KK_INLINE_ROW, &m->base, &new_k));
  assert_int_equal(mr_key_compare(&old_k, &ended_k), 0);
  assert_true(mr_key_compare(&old_k, &new_k) < 0);
  assert_int_equal(new_k.c[2], 0);
  assert_int_equal(new_k.c[3], 9);
  mr_value_free(&m->base);
}

/* sql_commit_hooks.may_update: an UPDATE may assign what DuckLake's own
 * UPDATEs assign, and never a column that identifies the stored row (the
 * capture brings only the new row, so the old one would stay). */
static void test_updates_never_assign_a_stored_key(void **state) {
  (void)state;
  catalog *c;
  mr_error e;
  assert_int_equal(catalog_open(NULL, NULL, &c, &e), MR_OK);
  sql_commit_hooks h;
  catalog_hooks(c, &h);
  assert_non_null(h.may_update);
  static const char *const ducklake_sets[][2] = {
      {"ducklake_table_stats", "record_count"},
      {"ducklake_table_stats", "file_size_bytes"},
      {"ducklake_table_stats", "next_row_id"},
      {"ducklake_table_column_stats", "min_value"},
      {"ducklake_table_column_stats", "contains_null"},
      {"ducklake_data_file", "end_snapshot"},
      {"ducklake_data_file", "begin_snapshot"},
      {"ducklake_data_file", "partial_max"},
      {"ducklake_delete_file", "end_snapshot"},
      {"ducklake_column", "end_snapshot"},
      {"ducklake_column", "default_value_type"},
      {"ducklake_column_tag", "end_snapshot"},
      {"ducklake_tag", "end_snapshot"},
      {"ducklake_partition_info", "end_snapshot"},
      {"ducklake_sort_info", "end_snapshot"},
      {"ducklake_table", "end_snapshot"},
      {"ducklake_schema", "end_snapshot"},
      {"ducklake_metadata", "value"},
      {"ducklake_inlined_data_3_1", "end_snapshot"},
      {"ducklake_inlined_data_3_1", "v"},
  };
  for (size_t i = 0; i < sizeof ducklake_sets / sizeof ducklake_sets[0]; i++)
    if (!h.may_update(h.ctx, ducklake_sets[i][0], ducklake_sets[i][1]))
      fail_msg("DuckLake's UPDATE of %s.%s refused", ducklake_sets[i][0], ducklake_sets[i][1]);
  static const char *const identities[][2] = {
      {"ducklake_tag", "key"},
      {"ducklake_tag", "value"},
      {"ducklake_metadata", "key"},
      {"ducklake_metadata", "scope"},
      {"ducklake_snapshot", "schema_version"},
      {"ducklake_snapshot_changes", "changes_made"},
      {"ducklake_inlined_data_3_1", "row_id"},
      {"ducklake_inlined_data_3_1", "begin_snapshot"},
      {"ducklake_inlined_delete_3", "row_id"},
      {"ducklake_column_tag", "value"},
      {"ducklake_inlined_data_tables", "table_name"},
  };
  for (size_t i = 0; i < sizeof identities / sizeof identities[0]; i++)
    if (h.may_update(h.ctx, identities[i][0], identities[i][1]))
      fail_msg("UPDATE of %s.%s admitted", identities[i][0], identities[i][1]);
  /* every key component of every record and entity table, from the key table */
  size_t keys = 0;
  for (size_t i = 0; i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    if (t->role != CAT_ENTITY && t->role != CAT_RECORD)
      continue;
    for (size_t j = 0; j < t->ncols; j++)
      if (parent_key_col(t, t->cols[j].name)) {
        keys++;
        if (h.may_update(h.ctx, t->name, t->cols[j].name))
          fail_msg("UPDATE of %s.%s, a key component, admitted", t->name, t->cols[j].name);
      }
  }
  assert_true(keys >= 20);
  catalog_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_table_has_a_home),
      cmocka_unit_test(test_every_column_maps_to_a_typed_field),
      cmocka_unit_test(test_text_conversion),
      cmocka_unit_test(test_bad_text_and_required_null),
      cmocka_unit_test(test_ddl_parse_and_inline_names),
      cmocka_unit_test(test_inline_row_versions_have_distinct_keys),
      cmocka_unit_test(test_updates_never_assign_a_stored_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
