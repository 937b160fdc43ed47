/*
 * lakeview.h — the catalog as DuckLake sees it at one snapshot, for the
 * store commands that print it (show, watch): schemas, tables, views,
 * columns, data files with their deletes, inlined rows. Read through the
 * store's own read path at a snapshot (store_read_kind_at: current records
 * begun by then, history records live then), one kind at a time, so
 * nothing but those kinds is read.
 *
 * Ownership: everything in a lakeview is owned by it; lakeview_free
 * releases it all. Arrays are in id order (tables and files sorted after
 * reading, since a kind's current and history ranges come one after the
 * other).
 */
#ifndef MR_CLI_LAKEVIEW_H
#define MR_CLI_LAKEVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct lv_column {
  uint64_t id;
  int64_t order;      /* column_order (0 when NULL) */
  char *name, *type;  /* NULL when NULL */
  bool nulls_allowed; /* true when NULL */
  bool has_parent;
  int64_t parent; /* parent_column of a nested field */
} lv_column;

typedef struct lv_file {
  uint64_t id;
  char *path;
  int64_t records; /* record_count (0 when NULL) */
  int64_t bytes;   /* file_size_bytes */
  int64_t deleted; /* rows removed by live delete files and inlined deletes */
} lv_file;

typedef struct lv_table {
  uint64_t id, schema_id;
  char *name;
  lv_column *cols;
  size_t ncols, capcols;
  lv_file *files;
  size_t nfiles, capfiles;
  uint64_t delete_files;   /* live delete files */
  uint64_t inlined_rows;   /* inlined rows live at the snapshot */
  uint64_t inline_deletes; /* inlined deletions of data-file rows */
  bool detailed;           /* columns, files and rows were read */
} lv_table;

typedef struct lv_schema {
  uint64_t id;
  char *name;
} lv_schema;

typedef struct lv_view {
  uint64_t id, schema_id;
  char *name, *sql;
} lv_view;

typedef struct lakeview {
  uint64_t snapshot;
  lv_schema *schemas;
  size_t nschemas, capschemas;
  lv_table *tables;
  size_t ntables, captables;
  lv_view *views;
  size_t nviews, capviews;
} lakeview;

/* detail_table of lakeview_read: names only, no table's details. */
#define LAKEVIEW_NO_DETAILS UINT64_MAX

/*
 * Reads the schemas, tables and views live at snapshot s, and the details
 * (columns, files, deletes, inlined rows) of every table (detail_table 0),
 * of that one table only, or of none (LAKEVIEW_NO_DETAILS). On failure
 * *out is freed and zeroed.
 */
mr_status lakeview_read(store *st, uint64_t s, uint64_t detail_table, lakeview *out,
                        mr_error *err) MR_MUST_CHECK;

void lakeview_free(lakeview *v);

/* A table's rows at the snapshot: files' records less their deletes, plus
 * its inlined rows. */
int64_t lakeview_rows(const lv_table *t);

const lv_schema *lakeview_schema(const lakeview *v, uint64_t id);
lv_table *lakeview_table(const lakeview *v, uint64_t id);

/*
 * Finds a table by "name" or "schema.name" (exact names, as DuckLake stores
 * them). NULL when there is none; *ambiguous is set when a bare name is in
 * more than one schema.
 */
lv_table *lakeview_find(const lakeview *v, const char *spec, bool *ambiguous);

#endif
