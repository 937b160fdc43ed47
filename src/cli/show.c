/*
 * show.c — `moraine show STORE [--at SNAPSHOT|TIMESTAMP] [TABLE] [--json]`:
 * the catalog as DuckLake sees it at a snapshot (the head by default):
 * schemas, tables, views; per table its columns, data files with their
 * deleted rows, delete files, inlined rows and row count. With TABLE
 * ("name" or "schema.name") only that table, read through its own key
 * ranges. Read-only, through the store's read-at-snapshot path
 * (lakeview.c).
 *
 * --at TIMESTAMP picks the newest snapshot taken at or before it, as
 * DuckLake's AT (TIMESTAMP => ...) does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/lakeview.h"
#include "cli/tool.h"

static const char show_usage[] =
    "usage: moraine show STORE [--at SNAPSHOT|TIMESTAMP] [TABLE] [--json]\n"
    "  The catalog of STORE (a folder path, or a file://, s3://, gs://, az:// URL) as\n"
    "  DuckLake sees it at a snapshot: schemas, tables and views, and per table its\n"
    "  columns, data files, delete files, inlined rows and rows. The head snapshot\n"
    "  unless --at names a snapshot id or a time (UTC, e.g. 2026-12-03T14:05:00Z: the\n"
    "  newest snapshot at or before it). TABLE (name or schema.name) shows that table\n"
    "  only, with its columns and files. The store is opened read-only: a running\n"
    "  server is not disturbed. --json prints one JSON object.\n";

/* ---- which snapshot --------------------------------------------------------- */

typedef struct at_time {
  int64_t t;
  bool found;
  uint64_t id;
} at_time;

static mr_status newest_before(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                               mr_error *err) {
  at_time *a = ctx;
  const Moraine__V1__Snapshot *s = (const Moraine__V1__Snapshot *)m;
  if (s->has_snapshot_time && s->snapshot_time <= a->t) {
    a->found = true;
    a->id = k->c[0];
  }
  return MR_OK;
}

/* The snapshot record --at names (NULL: the head's). On success *snap is the
 * caller's (mr_value_free). Prints the reason and returns false otherwise. */
static bool resolve_at(store *st, const char *at, Moraine__V1__Snapshot **snap) {
  mr_error err;
  store_head head = store_get_head(st);
  uint64_t id = head.snapshot_id;
  if (head.batch_count == 0) {
    fprintf(stderr, "moraine: show: the store holds no catalog yet (no commit has landed)\n");
    return false;
  }
  int64_t t = 0;
  if (at && !tool_parse_u64(at, &id)) {
    if (!tool_parse_time(at, &t)) {
      fprintf(stderr,
              "moraine: show: --at takes a snapshot id or a UTC time (2026-12-03T14:05:00Z), not "
              "'%s'\n",
              at);
      return false;
    }
    at_time a = {.t = t};
    if (store_list_snapshots(st, newest_before, &a, &err) != MR_OK) {
      fprintf(stderr, "moraine: show: listing snapshots: %s\n", err.msg);
      return false;
    }
    if (!a.found) {
      fprintf(stderr, "moraine: show: no snapshot was taken at or before %s\n", at);
      return false;
    }
    id = a.id;
  }
  mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {id}};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(st, &k, &m, &err);
  if (rc == MR_ERR_NOT_FOUND) {
    fprintf(
        stderr,
        "moraine: show: no snapshot %llu in the store (expired, or after the head snapshot %llu)\n",
        (unsigned long long)id, (unsigned long long)store_get_head(st).snapshot_id);
    return false;
  }
  if (rc) {
    fprintf(stderr, "moraine: show: reading snapshot %llu: %s\n", (unsigned long long)id, err.msg);
    return false;
  }
  *snap = (Moraine__V1__Snapshot *)m;
  return true;
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_table(const lakeview *v, const lv_table *t) {
  printf("{\"table_id\": %llu, \"table_name\": ", (unsigned long long)t->id);
  tool_json_str(stdout, t->name);
  printf(", \"rows\": %lld, \"inlined_rows\": %llu, \"delete_files\": %llu, \"columns\": [",
         (long long)lakeview_rows(t), (unsigned long long)t->inlined_rows,
         (unsigned long long)t->delete_files);
  for (size_t i = 0; i < t->ncols; i++) {
    const lv_column *c = &t->cols[i];
    printf("%s{\"column_id\": %llu, \"column_name\": ", i ? ", " : "", (unsigned long long)c->id);
    tool_json_str(stdout, c->name);
    fputs(", \"column_type\": ", stdout);
    tool_json_str(stdout, c->type);
    printf(", \"nulls_allowed\": %s, \"parent_column\": ", c->nulls_allowed ? "true" : "false");
    if (c->has_parent)
      printf("%lld}", (long long)c->parent);
    else
      fputs("null}", stdout);
  }
  fputs("], \"data_files\": [", stdout);
  for (size_t i = 0; i < t->nfiles; i++) {
    const lv_file *f = &t->files[i];
    printf("%s{\"data_file_id\": %llu, \"path\": ", i ? ", " : "", (unsigned long long)f->id);
    tool_json_str(stdout, f->path);
    printf(", \"record_count\": %lld, \"deleted_rows\": %lld, \"file_size_bytes\": %lld}",
           (long long)f->records, (long long)f->deleted, (long long)f->bytes);
  }
  fputs("]}", stdout);
}

static void print_json(const lakeview *v, const Moraine__V1__Snapshot *snap, const lv_table *only) {
  fputs("{\"snapshot\": {", stdout);
  tool_json_snapshot_fields(stdout, snap);
  fputs("}, \"schemas\": [", stdout);
  const char *sep = "";
  for (size_t i = 0; i < v->nschemas; i++) {
    const lv_schema *sc = &v->schemas[i];
    if (only && only->schema_id != sc->id)
      continue;
    printf("%s{\"schema_id\": %llu, \"schema_name\": ", sep, (unsigned long long)sc->id);
    tool_json_str(stdout, sc->name);
    fputs(", \"tables\": [", stdout);
    const char *tsep = "";
    for (size_t j = 0; j < v->ntables; j++) {
      const lv_table *t = &v->tables[j];
      if (t->schema_id != sc->id || (only && only != t))
        continue;
      fputs(tsep, stdout);
      json_table(v, t);
      tsep = ", ";
    }
    fputs("], \"views\": [", stdout);
    const char *vsep = "";
    for (size_t j = 0; j < v->nviews && !only; j++) {
      const lv_view *w = &v->views[j];
      if (w->schema_id != sc->id)
        continue;
      printf("%s{\"view_id\": %llu, \"view_name\": ", vsep, (unsigned long long)w->id);
      tool_json_str(stdout, w->name);
      fputs(", \"sql\": ", stdout);
      tool_json_str(stdout, w->sql);
      fputs("}", stdout);
      vsep = ", ";
    }
    fputs("]}", stdout);
    sep = ", ";
  }
  fputs("]}\n", stdout);
}

/* ---- text ------------------------------------------------------------------- */

static const char *or_null(const char *s) {
  return s ? s : "(null)";
}

static void print_table_summary(const lv_table *t) {
  printf("  table %s (id %llu): %zu column%s, %zu data file%s, %llu delete file%s, %llu inlined "
         "row%s; %lld rows\n",
         or_null(t->name), (unsigned long long)t->id, t->ncols, t->ncols == 1 ? "" : "s", t->nfiles,
         t->nfiles == 1 ? "" : "s", (unsigned long long)t->delete_files,
         t->delete_files == 1 ? "" : "s", (unsigned long long)t->inlined_rows,
         t->inlined_rows == 1 ? "" : "s", (long long)lakeview_rows(t));
}

static void print_table_detail(const lakeview *v, const lv_table *t) {
  const lv_schema *sc = lakeview_schema(v, t->schema_id);
  printf("table %s.%s (id %llu): %lld rows\n", sc ? or_null(sc->name) : "?", or_null(t->name),
         (unsigned long long)t->id, (long long)lakeview_rows(t));
  printf("\ncolumns\n  %6s  %-24s  %-20s  %-5s  %s\n", "id", "name", "type", "nulls", "parent");
  for (size_t i = 0; i < t->ncols; i++) {
    const lv_column *c = &t->cols[i];
    printf("  %6llu  %-24s  %-20s  %s", (unsigned long long)c->id, or_null(c->name),
           or_null(c->type), c->nulls_allowed ? "yes" : "no ");
    if (c->has_parent)
      printf("    %lld", (long long)c->parent);
    putchar('\n');
  }
  printf("\ndata files\n  %6s  %10s  %10s  %12s  %s\n", "id", "records", "deleted", "bytes",
         "path");
  for (size_t i = 0; i < t->nfiles; i++) {
    const lv_file *f = &t->files[i];
    printf("  %6llu  %10lld  %10lld  %12lld  %s\n", (unsigned long long)f->id,
           (long long)f->records, (long long)f->deleted, (long long)f->bytes, or_null(f->path));
  }
  printf("\ndelete files  %llu\ninlined rows  %llu\n", (unsigned long long)t->delete_files,
         (unsigned long long)t->inlined_rows);
}

static void print_text(const lakeview *v, const Moraine__V1__Snapshot *snap, const lv_table *only) {
  char t[48] = "(no time)";
  if (snap->has_snapshot_time)
    tool_iso_time(snap->snapshot_time, t, sizeof t);
  printf("snapshot %lld at %s (schema version %lld)\n", (long long)snap->snapshot_id, t,
         (long long)snap->schema_version);
  if (only) {
    print_table_detail(v, only);
    return;
  }
  for (size_t i = 0; i < v->nschemas; i++) {
    const lv_schema *sc = &v->schemas[i];
    printf("schema %s (id %llu)\n", or_null(sc->name), (unsigned long long)sc->id);
    for (size_t j = 0; j < v->ntables; j++)
      if (v->tables[j].schema_id == sc->id)
        print_table_summary(&v->tables[j]);
    for (size_t j = 0; j < v->nviews; j++)
      if (v->views[j].schema_id == sc->id)
        printf("  view %s (id %llu)\n", or_null(v->views[j].name),
               (unsigned long long)v->views[j].id);
  }
}

/* ---- the command -------------------------------------------------------------- */

/* Reads the catalog at s into *v (with only `table`'s details when one is
 * named, *only then pointing at it). Prints the reason when it fails. */
static int read_view(store *st, uint64_t s, const char *table, lakeview *v, lv_table **only) {
  mr_error err;
  *only = NULL;
  /* With a table: names first (no details), then that table's details. */
  mr_status rc = lakeview_read(st, s, table ? LAKEVIEW_NO_DETAILS : 0, v, &err);
  if (!rc && table) {
    bool ambiguous = false;
    lv_table *t = lakeview_find(v, table, &ambiguous);
    uint64_t id = t ? t->id : 0;
    lakeview_free(v);
    if (t == NULL || ambiguous) {
      fprintf(stderr, "moraine: show: %s '%s' at snapshot %llu%s\n",
              ambiguous ? "more than one table" : "no table", table, (unsigned long long)s,
              ambiguous ? "; name it as schema.table" : "");
      return TOOL_EXIT_FAILED;
    }
    rc = lakeview_read(st, s, id, v, &err);
    *only = rc ? NULL : lakeview_table(v, id);
  }
  if (rc) {
    fprintf(stderr, "moraine: show: %s\n", err.msg);
    return TOOL_EXIT_FAILED;
  }
  return TOOL_EXIT_OK;
}

/*
 * The view is several scans, and a reader catches up with the writer in
 * the background: a commit landing between two scans could show a version
 * twice or not at all. sys/head unchanged across the read proves none did
 * (RFC 0009's stamp); otherwise the read is done again.
 */
static int read_view_consistent(store *st, uint64_t s, const char *table, lakeview *v,
                                lv_table **only) {
  for (int attempt = 0; attempt < TOOL_READ_ATTEMPTS; attempt++) {
    store_head before, after;
    mr_error err;
    if (tool_read_head(st, &before, &err) != MR_OK) {
      fprintf(stderr, "moraine: show: %s\n", err.msg);
      return TOOL_EXIT_FAILED;
    }
    int status = read_view(st, s, table, v, only);
    if (status)
      return status;
    if (tool_read_head(st, &after, &err) != MR_OK) {
      lakeview_free(v);
      fprintf(stderr, "moraine: show: %s\n", err.msg);
      return TOOL_EXIT_FAILED;
    }
    if (after.batch_count == before.batch_count && after.snapshot_id == before.snapshot_id)
      return TOOL_EXIT_OK;
    lakeview_free(v);
  }
  fprintf(stderr, "moraine: show: the store changed during each of %d reads; try again\n",
          TOOL_READ_ATTEMPTS);
  return TOOL_EXIT_FAILED;
}

static int show(store *st, const char *at, const char *table, bool json) {
  Moraine__V1__Snapshot *snap = NULL;
  if (!resolve_at(st, at, &snap))
    return TOOL_EXIT_FAILED;
  lakeview v;
  lv_table *only = NULL;
  int status = read_view_consistent(st, (uint64_t)snap->snapshot_id, table, &v, &only);
  if (status == TOOL_EXIT_OK) {
    if (json)
      print_json(&v, snap, only);
    else
      print_text(&v, snap, only);
    lakeview_free(&v);
  }
  mr_value_free(&snap->base);
  return status;
}

int cli_show(int argc, char **argv) {
  const char *where = NULL, *table = NULL, *at = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(show_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--at") == 0 && i + 1 < argc && at == NULL) {
      at = argv[++i];
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else if (argv[i][0] != '-' && table == NULL) {
      table = argv[i];
    } else {
      fprintf(stderr, "moraine: show: unexpected '%s' (see moraine show --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: show: which store? (see moraine show --help)\n");
    return TOOL_EXIT_USAGE;
  }
  store *st = tool_open("show", where, false);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  return tool_close("show", st, show(st, at, table, json));
}
