/*
 * export_inline.h — the inlined data tables of an exported catalog, in the
 * types a DuckDB-file DuckLake catalog holds them (export_inline.c).
 */
#ifndef MR_CLI_EXPORT_INLINE_H
#define MR_CLI_EXPORT_INLINE_H

#include "sql/sql.h"
#include "store/store.h"

/*
 * Rebuilds every ducklake_inlined_data_T_V table that catalog_load made in
 * schema main of e with the DuckDB types of its columns (from the table's
 * ducklake_column rows at the snapshot that minted schema version V),
 * casting the stored values into them. MR_ERR_INVALID names a column whose
 * DuckLake type has no DuckDB type here.
 */
mr_status export_native_inline(store *st, sql_engine *e, mr_error *err) MR_MUST_CHECK;

#endif
