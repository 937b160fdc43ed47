/*
 * sql_relcache.c — the directory of sql_relcache.h: immutable, reference
 * counted table sets swapped under one mutex, pending changes per
 * connection, the re-read from duckdb_columns(), and the two table
 * functions that hand it to pg_class and pg_attribute.
 *
 * Ownership: a `rel` (one table) and a `relset` (the tables, in no
 * particular order) are immutable once built and freed by their last
 * unref. rc->cur is the committed set; a scan holds a reference to the set
 * it started with, so a commit or a re-read never waits for a scan and a
 * scan never sees half a change.
 */
#include "sql/sql_relcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_internal.h"
#include "sql/sql_state.h"
#include "sql/sql_types.h"
#include "sql/sql_util.h"

typedef struct rel_col {
  char *name;
  uint32_t typid;
  int32_t typmod;
  bool notnull, hasdef;
} rel_col;

typedef struct rel {
  atomic_size_t refs;
  uint32_t oid;
  char *schema, *name;
  size_t ncols;
  rel_col *cols;
} rel;

typedef struct relset {
  atomic_size_t refs;
  size_t n;
  size_t ncols; /* columns of all its rels: the attribute scan's row count */
  rel **v;
} relset;

/* One DDL of an open transaction: created != NULL is a CREATE (its new
 * layout), NULL a DROP of schema.name. */
typedef struct pending_op {
  rel *created;
  char *schema, *name;
} pending_op;

typedef struct pending {
  uint64_t conn;
  pending_op *ops;
  size_t n, cap;
} pending;

struct sql_relcache {
  char *dbname;
  pthread_mutex_t mu; /* cur, pend, next_oid, pub_gen */
  relset *cur;
  pending *pend;
  size_t npend, pend_cap;
  uint32_t next_oid;
  uint64_t pub_gen; /* bumped by every commit that changes cur */
  uint64_t inval_gen; /* bumped by every invalidate (under mu) */
  /* true until a re-read that no invalidation or commit overtook has been
   * published: a statement seeing false may use cur without waiting */
  atomic_bool stale;
  pthread_mutex_t refresh_mu; /* one re-read at a time */
};

/* ---- sets ----------------------------------------------------------------- */

static void rel_unref(rel *r) {
  if (r == NULL || atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  for (size_t i = 0; i < r->ncols; i++)
    free(r->cols[i].name);
  free(r->cols);
  free(r->schema);
  free(r->name);
  free(r);
}

static void relset_unref(relset *s) {
  if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
    return;
  for (size_t i = 0; i < s->n; i++)
    rel_unref(s->v[i]);
  free(s->v);
  free(s);
}

static relset *relset_new(size_t cap) {
  relset *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  atomic_init(&s->refs, 1);
  if (cap && (s->v = malloc(cap * sizeof *s->v)) == NULL) {
    free(s);
    return NULL;
  }
  return s;
}

static bool same_name(const rel *r, const char *schema, const char *name) {
  return strcmp(r->name, name) == 0 && strcmp(r->schema, schema) == 0;
}

static rel *find_in(const relset *s, const char *schema, const char *name) {
  for (size_t i = 0; s && i < s->n; i++)
    if (same_name(s->v[i], schema, name))
      return s->v[i];
  return NULL;
}

/* base with ops applied in order, as a new set (refs 1); NULL when out of
 * memory. */
static relset *apply_ops(const relset *base, const pending_op *ops, size_t nops) {
  relset *s = relset_new(base->n + nops);
  if (s == NULL)
    return NULL;
  for (size_t i = 0; i < base->n; i++) {
    s->v[s->n++] = base->v[i];
    atomic_fetch_add(&base->v[i]->refs, 1);
  }
  s->ncols = base->ncols;
  for (size_t k = 0; k < nops; k++) {
    size_t i = 0;
    while (i < s->n && !same_name(s->v[i], ops[k].schema, ops[k].name))
      i++;
    if (i < s->n) { /* replaced or dropped: out of this set */
      s->ncols -= s->v[i]->ncols;
      rel_unref(s->v[i]);
      s->v[i] = s->v[--s->n];
    }
    if (ops[k].created) {
      s->v[s->n++] = ops[k].created;
      s->ncols += ops[k].created->ncols;
      atomic_fetch_add(&ops[k].created->refs, 1);
    }
  }
  return s;
}

/* ---- lifecycle ------------------------------------------------------------ */

sql_relcache *sql_relcache_create(const char *dbname) {
  sql_relcache *rc = calloc(1, sizeof *rc);
  if (rc == NULL)
    return NULL;
  rc->dbname = sql_strdup(dbname);
  rc->cur = relset_new(0);
  if (rc->dbname == NULL || rc->cur == NULL) {
    free(rc->dbname);
    relset_unref(rc->cur);
    free(rc);
    return NULL;
  }
  pthread_mutex_init(&rc->mu, NULL);
  pthread_mutex_init(&rc->refresh_mu, NULL);
  rc->next_oid = SQL_RELCACHE_FIRST_OID;
  atomic_init(&rc->stale, true);
  return rc;
}

static void pending_clear(pending *p) {
  for (size_t i = 0; i < p->n; i++) {
    rel_unref(p->ops[i].created);
    free(p->ops[i].schema);
    free(p->ops[i].name);
  }
  free(p->ops);
  p->ops = NULL;
  p->n = p->cap = 0;
}

void sql_relcache_free(sql_relcache *rc) {
  if (rc == NULL)
    return;
  for (size_t i = 0; i < rc->npend; i++)
    pending_clear(&rc->pend[i]);
  free(rc->pend);
  relset_unref(rc->cur);
  pthread_mutex_destroy(&rc->mu);
  pthread_mutex_destroy(&rc->refresh_mu);
  free(rc->dbname);
  free(rc);
}

void sql_relcache_invalidate(sql_relcache *rc) {
  pthread_mutex_lock(&rc->mu);
  rc->inval_gen++;
  atomic_store(&rc->stale, true);
  pthread_mutex_unlock(&rc->mu);
}

uint64_t sql_relcache_conn_id(duckdb_connection con) {
  duckdb_client_context ctx = NULL;
  duckdb_connection_get_client_context(con, &ctx);
  uint64_t id = ctx ? duckdb_client_context_get_connection_id(ctx) : 0;
  duckdb_destroy_client_context(&ctx);
  return id;
}

/* ---- reading layouts from the engine -------------------------------------- */

static char *vec_strdup(duckdb_vector v, idx_t row) {
  uint64_t *valid = duckdb_vector_get_validity(v);
  if (valid && !duckdb_validity_row_is_valid(valid, row))
    return sql_strdup("");
  duckdb_string_t *s = (duckdb_string_t *)duckdb_vector_get_data(v) + row;
  return sql_strndup(duckdb_string_t_data(s), duckdb_string_t_length(*s));
}

static bool vec_bool(duckdb_vector v, idx_t row) {
  uint64_t *valid = duckdb_vector_get_validity(v);
  if (valid && !duckdb_validity_row_is_valid(valid, row))
    return false;
  return ((bool *)duckdb_vector_get_data(v))[row];
}

/* Appends one column to r (columns arrive in order). */
static bool add_col(rel *r, size_t *cap, char *name, const char *type, bool notnull,
                    bool hasdef) {
  if (name == NULL)
    return false;
  if (r->ncols == *cap) {
    size_t n = *cap ? 2 * *cap : 16;
    rel_col *c = realloc(r->cols, n * sizeof *c);
    if (c == NULL) {
      free(name);
      return false;
    }
    r->cols = c;
    *cap = n;
  }
  rel_col *c = &r->cols[r->ncols++];
  c->name = name;
  c->typid = pg_oid_of_duck_name(type, &c->typmod);
  c->notnull = notnull;
  c->hasdef = hasdef;
  return true;
}

static rel *rel_new(const char *schema, const char *name) {
  rel *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  atomic_init(&r->refs, 1);
  r->schema = sql_strdup(schema);
  r->name = sql_strdup(name);
  if (r->schema == NULL || r->name == NULL) {
    rel_unref(r);
    return NULL;
  }
  return r;
}

static mr_status oom(sql_error *err) {
  return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
}

/* Every table of the database with its columns, through con: a new set
 * whose rels have no oid yet. Rows come ordered by table, then column. */
static mr_status read_all(sql_relcache *rc, duckdb_connection con, relset **out,
                          sql_error *err) {
  *out = NULL;
  char *db = sql_quote_literal(rc->dbname);
  sql_strbuf q = {0};
  sql_strbuf_addf(&q,
                  "SELECT schema_name, table_name, column_name, data_type, NOT is_nullable, "
                  "column_default IS NOT NULL FROM duckdb_columns() c WHERE database_name = %s "
                  "AND NOT EXISTS (SELECT 1 FROM duckdb_views() v WHERE v.database_name = %s "
                  "AND v.schema_name = c.schema_name AND v.view_name = c.table_name) "
                  "ORDER BY schema_name, table_name, column_index",
                  db ? db : "''", db ? db : "''");
  free(db);
  char *sql = sql_strbuf_take(&q);
  if (sql == NULL)
    return oom(err);
  duckdb_result res;
  if (duckdb_query(con, sql, &res) != DuckDBSuccess) {
    mr_status rc2 = sql_fail_duckdb(err, duckdb_result_error(&res));
    duckdb_destroy_result(&res);
    free(sql);
    return rc2;
  }
  free(sql);
  relset *s = relset_new(0);
  size_t setcap = 0, colcap = 0;
  rel *r = NULL;
  bool ok = s != NULL;
  for (duckdb_data_chunk ch; ok && (ch = duckdb_fetch_chunk(res)) != NULL;) {
    idx_t n = duckdb_data_chunk_get_size(ch);
    duckdb_vector v[6];
    for (idx_t k = 0; k < 6; k++)
      v[k] = duckdb_data_chunk_get_vector(ch, k);
    for (idx_t i = 0; ok && i < n; i++) {
      char *schema = vec_strdup(v[0], i), *table = vec_strdup(v[1], i);
      if (schema == NULL || table == NULL) {
        ok = false;
      } else if (r == NULL || !same_name(r, schema, table)) { /* the next table */
        r = rel_new(schema, table);
        colcap = 0;
        if (r && s->n == setcap) {
          size_t cap = setcap ? 2 * setcap : 64;
          rel **grown = realloc(s->v, cap * sizeof *grown);
          if (grown) {
            s->v = grown;
            setcap = cap;
          }
        }
        if (r && s->n < setcap)
          s->v[s->n++] = r;
        else {
          rel_unref(r);
          r = NULL;
          ok = false;
        }
      }
      free(schema);
      free(table);
      char *type = ok ? vec_strdup(v[3], i) : NULL;
      ok = ok && type && add_col(r, &colcap, vec_strdup(v[2], i), type, vec_bool(v[4], i),
                                 vec_bool(v[5], i));
      if (ok)
        s->ncols++;
      free(type);
    }
    duckdb_destroy_data_chunk(&ch);
  }
  duckdb_destroy_result(&res);
  if (!ok) {
    relset_unref(s);
    return oom(err);
  }
  *out = s;
  return MR_OK;
}

static int by_name(const void *a, const void *b) {
  const rel *x = *(rel *const *)a, *y = *(rel *const *)b;
  int c = strcmp(x->schema, y->schema);
  return c ? c : strcmp(x->name, y->name);
}

/* Gives each rel of fresh the oid its name had in old, or a new one. */
static bool carry_oids(sql_relcache *rc, relset *fresh) {
  relset *old = rc->cur;
  rel **sorted = NULL;
  if (old->n) {
    if ((sorted = malloc(old->n * sizeof *sorted)) == NULL)
      return false;
    memcpy(sorted, old->v, old->n * sizeof *sorted);
    qsort(sorted, old->n, sizeof *sorted, by_name);
  }
  for (size_t i = 0; i < fresh->n; i++) {
    rel *const key = fresh->v[i];
    rel **hit = old->n ? bsearch(&key, sorted, old->n, sizeof *sorted, by_name) : NULL;
    key->oid = hit ? (*hit)->oid : rc->next_oid++;
  }
  free(sorted);
  return true;
}

mr_status sql_relcache_refresh(sql_relcache *rc, duckdb_connection con, sql_error *err) {
  if (!atomic_load(&rc->stale))
    return MR_OK;
  /* stale stays set while we read: a statement arriving meanwhile waits on
   * refresh_mu for this read instead of taking the set it replaces */
  pthread_mutex_lock(&rc->refresh_mu);
  mr_status st = MR_OK;
  if (atomic_load(&rc->stale)) {
    pthread_mutex_lock(&rc->mu);
    uint64_t pub0 = rc->pub_gen, inval0 = rc->inval_gen;
    pthread_mutex_unlock(&rc->mu);
    relset *fresh = NULL;
    st = read_all(rc, con, &fresh, err);
    if (st == MR_OK) {
      pthread_mutex_lock(&rc->mu);
      if (!carry_oids(rc, fresh)) {
        st = oom(err);
        relset_unref(fresh);
      } else {
        relset_unref(rc->cur);
        rc->cur = fresh;
        /* a commit published or a change marked while we read may be
         * missing from fresh: then the next statement reads again */
        if (rc->pub_gen == pub0 && rc->inval_gen == inval0)
          atomic_store(&rc->stale, false);
      }
      pthread_mutex_unlock(&rc->mu);
    }
  }
  pthread_mutex_unlock(&rc->refresh_mu);
  return st;
}

/* ---- a session's pending DDL ---------------------------------------------- */

/* The pending list of conn, created if `make`; NULL if none (or OOM). */
static pending *pending_of(sql_relcache *rc, uint64_t conn, bool make) {
  for (size_t i = 0; i < rc->npend; i++)
    if (rc->pend[i].conn == conn)
      return &rc->pend[i];
  if (!make)
    return NULL;
  if (rc->npend == rc->pend_cap) {
    size_t n = rc->pend_cap ? 2 * rc->pend_cap : 8;
    pending *p = realloc(rc->pend, n * sizeof *p);
    if (p == NULL)
      return NULL;
    rc->pend = p;
    rc->pend_cap = n;
  }
  pending *p = &rc->pend[rc->npend++];
  memset(p, 0, sizeof *p);
  p->conn = conn;
  return p;
}

/* Adds an op to conn's list (takes `created`); under mu. */
static mr_status add_op(sql_relcache *rc, uint64_t conn, rel *created, const char *schema,
                        const char *name, sql_error *err) {
  pending *p = pending_of(rc, conn, true);
  if (p && p->n == p->cap) {
    size_t n = p->cap ? 2 * p->cap : 4;
    pending_op *o = realloc(p->ops, n * sizeof *o);
    if (o == NULL)
      p = NULL;
    else {
      p->ops = o;
      p->cap = n;
    }
  }
  char *s = sql_strdup(schema), *t = sql_strdup(name);
  if (p == NULL || s == NULL || t == NULL) {
    free(s);
    free(t);
    rel_unref(created);
    return oom(err);
  }
  p->ops[p->n++] = (pending_op){created, s, t};
  return MR_OK;
}

/* The oid schema.name has as conn sees it now (its own pending ops, then
 * the committed set), or 0. Under mu. */
static uint32_t visible_oid(sql_relcache *rc, uint64_t conn, const char *schema,
                            const char *name) {
  pending *p = pending_of(rc, conn, false);
  for (size_t i = p ? p->n : 0; i-- > 0;)
    if (strcmp(p->ops[i].schema, schema) == 0 && strcmp(p->ops[i].name, name) == 0)
      return p->ops[i].created ? p->ops[i].created->oid : 0;
  rel *r = find_in(rc->cur, schema, name);
  return r ? r->oid : 0;
}

mr_status sql_relcache_note_create(sql_relcache *rc, duckdb_connection con, uint64_t conn_id,
                                   const char *schema, const char *table, sql_error *err) {
  /* DESCRIBE through the SQL parser: names are quoted identifiers there
   * (pragma_table_info's string argument drops doubled quotes) */
  char *d = sql_quote_ident(rc->dbname), *qs = sql_quote_ident(schema),
       *qt = sql_quote_ident(table);
  sql_strbuf q = {0};
  if (d && qs && qt)
    sql_strbuf_addf(&q,
                    "SELECT column_name, column_type, \"null\" = 'NO', \"default\" IS NOT NULL "
                    "FROM (DESCRIBE %s.%s.%s)",
                    d, qs, qt);
  free(d);
  free(qs);
  free(qt);
  char *sql = sql_strbuf_take(&q);
  rel *r = rel_new(schema, table);
  if (sql == NULL || r == NULL) {
    free(sql);
    rel_unref(r);
    return oom(err);
  }
  duckdb_result res;
  mr_status st = MR_OK;
  if (duckdb_query(con, sql, &res) != DuckDBSuccess) {
    st = sql_fail_duckdb(err, duckdb_result_error(&res));
  } else {
    size_t cap = 0;
    for (duckdb_data_chunk ch; st == MR_OK && (ch = duckdb_fetch_chunk(res)) != NULL;) {
      idx_t n = duckdb_data_chunk_get_size(ch);
      duckdb_vector v[4];
      for (idx_t k = 0; k < 4; k++)
        v[k] = duckdb_data_chunk_get_vector(ch, k);
      for (idx_t i = 0; st == MR_OK && i < n; i++) {
        char *type = vec_strdup(v[1], i);
        if (type == NULL || !add_col(r, &cap, vec_strdup(v[0], i), type, vec_bool(v[2], i),
                                     vec_bool(v[3], i)))
          st = oom(err);
        free(type);
      }
      duckdb_destroy_data_chunk(&ch);
    }
  }
  duckdb_destroy_result(&res);
  free(sql);
  if (st) {
    rel_unref(r);
    return st;
  }
  pthread_mutex_lock(&rc->mu);
  uint32_t oid = visible_oid(rc, conn_id, schema, table);
  r->oid = oid ? oid : rc->next_oid++; /* IF NOT EXISTS of a table it sees: same relation */
  st = add_op(rc, conn_id, r, schema, table, err);
  pthread_mutex_unlock(&rc->mu);
  return st;
}

mr_status sql_relcache_note_drop(sql_relcache *rc, uint64_t conn_id, const char *schema,
                                 const char *table, sql_error *err) {
  pthread_mutex_lock(&rc->mu);
  mr_status st = add_op(rc, conn_id, NULL, schema, table, err);
  pthread_mutex_unlock(&rc->mu);
  return st;
}

void sql_relcache_end(sql_relcache *rc, uint64_t conn_id, bool commit) {
  pthread_mutex_lock(&rc->mu);
  pending *p = pending_of(rc, conn_id, false);
  if (p) {
    if (commit && p->n) {
      relset *next = apply_ops(rc->cur, p->ops, p->n);
      if (next) {
        relset_unref(rc->cur);
        rc->cur = next;
        rc->pub_gen++;
      } else {
        atomic_store(&rc->stale, true); /* out of memory: re-read instead */
      }
    }
    pending_clear(p);
    *p = rc->pend[--rc->npend];
  }
  pthread_mutex_unlock(&rc->mu);
}

/* The set conn sees: the committed one with its pending ops on top. */
static relset *snapshot(sql_relcache *rc, uint64_t conn) {
  pthread_mutex_lock(&rc->mu);
  pending *p = pending_of(rc, conn, false);
  relset *s = rc->cur;
  if (p && p->n)
    s = apply_ops(rc->cur, p->ops, p->n);
  else
    atomic_fetch_add(&s->refs, 1);
  pthread_mutex_unlock(&rc->mu);
  return s;
}

/* ---- the table functions -------------------------------------------------- */

typedef struct scan_bind {
  sql_relcache *rc;
  uint64_t conn;
} scan_bind;

typedef struct scan_state {
  relset *set;
  size_t rel, col; /* the next row: set->v[rel], its column col */
} scan_state;

static void scan_state_free(void *p) {
  scan_state *st = p;
  relset_unref(st->set);
  free(st);
}

static void add_result(duckdb_bind_info info, const char *name, duckdb_type t) {
  duckdb_logical_type lt = duckdb_create_logical_type(t);
  duckdb_bind_add_result_column(info, name, lt);
  duckdb_destroy_logical_type(&lt);
}

/* Rows the scan will give, for the optimizer's join order (unknown, it
 * guesses as for a large table). */
static idx_t rows_of(sql_relcache *rc, bool columns) {
  pthread_mutex_lock(&rc->mu);
  idx_t n = columns ? rc->cur->ncols : rc->cur->n;
  pthread_mutex_unlock(&rc->mu);
  return n;
}

static void bind_common(duckdb_bind_info info, bool columns) {
  scan_bind *b = malloc(sizeof *b);
  if (b == NULL) {
    duckdb_bind_set_error(info, "out of memory");
    return;
  }
  b->rc = duckdb_bind_get_extra_info(info);
  duckdb_bind_set_cardinality(info, rows_of(b->rc, columns), false);
  duckdb_client_context ctx = NULL;
  duckdb_table_function_get_client_context(info, &ctx);
  b->conn = ctx ? duckdb_client_context_get_connection_id(ctx) : 0;
  duckdb_destroy_client_context(&ctx);
  duckdb_bind_set_bind_data(info, b, free);
}

static void class_bind(duckdb_bind_info info) {
  add_result(info, "oid", DUCKDB_TYPE_BIGINT);
  add_result(info, "nspname", DUCKDB_TYPE_VARCHAR);
  add_result(info, "relname", DUCKDB_TYPE_VARCHAR);
  add_result(info, "relnatts", DUCKDB_TYPE_SMALLINT);
  bind_common(info, false);
}

static void attribute_bind(duckdb_bind_info info) {
  add_result(info, "attrelid", DUCKDB_TYPE_BIGINT);
  add_result(info, "attname", DUCKDB_TYPE_VARCHAR);
  add_result(info, "atttypid", DUCKDB_TYPE_BIGINT);
  add_result(info, "attnum", DUCKDB_TYPE_SMALLINT);
  add_result(info, "atttypmod", DUCKDB_TYPE_INTEGER);
  add_result(info, "attnotnull", DUCKDB_TYPE_BOOLEAN);
  add_result(info, "atthasdef", DUCKDB_TYPE_BOOLEAN);
  bind_common(info, true);
}

/* The snapshot is taken here, per execution, not at bind (prepare) time. */
static void scan_init(duckdb_init_info info) {
  scan_bind *b = duckdb_init_get_bind_data(info);
  scan_state *st = calloc(1, sizeof *st);
  if (st == NULL || (st->set = snapshot(b->rc, b->conn)) == NULL) {
    free(st);
    duckdb_init_set_error(info, "out of memory");
    return;
  }
  duckdb_init_set_init_data(info, st, scan_state_free);
}

static void class_scan(duckdb_function_info info, duckdb_data_chunk out) {
  scan_state *st = duckdb_function_get_init_data(info);
  idx_t cap = duckdb_vector_size(), n = 0;
  duckdb_vector oid = duckdb_data_chunk_get_vector(out, 0),
                nsp = duckdb_data_chunk_get_vector(out, 1),
                name = duckdb_data_chunk_get_vector(out, 2),
                natts = duckdb_data_chunk_get_vector(out, 3);
  for (; n < cap && st->rel < st->set->n; n++, st->rel++) {
    const rel *r = st->set->v[st->rel];
    ((int64_t *)duckdb_vector_get_data(oid))[n] = r->oid;
    duckdb_vector_assign_string_element(nsp, n, r->schema);
    duckdb_vector_assign_string_element(name, n, r->name);
    ((int16_t *)duckdb_vector_get_data(natts))[n] = (int16_t)r->ncols;
  }
  duckdb_data_chunk_set_size(out, n);
}

static void attribute_scan(duckdb_function_info info, duckdb_data_chunk out) {
  scan_state *st = duckdb_function_get_init_data(info);
  idx_t cap = duckdb_vector_size(), n = 0;
  duckdb_vector v[7];
  for (idx_t k = 0; k < 7; k++)
    v[k] = duckdb_data_chunk_get_vector(out, k);
  while (n < cap && st->rel < st->set->n) {
    const rel *r = st->set->v[st->rel];
    if (st->col >= r->ncols) {
      st->rel++;
      st->col = 0;
      continue;
    }
    const rel_col *c = &r->cols[st->col];
    ((int64_t *)duckdb_vector_get_data(v[0]))[n] = r->oid;
    duckdb_vector_assign_string_element(v[1], n, c->name);
    ((int64_t *)duckdb_vector_get_data(v[2]))[n] = c->typid;
    ((int16_t *)duckdb_vector_get_data(v[3]))[n] = (int16_t)(st->col + 1);
    ((int32_t *)duckdb_vector_get_data(v[4]))[n] = c->typmod;
    ((bool *)duckdb_vector_get_data(v[5]))[n] = c->notnull;
    ((bool *)duckdb_vector_get_data(v[6]))[n] = c->hasdef;
    st->col++;
    n++;
  }
  duckdb_data_chunk_set_size(out, n);
}

static mr_status register_one(sql_relcache *rc, duckdb_connection con, const char *name,
                              duckdb_table_function_bind_t bind,
                              duckdb_table_function_t scan, sql_error *err) {
  duckdb_table_function f = duckdb_create_table_function();
  duckdb_table_function_set_name(f, name);
  duckdb_table_function_set_extra_info(f, rc, NULL);
  duckdb_table_function_set_bind(f, bind);
  duckdb_table_function_set_init(f, scan_init);
  duckdb_table_function_set_function(f, scan);
  duckdb_state s = duckdb_register_table_function(con, f);
  duckdb_destroy_table_function(&f);
  if (s != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "cannot register %s", name);
  return MR_OK;
}

mr_status sql_relcache_register(sql_relcache *rc, duckdb_connection con, sql_error *err) {
  mr_status st = register_one(rc, con, "moraine_pg_class", class_bind, class_scan, err);
  return st ? st : register_one(rc, con, "moraine_pg_attribute", attribute_bind, attribute_scan,
                                err);
}
