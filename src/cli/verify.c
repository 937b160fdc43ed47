/*
 * verify.c — `moraine verify STORE [--json] [--changelog-window N]`: walks
 * every key of a store (store_verify) and reports each problem with its key
 * in text form. The store is opened read-only and unchecked, so a store the
 * server would refuse (sys/head missing, a migration marker) is still
 * walked and its damage reported rather than the open's one refusal.
 *
 * Exit: 0 clean, TOOL_EXIT_DAMAGED (3) when problems were found, 1 when the
 * walk could not run (store unreadable, empty, of an unknown format), 2 for
 * a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/tool.h"

static const char verify_usage[] =
    "usage: moraine verify STORE [--json] [--changelog-window N]\n"
    "  Walks every key of STORE (a folder path, or a file://, s3://, gs://, az:// URL),\n"
    "  opened read-only: a running server is not disturbed. Checks that every key and\n"
    "  value decodes and their ids agree; that versioned records begin before they end\n"
    "  and not after the head; that the name and delete_target directories hold exactly\n"
    "  the entries of the current schemas, tables and delete files; that the changelog\n"
    "  holds a record for each snapshot of its window (default 1024 snapshots, as the\n"
    "  server keeps) and none outside it; that sys/head names the newest snapshot.\n"
    "  Prints one line per problem (check, key, what is wrong), then a summary; --json\n"
    "  prints one JSON object instead.\n"
    "  Exit status: 0 clean, 3 damaged (problems found), 1 could not verify, 2 usage.\n";

typedef struct verify_out {
  bool json;
  FILE *problems; /* --json: the problem objects, printed once the walk ends */
  char *buf;
  size_t len;
  tool_progress progress;
} verify_out;

static mr_status on_problem(void *ctx, const store_problem *p, mr_error *err) {
  verify_out *o = ctx;
  if (o->json) {
    fputs(ftell(o->problems) > 0 ? ", {\"check\": " : "{\"check\": ", o->problems);
    tool_json_str(o->problems, store_check_text(p->check));
    fputs(", \"key\": ", o->problems);
    tool_json_str(o->problems, p->key);
    fputs(", \"problem\": ", o->problems);
    tool_json_str(o->problems, p->what);
    fputs("}", o->problems);
    return MR_OK;
  }
  tool_progress_done(&o->progress);
  printf("%-13s %s: %s\n", store_check_text(p->check), p->key, p->what);
  return MR_OK;
}

static void on_progress(void *ctx, uint64_t keys) {
  verify_out *o = ctx;
  tool_progress_note(&o->progress, "%llu keys walked", (unsigned long long)keys);
}

static int verify(store *st, bool json, uint64_t window) {
  verify_out o = {.json = json};
  tool_progress_init(&o.progress, "verify");
  if (json && (o.problems = open_memstream(&o.buf, &o.len)) == NULL) {
    fprintf(stderr, "moraine: verify: out of memory\n");
    return TOOL_EXIT_FAILED;
  }
  store_verify_hooks hooks = {on_problem, on_progress, &o};
  store_verify_result r;
  mr_error err;
  mr_status rc = store_verify(st, window, &hooks, &r, &err);
  tool_progress_done(&o.progress);
  if (json)
    fclose(o.problems);
  if (rc) {
    free(o.buf);
    fprintf(stderr, "moraine: verify: %s\n", err.msg);
    return TOOL_EXIT_FAILED;
  }
  if (json) {
    printf("{\"clean\": %s, \"keys\": %llu, \"head_snapshot\": %llu, \"batch_count\": %llu, "
           "\"snapshots\": %llu, \"changelog_records\": %llu, \"problems\": [%s]}\n",
           r.problems ? "false" : "true", (unsigned long long)r.keys,
           (unsigned long long)r.head.snapshot_id, (unsigned long long)r.head.batch_count,
           (unsigned long long)r.snapshots, (unsigned long long)r.changelog_records,
           o.buf ? o.buf : "");
  } else if (r.problems) {
    printf("damaged: %llu problem%s in %llu keys\n", (unsigned long long)r.problems,
           r.problems == 1 ? "" : "s", (unsigned long long)r.keys);
  } else {
    printf("clean: %llu keys, head snapshot %llu (batch %llu), %llu snapshot records, %llu "
           "changelog records\n",
           (unsigned long long)r.keys, (unsigned long long)r.head.snapshot_id,
           (unsigned long long)r.head.batch_count, (unsigned long long)r.snapshots,
           (unsigned long long)r.changelog_records);
  }
  free(o.buf);
  return r.problems ? TOOL_EXIT_DAMAGED : TOOL_EXIT_OK;
}

int cli_verify(int argc, char **argv) {
  const char *where = NULL;
  bool json = false;
  uint64_t window = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(verify_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--changelog-window") == 0) {
      if (i + 1 >= argc || !tool_parse_u64(argv[i + 1], &window) || window == 0) {
        fprintf(stderr, "moraine: verify: --changelog-window takes a snapshot count above 0\n");
        return TOOL_EXIT_USAGE;
      }
      i++;
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: verify: unexpected '%s' (see moraine verify --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: verify: which store? (see moraine verify --help)\n");
    return TOOL_EXIT_USAGE;
  }
  store *st = tool_open("verify", where, true);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  return tool_close("verify", st, verify(st, json, window));
}
