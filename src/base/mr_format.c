/*
 * mr_format.c — see mr_format.h.
 */
#include "base/mr_format.h"

size_t mr_format_u64(uint64_t v, char *buf) {
  char tmp[MR_INT_CHARS];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++)
    buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return n;
}

size_t mr_format_i64(int64_t v, char *buf) {
  if (v >= 0)
    return mr_format_u64((uint64_t)v, buf);
  buf[0] = '-';
  /* the magnitude of INT64_MIN fits a uint64 only via this subtraction */
  return 1 + mr_format_u64((uint64_t)0 - (uint64_t)v, buf + 1);
}
