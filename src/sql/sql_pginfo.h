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
 * Ownership: a sql_table_lookup owns its strings (sql_table_lookup_free).
 */
#ifndef MR_SQL_PGINFO_H
#define MR_SQL_PGINFO_H

#include <stdbool.h>
#include <stddef.h>

#include "sql/sql.h"

typedef struct sql_table_lookup {
  bool hit;       /* the statement is the extension's table lookup */
  char **schemas; /* the nspname IN (...) values; NULL: no such filter, every schema */
  size_t nschemas;
  char *relname; /* the relname = '...' value; NULL: every table of the schemas */
} sql_table_lookup;

/* Fills `out` (zeroed first) and returns true when stmt is the lookup;
 * false otherwise, and when memory ran out on the way (the views answer). */
bool sql_pginfo_match(const char *stmt, sql_table_lookup *out);

/* The normalized text's SHA-256 as 64 lower-case hex digits into hex[65]:
 * what sql_pginfo_match compares (tests and the digest table use it).
 * False when stmt does not scan or has no filter slots. */
bool sql_pginfo_digest(const char *stmt, char hex[65]);

/* The engine's text that answers the lookup: a call of
 * SQL_PG_TABLE_INFO_FN with the values as literals. NULL when out of memory. */
char *sql_pginfo_call(const sql_table_lookup *l);

void sql_table_lookup_free(sql_table_lookup *l);

#endif /* MR_SQL_PGINFO_H */
