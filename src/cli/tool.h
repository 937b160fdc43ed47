/*
 * tool.h — what the read-only store commands share (info, census, verify,
 * snapshots, show, watch): opening STORE read-only, closing it, times and
 * JSON strings in one spelling, and progress on stderr.
 *
 * Exit codes of every tool command: 0 done, 1 could not run (one line
 * "moraine: <reason>" on stderr), 2 a bad command line; verify adds
 * TOOL_EXIT_DAMAGED.
 */
#ifndef MR_CLI_TOOL_H
#define MR_CLI_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "store/store.h"

#define TOOL_EXIT_OK 0
#define TOOL_EXIT_FAILED 1
#define TOOL_EXIT_USAGE 2
#define TOOL_EXIT_DAMAGED 3 /* verify: the walk finished and found problems */

/*
 * Opens STORE (a URL, or a folder path meaning file://) read-only, so a
 * running writer is not disturbed; unchecked as store_options.unchecked.
 * NULL after printing the one-line reason.
 */
/* How long a tool waits for the store to open (kv.h's default is 10 s). */
#define TOOL_OPEN_DEADLINE_MS 120000

store *tool_open(const char *cmd, const char *where, bool unchecked);
/* The same, with a reader that catches up with the writer by itself every
 * poll_ms (store_read_head then sees the head it reached). */
store *tool_open_following(const char *cmd, const char *where, bool unchecked, uint32_t poll_ms);

/* Closes st and flushes stdout; returns status, or 1 if either fails and
 * status was 0. */
int tool_close(const char *cmd, store *st, int status);

/*
 * sys/head as the store holds it now (a point read through the reader, not
 * the copy taken at the open). A read made of several scans is consistent
 * when the head is the same before and after it: the reader catches up
 * with the writer in the background, so a commit may land between scans.
 * Such reads are tried at most TOOL_READ_ATTEMPTS times.
 */
mr_status tool_read_head(store *st, store_head *out, mr_error *err) MR_MUST_CHECK;
#define TOOL_READ_ATTEMPTS 5

/* "2026-12-03T14:05:00.123456Z" for microseconds since the epoch (UTC). */
void tool_iso_time(int64_t us, char *out, size_t cap);

/*
 * Parses a time as DuckLake users write it: "YYYY-MM-DD", "YYYY-MM-DD
 * HH:MM:SS[.ffffff]" or with 'T', optionally ending in "Z" or "+00:00"
 * (UTC; other offsets are refused). Microseconds since the epoch.
 */
bool tool_parse_time(const char *s, int64_t *us);

/* A decimal u64 with nothing else; false otherwise. */
bool tool_parse_u64(const char *s, uint64_t *v);

/* s as a JSON string (quoted, escaped), or null for NULL. */
void tool_json_str(FILE *f, const char *s);

/*
 * The fields of a snapshot record as DuckLake's ducklake_snapshot and
 * ducklake_snapshot_changes hold them, as JSON members (no braces):
 * "snapshot_id": .., "snapshot_time": "..Z" | null, "schema_version",
 * "next_catalog_id", "next_file_id", "changes_made", "author",
 * "commit_message", "commit_extra_info" (null for NULL).
 */
void tool_json_snapshot_fields(FILE *f, const Moraine__V1__Snapshot *s);

/* Progress on stderr: on a terminal a line rewritten in place at most every
 * half second and erased at the end; elsewhere a line every 10 seconds. */
typedef struct tool_progress {
  const char *cmd;
  bool tty;
  bool shown; /* a line is on the terminal */
  struct timespec last;
} tool_progress;

void tool_progress_init(tool_progress *p, const char *cmd);
void tool_progress_note(tool_progress *p, const char *fmt, ...) MR_PRINTF(2, 3);
void tool_progress_done(tool_progress *p);
/* A note shown at once, on a terminal only (work whose length is unknown,
 * e.g. export's load); tool_progress_done erases it. */
void tool_progress_start(tool_progress *p, const char *fmt, ...) MR_PRINTF(2, 3);

#endif
