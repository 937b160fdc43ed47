/*
 * import_source.h — the DuckLake catalog `moraine import` reads: its
 * attach string, an engine of its own holding it read-only, and its rows.
 *
 * The engine is a plain DuckDB of the tool's (not the server's locked-down
 * sql_engine): it loads the sqlite / postgres scanner extension the source
 * needs, from a folder given on the command line or DuckDB's own extension
 * folder, never downloading, and attaches the source READ_ONLY as `src`.
 */
#ifndef MR_CLI_IMPORT_SOURCE_H
#define MR_CLI_IMPORT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/mr_error.h"
#include "sql/sql.h"

typedef enum import_kind { IMPORT_DUCKDB, IMPORT_SQLITE, IMPORT_POSTGRES } import_kind;

typedef struct import_spec {
  import_kind kind;
  char target[4096];  /* the file, or the PostgreSQL connection string */
  char origin[512];   /* "ducklake:..." as recorded in sys/format, password stripped */
} import_spec;

/*
 * Parses SOURCE: "ducklake:FILE", "ducklake:duckdb:FILE" or a plain FILE (a
 * DuckDB database), "ducklake:sqlite:FILE", "ducklake:postgres:CONNSTR".
 * MR_ERR_INVALID for an empty target or another "ducklake:KIND:" prefix.
 */
mr_status import_spec_parse(const char *source, import_spec *out, mr_error *err) MR_MUST_CHECK;

/* Copies a PostgreSQL connection string into out without its password
 * (key=value "password=..." and a URI's ":secret@"). */
void import_strip_password(const char *conn, char *out, size_t cap);

/* Rows read from the source: every cell is DuckDB's text form, or raw bytes
 * for a BLOB column (sql_value conventions, sql.h). */
typedef struct import_rows {
  size_t ncols, nrows;
  char **names;   /* ncols */
  sql_value *values; /* nrows * ncols, row-major, data owned */
} import_rows;

void import_rows_free(import_rows *r);
/* Index of column name, -1 if absent. */
int import_rows_col(const import_rows *r, const char *name);

typedef struct import_source import_source;

/*
 * Opens the engine, loads the extension the kind needs (from ext_dir's
 * NAME.duckdb_extension when ext_dir is set) and attaches the source
 * read-only. schema: the metadata schema (NULL: main, or public for
 * PostgreSQL).
 */
mr_status import_source_open(const import_spec *spec, const char *ext_dir, const char *schema,
                             import_source **out, mr_error *err) MR_MUST_CHECK;
void import_source_close(import_source *s);

/* The qualified name of a metadata table ("src"."main"."name") into out. */
void import_source_table(const import_source *s, const char *table, char *out, size_t cap);

/* The metadata schema's name. */
const char *import_source_schema(const import_source *s);
/* s as a SQL string literal (quotes doubled) into out. */
void import_source_literal(const char *s, char *out, size_t cap);

/* Runs a query on the source engine into *out (import_rows_free). */
mr_status import_source_query(import_source *s, const char *sql, import_rows *out,
                              mr_error *err) MR_MUST_CHECK;

/* Does the metadata schema hold this table? */
mr_status import_source_has_table(import_source *s, const char *table, bool *has,
                                  mr_error *err) MR_MUST_CHECK;

#endif
