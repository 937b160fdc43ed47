/*
 * import.c — `moraine import SOURCE STORE`: adopts an existing DuckLake
 * catalog (a DuckDB file, SQLite or PostgreSQL) into a new store, with every
 * retained snapshot, so time travel over them works through moraine.
 *
 * How: the source is replayed as the server would have captured it, one
 * store commit per retained snapshot (import_plan.h), each commit built as
 * the captured changes of a DuckLake transaction (sql_changes) and handed
 * to the catalog layer's own prepare hook (catalog_prepare). So the rows
 * become records through the one mapping (catalog_map.c), and the store
 * gets what a native one has: a batch per snapshot, sys/head, the name and
 * delete_target directories, the changelog.
 *
 * What goes into which commit: versioned rows (begin_snapshot /
 * end_snapshot: entities, tags, column tags, schema versions, inlined rows
 * and deletes) are inserted by the commit of their begin and updated with
 * their end by the commit of their end; child rows without snapshots
 * (partition columns, file partition values, macro implementations, ...)
 * come with their parent's first version; options with the first commit;
 * the unversioned records (statistics, column mappings, files scheduled for
 * deletion) with the last, as the store keeps no history of them. An
 * inlined data table comes with the commit of the schema version that
 * minted it, its columns in the types DuckLake on PostgreSQL gives them
 * (lake_types.c), as moraine's own clients make them.
 *
 * The new store records its origin in sys/format (commit_log_batch_origin,
 * RFC 0002) and is verified (store_verify) before the command succeeds. A
 * failure removes a local store folder the import made; an object store
 * prefix is left, and the message says so.
 *
 * Here: the command line, the new store's checks, cleanup and report.
 * Reading the source: import_read.c (through import_source.c); the commits:
 * import_commit.c.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <limits.h>

#include "cli/cli.h"
#include "cli/import_internal.h"
#include "mr_version.h"

static const char import_usage[] =
    "usage: moraine import SOURCE STORE [--extension-dir DIR] [--metadata-schema NAME] [--json]\n"
    "  Adopts the DuckLake catalog SOURCE into STORE, a new moraine store (a folder path,\n"
    "  or a file://, s3://, gs://, az:// URL; it must not exist or be empty), with every\n"
    "  retained snapshot, so time travel over them works through moraine serve.\n"
    "  SOURCE is a DuckLake attach string of spec version 1.0 (DuckLake 1.5):\n"
    "    ducklake:FILE or FILE           a DuckDB database file\n"
    "    ducklake:sqlite:FILE            a SQLite file (DuckDB's sqlite_scanner extension)\n"
    "    ducklake:postgres:CONNSTR       a PostgreSQL database (postgres_scanner)\n"
    "  --extension-dir DIR   load the scanner from DIR/<name>.duckdb_extension (built for\n"
    "                        the DuckDB moraine embeds); default: DuckDB's extension\n"
    "                        folder. Nothing is downloaded.\n"
    "  --metadata-schema NAME  the schema of the catalog's tables (DuckLake's\n"
    "                        METADATA_SCHEMA; default main, public for PostgreSQL)\n"
    "  The source is opened read-only. The store records where it came from\n"
    "  (moraine info: origin) and is verified before the command succeeds.\n";

typedef struct verify_count {
  uint64_t problems;
  char first[512];
} verify_count;

static mr_status on_problem(void *ctx, const store_problem *p, mr_error *err) {
  verify_count *v = ctx;
  if (v->problems++ == 0)
    snprintf(v->first, sizeof v->first, "%s %s: %s", store_check_text(p->check), p->key, p->what);
  return MR_OK;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path);
}

/* The folder of a local store (a path, or file://PATH), else NULL. */
static const char *local_folder(const char *where) {
  if (strncmp(where, "file://", 7) == 0)
    return where + 7;
  return strstr(where, "://") ? NULL : where;
}

static bool folder_empty(const char *path, bool *exists) {
  DIR *d = opendir(path);
  *exists = d != NULL || errno != ENOENT;
  if (d == NULL)
    return errno == ENOENT;
  struct dirent *de;
  bool empty = true;
  while (empty && (de = readdir(d)) != NULL)
    empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
  closedir(d);
  return empty;
}

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "moraine: import: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return TOOL_EXIT_FAILED;
}

/* Refuses a STORE that holds anything (a local folder with entries, or an
 * object store prefix a reader opens). */
static int check_new_store(const char *where, const char *url) {
  const char *folder = local_folder(where);
  if (folder) {
    bool exists;
    if (!folder_empty(folder, &exists))
      return fail("%s exists and is not empty; import makes a new store%s", folder, "");
    return TOOL_EXIT_OK;
  }
  store_options o = {.read_only = true, .deadline_ms = TOOL_OPEN_DEADLINE_MS};
  store *st = NULL;
  mr_error err;
  mr_status rc = store_open(url, &o, &st, &err);
  if (rc == MR_OK) {
    (void)store_close(st, NULL);
    return fail("%s holds a store already; import makes a new store%s", url, "");
  }
  if (rc != MR_ERR_NOT_FOUND)
    return fail("%s: %s", url, err.msg);
  return TOOL_EXIT_OK;
}

static int run_import(const char *source, const char *where, const char *ext_dir,
                      const char *schema, bool json) {
  char url[4096];
  snprintf(url, sizeof url, strstr(where, "://") ? "%s" : "file://%s", where);
  import_spec spec;
  mr_error err;
  mr_error_clear(&err);
  if (import_spec_parse(source, &spec, &err) != MR_OK)
    return fail("%s%s", err.msg, "");
  struct stat sb;
  if (spec.kind != IMPORT_POSTGRES && stat(spec.target, &sb) != 0)
    return fail("%s: %s", spec.target, strerror(errno));
  char abs[PATH_MAX];
  const char *pre = spec.kind == IMPORT_SQLITE ? "ducklake:sqlite:" : "ducklake:";
  /* the origin names the file whole (a relative SOURCE says little later) */
  if (spec.kind != IMPORT_POSTGRES && realpath(spec.target, abs) &&
      strlen(pre) + strlen(abs) < sizeof spec.origin) {
    strcpy(spec.origin, pre);
    strcat(spec.origin, abs);
  }
  int status = check_new_store(where, url);
  if (status)
    return status;
  const char *folder = local_folder(where);
  bool made_folder = folder && access(folder, F_OK) != 0;

  tool_progress pr;
  tool_progress_init(&pr, "import");
  tool_progress_start(&pr, "reading %s", spec.origin);
  importer im = {.err = &err};
  mr_status rc = import_source_open(&spec, ext_dir, schema, &im.src, &err);
  if (!rc)
    rc = import_read_source(&im, spec.origin);
  if (!rc)
    rc = import_plan_tables(&im);
  import_source_close(im.src);
  im.src = NULL;
  store *st = NULL;
  bool touched = false, foreign = false; /* the store was written / is someone else's */
  if (!rc) {
    /* a tool's deadline, not a server's: one imported snapshot may be a
     * single write of hundreds of MB (a million data files), which a busy
     * machine did not finish within the server's 10 s */
    store_options o = {.origin = spec.origin, .deadline_ms = TOOL_OPEN_DEADLINE_MS};
    touched = true;
    rc = store_open(url, &o, &st, &err);
    if (!rc && store_get_head(st).batch_count != 0) { /* someone else's, made meanwhile */
      foreign = true;
      rc = mr_fail(&err, MR_ERR_INVALID, "%s holds a store already; import makes a new store", url);
    }
  }
  if (!rc)
    rc = import_replay(&im, st, &pr);
  verify_count vc = {0};
  store_verify_result vr;
  if (!rc) {
    tool_progress_start(&pr, "verifying the new store");
    store_verify_hooks h = {.problem = on_problem, .ctx = &vc};
    rc = store_verify(st, 0, &h, &vr, &err);
    if (!rc && vc.problems)
      rc = mr_fail(&err, MR_ERR_CORRUPTION, "the new store does not verify (%llu problems; %s)",
                   (unsigned long long)vc.problems, vc.first);
  }
  tool_progress_done(&pr);
  store_head head = st ? store_get_head(st) : (store_head){0, 0};
  mr_error cerr;
  if (st && store_close(st, &cerr) != MR_OK && !rc)
    rc = mr_fail(&err, cerr.code, "closing the store: %s", cerr.msg);
  if (rc) {
    char why[MR_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err.msg);
    for (char *p = why; *p; p++)
      if (*p == '\n')
        *p = ' ';
    if (foreign || !touched) {
      /* nothing of ours to remove */
    } else if (folder) { /* leave nothing half-made */
      if (made_folder)
        nftw(folder, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
      else { /* the folder was there, empty: empty it again */
        DIR *d = opendir(folder);
        struct dirent *de;
        char path[4300];
        while (d && (de = readdir(d)) != NULL) {
          if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
          snprintf(path, sizeof path, "%s/%s", folder, de->d_name);
          nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
        if (d)
          closedir(d);
      }
    } else {
      fprintf(stderr, "moraine: import: %s (the partial store at %s is left: delete it before "
              "importing again)\n", why, url);
      import_free(&im);
      return TOOL_EXIT_FAILED;
    }
    import_free(&im);
    return fail("%s%s", why, "");
  }
  if (json) {
    printf("{\"origin\": ");
    tool_json_str(stdout, spec.origin);
    printf(", \"store\": ");
    tool_json_str(stdout, url);
    printf(", \"snapshots\": %zu, \"first_snapshot\": %lld, \"head_snapshot\": %llu, "
           "\"batch_count\": %llu, \"rows\": %zu, \"keys\": %llu, \"orphans\": %zu}\n",
           im.n, (long long)im.ids[0], (unsigned long long)head.snapshot_id,
           (unsigned long long)head.batch_count, im.rows, (unsigned long long)vr.keys, im.orphans);
  } else {
    printf("imported %zu snapshots (%lld..%llu) and %zu catalog rows from %s into %s "
           "(%llu keys, verified clean)\n",
           im.n, (long long)im.ids[0], (unsigned long long)head.snapshot_id, im.rows, spec.origin,
           url, (unsigned long long)vr.keys);
    if (im.orphans)
      printf("left out %zu child rows whose parent is at no retained snapshot\n", im.orphans);
  }
  import_free(&im);
  return fflush(stdout) == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
}

int cli_import(int argc, char **argv) {
  const char *source = NULL, *where = NULL, *ext_dir = NULL, *schema = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(import_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--extension-dir") == 0 || strcmp(argv[i], "--metadata-schema") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "moraine: import: %s takes a value\n", argv[i]);
        return TOOL_EXIT_USAGE;
      }
      *(argv[i][2] == 'e' ? &ext_dir : &schema) = argv[i + 1];
      i++;
    } else if (argv[i][0] != '-' && source == NULL) {
      source = argv[i];
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: import: unexpected '%s' (see moraine import --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (source == NULL || where == NULL) {
    fprintf(stderr, "moraine: import: %s (see moraine import --help)\n",
            source == NULL ? "import what?" : "into which store?");
    return TOOL_EXIT_USAGE;
  }
  return run_import(source, where, ext_dir, schema, json);
}
