/* mr_error.c — status names and message formatting for mr_error.h. */
#include "mr_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_text[] = {
#define MR_STATUS_TEXT(name, text) text,
    MR_STATUS_TABLE(MR_STATUS_TEXT)
#undef MR_STATUS_TEXT
};

const char *mr_status_text(mr_status code) {
  if ((unsigned)code >= MR_STATUS_COUNT)
    return "unknown status";
  return status_text[code];
}

/* Marks a cut message with "..." so truncation is never silent. */
static void mark_truncated(char *msg, int wanted) {
  if (wanted >= MR_ERROR_MSG_MAX)
    memcpy(msg + MR_ERROR_MSG_MAX - 4, "...", 4);
}

mr_status mr_fail(mr_error *err, mr_status code, const char *fmt, ...) {
  if (err == NULL)
    return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  if (n < 0)
    snprintf(err->msg, sizeof err->msg, "%s", mr_status_text(code));
  else
    mark_truncated(err->msg, n);
  return code;
}

mr_status mr_error_wrap(mr_error *err, const char *fmt, ...) {
  if (err == NULL)
    return MR_OK;
  char prefix[MR_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  char old[MR_ERROR_MSG_MAX];
  memcpy(old, err->msg, sizeof old);
  int n = snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
  mark_truncated(err->msg, n);
  return err->code;
}

void mr_error_clear(mr_error *err) {
  if (err == NULL)
    return;
  err->code = MR_OK;
  err->msg[0] = '\0';
}
