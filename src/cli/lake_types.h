/*
 * lake_types.h — DuckLake's column type names (ducklake_column.column_type)
 * and the two tables they become in a catalog: a DuckDB-file catalog's
 * inlined data tables hold each column in its own DuckDB type; a PostgreSQL
 * catalog's (moraine's) hold it in the type DuckLake on PostgreSQL creates,
 * which is what a native moraine store records. One table of facts
 * (lake_types.c), read by export (DuckDB types) and import (PostgreSQL's).
 */
#ifndef MR_CLI_LAKE_TYPES_H
#define MR_CLI_LAKE_TYPES_H

#include <stddef.h>

/* The DuckDB type of a primitive DuckLake type ("int32" -> "INTEGER"),
 * NULL for decimal(..), nested and unknown names. */
const char *lake_type_duckdb(const char *lake_type);

/*
 * The column type DuckLake on PostgreSQL gives an inlined column of this
 * DuckLake type, as the engine's captured CREATE TABLE spells it ("int32"
 * -> "INTEGER", "varchar" -> "pg_bytea", "list" -> "VARCHAR",
 * "decimal(10,2)" -> "DECIMAL(10,2)"), into out. NULL for a type DuckLake
 * does not inline there (unknown here).
 */
const char *lake_type_inline_pg(const char *lake_type, char *out, size_t cap);

#endif
