/*
 * catalog_load.c — materializes the retained catalog from the store into
 * the embedded DuckDB before serving (all of it, or without the history a
 * lazy load leaves in the store: catalog_history.c): the 28 ducklake_* tables
 * (snapshot records, current and history entities with their embedded
 * children, unversioned records, tag and option entries, schema versions)
 * and every inlined data / delete table, through sql.h's pre-load API.
 * Rows are gathered per table and appended in bulk, CHUNK_ROWS at a time
 * (a table's rows as text cost far more memory than in the engine, so a
 * catalog of a million data files is never held whole as text).
 *
 * Cost: a lake of thousands of tables has as many inlined-data tables, so
 * nothing here may cost a statement per record. The inlined tables' CREATE
 * statements are sent DDL_BATCH to one engine call, inside one
 * transaction; rows go to sql_engine_load_rows once per table. A load that
 * runs for more than PROGRESS_MS logs a progress line that often.
 *
 * Those engine calls go through a feed (catalog_feed.c): catalog_load's
 * runs them on a thread of its own and reads on meanwhile; a chunk is
 * CHUNK_ROWS rows, small enough that the few chunks in flight cost little
 * memory, large enough that the engine's per-call cost does not show. A
 * cat_loader's feed runs them as they come, on the caller's thread, inside
 * its pre-load transaction (which only that thread may use).
 */
#include "catalog/catalog_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mr_format.h"
#include "base/mr_grow.h"

enum { DDL_BATCH = 256, PROGRESS_MS = 2000, CHUNK_ROWS = 16384, TEXT_BLOCK = 256 * 1024 };

/* Cell text lives in blocks owned by its rowbuf, freed together when the
 * rows have gone to the engine: a million files are millions of cells, and
 * a malloc and free each cost more than the rest of their way. */
typedef struct text_block {
  struct text_block *next;
  size_t used, cap;
  char data[];
} text_block;

typedef struct rowbuf {
  char *table;
  size_t ncols;
  sql_value *vals; /* row-major; data in text */
  size_t nrows, cap;
  text_block *text;
} rowbuf;

typedef struct load_ctx {
  catalog *c;
  rowbuf *bufs;
  size_t nbufs;
  size_t *spec_buf; /* per catalog_table_at index: 1 + its bufs index, 0: none yet */
  size_t nsnap;
  size_t total;
  char *ddl; /* CREATE statements not yet sent ("...; ...; "), ddl_n of them */
  size_t ddl_len, ddl_cap, ddl_n;
  size_t records, tables_created, tables_loaded; /* for the progress line */
  char **names; /* the inlined tables created, for catalog->inline_names */
  size_t nnames, names_cap;
  bool in_txn; /* cat_loader: inside the caller's pre-load transaction */
  cat_feed *feed; /* where the engine calls go (threaded for catalog_load) */
  uint64_t t0_ms, last_log_ms;
} load_ctx;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A progress line when PROGRESS_MS passed since the last one (or the
 * start): a long load shows it is moving, and how far. */
static void progress(load_ctx *l, const char *phase) {
  uint64_t now = now_ms();
  if (now - l->last_log_ms < PROGRESS_MS)
    return;
  l->last_log_ms = now;
  fprintf(stderr,
          "moraine: loading catalog schema \"%s\": %s, %zu records read, %zu inlined tables "
          "created, %zu of %zu tables loaded (%zu rows), %llu ms\n",
          l->c->schema[0] ? l->c->schema : "public", phase, l->records, l->tables_created,
          l->tables_loaded, l->nbufs, l->total, (unsigned long long)(now - l->t0_ms));
}

static rowbuf *buf_for(load_ctx *l, const char *table, size_t ncols, mr_error *err) {
  /* rows of one inlined table are adjacent in key order: the last buffer
   * is almost always the one, so a lake of thousands of tables does not
   * pay a search per row */
  if (l->nbufs && strcmp(l->bufs[l->nbufs - 1].table, table) == 0)
    return &l->bufs[l->nbufs - 1];
  for (size_t i = 0; i < l->nbufs; i++)
    if (strcmp(l->bufs[i].table, table) == 0)
      return &l->bufs[i];
  rowbuf *nb = realloc(l->bufs, (l->nbufs + 1) * sizeof *nb);
  if (nb == NULL) {
    mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    return NULL;
  }
  l->bufs = nb;
  rowbuf *b = &l->bufs[l->nbufs++];
  memset(b, 0, sizeof *b);
  b->table = strdup(table);
  b->ncols = ncols;
  return b;
}

/* A new row of b (cells NULL); NULL on allocation failure. */
static mr_status buf_flush(load_ctx *l, rowbuf *b, mr_error *err);

/* A new row of b, all NULL; a full chunk goes to the engine first. */
static sql_value *row_add(load_ctx *l, rowbuf *b, mr_error *err) {
  if (b->nrows >= CHUNK_ROWS && buf_flush(l, b, err))
    return NULL;
  if (b->nrows == b->cap) {
    size_t nc = b->cap ? 2 * b->cap : 64;
    sql_value *nv = realloc(b->vals, nc * b->ncols * sizeof *nv);
    if (nv == NULL) {
      mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
      return NULL;
    }
    b->vals = nv;
    b->cap = nc;
  }
  sql_value *r = &b->vals[b->nrows++ * b->ncols];
  for (size_t i = 0; i < b->ncols; i++)
    r[i] = SQL_VALUE_NULL;
  return r;
}

static void text_chain_free(void *chain) {
  for (text_block *t = chain; t;) {
    text_block *next = t->next;
    free(t);
    t = next;
  }
}

static void text_free(rowbuf *b) {
  text_chain_free(b->text);
  b->text = NULL;
}

/* A copy of s[0..n) in b's text blocks, NUL-terminated as sql_value asks. */
static mr_status set_text(rowbuf *b, sql_value *v, const char *s, size_t n, mr_error *err) {
  text_block *t = b->text;
  if (t == NULL || t->cap - t->used < n + 1) {
    size_t cap = n + 1 > TEXT_BLOCK ? n + 1 : TEXT_BLOCK;
    text_block *nt = malloc(sizeof *nt + cap);
    if (nt == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    nt->used = 0;
    nt->cap = cap;
    /* a cell larger than a block gets its own, behind the current one */
    if (t != NULL && cap > TEXT_BLOCK) {
      nt->next = t->next;
      t->next = nt;
    } else {
      nt->next = t;
      b->text = nt;
    }
    t = nt;
  }
  char *c = t->data + t->used;
  t->used += n + 1;
  if (n)
    memcpy(c, s, n);
  c[n] = '\0';
  *v = SQL_VALUE_TEXT(c, n);
  return MR_OK;
}

static mr_status set_i64(rowbuf *b, sql_value *v, int64_t x, mr_error *err) {
  char buf[24];
  mr_status rc = set_text(b, v, buf, mr_format_i64(x, buf), err);
  v->has_int = true;
  v->int_value = x;
  return rc;
}

/* One row of tb from msg; columns msg lacks come from parent (children's
 * parent key columns) or, for ducklake_metadata, from the option scope. */
static mr_status emit(load_ctx *l, const catalog_table *tb, const ProtobufCMessage *msg,
                      const ProtobufCMessage *parent, mr_error *err) {
  /* a file's rows alternate between its table and its column stats: each
   * spec table remembers its buffer, and only inlined tables search */
  if (l->spec_buf == NULL &&
      (l->spec_buf = calloc(catalog_table_count(), sizeof *l->spec_buf)) == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  rowbuf *b;
  if (l->spec_buf[tb->index]) {
    b = &l->bufs[l->spec_buf[tb->index] - 1];
  } else {
    if ((b = buf_for(l, tb->name, tb->ncols, err)) == NULL)
      return err->code;
    l->spec_buf[tb->index] = (size_t)(b - l->bufs) + 1;
  }
  sql_value *r = row_add(l, b, err);
  if (r == NULL)
    return err->code;
  l->total++;
  for (size_t i = 0; i < tb->ncols; i++) {
    const catalog_column *col = &tb->cols[i];
    mr_status rc = MR_OK;
    if (col->field) {
      catalog_cell cell;
      rc = catalog_get_field(msg, col->field, col->type, &cell, err);
      if (!rc && cell.text)
        rc = set_text(b, &r[i], cell.text, cell.len, err);
      r[i].has_int = cell.has_int;
      r[i].int_value = cell.int_value;
    } else if (tb->role == CAT_OPTION && parent) {
      int64_t kind = 0, sid = 0;
      cat_msg_i64(parent, "scope_kind", &kind);
      cat_msg_i64(parent, "scope_id", &sid);
      if (strcmp(col->name, "scope") == 0 && kind != MR_SCOPE_GLOBAL)
        rc = set_text(b, &r[i], kind == MR_SCOPE_SCHEMA ? "schema" : "table",
                      kind == MR_SCOPE_SCHEMA ? 6 : 5, err);
      else if (strcmp(col->name, "scope_id") == 0 && kind != MR_SCOPE_GLOBAL)
        rc = set_i64(b, &r[i], sid, err);
    } else if (parent) {
      int64_t v;
      if (cat_msg_i64(parent, col->name, &v))
        rc = set_i64(b, &r[i], v, err);
    }
    if (rc)
      return rc;
  }
  return MR_OK;
}

char *cat_quote_ident(const char *s) {
  size_t n = strlen(s);
  char *o = malloc(2 * n + 3);
  if (o == NULL)
    return NULL;
  size_t j = 0;
  o[j++] = '"';
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"')
      o[j++] = '"';
    o[j++] = s[i];
  }
  o[j++] = '"';
  o[j] = '\0';
  return o;
}

static mr_status exec(load_ctx *l, const char *sql, mr_error *err) {
  sql_error se;
  memset(&se, 0, sizeof se);
  if (sql_engine_exec(l->c->e, sql, &se) != MR_OK)
    return mr_fail(err, se.base.code ? se.base.code : MR_ERR_IO, "catalog load: %s: %s", sql,
                   se.base.msg);
  return MR_OK;
}

/* Sends the gathered CREATE statements in one engine call, in one
 * transaction (rolled back if one fails: the load fails then anyway). */
static mr_status flush_ddl(load_ctx *l, mr_error *err) {
  if (l->ddl_n == 0)
    return MR_OK;
  /* in the caller's transaction they need no own one */
  const char *begin = l->in_txn ? "" : "BEGIN; ", *commit = l->in_txn ? "" : "COMMIT";
  size_t need = strlen(begin) + l->ddl_len + strlen(commit) + 1;
  char *sql = malloc(need);
  if (sql == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  snprintf(sql, need, "%s%.*s%s", begin, (int)l->ddl_len, l->ddl, commit);
  mr_status rc = cat_feed_sql(l->feed, sql, !l->in_txn, err); /* it rolls back a failure */
  if (rc)
    return rc;
  l->tables_created += l->ddl_n;
  l->ddl_len = 0;
  l->ddl_n = 0;
  progress(l, "creating inlined tables");
  return MR_OK;
}

/* Notes an inlined table the load creates. */
static mr_status note_inline(load_ctx *l, const char *name, mr_error *err) {
  if (l->nnames == l->names_cap) {
    size_t cap = l->names_cap ? 2 * l->names_cap : 16;
    char **v = realloc(l->names, cap * sizeof *v);
    if (v == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    l->names = v;
    l->names_cap = cap;
  }
  if ((l->names[l->nnames] = strdup(name)) == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  l->nnames++;
  return MR_OK;
}

/* Adds one CREATE statement to the batch, sending the batch when full. */
static mr_status add_ddl(load_ctx *l, const char *stmt, mr_error *err) {
  size_t n = strlen(stmt);
  if (mr_grow((void **)&l->ddl, &l->ddl_cap, l->ddl_len + n + 3, 4096) != MR_OK)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  memcpy(l->ddl + l->ddl_len, stmt, n);
  memcpy(l->ddl + l->ddl_len + n, "; ", 3);
  l->ddl_len += n + 2;
  l->ddl_n++;
  return l->ddl_n >= DDL_BATCH ? flush_ddl(l, err) : MR_OK;
}

char *cat_quoted_schema(const catalog *c) {
  return cat_quote_ident(c->schema[0] ? c->schema : "public");
}

/* fmt with two %s (a, b) into *buf, grown as needed (cap its size). */
static mr_status asprintf_schema(char **buf, size_t *cap, const char *fmt, const char *a,
                                 const char *b) {
  size_t need = strlen(fmt) + strlen(a) + strlen(b) + 1;
  if (need > *cap) {
    char *nb = realloc(*buf, need);
    if (nb == NULL)
      return MR_ERR_NOMEM;
    *buf = nb;
    *cap = need;
  }
  snprintf(*buf, *cap, fmt, a, b);
  return MR_OK;
}

mr_status catalog_set_schema(catalog *c, const char *schema, mr_error *err) {
  size_t n = strlen(schema);
  if (n == 0 || n > CATALOG_MAX_SCHEMA)
    return mr_fail(err, MR_ERR_INVALID, "catalog: a schema name must have 1 to %d bytes",
                   CATALOG_MAX_SCHEMA);
  memcpy(c->schema, schema, n + 1);
  return MR_OK;
}

static mr_status create_inline_data(load_ctx *l, const Moraine__V1__InlineDataTable *m,
                                    mr_error *err) {
  char *qs = cat_quoted_schema(l->c);
  if (qs == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  size_t cap = 256 + strlen(qs);
  for (size_t i = 0; i < m->n_column; i++)
    cap += 2 * strlen(m->column[i]->name) + strlen(m->column[i]->type) + 8;
  char *sql = malloc(cap);
  if (sql == NULL) {
    free(qs);
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  }
  size_t n = (size_t)snprintf(sql, cap,
                              "CREATE TABLE IF NOT EXISTS %s.ducklake_inlined_data_%lld_%lld("
                              "row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT",
                              qs, (long long)m->table_id, (long long)m->schema_version);
  free(qs);
  char name[96];
  snprintf(name, sizeof name, "ducklake_inlined_data_%lld_%lld", (long long)m->table_id,
           (long long)m->schema_version);
  mr_status nrc = note_inline(l, name, err);
  if (nrc) {
    free(sql);
    return nrc;
  }
  for (size_t i = 0; i < m->n_column; i++) {
    char *q = cat_quote_ident(m->column[i]->name);
    if (q == NULL) {
      free(sql);
      return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    }
    n += (size_t)snprintf(sql + n, cap - n, ", %s %s", q, m->column[i]->type);
    free(q);
  }
  snprintf(sql + n, cap - n, ")");
  mr_status rc = add_ddl(l, sql, err);
  free(sql);
  return rc;
}

static mr_status visit(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  load_ctx *l = ctx;
  mr_status rc = MR_OK;
  char name[96];
  if (k->kind == MR_KK_SNAPSHOT)
    l->nsnap++;
  if (++l->records % 4096 == 0)
    progress(l, "reading the store");
  switch (k->kind) {
  case MR_KK_INLINE_TABLE:
    rc = create_inline_data(l, (const Moraine__V1__InlineDataTable *)m, err);
    break;
  case MR_KK_INLINE_ROW: {
    const Moraine__V1__InlineDataRow *r = (const Moraine__V1__InlineDataRow *)m;
    snprintf(name, sizeof name, "ducklake_inlined_data_%lld_%lld", (long long)r->table_id,
             (long long)r->schema_version);
    rowbuf *b = buf_for(l, name, 3 + r->n_cell, err);
    sql_value *v = b ? row_add(l, b, err) : NULL;
    if (v == NULL)
      return err->code;
    if (b->ncols != 3 + r->n_cell)
      return mr_fail(err, MR_ERR_CORRUPTION, "catalog load: %s rows disagree on width", name);
    l->total++;
    rc = set_i64(b, &v[0], r->row_id, err);
    if (!rc)
      rc = set_i64(b, &v[1], r->begin_snapshot, err);
    if (!rc && r->has_end_snapshot)
      rc = set_i64(b, &v[2], r->end_snapshot, err);
    for (size_t i = 0; !rc && i < r->n_cell; i++)
      if (!r->cell[i]->is_null)
        rc = set_text(b, &v[3 + i], (const char *)r->cell[i]->value.data, r->cell[i]->value.len,
                      err);
    return rc;
  }
  case MR_KK_INLINE_DELETE_TABLE: {
    char sql[512];
    char *qs = cat_quoted_schema(l->c);
    if (qs == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    snprintf(sql, sizeof sql,
             "CREATE TABLE IF NOT EXISTS %s.ducklake_inlined_delete_%lld(file_id BIGINT, "
             "row_id BIGINT, begin_snapshot BIGINT)",
             qs, (long long)k->c[0]);
    free(qs);
    snprintf(name, sizeof name, "ducklake_inlined_delete_%lld", (long long)k->c[0]);
    rc = note_inline(l, name, err);
    return rc ? rc : add_ddl(l, sql, err);
  }
  case MR_KK_INLINE_DELETE_ROW: {
    const Moraine__V1__InlineDeleteRow *r = (const Moraine__V1__InlineDeleteRow *)m;
    snprintf(name, sizeof name, "ducklake_inlined_delete_%lld", (long long)r->table_id);
    rowbuf *b = buf_for(l, name, 3, err);
    sql_value *v = b ? row_add(l, b, err) : NULL;
    if (v == NULL)
      return err->code;
    l->total++;
    rc = set_i64(b, &v[0], r->file_id, err);
    if (!rc)
      rc = set_i64(b, &v[1], r->row_id, err);
    if (!rc)
      rc = set_i64(b, &v[2], r->begin_snapshot, err);
    return rc;
  }
  default:
    break;
  }
  if (rc)
    return rc;
  /* every table whose home is this kind: the record itself, then children */
  size_t ntb;
  const catalog_table *const *tbs = catalog_tables_of_kind(k->kind, &ntb);
  for (size_t i = 0; !rc && i < ntb; i++) {
    const catalog_table *tb = tbs[i];
    if (tb->field == NULL) {
      rc = emit(l, tb, m, NULL, err);
    } else {
      ProtobufCMessage **arr;
      size_t n = cat_msg_rep(m, tb->rep, &arr);
      for (size_t j = 0; !rc && j < n; j++)
        rc = emit(l, tb, arr[j], m, err);
    }
  }
  return rc;
}

void cat_inline_names_free(catalog *c) {
  for (size_t i = 0; i < c->ninline; i++)
    free(c->inline_names[i]);
  free(c->inline_names);
  c->inline_names = NULL;
  c->ninline = 0;
}

static void bufs_free(load_ctx *l) {
  for (size_t i = 0; i < l->nnames; i++)
    free(l->names[i]);
  free(l->names);
  for (size_t i = 0; i < l->nbufs; i++) {
    rowbuf *b = &l->bufs[i];
    text_free(b);
    free(b->vals);
    free(b->table);
  }
  free(l->bufs);
  free(l->spec_buf);
  free(l->ddl);
}

static mr_status count_snap(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  (*(size_t *)ctx)++;
  return MR_ERR_NOT_FOUND; /* one is enough */
}

/* Appends b's gathered rows to its table (after the pending CREATEs, which
 * may include its own) and empties b. */
static mr_status buf_flush(load_ctx *l, rowbuf *b, mr_error *err) {
  mr_status rc = flush_ddl(l, err);
  if (rc || b->nrows == 0)
    return rc;
  /* the feed takes the rows and their text */
  rc = cat_feed_rows(l->feed, b->table, b->ncols, b->nrows, b->vals, b->text, text_chain_free, err);
  b->vals = NULL;
  b->cap = 0;
  b->text = NULL;
  b->nrows = 0;
  return rc;
}

/* Sends the pending CREATE statements, then each table's remaining rows. */
static mr_status load_gathered(load_ctx *l, mr_error *err) {
  mr_status rc = flush_ddl(l, err);
  for (size_t i = 0; !rc && i < l->nbufs; i++) {
    rc = buf_flush(l, &l->bufs[i], err);
    l->tables_loaded++;
    progress(l, "loading rows");
  }
  return rc;
}

mr_status catalog_load(catalog *c, size_t *nrows, mr_error *err) {
  if (nrows)
    *nrows = 0;
  size_t nsnap = 0;
  mr_status rc = store_list_snapshots(c->st, count_snap, &nsnap, err);
  if (rc == MR_ERR_NOT_FOUND && nsnap > 0) {
    mr_error_clear(err);
    rc = MR_OK;
  }
  if (rc)
    return rc;
  if (nsnap == 0)
    return MR_OK; /* empty store: DuckLake creates its tables on first ATTACH */
  /* before the scans: a pass landing meanwhile makes a replica reload */
  rc = cat_mark_maintenance(c, err);
  if (rc)
    return rc;
  load_ctx l;
  memset(&l, 0, sizeof l);
  l.c = c;
  l.t0_ms = l.last_log_ms = now_ms();
  if (c->schema[0] == '\0' || strcmp(c->schema, "public") == 0) {
    for (size_t i = 0; !rc && i < catalog_table_count(); i++)
      rc = exec(&l, catalog_table_at(i)->ddl, err);
  } else { /* another metadata schema: the same DDL, in that schema */
    char *qs = cat_quoted_schema(c);
    if (qs == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    char *sql = NULL;
    size_t cap = 0;
    static const char prefix[] = "CREATE TABLE public.";
    if (asprintf_schema(&sql, &cap, "CREATE SCHEMA IF NOT EXISTS %s", qs, "") != MR_OK)
      rc = mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
    if (!rc)
      rc = exec(&l, sql, err);
    for (size_t i = 0; !rc && i < catalog_table_count(); i++) {
      const char *ddl = catalog_table_at(i)->ddl;
      if (strncmp(ddl, prefix, sizeof prefix - 1) != 0) {
        rc = mr_fail(err, MR_ERR_INVALID, "catalog load: unexpected DDL %s", ddl);
        break;
      }
      if (asprintf_schema(&sql, &cap, "CREATE TABLE %s.%s", qs, ddl + sizeof prefix - 1) != MR_OK)
        rc = mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
      if (!rc)
        rc = exec(&l, sql, err);
    }
    free(sql);
    free(qs);
  }
  /* the engine's appends overlap the reading from here on (catalog_feed.c) */
  if (!rc)
    rc = cat_feed_start(c->e, c->schema[0] ? c->schema : "public", true, &l.feed, err);
  /* snapshots and history: all, or what a lazy load keeps (catalog_history.c) */
  if (!rc)
    rc = cat_history_load(c, visit, &l, err);
  if (!rc)
    rc = cat_history_load_current(c, visit, &l, err);
  if (!rc)
    rc = cat_history_load_inline(c, visit, &l, err);
  if (!rc)
    rc = store_load_subspace(c->st, MR_SS_SCHEMA_VERSION, visit, &l, err);
  if (!rc)
    rc = load_gathered(&l, err);
  mr_error feed_err;
  mr_status frc = cat_feed_finish(l.feed, rc != MR_OK, rc ? &feed_err : err);
  if (!rc)
    rc = frc;
  if (!rc && nrows)
    *nrows = l.total;
  if (!rc) { /* what is in the engine now (catalog_reload works from it) */
    c->spec_tables = true;
    cat_inline_names_free(c);
    c->inline_names = l.names;
    c->ninline = l.nnames;
    l.names = NULL;
    l.nnames = 0;
  }
  bufs_free(&l);
  return rc;
}

/* ---- cat_loader: the same gathering for a few records ------------------- */

struct cat_loader {
  load_ctx l;
};

mr_status cat_loader_new(catalog *c, cat_loader **out, mr_error *err) {
  *out = calloc(1, sizeof **out);
  if (*out == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog load: out of memory");
  (*out)->l.c = c;
  (*out)->l.in_txn = true;
  (*out)->l.t0_ms = (*out)->l.last_log_ms = now_ms();
  mr_status rc =
      cat_feed_start(c->e, c->schema[0] ? c->schema : "public", false, &(*out)->l.feed, err);
  if (rc) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

mr_status cat_loader_visit(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  return visit(&((cat_loader *)ctx)->l, k, m, err);
}

mr_status cat_loader_finish(cat_loader *ld, size_t *nrows, mr_error *err) {
  mr_status rc = load_gathered(&ld->l, err);
  if (nrows)
    *nrows = ld->l.total;
  for (size_t i = 0; rc == MR_OK && i < ld->l.nnames; i++) { /* new inlined tables */
    bool known = false;
    for (size_t j = 0; j < ld->l.c->ninline && !known; j++)
      known = strcmp(ld->l.c->inline_names[j], ld->l.names[i]) == 0;
    if (!known)
      rc = cat_inline_names_add(ld->l.c, ld->l.names[i], err);
  }
  return rc;
}

void cat_loader_free(cat_loader *ld) {
  if (ld == NULL)
    return;
  cat_feed_discard(ld->l.feed); /* unthreaded: nothing is left to run */
  bufs_free(&ld->l);
  free(ld);
}

mr_status cat_inline_names_add(catalog *c, const char *name, mr_error *err) {
  char **v = realloc(c->inline_names, (c->ninline + 1) * sizeof *v);
  if (v == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
  c->inline_names = v;
  if ((v[c->ninline] = strdup(name)) == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
  c->ninline++;
  return MR_OK;
}
