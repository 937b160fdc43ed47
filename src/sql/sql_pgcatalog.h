/*
 * sql_pgcatalog.h — moraine's own pg_catalog: the relations and functions
 * PostgreSQL clients introspect (pg_namespace, pg_class with relpages 0,
 * pg_attribute with PostgreSQL type OIDs, pg_type, pg_constraint with 1-based
 * conkey, pg_description, pg_enum, pg_indexes, pg_settings, version(),
 * to_regclass(), ...), as DuckDB views and macros in schema `main` of an
 * attached in-memory database SQL_PGCAT_DB. Tables and their columns come
 * from moraine's relation directory (sql_relcache.h); schemas, views and
 * constraints from DuckDB's own catalog functions.
 *
 * Each session puts that schema on its search path right after `public`, so
 * unqualified names (and `pg_catalog.x`, which sql_rewrite unqualifies) find
 * these before DuckDB's built-in pg_catalog, whose pg_attribute and
 * pg_constraint do not match PostgreSQL (design.md §8).
 */
#ifndef MR_SQL_PGCATALOG_H
#define MR_SQL_PGCATALOG_H

#include <duckdb.h>

#include "sql/sql.h"

#define SQL_PGCAT_DB "mrpg"

/* Installs the pg_bytea type and its casts, and the catalog views/macros.
 * `dbname` is the DuckDB database holding the catalog tables, `client_name`
 * the database name clients connect with (current_database()). */
mr_status sql_pgcatalog_install(duckdb_connection con, const char *dbname, const char *client_name,
                                const char *version, sql_error *err) MR_MUST_CHECK;

/* The search path every session uses. Caller frees. */
char *sql_pgcatalog_search_path(const char *dbname);

#endif /* MR_SQL_PGCATALOG_H */
