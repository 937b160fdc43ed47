/* test_sql_plan.c — the admission planner: what DuckLake, the postgres
 * extension and psql send is admitted with the right kind and target;
 * every attack shape is refused with its SQLSTATE; a captured corpus of
 * real traffic (MORAINE_PLAN_CORPUS) is admitted whole; docs/security.md
 * carries the admission table as sql_admit_write_markdown prints it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_admit.h"
#include "sql/sql_plan.h"

static bool temp_is_scratch(void *ctx, const char *name) {
  return strcmp(name, "scratch") == 0;
}
static const sql_plan_env env = {NULL, temp_is_scratch};

/* Plans sql; returns the SQLSTATE ("" when admitted) and the first plan. */
static const char *plan_state(const char *sql, sql_plans *out) {
  static sql_error err;
  memset(&err, 0, sizeof err);
  if (sql_plan_query(sql, &env, out, &err) == MR_OK)
    return "";
  return err.sqlstate;
}

static void expect(const char *sql, const char *state) {
  sql_plans p;
  const char *got = plan_state(sql, &p);
  if (strcmp(got, state) != 0)
    fail_msg("%s: expected '%s', got '%s'", sql, state, got);
  sql_plans_free(&p);
}

static void admits_catalog_traffic(void **state) {
  static const char *const ok[] = {
      "SELECT 1",
      "SELECT version(), (SELECT COUNT(*) FROM pg_settings WHERE name LIKE 'rds%')",
      "SELECT to_regclass('duckdb_secrets')",
      "SELECT oid, nspname FROM pg_namespace ORDER BY oid",
      "SELECT pg_namespace.oid, tablename, indexname FROM pg_indexes JOIN pg_namespace ON "
      "(schemaname=nspname)",
      "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ",
      "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY",
      "COMMIT",
      "ROLLBACK",
      "DISCARD ALL",
      "SET search_path TO public",
      "SHOW TimeZone",
      "RESET ALL",
      "COPY (SELECT \"snapshot_id\" FROM \"public\".\"ducklake_snapshot\") TO STDOUT (FORMAT "
      "\"binary\")",
      "INSERT INTO public.ducklake_snapshot VALUES (1, NOW(), 0, 1, 0)",
      "UPDATE ducklake_table SET end_snapshot = 3 WHERE end_snapshot IS NULL AND table_id IN (1,2)",
      "WITH u AS (SELECT 1 AS a) UPDATE ducklake_table_stats SET record_count = u.a FROM u "
      "RETURNING *",
      "DELETE FROM ducklake_inlined_data_2_1 WHERE row_id = 4 RETURNING *",
      "CREATE TABLE IF NOT EXISTS ducklake_inlined_data_2_1(row_id BIGINT, begin_snapshot BIGINT, "
      "end_snapshot BIGINT, a INTEGER, b VARCHAR, c INTERVAL, d BYTEA, e TIMESTAMP WITH TIME ZONE)",
      "CREATE TABLE ducklake_inlined_delete_2(file_id BIGINT, row_id BIGINT, begin_snapshot "
      "BIGINT)",
      "DROP TABLE IF EXISTS ducklake_inlined_data_2_1",
      "CREATE SCHEMA IF NOT EXISTS meta",
      "CREATE TEMP TABLE scratch (a BIGINT) ON COMMIT DROP",
      "INSERT INTO scratch VALUES (1)",
      "DROP TABLE scratch",
      "SELECT max(snapshot_id) FROM ducklake_snapshot; SELECT 2",
      "DEALLOCATE ALL",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    expect(ok[i], "");
}

static void plans_carry_kind_and_target(void **state) {
  sql_plans p;
  assert_string_equal(plan_state("INSERT INTO public.ducklake_tag VALUES (1) RETURNING *; "
                                 "BEGIN READ ONLY; SELECT 1",
                                 &p),
                      "");
  assert_int_equal(p.n, 3);
  assert_int_equal(p.v[0].kind, SQL_KIND_DML);
  assert_int_equal(p.v[0].dml.op, SQL_CHANGE_INSERT);
  assert_string_equal(p.v[0].dml.schema, "public");
  assert_string_equal(p.v[0].dml.table, "ducklake_tag");
  assert_true(p.v[0].dml.has_returning);
  assert_string_equal(p.v[0].text, "INSERT INTO public.ducklake_tag VALUES (1) RETURNING *");
  assert_int_equal(p.v[1].kind, SQL_KIND_BEGIN);
  assert_true(p.v[1].begin_read_only);
  assert_int_equal(p.v[2].kind, SQL_KIND_OTHER);
  sql_plans_free(&p);

  assert_string_equal(plan_state("CREATE TABLE ducklake_inlined_data_12_3(row_id BIGINT, "
                                 "begin_snapshot BIGINT, end_snapshot BIGINT, v INTERVAL[])",
                                 &p),
                      "");
  assert_int_equal(p.v[0].kind, SQL_KIND_DDL);
  assert_int_equal(p.v[0].ddl.table_class, SQL_TABLE_INLINED_DATA);
  assert_int_equal(p.v[0].ddl.table_id, 12);
  assert_int_equal(p.v[0].ddl.schema_version, 3);
  assert_int_equal(p.v[0].ddl.ncols, 4);
  assert_string_equal(p.v[0].ddl.cols[3].type, "interval[]");
  assert_string_equal(p.v[0].tag, "CREATE TABLE");
  sql_plans_free(&p);

  assert_string_equal(plan_state("  ;; -- nothing\n", &p), "");
  assert_int_equal(p.n, 0);
  sql_plans_free(&p);
}

static void refuses_attacks(void **state) {
  static const char *const refused[][2] = {
      /* files and extensions */
      {"SELECT * FROM read_text('/etc/passwd')", "42501"},
      {"SELECT * FROM read_blob('/etc/passwd')", "42501"},
      {"SELECT * FROM glob('/etc/*')", "42501"},
      {"SELECT * FROM read_csv('/etc/passwd')", "42501"},
      {"SELECT content FROM pg_catalog.read_text('/etc/hosts')", "42501"},
      {"SELECT 1 WHERE EXISTS (SELECT * FROM read_text('/etc/passwd'))", "42501"},
      {"SELECT upper((SELECT string_agg(content, '') FROM read_text('/etc/passwd')))", "42501"},
      {"COPY ducklake_snapshot TO '/tmp/x'", "42501"},
      {"COPY (SELECT 1) TO '/tmp/x'", "42501"},
      {"COPY ducklake_snapshot FROM '/etc/passwd'", "42501"},
      {"COPY ducklake_snapshot FROM PROGRAM 'id'", "42501"},
      {"EXPORT DATABASE '/tmp/x'", "42601"},
      {"ATTACH '/tmp/x.db'", "42601"},
      {"PRAGMA log_query_path='/tmp/q'", "42601"},
      {"INSTALL httpfs", "42601"},
      {"LOAD ducklake", "42601"},
      {"LOAD '/tmp/evil.duckdb_extension'", "42501"},
      {"SELECT * FROM \"/etc/passwd\"", "42501"},
      {"SELECT * FROM \"ducklake_x.csv\"", "42501"},
      {"SELECT current_setting('access_mode')", "42501"},
      {"SELECT getvariable('x')", "42501"},
      {"SELECT * FROM duckdb_settings()", "42501"},
      {"SELECT * FROM duckdb_tables", "42501"},
      /* the engine's own databases */
      {"DETACH mrpg", "42601"},
      {"SELECT * FROM mrpg.main.pg_type", "42501"},
      {"SELECT * FROM mrpg.pg_type", "42501"},
      {"SELECT * FROM memory.public.ducklake_snapshot", "42501"},
      {"SELECT * FROM system.main.duckdb_tables", "42501"},
      {"INSERT INTO pg_type VALUES (1)", "42501"},
      {"DELETE FROM pg_catalog.pg_settings", "42501"},
      {"CREATE SCHEMA mrpg", "42501"},
      {"CREATE SCHEMA pg_evil", "42501"},
      {"CREATE SCHEMA main", "42501"},
      {"USE mrpg", "42601"},
      {"SET search_path = mrpg", ""}, /* kept by the session only */
      /* catalog DDL */
      {"DROP TABLE ducklake_snapshot_changes", "42501"},
      {"DROP TABLE public.ducklake_snapshot", "42501"},
      {"ALTER TABLE ducklake_snapshot ADD COLUMN x INT", "42501"},
      /* pg_description is empty because no engine object can get a comment */
      {"COMMENT ON TABLE ducklake_snapshot IS 'x'", "42501"},
      {"COMMENT ON COLUMN ducklake_snapshot.snapshot_id IS 'x'", "42501"},
      {"TRUNCATE ducklake_snapshot", "42501"},
      {"MERGE INTO ducklake_tag t USING ducklake_tag s ON true WHEN MATCHED THEN DELETE", "42501"},
      {"CREATE TABLE evil (a INT)", "42501"},
      {"CREATE TABLE ducklake_inlined_data_77_1 (a INT)", "42501"},
      {"CREATE TABLE ducklake_inlined_data_7x_1 (row_id BIGINT, begin_snapshot BIGINT, "
       "end_snapshot BIGINT)",
       "42501"},
      {"CREATE TABLE ducklake_inlined_data_7_1 (row_id BIGINT, begin_snapshot BIGINT, "
       "end_snapshot BIGINT, a BIGINT DEFAULT 1)",
       "42501"},
      {"CREATE TABLE ducklake_inlined_data_7_1 (row_id BIGINT, begin_snapshot BIGINT, "
       "end_snapshot BIGINT, a mrpg.evil)",
       "42501"},
      {"CREATE TABLE ducklake_inlined_delete_7 (file_id BIGINT, row_id BIGINT)", "42501"},
      {"CREATE TABLE ducklake_snapshot AS SELECT 1", "42501"},
      {"CREATE VIEW v AS SELECT 1", "42501"},
      {"CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", "42501"},
      {"CREATE TEMP TABLE ducklake_snapshot (a INT)", "42501"},
      {"CREATE TEMP TABLE pg_class (a INT)", "42501"},
      {"CREATE TEMP TABLE \"x.csv\" (a INT)", "42501"},
      {"SELECT 1 INTO evil", "42501"},
      {"WITH d AS (DELETE FROM ducklake_snapshot RETURNING *) SELECT * FROM d", "0A000"},
      {"INSERT INTO ducklake_tag VALUES (1) ON CONFLICT DO NOTHING", "0A000"},
      {"CALL ducklake_expire_snapshots('lake')", "42501"},
      {"DO $$ BEGIN END $$", "42501"},
      {"GRANT ALL ON ducklake_snapshot TO public", "42501"},
      /* PostgreSQL syntax moraine does not implement */
      {"SAVEPOINT a", "0A000"},
      {"RELEASE a", "0A000"},
      {"PREPARE TRANSACTION 'x'", "0A000"},
      {"EXPLAIN SELECT 1", "0A000"},
      {"PREPARE p AS SELECT 1", "0A000"},
      {"LISTEN x", "0A000"},
      {"DISCARD TEMP", "0A000"},
      {"COMMIT AND CHAIN", "0A000"},
      /* one bad statement refuses the whole string */
      {"SELECT 1; SELECT * FROM read_text('/etc/passwd')", "42501"},
      {"SELECT 1; SELECT 'unterminated", "42601"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    expect(refused[i][0], refused[i][1]);
}

static void refuses_deep_trees(void **state) {
  size_t depth = 3000;
  char *sql = malloc(depth * 2 + 32);
  assert_non_null(sql);
  strcpy(sql, "SELECT ");
  size_t n = strlen(sql);
  for (size_t i = 0; i < depth; i++)
    sql[n++] = '(';
  sql[n++] = '1';
  for (size_t i = 0; i < depth; i++)
    sql[n++] = ')';
  sql[n] = '\0';
  sql_plans p;
  const char *state_ = plan_state(sql, &p);
  assert_true(strcmp(state_, "54001") == 0 || strcmp(state_, "42601") == 0 ||
              strcmp(state_, "") == 0);
  sql_plans_free(&p);
  free(sql);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf)
    buf[n] = '\0';
  fclose(f);
  return buf;
}

/* A captured corpus of client traffic (entries separated by a line holding
 * only "-- next"), e.g. a DuckLake workload recorded with the postgres
 * extension's pg_debug_show_queries: every entry must be admitted. The
 * corpus is not kept in the repository (it is the clients' own SQL text);
 * point MORAINE_PLAN_CORPUS at one to run this check. */
static void admits_the_corpus(void **state) {
  const char *path = getenv("MORAINE_PLAN_CORPUS");
  if (path == NULL || path[0] == '\0')
    skip();
  char *corpus = read_file(path);
  assert_non_null(corpus);
  size_t count = 0, refused = 0;
  char *p = corpus;
  while (p && *p) {
    char *next = strstr(p, "\n-- next\n");
    if (next)
      *next = '\0';
    sql_plans plans;
    sql_error err;
    if (sql_plan_query(p, &env, &plans, &err) != MR_OK) {
      print_error("corpus entry refused (%s %s):\n%.300s\n\n", err.sqlstate, err.base.msg, p);
      refused++;
    }
    sql_plans_free(&plans);
    count++;
    p = next ? next + strlen("\n-- next\n") : NULL;
  }
  free(corpus);
  assert_true(count > 10);
  assert_int_equal(refused, 0);
}

/* A plan is pure exactly when its answer depends on catalog rows alone. */
static void expect_pure(const char *sql, bool pure) {
  sql_plans p;
  const char *got = plan_state(sql, &p);
  if (strcmp(got, "") != 0)
    fail_msg("%s: refused with %s", sql, got);
  assert_int_equal(p.n, 1);
  if (p.v[0].pure != pure)
    fail_msg("%s: pure is %d, expected %d", sql, p.v[0].pure, pure);
  sql_plans_free(&p);
}

static void plans_know_what_their_answer_depends_on(void **state) {
  (void)state;
  expect_pure("COPY (SELECT \"snapshot_id\" FROM \"public\".\"ducklake_snapshot\" WHERE "
              "\"snapshot_id\" = '5') TO STDOUT (FORMAT \"binary\")",
              true);
  expect_pure("COPY (SELECT * FROM (SELECT snapshot_id FROM public.ducklake_snapshot WHERE "
              "snapshot_id = (SELECT MAX(snapshot_id) FROM public.ducklake_snapshot)) AS s) "
              "TO STDOUT (FORMAT binary)",
              true);
  expect_pure("WITH c AS (SELECT coalesce(max(table_id), 0) AS m FROM ducklake_table) "
              "SELECT lower('X'), m FROM c",
              true);
  expect_pure("SELECT 1", true);
  /* pg_catalog's rows are constants or the catalog's committed tables
   * (sql_admit.h), and to_regclass reads those tables */
  expect_pure("SELECT version(), (SELECT COUNT(*) FROM pg_settings WHERE name LIKE 'rds%')", true);
  expect_pure("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'TimeZone'", true);
  expect_pure("SELECT s.name FROM pg_settings s, pg_class c WHERE s.name = c.relname", true);
  expect_pure("SELECT count(*) FROM pg_class", true);
  expect_pure("SELECT oid, nspname FROM pg_namespace ORDER BY oid", true);
  expect_pure("SELECT to_regclass('duckdb_secrets')", true);
  expect_pure("SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id IN "
              "(SELECT oid FROM pg_catalog.pg_class)",
              true);
  /* ... but not what also depends on the session's search path */
  expect_pure("SELECT relname FROM pg_class WHERE pg_table_is_visible(oid)", false);
  /* the clock, chance, the session, or relations that are not catalog rows */
  expect_pure("COPY (SELECT now()) TO STDOUT (FORMAT binary)", false);
  expect_pure("SELECT CURRENT_TIMESTAMP", false);
  expect_pure("SELECT current_user", false);
  expect_pure("SELECT gen_random_uuid()", false);
  expect_pure("SELECT pg_database_size(current_database())", false);
  expect_pure("SELECT count(*) FROM scratch", false);
  expect_pure("SELECT snapshot_id FROM ducklake_snapshot WHERE snapshot_id = $1", false);
  expect_pure("SELECT (SELECT max(a) FROM scratch) FROM ducklake_snapshot", false);
  /* hostile shapes: a CTE named like a catalog table, a qualified call */
  expect_pure("WITH ducklake_snapshot AS (SELECT now() AS snapshot_id) "
              "SELECT snapshot_id FROM ducklake_snapshot",
              false);
  expect_pure("SELECT pg_catalog.now(), snapshot_id FROM ducklake_snapshot", false);
  expect_pure("SELECT relname FROM pg_catalog.pg_class WHERE relname = current_schema()", false);
}

/* docs/security.md holds sql_admit_write_markdown's output verbatim. */
static void docs_match_the_table(void **state) {
  char path[1024];
  snprintf(path, sizeof path, "%s/docs/security.md", getenv("MORAINE_SOURCE_DIR"));
  char *doc = read_file(path);
  assert_non_null(doc);
  char *table = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&table, &len);
  assert_non_null(f);
  sql_admit_write_markdown(f);
  fclose(f);
  if (strstr(doc, table) == NULL)
    fail_msg("docs/security.md is out of date: paste the output of "
             "`moraine admission-table` into it");
  free(table);
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(admits_catalog_traffic), cmocka_unit_test(plans_carry_kind_and_target),
      cmocka_unit_test(refuses_attacks),        cmocka_unit_test(refuses_deep_trees),
      cmocka_unit_test(admits_the_corpus),      cmocka_unit_test(docs_match_the_table),
      cmocka_unit_test(plans_know_what_their_answer_depends_on),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
