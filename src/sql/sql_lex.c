/*
 * sql_lex.c — tokens, statement splitting and the small statement parsers
 * of sql_lex.h, on top of libpg_query's scanner (pg_query_scan). It does not
 * parse full SQL: everything that is not a session command goes to DuckDB.
 */
#include "sql/sql_lex.h"
#include "sql/sql_state.h"

#include <ctype.h>
#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sql/sql_util.h"

/* ---- tokens ----------------------------------------------------------- */

mr_status sql_lex_scan(const char *sql, sql_toks *out, sql_error *err) {
  out->v = NULL;
  out->n = 0;
  PgQueryScanResult res = pg_query_scan(sql);
  if (res.error) {
    sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "syntax error: %s", res.error->message);
    pg_query_free_scan_result(res);
    return MR_ERR_INVALID;
  }
  PgQuery__ScanResult *scan =
      pg_query__scan_result__unpack(NULL, res.pbuf.len, (const uint8_t *)res.pbuf.data);
  if (scan == NULL) {
    pg_query_free_scan_result(res);
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "cannot decode scanner output");
  }
  out->v = calloc(scan->n_tokens ? scan->n_tokens : 1, sizeof *out->v);
  if (out->v == NULL) {
    pg_query__scan_result__free_unpacked(scan, NULL);
    pg_query_free_scan_result(res);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < scan->n_tokens; i++) {
    const PgQuery__ScanToken *tk = scan->tokens[i];
    if (tk->token == PG_QUERY__TOKEN__SQL_COMMENT || tk->token == PG_QUERY__TOKEN__C_COMMENT)
      continue;
    sql_tok *t = &out->v[out->n++];
    t->kind = (int)tk->token;
    t->start = tk->start;
    t->end = tk->end;
    t->keyword = tk->keyword_kind != PG_QUERY__KEYWORD_KIND__NO_KEYWORD;
  }
  pg_query__scan_result__free_unpacked(scan, NULL);
  pg_query_free_scan_result(res);
  return MR_OK;
}

void sql_toks_free(sql_toks *t) {
  free(t->v);
  t->v = NULL;
  t->n = 0;
}

bool sql_tok_is(const char *sql, const sql_toks *t, size_t i, const char *word) {
  if (i >= t->n)
    return false;
  const sql_tok *k = &t->v[i];
  size_t len = (size_t)(k->end - k->start);
  if (k->kind == PG_QUERY__TOKEN__SCONST || strlen(word) != len)
    return false;
  if (sql[k->start] == '"')
    return false;
  return strncasecmp(sql + k->start, word, len) == 0;
}

bool sql_tok_punct(const sql_toks *t, size_t i, char c) {
  return i < t->n && t->v[i].kind == (int)(unsigned char)c;
}

/* ---- splitting --------------------------------------------------------- */

static mr_status push_stmt(sql_stmts *out, const char *sql, int from, int to, sql_error *err) {
  char **v = realloc(out->v, (out->n + 1) * sizeof *v);
  if (v == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  out->v = v;
  char *s = sql_strndup(sql + from, (size_t)(to - from));
  if (s == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  out->v[out->n++] = s;
  return MR_OK;
}

mr_status sql_lex_split(const char *sql, sql_stmts *out, sql_error *err) {
  out->v = NULL;
  out->n = 0;
  sql_toks t;
  mr_status rc = sql_lex_scan(sql, &t, err);
  if (rc)
    return rc;
  int first = -1, last_end = 0;
  for (size_t i = 0; i < t.n && rc == MR_OK; i++) {
    if (sql_tok_punct(&t, i, ';')) {
      if (first >= 0)
        rc = push_stmt(out, sql, first, last_end, err);
      first = -1;
      continue;
    }
    if (first < 0)
      first = t.v[i].start;
    last_end = t.v[i].end;
  }
  if (rc == MR_OK && first >= 0)
    rc = push_stmt(out, sql, first, last_end, err);
  sql_toks_free(&t);
  if (rc)
    sql_stmts_free(out);
  return rc;
}

void sql_stmts_free(sql_stmts *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

/* ---- classification ---------------------------------------------------- */

/* Index of the main verb after a leading WITH [RECURSIVE] cte, ... list. */
static size_t main_verb(const char *sql, const sql_toks *t) {
  if (!sql_tok_is(sql, t, 0, "with"))
    return 0;
  int depth = 0;
  for (size_t i = 1; i < t->n; i++) {
    if (sql_tok_punct(t, i, '('))
      depth++;
    else if (sql_tok_punct(t, i, ')'))
      depth--;
    else if (depth == 0 && (sql_tok_is(sql, t, i, "insert") || sql_tok_is(sql, t, i, "update") ||
                            sql_tok_is(sql, t, i, "delete") || sql_tok_is(sql, t, i, "select") ||
                            sql_tok_is(sql, t, i, "values")))
      return i;
  }
  return 0;
}

sql_kind sql_lex_classify(const char *sql, const sql_toks *t) {
  if (t->n == 0)
    return SQL_KIND_NOOP;
  if (sql_tok_is(sql, t, 0, "begin") || sql_tok_is(sql, t, 0, "start"))
    return SQL_KIND_BEGIN;
  if (sql_tok_is(sql, t, 0, "commit") || sql_tok_is(sql, t, 0, "end"))
    return sql_tok_is(sql, t, 1, "prepared") ? SQL_KIND_UNSUPPORTED : SQL_KIND_COMMIT;
  if (sql_tok_is(sql, t, 0, "rollback") || sql_tok_is(sql, t, 0, "abort")) {
    if (sql_tok_is(sql, t, 1, "to") || sql_tok_is(sql, t, 1, "prepared"))
      return SQL_KIND_UNSUPPORTED;
    return SQL_KIND_ROLLBACK;
  }
  if (sql_tok_is(sql, t, 0, "set")) {
    if (sql_tok_is(sql, t, 1, "transaction") ||
        (sql_tok_is(sql, t, 1, "session") && sql_tok_is(sql, t, 2, "characteristics")))
      return SQL_KIND_NOOP;
    return SQL_KIND_SET;
  }
  if (sql_tok_is(sql, t, 0, "show"))
    return SQL_KIND_SHOW;
  if (sql_tok_is(sql, t, 0, "reset"))
    return SQL_KIND_RESET;
  if (sql_tok_is(sql, t, 0, "discard"))
    return SQL_KIND_DISCARD;
  if (sql_tok_is(sql, t, 0, "copy"))
    return SQL_KIND_COPY;
  if (sql_tok_is(sql, t, 0, "deallocate"))
    return SQL_KIND_DEALLOCATE;
  if (sql_tok_is(sql, t, 0, "listen") || sql_tok_is(sql, t, 0, "unlisten") ||
      sql_tok_is(sql, t, 0, "notify"))
    return SQL_KIND_NOOP;
  if (sql_tok_is(sql, t, 0, "savepoint") || sql_tok_is(sql, t, 0, "release") ||
      sql_tok_is(sql, t, 0, "prepare"))
    return SQL_KIND_UNSUPPORTED;
  if (sql_tok_is(sql, t, 0, "create") || sql_tok_is(sql, t, 0, "drop") ||
      sql_tok_is(sql, t, 0, "alter") || sql_tok_is(sql, t, 0, "comment") ||
      sql_tok_is(sql, t, 0, "truncate"))
    return SQL_KIND_DDL;
  size_t v = main_verb(sql, t);
  if (sql_tok_is(sql, t, v, "insert") || sql_tok_is(sql, t, v, "update") ||
      sql_tok_is(sql, t, v, "delete"))
    return SQL_KIND_DML;
  return SQL_KIND_OTHER;
}

char *sql_lex_ddl_tag(const char *sql, const sql_toks *t) {
  /* verb + object word(s), skipping OR REPLACE / TEMP / UNIQUE / IF ... */
  static const char *const skip[] = {"or",       "replace",    "temp", "temporary", "unique",
                                     "unlogged", "if",         "not",  "exists",    "global",
                                     "local",    "persistent", NULL};
  char tag[64];
  size_t n = 0;
  size_t len0 = (size_t)(t->v[0].end - t->v[0].start);
  for (size_t k = 0; k < len0 && n < sizeof tag - 1; k++)
    tag[n++] = (char)toupper((unsigned char)sql[t->v[0].start + (int)k]);
  if (sql_tok_is(sql, t, 0, "truncate") || sql_tok_is(sql, t, 0, "comment")) {
    tag[n] = '\0';
    return sql_strdup(sql_tok_is(sql, t, 0, "truncate") ? "TRUNCATE TABLE" : "COMMENT");
  }
  for (size_t i = 1; i < t->n; i++) {
    bool skipped = false;
    for (size_t s = 0; skip[s]; s++)
      if (sql_tok_is(sql, t, i, skip[s]))
        skipped = true;
    if (skipped)
      continue;
    size_t len = (size_t)(t->v[i].end - t->v[i].start);
    if (n + 1 + len >= sizeof tag)
      break;
    tag[n++] = ' ';
    for (size_t k = 0; k < len; k++)
      tag[n++] = (char)toupper((unsigned char)sql[t->v[i].start + (int)k]);
    if (sql_tok_is(sql, t, i, "materialized"))
      continue; /* MATERIALIZED VIEW */
    break;
  }
  tag[n] = '\0';
  return sql_strdup(tag);
}

bool sql_lex_begin_read_only(const char *sql, const sql_toks *t) {
  for (size_t i = 0; i + 1 < t->n; i++)
    if (sql_tok_is(sql, t, i, "read") && sql_tok_is(sql, t, i + 1, "only"))
      return true;
  return false;
}

/* ---- names and values --------------------------------------------------- */

/* Token i as an identifier: unquoted -> lower case; "quoted" -> as is. */
static char *tok_ident(const char *sql, const sql_toks *t, size_t i) {
  const sql_tok *k = &t->v[i];
  if (sql[k->start] == '"')
    return sql_unquote(sql + k->start, (size_t)(k->end - k->start), '"');
  char *s = sql_strndup(sql + k->start, (size_t)(k->end - k->start));
  if (s)
    for (char *p = s; *p; p++)
      *p = (char)tolower((unsigned char)*p);
  return s;
}

/* Token i as a value: string constants unquoted, anything else verbatim. */
static char *tok_value(const char *sql, const sql_toks *t, size_t i) {
  const sql_tok *k = &t->v[i];
  if (k->kind == PG_QUERY__TOKEN__SCONST && sql[k->start] == '\'')
    return sql_unquote(sql + k->start, (size_t)(k->end - k->start), '\'');
  if (k->kind == PG_QUERY__TOKEN__SCONST && (sql[k->start] == 'E' || sql[k->start] == 'e'))
    return sql_unquote(sql + k->start + 1, (size_t)(k->end - k->start - 1), '\'');
  return sql_strndup(sql + k->start, (size_t)(k->end - k->start));
}

mr_status sql_lex_parse_set(const char *sql, const sql_toks *t, char **name, char **value,
                            sql_error *err) {
  *name = NULL;
  *value = NULL;
  size_t i = 1;
  if (sql_tok_is(sql, t, i, "session") || sql_tok_is(sql, t, i, "local"))
    i++;
  if (sql_tok_is(sql, t, i, "time") && sql_tok_is(sql, t, i + 1, "zone")) {
    *name = sql_strdup("timezone");
    i += 2;
  } else {
    if (i >= t->n)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "syntax error at end of SET");
    /* a.b style names (custom GUCs) */
    size_t start = i;
    while (i + 2 < t->n && sql_tok_punct(t, i + 1, '.'))
      i += 2;
    if (i == start) {
      *name = tok_ident(sql, t, i);
    } else {
      *name = sql_strndup(sql + t->v[start].start, (size_t)(t->v[i].end - t->v[start].start));
      if (*name)
        for (char *p = *name; *p; p++)
          *p = (char)tolower((unsigned char)*p);
    }
    i++;
    if (sql_tok_is(sql, t, i, "to") || sql_tok_punct(t, i, '='))
      i++;
    else
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                      "syntax error in SET: expected TO or =");
  }
  if (*name == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  if (i >= t->n)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "syntax error at end of SET");
  if (sql_tok_is(sql, t, i, "default") || sql_tok_is(sql, t, i, "local"))
    return MR_OK;
  if (i + 1 == t->n) {
    *value = tok_value(sql, t, i);
  } else {
    /* several tokens (a list, a signed number, an interval): keep the text,
     * dropping the quotes of each string constant */
    char buf[1024];
    size_t n = 0;
    for (size_t k = i; k < t->n; k++) {
      char *v = tok_value(sql, t, k);
      if (v == NULL)
        return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      bool glue = sql_tok_punct(t, k, ',') || sql_tok_punct(t, k, '-') || k == i;
      n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, "%s%s",
                            glue ? "" : (sql_tok_punct(t, k - 1, '-') ? "" : " "), v);
      free(v);
      if (n >= sizeof buf)
        return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                        "SET value too long");
    }
    *value = sql_strdup(buf);
  }
  if (*value == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

mr_status sql_lex_parse_name_after(const char *sql, const sql_toks *t, size_t first, char **name,
                                   sql_error *err) {
  *name = NULL;
  if (first >= t->n)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                    "syntax error: a parameter name is expected");
  if (sql_tok_is(sql, t, first, "time") && sql_tok_is(sql, t, first + 1, "zone"))
    *name = sql_strdup("timezone");
  else if (sql_tok_is(sql, t, first, "transaction") && sql_tok_is(sql, t, first + 1, "isolation"))
    *name = sql_strdup("transaction_isolation");
  else
    *name = tok_ident(sql, t, first);
  if (*name == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

/* Reads [catalog.]schema.table / name at *i; advances *i past it. */
static mr_status read_qualified(const char *sql, const sql_toks *t, size_t *i, char **schema,
                                char **table, sql_error *err) {
  *schema = NULL;
  *table = NULL;
  char *parts[3] = {NULL, NULL, NULL};
  size_t np = 0;
  while (*i < t->n && np < 3) {
    if (t->v[*i].kind == PG_QUERY__TOKEN__SCONST || sql_tok_punct(t, *i, '(') ||
        sql_tok_punct(t, *i, ';'))
      break;
    parts[np++] = tok_ident(sql, t, *i);
    (*i)++;
    if (!sql_tok_punct(t, *i, '.'))
      break;
    (*i)++;
  }
  if (np == 0) {
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                    "syntax error: a table name is expected");
  }
  *table = parts[np - 1];
  if (np >= 2)
    *schema = parts[np - 2];
  if (np == 3)
    free(parts[0]);
  if (*table == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

mr_status sql_lex_dml_target(const char *sql, const sql_toks *t, sql_dml_target *out,
                             sql_error *err) {
  memset(out, 0, sizeof *out);
  size_t v = main_verb(sql, t);
  size_t i = v + 1;
  if (sql_tok_is(sql, t, v, "insert")) {
    out->op = SQL_CHANGE_INSERT;
    if (sql_tok_is(sql, t, i, "or")) /* DuckDB INSERT OR REPLACE / IGNORE */
      i += 2;
    if (!sql_tok_is(sql, t, i, "into"))
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                      "syntax error: INSERT without INTO");
    i++;
  } else if (sql_tok_is(sql, t, v, "update")) {
    out->op = SQL_CHANGE_UPDATE;
  } else if (sql_tok_is(sql, t, v, "delete")) {
    out->op = SQL_CHANGE_DELETE;
    if (!sql_tok_is(sql, t, i, "from"))
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                      "syntax error: DELETE without FROM");
    i++;
  } else {
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "not an INSERT, UPDATE or DELETE");
  }
  if (sql_tok_is(sql, t, i, "only"))
    i++;
  mr_status rc = read_qualified(sql, t, &i, &out->schema, &out->table, err);
  if (rc)
    return rc;
  int depth = 0;
  for (size_t k = i; k < t->n; k++) {
    if (sql_tok_punct(t, k, '('))
      depth++;
    else if (sql_tok_punct(t, k, ')'))
      depth--;
    else if (depth == 0 && sql_tok_is(sql, t, k, "returning"))
      out->has_returning = true;
  }
  return MR_OK;
}

void sql_dml_target_free(sql_dml_target *d) {
  free(d->schema);
  free(d->table);
  for (size_t i = 0; i < d->nset_cols; i++)
    free(d->set_cols[i]);
  free(d->set_cols);
  memset(d, 0, sizeof *d);
}

/* ---- COPY ------------------------------------------------------------- */

static mr_status copy_options(const char *sql, const sql_toks *t, size_t i, sql_copy_stmt *c,
                              sql_error *err) {
  if (sql_tok_is(sql, t, i, "with"))
    i++;
  bool paren = sql_tok_punct(t, i, '(');
  if (paren)
    i++;
  while (i < t->n && !sql_tok_punct(t, i, ')') && !sql_tok_punct(t, i, ';')) {
    if (sql_tok_punct(t, i, ',')) {
      i++;
      continue;
    }
    if (sql_tok_is(sql, t, i, "binary")) {
      c->format = SQL_COPY_BINARY;
      i++;
    } else if (sql_tok_is(sql, t, i, "csv")) {
      c->format = SQL_COPY_CSV;
      i++;
    } else if (sql_tok_is(sql, t, i, "format") && i + 1 < t->n) {
      char *f = tok_value(sql, t, i + 1);
      if (f == NULL)
        return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      if (sql[t->v[i + 1].start] == '"') {
        char *u = sql_unquote(f, strlen(f), '"');
        free(f);
        f = u;
        if (f == NULL)
          return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      }
      if (strcasecmp(f, "binary") == 0)
        c->format = SQL_COPY_BINARY;
      else if (strcasecmp(f, "csv") == 0)
        c->format = SQL_COPY_CSV;
      else if (strcasecmp(f, "text") == 0)
        c->format = SQL_COPY_TEXT;
      else {
        sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                 "COPY format \"%s\" not recognized", f);
        free(f);
        return MR_ERR_INVALID;
      }
      free(f);
      i += 2;
    } else if (sql_tok_is(sql, t, i, "null") && i + 1 < t->n) {
      free(c->null_str);
      c->null_str = tok_value(sql, t, i + 1);
      i += 2;
    } else if ((sql_tok_is(sql, t, i, "delimiter") || sql_tok_is(sql, t, i, "delim")) &&
               i + 1 < t->n) {
      char *d = tok_value(sql, t, i + 1);
      c->delim = d && d[0] ? d[0] : c->delim;
      free(d);
      i += 2;
    } else if (sql_tok_is(sql, t, i, "header")) {
      c->header = true;
      i++;
      if (sql_tok_is(sql, t, i, "true") || sql_tok_is(sql, t, i, "on"))
        i++;
      else if (sql_tok_is(sql, t, i, "false") || sql_tok_is(sql, t, i, "off")) {
        c->header = false;
        i++;
      }
    } else {
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "COPY option \"%.*s\" is not supported", t->v[i].end - t->v[i].start,
                      sql + t->v[i].start);
    }
  }
  return MR_OK;
}

mr_status sql_lex_parse_copy(const char *sql, const sql_toks *t, sql_copy_stmt *c, sql_error *err) {
  memset(c, 0, sizeof *c);
  c->delim = '\t';
  size_t i = 1;
  mr_status rc;
  if (sql_tok_punct(t, i, '(')) {
    int depth = 0;
    size_t k = i;
    for (; k < t->n; k++) {
      if (sql_tok_punct(t, k, '('))
        depth++;
      else if (sql_tok_punct(t, k, ')') && --depth == 0)
        break;
    }
    if (k >= t->n)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR,
                      "syntax error in COPY: unbalanced parentheses");
    c->query = sql_strndup(sql + t->v[i + 1].start, (size_t)(t->v[k - 1].end - t->v[i + 1].start));
    if (c->query == NULL)
      return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    i = k + 1;
  } else {
    rc = read_qualified(sql, t, &i, &c->schema, &c->table, err);
    if (rc)
      return rc;
    if (sql_tok_punct(t, i, '(')) {
      i++;
      while (i < t->n && !sql_tok_punct(t, i, ')')) {
        if (!sql_tok_punct(t, i, ',')) {
          char **v = realloc(c->cols, (c->ncols + 1) * sizeof *v);
          if (v == NULL)
            return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
          c->cols = v;
          c->cols[c->ncols] = tok_ident(sql, t, i);
          if (c->cols[c->ncols++] == NULL)
            return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
        }
        i++;
      }
      i++;
    }
  }
  if (sql_tok_is(sql, t, i, "to") && sql_tok_is(sql, t, i + 1, "stdout")) {
    c->from_stdin = false;
  } else if (sql_tok_is(sql, t, i, "from") && sql_tok_is(sql, t, i + 1, "stdin")) {
    c->from_stdin = true;
    if (c->query)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "COPY (query) FROM is not valid");
  } else {
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "only COPY ... TO STDOUT and COPY ... FROM STDIN are supported");
  }
  rc = copy_options(sql, t, i + 2, c, err);
  if (rc)
    return rc;
  if (c->format == SQL_COPY_CSV)
    c->delim = c->delim == '\t' ? ',' : c->delim;
  if (c->null_str == NULL)
    c->null_str = sql_strdup(c->format == SQL_COPY_CSV ? "" : "\\N");
  if (c->null_str == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  if (!c->from_stdin && c->query == NULL) {
    /* COPY t [(cols)] TO STDOUT == COPY (SELECT cols FROM t) TO STDOUT */
    sql_strbuf b = {0};
    sql_strbuf_add(&b, "SELECT ");
    if (c->ncols == 0)
      sql_strbuf_add(&b, "*");
    for (size_t k = 0; k < c->ncols; k++) {
      char *q = sql_quote_ident(c->cols[k]);
      sql_strbuf_addf(&b, "%s%s", k ? ", " : "", q ? q : "");
      free(q);
    }
    char *qt = sql_quote_ident(c->table);
    if (c->schema) {
      char *qs = sql_quote_ident(c->schema);
      sql_strbuf_addf(&b, " FROM %s.%s", qs ? qs : "", qt ? qt : "");
      free(qs);
    } else {
      sql_strbuf_addf(&b, " FROM %s", qt ? qt : "");
    }
    free(qt);
    c->query = sql_strbuf_take(&b);
    if (c->query == NULL)
      return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  return MR_OK;
}

void sql_copy_stmt_free(sql_copy_stmt *c) {
  free(c->query);
  free(c->schema);
  free(c->table);
  for (size_t i = 0; i < c->ncols; i++)
    free(c->cols[i]);
  free(c->cols);
  free(c->null_str);
  memset(c, 0, sizeof *c);
}

char *sql_quote_ident(const char *name) {
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "\"");
  for (const char *p = name; *p; p++)
    sql_strbuf_addf(&b, "%s", *p == '"' ? "\"\"" : (char[]){*p, 0});
  sql_strbuf_add(&b, "\"");
  return sql_strbuf_take(&b);
}
