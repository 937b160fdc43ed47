/*
 * sql_lift.h — literal lifting: one DuckDB prepared statement per INSERT
 * shape instead of one per text.
 *
 * DuckLake writes the values of a commit into its statements' text (the
 * new snapshot's row, its changes, the inlined rows, the new files), so
 * each INSERT it sends is a text the session has not seen before, and
 * preparing it in DuckDB (parse, bind, optimize, physical plan) costs more
 * than running it. sql_lift replaces each literal that is a whole element
 * of a row of `INSERT INTO t [(cols)] VALUES (...), ...` with $1..$n. The
 * shape is prepared once, and each text runs it with its values bound.
 * DuckDB types such a parameter as its target column, and casts a literal
 * to that type the same way.
 *
 * Only INSERT ... VALUES is lifted. DuckDB 1.5 plans a parameterized
 * statement again at every execution when its plan scans a table
 * (PreparedStatement::CanCachePlan), so lifting a WHERE or an UPDATE would
 * save only the parse; a VALUES insert scans nothing and keeps its plan.
 *
 * A literal is a plain string constant ('...', no E/B/X/U& prefix, no
 * continuation) or an unsigned decimal integer. Nothing is lifted from a
 * statement that already has a parameter, or that names ctid (sql_rewrite
 * turns its '(p,o)' literals into row ids).
 *
 * Binding is exact or refused (sql_lift_bind). A value is bound only when
 * the parameter's type is BIGINT, INTEGER, SMALLINT or VARCHAR (a bytea
 * column is BLOB: refused), and the value converts to it as DuckDB would
 * cast the literal:
 * an integer from optional '-' and decimal digits within the type's range,
 * text from a string literal as it is. Otherwise the caller runs the
 * statement's own text, which gives the result, or the error, the literal
 * always gave.
 *
 * Ownership: an sql_lifted and its strings are the caller's
 * (sql_lifted_free). Nothing here keeps state.
 */
#ifndef MR_SQL_LIFT_H
#define MR_SQL_LIFT_H

#include <duckdb.h>
#include <stdbool.h>
#include <stddef.h>

#include "sql/sql.h"

typedef struct sql_lift_value {
  bool is_string; /* a string constant; else an integer constant */
  char *text;     /* its value: the string's content (quotes undone), or the digits */
  size_t len;
} sql_lift_value;

typedef struct sql_lifted {
  char *shape; /* the statement with $1..$n for the lifted literals; NULL when n == 0 */
  size_t n;
  sql_lift_value *v; /* v[i] is parameter $(i+1) */
  size_t cap;        /* bytes allocated at v (mr_grow) */
} sql_lifted;

/* Lifts sql's literals. n == 0 (and MR_OK) when there is nothing to lift,
 * or when sql does not scan (the caller then runs it as it is, and DuckDB
 * reports the error). Fails only when out of memory. */
mr_status sql_lift(const char *sql, sql_lifted *out, sql_error *err) MR_MUST_CHECK;
void sql_lifted_free(sql_lifted *l);

/* Has ps exactly l->n parameters, each of a type sql_lift_bind binds to? A
 * shape for which this is false is run by its texts instead. */
bool sql_lift_bindable(duckdb_prepared_statement ps, size_t n);

/* Binds l's values to ps's parameters. false when a value does not convert
 * exactly (see above); ps must then not be executed with these values. */
bool sql_lift_bind(duckdb_prepared_statement ps, const sql_lifted *l);

#endif /* MR_SQL_LIFT_H */
