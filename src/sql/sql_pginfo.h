/*
 * sql_pginfo.h — recognizes the table lookup that DuckDB's postgres
 * extension sends for every table it binds (a UNION ALL over pg_class,
 * pg_namespace, pg_attribute, pg_type, pg_description and pg_constraint,
 * filtered by `pg_namespace.nspname IN (...)` and, for one table,
 * `relname = '...'`), so that the session answers it from the relation
 * directory (SQL_PG_TABLE_INFO_FN, sql_relcache.h) instead of running it
 * over the pg_catalog views.
 *
 * Why: DuckLake looks up a table it has not seen in this transaction on
 * every read, including one that does not exist (ducklake_inlined_delete_N
 * on every scan of a table with inlined rows), so one time-travel query
 * sent this statement twice, at about 7 ms each, on a catalog of 30 tables:
 * the views build every column of every table and scan every constraint of
 * the engine, and DuckDB cannot push `relname = ...` into a table function.
 * Both filters are optional (the extension's catalog load has neither).
 *
 * How a statement is recognized: the planner has admitted it already (it is
 * a read of pg_catalog relations, by allow-list). Its tokens, with the
 * string constants of the two filters replaced by `?` (a whole IN list by
 * one), identifiers and keywords folded to lower case as PostgreSQL folds
 * them, form a normalized text; its SHA-256 must be one of the digests of
 * the extension's query (with and without the relname filter). Equal
 * tokens give an equal parse tree, so a statement that differs anywhere
 * else (another alias, constant, column or order) is not recognized and
 * runs over the views as before. The filters' values must be plain string
 * constants, the same in both arms of the UNION.
 *
 * Two more statements the extension sends at every ATTACH are known (the
 * same way, without filters): its enum types (an inner join with pg_enum)
 * and its composite types (an inner join with pg_type rows of typtype 'c').
 * Both are empty on moraine by construction: pg_enum is an empty table and
 * pg_type lists base types only, neither of which a client can change
 * (sql_pgcatalog.c; test_sql_pginfo pins both). Over the views they still
 * cost a join over every column of every table; the session answers them
 * with their columns and no rows.
 *
 * Ownership: a sql_known_query owns its strings (sql_known_query_free).
 */
#ifndef MR_SQL_PGINFO_H
#define MR_SQL_PGINFO_H

#include <stdbool.h>
#include <stddef.h>

#include "sql/sql.h"

typedef enum sql_known_kind {
  SQL_KNOWN_NONE = 0,
  SQL_KNOWN_TABLE_LOOKUP, /* the table lookup: answered from the directory */
  SQL_KNOWN_EMPTY,        /* a statement moraine's pg_catalog makes empty (below) */
} sql_known_kind;

typedef struct sql_known_query {
  sql_known_kind kind;
  /* SQL_KNOWN_TABLE_LOOKUP: */
  char **schemas; /* the nspname IN (...) values; NULL: no such filter, every schema */
  size_t nschemas;
  char *relname; /* the relname = '...' value; NULL: every table of the schemas */
} sql_known_query;

/* Fills `out` (zeroed first) and returns true when stmt is one of the
 * known statements; false otherwise, and when memory ran out on the way
 * (DuckDB then runs stmt as it is). */
bool sql_pginfo_match(const char *stmt, sql_known_query *out);

/* The normalized text's SHA-256 as 64 lower-case hex digits into hex[65]:
 * what sql_pginfo_match compares (tests and the digest table use it).
 * False when stmt does not scan or has no filter slots. */
bool sql_pginfo_digest(const char *stmt, char hex[65]);

/* The engine's text that answers stmt, known as q: a call of
 * SQL_PG_TABLE_INFO_FN with the values as literals, or stmt under a
 * `WHERE false` (the same columns, no rows, no join executed). NULL when
 * out of memory. */
char *sql_pginfo_call(const sql_known_query *q, const char *stmt);

void sql_known_query_free(sql_known_query *l);

#endif /* MR_SQL_PGINFO_H */
