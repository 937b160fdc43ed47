/*
 * branch.c — `moraine branch STORE --at SNAPSHOT NEW_STORE [--json]`: a new
 * store holding STORE's catalog as it was at SNAPSHOT, which then serves and
 * takes commits of its own. Zero-copy: NEW_STORE is SlateDB's clone of
 * STORE (kv_clone: its manifest references STORE's SSTs, pinned there by a
 * checkpoint; only the WAL is copied), cut back to SNAPSHOT on store
 * records in one batch (store_cut_back). STORE is read, never written by
 * moraine (SlateDB adds the checkpoint to its manifest), so a server
 * serving it goes on.
 *
 * If the cut fails after the clone, NEW_STORE holds the uncut copy: the
 * message says so, and it must be removed before trying again.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/tool.h"
#include "kv/kv.h"
#include "store/store.h"

static const char branch_usage[] =
    "usage: moraine branch STORE --at SNAPSHOT NEW_STORE [--json]\n"
    "  Makes NEW_STORE a branch of the catalog in STORE as it was at SNAPSHOT:\n"
    "  serve it and it diverges from STORE, each taking its own commits. Zero-copy:\n"
    "  NEW_STORE references STORE's objects (which stay pinned in STORE) instead of\n"
    "  copying them, so both must be in one object store (two folders, or two\n"
    "  prefixes of one bucket) and STORE must stay where it is. NEW_STORE must not\n"
    "  hold a store. STORE is not disturbed: a server may keep serving it. The\n"
    "  branch shares STORE's data files: run DuckLake's file cleanup on one side only.\n"
    "  --json   print a summary object instead of the text line\n";

static void url_of(const char *where, char *url, size_t cap) {
  snprintf(url, cap, "%s%s", strstr(where, "://") ? "" : "file://", where);
}

int cli_branch(int argc, char **argv) {
  const char *from = NULL, *to = NULL;
  bool json = false, have_at = false;
  uint64_t at = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(branch_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--at") == 0) {
      if (i + 1 == argc || !tool_parse_u64(argv[i + 1], &at)) {
        fprintf(stderr, "moraine: branch: --at takes a snapshot id\n");
        return TOOL_EXIT_USAGE;
      }
      have_at = true;
      i++;
    } else if (argv[i][0] != '-' && from == NULL) {
      from = argv[i];
    } else if (argv[i][0] != '-' && to == NULL) {
      to = argv[i];
    } else {
      fprintf(stderr, "moraine: branch: unexpected '%s' (see moraine branch --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (from == NULL || to == NULL || !have_at) {
    fprintf(
        stderr,
        "moraine: branch: needs STORE, --at SNAPSHOT and NEW_STORE (see moraine branch --help)\n");
    return TOOL_EXIT_USAGE;
  }
  char src[4096], dst[4096];
  url_of(from, src, sizeof src);
  url_of(to, dst, sizeof dst);

  /* the source must be a store this build serves, holding that snapshot */
  store *st = tool_open("branch", from, false);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  mr_error err;
  store_head head;
  mr_status rc = tool_read_head(st, &head, &err);
  ProtobufCMessage *snap = NULL;
  mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {at}};
  if (rc == MR_OK && at <= head.snapshot_id)
    rc = store_get(st, &sk, &snap, &err);
  mr_value_free(snap);
  int status = tool_close("branch", st, TOOL_EXIT_OK);
  if (rc != MR_OK || at > head.snapshot_id) {
    if (at > head.snapshot_id)
      fprintf(stderr, "moraine: branch: snapshot %llu is after the head snapshot %llu of %s\n",
              (unsigned long long)at, (unsigned long long)head.snapshot_id, src);
    else if (rc == MR_ERR_NOT_FOUND)
      fprintf(stderr, "moraine: branch: snapshot %llu is not in %s (expired?)\n",
              (unsigned long long)at, src);
    else
      fprintf(stderr, "moraine: branch: %s\n", err.msg);
    return TOOL_EXIT_FAILED;
  }
  if (status != TOOL_EXIT_OK)
    return status;

  if (kv_clone(src, dst, TOOL_OPEN_DEADLINE_MS, &err) != MR_OK) {
    fprintf(stderr, "moraine: branch: %s\n", err.msg);
    return TOOL_EXIT_FAILED;
  }
  store_options o = {.deadline_ms = TOOL_OPEN_DEADLINE_MS};
  store_cut_result r;
  rc = store_open(dst, &o, &st, &err);
  if (rc == MR_OK) {
    rc = store_cut_back(st, at, &r, &err);
    mr_error cerr;
    mr_status crc = store_close(st, rc ? NULL : &cerr);
    if (rc == MR_OK && crc != MR_OK) {
      rc = crc;
      err = cerr;
    }
  }
  if (rc != MR_OK) {
    fprintf(stderr,
            "moraine: branch: %s holds an uncut copy of %s (remove it before trying again): %s\n",
            dst, src, err.msg);
    return TOOL_EXIT_FAILED;
  }
  if (json) {
    printf("{\"store\": ");
    tool_json_str(stdout, src);
    printf(", \"branch\": ");
    tool_json_str(stdout, dst);
    printf(", \"at\": %llu, \"source_head\": %llu, \"records_removed\": %llu, "
           "\"records_restored\": %llu}\n",
           (unsigned long long)at, (unsigned long long)r.head_before,
           (unsigned long long)r.records_removed, (unsigned long long)r.records_restored);
  } else
    printf("branched %s at snapshot %llu into %s (the source was at snapshot %llu: %llu records "
           "cut, %llu live again)\n",
           src, (unsigned long long)at, dst, (unsigned long long)r.head_before,
           (unsigned long long)r.records_removed, (unsigned long long)r.records_restored);
  return fflush(stdout) == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
}
