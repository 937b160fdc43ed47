/* test_sql_lex.c — statement splitting, classification, the small parsers,
 * and the PostgreSQL -> DuckDB rewrite (incl. the introspection queries). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_lex.h"

static void split_statements(void **state) {
  sql_stmts st;
  sql_error err;
  assert_int_equal(sql_lex_split("SELECT 1; SELECT ';' ;; -- c;\n SELECT $$a;b$$ ;", &st, &err), MR_OK);
  assert_int_equal(st.n, 3);
  assert_string_equal(st.v[0], "SELECT 1");
  assert_string_equal(st.v[1], "SELECT ';'");
  assert_string_equal(st.v[2], "SELECT $$a;b$$");
  sql_stmts_free(&st);
  assert_int_equal(sql_lex_split("  ; -- only a comment\n", &st, &err), MR_OK);
  assert_int_equal(st.n, 0);
  sql_stmts_free(&st);
  assert_int_not_equal(sql_lex_split("SELECT 'unterminated", &st, &err), MR_OK);
  assert_string_equal(err.sqlstate, "42601");
}

static sql_kind classify(const char *sql) {
  sql_toks t;
  sql_error err;
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  sql_kind k = sql_lex_classify(sql, &t);
  sql_toks_free(&t);
  return k;
}

static void classify_statements(void **state) {
  assert_int_equal(classify("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ"), SQL_KIND_BEGIN);
  assert_int_equal(classify("commit"), SQL_KIND_COMMIT);
  assert_int_equal(classify("ROLLBACK"), SQL_KIND_ROLLBACK);
  assert_int_equal(classify("DISCARD ALL"), SQL_KIND_DISCARD);
  assert_int_equal(classify("SET TRANSACTION SNAPSHOT 'x'"), SQL_KIND_NOOP);
  assert_int_equal(classify("SET application_name = 'x'"), SQL_KIND_SET);
  assert_int_equal(classify("SHOW TimeZone"), SQL_KIND_SHOW);
  assert_int_equal(classify("COPY (SELECT 1) TO STDOUT"), SQL_KIND_COPY);
  assert_int_equal(classify("WITH v(a) AS (VALUES (1)) UPDATE t SET a = v.a FROM v"), SQL_KIND_DML);
  assert_int_equal(classify("WITH v(a) AS (SELECT 1) SELECT * FROM v"), SQL_KIND_OTHER);
  assert_int_equal(classify("DELETE FROM t WHERE ctid IN ('(0,1)')"), SQL_KIND_DML);
  assert_int_equal(classify("DROP Table  IF EXISTS \"public\".\"x\""), SQL_KIND_DDL);
  assert_int_equal(classify("SAVEPOINT a"), SQL_KIND_UNSUPPORTED);
  assert_int_equal(classify("SELECT 1"), SQL_KIND_OTHER);
}

static char *rewrite(const char *sql) {
  char *out;
  sql_error err;
  assert_int_equal(sql_rewrite(sql, &out, &err), MR_OK);
  return out;
}

#define ASSERT_REWRITE(in, want)                                                           \
  do {                                                                                     \
    char *got_ = rewrite(in);                                                              \
    assert_string_equal(got_, want);                                                       \
    free(got_);                                                                            \
  } while (0)

static void rewrite_types_and_catalog(void **state) {
  ASSERT_REWRITE("SELECT n.oid FROM pg_catalog.pg_namespace n", "SELECT n.oid FROM pg_namespace n");
  ASSERT_REWRITE("CREATE TABLE t(a BYTEA, b float, c FLOAT(10), d float(53), e jsonb)",
                 "CREATE TABLE t(a pg_bytea, b DOUBLE, c REAL, d DOUBLE, e JSON)");
  ASSERT_REWRITE("SELECT '\\x0102'::bytea, x.float", "SELECT '\\x0102'::pg_bytea, x.float");
  /* bytea meaning comes from the column type: literals are never edited */
  ASSERT_REWRITE("INSERT INTO s VALUES ('\\x01\\x02', '\\x6f6e65')",
                 "INSERT INTO s VALUES ('\\x01\\x02', '\\x6f6e65')");
  ASSERT_REWRITE("SELECT 'pg_catalog.x', \"pg_catalog\".y", "SELECT 'pg_catalog.x', \"pg_catalog\".y");
}

static void rewrite_ctid(void **state) {
  ASSERT_REWRITE("SELECT \"a\", ctid FROM \"public\".\"t\" WHERE \"a\" <= '6'",
                 "SELECT \"a\", rowid AS ctid FROM \"public\".\"t\" WHERE \"a\" <= '6'");
  ASSERT_REWRITE("DELETE FROM t WHERE ctid IN ('(0,2)','(1,3)')",
                 "DELETE FROM t WHERE rowid IN (2,32771)");
  ASSERT_REWRITE("UPDATE \"s\".\"t\" SET \"b\" = \"u\".\"b\" FROM \"u\" WHERE \"t\".ctid=__page_id_string::TID",
                 "UPDATE \"s\".\"t\" SET \"b\" = \"u\".\"b\" FROM \"u\" WHERE \"t\".rowid=mr_tid_rowid(__page_id_string)");
  ASSERT_REWRITE("SELECT ctid FROM t WHERE ctid BETWEEN '(0,0)'::tid AND '(5,0)'::tid",
                 "SELECT rowid AS ctid FROM t WHERE rowid BETWEEN 0 AND 163840");
  /* offsets stop below 2^15 (sql_types.h PG_TID_PER_BLOCK) */
  ASSERT_REWRITE("DELETE FROM t WHERE ctid IN ('(1,32767)')", "DELETE FROM t WHERE rowid IN (65535)");
  /* a client's offset past that names no row of ours: it stays a string, and
   * the comparison with the BIGINT rowid fails as a conversion error */
  ASSERT_REWRITE("DELETE FROM t WHERE ctid IN ('(0,32768)')",
                 "DELETE FROM t WHERE rowid IN ('(0,32768)')");
  /* without ctid, tid-looking strings are data */
  ASSERT_REWRITE("SELECT '(0,2)'", "SELECT '(0,2)'");
  /* and with ctid elsewhere in the statement, too */
  ASSERT_REWRITE("UPDATE t SET v = '(1,2)' WHERE ctid = '(0,1)' AND w IN ('(3,4)')",
                 "UPDATE t SET v = '(1,2)' WHERE rowid = 1 AND w IN ('(3,4)')");
  ASSERT_REWRITE("SELECT ctid, '(0,1)' FROM t WHERE ctid IN ('(0,1)', '(0,2)')",
                 "SELECT rowid AS ctid, '(0,1)' FROM t WHERE rowid IN (1, 2)");
}

/* What psql's \\d family sends that DuckDB reads differently. */
static void rewrite_psql(void **state) {
  /* PostgreSQL's ~ finds the pattern anywhere; DuckDB's matches it whole */
  ASSERT_REWRITE("SELECT 1 WHERE n.nspname !~ '^pg_' AND r ~ 'x''y'",
                 "SELECT 1 WHERE n.nspname !~ '(?s).*(?:^pg_).*' AND r ~ '(?s).*(?:x''y).*'");
  ASSERT_REWRITE("SELECT a ~* 'ab', a !~* 'c'", "SELECT a ~ '(?is).*(?:ab).*', a !~ '(?is).*(?:c).*'");
  ASSERT_REWRITE("WHERE c.relname OPERATOR(pg_catalog.~) '^(t1)$' COLLATE pg_catalog.default",
                 "WHERE c.relname OPERATOR(~) '(?s).*(?:^(t1)$).*' ");
  ASSERT_REWRITE("SELECT x COLLATE \"default\", y COLLATE \"C\"", "SELECT x , y COLLATE \"C\"");
  /* a pattern that is not a plain literal is left alone (~~ is LIKE) */
  ASSERT_REWRITE("SELECT a ~ b, a ~~ 'x%'", "SELECT a ~ b, a ~~ 'x%'");
  ASSERT_REWRITE("SELECT c.classoid = 'pg_catalog.pg_extension'::pg_catalog.regclass, c.oid::regclass",
                 "SELECT c.classoid = mr_regclass('pg_catalog.pg_extension'), c.oid::regclass");
  /* a scalar set function's column is named after its alias */
  ASSERT_REWRITE("SELECT s FROM pg_catalog.generate_series(0, pg_catalog.array_upper(a, 1)) s, t "
                 "WHERE x = a[s]",
                 "SELECT s FROM generate_series(0, array_upper(a, 1)) s(s), t WHERE x = a[s]");
  ASSERT_REWRITE("SELECT 'toast.' || x FROM unnest(r) AS x", "SELECT 'toast.' || x FROM unnest(r) AS x(x)");
  ASSERT_REWRITE("SELECT * FROM unnest(r) x(y), generate_series(1, 2)",
                 "SELECT * FROM unnest(r) x(y), generate_series(1, 2)");
  ASSERT_REWRITE("SELECT unnest(r) x FROM t", "SELECT unnest(r) x FROM t");
}

/* The postgres extension's composite-type introspection query (v1.5). */
static const char composite_query[] =
    "SELECT n.oid, t.typrelid AS id, t.typname as type, pg_attribute.attname, sub_type.typname,\n"
    "       sub_type_ns.nspname AS sub_type_schema\n"
    "FROM pg_type t\n"
    "JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace\n"
    "JOIN pg_class ON pg_class.oid = t.typrelid\n"
    "JOIN pg_attribute ON attrelid=t.typrelid\n"
    "JOIN pg_type sub_type ON (pg_attribute.atttypid=sub_type.oid)\n"
    "JOIN pg_catalog.pg_namespace sub_type_ns ON sub_type_ns.oid = sub_type.typnamespace\n"
    "WHERE pg_class.relkind IN ('c', 'r', 'v', 'm', 'f', 'p')\n"
    "AND t.typtype='c'\n";

static void rewrite_introspection(void **state) {
  char *got = rewrite(composite_query);
  assert_null(strstr(got, "pg_catalog."));
  assert_non_null(strstr(got, "JOIN pg_namespace n ON n.oid = t.typnamespace"));
  assert_non_null(strstr(got, "JOIN pg_namespace sub_type_ns ON"));
  assert_non_null(strstr(got, "pg_class.relkind IN ('c', 'r', 'v', 'm', 'f', 'p')"));
  free(got);
}

static void parse_copy(void **state) {
  const char *sql = "COPY (SELECT \"a\" FROM (SELECT 1 AS a) AS __unnamed_subquery ) TO STDOUT (FORMAT \"binary\")";
  sql_toks t;
  sql_error err;
  sql_copy_stmt c;
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_equal(sql_lex_parse_copy(sql, &t, &c, &err), MR_OK);
  assert_false(c.from_stdin);
  assert_int_equal(c.format, SQL_COPY_BINARY);
  assert_string_equal(c.query, "SELECT \"a\" FROM (SELECT 1 AS a) AS __unnamed_subquery");
  sql_copy_stmt_free(&c);
  sql_toks_free(&t);

  sql = "COPY \"public\".\"t\" (\"a\", \"B\") FROM STDIN (FORMAT TEXT, NULL '\b')";
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_equal(sql_lex_parse_copy(sql, &t, &c, &err), MR_OK);
  assert_true(c.from_stdin);
  assert_string_equal(c.schema, "public");
  assert_string_equal(c.table, "t");
  assert_int_equal(c.ncols, 2);
  assert_string_equal(c.cols[1], "B");
  assert_int_equal(c.format, SQL_COPY_TEXT);
  assert_string_equal(c.null_str, "\b");
  sql_copy_stmt_free(&c);
  sql_toks_free(&t);

  sql = "COPY t TO STDOUT";
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_equal(sql_lex_parse_copy(sql, &t, &c, &err), MR_OK);
  assert_string_equal(c.query, "SELECT * FROM \"t\"");
  assert_string_equal(c.null_str, "\\N");
  sql_copy_stmt_free(&c);
  sql_toks_free(&t);

  sql = "COPY t FROM '/etc/passwd'";
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_not_equal(sql_lex_parse_copy(sql, &t, &c, &err), MR_OK);
  assert_string_equal(err.sqlstate, "0A000");
  sql_copy_stmt_free(&c);
  sql_toks_free(&t);
}

static void parse_set_and_targets(void **state) {
  struct {
    const char *sql, *name, *value;
  } cases[] = {
      {"SET application_name = 'psql'", "application_name", "psql"},
      {"SET TIME ZONE 'UTC'", "timezone", "UTC"},
      {"SET SESSION search_path TO a, b", "search_path", "a, b"},
      {"SET DateStyle TO DEFAULT", "datestyle", NULL},
      {"set statement_timeout=100", "statement_timeout", "100"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sql_toks t;
    sql_error err;
    char *name, *value;
    assert_int_equal(sql_lex_scan(cases[i].sql, &t, &err), MR_OK);
    assert_int_equal(sql_lex_parse_set(cases[i].sql, &t, &name, &value, &err), MR_OK);
    assert_string_equal(name, cases[i].name);
    if (cases[i].value)
      assert_string_equal(value, cases[i].value);
    else
      assert_null(value);
    free(name);
    free(value);
    sql_toks_free(&t);
  }
  const char *sql = "WITH v(k) AS (VALUES (1)) UPDATE \"public\".ducklake_table SET end_snapshot = 2 "
                    "FROM v WHERE table_id = k";
  sql_toks t;
  sql_error err;
  sql_dml_target d;
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_equal(sql_lex_dml_target(sql, &t, &d, &err), MR_OK);
  assert_string_equal(d.schema, "public");
  assert_string_equal(d.table, "ducklake_table");
  assert_int_equal(d.op, SQL_CHANGE_UPDATE);
  assert_false(d.has_returning);
  sql_dml_target_free(&d);
  sql_toks_free(&t);
  sql = "INSERT INTO T (a) VALUES (1) RETURNING a";
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  assert_int_equal(sql_lex_dml_target(sql, &t, &d, &err), MR_OK);
  assert_null(d.schema);
  assert_string_equal(d.table, "t");
  assert_true(d.has_returning);
  sql_dml_target_free(&d);
  sql_toks_free(&t);
  sql = "DROP Table  IF EXISTS \"public\".\"x\"";
  assert_int_equal(sql_lex_scan(sql, &t, &err), MR_OK);
  char *tag = sql_lex_ddl_tag(sql, &t);
  assert_string_equal(tag, "DROP TABLE");
  free(tag);
  sql_toks_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(split_statements),     cmocka_unit_test(classify_statements),
      cmocka_unit_test(rewrite_types_and_catalog), cmocka_unit_test(rewrite_ctid), cmocka_unit_test(rewrite_psql),
      cmocka_unit_test(rewrite_introspection), cmocka_unit_test(parse_copy),
      cmocka_unit_test(parse_set_and_targets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
