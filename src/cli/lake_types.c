/*
 * lake_types.c — DuckLake's type names, the DuckDB type of each and the
 * type DuckLake on PostgreSQL inlines it as (lake_types.h). The last column
 * is what DuckLake 1.5.5 creates through moraine (its captured DDL): text
 * for what PostgreSQL has no exact type for, bytea for strings and blobs.
 */
#include "cli/lake_types.h"

#include <stdio.h>
#include <string.h>

static const char *const LAKE_TYPES[][3] = {
    /* DuckLake     DuckDB file     DuckLake on PostgreSQL */
    {"boolean", "BOOLEAN", "BOOLEAN"},
    {"int8", "TINYINT", "SMALLINT"},
    {"int16", "SMALLINT", "SMALLINT"},
    {"int32", "INTEGER", "INTEGER"},
    {"int64", "BIGINT", "BIGINT"},
    {"int128", "HUGEINT", "VARCHAR"},
    {"uint8", "UTINYINT", "INTEGER"},
    {"uint16", "USMALLINT", "INTEGER"},
    {"uint32", "UINTEGER", "BIGINT"},
    {"uint64", "UBIGINT", "VARCHAR"},
    {"uint128", "UHUGEINT", "VARCHAR"},
    {"float32", "REAL", "REAL"}, /* not FLOAT: the engine reads FLOAT as PostgreSQL does, a DOUBLE */
    {"float64", "DOUBLE", "DOUBLE PRECISION"},
    {"date", "DATE", "VARCHAR"},
    {"time", "TIME", "TIME"},
    {"timetz", "TIMETZ", "TIME WITH TIME ZONE"},
    {"timestamp", "TIMESTAMP", "VARCHAR"},
    {"timestamptz", "TIMESTAMPTZ", "VARCHAR"},
    {"timestamp_s", "TIMESTAMP_S", "VARCHAR"},
    {"timestamp_ms", "TIMESTAMP_MS", "VARCHAR"},
    {"timestamp_ns", "TIMESTAMP_NS", "VARCHAR"},
    {"interval", "INTERVAL", "INTERVAL"},
    {"varchar", "VARCHAR", "pg_bytea"},
    {"blob", "BLOB", "pg_bytea"},
    {"uuid", "UUID", "UUID"},
    {"json", "JSON", "pg_bytea"},
};

#define NTYPES (sizeof LAKE_TYPES / sizeof LAKE_TYPES[0])

const char *lake_type_duckdb(const char *lake_type) {
  for (size_t i = 0; i < NTYPES; i++)
    if (strcmp(lake_type, LAKE_TYPES[i][0]) == 0)
      return LAKE_TYPES[i][1];
  return NULL;
}

const char *lake_type_inline_pg(const char *lake_type, char *out, size_t cap) {
  if (strncmp(lake_type, "decimal(", 8) == 0) {
    snprintf(out, cap, "DECIMAL%s", lake_type + 7);
    return out;
  }
  /* nested values are inlined as their text */
  if (strcmp(lake_type, "list") == 0 || strcmp(lake_type, "struct") == 0 ||
      strcmp(lake_type, "map") == 0) {
    snprintf(out, cap, "VARCHAR");
    return out;
  }
  for (size_t i = 0; i < NTYPES; i++)
    if (strcmp(lake_type, LAKE_TYPES[i][0]) == 0) {
      snprintf(out, cap, "%s", LAKE_TYPES[i][2]);
      return out;
    }
  return NULL;
}
