/*
 * inspect.c — the read-only toolbox commands:
 *   moraine info STORE [--json]     format, creator, creation time, head, head time,
 *                                   maintenance
 *   moraine census STORE [--json]   keys and bytes per subspace and per kind
 * Each opens STORE (a URL, or a folder path for file://) with a read-only
 * SlateDB reader, so a running writer is not disturbed, and prints a table
 * for people or one JSON object for scripts. Exit codes: tool.h.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tool.h"
#include "key/key.h"
#include "registry/registry.h"
#include "store/store.h"

static const char inspect_usage[] =
    "usage: moraine info STORE [--json]\n"
    "       moraine census STORE [--json]\n"
    "  STORE: file://FOLDER (or a folder path), s3://, gs://, az:// URLs as for serve.\n"
    "  The store is opened read-only: a running server is not disturbed.\n"
    "  info: layout format, the moraine that created it and when, the origin of an\n"
    "  imported catalog (commit_log_batch_origin; null when native), an interrupted\n"
    "  migration, head snapshot and batch count, the head snapshot's time,\n"
    "  maintenance passes.\n"
    "  census: keys and bytes per subspace, and per kind in current and history\n"
    "  (one full scan).\n";

static int info(store *st, bool json) {
  store_description d;
  mr_error err;
  /* a root store keeps the other databases' catalogs in a folder of its
   * own; they are not this store's size */
  if (store_describe(st, CAT_REGISTRY_CATALOGS_FOLDER, &d, &err) != MR_OK) {
    fprintf(stderr, "moraine: info: %s\n", err.msg);
    return 1;
  }
  char head_time[48] = "", pass_time[48] = "", created[48] = "";
  if (d.has_created_at)
    tool_iso_time(d.created_at_us, created, sizeof created);
  if (d.has_head_time)
    tool_iso_time(d.head_time_us, head_time, sizeof head_time);
  if (d.maintenance_passes)
    tool_iso_time(d.last_pass_us, pass_time, sizeof pass_time);
  if (json) {
    char migration[96] = "null";
    if (d.has_migration)
      snprintf(migration, sizeof migration, "{\"from_format\": %u, \"to_format\": %u}", d.migration_from,
               d.migration_to);
    printf("{\"format\": %u, \"writer_version\": \"%s\", \"origin\": ", d.format, d.writer_version);
    tool_json_str(stdout, d.origin[0] ? d.origin : NULL);
    printf(", \"created_at\": %s%s%s, "
           "\"migration\": %s, \"head_snapshot\": %llu, "
           "\"batch_count\": %llu, \"head_time\": %s%s%s, \"maintenance_passes\": %zu, "
           "\"last_maintenance\": %s%s%s, \"objects\": %llu, \"bytes\": %llu}\n",
           d.has_created_at ? "\"" : "",
           d.has_created_at ? created : "null", d.has_created_at ? "\"" : "", migration,
           (unsigned long long)d.head.snapshot_id,
           (unsigned long long)d.head.batch_count, d.has_head_time ? "\"" : "",
           d.has_head_time ? head_time : "null", d.has_head_time ? "\"" : "", d.maintenance_passes,
           d.maintenance_passes ? "\"" : "", d.maintenance_passes ? pass_time : "null",
           d.maintenance_passes ? "\"" : "", (unsigned long long)d.objects, (unsigned long long)d.bytes);
    return 0;
  }
  printf("format             %u (RFC 0002 layout)\n", d.format);
  printf("created by         moraine %s\n", d.writer_version);
  /* RFC 0002's commit_log_batch_origin: set by moraine import, none when native */
  printf("origin             %s\n", d.origin[0] ? d.origin : "native (no commit_log_batch_origin)");
  printf("created at         %s\n", d.has_created_at ? created : "(not recorded: an older store)");
  if (d.has_migration)
    printf("migration          layout %u -> %u interrupted: run moraine migrate to finish it\n",
           d.migration_from, d.migration_to);
  else if (d.format < STORE_FORMAT_OLDEST)
    printf("migration          needed: layout %u is older than this build serves (run moraine migrate)\n",
           d.format);
  printf("head snapshot      %llu\n", (unsigned long long)d.head.snapshot_id);
  printf("batches landed     %llu\n", (unsigned long long)d.head.batch_count);
  printf("head snapshot time %s\n", d.has_head_time ? head_time : "(no snapshot record)");
  if (d.maintenance_passes) {
    printf("maintenance        %zu passes, the last at %s (%s)\n", d.maintenance_passes, pass_time,
           d.last_pass_trigger);
    printf("last pass          %s\n", d.last_pass_steps);
  } else {
    printf("maintenance        no pass recorded\n");
  }
  printf("store size         %llu bytes in %llu objects\n", (unsigned long long)d.bytes,
         (unsigned long long)d.objects);
  return 0;
}

static int census(store *st, bool json) {
  store_census c;
  mr_error err;
  /* a note for people waiting at a terminal; scripts see only a failure's one line */
  if (isatty(STDERR_FILENO))
    fprintf(stderr, "moraine: census: scanning every key\n");
  if (store_take_census(st, &c, &err) != MR_OK) {
    fprintf(stderr, "moraine: census: %s\n", err.msg);
    return 1;
  }
  if (json) {
    printf("{\"subspaces\": {");
    for (int i = 0; i < MR_SS_COUNT; i++)
      printf("%s\"%s\": {\"keys\": %llu, \"bytes\": %llu}", i ? ", " : "",
             mr_subspace_text((mr_subspace)i), (unsigned long long)c.subspace[i].keys,
             (unsigned long long)c.subspace[i].bytes);
    printf("}, \"kinds\": {");
    const char *sep = "";
    for (int k = 0; k < MR_KK_COUNT; k++) {
      const store_census_row *cur = &c.current_kind[k], *his = &c.history_kind[k];
      if (cur->keys == 0 && his->keys == 0)
        continue;
      printf("%s\"%s\": {\"current\": {\"keys\": %llu, \"bytes\": %llu}, \"history\": "
             "{\"keys\": %llu, \"bytes\": %llu}}",
             sep, mr_key_kind_get((mr_key_kind)k)->text, (unsigned long long)cur->keys,
             (unsigned long long)cur->bytes, (unsigned long long)his->keys,
             (unsigned long long)his->bytes);
      sep = ", ";
    }
    printf("}}\n");
    return 0;
  }
  printf("%-16s %12s %14s\n", "subspace", "keys", "bytes");
  for (int i = 0; i < MR_SS_COUNT; i++)
    printf("%-16s %12llu %14llu\n", mr_subspace_text((mr_subspace)i),
           (unsigned long long)c.subspace[i].keys, (unsigned long long)c.subspace[i].bytes);
  printf("\n%-20s %12s %14s %12s %14s\n", "kind", "current keys", "current bytes", "history keys",
         "history bytes");
  for (int k = 0; k < MR_KK_COUNT; k++) {
    const store_census_row *cur = &c.current_kind[k], *his = &c.history_kind[k];
    if (cur->keys == 0 && his->keys == 0)
      continue;
    printf("%-20s %12llu %14llu %12llu %14llu\n", mr_key_kind_get((mr_key_kind)k)->text,
           (unsigned long long)cur->keys, (unsigned long long)cur->bytes,
           (unsigned long long)his->keys, (unsigned long long)his->bytes);
  }
  return 0;
}

int cli_inspect(const char *cmd, int argc, char **argv) {
  const char *where = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(inspect_usage, stdout);
      return 0;
    }
    if (strcmp(argv[i], "--json") == 0)
      json = true;
    else if (argv[i][0] != '-' && where == NULL)
      where = argv[i];
    else {
      fprintf(stderr, "moraine: %s: unexpected '%s' (see moraine %s --help)\n", cmd, argv[i], cmd);
      return 2;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: %s: which store? (see moraine %s --help)\n", cmd, cmd);
    return 2;
  }
  /* info describes a store whatever its format or migration state;
   * census only counts keys */
  store *st = tool_open(cmd, where, true);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  int status = strcmp(cmd, "info") == 0 ? info(st, json) : census(st, json);
  return tool_close(cmd, st, status);
}
