/*
 * sql_rewrite.c — the token-level PostgreSQL -> DuckDB rewrite (sql_rewrite
 * in sql_lex.h). It copies the statement text through unchanged except for
 * a few tokens, so DuckDB sees the client's SQL with only these differences:
 *
 *   pg_catalog.NAME  -> NAME      moraine's pg_catalog schema comes first on
 *                                 every session's search path
 *   bytea            -> pg_bytea  BLOB with PostgreSQL's bytea input format
 *   float, float(p)  -> DOUBLE / REAL (PostgreSQL's float is 8 bytes,
 *                                 DuckDB's 4); jsonb -> JSON
 *   ctid             -> rowid     (and `rowid AS ctid` as a select-list item)
 *   '(p,o)'          -> p*PG_TID_PER_BLOCK+o where it is a tuple id: ::tid, ctid = '(p,o)',
 *                       ctid IN ('(p,o)', ...); never elsewhere (it is data)
 *   ::tid            -> (dropped); column::tid -> mr_tid_rowid(column)
 *   COLLATE pg_catalog.default, COLLATE "default" -> (dropped): DuckDB's
 *                       default collation is the same binary order
 *   x ~ 'p', x !~ 'p' -> x ~ '(?s).*(?:p).*': PostgreSQL's ~ finds p
 *                       anywhere, DuckDB's must match the whole string;
 *                       ~* / !~* -> ~ / !~ with (?is). Only a plain string
 *                       literal pattern is rewritten (psql's are).
 *   'name'::regclass  -> mr_regclass('name'), the relation's oid
 *   FROM unnest(..) x, FROM generate_series(..) x -> .. x(x): in PostgreSQL
 *                       the one column of a scalar set function takes the
 *                       alias's name; in DuckDB x alone is the whole row
 *
 * What it does not do: anything needing a parse tree. Function-name
 * differences (version(), to_regclass(), ...) are macros in moraine's
 * pg_catalog schema instead (sql_pgcatalog.c).
 */
#include <ctype.h>
#include <pg_query/pg_query.pb-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_lex.h"
#include "sql/sql_state.h"
#include "sql/sql_types.h"
#include "sql/sql_util.h"

/* '(123,45)' -> 123*PG_TID_PER_BLOCK+45; false if the literal is not a tid
 * (or names an offset no row of ours has). */
static bool tid_literal(const char *s, size_t n, long long *out) {
  if (n < 7 || s[0] != '\'' || s[1] != '(' || s[n - 2] != ')' || s[n - 1] != '\'')
    return false;
  long long page = 0, off = 0;
  size_t i = 2;
  size_t digits = 0;
  for (; i < n - 2 && isdigit((unsigned char)s[i]); i++, digits++)
    page = page * 10 + (s[i] - '0');
  if (digits == 0 || digits > 10 || s[i] != ',')
    return false;
  i++;
  digits = 0;
  for (; i < n - 2 && isdigit((unsigned char)s[i]); i++, digits++)
    off = off * 10 + (s[i] - '0');
  if (digits == 0 || digits > 5 || i != n - 2 || off >= PG_TID_PER_BLOCK)
    return false;
  *out = page * PG_TID_PER_BLOCK + off;
  return true;
}

static bool is_ident(const char *sql, const sql_toks *t, size_t i, const char *word) {
  return i < t->n && t->v[i].kind == PG_QUERY__TOKEN__IDENT && sql_tok_is(sql, t, i, word);
}

/* PostgreSQL's regular-expression match operators; *icase for ~* / !~*. */
static bool regex_op(const char *sql, const sql_toks *t, size_t i, bool *icase) {
  *icase = sql_tok_is(sql, t, i, "~*") || sql_tok_is(sql, t, i, "!~*");
  return *icase || sql_tok_is(sql, t, i, "~") || sql_tok_is(sql, t, i, "!~");
}

/* Is token i the pattern of a regex match: right after the operator, or
 * after OPERATOR([pg_catalog.]op)? */
static bool regex_pattern(const char *sql, const sql_toks *t, size_t i, bool *icase) {
  if (i >= 1 && regex_op(sql, t, i - 1, icase))
    return true;
  return i >= 3 && sql_tok_punct(t, i - 1, ')') && regex_op(sql, t, i - 2, icase) &&
         (sql_tok_punct(t, i - 3, '(') || sql_tok_punct(t, i - 3, '.'));
}

/* The collation name default, bare (after pg_catalog.) or quoted. */
static bool default_name(const char *sql, const sql_toks *t, size_t i) {
  return sql_tok_is(sql, t, i, "default") || (i < t->n && t->v[i].end - t->v[i].start == 9 &&
                                              strncmp(sql + t->v[i].start, "\"default\"", 9) == 0);
}

/* `COLLATE pg_catalog.default` or `COLLATE "default"` at i: the index of
 * its last token, else 0. */
static size_t default_collation(const char *sql, const sql_toks *t, size_t i) {
  if (!sql_tok_is(sql, t, i, "collate"))
    return 0;
  if (default_name(sql, t, i + 1) && !sql_tok_is(sql, t, i + 1, "default"))
    return i + 1;
  if (is_ident(sql, t, i + 1, "pg_catalog") && sql_tok_punct(t, i + 2, '.') &&
      default_name(sql, t, i + 3))
    return i + 3;
  return 0;
}

/* `unnest(...) [AS] x` or `generate_series(...) [AS] x` in a FROM list,
 * without column aliases, at token i: the index of the alias x, else 0. */
static size_t set_fn_alias(const char *sql, const sql_toks *t, size_t i) {
  size_t p = i; /* the token before the name and its pg_catalog qualifier */
  if (p >= 2 && sql_tok_punct(t, p - 1, '.') && is_ident(sql, t, p - 2, "pg_catalog"))
    p -= 2;
  if (p == 0 || !(sql_tok_is(sql, t, p - 1, "from") || sql_tok_is(sql, t, p - 1, "join") ||
                  sql_tok_punct(t, p - 1, ',')))
    return 0;
  if (!(is_ident(sql, t, i, "unnest") || is_ident(sql, t, i, "generate_series")) ||
      !sql_tok_punct(t, i + 1, '('))
    return 0;
  size_t j = i + 1;
  for (int depth = 0; j < t->n; j++) {
    if (sql_tok_punct(t, j, '('))
      depth++;
    else if (sql_tok_punct(t, j, ')') && --depth == 0)
      break;
  }
  j++;
  if (sql_tok_is(sql, t, j, "as"))
    j++;
  if (j >= t->n || t->v[j].kind != PG_QUERY__TOKEN__IDENT || sql_tok_punct(t, j + 1, '('))
    return 0;
  return j;
}

/* `::regclass` or `::pg_catalog.regclass` after token i: its last token, else 0. */
static size_t regclass_cast(const char *sql, const sql_toks *t, size_t i) {
  if (i + 2 >= t->n || t->v[i + 1].kind != PG_QUERY__TOKEN__TYPECAST)
    return 0;
  if (is_ident(sql, t, i + 2, "regclass"))
    return i + 2;
  if (is_ident(sql, t, i + 2, "pg_catalog") && sql_tok_punct(t, i + 3, '.') &&
      is_ident(sql, t, i + 4, "regclass"))
    return i + 4;
  return 0;
}

/* Is the string constant at i a tuple id: cast ::tid, compared with ctid
 * (ctid = '(p,o)'), or an element of `ctid IN ('(p,o)', ...)`? Any other
 * literal that merely looks like one ('(1,2)' stored in a column) is data
 * and is never rewritten. */
static bool tid_context(const char *sql, const sql_toks *t, size_t i) {
  if (i + 2 < t->n && t->v[i + 1].kind == PG_QUERY__TOKEN__TYPECAST &&
      is_ident(sql, t, i + 2, "tid"))
    return true;
  if (i >= 2 && is_ident(sql, t, i - 2, "ctid") &&
      (sql_tok_punct(t, i - 1, '=') || t->v[i - 1].kind == PG_QUERY__TOKEN__NOT_EQUALS))
    return true;
  size_t j = i;
  while (j >= 2 && sql_tok_punct(t, j - 1, ',') && t->v[j - 2].kind == PG_QUERY__TOKEN__SCONST)
    j -= 2;
  return j >= 3 && sql_tok_punct(t, j - 1, '(') && sql_tok_is(sql, t, j - 2, "in") &&
         is_ident(sql, t, j - 3, "ctid");
}

mr_status sql_rewrite(const char *sql, char **out, sql_error *err) {
  *out = NULL;
  sql_toks t;
  mr_status rc = sql_lex_scan(sql, &t, err);
  if (rc)
    return rc;
  bool has_ctid = false;
  for (size_t i = 0; i < t.n; i++)
    if (is_ident(sql, &t, i, "ctid"))
      has_ctid = true;

  sql_strbuf b = {0};
  int copied = 0;      /* sql[0..copied) is in b */
  size_t alias_at = 0; /* a set function's alias still to come (set_fn_alias) */
  for (size_t i = 0; i < t.n; i++) {
    const sql_tok *k = &t.v[i];
    const char *rep = NULL;
    char num[32];
    int skip_to = -1; /* drop text up to here instead of the token */
    bool icase;
    size_t last;

    if (alias_at > 0 && i == alias_at) { /* name the set function's column after its alias */
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->end - copied));
      sql_strbuf_add(&b, "(");
      sql_strbuf_addn(&b, sql + k->start, (size_t)(k->end - k->start));
      sql_strbuf_add(&b, ")");
      copied = k->end;
      continue;
    }
    if (alias_at == 0 || alias_at < i)
      alias_at = set_fn_alias(sql, &t, i); /* reached after the call's own tokens */
    if ((last = default_collation(sql, &t, i)) > 0) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      copied = t.v[last].end;
      i = last;
      continue;
    }
    if (k->kind == PG_QUERY__TOKEN__SCONST && sql[k->start] == '\'' &&
        (last = regclass_cast(sql, &t, i)) > 0) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      sql_strbuf_add(&b, "mr_regclass(");
      sql_strbuf_addn(&b, sql + k->start, (size_t)(k->end - k->start));
      sql_strbuf_add(&b, ")");
      copied = t.v[last].end;
      i = last;
      continue;
    }
    if (k->kind == PG_QUERY__TOKEN__SCONST && sql[k->start] == '\'' &&
        regex_pattern(sql, &t, i, &icase)) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      sql_strbuf_add(&b, icase ? "'(?is).*(?:" : "'(?s).*(?:");
      sql_strbuf_addn(&b, sql + k->start + 1, (size_t)(k->end - k->start - 2));
      sql_strbuf_add(&b, ").*'");
      copied = k->end;
      continue;
    }
    if (regex_op(sql, &t, i, &icase) && icase) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      sql_strbuf_add(&b, sql[k->start] == '!' ? "!~" : "~");
      copied = k->end;
      continue;
    }
    if (is_ident(sql, &t, i, "pg_catalog") && sql_tok_punct(&t, i + 1, '.') && i + 2 < t.n &&
        !(i > 0 && sql_tok_punct(&t, i - 1, '.'))) {
      skip_to = t.v[i + 2].start;
    } else if (is_ident(sql, &t, i, "bytea") && !sql_tok_punct(&t, i + 1, '(')) {
      rep = "pg_bytea";
    } else if (is_ident(sql, &t, i, "jsonb") && !sql_tok_punct(&t, i + 1, '(')) {
      rep = "JSON";
    } else if (sql_tok_is(sql, &t, i, "float") && k->keyword &&
               !(i > 0 && sql_tok_punct(&t, i - 1, '.'))) {
      if (sql_tok_punct(&t, i + 1, '(') && i + 3 < t.n && sql_tok_punct(&t, i + 3, ')') &&
          t.v[i + 2].kind == PG_QUERY__TOKEN__ICONST) {
        int p = atoi(sql + t.v[i + 2].start);
        sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
        sql_strbuf_add(&b, p <= 24 ? "REAL" : "DOUBLE");
        copied = t.v[i + 3].end;
        i += 3;
        continue;
      }
      rep = "DOUBLE";
    } else if (has_ctid && is_ident(sql, &t, i, "ctid")) {
      bool item = i > 0 &&
                  (sql_tok_is(sql, &t, i - 1, "select") || sql_tok_punct(&t, i - 1, ',')) &&
                  (sql_tok_punct(&t, i + 1, ',') || sql_tok_is(sql, &t, i + 1, "from"));
      rep = item ? "rowid AS ctid" : "rowid";
    } else if (has_ctid && k->kind == PG_QUERY__TOKEN__IDENT && i + 2 < t.n &&
               t.v[i + 1].kind == PG_QUERY__TOKEN__TYPECAST && is_ident(sql, &t, i + 2, "tid")) {
      /* column::tid (a column of '(p,o)' text) -> its rowid */
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      sql_strbuf_add(&b, "mr_tid_rowid(");
      sql_strbuf_addn(&b, sql + k->start, (size_t)(k->end - k->start));
      sql_strbuf_add(&b, ")");
      copied = t.v[i + 2].end;
      i += 2;
      continue;
    } else if (has_ctid && k->kind == PG_QUERY__TOKEN__SCONST && tid_context(sql, &t, i)) {
      long long v;
      if (tid_literal(sql + k->start, (size_t)(k->end - k->start), &v)) {
        snprintf(num, sizeof num, "%lld", v);
        rep = num;
      }
    } else if (has_ctid && k->kind == PG_QUERY__TOKEN__TYPECAST &&
               is_ident(sql, &t, i + 1, "tid")) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      copied = t.v[i + 1].end;
      i++;
      continue;
    }
    if (skip_to >= 0) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      copied = skip_to;
      i += 1; /* the '.'; the name itself is handled next round */
      continue;
    }
    if (rep) {
      sql_strbuf_addn(&b, sql + copied, (size_t)(k->start - copied));
      sql_strbuf_add(&b, rep);
      copied = k->end;
    }
  }
  sql_strbuf_add(&b, sql + copied);
  sql_toks_free(&t);
  *out = sql_strbuf_take(&b);
  if (*out == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}
