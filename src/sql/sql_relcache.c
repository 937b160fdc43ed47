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

/* A PRIMARY KEY or UNIQUE constraint (the only kinds moraine's tables can
 * have), as pg_constraint shows it. Its oid there is the table's oid * 1000
 * + its index here (key_oid): DuckDB's own constraint_index is no stable
 * name (a scan filtered by table numbers them differently). */
typedef struct rel_key {
  char type;    /* 'p' or 'u' */
  char *name;   /* DuckDB's constraint name */
  char *conkey; /* its columns as PostgreSQL prints an int2[]: {1} */
} rel_key;

typedef struct rel {
  atomic_size_t refs;
  uint32_t oid;
  int64_t nspoid; /* its schema's oid in pg_namespace (DuckDB's schema oid) */
  char *schema, *name;
  size_t ncols;
  rel_col *cols;
  size_t nkeys;
  rel_key *keys; /* in DuckDB's constraint order */
} rel;

static int64_t key_oid(const rel *r, size_t k) {
  return (int64_t)r->oid * 1000 + (int64_t)k;
}

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
  for (size_t i = 0; i < r->nkeys; i++) {
    free(r->keys[i].name);
    free(r->keys[i].conkey);
  }
  free(r->keys);
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

/* The PRIMARY KEY and UNIQUE constraints of the database's tables (only
 * schema.table's when table is not NULL), read through con and added to
 * the rel of rels[] with their table's name. */
static mr_status read_keys(sql_relcache *rc, duckdb_connection con, const char *schema,
                           const char *table, rel *const *rels, size_t nrels, sql_error *err) {
  char *db = sql_quote_literal(rc->dbname);
  char *qs = table ? sql_quote_literal(schema) : NULL, *qt = table ? sql_quote_literal(table) : NULL;
  sql_strbuf q = {0};
  sql_strbuf_addf(&q,
                  "SELECT schema_name, table_name, constraint_name, "
                  "constraint_type = 'PRIMARY KEY', '{' || array_to_string(list_transform("
                  "constraint_column_indexes, x -> x + 1), ',') || '}' FROM duckdb_constraints() "
                  "WHERE database_name = %s AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')",
                  db ? db : "''");
  if (table)
    sql_strbuf_addf(&q, " AND schema_name = %s AND table_name = %s", qs ? qs : "''",
                    qt ? qt : "''");
  sql_strbuf_add(&q, " ORDER BY table_oid, constraint_index");
  bool quoted = db && (table == NULL || (qs && qt));
  free(db);
  free(qs);
  free(qt);
  char *sql = sql_strbuf_take(&q);
  if (sql == NULL || !quoted) {
    free(sql);
    return oom(err);
  }
  duckdb_result res;
  mr_status st = MR_OK;
  if (duckdb_query(con, sql, &res) != DuckDBSuccess) {
    st = sql_fail_duckdb(err, duckdb_result_error(&res));
    duckdb_destroy_result(&res);
    free(sql);
    return st;
  }
  free(sql);
  for (duckdb_data_chunk ch; st == MR_OK && (ch = duckdb_fetch_chunk(res)) != NULL;) {
    idx_t n = duckdb_data_chunk_get_size(ch);
    duckdb_vector v[5];
    for (idx_t k = 0; k < 5; k++)
      v[k] = duckdb_data_chunk_get_vector(ch, k);
    for (idx_t i = 0; st == MR_OK && i < n; i++) {
      char *sname = vec_strdup(v[0], i), *tname = vec_strdup(v[1], i);
      rel *r = NULL;
      for (size_t j = 0; sname && tname && r == NULL && j < nrels; j++)
        if (same_name(rels[j], sname, tname))
          r = rels[j];
      free(sname);
      free(tname);
      if (r == NULL)
        continue; /* a view's or a temporary table's: not in the directory */
      rel_key *grown = realloc(r->keys, (r->nkeys + 1) * sizeof *grown);
      char *name = vec_strdup(v[2], i), *conkey = vec_strdup(v[4], i);
      if (grown)
        r->keys = grown;
      if (grown == NULL || name == NULL || conkey == NULL) {
        free(name);
        free(conkey);
        st = oom(err);
        break;
      }
      r->keys[r->nkeys++] = (rel_key){vec_bool(v[3], i) ? 'p' : 'u', name, conkey};
    }
    duckdb_destroy_data_chunk(&ch);
  }
  duckdb_destroy_result(&res);
  return st;
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
                  "column_default IS NOT NULL, schema_oid FROM duckdb_columns() c "
                  "WHERE database_name = %s "
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
    duckdb_vector v[7];
    for (idx_t k = 0; k < 7; k++)
      v[k] = duckdb_data_chunk_get_vector(ch, k);
    for (idx_t i = 0; ok && i < n; i++) {
      char *schema = vec_strdup(v[0], i), *table = vec_strdup(v[1], i);
      if (schema == NULL || table == NULL) {
        ok = false;
      } else if (r == NULL || !same_name(r, schema, table)) { /* the next table */
        r = rel_new(schema, table);
        colcap = 0;
        if (r)
          r->nspoid = ((int64_t *)duckdb_vector_get_data(v[6]))[i];
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
  mr_status st = read_keys(rc, con, NULL, NULL, s->v, s->n, err);
  if (st) {
    relset_unref(s);
    return st;
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

bool sql_relcache_current(sql_relcache *rc) {
  return !atomic_load(&rc->stale);
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

/* pg_namespace's oid of schema: a known table's, or read through con. */
static mr_status schema_oid(sql_relcache *rc, duckdb_connection con, const char *schema,
                            int64_t *oid, sql_error *err) {
  bool found = false;
  pthread_mutex_lock(&rc->mu);
  for (size_t i = 0; !found && i < rc->cur->n; i++)
    if (strcmp(rc->cur->v[i]->schema, schema) == 0) {
      *oid = rc->cur->v[i]->nspoid;
      found = true;
    }
  pthread_mutex_unlock(&rc->mu);
  if (found)
    return MR_OK;
  char *db = sql_quote_literal(rc->dbname), *qs = sql_quote_literal(schema);
  sql_strbuf q = {0};
  if (db && qs)
    sql_strbuf_addf(&q,
                    "SELECT oid::BIGINT FROM duckdb_schemas() WHERE database_name = %s "
                    "AND schema_name = %s",
                    db, qs);
  free(db);
  free(qs);
  char *sql = sql_strbuf_take(&q);
  if (sql == NULL)
    return oom(err);
  duckdb_result res;
  mr_status st = MR_OK;
  if (duckdb_query(con, sql, &res) != DuckDBSuccess)
    st = sql_fail_duckdb(err, duckdb_result_error(&res));
  else if (duckdb_row_count(&res) != 1)
    st = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "schema %s not found", schema);
  else
    *oid = duckdb_value_int64(&res, 0, 0);
  duckdb_destroy_result(&res);
  free(sql);
  return st;
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
                    "SELECT column_name, column_type, \"null\" = 'NO', \"default\" IS NOT NULL, "
                    "key IS NOT NULL FROM (DESCRIBE %s.%s.%s)",
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
  bool keyed = false;
  if (duckdb_query(con, sql, &res) != DuckDBSuccess) {
    st = sql_fail_duckdb(err, duckdb_result_error(&res));
  } else {
    size_t cap = 0;
    for (duckdb_data_chunk ch; st == MR_OK && (ch = duckdb_fetch_chunk(res)) != NULL;) {
      idx_t n = duckdb_data_chunk_get_size(ch);
      duckdb_vector v[5];
      for (idx_t k = 0; k < 5; k++)
        v[k] = duckdb_data_chunk_get_vector(ch, k);
      for (idx_t i = 0; st == MR_OK && i < n; i++) {
        char *type = vec_strdup(v[1], i);
        if (type == NULL || !add_col(r, &cap, vec_strdup(v[0], i), type, vec_bool(v[2], i),
                                     vec_bool(v[3], i)))
          st = oom(err);
        keyed = keyed || vec_bool(v[4], i);
        free(type);
      }
      duckdb_destroy_data_chunk(&ch);
    }
  }
  duckdb_destroy_result(&res);
  free(sql);
  /* only spec tables have keys (the planner refuses them elsewhere): the
   * scan of every table's constraints is paid for those alone */
  if (st == MR_OK && keyed)
    st = read_keys(rc, con, schema, table, &r, 1, err);
  if (st == MR_OK)
    st = schema_oid(rc, con, schema, &r->nspoid, err);
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
  size_t rel, col; /* the next row: set->v[rel], its column (or key) col (scan_next) */
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

static size_t cols_of(const rel *r) { return r->ncols; }
static size_t keys_of(const rel *r) { return r->nkeys; }

/* Steps st to its next (rel, item) pair, where a rel has n_of(rel) items
 * (columns or keys); false past the last. */
static bool scan_next(scan_state *st, size_t (*n_of)(const rel *), const rel **r, size_t *item) {
  for (; st->rel < st->set->n; st->rel++, st->col = 0)
    if (st->col < n_of(st->set->v[st->rel])) {
      *r = st->set->v[st->rel];
      *item = st->col++;
      return true;
    }
  return false;
}

static void attribute_scan(duckdb_function_info info, duckdb_data_chunk out) {
  scan_state *st = duckdb_function_get_init_data(info);
  idx_t cap = duckdb_vector_size(), n = 0;
  duckdb_vector v[7];
  for (idx_t k = 0; k < 7; k++)
    v[k] = duckdb_data_chunk_get_vector(out, k);
  const rel *r;
  size_t i;
  for (; n < cap && scan_next(st, cols_of, &r, &i); n++) {
    const rel_col *c = &r->cols[i];
    ((int64_t *)duckdb_vector_get_data(v[0]))[n] = r->oid;
    duckdb_vector_assign_string_element(v[1], n, c->name);
    ((int64_t *)duckdb_vector_get_data(v[2]))[n] = c->typid;
    ((int16_t *)duckdb_vector_get_data(v[3]))[n] = (int16_t)(i + 1);
    ((int32_t *)duckdb_vector_get_data(v[4]))[n] = c->typmod;
    ((bool *)duckdb_vector_get_data(v[5]))[n] = c->notnull;
    ((bool *)duckdb_vector_get_data(v[6]))[n] = c->hasdef;
  }
  duckdb_data_chunk_set_size(out, n);
}

static void constraint_bind(duckdb_bind_info info) {
  add_result(info, "oid", DUCKDB_TYPE_BIGINT);
  add_result(info, "conname", DUCKDB_TYPE_VARCHAR);
  add_result(info, "connamespace", DUCKDB_TYPE_BIGINT);
  add_result(info, "contype", DUCKDB_TYPE_VARCHAR);
  add_result(info, "conrelid", DUCKDB_TYPE_BIGINT);
  add_result(info, "conkey", DUCKDB_TYPE_VARCHAR);
  bind_common(info, false);
}

static void constraint_scan(duckdb_function_info info, duckdb_data_chunk out) {
  scan_state *st = duckdb_function_get_init_data(info);
  idx_t cap = duckdb_vector_size(), n = 0;
  duckdb_vector v[6];
  for (idx_t k = 0; k < 6; k++)
    v[k] = duckdb_data_chunk_get_vector(out, k);
  const rel *r;
  size_t i;
  for (; n < cap && scan_next(st, keys_of, &r, &i); n++) {
    const rel_key *k = &r->keys[i];
    ((int64_t *)duckdb_vector_get_data(v[0]))[n] = key_oid(r, i);
    duckdb_vector_assign_string_element(v[1], n, k->name);
    ((int64_t *)duckdb_vector_get_data(v[2]))[n] = r->nspoid;
    duckdb_vector_assign_string_element_len(v[3], n, &k->type, 1);
    ((int64_t *)duckdb_vector_get_data(v[4]))[n] = r->oid;
    duckdb_vector_assign_string_element(v[5], n, k->conkey);
  }
  duckdb_data_chunk_set_size(out, n);
}

/* ---- moraine_pg_table_info(schemas, relname) ------------------------------
 * The rows PostgreSQL gives the postgres extension's table lookup (its
 * columns joined with pg_class, pg_namespace, pg_attribute, pg_type and
 * pg_description, then the tables' PRIMARY KEY and UNIQUE constraints, in
 * the order namespace_id, relname, attnum, constraint_id), from the
 * directory: a cost in proportion to the tables asked for, where the same
 * query over the pg_catalog views builds every column of every table and
 * scans every constraint of the engine (sql_pgcatalog.c). schemas NULL:
 * every schema; relname NULL: every table of the schemas. */

enum { INFO_NCOLS = 15 };

typedef struct info_bind {
  scan_bind scan;
  bool any_schema; /* schemas NULL */
  char **schemas;
  size_t nschemas;
  char *relname;
} info_bind;

typedef struct info_state {
  relset *set;
  rel **hits; /* the tables asked for, in output order */
  size_t nhits, rel, row; /* next: hits[rel], its column row (then its keys) */
} info_state;

static void info_bind_free(void *p) {
  info_bind *b = p;
  for (size_t i = 0; i < b->nschemas; i++)
    free(b->schemas[i]);
  free(b->schemas);
  free(b->relname);
  free(b);
}

static void info_bind_fn(duckdb_bind_info info) {
  static const struct {
    const char *name;
    duckdb_type type;
  } cols[INFO_NCOLS] = {
      {"namespace_id", DUCKDB_TYPE_BIGINT},   {"relname", DUCKDB_TYPE_VARCHAR},
      {"relpages", DUCKDB_TYPE_INTEGER},      {"attname", DUCKDB_TYPE_VARCHAR},
      {"type_name", DUCKDB_TYPE_VARCHAR},     {"type_modifier", DUCKDB_TYPE_INTEGER},
      {"ndim", DUCKDB_TYPE_INTEGER},          {"attnum", DUCKDB_TYPE_SMALLINT},
      {"notnull", DUCKDB_TYPE_BOOLEAN},       {"constraint_id", DUCKDB_TYPE_BIGINT},
      {"constraint_type", DUCKDB_TYPE_VARCHAR}, {"constraint_key", DUCKDB_TYPE_VARCHAR},
      {"type_schema", DUCKDB_TYPE_VARCHAR},   {"column_comment", DUCKDB_TYPE_VARCHAR},
      {"table_comment", DUCKDB_TYPE_VARCHAR},
  };
  for (size_t i = 0; i < INFO_NCOLS; i++)
    add_result(info, cols[i].name, cols[i].type);
  info_bind *b = calloc(1, sizeof *b);
  duckdb_value list = duckdb_bind_get_parameter(info, 0);
  duckdb_value name = duckdb_bind_get_parameter(info, 1);
  bool ok = b != NULL;
  if (ok)
    b->any_schema = duckdb_is_null_value(list);
  size_t n = ok && !b->any_schema ? duckdb_get_list_size(list) : 0;
  if (ok && n && (b->schemas = calloc(n, sizeof *b->schemas)) == NULL)
    ok = false;
  for (size_t i = 0; ok && i < n; i++) {
    duckdb_value v = duckdb_get_list_child(list, i);
    char *text = duckdb_is_null_value(v) ? NULL : duckdb_get_varchar(v);
    if (text) { /* a NULL schema name matches nothing, as in IN (...) */
      b->schemas[b->nschemas] = sql_strdup(text);
      ok = b->schemas[b->nschemas++] != NULL;
      duckdb_free(text);
    }
    duckdb_destroy_value(&v);
  }
  if (ok && !duckdb_is_null_value(name)) {
    char *text = duckdb_get_varchar(name);
    b->relname = text ? sql_strdup(text) : NULL;
    ok = b->relname != NULL;
    duckdb_free(text);
  }
  duckdb_destroy_value(&list);
  duckdb_destroy_value(&name);
  if (!ok) {
    if (b)
      info_bind_free(b);
    duckdb_bind_set_error(info, "out of memory");
    return;
  }
  b->scan.rc = duckdb_bind_get_extra_info(info);
  duckdb_client_context ctx = NULL;
  duckdb_table_function_get_client_context(info, &ctx);
  b->scan.conn = ctx ? duckdb_client_context_get_connection_id(ctx) : 0;
  duckdb_destroy_client_context(&ctx);
  duckdb_bind_set_bind_data(info, b, info_bind_free);
}

static void info_state_free(void *p) {
  info_state *st = p;
  relset_unref(st->set);
  free(st->hits);
  free(st);
}

static int by_namespace_name(const void *a, const void *b) {
  const rel *x = *(rel *const *)a, *y = *(rel *const *)b;
  if (x->nspoid != y->nspoid)
    return x->nspoid < y->nspoid ? -1 : 1;
  return strcmp(x->name, y->name);
}

static bool info_wants(const info_bind *b, const rel *r) {
  if (b->relname && strcmp(b->relname, r->name) != 0)
    return false;
  if (b->any_schema)
    return true;
  for (size_t i = 0; i < b->nschemas; i++)
    if (strcmp(b->schemas[i], r->schema) == 0)
      return true;
  return false;
}

static void info_init(duckdb_init_info info) {
  info_bind *b = duckdb_init_get_bind_data(info);
  info_state *st = calloc(1, sizeof *st);
  if (st == NULL || (st->set = snapshot(b->scan.rc, b->scan.conn)) == NULL) {
    free(st);
    duckdb_init_set_error(info, "out of memory");
    return;
  }
  for (size_t i = 0; i < st->set->n; i++) {
    rel *r = st->set->v[i];
    if (!info_wants(b, r))
      continue;
    rel **grown = realloc(st->hits, (st->nhits + 1) * sizeof *grown);
    if (grown == NULL) {
      info_state_free(st);
      duckdb_init_set_error(info, "out of memory");
      return;
    }
    st->hits = grown;
    st->hits[st->nhits++] = r;
  }
  if (st->nhits > 1)
    qsort(st->hits, st->nhits, sizeof *st->hits, by_namespace_name);
  duckdb_init_set_init_data(info, st, info_state_free);
}

static void set_null(duckdb_vector v, idx_t row) {
  duckdb_vector_ensure_validity_writable(v);
  duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), row);
}

static void info_scan(duckdb_function_info info, duckdb_data_chunk out) {
  info_state *st = duckdb_function_get_init_data(info);
  idx_t cap = duckdb_vector_size(), n = 0;
  duckdb_vector v[INFO_NCOLS];
  for (idx_t k = 0; k < INFO_NCOLS; k++)
    v[k] = duckdb_data_chunk_get_vector(out, k);
  while (n < cap && st->rel < st->nhits) {
    const rel *r = st->hits[st->rel];
    if (st->row >= r->ncols + r->nkeys) {
      st->rel++;
      st->row = 0;
      continue;
    }
    size_t i = st->row++;
    const char *typname = NULL;
    int16_t typlen;
    if (i < r->ncols && !pg_type_info(r->cols[i].typid, &typname, &typlen))
      continue; /* a type pg_type does not list: the join with it drops the column */
    ((int64_t *)duckdb_vector_get_data(v[0]))[n] = r->nspoid;
    duckdb_vector_assign_string_element(v[1], n, r->name);
    if (i < r->ncols) {
      const rel_col *c = &r->cols[i];
      ((int32_t *)duckdb_vector_get_data(v[2]))[n] = 0;
      duckdb_vector_assign_string_element(v[3], n, c->name);
      duckdb_vector_assign_string_element(v[4], n, typname);
      ((int32_t *)duckdb_vector_get_data(v[5]))[n] = c->typmod;
      ((int32_t *)duckdb_vector_get_data(v[6]))[n] = 0;
      ((int16_t *)duckdb_vector_get_data(v[7]))[n] = (int16_t)(i + 1);
      ((bool *)duckdb_vector_get_data(v[8]))[n] = c->notnull;
      for (idx_t k = 9; k <= 11; k++)
        set_null(v[k], n);
      duckdb_vector_assign_string_element(v[12], n, "pg_catalog"); /* every pg_type row's */
    } else {
      const rel_key *k = &r->keys[i - r->ncols];
      for (idx_t j = 2; j <= 8; j++)
        set_null(v[j], n);
      ((int64_t *)duckdb_vector_get_data(v[9]))[n] = key_oid(r, i - r->ncols);
      duckdb_vector_assign_string_element_len(v[10], n, &k->type, 1);
      duckdb_vector_assign_string_element(v[11], n, k->conkey);
      set_null(v[12], n);
    }
    set_null(v[13], n); /* no comments: pg_description is empty */
    set_null(v[14], n);
    n++;
  }
  duckdb_data_chunk_set_size(out, n);
}

/* Registers a table function over rc; params: its parameter types (nparams). */
static mr_status register_one(sql_relcache *rc, duckdb_connection con, const char *name,
                              duckdb_table_function_bind_t bind, duckdb_table_function_init_t init,
                              duckdb_table_function_t scan, duckdb_logical_type *params,
                              size_t nparams, sql_error *err) {
  duckdb_table_function f = duckdb_create_table_function();
  duckdb_table_function_set_name(f, name);
  duckdb_table_function_set_extra_info(f, rc, NULL);
  duckdb_table_function_set_bind(f, bind);
  duckdb_table_function_set_init(f, init);
  duckdb_table_function_set_function(f, scan);
  for (size_t i = 0; i < nparams; i++)
    duckdb_table_function_add_parameter(f, params[i]);
  duckdb_state s = duckdb_register_table_function(con, f);
  duckdb_destroy_table_function(&f);
  if (s != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "cannot register %s", name);
  return MR_OK;
}

mr_status sql_relcache_register(sql_relcache *rc, duckdb_connection con, sql_error *err) {
  mr_status st = register_one(rc, con, "moraine_pg_class", class_bind, scan_init, class_scan,
                              NULL, 0, err);
  if (st == MR_OK)
    st = register_one(rc, con, "moraine_pg_attribute", attribute_bind, scan_init, attribute_scan,
                      NULL, 0, err);
  if (st == MR_OK)
    st = register_one(rc, con, "moraine_pg_constraint", constraint_bind, scan_init,
                      constraint_scan, NULL, 0, err);
  if (st)
    return st;
  duckdb_logical_type params[2]; /* (schemas VARCHAR[], relname VARCHAR) */
  params[1] = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
  params[0] = duckdb_create_list_type(params[1]);
  st = register_one(rc, con, SQL_PG_TABLE_INFO_FN, info_bind_fn, info_init, info_scan, params, 2,
                    err);
  duckdb_destroy_logical_type(&params[0]);
  duckdb_destroy_logical_type(&params[1]);
  return st;
}
