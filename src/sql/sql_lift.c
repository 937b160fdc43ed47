/*
 * sql_lift.c — literal lifting (sql_lift.h): which literals of an INSERT
 * become parameters, read from its tokens; and binding their values back
 * exactly.
 *
 * Tokens are enough: a VALUES element is lifted only when it is a literal
 * alone between '(' or ',' and ',' or ')' at depth one of the statement's
 * own VALUES list, so no operator (::, +, ||, COLLATE, ...) and no function
 * call can take it as an operand.
 */
#include "sql/sql_lift.h"

#include <pg_query/pg_query.pb-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mr_grow.h"
#include "sql/sql_lex.h"
#include "sql/sql_state.h"
#include "sql/sql_util.h"

/* ---- what a literal is -------------------------------------------------- */

/* 1: k is a plain '...' constant and *out its content with '' undone;
 * 0: it is not one; -1: out of memory. */
static int plain_string(const char *sql, const sql_tok *k, char **out, size_t *len) {
  const char *s = sql + k->start;
  size_t n = (size_t)(k->end - k->start);
  if (k->kind != PG_QUERY__TOKEN__SCONST || n < 2 || s[0] != '\'' || s[n - 1] != '\'')
    return 0;
  /* only doubled quotes may stand inside: anything else is a continuation
   * ('a' 'b' across a newline), which is not lifted */
  for (size_t i = 1; i < n - 1; i++)
    if (s[i] == '\'' && (i + 1 >= n - 1 || s[++i] != '\''))
      return 0;
  char *o = malloc(n - 1);
  if (o == NULL)
    return -1;
  size_t m = 0;
  for (size_t i = 1; i < n - 1; i++) {
    o[m++] = s[i];
    if (s[i] == '\'')
      i++;
  }
  o[m] = '\0';
  *out = o;
  *len = m;
  return 1;
}

/* An unsigned decimal integer constant (PostgreSQL's scanner makes one past
 * int32 an FCONST, so both kinds count when they are digits only). */
static bool decimal_integer(const char *sql, const sql_tok *k) {
  if (k->kind != PG_QUERY__TOKEN__ICONST && k->kind != PG_QUERY__TOKEN__FCONST)
    return false;
  for (int i = k->start; i < k->end; i++)
    if (sql[i] < '0' || sql[i] > '9')
      return false;
  return k->end > k->start;
}

/* ---- where a literal is -------------------------------------------------- */

/* The statement's VALUES token when it is `INSERT INTO name [(cols)]
 * VALUES`, else 0. */
static size_t insert_values_at(const char *sql, const sql_toks *t) {
  if (!sql_tok_is(sql, t, 0, "insert") || !sql_tok_is(sql, t, 1, "into"))
    return 0;
  size_t i = 2;
  if (i >= t->n || t->v[i].kind != PG_QUERY__TOKEN__IDENT)
    return 0;
  while (sql_tok_punct(t, i + 1, '.') && i + 2 < t->n && t->v[i + 2].kind == PG_QUERY__TOKEN__IDENT)
    i += 2;
  i++;
  if (sql_tok_punct(t, i, '(')) { /* the column list: names and commas */
    i++;
    while (i < t->n && (t->v[i].kind == PG_QUERY__TOKEN__IDENT || sql_tok_punct(t, i, ',')))
      i++;
    if (!sql_tok_punct(t, i, ')'))
      return 0;
    i++;
  }
  return sql_tok_is(sql, t, i, "values") ? i : 0;
}

/* Tokens a row of constants is made of: literals, NULL, TRUE, FALSE, a
 * sign, and the row's own punctuation. */
static bool row_token(const char *sql, const sql_toks *t, size_t i) {
  int k = t->v[i].kind;
  return k == PG_QUERY__TOKEN__SCONST || k == PG_QUERY__TOKEN__ICONST ||
         k == PG_QUERY__TOKEN__FCONST || k == '(' || k == ')' || k == ',' || k == '-' ||
         k == '+' || sql_tok_is(sql, t, i, "null") || sql_tok_is(sql, t, i, "true") ||
         sql_tok_is(sql, t, i, "false");
}

/* ---- lifting ------------------------------------------------------------- */

static bool has_blocker(const char *sql, const sql_toks *t) {
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].kind == PG_QUERY__TOKEN__PARAM ||
        (t->v[i].kind == PG_QUERY__TOKEN__IDENT && t->v[i].end - t->v[i].start == 4 &&
         sql_tok_is(sql, t, i, "ctid")))
      return true;
  return false;
}

static mr_status push_value(sql_lifted *out, bool is_string, char *text, size_t len,
                            sql_error *err) {
  if (mr_grow((void **)&out->v, &out->cap, (out->n + 1) * sizeof *out->v,
              8 * sizeof *out->v) != MR_OK) {
    free(text);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  out->v[out->n++] = (sql_lift_value){is_string, text, len};
  return MR_OK;
}

mr_status sql_lift(const char *sql, sql_lifted *out, sql_error *err) {
  memset(out, 0, sizeof *out);
  sql_toks t;
  sql_error ignore;
  if (sql_lex_scan(sql, &t, &ignore) != MR_OK)
    return MR_OK; /* DuckDB reports what is wrong with the text */
  mr_status rc = MR_OK;
  size_t values_at = insert_values_at(sql, &t);
  if (values_at == 0 || has_blocker(sql, &t)) {
    sql_toks_free(&t);
    return MR_OK;
  }
  sql_strbuf b = {0};
  int copied = 0; /* sql[0..copied) is in b */
  int depth = 0;
  for (size_t i = values_at + 1; rc == MR_OK && i < t.n; i++) {
    const sql_tok *k = &t.v[i];
    if (sql_tok_punct(&t, i, '('))
      depth++;
    else if (sql_tok_punct(&t, i, ')'))
      depth--;
    /* the rows end at the first depth-0 token other than ',' and ')' */
    if (depth == 0 && !sql_tok_punct(&t, i, ',') && !sql_tok_punct(&t, i, ')'))
      break;
    if (!row_token(sql, &t, i)) { /* a function (NOW()) is planned again anyway */
      sql_lifted_free(out);
      break;
    }
    bool str = k->kind == PG_QUERY__TOKEN__SCONST, num = decimal_integer(sql, k);
    if (depth != 1 || (!str && !num) ||
        !(sql_tok_punct(&t, i - 1, '(') || sql_tok_punct(&t, i - 1, ',')) ||
        !(sql_tok_punct(&t, i + 1, ',') || sql_tok_punct(&t, i + 1, ')')))
      continue;
    size_t len = 0;
    char *text = NULL;
    int got = 1;
    if (str) {
      got = plain_string(sql, k, &text, &len); /* E'..', U&'..' stay in the text */
    } else {
      len = (size_t)(k->end - k->start);
      text = sql_strndup(sql + k->start, len);
      got = text ? 1 : -1;
    }
    if (got == 0)
      continue;
    if (got < 0) {
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      break;
    }
    rc = push_value(out, str, text, len, err);
    if (rc)
      break;
    sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
    sql_strbuf_addf(&b, "$%zu", out->n);
    copied = k->end;
  }
  sql_toks_free(&t);
  if (rc == MR_OK && out->n > 0) {
    sql_strbuf_add(&b, sql + copied);
    out->shape = sql_strbuf_take(&b);
    if (out->shape == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  sql_strbuf_free(&b);
  if (rc)
    sql_lifted_free(out);
  return rc;
}

void sql_lifted_free(sql_lifted *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i].text);
  free(l->v);
  free(l->shape);
  memset(l, 0, sizeof *l);
}

/* ---- binding -------------------------------------------------------------- */

static bool bindable_type(duckdb_prepared_statement ps, idx_t p) {
  /* a type alias is not reported here (pg_bytea reads as BLOB), which is
   * fine: an INSERT casts the bound VARCHAR to the column's type exactly as
   * it casts a string literal */
  duckdb_type ty = duckdb_param_type(ps, p);
  return ty == DUCKDB_TYPE_BIGINT || ty == DUCKDB_TYPE_INTEGER || ty == DUCKDB_TYPE_SMALLINT ||
         ty == DUCKDB_TYPE_VARCHAR;
}

bool sql_lift_bindable(duckdb_prepared_statement ps, size_t n) {
  if (ps == NULL || duckdb_nparams(ps) != n)
    return false;
  for (idx_t p = 1; p <= n; p++)
    if (!bindable_type(ps, p))
      return false;
  return true;
}

/* Optional '-' and 1-19 decimal digits, in [lo, hi]. */
static bool exact_integer(const sql_lift_value *v, int64_t lo, int64_t hi, int64_t *out) {
  const char *s = v->text;
  size_t n = v->len;
  bool neg = n > 0 && s[0] == '-';
  if (neg && !v->is_string)
    return false;
  size_t i = neg ? 1 : 0;
  if (i == n || n - i > 19)
    return false;
  uint64_t mag = 0;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    mag = mag * 10 + (uint64_t)(s[i] - '0'); /* 19 digits fit in uint64 */
  }
  if (!neg && mag > (uint64_t)INT64_MAX)
    return false;
  if (neg && mag > (uint64_t)INT64_MAX + 1)
    return false;
  if (mag == 0)
    neg = false; /* '-0' is 0 */
  int64_t x = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag; /* INT64_MIN without overflow */
  if (x < lo || x > hi)
    return false;
  *out = x;
  return true;
}

bool sql_lift_bind(duckdb_prepared_statement ps, const sql_lifted *l) {
  for (size_t i = 0; i < l->n; i++) {
    const sql_lift_value *v = &l->v[i];
    idx_t p = i + 1;
    int64_t x;
    duckdb_state st;
    switch (duckdb_param_type(ps, p)) {
    case DUCKDB_TYPE_BIGINT:
      if (!exact_integer(v, INT64_MIN, INT64_MAX, &x))
        return false;
      st = duckdb_bind_int64(ps, p, x);
      break;
    case DUCKDB_TYPE_INTEGER:
      if (!exact_integer(v, INT32_MIN, INT32_MAX, &x))
        return false;
      st = duckdb_bind_int32(ps, p, (int32_t)x);
      break;
    case DUCKDB_TYPE_SMALLINT:
      if (!exact_integer(v, INT16_MIN, INT16_MAX, &x))
        return false;
      st = duckdb_bind_int16(ps, p, (int16_t)x);
      break;
    case DUCKDB_TYPE_VARCHAR:
      if (!v->is_string)
        return false; /* an integer into text: DuckDB's cast, not ours */
      st = duckdb_bind_varchar_length(ps, p, v->text, v->len);
      break;
    default:
      return false;
    }
    if (st != DuckDBSuccess)
      return false;
  }
  return true;
}
