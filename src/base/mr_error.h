/*
 * mr_error.h — the one error vocabulary of libmoraine.
 *
 * Every function that can fail returns an mr_status and, when the caller
 * passes a non-NULL mr_error, fills it with the same code and a one-line,
 * human-readable message. MR_OK is 0 so `if (rc) return rc;` reads naturally.
 *
 * Ownership: mr_error is a caller-owned value; nothing in it is heap memory,
 * so it never needs freeing and may be reused. A message longer than the
 * buffer is cut and ends in "..." (never silently: the ellipsis marks it).
 */
#ifndef MR_ERROR_H
#define MR_ERROR_H

#include <stddef.h>

#if defined(__GNUC__)
#define MR_MUST_CHECK __attribute__((warn_unused_result))
#define MR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MR_MUST_CHECK
#define MR_PRINTF(f, a)
#endif

/* X(name, text): the status table, defined once. Append only. */
#define MR_STATUS_TABLE(X)                                                     \
  X(MR_OK, "ok")                                                               \
  X(MR_ERR_NOT_FOUND, "not found")                                             \
  X(MR_ERR_CONFLICT, "conflict")                                               \
  X(MR_ERR_FENCED, "fenced")                                                   \
  X(MR_ERR_CORRUPTION, "corruption")                                           \
  X(MR_ERR_CLOSED, "closed")                                                   \
  X(MR_ERR_IO, "io error")                                                     \
  X(MR_ERR_INVALID, "invalid argument")                                        \
  X(MR_ERR_NOMEM, "out of memory")                                             \
  X(MR_ERR_TIMEOUT, "timed out")                                               \
  X(MR_ERR_NOSPACE, "no space left")

typedef enum mr_status {
#define MR_STATUS_ENUM(name, text) name,
  MR_STATUS_TABLE(MR_STATUS_ENUM)
#undef MR_STATUS_ENUM
      MR_STATUS_COUNT
} mr_status;

#define MR_ERROR_MSG_MAX 512

typedef struct mr_error {
  mr_status code;
  char msg[MR_ERROR_MSG_MAX];
} mr_error;

/* The short name of a status ("conflict", ...); never NULL. */
const char *mr_status_text(mr_status code);

/*
 * Records code and a printf-style message into err (if err is non-NULL) and
 * returns code, so a failure path is one line: `return mr_fail(err, ...)`.
 */
mr_status mr_fail(mr_error *err, mr_status code, const char *fmt, ...)
    MR_PRINTF(3, 4);

/* Prepends "context: " to err's message, keeping its code; returns the code. */
mr_status mr_error_wrap(mr_error *err, const char *fmt, ...) MR_PRINTF(2, 3);

/* Resets err to MR_OK with an empty message (err may be NULL). */
void mr_error_clear(mr_error *err);

#endif /* MR_ERROR_H */
