/*
 * pg_log.h — the server's operator log: one line per event on stderr,
 * "moraine: <level>: <text>", gated by a process-wide level (error, warn,
 * info, debug; default info). Each line is written with a single write(2),
 * so lines from different connection threads never interleave.
 *
 * Ownership: no state beyond the level; safe from any thread.
 */
#ifndef MR_PG_LOG_H
#define MR_PG_LOG_H

#include <stdbool.h>

#include "base/mr_error.h"

typedef enum pg_log_level {
  PG_LOG_ERROR = 0,
  PG_LOG_WARN = 1,
  PG_LOG_INFO = 2,
  PG_LOG_DEBUG = 3,
} pg_log_level;

/* "error", "warn", "info" or "debug" -> *out; MR_ERR_INVALID otherwise. */
mr_status pg_log_parse_level(const char *name, pg_log_level *out, mr_error *err) MR_MUST_CHECK;
void pg_log_set_level(pg_log_level level);
bool pg_log_enabled(pg_log_level level);
/* Writes one line when level is enabled; the text is cut at 1000 bytes and
 * control characters in it become spaces. */
void pg_log(pg_log_level level, const char *fmt, ...) MR_PRINTF(2, 3);

#endif /* MR_PG_LOG_H */
