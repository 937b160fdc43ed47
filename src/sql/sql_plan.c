/*
 * sql_plan.c — parse tree to plan (sql_plan.h): libpg_query parses the whole
 * query string, each statement's node picks its admission-table row, and a
 * walk over every message of the tree checks each relation and function.
 *
 * The walk is generic: it follows every sub-message field of every message
 * through protobuf-c's descriptors, so no node type of the grammar can hide
 * a relation or a function from it. Only the statement level is a switch,
 * and that switch refuses whatever it does not name.
 */
#include "sql/sql_plan.h"
#include "sql/sql_state.h"

#include <ctype.h>
#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_admit.h"
#include "sql/sql_util.h"

/* Deeper trees are refused (54001) before the walk could exhaust a stack. */
#define PLAN_MAX_DEPTH 1500

/* The parse tree's depth as the tokens bound it, before anything recursive
 * (libpg_query's output, protobuf-c's unpack, the walk) sees the string:
 * about 1 KiB of stack per level there, and a connection thread has 16 MiB. */
#define PLAN_MAX_NESTING 2500

typedef struct planner {
  const sql_plan_env *env;
  sql_error *err;
  const char *stmt; /* the statement's text, for messages */
  char **ctes;      /* WITH names of the statement */
  size_t nctes;
  /* the statement reads something besides catalog rows and tables: a
   * temporary table, a SESSION function (sql_admit.h), CURRENT_*, $n */
  bool impure;
} planner;

static mr_status nomem(sql_error *err) {
  return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
}

static mr_status refuse(planner *p, const char *what) {
  return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_INSUFFICIENT_PRIVILEGE,
                  "moraine does not admit %s: it serves DuckLake's catalog, not arbitrary SQL",
                  what);
}

static const char *str_or_null(const char *s) {
  return s && s[0] ? s : NULL;
}

static const char *node_str(const PgQuery__Node *n) {
  return n && n->node_case == PG_QUERY__NODE__NODE_STRING ? n->string->sval : NULL;
}

static bool is_temp_table(planner *p, const char *name) {
  return p->env && p->env->is_temp_table && p->env->is_temp_table(p->env->ctx, name);
}

static bool is_cte(planner *p, const char *name) {
  for (size_t i = 0; i < p->nctes; i++)
    if (strcmp(p->ctes[i], name) == 0)
      return true;
  return false;
}

/* ---- relations and functions --------------------------------------------- */

static mr_status check_relation(planner *p, const PgQuery__RangeVar *rv, bool write) {
  const char *schema = str_or_null(rv->schemaname), *name = rv->relname ? rv->relname : "";
  char what[200];
  if (str_or_null(rv->catalogname)) {
    snprintf(what, sizeof what, "the cross-database reference \"%s.%s.%s\"", rv->catalogname,
             schema ? schema : "", name);
    return refuse(p, what);
  }
  bool temp_schema = schema && (strcmp(schema, "temp") == 0 || strcmp(schema, "pg_temp") == 0);
  if ((schema == NULL || temp_schema) && is_temp_table(p, name)) {
    p->impure = true;
    return MR_OK;
  }
  if (schema == NULL && !write && is_cte(p, name))
    return MR_OK;
  sql_admit_rel rel = sql_admit_relation(schema, name);
  if (rel == SQL_REL_REFUSED || (write && rel != SQL_REL_CATALOG)) {
    snprintf(what, sizeof what, "%s relation \"%s%s%s\"", write ? "writes to the" : "the",
             schema ? schema : "", schema ? "." : "", name);
    return refuse(p, what);
  }
  return MR_OK;
}

static mr_status check_function(planner *p, const PgQuery__FuncCall *fc) {
  const char *name = fc->n_funcname ? node_str(fc->funcname[fc->n_funcname - 1]) : NULL;
  bool qualified_ok = fc->n_funcname == 1 || (fc->n_funcname == 2 && node_str(fc->funcname[0]) &&
                                              strcmp(node_str(fc->funcname[0]), "pg_catalog") == 0);
  bool pure = false;
  if (name && qualified_ok && sql_admit_function(name, &pure)) {
    if (!pure)
      p->impure = true;
    return MR_OK;
  }
  char what[160];
  snprintf(what, sizeof what, "the function %s%s()", fc->n_funcname > 1 ? "qualified " : "",
           name ? name : "?");
  return refuse(p, what);
}

static mr_status collect_cte(planner *p, const PgQuery__CommonTableExpr *c) {
  if (c->ctename == NULL || is_cte(p, c->ctename))
    return MR_OK;
  char **v = realloc(p->ctes, (p->nctes + 1) * sizeof *v);
  if (v == NULL)
    return nomem(p->err);
  p->ctes = v;
  p->ctes[p->nctes] = sql_strdup(c->ctename);
  if (p->ctes[p->nctes] == NULL)
    return nomem(p->err);
  p->nctes++;
  return MR_OK;
}

/* ---- the walk ---------------------------------------------------------------- */

typedef mr_status (*visit_fn)(planner *p, const ProtobufCMessage *m, int depth);

static mr_status walk(planner *p, const ProtobufCMessage *m, int depth, visit_fn visit);

typedef struct walk_at {
  planner *p;
  int depth;
  visit_fn visit;
} walk_at;

static mr_status walk_child(void *ctx, const ProtobufCMessage *child) {
  walk_at *a = ctx;
  return walk(a->p, child, a->depth + 1, a->visit);
}

/* Calls visit on m and on every message below it, depth first. */
static mr_status walk(planner *p, const ProtobufCMessage *m, int depth, visit_fn visit) {
  if (depth > PLAN_MAX_DEPTH)
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_STATEMENT_TOO_COMPLEX,
                    "statement is too deeply nested");
  mr_status rc = visit(p, m, depth);
  walk_at a = {p, depth, visit};
  return rc ? rc : sql_tree_each_child(m, walk_child, &a);
}

static mr_status visit_ctes(planner *p, const ProtobufCMessage *m, int depth) {
  if (m->descriptor == &pg_query__common_table_expr__descriptor)
    return collect_cte(p, (const PgQuery__CommonTableExpr *)m);
  return MR_OK;
}

/* depth 0 is the statement itself; its own DML target was checked for
 * writing by the caller. */
static mr_status visit_check(planner *p, const ProtobufCMessage *m, int depth) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (d == &pg_query__range_var__descriptor)
    return check_relation(p, (const PgQuery__RangeVar *)m, false);
  if (d == &pg_query__func_call__descriptor)
    return check_function(p, (const PgQuery__FuncCall *)m);
  if (d == &pg_query__sqlvalue_function__descriptor || d == &pg_query__param_ref__descriptor)
    p->impure = true; /* CURRENT_TIMESTAMP, CURRENT_USER, ...; a bound parameter */
  if (depth > 0 &&
      (d == &pg_query__insert_stmt__descriptor || d == &pg_query__update_stmt__descriptor ||
       d == &pg_query__delete_stmt__descriptor || d == &pg_query__merge_stmt__descriptor))
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "data-modifying statements inside another statement are not supported");
  if (d == &pg_query__into_clause__descriptor)
    return refuse(p, "SELECT INTO (it creates a table)");
  if (d == &pg_query__range_table_func__descriptor || d == &pg_query__table_func__descriptor ||
      d == &pg_query__xml_expr__descriptor || d == &pg_query__xml_serialize__descriptor)
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "XML functions are not supported");
  return MR_OK;
}

/* Checks every relation and function of the statement tree `m`. */
static mr_status check_tree(planner *p, const ProtobufCMessage *m) {
  mr_status rc = walk(p, m, 0, visit_ctes);
  return rc ? rc : walk(p, m, 0, visit_check);
}

/* ---- statement shapes ------------------------------------------------------- */

static char *lower_dup(const char *s) {
  char *d = sql_strdup(s);
  if (d)
    for (char *q = d; *q; q++)
      *q = (char)tolower((unsigned char)*q);
  return d;
}

static mr_status set_tag(sql_plan *pl, const char *tag, sql_error *err) {
  pl->tag = sql_strdup(tag);
  return pl->tag ? MR_OK : nomem(err);
}

static mr_status plan_dml(planner *p, const PgQuery__RangeVar *target, int op, size_t nreturning,
                          sql_plan *pl) {
  if (target == NULL)
    return refuse(p, "a data-modifying statement without a target");
  mr_status rc = check_relation(p, target, true);
  if (rc)
    return rc;
  pl->kind = SQL_KIND_DML;
  pl->dml.op = op;
  pl->dml.has_returning = nreturning > 0;
  pl->dml.table = sql_strdup(target->relname);
  if (str_or_null(target->schemaname))
    pl->dml.schema = sql_strdup(target->schemaname);
  if (pl->dml.table == NULL || (str_or_null(target->schemaname) && pl->dml.schema == NULL))
    return nomem(p->err);
  return MR_OK;
}

/* The columns an UPDATE assigns (SET a = .., (b, c) = ..), for the
 * session's check against the columns that identify a stored row. */
static mr_status plan_set_cols(planner *p, const PgQuery__UpdateStmt *u, sql_plan *pl) {
  if (u->n_target_list == 0)
    return MR_OK;
  pl->dml.set_cols = calloc(u->n_target_list, sizeof *pl->dml.set_cols);
  if (pl->dml.set_cols == NULL)
    return nomem(p->err);
  for (size_t i = 0; i < u->n_target_list; i++) {
    const PgQuery__Node *t = u->target_list[i];
    const char *name = t->node_case == PG_QUERY__NODE__NODE_RES_TARGET ? t->res_target->name : NULL;
    if (name == NULL || name[0] == '\0')
      return refuse(p, "an UPDATE assignment without a column name");
    /* lower case: DuckDB resolves column names without regard to case */
    if ((pl->dml.set_cols[pl->dml.nset_cols++] = lower_dup(name)) == NULL)
      return nomem(p->err);
  }
  return MR_OK;
}

static mr_status plan_copy(planner *p, const PgQuery__CopyStmt *c, sql_plan *pl) {
  if (c->is_program || str_or_null(c->filename))
    return refuse(p, "COPY to or from a file or program");
  pl->kind = SQL_KIND_COPY;
  if (c->query && !c->is_from) {
    pl->shape = "copy_out";
    return MR_OK;
  }
  if (c->relation && c->is_from && c->where_clause == NULL) {
    pl->shape = "copy_in";
    return check_relation(p, c->relation, true);
  }
  return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                  "only COPY (query) TO STDOUT and COPY table FROM STDIN are supported");
}

/* The type of a column as libpg_query spells it: last name, lower case. */
static const char *type_base(const PgQuery__TypeName *t) {
  if (t == NULL || t->n_names == 0 || t->setof || t->pct_type)
    return NULL;
  if (t->n_names == 2 &&
      (node_str(t->names[0]) == NULL || strcmp(node_str(t->names[0]), "pg_catalog") != 0))
    return NULL;
  if (t->n_names > 2)
    return NULL;
  return node_str(t->names[t->n_names - 1]);
}

/* A plain column: a name, a type, at most NOT NULL (and, with keys, PRIMARY
 * KEY or UNIQUE); no default, identity, generation, collation or other
 * constraint. */
static bool plain_column(const PgQuery__ColumnDef *c, bool keys) {
  if (c->raw_default || c->cooked_default || str_or_null(c->identity) ||
      str_or_null(c->generated) || c->coll_clause || c->n_fdwoptions)
    return false;
  for (size_t i = 0; i < c->n_constraints; i++) {
    const PgQuery__Node *n = c->constraints[i];
    if (n->node_case != PG_QUERY__NODE__NODE_CONSTRAINT)
      return false;
    PgQuery__ConstrType t = n->constraint->contype;
    bool key =
        t == PG_QUERY__CONSTR_TYPE__CONSTR_PRIMARY || t == PG_QUERY__CONSTR_TYPE__CONSTR_UNIQUE;
    if (t != PG_QUERY__CONSTR_TYPE__CONSTR_NOTNULL && t != PG_QUERY__CONSTR_TYPE__CONSTR_NULL &&
        !(keys && key))
      return false;
  }
  return type_base(c->type_name) != NULL;
}

static bool parse_id(const char **s, int64_t *out) {
  if (!isdigit((unsigned char)**s))
    return false;
  char *end;
  long long v = strtoll(*s, &end, 10);
  if (v < 0 || end - *s > 18)
    return false;
  *out = v;
  *s = end;
  return true;
}

/* Names that start like an inlined table's (the prefix, then a digit) must
 * be one exactly; every other ducklake_ name is a spec table. */
static sql_table_class table_class(const char *name, int64_t *tid, int64_t *ver) {
  static const char data[] = "ducklake_inlined_data_", del[] = "ducklake_inlined_delete_";
  const char *s;
  if (strncmp(name, data, sizeof data - 1) == 0 && isdigit((unsigned char)name[sizeof data - 1])) {
    s = name + sizeof data - 1;
    if (parse_id(&s, tid) && *s == '_' && (s++, parse_id(&s, ver)) && *s == '\0')
      return SQL_TABLE_INLINED_DATA;
    return SQL_TABLE_OTHER;
  }
  if (strncmp(name, del, sizeof del - 1) == 0 && isdigit((unsigned char)name[sizeof del - 1])) {
    s = name + sizeof del - 1;
    return parse_id(&s, tid) && *s == '\0' ? SQL_TABLE_INLINED_DELETE : SQL_TABLE_OTHER;
  }
  return SQL_TABLE_SPEC;
}

/* Does column i have the name and BIGINT type the spec fixes? */
static bool spec_column(const sql_ddl *d, size_t i, const char *name) {
  return i < d->ncols && strcmp(d->cols[i].name, name) == 0 && strcmp(d->cols[i].type, "int8") == 0;
}

static mr_status inline_shape(planner *p, const sql_ddl *d) {
  char what[200];
  if (d->table_class == SQL_TABLE_INLINED_DELETE) {
    if (d->ncols == 3 && spec_column(d, 0, "file_id") && spec_column(d, 1, "row_id") &&
        spec_column(d, 2, "begin_snapshot"))
      return MR_OK;
    snprintf(what, sizeof what, "CREATE TABLE %s with a shape other than DuckLake's", d->name);
    return refuse(p, what);
  }
  if (!spec_column(d, 0, "row_id") || !spec_column(d, 1, "begin_snapshot") ||
      !spec_column(d, 2, "end_snapshot")) {
    snprintf(what, sizeof what, "CREATE TABLE %s with a shape other than DuckLake's", d->name);
    return refuse(p, what);
  }
  for (size_t i = 3; i < d->ncols; i++) {
    char base[64];
    snprintf(base, sizeof base, "%s", d->cols[i].type);
    char *bracket = strchr(base, '[');
    if (bracket)
      *bracket = '\0';
    if (!sql_admit_column_type(base)) {
      snprintf(what, sizeof what, "the column type %s in an inlined data table", d->cols[i].type);
      return refuse(p, what);
    }
  }
  return MR_OK;
}

static mr_status plan_create(planner *p, const PgQuery__CreateStmt *c, sql_plan *pl) {
  const PgQuery__RangeVar *rv = c->relation;
  if (rv == NULL || str_or_null(rv->catalogname) || c->n_inh_relations || c->partbound ||
      c->partspec || c->of_typename || c->n_constraints || c->n_options ||
      str_or_null(c->tablespacename) || str_or_null(c->access_method))
    return refuse(p, "CREATE TABLE with options, inheritance, partitions or table constraints");
  sql_ddl *d = &pl->ddl;
  bool temp = rv->relpersistence && rv->relpersistence[0] == 't';
  d->kind = temp ? SQL_DDL_CREATE_TEMP : SQL_DDL_CREATE_TABLE;
  d->if_not_exists = c->if_not_exists;
  d->on_commit_drop = c->oncommit == PG_QUERY__ON_COMMIT_ACTION__ONCOMMIT_DROP;
  d->name = sql_strdup(rv->relname);
  if (str_or_null(rv->schemaname))
    d->schema = sql_strdup(rv->schemaname);
  /* spec tables only ever re-create an existing table: their keys are moot */
  bool keys = !temp && strncmp(rv->relname, "ducklake_inlined_", 17) != 0;
  d->cols = calloc(c->n_table_elts ? c->n_table_elts : 1, sizeof *d->cols);
  if (d->name == NULL || d->cols == NULL || (str_or_null(rv->schemaname) && d->schema == NULL))
    return nomem(p->err);
  for (size_t i = 0; i < c->n_table_elts; i++) {
    const PgQuery__Node *n = c->table_elts[i];
    if (n->node_case != PG_QUERY__NODE__NODE_COLUMN_DEF || !plain_column(n->column_def, keys))
      return refuse(p, "CREATE TABLE with column defaults, constraints or non-plain columns");
    const PgQuery__TypeName *t = n->column_def->type_name;
    char type[80];
    snprintf(type, sizeof type, "%s%s", type_base(t), t->n_array_bounds ? "[]" : "");
    d->cols[d->ncols].name = sql_strdup(n->column_def->colname);
    d->cols[d->ncols].type = lower_dup(type);
    d->ncols++;
    if (d->cols[d->ncols - 1].name == NULL || d->cols[d->ncols - 1].type == NULL)
      return nomem(p->err);
  }
  pl->kind = SQL_KIND_DDL;
  if (temp) {
    pl->shape = "create_temp";
    if (d->schema && strcmp(d->schema, "pg_temp") != 0 && strcmp(d->schema, "temp") != 0)
      return refuse(p, "a temporary table outside the temporary schema");
    if (sql_admit_relation(NULL, d->name) != SQL_REL_REFUSED)
      return refuse(p, "a temporary table that shadows a catalog or pg_catalog relation");
    /* letters, digits, '_' and '-' (the postgres extension's
     * update_data_<uuid>): never a name DuckDB could take for a file */
    for (const char *ch = d->name; *ch; ch++)
      if (!isalnum((unsigned char)*ch) && *ch != '_' && *ch != '-')
        return refuse(p, "a temporary table whose name is not letters, digits, '_' or '-'");
    return MR_OK;
  }
  if (c->oncommit != PG_QUERY__ON_COMMIT_ACTION__ONCOMMIT_NOOP &&
      c->oncommit != PG_QUERY__ON_COMMIT_ACTION__ON_COMMIT_ACTION_UNDEFINED)
    return refuse(p, "ON COMMIT on a permanent table");
  if (sql_admit_relation(d->schema, d->name) != SQL_REL_CATALOG) {
    char what[160];
    snprintf(what, sizeof what, "CREATE TABLE %s (only DuckLake's own tables may be created)",
             d->name);
    return refuse(p, what);
  }
  d->table_class = table_class(d->name, &d->table_id, &d->schema_version);
  if (d->table_class == SQL_TABLE_OTHER) {
    char what[160];
    snprintf(what, sizeof what, "CREATE TABLE %s (a malformed inlined table name)", d->name);
    return refuse(p, what);
  }
  pl->shape = "create_table";
  return d->table_class == SQL_TABLE_SPEC ? MR_OK : inline_shape(p, d);
}

static mr_status plan_drop(planner *p, const PgQuery__DropStmt *s, sql_plan *pl) {
  if (s->remove_type != PG_QUERY__OBJECT_TYPE__OBJECT_TABLE)
    return refuse(p, "DROP of anything but an inlined or temporary table");
  if (s->n_objects != 1 || s->behavior == PG_QUERY__DROP_BEHAVIOR__DROP_CASCADE || s->concurrent)
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "DROP TABLE of several tables at once or with CASCADE is not supported");
  const PgQuery__Node *obj = s->objects[0];
  if (obj->node_case != PG_QUERY__NODE__NODE_LIST || obj->list->n_items == 0 ||
      obj->list->n_items > 2)
    return refuse(p, "this DROP TABLE");
  const char *schema = obj->list->n_items == 2 ? node_str(obj->list->items[0]) : NULL;
  const char *name = node_str(obj->list->items[obj->list->n_items - 1]);
  if (name == NULL || (obj->list->n_items == 2 && schema == NULL))
    return refuse(p, "this DROP TABLE");
  sql_ddl *d = &pl->ddl;
  d->kind = SQL_DDL_DROP_TABLE;
  d->if_not_exists = s->missing_ok;
  d->name = sql_strdup(name);
  d->schema = schema ? sql_strdup(schema) : NULL;
  if (d->name == NULL || (schema && d->schema == NULL))
    return nomem(p->err);
  pl->kind = SQL_KIND_DDL;
  pl->shape = "drop_table";
  bool temp_schema = schema && (strcmp(schema, "temp") == 0 || strcmp(schema, "pg_temp") == 0);
  if ((schema == NULL || temp_schema) && is_temp_table(p, name))
    return MR_OK;
  d->table_class = sql_admit_relation(schema, name) == SQL_REL_CATALOG
                       ? table_class(name, &d->table_id, &d->schema_version)
                       : SQL_TABLE_OTHER;
  if (d->table_class != SQL_TABLE_INLINED_DATA && d->table_class != SQL_TABLE_INLINED_DELETE) {
    char what[160];
    snprintf(what, sizeof what, "DROP TABLE %s (DuckLake's catalog tables keep their shape)", name);
    return refuse(p, what);
  }
  return MR_OK;
}

static mr_status plan_transaction(planner *p, const PgQuery__TransactionStmt *t, sql_plan *pl) {
  switch (t->kind) {
  case PG_QUERY__TRANSACTION_STMT_KIND__TRANS_STMT_BEGIN:
  case PG_QUERY__TRANSACTION_STMT_KIND__TRANS_STMT_START:
    pl->kind = SQL_KIND_BEGIN;
    for (size_t i = 0; i < t->n_options; i++) {
      const PgQuery__Node *o = t->options[i];
      if (o->node_case == PG_QUERY__NODE__NODE_DEF_ELEM && o->def_elem->defname &&
          strcmp(o->def_elem->defname, "transaction_read_only") == 0 && o->def_elem->arg &&
          o->def_elem->arg->node_case == PG_QUERY__NODE__NODE_A_CONST &&
          o->def_elem->arg->a_const->val_case == PG_QUERY__A__CONST__VAL_IVAL &&
          o->def_elem->arg->a_const->ival->ival != 0)
        pl->begin_read_only = true;
    }
    return set_tag(pl, "BEGIN", p->err);
  case PG_QUERY__TRANSACTION_STMT_KIND__TRANS_STMT_COMMIT:
  case PG_QUERY__TRANSACTION_STMT_KIND__TRANS_STMT_ROLLBACK:
    if (t->chain)
      return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "AND CHAIN is not supported");
    pl->kind = t->kind == PG_QUERY__TRANSACTION_STMT_KIND__TRANS_STMT_COMMIT ? SQL_KIND_COMMIT
                                                                             : SQL_KIND_ROLLBACK;
    return MR_OK;
  default:
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "savepoints and two-phase commit are not supported by moraine");
  }
}

/* The statement-level switch: every admitted node is a case; the default
 * refuses. */
static mr_status plan_node(planner *p, const PgQuery__Node *n, sql_plan *pl) {
  mr_status rc;
  switch (n->node_case) {
  case PG_QUERY__NODE__NODE_SELECT_STMT:
    pl->kind = SQL_KIND_OTHER;
    pl->shape = "select";
    return check_tree(p, &n->select_stmt->base);
  case PG_QUERY__NODE__NODE_INSERT_STMT:
    pl->shape = "insert";
    if (n->insert_stmt->on_conflict_clause)
      return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "INSERT ... ON CONFLICT is not supported");
    rc = plan_dml(p, n->insert_stmt->relation, SQL_CHANGE_INSERT, n->insert_stmt->n_returning_list,
                  pl);
    return rc ? rc : check_tree(p, &n->insert_stmt->base);
  case PG_QUERY__NODE__NODE_UPDATE_STMT:
    pl->shape = "update";
    rc = plan_dml(p, n->update_stmt->relation, SQL_CHANGE_UPDATE, n->update_stmt->n_returning_list,
                  pl);
    if (rc == MR_OK)
      rc = plan_set_cols(p, n->update_stmt, pl);
    return rc ? rc : check_tree(p, &n->update_stmt->base);
  case PG_QUERY__NODE__NODE_DELETE_STMT:
    pl->shape = "delete";
    rc = plan_dml(p, n->delete_stmt->relation, SQL_CHANGE_DELETE, n->delete_stmt->n_returning_list,
                  pl);
    return rc ? rc : check_tree(p, &n->delete_stmt->base);
  case PG_QUERY__NODE__NODE_COPY_STMT:
    rc = plan_copy(p, n->copy_stmt, pl);
    return rc ? rc : check_tree(p, &n->copy_stmt->base);
  case PG_QUERY__NODE__NODE_CREATE_SCHEMA_STMT: {
    const PgQuery__CreateSchemaStmt *c = n->create_schema_stmt;
    if (c->schemaname == NULL || c->schemaname[0] == '\0' || c->n_schema_elts ||
        sql_admit_reserved_schema(c->schemaname))
      return refuse(p, "this CREATE SCHEMA (reserved name, or with elements)");
    pl->kind = SQL_KIND_DDL;
    pl->shape = "create_schema";
    pl->ddl.kind = SQL_DDL_CREATE_SCHEMA;
    pl->ddl.if_not_exists = c->if_not_exists;
    pl->ddl.name = sql_strdup(c->schemaname);
    return pl->ddl.name ? set_tag(pl, "CREATE SCHEMA", p->err) : nomem(p->err);
  }
  case PG_QUERY__NODE__NODE_CREATE_STMT:
    rc = plan_create(p, n->create_stmt, pl);
    return rc ? rc : set_tag(pl, "CREATE TABLE", p->err);
  case PG_QUERY__NODE__NODE_DROP_STMT:
    rc = plan_drop(p, n->drop_stmt, pl);
    return rc ? rc : set_tag(pl, "DROP TABLE", p->err);
  case PG_QUERY__NODE__NODE_TRANSACTION_STMT:
    pl->shape = "transaction";
    return plan_transaction(p, n->transaction_stmt, pl);
  case PG_QUERY__NODE__NODE_VARIABLE_SET_STMT: {
    PgQuery__VariableSetKind k = n->variable_set_stmt->kind;
    pl->shape = "set";
    pl->kind = k == PG_QUERY__VARIABLE_SET_KIND__VAR_RESET ||
                       k == PG_QUERY__VARIABLE_SET_KIND__VAR_RESET_ALL
                   ? SQL_KIND_RESET
                   : SQL_KIND_SET;
    return MR_OK;
  }
  case PG_QUERY__NODE__NODE_VARIABLE_SHOW_STMT:
    pl->shape = "show";
    pl->kind = SQL_KIND_SHOW;
    return MR_OK;
  case PG_QUERY__NODE__NODE_DISCARD_STMT:
    if (n->discard_stmt->target != PG_QUERY__DISCARD_MODE__DISCARD_ALL)
      return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "only DISCARD ALL is supported");
    pl->shape = "discard";
    pl->kind = SQL_KIND_DISCARD;
    return MR_OK;
  case PG_QUERY__NODE__NODE_DEALLOCATE_STMT:
    pl->shape = "deallocate";
    pl->kind = SQL_KIND_DEALLOCATE;
    if (n->deallocate_stmt->name && n->deallocate_stmt->name[0] &&
        (pl->dealloc_name = strdup(n->deallocate_stmt->name)) == NULL)
      return nomem(p->err);
    return set_tag(pl,
                   n->deallocate_stmt->name && n->deallocate_stmt->name[0] ? "DEALLOCATE"
                                                                           : "DEALLOCATE ALL",
                   p->err);
#define UNSUPPORTED(node) case PG_QUERY__NODE__NODE_##node:
    SQL_ADMIT_UNSUPPORTED(UNSUPPORTED)
#undef UNSUPPORTED
    return sql_fail(p->err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "%.60s%s is not supported by moraine", p->stmt,
                    strlen(p->stmt) > 60 ? "..." : "");
  default: {
    char what[120];
    snprintf(what, sizeof what, "the statement \"%.60s%s\"", p->stmt,
             strlen(p->stmt) > 60 ? "..." : "");
    return refuse(p, what);
  }
  }
}

/* ---- query strings ------------------------------------------------------------ */

static void plan_free(sql_plan *pl) {
  free(pl->text);
  free(pl->tag);
  sql_dml_target_free(&pl->dml);
  free(pl->ddl.schema);
  free(pl->ddl.name);
  for (size_t i = 0; i < pl->ddl.ncols; i++) {
    free(pl->ddl.cols[i].name);
    free(pl->ddl.cols[i].type);
  }
  free(pl->ddl.cols);
  sql_hist_needs_free(&pl->hist);
  sql_copy_stmt_free(&pl->copy);
  free(pl->dealloc_name);
  sql_known_query_free(&pl->known);
}

/* A COPY's options, read once here so that a cached plan runs without
 * scanning its text again. */
static mr_status copy_options(sql_plan *pl, sql_error *err) {
  sql_toks t;
  mr_status rc = sql_lex_scan(pl->text, &t, err);
  if (rc)
    return rc;
  rc = sql_lex_parse_copy(pl->text, &t, &pl->copy, err);
  sql_toks_free(&t);
  return rc;
}

void sql_plans_free(sql_plans *p) {
  for (size_t i = 0; i < p->n; i++)
    plan_free(&p->v[i]);
  free(p->v);
  p->v = NULL;
  p->n = 0;
}

/* The text of one statement: [loc, loc + len) (len 0: to the end), trimmed
 * of blanks and a trailing semicolon. */
static char *statement_text(const char *query, int loc, int len) {
  size_t total = strlen(query);
  size_t from = loc > 0 && (size_t)loc <= total ? (size_t)loc : 0;
  size_t to = len > 0 && from + (size_t)len <= total ? from + (size_t)len : total;
  while (from < to && isspace((unsigned char)query[from]))
    from++;
  while (to > from && (isspace((unsigned char)query[to - 1]) || query[to - 1] == ';'))
    to--;
  return sql_strndup(query + from, to - from);
}

/* A bound on how deep the parse tree of sql can be, from its tokens alone:
 * the bracket depth plus, at every open level, the operator-like tokens
 * since its last comma (a chain `1+1+1...` nests one node per operator).
 * Identifiers, constants, commas, AND and OR (which PostgreSQL's grammar
 * flattens into one list) add nothing, so long VALUES lists and IN lists
 * stay flat however long they are. */
static size_t nesting_bound(const char *sql, const sql_toks *t) {
  size_t depth = 0, sum = 0, worst = 0;
  size_t counts[PLAN_MAX_NESTING + 2];
  counts[0] = 0;
  for (size_t i = 0; i < t->n; i++) {
    int k = t->v[i].kind;
    if (k == '(' || k == '[') {
      if (depth + 1 > PLAN_MAX_NESTING)
        return depth + 1;
      counts[++depth] = 0;
    } else if ((k == ')' || k == ']') && depth > 0) {
      sum -= counts[depth--];
    } else if (k == ',' || k == ';') {
      sum -= counts[depth];
      counts[depth] = 0;
    } else if (k != PG_QUERY__TOKEN__IDENT && k != PG_QUERY__TOKEN__SCONST &&
               k != PG_QUERY__TOKEN__USCONST && k != PG_QUERY__TOKEN__ICONST &&
               k != PG_QUERY__TOKEN__FCONST && k != PG_QUERY__TOKEN__BCONST &&
               k != PG_QUERY__TOKEN__XCONST && k != PG_QUERY__TOKEN__PARAM &&
               !sql_tok_is(sql, t, i, "and") && !sql_tok_is(sql, t, i, "or")) {
      counts[depth]++;
      sum++;
    }
    if (depth + sum > worst)
      worst = depth + sum;
  }
  return worst;
}

mr_status sql_plan_query(const char *query, const sql_plan_env *env, sql_plans *out,
                         sql_error *err) {
  out->v = NULL;
  out->n = 0;
  sql_toks toks;
  mr_status trc = sql_lex_scan(query, &toks, err);
  if (trc)
    return trc;
  size_t nesting = nesting_bound(query, &toks);
  sql_toks_free(&toks);
  if (nesting > PLAN_MAX_NESTING)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_STATEMENT_TOO_COMPLEX,
                    "statement is too deeply nested (more than %d levels)", PLAN_MAX_NESTING);
  PgQueryProtobufParseResult res = pg_query_parse_protobuf(query);
  if (res.error) {
    mr_status rc =
        sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "syntax error: %s at position %d",
                 res.error->message, res.error->cursorpos);
    pg_query_free_protobuf_parse_result(res);
    return rc;
  }
  PgQuery__ParseResult *tree = pg_query__parse_result__unpack(NULL, res.parse_tree.len,
                                                              (const uint8_t *)res.parse_tree.data);
  pg_query_free_protobuf_parse_result(res);
  if (tree == NULL)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot decode the parser's output");
  mr_status rc = MR_OK;
  out->v = calloc(tree->n_stmts ? tree->n_stmts : 1, sizeof *out->v);
  if (out->v == NULL)
    rc = nomem(err);
  for (size_t i = 0; rc == MR_OK && i < tree->n_stmts; i++) {
    const PgQuery__RawStmt *raw = tree->stmts[i];
    sql_plan *pl = &out->v[out->n++];
    pl->text = statement_text(query, raw->stmt_location, raw->stmt_len);
    if (pl->text == NULL) {
      rc = nomem(err);
      break;
    }
    if (raw->stmt == NULL) {
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_SYNTAX_ERROR, "empty statement");
      break;
    }
    planner p = {env, err, pl->text, NULL, 0, false};
    rc = plan_node(&p, raw->stmt, pl);
    pl->pure = !p.impure;
    if (rc == MR_OK && pl->kind == SQL_KIND_COPY)
      rc = copy_options(pl, err);
    if (rc == MR_OK)
      rc = sql_history_analyze(raw->stmt, &pl->hist, err);
    if (rc == MR_OK && raw->stmt->node_case == PG_QUERY__NODE__NODE_SELECT_STMT)
      sql_pginfo_match(pl->text, &pl->known); /* admitted already: only how it runs */
    for (size_t j = 0; j < p.nctes; j++)
      free(p.ctes[j]);
    free(p.ctes);
  }
  pg_query__parse_result__free_unpacked(tree, NULL);
  if (rc)
    sql_plans_free(out);
  return rc;
}
