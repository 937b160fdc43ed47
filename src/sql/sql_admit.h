/*
 * sql_admit.h — the admission table: the one place that lists what a client
 * may send. The planner (sql_plan.c) reads it, its tests read it, and the
 * tables of docs/security.md are generated from it (sql_admit_write_markdown;
 * a unit test fails when the document drifts).
 *
 * The policy is an allow-list. A statement is admitted only when its parse
 * node is a row of SQL_ADMIT_STATEMENTS (and that row's own checks pass in
 * sql_plan.c), every relation it names passes sql_admit_relation, and every
 * function it calls is a row of SQL_ADMIT_FUNCTIONS. Every other statement
 * node is refused: with 0A000 when it is a row of SQL_ADMIT_UNSUPPORTED
 * (PostgreSQL syntax moraine does not implement), else with 42501.
 *
 * What is admitted is what DuckDB's postgres extension, the ducklake
 * extension (v1.5) and psql send, read from their public sources and from
 * their traffic against moraine.
 */
#ifndef MR_SQL_ADMIT_H
#define MR_SQL_ADMIT_H

#include <stdbool.h>
#include <stdio.h>

/* X(shape, PgQuery node case suffix, what is admitted) */
#define SQL_ADMIT_STATEMENTS(X)                                                                    \
  X("select", SELECT_STMT,                                                                         \
    "SELECT / VALUES / UNION over admitted relations and functions; no SELECT INTO")               \
  X("insert", INSERT_STMT,                                                                         \
    "INSERT into a catalog or temporary table, VALUES or SELECT, WITH; RETURNING on a temporary "  \
    "table only")                                                                                  \
  X("update", UPDATE_STMT,                                                                         \
    "UPDATE of a catalog or temporary table, optional FROM, WITH; RETURNING on a temporary table " \
    "only")                                                                                        \
  X("delete", DELETE_STMT,                                                                         \
    "DELETE from a catalog or temporary table, optional USING, WITH; RETURNING on a temporary "    \
    "table only")                                                                                  \
  X("copy_out", COPY_STMT, "COPY (SELECT ...) TO STDOUT, text, csv or binary")                     \
  X("copy_in", COPY_STMT, "COPY catalog-or-temporary-table [(columns)] FROM STDIN")                \
  X("create_schema", CREATE_SCHEMA_STMT,                                                           \
    "CREATE SCHEMA [IF NOT EXISTS] for DuckLake's metadata schema; not a reserved name")           \
  X("create_table", CREATE_STMT,                                                                   \
    "CREATE TABLE [IF NOT EXISTS] of a DuckLake table: an existing spec table, an inlined data "   \
    "table (row_id, begin_snapshot, end_snapshot BIGINT, then typed columns) or an inlined "       \
    "delete table (file_id, row_id, begin_snapshot BIGINT); plain columns only")                   \
  X("create_temp", CREATE_STMT,                                                                    \
    "CREATE TEMP TABLE [ON COMMIT DROP] with plain columns: session scratch, never persisted")     \
  X("drop_table", DROP_STMT,                                                                       \
    "DROP TABLE [IF EXISTS] of inlined data / inlined delete tables, or of temporary tables")      \
  X("transaction", TRANSACTION_STMT,                                                               \
    "BEGIN / START TRANSACTION [ISOLATION LEVEL ...] [READ ONLY|READ WRITE], COMMIT, END, "        \
    "ROLLBACK, ABORT")                                                                             \
  X("set", VARIABLE_SET_STMT,                                                                      \
    "SET / SET SESSION / SET LOCAL / RESET [ALL] / SET TRANSACTION: kept per session, never "      \
    "passed to the engine")                                                                        \
  X("show", VARIABLE_SHOW_STMT, "SHOW name / SHOW ALL, answered from the session")                 \
  X("discard", DISCARD_STMT, "DISCARD ALL")                                                        \
  X("deallocate", DEALLOCATE_STMT, "DEALLOCATE name or ALL (of the protocol's prepared statements)")

/* X(PgQuery node case suffix): PostgreSQL syntax refused with 0A000. */
#define SQL_ADMIT_UNSUPPORTED(X)                                                                   \
  X(EXPLAIN_STMT)                                                                                  \
  X(PREPARE_STMT)                                                                                  \
  X(EXECUTE_STMT)                                                                                  \
  X(DECLARE_CURSOR_STMT)                                                                           \
  X(FETCH_STMT)                                                                                    \
  X(CLOSE_PORTAL_STMT)                                                                             \
  X(LISTEN_STMT)                                                                                   \
  X(UNLISTEN_STMT)                                                                                 \
  X(NOTIFY_STMT)                                                                                   \
  X(LOCK_STMT)                                                                                     \
  X(CHECK_POINT_STMT)                                                                              \
  X(CONSTRAINTS_SET_STMT)                                                                          \
  X(VACUUM_STMT)                                                                                   \
  X(CLUSTER_STMT)                                                                                  \
  X(REINDEX_STMT)

/*
 * X(name, result, who sends it): functions a client may call, by their
 * unqualified name (a `pg_catalog.` qualifier is allowed, nothing else).
 * Operators are not functions here: every DuckDB operator is a pure function
 * of its operands. Names resolve first to moraine's pg_catalog macros, then
 * to DuckDB's built-ins.
 *
 * result says what a call's value depends on:
 *   PURE     its arguments and the engine's fixed settings only;
 *   TABLES   also the catalog database's committed tables (names, columns,
 *            keys), which change only with a commit or a pre-load, inside
 *            the data generation's move (sql_engine.c);
 *   SESSION  also the clock, chance, the session (user, temporary tables,
 *            search path) or state outside the catalog's rows (sizes).
 * A read calling only PURE and TABLES functions over catalog and pg_catalog
 * relations gives the same answer for as long as the catalog's rows stay
 * the same, which is what lets its result be kept (sql_rcache.h).
 */
#define SQL_ADMIT_FUNCTIONS(X)                                                                     \
  /* aggregates */                                                                                 \
  X("count", PURE, "DuckLake, postgres extension, psql")                                           \
  X("sum", PURE, "DuckLake")                                                                       \
  X("min", PURE, "DuckLake")                                                                       \
  X("max", PURE, "DuckLake")                                                                       \
  X("avg", PURE, "clients")                                                                        \
  X("array_agg", PURE, "postgres extension")                                                       \
  X("string_agg", PURE, "psql")                                                                    \
  X("bool_and", PURE, "clients")                                                                   \
  X("bool_or", PURE, "clients")                                                                    \
  /* scalar */                                                                                     \
  X("coalesce", PURE, "DuckLake")                                                                  \
  X("nullif", PURE, "clients")                                                                     \
  X("greatest", PURE, "clients")                                                                   \
  X("least", PURE, "clients")                                                                      \
  X("now", SESSION, "DuckLake (snapshot times)")                                                   \
  X("lower", PURE, "clients")                                                                      \
  X("upper", PURE, "clients")                                                                      \
  X("length", PURE, "clients")                                                                     \
  X("octet_length", PURE, "clients")                                                               \
  X("substring", PURE, "clients")                                                                  \
  X("substr", PURE, "clients")                                                                     \
  X("concat", PURE, "clients")                                                                     \
  X("replace", PURE, "clients")                                                                    \
  X("btrim", PURE, "clients (TRIM)")                                                               \
  X("ltrim", PURE, "clients (TRIM)")                                                               \
  X("rtrim", PURE, "clients (TRIM)")                                                               \
  X("position", PURE, "clients (POSITION)")                                                        \
  X("strpos", PURE, "clients")                                                                     \
  X("split_part", PURE, "clients")                                                                 \
  X("abs", PURE, "clients")                                                                        \
  X("round", PURE, "clients")                                                                      \
  X("floor", PURE, "clients")                                                                      \
  X("ceil", PURE, "clients")                                                                       \
  X("extract", PURE, "clients (EXTRACT)")                                                          \
  X("date_part", PURE, "clients")                                                                  \
  X("date_trunc", PURE, "clients")                                                                 \
  X("timezone", PURE, "clients (AT TIME ZONE)")                                                    \
  X("to_timestamp", PURE, "clients")                                                               \
  X("unnest", PURE, "DuckLake, psql")                                                              \
  X("generate_series", PURE, "psql")                                                               \
  X("array_to_string", PURE, "psql")                                                               \
  X("array_length", PURE, "psql")                                                                  \
  X("quote_ident", PURE, "psql")                                                                   \
  X("row_number", PURE, "psql")                                                                    \
  X("gen_random_uuid", SESSION, "clients")                                                         \
  /* moraine's pg_catalog (sql_pgcatalog.c) */                                                     \
  X("version", PURE, "postgres extension (version probe)")                                         \
  X("to_regclass", TABLES, "postgres extension (secrets probe)")                                   \
  X("format_type", PURE, "postgres extension, psql")                                               \
  X("obj_description", SESSION, "psql")                                                            \
  X("col_description", SESSION, "psql")                                                            \
  X("pg_get_userbyid", SESSION, "psql")                                                            \
  X("pg_encoding_to_char", PURE, "psql")                                                           \
  X("pg_my_temp_schema", SESSION, "postgres extension")                                            \
  X("pg_is_in_recovery", PURE, "clients")                                                          \
  X("pg_table_is_visible", SESSION, "psql")                                                        \
  X("pg_type_is_visible", SESSION, "psql (\\dT)")                                                  \
  X("pg_function_is_visible", SESSION, "psql (\\df)")                                              \
  X("pg_get_function_result", SESSION, "psql (\\df)")                                              \
  X("pg_get_function_arguments", SESSION, "psql (\\df)")                                           \
  X("pg_get_viewdef", SESSION, "psql (\\d+ of a view)")                                            \
  X("pg_get_statisticsobjdef_columns", SESSION, "psql (\\d)")                                      \
  X("pg_relation_is_publishable", SESSION, "psql (\\d)")                                           \
  X("array_upper", PURE, "psql (\\d)")                                                             \
  X("pg_table_size", SESSION, "psql (\\dt+)")                                                      \
  X("pg_get_expr", SESSION, "psql")                                                                \
  X("pg_get_constraintdef", SESSION, "psql")                                                       \
  X("pg_get_indexdef", SESSION, "psql")                                                            \
  X("pg_relation_size", SESSION, "clients")                                                        \
  X("pg_total_relation_size", SESSION, "clients")                                                  \
  X("pg_database_size", SESSION, "DuckLake (PRAGMA database_size)")                                \
  X("pg_size_pretty", PURE, "clients")                                                             \
  X("current_user", SESSION, "clients")                                                            \
  X("session_user", SESSION, "clients")                                                            \
  X("current_database", PURE, "clients")                                                           \
  X("current_schema", SESSION, "clients")                                                          \
  X("current_schemas", SESSION, "clients")                                                         \
  X("has_table_privilege", SESSION, "clients")                                                     \
  X("has_schema_privilege", SESSION, "clients")

/* X(name): pg_catalog relations moraine presents (sql_pgcatalog.c), read
 * only. Their rows are constants written when the engine opens, or follow
 * the catalog database's committed tables (sql_relcache.h, DuckDB's own
 * catalog), which change only inside the data generation's move; a
 * session's own uncommitted DDL and temporary tables keep it from the
 * result cache (sql_session_result_gen). So a read of them is pure. */
#define SQL_ADMIT_PG_RELATIONS(X)                                                                  \
  X("pg_namespace")                                                                                \
  X("pg_class")                                                                                    \
  X("pg_type")                                                                                     \
  X("pg_attribute")                                                                                \
  X("pg_constraint")                                                                               \
  X("pg_description")                                                                              \
  X("pg_enum")                                                                                     \
  X("pg_indexes")                                                                                  \
  X("pg_tables")                                                                                   \
  X("pg_views")                                                                                    \
  X("pg_database")                                                                                 \
  X("pg_roles")                                                                                    \
  X("pg_settings")                                                                                 \
  X("pg_am")                                                                                       \
  X("pg_attrdef")                                                                                  \
  X("pg_collation")                                                                                \
  X("pg_index")                                                                                    \
  X("pg_policy")                                                                                   \
  X("pg_statistic_ext")                                                                            \
  X("pg_publication")                                                                              \
  X("pg_publication_namespace")                                                                    \
  X("pg_publication_rel")                                                                          \
  X("pg_inherits")                                                                                 \
  X("pg_auth_members")                                                                             \
  X("pg_extension")                                                                                \
  X("pg_proc")

/* X(type name as libpg_query spells it): column types an inlined data table
 * may have (DuckLake's PostgreSQL spelling of each DuckDB type). */
#define SQL_ADMIT_COLUMN_TYPES(X)                                                                  \
  X("bool")                                                                                        \
  X("int2")                                                                                        \
  X("int4") X("int8") X("float4") X("float8") X("numeric") X("varchar") X("text") X("bytea")       \
      X("date") X("time") X("timetz") X("timestamp") X("timestamptz") X("interval") X("uuid")      \
          X("json") X("jsonb") X("bpchar") X("bit") X("varbit")

/* The prefix of every relation DuckLake keeps in its metadata schema. */
#define SQL_ADMIT_CATALOG_PREFIX "ducklake_"

/* Admission of a relation a statement names (schema NULL when unqualified).
 * Catalog relations (SQL_ADMIT_CATALOG_PREFIX + [a-z0-9_]) in any schema that
 * is not reserved may be read and written; the pg_catalog relations above
 * only read. Temporary tables and CTE names are the planner's to admit. */
typedef enum sql_admit_rel {
  SQL_REL_REFUSED = 0,
  SQL_REL_CATALOG,    /* a DuckLake table: read and write */
  SQL_REL_PG_CATALOG, /* a presented pg_catalog relation: read only */
} sql_admit_rel;
sql_admit_rel sql_admit_relation(const char *schema, const char *name);

/* Is `name` (lower case, unqualified) an admitted function? When it is and
 * pure is not NULL, *pure says whether its result is PURE (above). */
bool sql_admit_function(const char *name, bool *pure);

/* Schema names a client may neither create nor name: the engine's own
 * databases and schemas (main, temp, system, mrpg, memory, ...), pg_*,
 * information_schema. */
bool sql_admit_reserved_schema(const char *name);

/* Is `type` (libpg_query's lower-case spelling, array suffix stripped)
 * admitted as an inlined data column type? */
bool sql_admit_column_type(const char *type);

/* Writes the admission tables as Markdown (docs/security.md's generated part). */
void sql_admit_write_markdown(FILE *f);

#endif /* MR_SQL_ADMIT_H */
