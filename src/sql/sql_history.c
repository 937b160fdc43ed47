/*
 * sql_history.c — the history needs of a statement (sql_history.h).
 *
 * The tree is walked once. Each SELECT / UPDATE / DELETE is a level: its
 * FROM items (RangeVars through joins, subqueries and functions as opaque
 * items), the ON conditions that filter each item and whether WHERE does.
 * Every RangeVar of a history class found in a level's FROM gets a need from
 * those predicates; one found anywhere else (a COPY's table) gets the
 * unbounded need. An INSERT's or a COPY FROM's target is written, not
 * read: no need.
 *
 * Bounds are lower bounds on the class's column that a predicate implies
 * for the rows it lets through (rows whose column is NULL aside):
 *   col IS NULL -> none seen; col > k -> k + 1; col >= k, col = k,
 *   col BETWEEN k AND _ -> k; col IN (k, ...) -> the least k;
 *   a AND b -> the greater; a OR b -> the lesser; anything else -> none.
 */
#include "sql/sql_history.h"

#include <errno.h>
#include <pg_query/pg_query.pb-c.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_state.h"

enum { MAX_ITEMS = 64, MAX_QUALS = 16 };

typedef struct item {
  const PgQuery__RangeVar *rv; /* NULL: an opaque item (subquery, function) */
  const char *alias;           /* NULL: none (an opaque item without one) */
  int cls;                     /* sql_hist_class, or -1 */
  bool nullable;               /* on the NULL-supplying side of an outer join */
  const PgQuery__Node *quals[MAX_QUALS]; /* ON conditions that filter it */
  size_t nquals;
  bool quals_overflow;
} item;

typedef struct level {
  item items[MAX_ITEMS];
  size_t n;
  bool overflow; /* too many items: every need of the level is unbounded */
} level;

typedef struct hist {
  sql_hist_needs *out;
  sql_error *err;
  const PgQuery__RangeVar **handled; /* RangeVars a level gave a need (or none) */
  size_t nhandled, caphandled;
  bool oom;
} hist;

static const struct {
  const char *name;
  sql_hist_class cls;
} CLASS_TABLES[] = {
    {"ducklake_snapshot", SQL_HIST_SNAPSHOT},
    {"ducklake_snapshot_changes", SQL_HIST_SNAPSHOT},
    {"ducklake_data_file", SQL_HIST_DATA_FILE},
    {"ducklake_delete_file", SQL_HIST_DELETE_FILE},
    {"ducklake_file_column_stats", SQL_HIST_FILE_STATS},
    {"ducklake_file_variant_stats", SQL_HIST_FILE_STATS},
};

/* T of a `ducklake_inlined_data_T_V` name (both decimal), or 0. */
static int64_t inlined_table_id(const char *relname) {
  static const char prefix[] = "ducklake_inlined_data_";
  if (relname == NULL || strncmp(relname, prefix, sizeof prefix - 1) != 0)
    return 0;
  const char *p = relname + sizeof prefix - 1;
  int64_t t = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
    t = t * 10 + (*p - '0');
  if (digits == 0 || *p++ != '_' || *p < '0' || *p > '9')
    return 0;
  for (digits = 0; *p >= '0' && *p <= '9' && digits < 18; p++, digits++) {
  }
  return *p == '\0' ? t : 0;
}

int sql_hist_class_of(const char *relname) {
  for (size_t i = 0; relname && i < sizeof CLASS_TABLES / sizeof CLASS_TABLES[0]; i++)
    if (strcmp(CLASS_TABLES[i].name, relname) == 0)
      return (int)CLASS_TABLES[i].cls;
  return inlined_table_id(relname) > 0 ? (int)SQL_HIST_INLINE_ROW : -1;
}

const char *sql_hist_class_name(sql_hist_class c) {
  switch (c) {
  case SQL_HIST_SNAPSHOT:
    return "snapshot";
  case SQL_HIST_DATA_FILE:
    return "data_file";
  case SQL_HIST_DELETE_FILE:
    return "delete_file";
  case SQL_HIST_FILE_STATS:
    return "file_stats";
  case SQL_HIST_INLINE_ROW:
    return "inlined rows";
  default:
    return "?";
  }
}

/* The column a class's bound is on (none: stats, bounded by their file),
 * and the one its ids are on. */
static const char *bound_column(int cls) {
  return cls == SQL_HIST_SNAPSHOT     ? "snapshot_id"
         : cls == SQL_HIST_FILE_STATS ? NULL
                                      : "end_snapshot";
}
static const char *id_column(int cls) {
  return cls == SQL_HIST_SNAPSHOT ? "snapshot_id" : "table_id";
}

/* Could item it have a column named col? Opaque items and unknown tables
 * might; a history table has exactly its own. */
static bool may_have(const item *it, const char *col) {
  if (it->cls < 0 || it->cls == SQL_HIST_INLINE_ROW) /* user columns too */
    return true;
  if (it->cls == SQL_HIST_SNAPSHOT)
    return strcmp(col, "snapshot_id") == 0 || strcmp(col, "end_snapshot") != 0;
  if (it->cls == SQL_HIST_FILE_STATS)
    return strcmp(col, "snapshot_id") != 0 && strcmp(col, "end_snapshot") != 0 &&
           strcmp(col, "begin_snapshot") != 0;
  return strcmp(col, "snapshot_id") != 0;
}

static const char *str_of(const PgQuery__Node *n) {
  return n && n->node_case == PG_QUERY__NODE__NODE_STRING ? n->string->sval : NULL;
}

/* Is n a reference to column col of item `me` of level lv? */
static bool refers_to(const PgQuery__Node *n, const level *lv, const item *me, const char *col) {
  if (n == NULL || n->node_case != PG_QUERY__NODE__NODE_COLUMN_REF)
    return false;
  const PgQuery__ColumnRef *c = n->column_ref;
  if (c->n_fields == 0 || !str_of(c->fields[c->n_fields - 1]) ||
      strcmp(str_of(c->fields[c->n_fields - 1]), col) != 0)
    return false;
  if (c->n_fields >= 2) { /* [schema.]alias.col */
    const char *q = str_of(c->fields[c->n_fields - 2]);
    return q && me->alias && strcmp(q, me->alias) == 0;
  }
  /* unqualified: me must be the only item of the level that may have col */
  for (size_t i = 0; i < lv->n; i++)
    if (&lv->items[i] != me && may_have(&lv->items[i], col))
      return false;
  return true;
}

static bool parse_i64(const char *s, int64_t *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end != '\0')
    return false;
  *v = (int64_t)x;
  return true;
}

/* An integer constant, through casts; also a string constant that is one
 * ('1' compared with a BIGINT column is 1: the postgres extension pushes
 * its filters down this way). */
static bool int_const(const PgQuery__Node *n, int64_t *v) {
  while (n && n->node_case == PG_QUERY__NODE__NODE_TYPE_CAST)
    n = n->type_cast->arg;
  if (n == NULL || n->node_case != PG_QUERY__NODE__NODE_A_CONST || n->a_const->isnull)
    return false;
  const PgQuery__AConst *c = n->a_const;
  if (c->val_case == PG_QUERY__A__CONST__VAL_IVAL) {
    *v = c->ival->ival;
    return true;
  }
  if (c->val_case == PG_QUERY__A__CONST__VAL_FVAL && c->fval->fval) /* beyond int32 */
    return parse_i64(c->fval->fval, v);
  if (c->val_case == PG_QUERY__A__CONST__VAL_SVAL && c->sval->sval)
    return parse_i64(c->sval->sval, v);
  return false;
}

static const char *op_name(const PgQuery__AExpr *a) {
  return a->n_name == 1 ? str_of(a->name[0]) : NULL;
}

/* `(SELECT max(snapshot_id) FROM ducklake_snapshot)`: the newest snapshot. */
static bool is_max_snapshot(const PgQuery__SelectStmt *s);

static bool is_max_sublink(const PgQuery__Node *n) {
  return n && n->node_case == PG_QUERY__NODE__NODE_SUB_LINK &&
         n->sub_link->sub_link_type == PG_QUERY__SUB_LINK_TYPE__EXPR_SUBLINK &&
         n->sub_link->subselect &&
         n->sub_link->subselect->node_case == PG_QUERY__NODE__NODE_SELECT_STMT &&
         is_max_snapshot(n->sub_link->subselect->select_stmt);
}

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}
static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* The bound predicate n puts on column col of item me. */
static int64_t bound_of(const PgQuery__Node *n, const level *lv, const item *me, const char *col) {
  if (n == NULL || col == NULL)
    return SQL_HIST_UNBOUNDED;
  switch (n->node_case) {
  case PG_QUERY__NODE__NODE_NULL_TEST:
    return n->null_test->nulltesttype == PG_QUERY__NULL_TEST_TYPE__IS_NULL &&
                   refers_to(n->null_test->arg, lv, me, col)
               ? SQL_HIST_NONE_SEEN
               : SQL_HIST_UNBOUNDED;
  case PG_QUERY__NODE__NODE_BOOL_EXPR: {
    const PgQuery__BoolExpr *b = n->bool_expr;
    if (b->boolop == PG_QUERY__BOOL_EXPR_TYPE__AND_EXPR) {
      int64_t r = SQL_HIST_UNBOUNDED;
      for (size_t i = 0; i < b->n_args; i++)
        r = max64(r, bound_of(b->args[i], lv, me, col));
      return r;
    }
    if (b->boolop == PG_QUERY__BOOL_EXPR_TYPE__OR_EXPR && b->n_args > 0) {
      int64_t r = SQL_HIST_NONE_SEEN;
      for (size_t i = 0; i < b->n_args; i++)
        r = min64(r, bound_of(b->args[i], lv, me, col));
      return r;
    }
    return SQL_HIST_UNBOUNDED;
  }
  case PG_QUERY__NODE__NODE_A_EXPR: {
    const PgQuery__AExpr *a = n->a_expr;
    int64_t k;
    if (a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_OP) {
      const char *op = op_name(a);
      if (op == NULL)
        return SQL_HIST_UNBOUNDED;
      const PgQuery__Node *other;
      bool col_left = refers_to(a->lexpr, lv, me, col);
      if (col_left)
        other = a->rexpr;
      else if (refers_to(a->rexpr, lv, me, col))
        other = a->lexpr;
      else
        return SQL_HIST_UNBOUNDED;
      /* written as col OP other */
      const char *o = op;
      if (!col_left)
        o = strcmp(op, "<") == 0    ? ">"
            : strcmp(op, ">") == 0  ? "<"
            : strcmp(op, "<=") == 0 ? ">="
            : strcmp(op, ">=") == 0 ? "<="
                                    : op;
      if (strcmp(o, "=") == 0 && strcmp(col, "snapshot_id") == 0 && is_max_sublink(other))
        return SQL_HIST_NONE_SEEN; /* the newest snapshot: resident */
      if (!int_const(other, &k))
        return SQL_HIST_UNBOUNDED;
      if (strcmp(o, ">") == 0)
        return k == INT64_MAX ? SQL_HIST_NONE_SEEN : k + 1;
      if (strcmp(o, ">=") == 0 || strcmp(o, "=") == 0)
        return k;
      return SQL_HIST_UNBOUNDED;
    }
    if ((a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_IN ||
         a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_BETWEEN) &&
        refers_to(a->lexpr, lv, me, col) && a->rexpr &&
        a->rexpr->node_case == PG_QUERY__NODE__NODE_LIST && a->rexpr->list->n_items > 0) {
      const char *op = op_name(a);
      if (op == NULL || (strcmp(op, "=") != 0 && strcmp(op, "BETWEEN") != 0))
        return SQL_HIST_UNBOUNDED; /* NOT IN, NOT BETWEEN */
      const PgQuery__List *l = a->rexpr->list;
      size_t upto = a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_BETWEEN ? 1 : l->n_items;
      int64_t r = SQL_HIST_NONE_SEEN;
      for (size_t i = 0; i < upto; i++) {
        if (!int_const(l->items[i], &k))
          return SQL_HIST_UNBOUNDED;
        r = min64(r, k);
      }
      return r;
    }
    return SQL_HIST_UNBOUNDED;
  }
  default:
    return SQL_HIST_UNBOUNDED;
  }
}

/* The ids a top-level conjunct `col = k` / `col IN (k, ...)` limits me to;
 * false when none does. */
static bool ids_of(const PgQuery__Node *n, const level *lv, const item *me, const char *col,
                   int64_t **ids, size_t *nids, bool *oom) {
  if (n == NULL)
    return false;
  if (n->node_case == PG_QUERY__NODE__NODE_BOOL_EXPR &&
      n->bool_expr->boolop == PG_QUERY__BOOL_EXPR_TYPE__AND_EXPR) {
    for (size_t i = 0; i < n->bool_expr->n_args; i++)
      if (ids_of(n->bool_expr->args[i], lv, me, col, ids, nids, oom))
        return true;
    return false;
  }
  if (n->node_case != PG_QUERY__NODE__NODE_A_EXPR)
    return false;
  const PgQuery__AExpr *a = n->a_expr;
  const char *op = op_name(a);
  if (op == NULL || strcmp(op, "=") != 0)
    return false;
  const PgQuery__Node *const *vals;
  size_t nvals;
  const PgQuery__Node *one;
  if (a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_OP) {
    if (refers_to(a->lexpr, lv, me, col))
      one = a->rexpr;
    else if (refers_to(a->rexpr, lv, me, col))
      one = a->lexpr;
    else
      return false;
    vals = &one;
    nvals = 1;
  } else if (a->kind == PG_QUERY__A__EXPR__KIND__AEXPR_IN && refers_to(a->lexpr, lv, me, col) &&
             a->rexpr && a->rexpr->node_case == PG_QUERY__NODE__NODE_LIST) {
    vals = (const PgQuery__Node *const *)a->rexpr->list->items;
    nvals = a->rexpr->list->n_items;
  } else {
    return false;
  }
  int64_t k;
  for (size_t i = 0; i < nvals; i++)
    if (!int_const(vals[i], &k))
      return false;
  int64_t *v = malloc((nvals ? nvals : 1) * sizeof *v);
  if (v == NULL) {
    *oom = true;
    return false;
  }
  for (size_t i = 0; i < nvals; i++)
    (void)int_const(vals[i], &v[i]);
  *ids = v;
  *nids = nvals;
  return true;
}

static bool is_max_snapshot(const PgQuery__SelectStmt *s) {
  if (s->op != PG_QUERY__SET_OPERATION__SETOP_NONE || s->n_target_list != 1 ||
      s->n_from_clause != 1 || s->where_clause || s->n_group_clause || s->having_clause)
    return false;
  const PgQuery__Node *f = s->from_clause[0];
  if (f->node_case != PG_QUERY__NODE__NODE_RANGE_VAR ||
      sql_hist_class_of(f->range_var->relname) != SQL_HIST_SNAPSHOT)
    return false;
  const PgQuery__Node *t = s->target_list[0];
  if (t->node_case != PG_QUERY__NODE__NODE_RES_TARGET || t->res_target->val == NULL ||
      t->res_target->val->node_case != PG_QUERY__NODE__NODE_FUNC_CALL)
    return false;
  const PgQuery__FuncCall *fc = t->res_target->val->func_call;
  const char *fn = fc->n_funcname == 1 ? str_of(fc->funcname[0]) : NULL;
  if (fn == NULL || strcmp(fn, "max") != 0 || fc->n_args != 1 || fc->agg_filter || fc->over ||
      fc->agg_star)
    return false;
  const PgQuery__Node *a = fc->args[0];
  if (a->node_case != PG_QUERY__NODE__NODE_COLUMN_REF || a->column_ref->n_fields == 0)
    return false;
  const char *c = str_of(a->column_ref->fields[a->column_ref->n_fields - 1]);
  return c && strcmp(c, "snapshot_id") == 0;
}

/* ---- levels ------------------------------------------------------------------ */

static item *add_item(level *lv) {
  if (lv->n == MAX_ITEMS) {
    lv->overflow = true;
    return NULL;
  }
  item *it = &lv->items[lv->n++];
  memset(it, 0, sizeof *it);
  it->cls = -1;
  return it;
}

static void add_qual(item *it, const PgQuery__Node *q) {
  if (it->nquals == MAX_QUALS)
    it->quals_overflow = true; /* fewer quals only loosens the bound */
  else
    it->quals[it->nquals++] = q;
}

/* The FROM items below n, with the ON conditions that filter each. */
static void collect(level *lv, const PgQuery__Node *n, bool nullable) {
  if (n == NULL)
    return;
  if (n->node_case == PG_QUERY__NODE__NODE_RANGE_VAR) {
    item *it = add_item(lv);
    if (it == NULL)
      return;
    const PgQuery__RangeVar *rv = n->range_var;
    it->rv = rv;
    it->alias = rv->alias && rv->alias->aliasname ? rv->alias->aliasname : rv->relname;
    it->cls = sql_hist_class_of(rv->relname);
    it->nullable = nullable;
    return;
  }
  if (n->node_case == PG_QUERY__NODE__NODE_JOIN_EXPR) {
    const PgQuery__JoinExpr *j = n->join_expr;
    PgQuery__JoinType jt = j->jointype;
    size_t first = lv->n;
    collect(lv, j->larg, nullable || jt == PG_QUERY__JOIN_TYPE__JOIN_RIGHT ||
                             jt == PG_QUERY__JOIN_TYPE__JOIN_FULL);
    size_t mid = lv->n;
    collect(lv, j->rarg, nullable || jt == PG_QUERY__JOIN_TYPE__JOIN_LEFT ||
                             jt == PG_QUERY__JOIN_TYPE__JOIN_FULL);
    if (j->quals == NULL)
      return;
    bool left = jt == PG_QUERY__JOIN_TYPE__JOIN_INNER || jt == PG_QUERY__JOIN_TYPE__JOIN_RIGHT;
    bool right = jt == PG_QUERY__JOIN_TYPE__JOIN_INNER || jt == PG_QUERY__JOIN_TYPE__JOIN_LEFT;
    for (size_t i = first; i < lv->n; i++)
      if (i < mid ? left : right)
        add_qual(&lv->items[i], j->quals);
    return;
  }
  /* a subquery, a function, VALUES: opaque (its own levels are walked) */
  item *it = add_item(lv);
  if (it == NULL)
    return;
  if (n->node_case == PG_QUERY__NODE__NODE_RANGE_SUBSELECT && n->range_subselect->alias)
    it->alias = n->range_subselect->alias->aliasname;
  else if (n->node_case == PG_QUERY__NODE__NODE_RANGE_FUNCTION && n->range_function->alias)
    it->alias = n->range_function->alias->aliasname;
  it->nullable = nullable;
}

static bool mark_handled(hist *h, const PgQuery__RangeVar *rv) {
  if (h->nhandled == h->caphandled) {
    size_t cap = h->caphandled ? 2 * h->caphandled : 16;
    const PgQuery__RangeVar **v = realloc(h->handled, cap * sizeof *v);
    if (v == NULL) {
      h->oom = true;
      return false;
    }
    h->handled = v;
    h->caphandled = cap;
  }
  h->handled[h->nhandled++] = rv;
  return true;
}

static bool was_handled(const hist *h, const PgQuery__RangeVar *rv) {
  for (size_t i = 0; i < h->nhandled; i++)
    if (h->handled[i] == rv)
      return true;
  return false;
}

static void add_need(hist *h, const PgQuery__RangeVar *rv, int cls, int64_t bound, int64_t *ids,
                     size_t nids) {
  sql_hist_needs *o = h->out;
  if (cls == SQL_HIST_INLINE_ROW) { /* the table is in the name, never in a column */
    free(ids);
    nids = 0;
    if ((ids = malloc(sizeof *ids)) == NULL) {
      h->oom = true;
      return;
    }
    ids[nids++] = inlined_table_id(rv->relname);
  }
  char *schema = NULL;
  if (rv->schemaname && rv->schemaname[0] && (schema = strdup(rv->schemaname)) == NULL)
    h->oom = true;
  sql_hist_need *v = h->oom ? NULL : realloc(o->v, (o->n + 1) * sizeof *v);
  if (v == NULL) {
    free(ids);
    free(schema);
    h->oom = true;
    return;
  }
  o->v = v;
  o->v[o->n++] = (sql_hist_need){(sql_hist_class)cls, bound, ids, nids, schema};
}

/* The bound item me's own predicates (WHERE when it counts, its ON
 * conditions) put on col, and the ids they limit it to (*ids NULL: none). */
static int64_t own_bound(hist *h, const level *lv, const item *me, const PgQuery__Node *where,
                         const char *col, const char *idcol, int64_t **ids, size_t *nids) {
  int64_t bound = SQL_HIST_UNBOUNDED;
  *ids = NULL;
  *nids = 0;
  if (!me->nullable) {
    bound = bound_of(where, lv, me, col);
    ids_of(where, lv, me, idcol, ids, nids, &h->oom);
  }
  for (size_t i = 0; i < me->nquals; i++) {
    bound = max64(bound, bound_of(me->quals[i], lv, me, col));
    if (*ids == NULL)
      ids_of(me->quals[i], lv, me, idcol, ids, nids, &h->oom);
  }
  return bound;
}

/* The data file item that a conjunct of n (an AND tree) joins stats item
 * me to by `me.data_file_id = d.data_file_id`, or NULL. */
static const item *joined_file(const PgQuery__Node *n, const level *lv, const item *me) {
  if (n == NULL)
    return NULL;
  if (n->node_case == PG_QUERY__NODE__NODE_BOOL_EXPR &&
      n->bool_expr->boolop == PG_QUERY__BOOL_EXPR_TYPE__AND_EXPR) {
    for (size_t i = 0; i < n->bool_expr->n_args; i++) {
      const item *d = joined_file(n->bool_expr->args[i], lv, me);
      if (d)
        return d;
    }
    return NULL;
  }
  if (n->node_case != PG_QUERY__NODE__NODE_A_EXPR ||
      n->a_expr->kind != PG_QUERY__A__EXPR__KIND__AEXPR_OP || op_name(n->a_expr) == NULL ||
      strcmp(op_name(n->a_expr), "=") != 0)
    return NULL;
  const PgQuery__Node *l = n->a_expr->lexpr, *r = n->a_expr->rexpr;
  if (!refers_to(l, lv, me, "data_file_id")) {
    const PgQuery__Node *t = l;
    l = r;
    r = t;
    if (!refers_to(l, lv, me, "data_file_id"))
      return NULL;
  }
  for (size_t i = 0; i < lv->n; i++) {
    const item *d = &lv->items[i];
    if (d != me && d->cls == SQL_HIST_DATA_FILE && refers_to(r, lv, d, "data_file_id"))
      return d;
  }
  return NULL;
}

/* The need of history item `me` of level lv, whose WHERE is `where`. */
static void item_need(hist *h, const level *lv, const item *me, const PgQuery__Node *where,
                      bool max_only) {
  if (!mark_handled(h, me->rv))
    return;
  if (max_only)
    return; /* max(snapshot_id): the newest is resident */
  int64_t bound = SQL_HIST_UNBOUNDED;
  int64_t *ids = NULL;
  size_t nids = 0;
  if (!lv->overflow)
    bound = own_bound(h, lv, me, where, bound_column(me->cls), id_column(me->cls), &ids, &nids);
  if (!lv->overflow && me->cls == SQL_HIST_FILE_STATS) {
    const item *d = NULL;
    if (!me->nullable)
      d = joined_file(where, lv, me);
    for (size_t i = 0; d == NULL && i < me->nquals; i++)
      d = joined_file(me->quals[i], lv, me);
    if (d) { /* the file's bound and ids are the stats' */
      int64_t *dids;
      size_t dn;
      bound = own_bound(h, lv, d, where, "end_snapshot", "table_id", &dids, &dn);
      if (ids == NULL) {
        ids = dids;
        nids = dn;
      } else {
        free(dids);
      }
    }
  }
  /* e.g. end_snapshot IS NULL: never history; but an inlined table's
   * current rows may be out of the engine too (sql_history.h) */
  if (bound == SQL_HIST_NONE_SEEN && me->cls != SQL_HIST_INLINE_ROW) {
    free(ids);
    return;
  }
  add_need(h, me->rv, me->cls, bound, ids, nids);
}

static void analyze_level(hist *h, const PgQuery__Node *const *from, size_t nfrom,
                          const PgQuery__RangeVar *target, const PgQuery__Node *where,
                          bool max_only) {
  level *lv = malloc(sizeof *lv);
  if (lv == NULL) {
    h->oom = true;
    return;
  }
  lv->n = 0;
  lv->overflow = false;
  if (target) {
    PgQuery__Node tn = PG_QUERY__NODE__INIT;
    tn.node_case = PG_QUERY__NODE__NODE_RANGE_VAR;
    tn.range_var = (PgQuery__RangeVar *)target;
    collect(lv, &tn, false);
  }
  for (size_t i = 0; i < nfrom; i++)
    collect(lv, from[i], false);
  for (size_t i = 0; i < lv->n && !h->oom; i++)
    if (lv->items[i].rv && lv->items[i].cls >= 0)
      item_need(h, lv, &lv->items[i], where, max_only);
  free(lv);
}

mr_status sql_tree_each_child(const ProtobufCMessage *m, sql_tree_fn fn, void *ctx) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  const char *base = (const char *)m;
  if (d == &pg_query__node__descriptor) {
    /* Every expression and list item is a Node: a oneof of some 250
     * message fields, one of them set. Its case names that field, so it
     * is looked up, not found by scanning them all (which was most of a
     * walk's time on a 1000-row INSERT). */
    const PgQuery__Node *n = (const PgQuery__Node *)m;
    const ProtobufCFieldDescriptor *f =
        n->node_case ? protobuf_c_message_descriptor_get_field(d, (unsigned)n->node_case) : NULL;
    if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
      return MR_OK;
    const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(const void *)(base + f->offset);
    return sub ? fn(ctx, sub) : MR_OK;
  }
  mr_status rc = MR_OK;
  for (unsigned i = 0; rc == MR_OK && i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(const void *)(base + f->quantifier_offset);
      ProtobufCMessage *const *v =
          *(ProtobufCMessage *const *const *)(const void *)(base + f->offset);
      for (size_t j = 0; rc == MR_OK && j < n; j++)
        if (v[j])
          rc = fn(ctx, v[j]);
      continue;
    }
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        *(const uint32_t *)(const void *)(base + f->quantifier_offset) != f->id)
      continue;
    const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(const void *)(base + f->offset);
    if (sub)
      rc = fn(ctx, sub);
  }
  return rc;
}

/* A table an INSERT or COPY FROM writes and does not read: no history
 * need, but an inlined-data table's current rows must be resident before a
 * row is added to it (sql_history.h). */
static void written(hist *h, const PgQuery__RangeVar *rv) {
  if (sql_hist_class_of(rv->relname) == SQL_HIST_INLINE_ROW)
    add_need(h, rv, SQL_HIST_INLINE_ROW, SQL_HIST_NONE_SEEN, NULL, 0);
  mark_handled(h, rv);
}

typedef struct visit_at {
  hist *h;
  int depth;
} visit_at;

static void visit(hist *h, const ProtobufCMessage *m, int depth);

static mr_status visit_child(void *ctx, const ProtobufCMessage *child) {
  visit_at *a = ctx;
  visit(a->h, child, a->depth + 1);
  return a->h->oom ? MR_ERR_NOMEM : MR_OK;
}

static void visit(hist *h, const ProtobufCMessage *m, int depth) {
  if (h->oom || depth > 2000) /* the planner bounds depth long before this */
    return;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (d == &pg_query__select_stmt__descriptor) {
    const PgQuery__SelectStmt *s = (const PgQuery__SelectStmt *)m;
    analyze_level(h, (const PgQuery__Node *const *)s->from_clause, s->n_from_clause, NULL,
                  s->where_clause, is_max_snapshot(s));
  } else if (d == &pg_query__update_stmt__descriptor) {
    const PgQuery__UpdateStmt *s = (const PgQuery__UpdateStmt *)m;
    analyze_level(h, (const PgQuery__Node *const *)s->from_clause, s->n_from_clause, s->relation,
                  s->where_clause, false);
  } else if (d == &pg_query__delete_stmt__descriptor) {
    const PgQuery__DeleteStmt *s = (const PgQuery__DeleteStmt *)m;
    analyze_level(h, (const PgQuery__Node *const *)s->using_clause, s->n_using_clause,
                  s->relation, s->where_clause, false);
  } else if (d == &pg_query__insert_stmt__descriptor) {
    const PgQuery__InsertStmt *s = (const PgQuery__InsertStmt *)m;
    if (s->relation)
      written(h, s->relation);
  } else if (d == &pg_query__copy_stmt__descriptor) {
    const PgQuery__CopyStmt *s = (const PgQuery__CopyStmt *)m;
    if (s->is_from && s->relation)
      written(h, s->relation); /* COPY ... FROM STDIN */
  } else if (d == &pg_query__range_var__descriptor) {
    const PgQuery__RangeVar *rv = (const PgQuery__RangeVar *)m;
    int cls = sql_hist_class_of(rv->relname);
    if (cls >= 0 && !was_handled(h, rv)) /* read outside a FROM we understand */
      add_need(h, rv, cls, SQL_HIST_UNBOUNDED, NULL, 0);
  }
  visit_at a = {h, depth};
  if (sql_tree_each_child(m, visit_child, &a)) {
    /* out of memory: h->oom says so */
  }
}

mr_status sql_history_analyze(const void *stmt_node, sql_hist_needs *out, sql_error *err) {
  hist h = {out, err, NULL, 0, 0, false};
  if (stmt_node)
    visit(&h, (const ProtobufCMessage *)stmt_node, 0);
  free(h.handled);
  if (h.oom)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

void sql_hist_needs_free(sql_hist_needs *n) {
  for (size_t i = 0; i < n->n; i++) {
    free(n->v[i].ids);
    free(n->v[i].schema);
  }
  free(n->v);
  n->v = NULL;
  n->n = 0;
}
