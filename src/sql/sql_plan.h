/*
 * sql_plan.h — the first stage of the SQL front: a client's query string in,
 * one admitted plan per statement out, or a refusal.
 *
 * Every statement is parsed by libpg_query (PostgreSQL's own grammar) and the
 * parse tree, not the statement's words, decides what it is. The planner
 * walks the whole tree and admits the statement only when
 *   - its shape (statement node and options) is a row of the admission table
 *     (sql_admit.h), and
 *   - every relation it names and every function it calls is one the
 *     admission table lets a client reach, and
 *   - its DDL, if any, has the shape DuckLake gives its own tables.
 * Anything else is refused with SQLSTATE 42501 (not allowed) or 0A000
 * (PostgreSQL syntax moraine does not support) and a message naming the
 * statement, relation or function; nothing has run when that happens.
 *
 * A query string is admitted whole or not at all: PostgreSQL parses a whole
 * simple-query string before running any of it, and moraine also plans it
 * whole, so a refused statement never leaves its predecessors half-run.
 *
 * Checks that need catalog state (an inlined table's table id exists) are
 * not made here: the plan carries what the executor checks (sql_session.c).
 *
 * Ownership: sql_plans and everything in them belong to the caller and are
 * released with sql_plans_free. Strings are NUL-terminated heap copies.
 */
#ifndef MR_SQL_PLAN_H
#define MR_SQL_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "sql/sql.h"
#include "sql/sql_history.h"
#include "sql/sql_lex.h"
#include "sql/sql_pginfo.h"

/* What DDL an admitted CREATE / DROP is, once the tree has been read. */
typedef enum sql_ddl_kind {
  SQL_DDL_NONE = 0,
  SQL_DDL_CREATE_SCHEMA, /* a metadata schema (CREATE SCHEMA [IF NOT EXISTS]) */
  SQL_DDL_CREATE_TABLE,  /* a DuckLake table DuckLake creates: name fixes its class */
  SQL_DDL_CREATE_TEMP,   /* a session temporary table (never persisted) */
  SQL_DDL_DROP_TABLE,    /* an inlined data / delete table, or a temp table */
} sql_ddl_kind;

/* The class of a table DuckLake creates, from its name. */
typedef enum sql_table_class {
  SQL_TABLE_OTHER = 0,
  SQL_TABLE_SPEC,           /* ducklake_<spec table>, existing already */
  SQL_TABLE_INLINED_DATA,   /* ducklake_inlined_data_{table_id}_{schema_version} */
  SQL_TABLE_INLINED_DELETE, /* ducklake_inlined_delete_{table_id} */
} sql_table_class;

typedef struct sql_ddl_column {
  char *name;
  char *type; /* the type as written, lower case, e.g. "bigint", "varchar[]" */
} sql_ddl_column;

typedef struct sql_ddl {
  sql_ddl_kind kind;
  char *schema; /* NULL when not qualified */
  char *name;
  bool if_not_exists; /* CREATE ... IF NOT EXISTS / DROP ... IF EXISTS */
  bool on_commit_drop;
  sql_table_class table_class;
  int64_t table_id;       /* inlined tables: the DuckLake table id */
  int64_t schema_version; /* inlined data tables: the schema version */
  size_t ncols;
  sql_ddl_column *cols;
} sql_ddl;

typedef struct sql_plan {
  sql_kind kind;        /* how the session runs it */
  const char *shape;    /* the admission-table row that admitted it */
  char *text;           /* this statement's own text, trimmed */
  char *tag;            /* PostgreSQL's command tag for it ("CREATE TABLE", ...) */
  sql_dml_target dml;   /* SQL_KIND_DML: target and RETURNING */
  sql_ddl ddl;          /* SQL_KIND_DDL */
  bool begin_read_only; /* SQL_KIND_BEGIN: READ ONLY requested */
  sql_hist_needs hist;  /* the catalog history it may read (sql_history.h) */
  sql_copy_stmt copy;   /* SQL_KIND_COPY: its direction, query or target, options */
  char *dealloc_name;   /* SQL_KIND_DEALLOCATE: the statement, NULL for ALL */
  sql_known_query known; /* a SELECT the session answers in its own way (sql_pginfo.h) */
  /* It names only catalog and pg_catalog relations (and its own CTEs) and
   * calls only PURE and TABLES functions (sql_admit.h): as a read, its
   * answer depends on nothing but the catalog's committed rows and tables,
   * so a result may be kept (sql_rcache.h). */
  bool pure;
} sql_plan;

typedef struct sql_plans {
  sql_plan *v;
  size_t n;
} sql_plans;

/* What the planner may ask of the session: is `name` one of its temporary
 * tables? (Temporary tables are session scratch space and may be named.) */
typedef struct sql_plan_env {
  void *ctx;
  bool (*is_temp_table)(void *ctx, const char *name);
} sql_plan_env;

/*
 * Parses `query` (one or many statements) and admits every statement, or
 * refuses the whole string: 42601 for a syntax error, 42501 / 0A000 for a
 * refused statement. On MR_OK `out` holds one plan per statement, in order
 * (none for an empty string). env may be NULL (no temporary tables).
 */
mr_status sql_plan_query(const char *query, const sql_plan_env *env, sql_plans *out,
                         sql_error *err) MR_MUST_CHECK;
void sql_plans_free(sql_plans *p);

#endif /* MR_SQL_PLAN_H */
