/*
 * sql_util.h — small string helpers shared by the sql layer: duplication,
 * unquoting, and a growing string / byte buffer with a sticky out-of-memory
 * flag (append freely, check once at take).
 */
#ifndef MR_SQL_UTIL_H
#define MR_SQL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

char *sql_strdup(const char *s);
char *sql_strndup(const char *s, size_t n);
/* Removes surrounding quote chars q and undoubles inner ones. */
char *sql_unquote(const char *s, size_t n, char q);
/* s as an SQL string literal ('...', single quotes doubled). Caller frees;
 * NULL when out of memory. */
char *sql_quote_literal(const char *s);

/* A growing buffer; `failed` is sticky after an allocation failure. */
typedef struct sql_strbuf {
  char *data;
  size_t len;
  size_t cap;
  bool failed;
} sql_strbuf;

void sql_strbuf_addn(sql_strbuf *b, const void *data, size_t n);
void sql_strbuf_add(sql_strbuf *b, const char *s);
void sql_strbuf_addf(sql_strbuf *b, const char *fmt, ...) MR_PRINTF(2, 3);
void sql_strbuf_add_i64(sql_strbuf *b, int64_t v); /* decimal text */
void sql_strbuf_add_u8(sql_strbuf *b, uint8_t v);
void sql_strbuf_add_be16(sql_strbuf *b, uint16_t v);
void sql_strbuf_add_be32(sql_strbuf *b, uint32_t v);
void sql_strbuf_add_be64(sql_strbuf *b, uint64_t v);
/* Returns the NUL-terminated string (caller frees) or NULL if any append
 * failed; the buffer is emptied either way. */
char *sql_strbuf_take(sql_strbuf *b);
void sql_strbuf_reset(sql_strbuf *b); /* len = 0, keeps memory */
void sql_strbuf_free(sql_strbuf *b);

#endif /* MR_SQL_UTIL_H */
