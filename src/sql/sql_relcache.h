/*
 * sql_relcache.h — moraine's own directory of the catalog database's tables:
 * each table's name, a relation oid, its columns with their PostgreSQL
 * types, and its PRIMARY KEY and UNIQUE constraints. pg_class,
 * pg_attribute, pg_constraint, pg_tables and to_regclass read it through
 * table functions (moraine_pg_class(), moraine_pg_attribute(),
 * moraine_pg_constraint()), so a
 * client's introspection never builds DuckDB's duckdb_tables() /
 * duckdb_columns() rows: those cost a row for every column of every table
 * (about 25,000 at 1,000 DuckLake tables, inlined-data tables included) on
 * every lookup, and the postgres extension makes one lookup per table it
 * touches.
 *
 * How it stays true to the engine:
 *  - A session's admitted CREATE TABLE / DROP TABLE is noted as pending for
 *    its connection (sql_relcache_note_create / _note_drop): that
 *    connection sees it at once, the others when the transaction commits
 *    (sql_relcache_end); a rollback forgets it. So visibility follows
 *    DuckDB's own for the statements that change tables.
 *  - Anything else that may change tables (the pre-load API, the replica's
 *    follower, a reload) marks the directory stale
 *    (sql_relcache_invalidate); the next client statement re-reads it from
 *    the engine in one scan (sql_relcache_refresh) before it runs.
 *  - Both happen inside the engine's data-generation move (sql_engine.c),
 *    so a read kept by the result cache at a generation saw the directory
 *    of that generation (sql_relcache_current).
 *
 * Invariants: a relation keeps its oid for as long as it exists (re-reads
 * keep the oids of tables they find again), and oids start at
 * SQL_RELCACHE_FIRST_OID, far above DuckDB's own catalog oids. Temporary
 * tables are never listed (PostgreSQL lists them in another namespace;
 * moraine's pg_class never did). The table functions take their snapshot
 * when a query starts executing, not when it is prepared: a kept prepared
 * statement sees the tables of its execution.
 */
#ifndef MR_SQL_RELCACHE_H
#define MR_SQL_RELCACHE_H

#include <duckdb.h>
#include <stdbool.h>
#include <stdint.h>

#include "sql/sql.h"

#define SQL_RELCACHE_FIRST_OID 1073741824u /* 2^30 */

typedef struct sql_relcache sql_relcache;

/* A directory of the tables of DuckDB database `dbname`, stale (empty
 * until the first refresh). NULL when out of memory. */
sql_relcache *sql_relcache_create(const char *dbname);
void sql_relcache_free(sql_relcache *rc);

/* The table function that answers the postgres extension's table lookup
 * (sql_pginfo.h) from the directory: (schemas VARCHAR[], relname VARCHAR,
 * NULL for every table of the schemas), rows as PostgreSQL gives them. */
#define SQL_PG_TABLE_INFO_FN "moraine_pg_table_info"

/* Registers moraine_pg_class(), moraine_pg_attribute(),
 * moraine_pg_constraint() and SQL_PG_TABLE_INFO_FN in the database of
 * `con`; rc must outlive the database. */
mr_status sql_relcache_register(sql_relcache *rc, duckdb_connection con,
                                sql_error *err) MR_MUST_CHECK;

/* Tables may have changed behind the directory: re-read at next refresh. */
void sql_relcache_invalidate(sql_relcache *rc);

/* Not stale: the directory is the engine's committed tables as of the
 * last change published or re-read. The result cache keeps a read only
 * then (sql_session_result_gen): every change marks it stale, or publishes
 * into it, inside the data generation's move. */
bool sql_relcache_current(sql_relcache *rc);

/* If stale, re-reads every table of the database through `con` (a
 * connection no session uses; the caller serializes its use). */
mr_status sql_relcache_refresh(sql_relcache *rc, duckdb_connection con,
                               sql_error *err) MR_MUST_CHECK;

/* The connection id DuckDB gives `con` (what the table functions see). */
uint64_t sql_relcache_conn_id(duckdb_connection con);

/* A session's CREATE TABLE of schema.table ran on `con` (connection id
 * conn_id) inside its open transaction: its layout is read through con. */
mr_status sql_relcache_note_create(sql_relcache *rc, duckdb_connection con, uint64_t conn_id,
                                   const char *schema, const char *table,
                                   sql_error *err) MR_MUST_CHECK;
/* A session's DROP TABLE of schema.table ran inside its open transaction. */
mr_status sql_relcache_note_drop(sql_relcache *rc, uint64_t conn_id, const char *schema,
                                 const char *table, sql_error *err) MR_MUST_CHECK;
/* The session's transaction ended: its pending changes become everyone's
 * (commit) or are forgotten. */
void sql_relcache_end(sql_relcache *rc, uint64_t conn_id, bool commit);

#endif /* MR_SQL_RELCACHE_H */
