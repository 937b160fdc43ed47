/*
 * test_sql_pginfo.c — the postgres extension's table lookup (sql_pginfo.h):
 * what the digest of a statement sees and ignores, the engine text of an
 * answer, and that the relation directory's answer (SQL_PG_TABLE_INFO_FN)
 * is, row for row and type for type, what the pg_catalog views give for
 * the same filters. That the installed extension's own lookups are
 * recognized is checked end to end (tests/e2e/test_pginfo.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql.h"
#include "sql/sql_internal.h" /* the engine's own connection and directory */
#include "sql/sql_pgcatalog.h"
#include "sql/sql_pginfo.h"
#include "sql/sql_relcache.h"
#include "sql/sql_util.h"

/* ---- digests ---- */

/* A statement of the lookup's form (written here, not the extension's):
 * FILTER appears in both arms. */
#define FORM(filter)                                                                               \
  "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace ON c.relnamespace = "             \
  "pg_namespace.oid JOIN pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 0 " filter          \
  " UNION ALL SELECT c.relname, NULL FROM pg_class c JOIN pg_namespace ON c.relnamespace = "      \
  "pg_namespace.oid JOIN pg_constraint k ON k.conrelid = c.oid WHERE true " filter " ORDER BY 1"

static void digest(const char *stmt, char hex[65]) {
  assert_true(sql_pginfo_digest(stmt, hex));
  assert_int_equal(strlen(hex), 64);
}

static void digests_ignore_filter_values_and_layout(void **state) {
  (void)state;
  char a[65], b[65], c[65];
  digest(FORM("AND pg_namespace.nspname IN ('public') AND relname='t'"), a);
  digest(FORM("and pg_namespace.NSPNAME in ('a',\n 'b''c')AND   relname = 'other'"), b);
  assert_string_equal(a, b);
  /* without the relname filter: another statement, another digest */
  digest(FORM("AND pg_namespace.nspname IN ('public')"), c);
  assert_string_not_equal(a, c);
}

static void digests_see_everything_else(void **state) {
  (void)state;
  char base[65], other[65];
  digest(FORM("AND pg_namespace.nspname IN ('public') AND relname='t'"), base);
  static const char *const changed[] = {
      /* another constant outside the filters */
      "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace ON c.relnamespace = "
      "pg_namespace.oid JOIN pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 1 AND "
      "pg_namespace.nspname IN ('public') AND relname='t' UNION ALL SELECT c.relname, NULL FROM "
      "pg_class c JOIN pg_namespace ON c.relnamespace = pg_namespace.oid JOIN pg_constraint k ON "
      "k.conrelid = c.oid WHERE true AND pg_namespace.nspname IN ('public') AND relname='t' "
      "ORDER BY 1",
      /* another alias */
      FORM("AND pg_namespace.nspname IN ('public') AND relname='t'") " , 2",
      /* a quoted identifier is not folded */
      FORM("AND pg_namespace.\"NSPNAME\" IN ('public') AND relname='t'"),
      /* an escape string is no plain constant */
      FORM("AND pg_namespace.nspname IN (E'public') AND relname='t'"),
      /* the two arms filter on different tables */
      "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace ON c.relnamespace = "
      "pg_namespace.oid JOIN pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 0 AND "
      "pg_namespace.nspname IN ('public') AND relname='t' UNION ALL SELECT c.relname, NULL FROM "
      "pg_class c JOIN pg_namespace ON c.relnamespace = pg_namespace.oid JOIN pg_constraint k ON "
      "k.conrelid = c.oid WHERE true AND pg_namespace.nspname IN ('public') AND relname='u' "
      "ORDER BY 1",
  };
  for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++) {
    digest(changed[i], other);
    assert_string_not_equal(base, other);
  }
}

static void a_statement_of_another_form_is_not_the_lookup(void **state) {
  (void)state;
  sql_known_query l;
  assert_false(sql_pginfo_match(FORM("AND pg_namespace.nspname IN ('public') AND relname='t'"),
                                &l));
  assert_int_equal(l.kind, SQL_KNOWN_NONE);
  assert_null(l.schemas);
  assert_false(sql_pginfo_match("SELECT 1", &l));
  assert_false(sql_pginfo_match("SELECT 'pg_constraint', 'pg_attribute' FROM", &l));
}

static void the_answer_quotes_its_values(void **state) {
  (void)state;
  char *schemas[] = {"pub'lic", "b"};
  sql_known_query one = {SQL_KNOWN_TABLE_LOOKUP, schemas, 2, "it's"};
  char *sql = sql_pginfo_call(&one, "unused");
  assert_string_equal(sql, "SELECT * FROM " SQL_PG_TABLE_INFO_FN
                           "(['pub''lic', 'b']::VARCHAR[], 'it''s')");
  free(sql);
  sql_known_query all = {SQL_KNOWN_TABLE_LOOKUP, NULL, 0, NULL};
  sql = sql_pginfo_call(&all, "unused");
  assert_string_equal(sql, "SELECT * FROM " SQL_PG_TABLE_INFO_FN "(NULL::VARCHAR[], NULL)");
  free(sql);
}

static void an_empty_answer_keeps_the_statements_columns(void **state) {
  (void)state;
  sql_known_query q = {SQL_KNOWN_EMPTY, NULL, 0, NULL};
  char *sql = sql_pginfo_call(&q, "SELECT oid FROM pg_enum ORDER BY oid");
  assert_string_equal(sql, "SELECT * FROM (SELECT oid FROM pg_enum ORDER BY oid) AS "
                           "moraine_known_empty WHERE false");
  free(sql);
}

/* ---- the directory's answer against the views' ---- */

static int setup(void **state) {
  sql_error err;
  sql_engine_options o = {.server_version = "15.0 (moraine test)"};
  sql_engine *e;
  if (sql_engine_open(&o, &e, &err) != MR_OK)
    return -1;
  static const char *const ddl[] = {
      "CREATE TABLE public.ducklake_intro (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ, "
      "n DECIMAL(10,2), b BYTEA NOT NULL, UNIQUE (ts, n))",
      "CREATE TABLE public.ducklake_plain (a INTEGER, l VARCHAR[], st STRUCT(k VARCHAR, v INT), "
      "u UUID, iv INTERVAL, \"Mixed Case\" SMALLINT)",
      "CREATE TABLE public.\"Zeta\" (z INTEGER UNIQUE, y VARCHAR UNIQUE)",
      "CREATE SCHEMA other",
      "CREATE TABLE other.ducklake_intro (x INTEGER PRIMARY KEY)",
  };
  for (size_t i = 0; i < sizeof ddl / sizeof ddl[0]; i++)
    if (sql_engine_exec(e, ddl[i], &err) != MR_OK) {
      fprintf(stderr, "%s: %s\n", ddl[i], err.base.msg);
      return -1;
    }
  if (sql_relcache_refresh(e->relcache, e->relcache_con, &err) != MR_OK)
    return -1;
  *state = e;
  return 0;
}

static int teardown(void **state) {
  sql_engine_close(*state);
  return 0;
}

/* Every row and column type of sql on the engine's own connection. */
static char *rows_of(sql_engine *e, const char *sql) {
  duckdb_result r;
  if (duckdb_query(e->admin, sql, &r) != DuckDBSuccess)
    fail_msg("%s: %s", sql, duckdb_result_error(&r));
  sql_strbuf b = {0};
  for (idx_t c = 0; c < duckdb_column_count(&r); c++)
    sql_strbuf_addf(&b, "%s%d", c ? "," : "T ", (int)duckdb_column_type(&r, c));
  for (idx_t i = 0; i < duckdb_row_count(&r); i++) {
    sql_strbuf_add(&b, "\nD ");
    for (idx_t c = 0; c < duckdb_column_count(&r); c++) {
      char *v = duckdb_value_varchar(&r, c, i);
      sql_strbuf_addf(&b, "%s%s", c ? "," : "", v ? v : "NULL");
      duckdb_free(v);
    }
  }
  duckdb_destroy_result(&r);
  return sql_strbuf_take(&b);
}

/* The lookup over the views, in this test's words. */
#define CAT(rel) SQL_PGCAT_DB ".main." rel
#define VIEWS_LOOKUP                                                                               \
  "SELECT n.oid AS namespace_id, c.relname, c.relpages, a.attname, t.typname AS type_name, "       \
  "a.atttypmod AS type_modifier, a.attndims AS ndim, a.attnum, a.attnotnull AS notnull, "          \
  "NULL AS constraint_id, NULL AS constraint_type, NULL AS constraint_key, "                      \
  "tn.nspname AS type_schema, d1.description AS column_comment, "                                 \
  "d2.description AS table_comment FROM " CAT("pg_class") " c JOIN " CAT("pg_namespace")         \
  " n ON c.relnamespace = n.oid JOIN " CAT("pg_attribute") " a ON a.attrelid = c.oid JOIN "      \
  CAT("pg_type") " t ON a.atttypid = t.oid JOIN " CAT("pg_namespace")                             \
  " tn ON t.typnamespace = tn.oid LEFT JOIN " CAT("pg_description")                               \
  " d1 ON d1.objoid = c.oid AND d1.objsubid = a.attnum LEFT JOIN " CAT("pg_description")          \
  " d2 ON d2.objoid = c.oid AND d2.objsubid = 0 "                                                 \
  "WHERE a.attnum > 0 AND c.relkind IN ('r', 'v', 'm', 'f', 'p') %s UNION ALL "                    \
  "SELECT n.oid, c.relname, NULL, NULL, NULL, NULL, NULL, NULL, NULL, k.oid, k.contype, "         \
  "k.conkey, NULL, NULL, NULL FROM " CAT("pg_class") " c JOIN " CAT("pg_namespace")              \
  " n ON c.relnamespace = n.oid JOIN " CAT("pg_constraint") " k ON k.conrelid = c.oid "          \
  "WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND k.contype IN ('p', 'u') %s "                  \
  "ORDER BY namespace_id, relname, attnum, constraint_id"

/* Asserts the two answers equal; returns their row count. */
static size_t check(sql_engine *e, const char *filter, char **schemas, size_t nschemas,
                    char *relname) {
  char views[4096], *call;
  snprintf(views, sizeof views, VIEWS_LOOKUP, filter, filter);
  sql_known_query l = {SQL_KNOWN_TABLE_LOOKUP, schemas, nschemas, relname};
  assert_non_null(call = sql_pginfo_call(&l, NULL));
  char *want = rows_of(e, views), *got = rows_of(e, call);
  assert_string_equal(got, want);
  size_t rows = 0;
  for (const char *p = got; (p = strstr(p, "\nD ")) != NULL; p++)
    rows++;
  free(want);
  free(got);
  free(call);
  return rows;
}

static void the_directory_answers_as_the_views_do(void **state) {
  sql_engine *e = *state;
  char *pub[] = {"public"}, *both[] = {"other", "public"}, *none[] = {"nowhere"};
  /* 4 columns, a primary key and a two-column unique */
  assert_int_equal(check(e, "AND n.nspname IN ('public') AND c.relname = 'ducklake_intro'", pub,
                         1, "ducklake_intro"),
                   6);
  /* the same name in two schemas: ordered by schema oid */
  assert_int_equal(check(e, "AND n.nspname IN ('other', 'public') AND c.relname = "
                            "'ducklake_intro'",
                         both, 2, "ducklake_intro"),
                   8);
  /* a column of a type pg_type does not list drops out of the views' join */
  size_t plain = check(e, "AND n.nspname IN ('public') AND c.relname = 'ducklake_plain'", pub, 1,
                       "ducklake_plain");
  assert_in_range(plain, 4, 6);
  /* a table that does not exist: DuckLake's inlined-delete probe */
  assert_int_equal(check(e, "AND n.nspname IN ('public') AND c.relname = "
                            "'ducklake_inlined_delete_1'",
                         pub, 1, "ducklake_inlined_delete_1"),
                   0);
  assert_int_equal(check(e, "AND n.nspname IN ('nowhere')", none, 1, NULL), 0);
  /* a schema, and everything ("Zeta" sorts first: byte order) */
  assert_int_equal(check(e, "AND n.nspname IN ('public')", pub, 1, NULL), 6 + plain + 4);
  assert_int_equal(check(e, "", NULL, 0, NULL), 6 + plain + 4 + 2);
}

/* pg_constraint comes from the directory too: the same keys as DuckDB's. */
static void keys_agree_with_the_engine(void **state) {
  sql_engine *e = *state;
  char *got = rows_of(e, "SELECT conname, contype, conkey FROM " CAT("pg_constraint")
                         " ORDER BY conname");
  char *want = rows_of(e, "SELECT constraint_name, CASE constraint_type WHEN 'PRIMARY KEY' "
                          "THEN 'p' ELSE 'u' END, '{' || array_to_string(list_transform("
                          "constraint_column_indexes, x -> x + 1), ',') || '}' "
                          "FROM duckdb_constraints() WHERE database_name = current_database() "
                          "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') ORDER BY 1");
  assert_string_equal(got, want);
  assert_non_null(strstr(got, ",u,{2,3}")); /* the two-column UNIQUE */
  free(got);
  free(want);
}

/* What SQL_KNOWN_EMPTY rests on: no enum and no composite type exists. */
static void enums_and_composite_types_are_empty(void **state) {
  sql_engine *e = *state;
  char *got = rows_of(e, "SELECT (SELECT count(*) FROM " CAT("pg_enum") "), (SELECT count(*) "
                         "FROM " CAT("pg_type") " WHERE typtype <> 'b')");
  assert_string_equal(got, "T 5,5\nD 0,0");
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(digests_ignore_filter_values_and_layout),
      cmocka_unit_test(digests_see_everything_else),
      cmocka_unit_test(a_statement_of_another_form_is_not_the_lookup),
      cmocka_unit_test(the_answer_quotes_its_values),
      cmocka_unit_test(an_empty_answer_keeps_the_statements_columns),
      cmocka_unit_test_setup_teardown(the_directory_answers_as_the_views_do, setup, teardown),
      cmocka_unit_test_setup_teardown(keys_agree_with_the_engine, setup, teardown),
      cmocka_unit_test_setup_teardown(enums_and_composite_types_are_empty, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
