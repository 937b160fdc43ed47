/*
 * sql_admit.c — lookups over the admission table of sql_admit.h and its
 * Markdown form. Holds no policy of its own beyond the name rules stated in
 * the header: the tables are the policy.
 */
#include "sql/sql_admit.h"

#include <string.h>
#include <strings.h>

static bool in_list(const char *const *list, const char *name) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], name) == 0)
      return true;
  return false;
}

#define PURE true
#define TABLES true
#define SESSION false
typedef struct admit_fn {
  const char *name;
  bool pure;
} admit_fn;
#define FN_ROW(name, result, who) {name, result},
static const admit_fn functions[] = {SQL_ADMIT_FUNCTIONS(FN_ROW){NULL, false}};
#undef FN_ROW
#undef PURE
#undef TABLES
#undef SESSION

#define NAME_OF(name) name,
static const char *const column_types[] = {SQL_ADMIT_COLUMN_TYPES(NAME_OF) NULL};

static const char *const pg_relations[] = {SQL_ADMIT_PG_RELATIONS(NAME_OF) NULL};
#undef NAME_OF

/* The embedded engine's own databases and schemas: a client naming one
 * could reach moraine's pg_catalog tables or DuckDB's system catalog. */
static const char *const reserved_schemas[] = {
    "main", "temp", "pg_temp", "system", "memory", "mrpg", "information_schema", NULL};

bool sql_admit_function(const char *name, bool *pure) {
  for (size_t i = 0; functions[i].name; i++)
    if (strcmp(functions[i].name, name) == 0) {
      if (pure)
        *pure = functions[i].pure;
      return true;
    }
  return false;
}

bool sql_admit_column_type(const char *type) {
  return in_list(column_types, type);
}

bool sql_admit_reserved_schema(const char *name) {
  return strncasecmp(name, "pg_", 3) == 0 || strncasecmp(name, "duckdb", 6) == 0 ||
         in_list(reserved_schemas, name);
}

/* ducklake_ then lower-case letters, digits and underscores only: such a
 * name can never be taken by DuckDB for a file path (replacement scans). */
static bool catalog_name(const char *name) {
  size_t n = strlen(SQL_ADMIT_CATALOG_PREFIX);
  if (strncmp(name, SQL_ADMIT_CATALOG_PREFIX, n) != 0 || name[n] == '\0')
    return false;
  for (const char *p = name + n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

sql_admit_rel sql_admit_relation(const char *schema, const char *name) {
  if (schema == NULL || strcmp(schema, "pg_catalog") == 0) {
    if (in_list(pg_relations, name))
      return SQL_REL_PG_CATALOG;
    if (schema != NULL)
      return SQL_REL_REFUSED;
  } else if (sql_admit_reserved_schema(schema)) {
    return SQL_REL_REFUSED;
  }
  return catalog_name(name) ? SQL_REL_CATALOG : SQL_REL_REFUSED;
}

/* ---- the document ------------------------------------------------------- */

void sql_admit_write_markdown(FILE *f) {
  fprintf(f, "| shape | statement | admitted when |\n|---|---|---|\n");
#define ROW(shape, node, what) fprintf(f, "| `%s` | `%s` | %s |\n", shape, #node, what);
  SQL_ADMIT_STATEMENTS(ROW)
#undef ROW
  fprintf(f, "\nRefused with SQLSTATE 0A000 (PostgreSQL syntax moraine does not implement):");
#define UNSUP(node) fprintf(f, " `%s`", #node);
  SQL_ADMIT_UNSUPPORTED(UNSUP)
#undef UNSUP
  fprintf(f, ".\nEvery other statement is refused with SQLSTATE 42501.\n");
  fprintf(f, "\n| function | result depends on | sent by |\n|---|---|---|\n");
#define PURE "its arguments"
#define TABLES "also the catalog's committed tables"
#define SESSION "also the session, the clock or state outside the catalog's rows"
#define FN(name, result, who) fprintf(f, "| `%s` | %s | %s |\n", name, result, who);
  SQL_ADMIT_FUNCTIONS(FN)
#undef FN
#undef PURE
#undef TABLES
#undef SESSION
  fprintf(f, "\npg_catalog relations (read only):");
#define REL(name) fprintf(f, " `%s`", name);
  SQL_ADMIT_PG_RELATIONS(REL)
#undef REL
  fprintf(f, ".\nTheir rows are constants, or follow the catalog's committed tables, which"
             " change only with a commit: a read of them is pure (its answer may be kept,"
             " docs/pgwire.md \"Result cache\"), as is a call of a function whose result"
             " depends on its arguments or the catalog's committed tables");
  fprintf(f, ".\n\nInlined data column types:");
#define TYPE(name) fprintf(f, " `%s`", name);
  SQL_ADMIT_COLUMN_TYPES(TYPE)
#undef TYPE
  fprintf(f, ".\n");
}
