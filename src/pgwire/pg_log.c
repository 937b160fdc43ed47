/*
 * pg_log.c — the operator log of pg_log.h: a level and one write per line.
 */
#include "pgwire/pg_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int current_level = PG_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

mr_status pg_log_parse_level(const char *name, pg_log_level *out, mr_error *err) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(name, level_names[i]) == 0) {
      *out = (pg_log_level)i;
      return MR_OK;
    }
  }
  return mr_fail(err, MR_ERR_INVALID, "unknown log level '%s' (error, warn, info or debug)", name);
}

void pg_log_set_level(pg_log_level level) {
  atomic_store(&current_level, (int)level);
}

bool pg_log_enabled(pg_log_level level) {
  return (int)level <= atomic_load(&current_level);
}

void pg_log(pg_log_level level, const char *fmt, ...) {
  if (!pg_log_enabled(level) || (int)level < 0 || (int)level > 3)
    return;
  char line[1100];
  int head = snprintf(line, sizeof line, "moraine: %s: ", level_names[level]);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line + head, 1001, fmt, ap);
  va_end(ap);
  size_t len = (size_t)head + (n < 0 ? 0 : n > 1000 ? 1000 : (size_t)n);
  for (size_t i = (size_t)head; i < len; i++) {
    if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
      line[i] = ' ';
  }
  line[len++] = '\n';
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(STDERR_FILENO, line + off, len - off);
    if (w <= 0)
      return; /* nowhere to report a failing stderr */
    off += (size_t)w;
  }
}
