/* sql_util.c — the string helpers of sql_util.h. */
#include "sql/sql_util.h"

#include "base/mr_format.h"
#include "base/mr_grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sql_strdup(const char *s) {
  return s ? sql_strndup(s, strlen(s)) : NULL;
}

char *sql_strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL)
    return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *sql_unquote(const char *s, size_t n, char q) {
  if (n >= 2 && s[0] == q && s[n - 1] == q) {
    s++;
    n -= 2;
  }
  char *d = malloc(n + 1);
  if (d == NULL)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    d[o++] = s[i];
    if (s[i] == q && i + 1 < n && s[i + 1] == q)
      i++;
  }
  d[o] = '\0';
  return d;
}

/* Room for extra more bytes plus the terminating NUL. */
static bool grow(sql_strbuf *b, size_t extra) {
  if (b->failed)
    return false;
  void *d = b->data;
  if (extra > SIZE_MAX - b->len - 1 || mr_grow(&d, &b->cap, b->len + extra + 1, 64) != MR_OK) {
    b->failed = true;
    return false;
  }
  b->data = d;
  return true;
}

void sql_strbuf_addn(sql_strbuf *b, const void *data, size_t n) {
  if (!grow(b, n))
    return;
  if (n)
    memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void sql_strbuf_add(sql_strbuf *b, const char *s) {
  sql_strbuf_addn(b, s, strlen(s));
}

void sql_strbuf_addf(sql_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !grow(b, (size_t)n)) {
    b->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *sql_quote_literal(const char *s) {
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "'");
  for (; *s; s++)
    sql_strbuf_addn(&b, *s == '\'' ? "''" : s, *s == '\'' ? 2 : 1);
  sql_strbuf_add(&b, "'");
  return sql_strbuf_take(&b);
}

void sql_strbuf_add_i64(sql_strbuf *b, int64_t v) {
  char d[MR_INT_CHARS];
  sql_strbuf_addn(b, d, mr_format_i64(v, d));
}

void sql_strbuf_add_u8(sql_strbuf *b, uint8_t v) {
  sql_strbuf_addn(b, &v, 1);
}

void sql_strbuf_add_be16(sql_strbuf *b, uint16_t v) {
  uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
  sql_strbuf_addn(b, x, 2);
}

void sql_strbuf_add_be32(sql_strbuf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  sql_strbuf_addn(b, x, 4);
}

void sql_strbuf_add_be64(sql_strbuf *b, uint64_t v) {
  sql_strbuf_add_be32(b, (uint32_t)(v >> 32));
  sql_strbuf_add_be32(b, (uint32_t)v);
}

char *sql_strbuf_take(sql_strbuf *b) {
  char *d = NULL;
  if (!b->failed) {
    if (b->data == NULL)
      grow(b, 0);
    if (!b->failed) {
      d = b->data;
      d[b->len] = '\0';
      b->data = NULL;
    }
  }
  sql_strbuf_free(b);
  return d;
}

void sql_strbuf_reset(sql_strbuf *b) {
  b->len = 0;
}

void sql_strbuf_free(sql_strbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = false;
}
