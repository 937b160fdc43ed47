/*
 * export.c — `moraine export STORE [--at SNAPSHOT] FILE`: writes the
 * catalog into a new DuckDB database file that stock DuckLake attaches
 * (`ATTACH 'ducklake:FILE'`), with every retained snapshot, so time travel
 * over them works there too.
 *
 * The file is filled by the same load the server runs at start-up
 * (catalog_load: the 28 ducklake_* tables, the inlined data and delete
 * tables, from the catalog layer's one mapping table), into an engine whose
 * database is the file, in schema main (DuckLake's metadata schema for a
 * DuckDB catalog); the inlined data tables then get their columns' DuckDB
 * types (export_inline.c). --at S then cuts the catalog back to S: later
 * snapshots and the rows they began go, versions they ended are live
 * again, and rows of child tables left without their parent go too.
 * Statistics are the store's current ones (RFC 0002 keeps no history of
 * them).
 *
 * The load is checked against sys/head before and after (tool.h) and done
 * again if a commit landed meanwhile. The file is written beside FILE as
 * moraine_export_PID.duckdb and renamed to FILE once complete, so FILE
 * never holds a half-written catalog; an existing FILE is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "cli/cli.h"
#include "cli/export_inline.h"
#include "cli/tool.h"
#include "mr_version.h"

static const char export_usage[] =
    "usage: moraine export STORE [--at SNAPSHOT] FILE\n"
    "  Writes the catalog of STORE (a folder path, or a file://, s3://, gs://, az:// URL)\n"
    "  into FILE, a new DuckDB database that stock DuckLake attaches with\n"
    "  ATTACH 'ducklake:FILE' (the data files stay where they are). Every retained\n"
    "  snapshot is kept, so time travel works there too; --at SNAPSHOT exports the\n"
    "  catalog as it was at that snapshot instead (statistics stay current). FILE must\n"
    "  not exist. The store is opened read-only: a running server is not disturbed.\n";

static mr_status engine_exec(sql_engine *e, const char *sql, mr_error *err) {
  sql_error se;
  memset(&se, 0, sizeof se);
  if (sql_engine_exec(e, sql, &se) != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "%s: %s", sql, se.base.msg);
  return MR_OK;
}

/* ---- --at: cutting the catalog back ---------------------------------------- */

static bool has_column(const catalog_table *t, const char *name) {
  for (size_t i = 0; i < t->ncols; i++)
    if (strcmp(t->cols[i].name, name) == 0)
      return true;
  return false;
}

/* Rows begun after s go; versions ended after s are live again. */
static mr_status cut_versions(sql_engine *e, const char *table, bool has_end, uint64_t s,
                              mr_error *err) {
  char sql[512];
  snprintf(sql, sizeof sql, "DELETE FROM main.%s WHERE begin_snapshot > %llu", table,
           (unsigned long long)s);
  mr_status rc = engine_exec(e, sql, err);
  if (!rc && has_end) {
    snprintf(sql, sizeof sql, "UPDATE main.%s SET end_snapshot = NULL WHERE end_snapshot > %llu",
             table, (unsigned long long)s);
    rc = engine_exec(e, sql, err);
  }
  return rc;
}

typedef struct inline_ctx {
  sql_engine *e;
  uint64_t s;
  uint64_t schema_version; /* snapshot s's */
} inline_ctx;

/* An inlined data table of a later schema version goes with its
 * ducklake_inlined_data_tables row (DuckLake would otherwise insert into
 * it, with the later columns); the others are cut back like versions. */
static mr_status cut_inline_table(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                  mr_error *err) {
  inline_ctx *c = ctx;
  char table[96], sql[256];
  if (k->kind == MR_KK_INLINE_TABLE)
    snprintf(table, sizeof table, "ducklake_inlined_data_%llu_%llu", (unsigned long long)k->c[0],
             (unsigned long long)k->c[1]);
  else
    snprintf(table, sizeof table, "ducklake_inlined_delete_%llu", (unsigned long long)k->c[0]);
  if (k->kind == MR_KK_INLINE_TABLE && k->c[1] > c->schema_version) {
    snprintf(sql, sizeof sql, "DROP TABLE main.%s", table);
    mr_status rc = engine_exec(c->e, sql, err);
    if (rc)
      return rc;
    snprintf(sql, sizeof sql,
             "DELETE FROM main.ducklake_inlined_data_tables WHERE table_name = '%s'", table);
    return engine_exec(c->e, sql, err);
  }
  return cut_versions(c->e, table, k->kind == MR_KK_INLINE_TABLE, c->s, err);
}

/*
 * Child rows whose parent is gone at s (their tables have no snapshot
 * columns of their own): (child table, its parent id column, parent table).
 */
static const char *const orphans[][3] = {
    {"ducklake_file_column_stats", "data_file_id", "ducklake_data_file"},
    {"ducklake_file_variant_stats", "data_file_id", "ducklake_data_file"},
    {"ducklake_file_partition_value", "data_file_id", "ducklake_data_file"},
    {"ducklake_partition_column", "partition_id", "ducklake_partition_info"},
    {"ducklake_sort_expression", "sort_id", "ducklake_sort_info"},
    {"ducklake_macro_impl", "macro_id", "ducklake_macro"},
    {"ducklake_macro_parameters", "macro_id", "ducklake_macro"},
};

static mr_status cut_to(store *st, sql_engine *e, uint64_t s, uint64_t schema_version,
                        mr_error *err) {
  char sql[512];
  mr_status rc = MR_OK;
  for (size_t i = 0; !rc && i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    if (has_column(t, "begin_snapshot"))
      rc = cut_versions(e, t->name, has_column(t, "end_snapshot"), s, err);
    else if (has_column(t, "snapshot_id")) { /* ducklake_snapshot, ducklake_snapshot_changes */
      snprintf(sql, sizeof sql, "DELETE FROM main.%s WHERE snapshot_id > %llu", t->name,
               (unsigned long long)s);
      rc = engine_exec(e, sql, err);
    }
  }
  for (size_t i = 0; !rc && i < sizeof orphans / sizeof orphans[0]; i++) {
    if (catalog_table_find(orphans[i][0]) == NULL || catalog_table_find(orphans[i][2]) == NULL)
      continue;
    snprintf(sql, sizeof sql, "DELETE FROM main.%s WHERE %s NOT IN (SELECT %s FROM main.%s)",
             orphans[i][0], orphans[i][1], orphans[i][1], orphans[i][2]);
    rc = engine_exec(e, sql, err);
  }
  /* a file compacted away after s is live at s: not scheduled for deletion */
  if (!rc)
    rc = engine_exec(e,
                     "DELETE FROM main.ducklake_files_scheduled_for_deletion WHERE data_file_id IN "
                     "(SELECT data_file_id FROM main.ducklake_data_file)",
                     err);
  inline_ctx ic = {e, s, schema_version};
  if (!rc)
    rc = store_read_kind_at(st, MR_KK_INLINE_TABLE, UINT64_MAX, 0, cut_inline_table, &ic, err);
  if (!rc)
    rc = store_read_kind_at(st, MR_KK_INLINE_DELETE_TABLE, UINT64_MAX, 0, cut_inline_table, &ic,
                            err);
  return rc;
}

/* ---- the export -------------------------------------------------------------- */

static bool exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Removes a partial file and DuckDB's WAL beside it. */
static void remove_partial(const char *partial) {
  char wal[4200];
  snprintf(wal, sizeof wal, "%s.wal", partial);
  unlink(partial);
  unlink(wal);
}

static mr_status fill(store *st, sql_engine *e, const char *dbname, bool has_at, uint64_t at,
                      uint64_t at_schema_version, size_t *rows, mr_error *err) {
  /* The engine's search path starts at its pg_catalog relations, whose
   * database has a schema main too: point it at the file's. */
  char use[256];
  snprintf(use, sizeof use, "USE \"%s\".main", dbname);
  mr_status rc = engine_exec(e, use, err);
  catalog *c = NULL;
  if (!rc)
    rc = catalog_open(st, e, &c, err);
  if (!rc)
    rc = catalog_set_schema(c, "main", err);
  if (!rc)
    rc = catalog_load(c, rows, err);
  catalog_free(c);
  if (!rc)
    rc = export_native_inline(st, e, err);
  if (!rc && has_at)
    rc = cut_to(st, e, at, at_schema_version, err);
  /* sql_engine_open makes schema public for the server's clients; DuckLake's
   * DuckDB catalogs have no use for it */
  if (!rc)
    rc = engine_exec(e, "DROP SCHEMA IF EXISTS public", err);
  if (!rc)
    rc = engine_exec(e, "CHECKPOINT", err);
  return rc;
}

/*
 * One attempt: an engine on the partial file, filled and closed. The load
 * is several scans and the reader catches up with the writer in the
 * background, so *changed says whether sys/head moved during it (the file
 * may then not be one consistent cut; the caller loads again).
 */
static mr_status write_partial(store *st, const char *partial, const char *dbname, bool has_at,
                               uint64_t at, uint64_t at_schema_version, size_t *rows, bool *changed,
                               mr_error *err) {
  *changed = false;
  store_head before, after;
  mr_status rc = tool_read_head(st, &before, err);
  if (rc)
    return rc;
  sql_engine_options eo = {.database_path = partial,
                           .server_version = "moraine export " MORAINE_VERSION};
  sql_engine *e = NULL;
  sql_error se;
  memset(&se, 0, sizeof se);
  if (sql_engine_open(&eo, &e, &se) != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "%s", se.base.msg);
  rc = fill(st, e, dbname, has_at, at, at_schema_version, rows, err);
  sql_engine_close(e);
  if (!rc)
    rc = tool_read_head(st, &after, err);
  if (!rc)
    *changed = after.batch_count != before.batch_count || after.snapshot_id != before.snapshot_id;
  return rc;
}

static int export_to(store *st, bool has_at, uint64_t at, const char *file) {
  /* The partial file sits beside FILE; its name has no dot before the
   * extension because DuckDB names a database after its file name, and the
   * load addresses it by that name. */
  char partial[4096], dbname[64];
  const char *slash = strrchr(file, '/');
  int dir = slash ? (int)(slash - file) + 1 : 0;
  snprintf(dbname, sizeof dbname, "moraine_export_%ld", (long)getpid());
  if (snprintf(partial, sizeof partial, "%.*s%s.duckdb", dir, file, dbname) >=
      (int)sizeof partial) {
    fprintf(stderr, "moraine: export: the file name is too long\n");
    return TOOL_EXIT_FAILED;
  }
  if (exists(file) || exists(partial)) {
    fprintf(stderr, "moraine: export: %s exists; export writes a new file\n",
            exists(file) ? file : partial);
    return TOOL_EXIT_FAILED;
  }
  store_head head = store_get_head(st);
  uint64_t at_schema_version = 0;
  if (has_at) {
    mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {at}};
    ProtobufCMessage *m = NULL;
    mr_error err;
    mr_status rc = store_get(st, &k, &m, &err);
    if (rc == MR_OK)
      at_schema_version = (uint64_t)((const Moraine__V1__Snapshot *)m)->schema_version;
    mr_value_free(m);
    if (rc) {
      fprintf(stderr,
              "moraine: export: no snapshot %llu in the store (expired, or after the head snapshot "
              "%llu)\n",
              (unsigned long long)at, (unsigned long long)head.snapshot_id);
      return TOOL_EXIT_FAILED;
    }
  } else if (head.batch_count == 0) {
    fprintf(stderr, "moraine: export: the store holds no catalog yet\n");
    return TOOL_EXIT_FAILED;
  }
  size_t rows = 0;
  mr_error err;
  mr_status rc = MR_OK;
  bool changed = true;
  tool_progress progress;
  tool_progress_init(&progress, "export");
  for (int attempt = 0; !rc && changed && attempt < TOOL_READ_ATTEMPTS; attempt++) {
    tool_progress_start(&progress, "loading the catalog into %s%s", partial,
                        attempt ? " (again: a commit landed meanwhile)" : "");
    remove_partial(partial);
    rc = write_partial(st, partial, dbname, has_at, at, at_schema_version, &rows, &changed, &err);
  }
  tool_progress_done(&progress);
  if (!rc && changed)
    rc = mr_fail(&err, MR_ERR_CONFLICT, "the store changed during each of %d loads; try again",
                 TOOL_READ_ATTEMPTS);
  if (!rc && rename(partial, file) != 0)
    rc = mr_fail(&err, MR_ERR_IO, "renaming %s to %s: %s", partial, file, strerror(errno));
  if (rc) {
    remove_partial(partial);
    fprintf(stderr, "moraine: export: %s\n", err.msg);
    return TOOL_EXIT_FAILED;
  }
  printf("exported %zu catalog rows%s to %s\n", rows, has_at ? " (cut back to the snapshot)" : "",
         file);
  return TOOL_EXIT_OK;
}

int cli_export(int argc, char **argv) {
  const char *where = NULL, *file = NULL;
  bool has_at = false;
  uint64_t at = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(export_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--at") == 0) {
      if (i + 1 >= argc || !tool_parse_u64(argv[i + 1], &at)) {
        fprintf(stderr, "moraine: export: --at takes a snapshot id\n");
        return TOOL_EXIT_USAGE;
      }
      has_at = true;
      i++;
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else if (argv[i][0] != '-' && file == NULL) {
      file = argv[i];
    } else {
      fprintf(stderr, "moraine: export: unexpected '%s' (see moraine export --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL || file == NULL) {
    fprintf(stderr, "moraine: export: %s (see moraine export --help)\n",
            where == NULL ? "which store?" : "into which file?");
    return TOOL_EXIT_USAGE;
  }
  store *st = tool_open("export", where, false);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  return tool_close("export", st, export_to(st, has_at, at, file));
}
