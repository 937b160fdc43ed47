/*
 * import_internal.h — what the files of `moraine import` share: the source
 * read whole (import_read.c), the commit each row goes into and the commits
 * themselves (import_commit.c), the command (import.c). Not a contract.
 */
#ifndef MR_CLI_IMPORT_INTERNAL_H
#define MR_CLI_IMPORT_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "catalog/catalog.h"
#include "cli/import_plan.h"
#include "cli/import_source.h"
#include "cli/tool.h"

/* A parent table's rows by key (its kind's key columns, '|'-joined), with
 * the first commit of any version under that key. */
typedef struct pkey {
  char *key;
  size_t group;
} pkey;

/* One source table: its rows as batch columns, and the commit of each row. */
typedef struct stable {
  const catalog_table *tb; /* NULL for an inlined data / delete table */
  char name[96];
  import_rows rows;
  const char **types; /* the batch's column types (ncols) */
  int ibegin, iend;   /* begin_snapshot / end_snapshot columns, -1 if none */
  size_t *ins, *del;  /* per row: the commit inserting / ending it */
  size_t *ins_order, *del_order; /* rows sorted by ins / del */
  size_t nins, ndel, ci, cd;     /* rows with a commit; cursors */
  bool own_types;                /* types[i] are malloc'd (inlined tables) */
  size_t ntypes;
  char *ddl;                     /* inlined tables: their CREATE TABLE */
  size_t ddl_group;
  int64_t tid, ver; /* inlined tables */
  pkey *pidx;        /* a parent table's rows by key (parent_group) */
  size_t npidx;
  bool pidx_built;
} stable;

typedef struct importer {
  import_source *src;
  int64_t *ids; /* the retained snapshots, ascending */
  size_t n;     /* groups */
  stable *t;
  size_t nt;
  size_t rows;    /* rows put */
  size_t orphans; /* child rows whose parent is in no commit */
  mr_error *err;
} importer;

void imp_stable_free(stable *s);
bool imp_cell_i64(const import_rows *r, size_t row, int col, int64_t *v);
const char *imp_cell_text(const import_rows *r, size_t row, int col);
/* Appends s to f as a quoted identifier. */
void imp_put_ident(FILE *f, const char *s);
stable *imp_find_table(importer *im, const char *name);
/* A new, zeroed table at the end of im->t (which moves: re-find others). */
mr_status imp_add_table(importer *im, stable **out) MR_MUST_CHECK;

/* import_read.c: every mapped table, the spec version check, the retained
 * snapshots (im->ids), every inlined data and delete table. */
mr_status import_read_source(importer *im, const char *source) MR_MUST_CHECK;

/* import_commit.c: the commits of every row, then the commits written. */
mr_status import_plan_tables(importer *im) MR_MUST_CHECK;
mr_status import_replay(importer *im, store *st, tool_progress *pr) MR_MUST_CHECK;
void import_free(importer *im);

#endif
