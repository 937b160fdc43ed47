/*
 * snapshots.c — `moraine snapshots STORE [--json]`: every snapshot record of
 * a store, oldest first, as DuckLake's ducklake_snapshot and
 * ducklake_snapshot_changes hold them (id, time, schema version, changes,
 * author, message, extra info). Read-only; one scan of the snapshot
 * subspace. Expired snapshots have no record and are not listed.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/tool.h"

static const char snapshots_usage[] =
    "usage: moraine snapshots STORE [--json]\n"
    "  Lists the snapshots of STORE (a folder path, or a file://, s3://, gs://, az:// URL),\n"
    "  oldest first: id, time (UTC), schema version, the changes DuckLake recorded,\n"
    "  author and commit message. The store is opened read-only: a running server is\n"
    "  not disturbed. --json prints one JSON object, {\"snapshots\": [...]}.\n";

typedef struct list_ctx {
  bool json;
  uint64_t n;
  tool_progress progress;
} list_ctx;

/* NULL as "-" in the table. */
static const char *or_dash(const char *s) {
  return s ? s : "-";
}

static mr_status print_snapshot(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                mr_error *err) {
  list_ctx *l = ctx;
  const Moraine__V1__Snapshot *s = (const Moraine__V1__Snapshot *)m;
  if (l->json) {
    fputs(l->n ? ", {" : "{", stdout);
    tool_json_snapshot_fields(stdout, s);
    fputs("}", stdout);
  } else {
    char t[48] = "-", sv[24] = "-";
    if (s->has_snapshot_time)
      tool_iso_time(s->snapshot_time, t, sizeof t);
    if (s->has_schema_version)
      snprintf(sv, sizeof sv, "%lld", (long long)s->schema_version);
    printf("%10lld  %-27s  %7s  %-16s  %-24s  %s\n", (long long)s->snapshot_id, t, sv,
           or_dash(s->author), or_dash(s->commit_message), or_dash(s->changes_made));
  }
  l->n++;
  tool_progress_note(&l->progress, "%llu snapshots", (unsigned long long)l->n);
  return MR_OK;
}

int cli_snapshots(int argc, char **argv) {
  const char *where = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(snapshots_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: snapshots: unexpected '%s' (see moraine snapshots --help)\n",
              argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: snapshots: which store? (see moraine snapshots --help)\n");
    return TOOL_EXIT_USAGE;
  }
  store *st = tool_open("snapshots", where, false);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  list_ctx l = {.json = json};
  tool_progress_init(&l.progress, "snapshots");
  if (json)
    fputs("{\"snapshots\": [", stdout);
  else
    printf("%10s  %-27s  %7s  %-16s  %-24s  %s\n", "snapshot", "time", "schema", "author",
           "message", "changes");
  mr_error err;
  mr_status rc = store_list_snapshots(st, print_snapshot, &l, &err);
  tool_progress_done(&l.progress);
  if (rc) {
    if (json || l.n)
      putchar('\n'); /* the partial output ends its line; the reason goes to stderr */
    fprintf(stderr, "moraine: snapshots: %s\n", err.msg);
    return tool_close("snapshots", st, TOOL_EXIT_FAILED);
  }
  if (json)
    fputs("]}\n", stdout);
  return tool_close("snapshots", st, TOOL_EXIT_OK);
}
