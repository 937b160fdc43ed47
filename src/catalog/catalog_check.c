/*
 * catalog_check.c — the load-back guarantee of the commit path: a commit
 * whose rows the start-up load could not put back is refused before it is
 * written, so no client input can leave a store that does not start.
 *
 * What is at risk: inlined data rows (ducklake_inlined_data_{T}_{V}) are
 * stored verbatim — DuckDB's text form of each value, raw bytes for BLOB /
 * pg_bytea — and the load casts that text back to the column's type
 * (sql_load.c: CAST(text AS <type>)). Rows of the 28 catalog tables are not:
 * their cells are parsed into typed fields at commit (catalog_set_field
 * refuses bad text) and printed back by catalog_get_field.
 *
 * The check runs that same cast on the captured values of every column of
 * an inlined row the commit puts (INSERT / UPDATE) whose type is not
 * trivially text-safe: one engine statement for the whole commit, a part per
 * column. Integer types, VARCHAR, BOOLEAN, UUID and BLOB-backed columns are
 * text-safe (their text is the canonical form the cast reads back), so a
 * commit that only touches such columns — every catalog table, and inlined
 * tables of plain types — makes no engine call at all. When the statement
 * fails, its parts are run one by one to name the column; the commit is
 * refused with 22P02 naming table, column and type.
 */
#include "catalog/catalog_internal.h"
#include "sql/sql_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mr_grow.h"

/* Types whose captured text always casts back (case-insensitive names as
 * duckdb_columns() spells them). */
static const char *const TEXT_SAFE[] = {
    "BIGINT",   "INTEGER",  "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER", "USMALLINT",
    "UTINYINT", "UHUGEINT", "VARCHAR",  "BOOLEAN", "UUID",    "BLOB",    "pg_bytea",
};

static bool text_safe(const char *type) {
  for (size_t i = 0; i < sizeof TEXT_SAFE / sizeof TEXT_SAFE[0]; i++)
    if (strcasecmp(type, TEXT_SAFE[i]) == 0)
      return true;
  return false;
}

/* A growing string; `failed` is sticky after an allocation failure. */
typedef struct sbuf {
  char *data;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
  if (b->failed || mr_grow((void **)&b->data, &b->cap, b->len + n + 1, 256) != MR_OK) {
    b->failed = true;
    return;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_add(sbuf *b, const char *s) {
  sb_addn(b, s, strlen(s));
}

static void sb_truncate(sbuf *b, size_t len) {
  if (b->data && len < b->len) {
    b->len = len;
    b->data[len] = '\0';
  }
}

/* s as a SQL string literal: quotes doubled. */
static void sb_add_literal(sbuf *b, const char *s, size_t n) {
  sb_add(b, "'");
  size_t from = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\'') {
      sb_addn(b, s + from, i + 1 - from);
      sb_add(b, "'");
      from = i + 1;
    }
  }
  sb_addn(b, s + from, n - from);
  sb_add(b, "'");
}

/*
 * The type as sql_engine_exec_data must be given it: the engine's statement
 * rewrite reads PostgreSQL's FLOAT as DOUBLE, so DuckDB's FLOAT (4 bytes)
 * is spelled REAL, its other name. Quoted identifiers (STRUCT field names)
 * are copied as they are.
 */
static void sb_add_type(sbuf *b, const char *type) {
  const char *p = type;
  while (*p) {
    if (*p == '"') {
      const char *q = p + 1;
      while (*q && !(*q == '"' && q[1] != '"'))
        q += *q == '"' ? 2 : 1;
      if (*q)
        q++;
      sb_addn(b, p, (size_t)(q - p));
      p = q;
      continue;
    }
    bool start = p == type || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9'));
    /* p[5] is read only once the five letters matched (so p[5] exists) */
    bool word = start && strncasecmp(p, "FLOAT", 5) == 0;
    char after = word ? p[5] : '\0';
    bool end = !(after == '_' || (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
                 (after >= '0' && after <= '9'));
    if (word && end) {
      sb_add(b, "REAL");
      p += 5;
      continue;
    }
    sb_addn(b, p, 1);
    p++;
  }
}

/* One column to check: batch b, column i. */
typedef struct part {
  const sql_change_batch *b;
  size_t col;
} part;

/* "SELECT count(CAST(v AS T)) FROM (VALUES ('..'), ...) AS x(v)" for the
 * non-NULL values of column p; false when the column has none. */
static bool add_part(sbuf *sql, const part *p, mr_error *err) {
  const sql_change_batch *b = p->b;
  size_t start = sql->len;
  bool any = false;
  for (size_t r = 0; r < b->nrows; r++) {
    const sql_value *v = &b->values[r * b->ncols + p->col];
    if (v->is_null)
      continue;
    if (memchr(v->data, '\0', v->len)) {
      mr_fail(err, MR_ERR_INVALID, "a value holds a NUL byte");
      return false;
    }
    sb_add(sql, any ? ", (" : "SELECT count(CAST(v AS ");
    if (!any) {
      sb_add_type(sql, b->col_types[p->col]);
      sb_add(sql, ")) FROM (VALUES (");
    }
    sb_add_literal(sql, v->data, v->len);
    sb_add(sql, ")");
    any = true;
  }
  if (any)
    sb_add(sql, ") AS x(v)");
  else
    sb_truncate(sql, start);
  return any;
}

static mr_status refuse(sql_error *err, const part *p, const char *why) {
  return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                  "moraine: %s.%s (%s): a value would not load back into its column, so the "
                  "commit is refused: %s",
                  p->b->table, p->b->col_names[p->col], p->b->col_types[p->col], why);
}

/* The columns of inlined rows this commit puts whose type is not text-safe. */
static mr_status gather(const sql_changes *ch, part **out, size_t *n, sql_error *err) {
  size_t cap = 0; /* bytes, as mr_grow counts */
  *out = NULL;
  *n = 0;
  for (size_t i = 0; i < ch->nbatches; i++) {
    const sql_change_batch *b = &ch->batches[i];
    int64_t tid, ver;
    if (b->op == SQL_CHANGE_DDL || b->op == SQL_CHANGE_DELETE || b->nrows == 0 ||
        !cat_inline_data_name(b->table, &tid, &ver))
      continue;
    for (size_t c = 0; c < b->ncols; c++) {
      if (text_safe(b->col_types[c]))
        continue;
      if (mr_grow((void **)out, &cap, (*n + 1) * sizeof **out, 8 * sizeof **out) != MR_OK) {
        free(*out);
        *out = NULL;
        return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      }
      (*out)[(*n)++] = (part){b, c};
    }
  }
  return MR_OK;
}

mr_status cat_check_loadable(catalog *c, const sql_changes *ch, sql_error *err) {
  part *parts;
  size_t nparts;
  mr_status rc = gather(ch, &parts, &nparts, err);
  if (rc || nparts == 0)
    return rc;
  sbuf sql = {0};
  mr_error why;
  mr_error_clear(&why);
  for (size_t i = 0; i < nparts; i++) {
    size_t before = sql.len;
    if (before)
      sb_add(&sql, " UNION ALL ");
    if (!add_part(&sql, &parts[i], &why)) {
      if (why.code) {
        rc = refuse(err, &parts[i], why.msg);
        break;
      }
      sb_truncate(&sql, before); /* all NULL: nothing to check */
    }
  }
  if (!rc && sql.failed)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  sql_error se;
  memset(&se, 0, sizeof se);
  if (!rc && sql.len && sql_engine_exec_data(c->e, sql.data, &se) != MR_OK) {
    /* name the column: the first part that fails on its own */
    for (size_t i = 0; !rc && i < nparts; i++) {
      sbuf one = {0};
      sql_error pe;
      memset(&pe, 0, sizeof pe);
      if (add_part(&one, &parts[i], &why) && !one.failed &&
          sql_engine_exec_data(c->e, one.data, &pe) != MR_OK)
        rc = refuse(err, &parts[i], pe.base.msg);
      free(one.data);
    }
    if (!rc)
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                    "moraine: inlined rows would not load back, so the commit is refused: %s",
                    se.base.msg);
  }
  free(sql.data);
  free(parts);
  return rc;
}
