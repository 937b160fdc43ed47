/*
 * migrate.c — `moraine migrate STORE [--json] [--step-records N]`: brings a
 * store of an older layout format up to the one this build serves
 * (store_migrate, src/store/migrate.c), or finishes a migration that was
 * interrupted. The store is first looked at through a read-only reader, so
 * a store that needs nothing is never opened as a writer (which would fence
 * a server serving it); then it is opened as the one writer and migrated in
 * bounded steps, each one durable batch. Progress and each finished hop go
 * to stderr; the summary to stdout (one JSON object with --json).
 *
 * TESTS ONLY: MORAINE_TEST_ONLY_MIGRATE_STEP_DELAY_MS=N sleeps N ms after
 * every step, so an end-to-end test can kill the process between steps of
 * a small store. Nothing else reads it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/tool.h"
#include "store/store.h"

static const char migrate_usage[] =
    "usage: moraine migrate STORE [--json] [--step-records N]\n"
    "  Brings STORE (file://FOLDER or a folder path, s3://, gs://, az://) from an\n"
    "  older layout format up to the one this build serves, or finishes a\n"
    "  migration that was interrupted: layouts 9 and 10 gain the name directory\n"
    "  (layout 11), layout 11 the delete_target directory (layout 12).\n"
    "  The work goes in steps of at most N current records (default 1000), each\n"
    "  one atomic batch that also records how far it got (sys/migration); a run\n"
    "  that was killed resumes where it stopped when run again. Stop any old\n"
    "  server of the store first: the migration opens it as its one writer. A\n"
    "  store already at the latest layout is left untouched.\n"
    "  --json   print a summary object instead of the text line\n";

typedef struct migrate_ctx {
  tool_progress prog;
  unsigned delay_ms; /* TESTS ONLY: sleep after each step */
} migrate_ctx;

static bool on_step(void *ctx, const store_migrate_progress *p) {
  migrate_ctx *m = ctx;
  if (p->hop_done) {
    tool_progress_done(&m->prog);
    fprintf(stderr, "moraine: migrate: layout %u -> %u done: %s, %llu entries from %llu records\n",
            p->from_format, p->to_format, p->what, (unsigned long long)p->entries,
            (unsigned long long)p->records);
    fflush(stderr);
  } else {
    tool_progress_note(&m->prog, "layout %u -> %u: %s, %llu entries from %llu records so far",
                       p->from_format, p->to_format, p->what, (unsigned long long)p->entries,
                       (unsigned long long)p->records);
  }
  if (m->delay_ms) {
    struct timespec ts = {m->delay_ms / 1000, (long)(m->delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return true;
}

static void print_result(const store_migrate_result *r, bool json) {
  if (json) {
    printf("{\"format_before\": %u, \"format_after\": %u, \"resumed\": %s, \"steps\": %llu, "
           "\"entries\": %llu}\n",
           r->format_before, r->format_after, r->resumed ? "true" : "false",
           (unsigned long long)r->steps, (unsigned long long)r->entries);
  } else if (r->steps == 0) {
    printf("layout %u: nothing to migrate\n", r->format_after);
  } else {
    printf("migrated layout %u -> %u%s: %llu directory entries in %llu steps\n", r->format_before,
           r->format_after, r->resumed ? " (an interrupted migration resumed)" : "",
           (unsigned long long)r->entries, (unsigned long long)r->steps);
  }
}

int cli_migrate(int argc, char **argv) {
  const char *where = NULL;
  bool json = false;
  uint64_t step = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(migrate_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--step-records") == 0) {
      if (i + 1 == argc || !tool_parse_u64(argv[i + 1], &step) || step == 0 || step > 1000000) {
        fprintf(stderr, "moraine: migrate: --step-records takes a count from 1 to 1000000\n");
        return TOOL_EXIT_USAGE;
      }
      i++;
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: migrate: unexpected '%s' (see moraine migrate --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: migrate: which store? (see moraine migrate --help)\n");
    return TOOL_EXIT_USAGE;
  }

  /* a look through a reader first: a store with nothing to do is left alone */
  store *st = tool_open("migrate", where, true);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  store_description d;
  mr_error err;
  if (store_describe(st, NULL, &d, &err) != MR_OK) {
    fprintf(stderr, "moraine: migrate: %s\n", err.msg);
    return tool_close("migrate", st, TOOL_EXIT_FAILED);
  }
  int status = tool_close("migrate", st, TOOL_EXIT_OK);
  if (status != TOOL_EXIT_OK)
    return status;
  if (d.format > STORE_FORMAT_LATEST) {
    fprintf(
        stderr,
        "moraine: migrate: the store is layout %u, newer than this build (%d); upgrade moraine\n",
        d.format, STORE_FORMAT_LATEST);
    return TOOL_EXIT_FAILED;
  }
  if (d.format == STORE_FORMAT_LATEST && !d.has_migration) {
    store_migrate_result none = {.format_before = d.format, .format_after = d.format};
    print_result(&none, json);
    return fflush(stdout) == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
  }

  char url[4096];
  snprintf(url, sizeof url, "%s%s", strstr(where, "://") ? "" : "file://", where);
  store_options o = {.migrating = true, .deadline_ms = TOOL_OPEN_DEADLINE_MS};
  if (store_open(url, &o, &st, &err) != MR_OK) {
    fprintf(stderr, "moraine: migrate: cannot open the store %s as its writer: %s\n", url, err.msg);
    return TOOL_EXIT_FAILED;
  }
  migrate_ctx m;
  tool_progress_init(&m.prog, "migrate");
  const char *delay = getenv("MORAINE_TEST_ONLY_MIGRATE_STEP_DELAY_MS");
  m.delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
  if (d.has_migration)
    fprintf(stderr, "moraine: migrate: resuming the interrupted migration of layout %u -> %u\n",
            d.migration_from, d.migration_to);
  store_migrate_result r;
  mr_status rc = store_migrate(st, (size_t)step, on_step, &m, &r, &err);
  tool_progress_done(&m.prog);
  if (rc != MR_OK) {
    fprintf(stderr, "moraine: migrate: %s\n", err.msg);
    return tool_close("migrate", st, TOOL_EXIT_FAILED);
  }
  print_result(&r, json);
  return tool_close("migrate", st, TOOL_EXIT_OK);
}
