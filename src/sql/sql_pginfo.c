/*
 * sql_pginfo.c — the postgres extension's statements moraine answers in
 * its own way, recognized by the digest of their normalized tokens (see
 * sql_pginfo.h), and the engine text that answers each.
 */
#include "sql/sql_pginfo.h"

#include <ctype.h>
#include <openssl/sha.h>
#include <pg_query/pg_query.pb-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_lex.h"
#include "sql/sql_relcache.h"
#include "sql/sql_state.h"
#include "sql/sql_util.h"

/* SHA-256 of the normalized texts DuckDB 1.5.5's postgres extension sends:
 * its table lookup for one table, for every table of some schemas, and for
 * every table (its catalog load); its enum and composite type loads. A
 * client whose text differs is answered by the views, correctly and as
 * slowly as before; tests/e2e/test_pginfo.py checks that the installed
 * extension's statements are recognized. */
static const struct {
  const char *digest;
  sql_known_kind kind;
} known_digests[] = {
    {"4168f9d5a607792ff1d5089c6f0c3c5b0827c3693e0551344b36c6c4c30761e4", SQL_KNOWN_TABLE_LOOKUP},
    {"1cfdfabeed872a99868f24dfb829f1558cedc7d8416ffa6f8d4b805205c74d9a", SQL_KNOWN_TABLE_LOOKUP},
    {"ff8efdc25809c6954c980048922b536e7776400c1eba1fc78887cb7d25d7137c", SQL_KNOWN_TABLE_LOOKUP},
    {"ea4283662f46fd656861b83b19d581c9c9a5ff87bd46552e73f433b9b9cc2e71", SQL_KNOWN_EMPTY}, /* enums */
    {"6d28940bd12a53cc7750d3213b01697699048c85934956b2796755b31aa09ed9", SQL_KNOWN_EMPTY}, /* composites */
};

typedef struct norm {
  sql_strbuf text;
  sql_known_query found;
  bool have_schemas, have_relname;
  bool plain; /* every filter value a plain constant, equal in both arms */
} norm;

/* A plain '...' constant's value ('' is one quote), or NULL (E'', U&'',
 * adjacent constants, or out of memory). */
static char *plain_string(const char *sql, const sql_tok *t) {
  const char *p = sql + t->start, *end = sql + t->end;
  if (t->kind != PG_QUERY__TOKEN__SCONST || end - p < 2 || p[0] != '\'' || end[-1] != '\'')
    return NULL;
  sql_strbuf b = {0};
  for (p++, end--; p < end; p++) {
    if (*p == '\'') {
      if (p + 1 >= end || p[1] != '\'') {
        sql_strbuf_free(&b);
        return NULL;
      }
      p++;
    }
    sql_strbuf_add_u8(&b, (uint8_t)*p);
  }
  return sql_strbuf_take(&b);
}

static void add_token(norm *n, const char *sql, const sql_tok *t) {
  const char *p = sql + t->start;
  bool fold = (t->kind == PG_QUERY__TOKEN__IDENT && *p != '"') || t->keyword;
  if (n->text.len)
    sql_strbuf_add_u8(&n->text, ' ');
  for (; p < sql + t->end; p++)
    sql_strbuf_add_u8(&n->text, (uint8_t)(fold ? tolower((unsigned char)*p) : *p));
}

/* `nspname IN ('a', ...)` at token i: the values, and the index past `)`;
 * 0 when the shape is not there. */
static size_t in_list(const char *sql, const sql_toks *t, size_t i, norm *n) {
  if (!sql_tok_is(sql, t, i, "nspname") || !sql_tok_is(sql, t, i + 1, "in") ||
      !sql_tok_punct(t, i + 2, '('))
    return 0;
  char **vals = NULL;
  size_t nvals = 0, k = i + 3;
  bool ok = true;
  for (;;) {
    char *v = k < t->n ? plain_string(sql, &t->v[k]) : NULL;
    char **grown = v ? realloc(vals, (nvals + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
      free(v);
      ok = false;
      break;
    }
    vals = grown;
    vals[nvals++] = v;
    bool last = sql_tok_punct(t, k + 1, ')');
    if (!last && !sql_tok_punct(t, k + 1, ',')) {
      ok = false;
      break;
    }
    k += 2;
    if (last)
      break;
  }
  if (ok && n->have_schemas) { /* the second arm's: the same list */
    ok = nvals == n->found.nschemas;
    for (size_t j = 0; ok && j < nvals; j++)
      ok = strcmp(vals[j], n->found.schemas[j]) == 0;
  }
  if (ok && !n->have_schemas) {
    n->found.schemas = vals;
    n->found.nschemas = nvals;
    n->have_schemas = true;
    vals = NULL;
    nvals = 0;
  }
  for (size_t j = 0; j < nvals; j++)
    free(vals[j]);
  free(vals);
  if (!ok)
    n->plain = false;
  return ok ? k : 0;
}

/* `relname = '...'` at token i: the index past it, or 0. */
static size_t relname_eq(const char *sql, const sql_toks *t, size_t i, norm *n) {
  if (!sql_tok_is(sql, t, i, "relname") || !sql_tok_punct(t, i + 1, '=') || i + 2 >= t->n)
    return 0;
  char *v = plain_string(sql, &t->v[i + 2]);
  bool ok = v != NULL;
  if (ok && n->have_relname)
    ok = strcmp(v, n->found.relname) == 0;
  if (ok && !n->have_relname) {
    n->found.relname = v;
    n->have_relname = true;
    v = NULL;
  }
  free(v);
  if (!ok)
    n->plain = false;
  return ok ? i + 3 : 0;
}

/* The normalized text of stmt into n; false when it does not scan. */
static bool normalize(const char *stmt, norm *n) {
  sql_toks t;
  sql_error err;
  if (sql_lex_scan(stmt, &t, &err) != MR_OK)
    return false;
  n->plain = true;
  for (size_t i = 0; i < t.n;) {
    size_t next;
    if ((next = in_list(stmt, &t, i, n)) != 0) {
      sql_strbuf_add(&n->text, n->text.len ? " nspname in ( ? )" : "nspname in ( ? )");
    } else if ((next = relname_eq(stmt, &t, i, n)) != 0) {
      sql_strbuf_add(&n->text, n->text.len ? " relname = ?" : "relname = ?");
    } else {
      add_token(n, stmt, &t.v[i]);
      next = i + 1;
    }
    i = next;
  }
  sql_toks_free(&t);
  return true;
}

static void norm_free(norm *n) {
  sql_strbuf_free(&n->text);
  sql_known_query_free(&n->found);
}

static bool digest_of(norm *n, char hex[65]) {
  char *text = sql_strbuf_take(&n->text);
  if (text == NULL)
    return false;
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)text, strlen(text), md);
  free(text);
  for (size_t i = 0; i < sizeof md; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return true;
}

bool sql_pginfo_digest(const char *stmt, char hex[65]) {
  norm n = {0};
  bool ok = normalize(stmt, &n) && digest_of(&n, hex);
  norm_free(&n);
  return ok;
}

bool sql_pginfo_match(const char *stmt, sql_known_query *out) {
  memset(out, 0, sizeof *out);
  /* the cheap test first: most statements are never scanned again */
  if (strstr(stmt, "pg_enum") == NULL &&
      (strstr(stmt, "pg_attribute") == NULL ||
       (strstr(stmt, "pg_constraint") == NULL && strstr(stmt, "typtype") == NULL)))
    return false;
  norm n = {0};
  char hex[65];
  /* out of memory on the way is no match: DuckDB runs the statement */
  if (normalize(stmt, &n) && n.plain && digest_of(&n, hex))
    for (size_t i = 0; i < sizeof known_digests / sizeof known_digests[0]; i++)
      if (strcmp(hex, known_digests[i].digest) == 0) {
        if (known_digests[i].kind == SQL_KNOWN_TABLE_LOOKUP) {
          *out = n.found;
          memset(&n.found, 0, sizeof n.found);
        }
        out->kind = known_digests[i].kind;
        break;
      }
  norm_free(&n);
  return out->kind != SQL_KNOWN_NONE;
}

char *sql_pginfo_call(const sql_known_query *q, const char *stmt) {
  sql_strbuf b = {0};
  if (q->kind == SQL_KNOWN_EMPTY) {
    sql_strbuf_addf(&b, "SELECT * FROM (%s) AS moraine_known_empty WHERE false", stmt);
    return sql_strbuf_take(&b);
  }
  sql_strbuf_add(&b, "SELECT * FROM " SQL_PG_TABLE_INFO_FN "(");
  bool ok = true;
  for (size_t i = 0; i < q->nschemas; i++) {
    char *lit = sql_quote_literal(q->schemas[i]);
    ok = ok && lit != NULL;
    sql_strbuf_addf(&b, "%s%s", i ? ", " : "[", lit ? lit : "''");
    free(lit);
  }
  char *r = q->relname ? sql_quote_literal(q->relname) : NULL;
  ok = ok && (q->relname == NULL || r != NULL);
  sql_strbuf_addf(&b, "%s::VARCHAR[], %s)", q->schemas ? "]" : "NULL", r ? r : "NULL");
  free(r);
  char *sql = sql_strbuf_take(&b);
  if (!ok) {
    free(sql);
    return NULL;
  }
  return sql;
}

void sql_known_query_free(sql_known_query *l) {
  for (size_t i = 0; i < l->nschemas; i++)
    free(l->schemas[i]);
  free(l->schemas);
  free(l->relname);
  memset(l, 0, sizeof *l);
}
