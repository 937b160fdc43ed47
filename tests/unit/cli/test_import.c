/*
 * test_import.c — `moraine import`'s pure parts: SOURCE strings (kinds,
 * refusals, the origin recorded with its password stripped), the commit a
 * snapshot id or a versioned row goes to (expired snapshots in between
 * included), and the type DuckLake on PostgreSQL inlines each DuckLake type
 * as (what a native store records).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "cli/import_plan.h"
#include "cli/import_source.h"
#include "cli/lake_types.h"

static void sources(void **state) {
  import_spec s;
  mr_error err;
  assert_int_equal(import_spec_parse("ducklake:/d/cat.ducklake", &s, &err), MR_OK);
  assert_int_equal(s.kind, IMPORT_DUCKDB);
  assert_string_equal(s.target, "/d/cat.ducklake");
  assert_string_equal(s.origin, "ducklake:/d/cat.ducklake");
  assert_int_equal(import_spec_parse("cat.ducklake", &s, &err), MR_OK); /* a plain path */
  assert_int_equal(s.kind, IMPORT_DUCKDB);
  assert_string_equal(s.origin, "ducklake:cat.ducklake");
  assert_int_equal(import_spec_parse("ducklake:duckdb:x.db", &s, &err), MR_OK);
  assert_int_equal(s.kind, IMPORT_DUCKDB);
  assert_string_equal(s.target, "x.db");
  assert_int_equal(import_spec_parse("ducklake:sqlite:/m.sqlite", &s, &err), MR_OK);
  assert_int_equal(s.kind, IMPORT_SQLITE);
  assert_string_equal(s.target, "/m.sqlite");
  assert_string_equal(s.origin, "ducklake:sqlite:/m.sqlite");
  assert_int_equal(
      import_spec_parse("ducklake:postgres:host=h password=s3cret dbname=lake", &s, &err), MR_OK);
  assert_int_equal(s.kind, IMPORT_POSTGRES);
  assert_string_equal(s.target, "host=h password=s3cret dbname=lake");
  assert_string_equal(s.origin, "ducklake:postgres:host=h dbname=lake");
  assert_null(strstr(s.origin, "s3cret"));
  /* refused: another catalog kind, nothing named */
  assert_int_equal(import_spec_parse("ducklake:mysql:db=x", &s, &err), MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "mysql"));
  assert_int_equal(import_spec_parse("ducklake:", &s, &err), MR_ERR_INVALID);
  assert_int_equal(import_spec_parse("ducklake:sqlite:", &s, &err), MR_ERR_INVALID);
}

static void passwords(void **state) {
  char out[256];
  import_strip_password("host=h password='a b\\' c' user=u", out, sizeof out);
  assert_string_equal(out, "host=h user=u");
  import_strip_password("password = x dbname=d", out, sizeof out);
  assert_string_equal(out, "dbname=d");
  import_strip_password("PASSWORD=x", out, sizeof out);
  assert_string_equal(out, "");
  import_strip_password("postgresql://u:secret@h:5432/db", out, sizeof out);
  assert_string_equal(out, "postgresql://u@h:5432/db");
  import_strip_password("postgresql://h/db?user=u&password=p&sslmode=off", out, sizeof out);
  assert_string_equal(out, "postgresql://h/db?user=u&sslmode=off");
  import_strip_password("postgresql://h/db?password=p", out, sizeof out);
  assert_string_equal(out, "postgresql://h/db");
  import_strip_password("host=h dbname=d", out, sizeof out); /* nothing to strip */
  assert_string_equal(out, "host=h dbname=d");
}

static void groups(void **state) {
  /* retained snapshots 0, 1, 5, 9: 2..4 and 6..8 were expired */
  const int64_t ids[] = {0, 1, 5, 9};
  assert_int_equal(import_group_of(ids, 4, 0), 0);
  assert_int_equal(import_group_of(ids, 4, 1), 1);
  assert_int_equal(import_group_of(ids, 4, 3), 2); /* expired: the next retained one */
  assert_int_equal(import_group_of(ids, 4, 5), 2);
  assert_int_equal(import_group_of(ids, 4, 9), 3);
  assert_int_equal(import_group_of(ids, 4, 10), IMPORT_NO_GROUP);
  size_t ins, del;
  bool bad;
  assert_true(import_row_groups(ids, 4, 1, false, 0, &ins, &del, &bad));
  assert_int_equal(ins, 1);
  assert_int_equal(del, IMPORT_NO_GROUP);
  assert_false(bad);
  assert_true(import_row_groups(ids, 4, 1, true, 7, &ins, &del, &bad));
  assert_int_equal(ins, 1);
  assert_int_equal(del, 3); /* visible at 1 and 5, gone at 9 */
  /* begun and ended between two retained snapshots: at none of them, kept
   * in its ended form by the commit of snapshot 5 */
  assert_true(import_row_groups(ids, 4, 2, true, 4, &ins, &del, &bad));
  assert_false(bad);
  assert_int_equal(ins, IMPORT_NO_GROUP);
  assert_int_equal(del, 2);
  /* after the newest snapshot, or ending before it begins: the source is damaged */
  assert_false(import_row_groups(ids, 4, 10, false, 0, &ins, &del, &bad));
  assert_true(bad);
  assert_false(import_row_groups(ids, 4, 1, true, 12, &ins, &del, &bad));
  assert_true(bad);
  assert_false(import_row_groups(ids, 4, 5, true, 1, &ins, &del, &bad));
  assert_true(bad);
}

static void inline_types(void **state) {
  char buf[64];
  /* as DuckLake 1.5.5 on PostgreSQL creates them through moraine */
  assert_string_equal(lake_type_inline_pg("int32", buf, sizeof buf), "INTEGER");
  assert_string_equal(lake_type_inline_pg("int8", buf, sizeof buf), "SMALLINT");
  assert_string_equal(lake_type_inline_pg("uint32", buf, sizeof buf), "BIGINT");
  assert_string_equal(lake_type_inline_pg("uint64", buf, sizeof buf), "VARCHAR");
  assert_string_equal(lake_type_inline_pg("varchar", buf, sizeof buf), "pg_bytea");
  assert_string_equal(lake_type_inline_pg("blob", buf, sizeof buf), "pg_bytea");
  assert_string_equal(lake_type_inline_pg("json", buf, sizeof buf), "pg_bytea");
  assert_string_equal(lake_type_inline_pg("float64", buf, sizeof buf), "DOUBLE PRECISION");
  assert_string_equal(lake_type_inline_pg("timestamptz", buf, sizeof buf), "VARCHAR");
  assert_string_equal(lake_type_inline_pg("timetz", buf, sizeof buf), "TIME WITH TIME ZONE");
  assert_string_equal(lake_type_inline_pg("decimal(10,2)", buf, sizeof buf), "DECIMAL(10,2)");
  assert_string_equal(lake_type_inline_pg("struct", buf, sizeof buf), "VARCHAR");
  assert_string_equal(lake_type_inline_pg("list", buf, sizeof buf), "VARCHAR");
  assert_null(lake_type_inline_pg("geometry", buf, sizeof buf));
  /* and export's direction, from the same table */
  assert_string_equal(lake_type_duckdb("float32"), "REAL");
  assert_string_equal(lake_type_duckdb("uint128"), "UHUGEINT");
  assert_null(lake_type_duckdb("struct"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sources),
      cmocka_unit_test(passwords),
      cmocka_unit_test(groups),
      cmocka_unit_test(inline_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
