/*
 * tool.c — the shared part of the read-only store commands (tool.h).
 */
#include "cli/tool.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

store *tool_open(const char *cmd, const char *where, bool unchecked) {
  return tool_open_following(cmd, where, unchecked, 0);
}

store *tool_open_following(const char *cmd, const char *where, bool unchecked, uint32_t poll_ms) {
  char url[4096];
  if (strstr(where, "://"))
    snprintf(url, sizeof url, "%s", where);
  else
    snprintf(url, sizeof url, "file://%s", where);
  /* a reader's open replays the WAL objects written since the last memtable
   * flush, one GET each: on a slow object store that outlasts the server's
   * 10 s deadline, and a tool has no client waiting on it */
  store_options o = {.read_only = true,
                     .unchecked = unchecked,
                     .deadline_ms = TOOL_OPEN_DEADLINE_MS,
                     .reader_poll_ms = poll_ms};
  store *st = NULL;
  mr_error err;
  if (store_open(url, &o, &st, &err) != MR_OK) {
    fprintf(stderr, "moraine: %s: cannot open the store %s: %s\n", cmd, url, err.msg);
    return NULL;
  }
  return st;
}

int tool_close(const char *cmd, store *st, int status) {
  mr_error err;
  if (store_close(st, &err) != MR_OK && status == 0) {
    fprintf(stderr, "moraine: %s: closing the store: %s\n", cmd, err.msg);
    status = TOOL_EXIT_FAILED;
  }
  if (fflush(stdout) != 0 && status == 0) {
    fprintf(stderr, "moraine: %s: writing the output failed\n", cmd);
    status = TOOL_EXIT_FAILED;
  }
  return status;
}

mr_status tool_read_head(store *st, store_head *out, mr_error *err) {
  mr_key k = {.kind = MR_KK_SYS_HEAD};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get(st, &k, &m, err);
  if (rc)
    return mr_error_wrap(err, "reading sys/head");
  const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
  *out = (store_head){h->snapshot_id, h->batch_count};
  mr_value_free(m);
  return MR_OK;
}

void tool_iso_time(int64_t us, char *out, size_t cap) {
  int64_t sec = us / 1000000, frac = us % 1000000;
  if (frac < 0) { /* before 1970: floor, so the fraction stays positive */
    sec--;
    frac += 1000000;
  }
  time_t s = (time_t)sec;
  struct tm tm;
  gmtime_r(&s, &tm);
  char day[32];
  strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%s.%06lldZ", day, (long long)frac);
}

bool tool_parse_u64(const char *s, uint64_t *v) {
  if (*s < '0' || *s > '9')
    return false;
  char *end = NULL;
  unsigned long long x = strtoull(s, &end, 10);
  if (*end != '\0')
    return false;
  *v = x;
  return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

bool tool_parse_time(const char *s, int64_t *us) {
  int y, mo, d, h = 0, mi = 0, n = 0;
  double sec = 0;
  if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3)
    return false;
  const char *p = s + n;
  if (*p == 'T' || *p == ' ') {
    int m = 0;
    if (sscanf(p + 1, "%2d:%2d:%lf%n", &h, &mi, &sec, &m) != 3)
      return false;
    p += 1 + m;
  }
  if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0 && strcmp(p, "+00") != 0 && *p != '\0')
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec < 0 || sec >= 61)
    return false;
  int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
  int64_t whole = (int64_t)sec;
  int64_t micro = (int64_t)((sec - (double)whole) * 1e6 + 0.5);
  *us = ((days * 24 + h) * 60 + mi) * 60 * 1000000 + whole * 1000000 + micro;
  return true;
}

void tool_json_str(FILE *f, const char *s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    default:
      if (*p < 0x20)
        fprintf(f, "\\u%04x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* An optional int64 as JSON. */
static void json_opt_i64(FILE *f, const char *name, protobuf_c_boolean has, int64_t v) {
  if (has)
    fprintf(f, ", \"%s\": %lld", name, (long long)v);
  else
    fprintf(f, ", \"%s\": null", name);
}

void tool_json_snapshot_fields(FILE *f, const Moraine__V1__Snapshot *s) {
  fprintf(f, "\"snapshot_id\": %lld, \"snapshot_time\": ", (long long)s->snapshot_id);
  if (s->has_snapshot_time) {
    char t[48];
    tool_iso_time(s->snapshot_time, t, sizeof t);
    tool_json_str(f, t);
  } else {
    fputs("null", f);
  }
  json_opt_i64(f, "schema_version", s->has_schema_version, s->schema_version);
  json_opt_i64(f, "next_catalog_id", s->has_next_catalog_id, s->next_catalog_id);
  json_opt_i64(f, "next_file_id", s->has_next_file_id, s->next_file_id);
  const char *names[] = {"changes_made", "author", "commit_message", "commit_extra_info"};
  const char *values[] = {s->changes_made, s->author, s->commit_message, s->commit_extra_info};
  for (int i = 0; i < 4; i++) {
    fprintf(f, ", \"%s\": ", names[i]);
    tool_json_str(f, values[i]);
  }
}

void tool_progress_init(tool_progress *p, const char *cmd) {
  memset(p, 0, sizeof *p);
  p->cmd = cmd;
  p->tty = isatty(STDERR_FILENO) == 1;
  clock_gettime(CLOCK_MONOTONIC, &p->last);
}

void tool_progress_note(tool_progress *p, const char *fmt, ...) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double since =
      (double)(now.tv_sec - p->last.tv_sec) + (double)(now.tv_nsec - p->last.tv_nsec) / 1e9;
  if (since < (p->tty ? 0.5 : 10.0))
    return;
  p->last = now;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (p->tty) {
    fprintf(stderr, "\rmoraine: %s: %s\033[K", p->cmd, line);
    p->shown = true;
  } else {
    fprintf(stderr, "moraine: %s: %s\n", p->cmd, line);
  }
  fflush(stderr);
}

void tool_progress_start(tool_progress *p, const char *fmt, ...) {
  if (!p->tty)
    return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\rmoraine: %s: %s\033[K", p->cmd, line);
  fflush(stderr);
  p->shown = true;
}

void tool_progress_done(tool_progress *p) {
  if (p->shown)
    fputs("\r\033[K", stderr);
  p->shown = false;
}
