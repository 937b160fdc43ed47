/*
 * sql_castcheck.h — does captured text cast back to its column's type?
 * The engine side of the commit path's load-back check (catalog_check.c,
 * sql_engine_check_casts in sql.h).
 *
 * Why a module of its own: the check runs in every commit that puts an
 * inlined row with a column whose text is not trivially canonical (DOUBLE,
 * DATE, TIMESTAMP, DECIMAL, INTERVAL, nested types). As a statement text
 * with the values spelled as literals it cost DuckDB's parse and plan in
 * every commit (0.25-0.3 ms for one column, ~0.7 ms for ten). Here each
 * list of column types is prepared once,
 *
 *   SELECT CAST(x0 AS T0[]), ... FROM (SELECT CAST($1 AS VARCHAR[]) AS x0, ...)
 *
 * and each check binds one VARCHAR list per column: DuckDB keeps the plan
 * of a statement that scans no table, so a check costs 0.03-0.06 ms. A
 * list cast casts each element with the same VARCHAR -> T cast the load
 * binds. The subquery matters: written as CAST(CAST($1 AS VARCHAR[]) AS
 * T[]), DuckDB 1.5 types the parameter as ANY and binds the statement again
 * at every execution.
 *
 * Owns: one DuckDB connection of its own (it changes no rows, so it never
 * moves the data generation) and up to SQL_CASTCHECK_STATEMENTS prepared
 * statements, keyed by their type lists; a miss when all are taken replaces
 * them in turn. One mutex serializes checks (the caller holds the commit
 * lock anyway).
 */
#ifndef MR_SQL_CASTCHECK_H
#define MR_SQL_CASTCHECK_H

#include <duckdb.h>

#include "sql/sql.h"

/* Distinct type lists kept prepared: one per inlined table shape in use. */
#define SQL_CASTCHECK_STATEMENTS 32

typedef struct sql_castcheck sql_castcheck;

/* A checker on a new connection to db; NULL when out of memory or DuckDB
 * refuses the connection. */
sql_castcheck *sql_castcheck_new(duckdb_database db);
/* Before db closes. NULL is fine. */
void sql_castcheck_free(sql_castcheck *cc);

/* sql_engine_check_casts (sql.h), on cc. */
mr_status sql_castcheck_run(sql_castcheck *cc, size_t ncols, const sql_cast_column *cols,
                            size_t *bad, sql_error *err) MR_MUST_CHECK;

#endif /* MR_SQL_CASTCHECK_H */
