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
 * trivially text-safe: one engine check per inlined table in the commit,
 * on a statement prepared once per list of column types
 * (sql_engine_check_casts, sql_castcheck.h). Integer types, VARCHAR,
 * BOOLEAN, UUID and BLOB-backed columns are text-safe (their text is the
 * canonical form the cast reads back), so a commit that only touches such
 * columns — every catalog table, and inlined tables of plain types — makes
 * no engine call at all. A value that does not cast refuses the commit with
 * 22P02 naming table, column and type.
 */
#include "catalog/catalog_internal.h"
#include "sql/sql_state.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* The columns of b whose type is not text-safe, as cast checks; *n = 0
 * when b puts no inlined rows. */
static mr_status gather(const sql_change_batch *b, sql_cast_column **out, size_t **cols, size_t *n,
                        sql_error *err) {
  int64_t tid, ver;
  *out = NULL;
  *cols = NULL;
  *n = 0;
  if (b->op == SQL_CHANGE_DDL || b->op == SQL_CHANGE_DELETE || b->nrows == 0 ||
      !cat_inline_data_name(b->table, &tid, &ver))
    return MR_OK;
  for (size_t c = 0; c < b->ncols; c++) {
    if (text_safe(b->col_types[c]))
      continue;
    if (*out == NULL && ((*out = calloc(b->ncols, sizeof **out)) == NULL ||
                         (*cols = calloc(b->ncols, sizeof **cols)) == NULL)) {
      free(*out);
      *out = NULL;
      return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    }
    (*out)[*n] = (sql_cast_column){b->col_types[c], b->values + c, b->ncols, b->nrows};
    (*cols)[(*n)++] = c;
  }
  return MR_OK;
}

mr_status cat_check_loadable(catalog *c, const sql_changes *ch, sql_error *err) {
  mr_status rc = MR_OK;
  for (size_t i = 0; !rc && i < ch->nbatches; i++) {
    const sql_change_batch *b = &ch->batches[i];
    sql_cast_column *casts;
    size_t *cols, n, bad;
    rc = gather(b, &casts, &cols, &n, err);
    if (rc || n == 0)
      continue;
    sql_error why;
    memset(&why, 0, sizeof why);
    if (sql_engine_check_casts(c->e, n, casts, &bad, &why) != MR_OK) {
      if (why.base.code == MR_ERR_NOMEM)
        rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "%s", why.base.msg);
      else if (bad < n)
        rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                      "moraine: %s.%s (%s): a value would not load back into its column, so the "
                      "commit is refused: %s",
                      b->table, b->col_names[cols[bad]], b->col_types[cols[bad]], why.base.msg);
      else
        rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                      "moraine: %s: inlined rows would not load back, so the commit is refused: %s",
                      b->table, why.base.msg);
    }
    free(casts);
    free(cols);
  }
  return rc;
}
