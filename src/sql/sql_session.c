/*
 * sql_session.c — one client session over its own DuckDB connection: the
 * transaction state machine ('I' idle, 'T' in transaction, 'E' aborted),
 * PostgreSQL's session commands (BEGIN/COMMIT/ROLLBACK, SET/SHOW/RESET,
 * DISCARD), statement dispatch to DuckDB with change capture, and the commit
 * protocol with the engine's hooks (see sql.h).
 *
 * Transactions: every DuckDB statement runs inside a DuckDB transaction that
 * this file began — an explicit one (BEGIN), or an implicit one around an
 * autocommit statement, a multi-statement simple query, or the extended-
 * protocol messages up to Sync — so every commit goes through commit_txn().
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sql/sql_internal.h"
#include "sql/sql_plan.h"
#include "sql/sql_state.h"

/* X(name, default) — GUCs SHOW knows before any SET. */
#define GUC_DEFAULTS(X)                                                                            \
  X("server_encoding", "UTF8")                                                                     \
  X("client_encoding", "UTF8")                                                                     \
  X("datestyle", "ISO, MDY")                                                                       \
  X("timezone", "UTC")                                                                             \
  X("integer_datetimes", "on")                                                                     \
  X("standard_conforming_strings", "on")                                                           \
  X("intervalstyle", "postgres")                                                                   \
  X("application_name", "")                                                                        \
  X("search_path", "\"$user\", public")                                                            \
  X("default_transaction_isolation", "repeatable read")                                            \
  X("default_transaction_read_only", "off")                                                        \
  X("is_superuser", "on")                                                                          \
  X("max_identifier_length", "63")                                                                 \
  X("lc_collate", "C")                                                                             \
  X("lc_ctype", "C")                                                                               \
  X("extra_float_digits", "1")                                                                     \
  X("statement_timeout", "0")                                                                      \
  X("lock_timeout", "0")                                                                           \
  X("idle_in_transaction_session_timeout", "0")                                                    \
  X("max_connections", "100")

/* GUCs a client is told about in ParameterStatus when they change. */
static bool guc_reported(const char *name) {
  static const char *const reported[] = {"application_name",
                                         "client_encoding",
                                         "datestyle",
                                         "timezone",
                                         "intervalstyle",
                                         "is_superuser",
                                         "standard_conforming_strings",
                                         NULL};
  for (size_t i = 0; reported[i]; i++)
    if (strcmp(reported[i], name) == 0)
      return true;
  return false;
}

/* The spelling PostgreSQL reports a GUC under. */
static const char *guc_display_name(const char *name) {
  if (strcmp(name, "datestyle") == 0)
    return "DateStyle";
  if (strcmp(name, "timezone") == 0)
    return "TimeZone";
  if (strcmp(name, "intervalstyle") == 0)
    return "IntervalStyle";
  return name;
}

static mr_status complete(const sql_sink *sink, const char *tag, sql_error *err) {
  return SQL_SINK_CALL(sink, command_complete, tag) ? sql_fail_lost(err) : MR_OK;
}

static mr_status duck_exec(sql_session *s, const char *sql, sql_error *err) {
  return sql_exec(s->con, sql, err);
}

/* ---- GUCs --------------------------------------------------------------- */

static void lower(char *p) {
  for (; *p; p++)
    *p = (char)tolower((unsigned char)*p);
}

static sql_guc *guc_find(sql_session *s, const char *name) {
  for (size_t i = 0; i < s->ngucs; i++)
    if (strcmp(s->gucs[i].name, name) == 0)
      return &s->gucs[i];
  return NULL;
}

static mr_status guc_set(sql_session *s, const char *name, const char *value, sql_error *err) {
  sql_guc *g = guc_find(s, name);
  if (g == NULL) {
    sql_guc *v = realloc(s->gucs, (s->ngucs + 1) * sizeof *v);
    if (v == NULL)
      return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    s->gucs = v;
    g = &s->gucs[s->ngucs++];
    g->name = sql_strdup(name);
    g->value = NULL;
    if (g->name == NULL)
      return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  free(g->value);
  g->value = sql_strdup(value);
  if (g->value == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return MR_OK;
}

static void guc_reset_all(sql_session *s) {
  for (size_t i = 0; i < s->ngucs; i++) {
    free(s->gucs[i].name);
    free(s->gucs[i].value);
  }
  free(s->gucs);
  s->gucs = NULL;
  s->ngucs = 0;
}

static void guc_reset(sql_session *s, const char *name) {
  sql_guc *g = guc_find(s, name);
  if (g == NULL)
    return;
  free(g->name);
  free(g->value);
  *g = s->gucs[--s->ngucs];
}

const char *sql_session_guc(sql_session *s, const char *name_in) {
  char name[128];
  snprintf(name, sizeof name, "%s", name_in);
  lower(name);
  if (strcmp(name, "server_version") == 0) {
    snprintf(s->show_buf, sizeof s->show_buf, "%s", s->e->version);
    return s->show_buf;
  }
  if (strcmp(name, "server_version_num") == 0) {
    int major = atoi(s->e->version), minor = 0;
    const char *dot = strchr(s->e->version, '.');
    if (dot)
      minor = atoi(dot + 1);
    snprintf(s->show_buf, sizeof s->show_buf, "%d", major * 10000 + minor);
    return s->show_buf;
  }
  if (strcmp(name, "transaction_read_only") == 0)
    return s->read_only ? "on" : "off";
  if (strcmp(name, "transaction_isolation") == 0)
    return "repeatable read";
  if (strcmp(name, "session_authorization") == 0)
    return s->user;
  sql_guc *g = guc_find(s, name);
  if (g)
    return g->value;
#define GUC_DEFAULT(n, v)                                                                          \
  if (strcmp(name, n) == 0)                                                                        \
    return v;
  GUC_DEFAULTS(GUC_DEFAULT)
#undef GUC_DEFAULT
  return NULL;
}

/* ---- temporary tables ----------------------------------------------------- */

/* Temporary tables are session scratch space: they may be named by the
 * session that made them and are never captured. The session keeps their
 * names (the planner asks through sql_plan_env). */
static bool session_is_temp(void *ctx, const char *name) {
  sql_session *s = ctx;
  for (size_t i = 0; i < s->ntemps; i++)
    if (strcmp(s->temps[i].name, name) == 0)
      return true;
  return false;
}

static mr_status temp_add(sql_session *s, const char *name, bool on_commit_drop, sql_error *err) {
  if (session_is_temp(s, name))
    return MR_OK;
  sql_temp *v = realloc(s->temps, (s->ntemps + 1) * sizeof *v);
  if (v == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  s->temps = v;
  s->temps[s->ntemps].name = sql_strdup(name);
  s->temps[s->ntemps].on_commit_drop = on_commit_drop;
  if (s->temps[s->ntemps].name == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  s->ntemps++;
  s->temp_gen++;
  return MR_OK;
}

static void temp_forget(sql_session *s, size_t i) {
  s->temp_gen++;
  free(s->temps[i].name);
  s->temps[i] = s->temps[--s->ntemps];
}

static void temp_remove(sql_session *s, const char *name) {
  for (size_t i = 0; i < s->ntemps; i++)
    if (strcmp(s->temps[i].name, name) == 0) {
      temp_forget(s, i);
      return;
    }
}

static bool target_is_temp(sql_session *s, const sql_dml_target *d) {
  if (d->schema && strcmp(d->schema, "temp") != 0 && strcmp(d->schema, "pg_temp") != 0)
    return false;
  return session_is_temp(s, d->table);
}

/*
 * A DML on a catalog table that the capture could not carry to the store
 * whole: its change would be served, then be gone (or doubled) after the
 * next start. Two shapes: the client's own RETURNING (the capture needs the
 * statement's RETURNING for itself), and an UPDATE assigning a column that
 * identifies the row in the store (the capture sees only the new row, so
 * the old one would stay: may_update hook). Temporary tables capture
 * nothing and take both.
 */
static mr_status dml_refused(sql_session *s, const sql_dml_target *d, sql_error *err) {
  if (target_is_temp(s, d))
    return MR_OK;
  if (d->has_returning)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                    "RETURNING is supported on temporary tables only: moraine could not keep "
                    "this change to \"%s\" in its store; send the statement without RETURNING",
                    d->table);
  const sql_commit_hooks *h = &s->e->hooks;
  for (size_t i = 0; s->e->has_hooks && h->may_update && i < d->nset_cols; i++)
    if (!h->may_update(h->ctx, d->table, d->set_cols[i]))
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "UPDATE of %s.%s is not supported: the column identifies the row in "
                      "moraine's store; delete the row and insert the new one instead",
                      d->table, d->set_cols[i]);
  return MR_OK;
}

/* ---- sessions ----------------------------------------------------------- */

void sql_session_set_dealloc(sql_session *s, sql_dealloc_fn fn, void *ctx) {
  s->dealloc = fn;
  s->dealloc_ctx = ctx;
}

void sql_session_set_read_only_role(sql_session *s, bool read_only) {
  s->role_read_only = read_only;
}

bool sql_session_take_commit_times(sql_session *s, sql_commit_times *out) {
  if (!s->has_last_commit)
    return false;
  *out = s->last_commit;
  s->has_last_commit = false;
  return true;
}

static void session_destroy(sql_session *s);

/* A session e keeps idle, made the given user's; NULL when none is kept. */
static sql_session *session_unpark(sql_engine *e, const char *user, const char *database) {
  pthread_mutex_lock(&e->idle_mu);
  sql_session *s = e->nidle ? e->idle[--e->nidle] : NULL;
  pthread_mutex_unlock(&e->idle_mu);
  if (s == NULL)
    return NULL;
  s->user = sql_strdup(user ? user : "moraine");
  s->database = sql_strdup(database ? database : "moraine");
  if (!s->user || !s->database) {
    session_destroy(s);
    return NULL;
  }
  return s;
}

mr_status sql_session_open(sql_engine *e, const char *user, const char *database, sql_session **out,
                           sql_error *err) {
  *out = session_unpark(e, user, database);
  if (*out)
    return MR_OK;
  sql_session *s = calloc(1, sizeof *s);
  if (s == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  s->e = e;
  s->status = 'I';
  pthread_mutex_init(&s->cancel_mu, NULL);
  sql_cache_init(&s->plans, sql_cache_value_free, SQL_CACHE_PLAN_SLOTS);
  sql_cache_init(&s->prepared_ps, sql_cache_value_free, SQL_CACHE_PREPARED_SLOTS);
  s->user = sql_strdup(user ? user : "moraine");
  s->database = sql_strdup(database ? database : "moraine");
  if (!s->user || !s->database) {
    session_destroy(s);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  if (duckdb_connect(e->db, &s->con) != DuckDBSuccess) {
    session_destroy(s);
    return sql_fail(err, MR_ERR_IO, SQLSTATE_IO_ERROR, "cannot connect to the embedded DuckDB");
  }
  s->conn_id = sql_relcache_conn_id(s->con);
  mr_status rc = duck_exec(s, e->search_path_sql, err);
  if (rc) {
    session_destroy(s);
    return rc;
  }
  *out = s;
  return MR_OK;
}

static void rollback_txn(sql_session *s);

/* Brings a closing session back to what sql_session_open gives, keeping
 * its DuckDB connection and caches, and hands it to the engine's idle
 * list. False (nothing kept) when it ever had a temporary table (DuckDB
 * objects moraine would have to find and drop), or the list is full. */
static bool session_park(sql_session *s) {
  sql_engine *e = s->e;
  pthread_mutex_lock(&e->idle_mu);
  bool room = e->nidle < SQL_ENGINE_IDLE_SESSIONS; /* rechecked below */
  pthread_mutex_unlock(&e->idle_mu);
  if (!room || s->con == NULL || s->temp_gen != 0 || s->ntemps != 0 || s->refresher)
    return false;
  sql_session_reset(s); /* transaction (and its capture), GUCs */
  s->defer_ends = false;
  /* the client's statements go to the Parse cache, as at a Close */
  while (s->prepared)
    sql_prepared_free(s->prepared);
  s->role_read_only = false;
  s->dealloc = NULL;
  s->dealloc_ctx = NULL;
  s->has_last_commit = false;
  sql_read_set_clear(&s->reads);
  sql_read_set_clear(&s->prev_reads);
  free(s->user);
  free(s->database);
  s->user = s->database = NULL;
  pthread_mutex_lock(&e->idle_mu);
  bool kept = e->nidle < SQL_ENGINE_IDLE_SESSIONS;
  if (kept)
    e->idle[e->nidle++] = s;
  pthread_mutex_unlock(&e->idle_mu);
  return kept;
}

void sql_session_free_idle(sql_engine *e) {
  pthread_mutex_lock(&e->idle_mu);
  while (e->nidle)
    session_destroy(e->idle[--e->nidle]);
  pthread_mutex_unlock(&e->idle_mu);
}

void sql_session_close(sql_session *s) {
  if (s == NULL || session_park(s))
    return;
  session_destroy(s);
}

static void session_destroy(sql_session *s) {
  if (s->con)
    sql_session_settle(s);
  if (s->status != 'I' && s->con)
    rollback_txn(s);
  s->closing = true;
  while (s->prepared)
    sql_prepared_free(s->prepared);
  for (int v = 0; v < SQL_TXN_VERBS; v++)
    if (s->txn_ps[v])
      duckdb_destroy_prepare(&s->txn_ps[v]);
  sql_cache_clear(&s->plans);
  sql_cache_clear(&s->prepared_ps);
  if (s->con)
    duckdb_disconnect(&s->con);
  sql_capture_clear(&s->cap);
  guc_reset_all(s);
  while (s->ntemps)
    temp_forget(s, 0);
  free(s->temps);
  sql_read_set_clear(&s->reads);
  sql_read_set_clear(&s->prev_reads);
  sql_shapes_clear(&s->shapes);
  pthread_mutex_destroy(&s->cancel_mu);
  free(s->user);
  free(s->database);
  free(s);
}

char sql_session_status(const sql_session *s) {
  return s->status;
}

/* ---- transactions ------------------------------------------------------- */

/* Runs BEGIN TRANSACTION, COMMIT or ROLLBACK through a statement the session
 * prepared once: each transaction then skips DuckDB's parser, binder and
 * optimizer (about half of what an autocommit statement's BEGIN and COMMIT
 * cost). */
static mr_status txn_exec(sql_session *s, sql_txn_verb v, sql_error *err) {
  static const char *const text[SQL_TXN_VERBS] = {"BEGIN TRANSACTION", "COMMIT", "ROLLBACK"};
  if (s->txn_ps[v] == NULL) {
    mr_status rc = sql_prepare(s->con, text[v], &s->txn_ps[v], err);
    if (rc)
      return rc;
  }
  duckdb_result r;
  mr_status rc = MR_OK;
  if (duckdb_execute_prepared(s->txn_ps[v], &r) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  duckdb_destroy_result(&r);
  return rc;
}

static mr_status end_txn_exec(sql_session *s, sql_txn_verb v, sql_error *err);

/* DuckDB's BEGIN: the transaction's snapshot, and what it began at.
 * `whole`: no cancel may cut it short (a settle's: its client has been
 * told the BEGIN succeeded). */
static mr_status begin_engine_txn(sql_session *s, bool whole, sql_error *err) {
  /* read before DuckDB's BEGIN: a commit landing in between only makes
   * this transaction's conflict check stricter, never looser */
  s->begin_seq = atomic_load(&s->e->commit_seq);
  s->begin_ddl_gen = atomic_load(&s->e->ddl_gen);
  s->begin_data_ok = sql_data_gen(s->e, &s->begin_data_gen);
  return whole ? end_txn_exec(s, SQL_TXN_BEGIN, err) : txn_exec(s, SQL_TXN_BEGIN, err);
}

/* defer: an explicit BEGIN whose DuckDB BEGIN may wait for the settle. */
static mr_status begin_txn(sql_session *s, bool implicit, bool defer, sql_error *err) {
  s->txn_ddl = false;
  if (defer && s->defer_ends) {
    s->deferred = SQL_DEFER_BEGIN;
  } else {
    mr_status rc = begin_engine_txn(s, false, err);
    if (rc)
      return rc;
  }
  s->status = 'T';
  s->implicit = implicit;
  s->read_only = false;
  sql_capture_clear(&s->cap);
  return MR_OK;
}

/* Drops the ON COMMIT DROP temporary tables at the end of a transaction
 * (all of them: DISCARD ALL). */
static void drop_temps(sql_session *s, bool all) {
  for (size_t i = 0; i < s->ntemps;) {
    if (!all && !s->temps[i].on_commit_drop) {
      i++;
      continue;
    }
    char *q = sql_quote_ident(s->temps[i].name);
    sql_strbuf b = {0};
    sql_strbuf_addf(&b, "DROP TABLE IF EXISTS temp.main.%s", q ? q : "\"\"");
    char *sql = sql_strbuf_take(&b);
    sql_error ignore;
    if (sql && duck_exec(s, sql, &ignore)) {
      /* already gone: dropped by the client */
    }
    free(sql);
    free(q);
    temp_forget(s, i);
  }
}

/* After a transaction that ran DDL ends, every session's cached table shapes
 * are stale (sql_shapes), and its tables become everyone's (committed) or
 * nobody's in the relation directory. */
static void ddl_settled(sql_session *s, bool committed) {
  if (s->txn_ddl) {
    sql_relcache_end(s->e->relcache, s->conn_id, committed);
    atomic_fetch_add(&s->e->ddl_gen, 1);
  }
  s->txn_ddl = false;
}

/* Runs a transaction statement a cancel must not cut short: a COMMIT or
 * ROLLBACK (the store may already hold the commit DuckDB is finishing), or
 * a settle's BEGIN (sql_session_settle). */
static mr_status end_txn_exec(sql_session *s, sql_txn_verb v, sql_error *err) {
  pthread_mutex_lock(&s->cancel_mu);
  s->no_cancel = true;
  pthread_mutex_unlock(&s->cancel_mu);
  mr_status rc = txn_exec(s, v, err);
  pthread_mutex_lock(&s->cancel_mu);
  s->no_cancel = false;
  pthread_mutex_unlock(&s->cancel_mu);
  return rc;
}

void sql_session_defer_ends(sql_session *s, bool on) {
  sql_session_settle(s);
  s->defer_ends = on;
}

const char *sql_session_settle(sql_session *s) {
  sql_deferred d = s->deferred;
  if (d == SQL_DEFER_NONE)
    return NULL;
  s->deferred = SQL_DEFER_NONE;
  sql_error err;
  memset(&err, 0, sizeof err);
  if (d == SQL_DEFER_COMMIT) {
    if (end_txn_exec(s, SQL_TXN_COMMIT, &err) != MR_OK) {
      fprintf(stderr,
              "moraine: warning: a read-only transaction's COMMIT failed, so it was rolled "
              "back: %s\n",
              err.base.msg);
      if (end_txn_exec(s, SQL_TXN_ROLLBACK, &err)) {
        /* DuckDB ended the transaction with the failed COMMIT */
      }
    }
    return "COMMIT";
  }
  if (begin_engine_txn(s, true, &err) != MR_OK) {
    fprintf(stderr,
            "moraine: warning: a transaction's BEGIN failed; it is aborted until ROLLBACK: %s\n",
            err.base.msg);
    s->status = 'E';
  }
  return "BEGIN";
}

/* At a transaction's end: its reads become the previous transaction's,
 * which the next commit's refresh compares with (sql_refresh.h). */
static void end_reads(sql_session *s) {
  if (s->reads.n > 0)
    sql_read_set_rotate(&s->reads, &s->prev_reads);
}

static void rollback_txn(sql_session *s) {
  sql_error ignore;
  if (end_txn_exec(s, SQL_TXN_ROLLBACK, &ignore)) {
    /* no open DuckDB transaction (DuckDB ended it on a failed COMMIT) */
  }
  ddl_settled(s, false);
  sql_capture_clear(&s->cap);
  end_reads(s);
  s->status = 'I';
  s->implicit = false;
  s->read_only = false;
  drop_temps(s, false);
}

/* The read role's refusal of a write (logged once per statement). */
/* The start of text, at most cap - 1 bytes, on one line (a client chose
 * it: no control character reaches the log). */
static void one_line_head(const char *text, char *out, size_t cap) {
  size_t n = 0;
  for (; n < cap - 1 && text[n]; n++)
    out[n] = (unsigned char)text[n] < 0x20 ? ' ' : text[n];
  out[n] = '\0';
}

/* A write by a session that may not write: a read role (42501) or any
 * session of a read replica (25006, as PostgreSQL's hot standby answers). */
static mr_status role_refuses(sql_session *s, const char *sql, sql_error *err) {
  char head[61], user[129];
  one_line_head(sql, head, sizeof head);
  one_line_head(s->user, user, sizeof user);
  if (s->e->replica) {
    fprintf(stderr, "moraine: refused (25006) a write by user \"%s\" on a read replica: %s\n",
            user, head);
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_READ_ONLY_SQL_TRANSACTION,
                    "cannot execute %s on a read replica: this server follows the store's "
                    "writer; send writes to the writer (moraine serve without --replica)",
                    head);
  }
  fprintf(stderr, "moraine: refused (42501) a write by user \"%s\" (role read): %s\n", user,
          head);
  return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INSUFFICIENT_PRIVILEGE,
                  "permission denied: user \"%s\" may read this catalog, not write it", s->user);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The commit protocol of sql.h: hooks.prepare, then DuckDB's COMMIT, under
 * the engine's commit lock when there is anything to hand over. Its phases
 * are timed for sql_session_take_commit_times. */
static mr_status commit_txn(sql_session *s, sql_error *err) {
  sql_engine *e = s->e;
  mr_status rc = MR_OK;
  if (s->cap.n == 0 && s->defer_ends && s->ntemps == 0 && !s->txn_ddl) {
    s->deferred = SQL_DEFER_COMMIT; /* it changed nothing: its COMMIT cannot */
  } else if (s->cap.n == 0) {
    rc = end_txn_exec(s, SQL_TXN_COMMIT, err);
  } else if (s->role_read_only || e->replica) {
    /* unreachable while every write statement is checked: never commit one */
    rc = role_refuses(s, "COMMIT", err);
  } else {
    sql_commit_times tm = {0};
    struct timespec t0, tp;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&e->commit_lock);
    tm.lock_wait = ms_since(&t0);
    sql_changes ch = sql_capture_view(&s->cap);
    ch.begin_seq = s->begin_seq;
    ch.commit_seq = atomic_load(&e->commit_seq);
    ch.times = &tm;
    for (size_t i = 0; i < ch.nbatches; i++)
      tm.rows += ch.batches[i].op == SQL_CHANGE_DDL ? 1 : ch.batches[i].nrows;
    if (e->has_hooks) {
      sql_error herr;
      memset(&herr, 0, sizeof herr);
      clock_gettime(CLOCK_MONOTONIC, &tp);
      rc = e->hooks.prepare(e->hooks.ctx, &ch, &herr);
      tm.map = ms_since(&tp) - tm.store_write;
      if (rc) {
        if (herr.sqlstate[0] == '\0')
          snprintf(herr.sqlstate, sizeof herr.sqlstate, "%s",
                   rc == MR_ERR_CONFLICT ? SQLSTATE_SERIALIZATION_FAILURE
                                         : SQLSTATE_INTERNAL_ERROR);
        if (herr.base.msg[0] == '\0')
          snprintf(herr.base.msg, sizeof herr.base.msg, "commit refused: %s", mr_status_text(rc));
        if (err)
          *err = herr;
        if (err)
          err->base.code = rc;
      }
    }
    if (rc == MR_OK) {
      clock_gettime(CLOCK_MONOTONIC, &tp);
      sql_data_change_begin(e);
      rc = end_txn_exec(s, SQL_TXN_COMMIT, err);
      if (rc == MR_OK) /* its tables are everyone's before the generation moves on */
        ddl_settled(s, true);
      sql_data_change_end(e);
      tm.engine_commit = ms_since(&tp);
      if (rc == MR_OK)
        atomic_fetch_add(&e->commit_seq, 1);
      if (e->has_hooks && e->hooks.finished)
        e->hooks.finished(e->hooks.ctx, &ch, rc == MR_OK);
    }
    pthread_mutex_unlock(&e->commit_lock);
    uint64_t gen;
    if (rc == MR_OK && e->refresh && sql_data_gen(e, &gen))
      sql_refresh_after_commit(e->refresh, &s->reads, &s->prev_reads, gen);
    tm.total = ms_since(&t0);
    if (e->has_hooks) {
      s->last_commit = tm;
      s->has_last_commit = true;
    }
  }
  if (rc) {
    rollback_txn(s);
    return rc;
  }
  ddl_settled(s, true);
  sql_capture_clear(&s->cap);
  end_reads(s);
  s->status = 'I';
  s->implicit = false;
  s->read_only = false;
  drop_temps(s, false);
  return MR_OK;
}

bool sql_session_result_gen(sql_session *s, uint64_t *gen) {
  if (s->e->rcache == NULL || s->ntemps > 0)
    return false;
  if (!sql_data_gen(s->e, gen))
    return false;
  /* pg_class and its kin read the relation directory: only one that is
   * the generation's own may be kept (sql_relcache_current) */
  if (s->status == 'I')
    return sql_relcache_current(s->e->relcache); /* autocommit: its snapshot is now */
  /* in a transaction: its snapshot, taken at BEGIN (the engine's
   * immediate_transaction_mode), is the current rows only if nothing
   * changed them since; and changes of its own are not in the rows the
   * cache describes */
  return s->status == 'T' && s->begin_data_ok && s->begin_data_gen == *gen && s->cap.n == 0 &&
         !s->txn_ddl && sql_relcache_current(s->e->relcache);
}

/* ---- statements --------------------------------------------------------- */

static const char *dml_tag(int op) {
  return op == SQL_CHANGE_INSERT ? "INSERT 0" : op == SQL_CHANGE_UPDATE ? "UPDATE" : "DELETE";
}

static const sql_shape *shape_of(sql_session *s, const sql_dml_target *d, sql_error *err) {
  return sql_shape_get(&s->shapes, s->con, s->e->dbname, d->schema ? d->schema : "public", d->table,
                       s->begin_ddl_gen, atomic_load(&s->e->ddl_gen), err);
}

/* sql + "RETURNING <every column as text>" (the table's shape). */
static char *with_returning(sql_session *s, const char *sql, const sql_dml_target *d,
                            sql_error *err) {
  const sql_shape *sh = shape_of(s, d, err);
  if (sh == NULL)
    return NULL;
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "%s\nRETURNING %s", sql, sh->returning);
  char *full = sql_strbuf_take(&b);
  if (full == NULL)
    sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  return full;
}

mr_status sql_run_dml(sql_session *s, const char *sql, const sql_dml_target *d, uint64_t *count,
                      sql_error *err) {
  *count = 0;
  if (target_is_temp(s, d)) {
    /* temporary tables are session scratch space, not catalog state */
    duckdb_result r;
    mr_status rc = MR_OK;
    if (duckdb_query(s->con, sql, &r) != DuckDBSuccess)
      rc = sql_fail_duckdb(err, duckdb_result_error(&r));
    else
      *count = duckdb_rows_changed(&r);
    duckdb_destroy_result(&r);
    return rc;
  }
  char *full = with_returning(s, sql, d, err);
  if (full == NULL)
    return err ? err->base.code : MR_ERR_INVALID;
  duckdb_result r;
  mr_status rc = MR_OK;
  /* only an INSERT's VALUES keep a plan when lifted (sql_lift.h) */
  duckdb_prepared_statement ps = d->op == SQL_CHANGE_INSERT ? sql_dml_lifted(s, full) : NULL;
  if ((ps ? duckdb_execute_prepared(ps, &r) : duckdb_query(s->con, full, &r)) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  } else {
    const sql_shape *sh = shape_of(s, d, err); /* cached by with_returning */
    rc = sh ? sql_capture_result(&s->cap, sh, d->op, &r, count, err)
            : (err ? err->base.code : MR_ERR_INVALID);
  }
  duckdb_destroy_result(&r);
  free(full);
  return rc;
}

static mr_status read_only_check(sql_session *s, sql_kind kind, const char *sql, sql_error *err) {
  if ((s->role_read_only || s->e->replica) && (kind == SQL_KIND_DML || kind == SQL_KIND_DDL))
    return role_refuses(s, sql, err);
  if (!s->read_only)
    return MR_OK;
  if (kind == SQL_KIND_DML || kind == SQL_KIND_DDL)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_READ_ONLY_SQL_TRANSACTION,
                    "cannot execute %.20s in a read-only transaction", sql);
  return MR_OK;
}

/* CREATE [LOCAL|GLOBAL] TEMP[ORARY] TABLE ...: DuckDB knows neither LOCAL
 * nor ON COMMIT DROP, so both are cut (the planner has read the tree; these
 * are the statement's own tokens); an ON COMMIT DROP table is dropped at the
 * end of the transaction instead. *sql is replaced when cut. */
static void temp_ddl_text(const char *stmt, const sql_toks *t, bool on_commit_drop, char **sql) {
  size_t i = 1;
  if (sql_tok_is(stmt, t, i, "local") || sql_tok_is(stmt, t, i, "global"))
    i++;
  size_t n = t->n;
  if (i >= n || (on_commit_drop && n < i + 3))
    return;
  sql_strbuf b = {0};
  sql_strbuf_addn(&b, stmt, (size_t)t->v[0].end);
  sql_strbuf_add(&b, " ");
  int end = on_commit_drop ? t->v[n - 3].start : t->v[n - 1].end;
  sql_strbuf_addn(&b, stmt + t->v[i].start, (size_t)(end - t->v[i].start));
  char *cut = sql_strbuf_take(&b);
  if (cut) {
    char *re = NULL;
    sql_error ignore;
    if (sql_rewrite(cut, &re, &ignore) == MR_OK) {
      free(*sql);
      *sql = re;
    }
    free(cut);
  }
}

/* Does relation schema.name exist (as the session sees it)? */
static bool relation_exists(sql_session *s, const char *schema, const char *name) {
  char *qs = sql_quote_ident(schema), *qn = sql_quote_ident(name);
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "SELECT 1 FROM %s.%s LIMIT 0", qs ? qs : "\"\"", qn ? qn : "\"\"");
  char *sql = sql_strbuf_take(&b);
  free(qs);
  free(qn);
  duckdb_prepared_statement ps = NULL;
  bool ok = sql && duckdb_prepare(s->con, sql, &ps) == DuckDBSuccess;
  duckdb_destroy_prepare(&ps);
  free(sql);
  return ok;
}

/* The catalog-state checks of admitted DDL that the planner cannot make:
 * a spec table is only ever re-created (IF NOT EXISTS), never invented; an
 * inlined table belongs to a table DuckLake has registered (in this
 * transaction or before). */
static mr_status ddl_check(sql_session *s, const sql_plan *pl, sql_error *err) {
  const sql_ddl *d = &pl->ddl;
  if (d->kind != SQL_DDL_CREATE_TABLE)
    return MR_OK;
  const char *schema = d->schema ? d->schema : "public";
  if (d->table_class == SQL_TABLE_SPEC) {
    sql_engine *e = s->e;
    if (e->has_hooks && e->hooks.known_table && e->hooks.known_table(e->hooks.ctx, d->name))
      return MR_OK;
    if (relation_exists(s, schema, d->name))
      return MR_OK;
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INSUFFICIENT_PRIVILEGE,
                    "moraine does not admit CREATE TABLE %s: not a DuckLake catalog table",
                    d->name);
  }
  char *qs = sql_quote_ident(schema);
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "SELECT count(*) FROM %s.ducklake_table WHERE table_id = %lld",
                  qs ? qs : "\"\"", (long long)d->table_id);
  char *sql = sql_strbuf_take(&b);
  free(qs);
  duckdb_result r;
  int64_t n = 0;
  if (sql && duckdb_query(s->con, sql, &r) == DuckDBSuccess)
    n = duckdb_value_int64(&r, 0, 0);
  duckdb_destroy_result(&r);
  free(sql);
  if (n > 0)
    return MR_OK;
  return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INSUFFICIENT_PRIVILEGE,
                  "moraine does not admit CREATE TABLE %s: DuckLake table %lld does not exist",
                  d->name, (long long)d->table_id);
}

/* Runs admitted DDL; takes ownership of sql (the rewritten statement). */
static mr_status run_ddl(sql_session *s, const sql_plan *pl, char *sql, const sql_sink *sink,
                         sql_error *err) {
  const sql_ddl *d = &pl->ddl;
  bool temp = d->kind == SQL_DDL_CREATE_TEMP ||
              (d->kind == SQL_DDL_DROP_TABLE && d->table_class == SQL_TABLE_OTHER);
  mr_status rc = ddl_check(s, pl, err);
  if (rc) {
    free(sql);
    return rc;
  }
  if (d->kind == SQL_DDL_CREATE_TEMP) {
    sql_toks t;
    rc = sql_lex_scan(pl->text, &t, err);
    if (rc) {
      free(sql);
      return rc;
    }
    temp_ddl_text(pl->text, &t, d->on_commit_drop, &sql);
    sql_toks_free(&t);
  }
  rc = duck_exec(s, sql, err);
  if (rc == MR_OK) {
    s->txn_ddl = true;
    atomic_fetch_add(&s->e->ddl_gen, 1);
  }
  if (rc == MR_OK && !temp && d->kind == SQL_DDL_CREATE_TABLE)
    rc = sql_relcache_note_create(s->e->relcache, s->con, s->conn_id,
                                  d->schema ? d->schema : "public", d->name, err);
  if (rc == MR_OK && !temp && d->kind == SQL_DDL_DROP_TABLE)
    rc = sql_relcache_note_drop(s->e->relcache, s->conn_id, d->schema ? d->schema : "public",
                                d->name, err);
  if (rc == MR_OK && !temp)
    rc = sql_capture_ddl(&s->cap, sql,
                         d->kind == SQL_DDL_CREATE_SCHEMA ? d->name
                         : d->schema                      ? d->schema
                                                          : "public",
                         err);
  if (rc == MR_OK && d->kind == SQL_DDL_CREATE_TEMP)
    rc = temp_add(s, d->name, d->on_commit_drop, err);
  if (rc == MR_OK && d->kind == SQL_DDL_DROP_TABLE && temp)
    temp_remove(s, d->name);
  free(sql);
  return rc ? rc : complete(sink, pl->tag, err);
}

/* A SELECT is prepared to learn its column types; one whose columns
 * DuckDB cannot hand over as PostgreSQL text gets a text-wrapped twin. */
static mr_status make_select(sql_session *s, const char *sql, sql_cached_query *q,
                             sql_error *err) {
  mr_status rc = sql_prepare(s->con, sql, &q->ps, err);
  if (rc)
    return rc;
  char *wrapped = sql_text_wrap(q->ps, sql);
  if (wrapped && duckdb_prepare(s->con, wrapped, &q->wrapped) != DuckDBSuccess) {
    duckdb_destroy_prepare(&q->wrapped);
    q->wrapped = NULL; /* the plain form still answers, in DuckDB's own text */
  }
  free(wrapped);
  return MR_OK;
}

/* A pure SELECT from the result cache: true when it answered (*rc). */
static bool select_from_cache(sql_session *s, const char *key, uint64_t gen, const sql_sink *sink,
                              mr_status *rc, sql_error *err) {
  const sql_rentry *kept = sql_rcache_get(s->e->rcache, SQL_ANSWER_SELECT, key, gen);
  if (kept == NULL)
    return false;
  uint64_t n = 0;
  *rc = sql_kept_select_send(kept, sink, &n, err);
  sql_rcache_release(s->e->rcache, kept);
  char tag[64];
  snprintf(tag, sizeof tag, "SELECT %" PRIu64, n);
  if (*rc == MR_OK)
    *rc = complete(sink, tag, err);
  return true;
}

static mr_status run_select(sql_session *s, const sql_plan *pl, const sql_sink *sink,
                            sql_error *err) {
  sql_cached_query *q;
  /* a statement of the postgres extension's that moraine answers its way */
  bool known = pl->known.kind != SQL_KNOWN_NONE;
  /* a pure one may be answered again from the result cache (sql_rcache.h);
   * a known one too, by its own text: its answer is the text's */
  uint64_t gen = 0;
  const char *key = pl->pure && sql_session_result_gen(s, &gen) ? pl->text : NULL;
  mr_status rc;
  if (key && select_from_cache(s, key, gen, sink, &rc, err))
    return rc;
  char *call = known ? sql_pginfo_call(&pl->known, pl->text) : NULL;
  if (known && call == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  rc = sql_query_cached(s, SQL_CACHE_SELECT, call ? call : pl->text, make_select, &q, err);
  free(call);
  duckdb_result r;
  if (rc == MR_OK)
    rc = sql_execute_streaming(q->wrapped ? q->wrapped : q->ps, &r, err);
  if (rc)
    return rc;
  uint64_t n = 0;
  sql_select_recorder rec;
  sql_select_recorder_init(&rec, sink, sql_rcache_entry_max(s->e->rcache));
  rec.rec.on = key != NULL;
  rc = sql_send_result(s, &r, q->ps, true, 0, NULL, key ? &rec.sink : sink, &n, err);
  duckdb_destroy_result(&r);
  if (rc != MR_OK)
    rec.rec.on = false;
  sql_select_recorder_keep(s, &rec, key, gen, n);
  char tag[64];
  snprintf(tag, sizeof tag, "SELECT %" PRIu64, n);
  return rc ? rc : complete(sink, tag, err);
}

/* A statement DuckDB runs (SELECT, DML, DDL, COPY), inside an open
 * transaction. Sends its results with a RowDescription. */
static mr_status run_in_duckdb(sql_session *s, const sql_plan *pl, const sql_sink *sink,
                               sql_error *err) {
  const char *stmt = pl->text;
  mr_status rc = read_only_check(s, pl->kind, stmt, err);
  if (rc)
    return rc;
  char tag[64];
  if (pl->kind == SQL_KIND_COPY) {
    const sql_copy_stmt *c = &pl->copy;
    uint64_t n = 0;
    if (c->from_stdin && (s->role_read_only || s->e->replica))
      rc = role_refuses(s, stmt, err);
    if (rc == MR_OK && c->from_stdin && s->read_only)
      rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_READ_ONLY_SQL_TRANSACTION,
                    "cannot execute COPY FROM in a read-only transaction");
    if (rc == MR_OK)
      rc = c->from_stdin ? sql_copy_in(s, c, sink, &n, err)
                         : sql_copy_out(s, c, pl->pure, sink, &n, err);
    if (rc)
      return rc;
    /* a read the next commit's refresh may run again (sql_refresh.h) */
    if (pl->pure && !c->from_stdin && c->format == SQL_COPY_BINARY && s->e->refresh &&
        s->status == 'T' && !s->refresher)
      sql_read_set_note(&s->reads, stmt);
    snprintf(tag, sizeof tag, "COPY %" PRIu64, n);
    return complete(sink, tag, err);
  }
  if (pl->kind != SQL_KIND_DDL && pl->kind != SQL_KIND_DML)
    return run_select(s, pl, sink, err);
  char *sql;
  rc = sql_rewrite(stmt, &sql, err);
  if (rc)
    return rc;
  if (pl->kind == SQL_KIND_DDL) {
    rc = run_ddl(s, pl, sql, sink, err);
    return rc;
  }
  const sql_dml_target *d = &pl->dml; /* SQL_KIND_DML from here */
  rc = dml_refused(s, d, err);
  if (rc) {
    free(sql);
    return rc;
  }
  if (!d->has_returning) {
    uint64_t n = 0;
    rc = sql_run_dml(s, sql, d, &n, err);
    snprintf(tag, sizeof tag, "%s %" PRIu64, dml_tag(d->op), n);
    free(sql);
    return rc ? rc : complete(sink, tag, err);
  }
  /* the client's own RETURNING, on a temporary table: its rows go to the
   * client, and there is nothing to capture */
  duckdb_result r;
  if (duckdb_query(s->con, sql, &r) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  } else {
    uint64_t n = 0;
    rc = sql_send_result(s, &r, NULL, true, 0, NULL, sink, &n, err);
    snprintf(tag, sizeof tag, "%s %" PRIu64, dml_tag(d->op), n);
  }
  duckdb_destroy_result(&r);
  free(sql);
  return rc ? rc : complete(sink, tag, err);
}

static mr_status show(sql_session *s, const char *stmt, const sql_toks *t, const sql_sink *sink,
                      sql_error *err) {
  char *name;
  mr_status rc = sql_lex_parse_name_after(stmt, t, 1, &name, err);
  if (rc)
    return rc;
  const char *value = sql_session_guc(s, name);
  if (value == NULL) {
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_UNDEFINED_OBJECT,
                  "unrecognized configuration parameter \"%s\"", name);
    free(name);
    return rc;
  }
  sql_column col = {guc_display_name(name), PG_OID_TEXT, -1, -1, 0};
  size_t len = strlen(value);
  if (SQL_SINK_CALL(sink, row_description, 1, &col) ||
      SQL_SINK_CALL(sink, data_row, 1, &value, &len))
    rc = sql_fail_lost(err);
  free(name);
  return rc ? rc : complete(sink, "SHOW", err);
}

static mr_status set(sql_session *s, const char *stmt, const sql_toks *t, const sql_sink *sink,
                     sql_error *err) {
  char *name, *value;
  mr_status rc = sql_lex_parse_set(stmt, t, &name, &value, err);
  if (rc == MR_OK && name != NULL) {
    if (value == NULL)
      guc_reset(s, name);
    else
      rc = guc_set(s, name, value, err);
    if (rc == MR_OK && guc_reported(name)) {
      const char *v = sql_session_guc(s, name);
      if (SQL_SINK_CALL(sink, parameter_status, guc_display_name(name), v ? v : ""))
        rc = sql_fail_lost(err);
    }
  }
  free(name);
  free(value);
  return rc ? rc : complete(sink, "SET", err);
}

/* SET / SHOW / RESET: the session's own parameters, never the engine's. */
static mr_status run_guc_command(sql_session *s, const sql_plan *pl, const sql_sink *sink,
                                 sql_error *err) {
  sql_toks t;
  mr_status rc = sql_lex_scan(pl->text, &t, err);
  if (rc)
    return rc;
  if (pl->kind == SQL_KIND_SET) {
    rc = set(s, pl->text, &t, sink, err);
  } else if (pl->kind == SQL_KIND_SHOW) {
    rc = show(s, pl->text, &t, sink, err);
  } else {
    char *name;
    rc = sql_lex_parse_name_after(pl->text, &t, 1, &name, err);
    if (rc == MR_OK) {
      if (strcmp(name, "all") == 0)
        guc_reset_all(s);
      else
        guc_reset(s, name);
      free(name);
      rc = complete(sink, "RESET", err);
    }
  }
  sql_toks_free(&t);
  return rc;
}

/*
 * Before a statement that may read catalog history: the history it needs
 * is made resident (sql_history.h). Rows the load appends are invisible to
 * a DuckDB transaction that began before it, so an open transaction that
 * has only read restarts its DuckDB transaction (its conflict anchor,
 * begin_seq, stays: a commit that landed meanwhile still fails its COMMIT).
 * One that has written or run DDL cannot restart without losing that: it
 * fails 40001, and its retry finds the history resident.
 */
static mr_status history_resident(sql_session *s, const sql_hist_needs *h, sql_error *err) {
  if (h->n == 0 || s->e->history_fn == NULL)
    return MR_OK;
  bool loaded = false;
  mr_status rc = s->e->history_fn(s->e->history_ctx, h, &loaded, err);
  if (rc || !loaded || s->status != 'T')
    return rc;
  if (s->cap.n > 0 || s->txn_ddl)
    return sql_fail(err, MR_ERR_CONFLICT, SQLSTATE_SERIALIZATION_FAILURE,
                    "catalog history was loaded while this transaction held changes; retry it");
  sql_error ignore;
  if (txn_exec(s, SQL_TXN_ROLLBACK, &ignore)) {
    /* DuckDB had no transaction open: BEGIN below opens one */
  }
  rc = txn_exec(s, SQL_TXN_BEGIN, err);
  if (rc)
    s->status = 'E';
  return rc;
}

/* Outside a block, a read runs in DuckDB's own autocommit, from a simple
 * query or an extended-protocol Execute alike: no capture to collect,
 * nothing to hand to the store or roll back, and PostgreSQL gives each
 * statement of an implicit block its own snapshot anyway (read committed).
 * This spares a read its BEGIN and COMMIT (a third of a SELECT 1); any
 * other statement opens the implicit block. */
static bool runs_in_autocommit(const sql_session *s, sql_kind kind) {
  return s->status == 'I' && kind == SQL_KIND_OTHER;
}

/* One admitted statement (of a simple query, or a session command of the
 * extended protocol). An autocommit statement gets its own implicit
 * transaction. */
static mr_status run_plan(sql_session *s, const sql_plan *pl, const sql_sink *sink,
                          sql_error *err) {
  mr_status rc = MR_OK;
  sql_session_settle(s); /* a statement of the same string after BEGIN or COMMIT */
  if (s->status == 'E' && pl->kind != SQL_KIND_COMMIT && pl->kind != SQL_KIND_ROLLBACK)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_IN_FAILED_SQL_TRANSACTION,
                    "current transaction is aborted, commands ignored until end of transaction "
                    "block");
  switch (pl->kind) {
  case SQL_KIND_BEGIN:
    if (s->status == 'I')
      rc = begin_txn(s, false, true, err);
    else
      s->implicit = false; /* an implicit block becomes explicit */
    if (rc == MR_OK && pl->begin_read_only)
      s->read_only = true;
    return rc ? rc : complete(sink, "BEGIN", err);
  case SQL_KIND_COMMIT:
    if (s->status == 'E') {
      rollback_txn(s);
      return complete(sink, "ROLLBACK", err);
    }
    if (s->status == 'T')
      rc = commit_txn(s, err);
    return rc ? rc : complete(sink, "COMMIT", err);
  case SQL_KIND_ROLLBACK:
    if (s->status != 'I')
      rollback_txn(s);
    return complete(sink, "ROLLBACK", err);
  case SQL_KIND_SET:
  case SQL_KIND_SHOW:
  case SQL_KIND_RESET:
    return run_guc_command(s, pl, sink, err);
  case SQL_KIND_DISCARD:
    if (s->status != 'I' && !s->implicit)
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_ACTIVE_SQL_TRANSACTION,
                      "DISCARD ALL cannot run inside a transaction block");
    guc_reset_all(s);
    drop_temps(s, true);
    if (s->dealloc)
      s->dealloc(s->dealloc_ctx, NULL, true);
    return complete(sink, "DISCARD ALL", err);
  case SQL_KIND_DEALLOCATE:
    if (s->dealloc && !s->dealloc(s->dealloc_ctx, pl->dealloc_name, false))
      return sql_fail(err, MR_ERR_INVALID, "26000", "prepared statement \"%s\" does not exist",
                      pl->dealloc_name);
    return complete(sink, pl->tag, err);
  case SQL_KIND_NOOP:
    return complete(sink, pl->tag ? pl->tag : "", err);
  default: {
    rc = history_resident(s, &pl->hist, err);
    if (rc)
      return rc;
    if (runs_in_autocommit(s, pl->kind))
      return run_in_duckdb(s, pl, sink, err);
    bool autocommit = s->status == 'I';
    if (autocommit)
      rc = begin_txn(s, true, false, err);
    if (rc == MR_OK)
      rc = run_in_duckdb(s, pl, sink, err);
    if (autocommit && s->status == 'T' && s->implicit) {
      if (rc)
        rollback_txn(s);
      else
        rc = commit_txn(s, err);
    }
    return rc;
  }
  }
}

/* After an error inside a transaction: PostgreSQL's rules. */
static void after_error(sql_session *s) {
  if (s->status == 'I')
    return;
  if (s->implicit)
    rollback_txn(s);
  else
    s->status = 'E';
}

static mr_status plan(sql_session *s, const char *query, sql_plans *out, sql_error *err) {
  sql_plan_env env = {s, session_is_temp};
  mr_status rc = sql_plan_query(query, &env, out, err);
  if (rc && err &&
      (strcmp(err->sqlstate, SQLSTATE_INSUFFICIENT_PRIVILEGE) == 0 ||
       strcmp(err->sqlstate, SQLSTATE_FEATURE_NOT_SUPPORTED) == 0))
    fprintf(stderr, "moraine: refused (%s) from %s: %s\n", err->sqlstate, s->user, err->base.msg);
  return rc;
}

/* The admitted plans of query: from the session's cache, or planned now
 * and cached. *owned: the caller must free *out (the cache was full of
 * memory); otherwise *out is the cache's, valid until the next query. */
static mr_status plans_of(sql_session *s, const char *query, sql_plans **out, bool *owned,
                          sql_error *err) {
  *owned = false;
  *out = sql_cache_get(&s->plans, 0, s->temp_gen, SQL_CACHE_PLANS, query);
  if (*out)
    return MR_OK;
  sql_plans *p = malloc(sizeof *p);
  if (p == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  mr_status rc = plan(s, query, p, err);
  if (rc) {
    free(p);
    return rc;
  }
  *owned = !sql_cache_put(&s->plans, SQL_CACHE_PLANS, query, p);
  *out = p;
  return MR_OK;
}

/* Before a statement runs: the relation directory behind pg_class holds
 * whatever the pre-load API changed (one re-read after such a change). */
static mr_status relations_current(sql_session *s, sql_error *err) {
  return sql_relcache_refresh(s->e->relcache, s->e->relcache_con, err);
}

mr_status sql_session_simple_query(sql_session *s, const char *query, const sql_sink *sink,
                                   sql_error *err) {
  sql_plans *plans;
  bool owned;
  sql_session_settle(s);
  mr_status rc = relations_current(s, err);
  if (rc == MR_OK)
    rc = plans_of(s, query, &plans, &owned, err);
  if (rc) {
    after_error(s);
    return rc;
  }
  /* the history every statement may read, before the first one runs: a
   * commit's batch of writes then never meets a load halfway (40001) */
  for (size_t i = 0; rc == MR_OK && s->status != 'E' && i < plans->n; i++)
    rc = history_resident(s, &plans->v[i].hist, err);
  if (rc == MR_OK && plans->n == 0)
    rc = SQL_SINK_CALL0(sink, empty_query) ? sql_fail_lost(err) : MR_OK;
  else if (rc == MR_OK && plans->n > 1 && s->status == 'I')
    rc = begin_txn(s, true, false, err);
  for (size_t i = 0; rc == MR_OK && i < plans->n; i++)
    rc = run_plan(s, &plans->v[i], sink, err);
  if (rc)
    after_error(s);
  else if (s->status == 'T' && s->implicit)
    rc = commit_txn(s, err);
  if (owned)
    sql_cache_value_free(SQL_CACHE_PLANS, plans);
  return rc;
}

void sql_session_reset(sql_session *s) {
  sql_session_settle(s);
  if (s->status != 'I')
    rollback_txn(s);
  guc_reset_all(s);
  drop_temps(s, true);
}

void sql_session_cancel(sql_session *s) {
  pthread_mutex_lock(&s->cancel_mu);
  if (!s->no_cancel)
    duckdb_interrupt(s->con);
  pthread_mutex_unlock(&s->cancel_mu);
}

uint64_t sql_session_statement_timeout_ms(sql_session *s) {
  const char *v = sql_session_guc(s, "statement_timeout");
  if (v == NULL)
    return 0;
  char *end;
  double n = strtod(v, &end);
  if (end == v || n <= 0)
    return 0;
  while (*end == ' ')
    end++;
  double scale = strcmp(end, "s") == 0     ? 1000.0
                 : strcmp(end, "min") == 0 ? 60000.0
                 : strcmp(end, "h") == 0   ? 3600000.0
                 : strcmp(end, "us") == 0  ? 0.001
                                           : 1.0;
  double ms = n * scale;
  return ms < 1 ? 1 : (uint64_t)ms;
}

/* ---- extended protocol -------------------------------------------------- */

static uint32_t param_oid_of(duckdb_type t) {
  switch (t) {
  case DUCKDB_TYPE_BOOLEAN:
    return 16;
  case DUCKDB_TYPE_TINYINT:
  case DUCKDB_TYPE_SMALLINT:
    return 21;
  case DUCKDB_TYPE_INTEGER:
    return 23;
  case DUCKDB_TYPE_BIGINT:
    return 20;
  case DUCKDB_TYPE_FLOAT:
    return 700;
  case DUCKDB_TYPE_DOUBLE:
    return 701;
  case DUCKDB_TYPE_BLOB:
    return 17;
  case DUCKDB_TYPE_DATE:
    return 1082;
  case DUCKDB_TYPE_TIMESTAMP:
    return 1114;
  case DUCKDB_TYPE_TIMESTAMP_TZ:
    return 1184;
  case DUCKDB_TYPE_UUID:
    return 2950;
  case DUCKDB_TYPE_DECIMAL:
    return 1700;
  default:
    return PG_OID_TEXT;
  }
}

/* The SQL_CACHE_PARSED key of a Parse: the parameter types the client
 * gave (they type the statement) and its text. NULL when out of memory (the
 * statement is then simply not kept). */
static char *parse_key(const char *query, size_t nparam_oids, const uint32_t *param_oids) {
  sql_strbuf b = {0};
  for (size_t i = 0; i < nparam_oids; i++)
    sql_strbuf_addf(&b, "%u,", (unsigned)param_oids[i]);
  sql_strbuf_add(&b, ";");
  sql_strbuf_add(&b, query);
  return sql_strbuf_take(&b);
}

static void link_prepared(sql_session *s, sql_prepared *p) {
  p->next = s->prepared;
  if (s->prepared)
    s->prepared->prevp = &p->next;
  p->prevp = &s->prepared;
  s->prepared = p;
}

mr_status sql_session_prepare(sql_session *s, const char *query, size_t nparam_oids,
                              const uint32_t *param_oids, sql_prepared **out, sql_error *err) {
  *out = NULL;
  sql_session_settle(s);
  uint64_t ddl_gen = atomic_load(&s->e->ddl_gen);
  char *key = parse_key(query, nparam_oids, param_oids);
  sql_prepared *kept =
      key ? sql_cache_take(&s->prepared_ps, ddl_gen, s->temp_gen, SQL_CACHE_PARSED, key) : NULL;
  if (kept) {
    /* the same statement, closed earlier under the same generation: its
     * admission, rewrite and DuckDB prepare all still hold */
    free(key);
    link_prepared(s, kept);
    *out = kept;
    return MR_OK;
  }
  sql_prepared *p = calloc(1, sizeof *p);
  if (p == NULL) {
    free(key);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  p->s = s;
  p->sql = sql_strdup(query);
  p->kind = SQL_KIND_NOOP;
  p->ddl_gen = ddl_gen;
  p->temp_gen = s->temp_gen;
  /* link first so sql_prepared_free can always unlink */
  link_prepared(s, p);
  if (p->sql == NULL) {
    free(key);
    sql_prepared_free(p);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  mr_status rc = plan(s, query, &p->plans, err);
  if (rc) {
    free(key);
    sql_prepared_free(p);
    return rc;
  }
  if (p->plans.n > 1) {
    p->multi = true;
    p->kind = SQL_KIND_OTHER;
  } else if (p->plans.n == 1) {
    /* SELECT and DML are prepared in DuckDB (they take parameters); every
     * other statement runs as a session command at Execute */
    const sql_plan *pl = &p->plans.v[0];
    p->kind = pl->kind;
    if (p->kind == SQL_KIND_OTHER || p->kind == SQL_KIND_DML) {
      char *sql = NULL;
      rc = p->kind == SQL_KIND_DML ? dml_refused(s, &pl->dml, err) : MR_OK;
      if (rc == MR_OK)
        rc = sql_rewrite(pl->text, &sql, err);
      if (rc == MR_OK && p->kind == SQL_KIND_DML && !pl->dml.has_returning &&
          !target_is_temp(s, &pl->dml)) {
        char *full = with_returning(s, sql, &pl->dml, err);
        free(sql);
        sql = full;
        p->capture = true;
        if (sql == NULL)
          rc = err ? err->base.code : MR_ERR_INVALID;
      }
      if (rc == MR_OK && duckdb_prepare(s->con, sql, &p->ps) != DuckDBSuccess) {
        rc = sql_fail_duckdb(err, duckdb_prepare_error(p->ps));
        duckdb_destroy_prepare(&p->ps);
        p->ps = NULL;
      }
      if (rc == MR_OK && p->kind == SQL_KIND_OTHER) {
        char *wrapped = sql_text_wrap(p->ps, sql);
        if (wrapped && duckdb_prepare(s->con, wrapped, &p->ps_text) != DuckDBSuccess) {
          duckdb_destroy_prepare(&p->ps_text);
          p->ps_text = NULL;
        }
        free(wrapped);
      }
      free(sql);
    }
  }
  if (rc == MR_OK && p->ps) {
    p->nparams = duckdb_nparams(p->ps);
    p->param_oids = calloc(p->nparams ? p->nparams : 1, sizeof *p->param_oids);
    if (p->param_oids == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < p->nparams; i++)
      p->param_oids[i] = i < nparam_oids && param_oids[i]
                             ? param_oids[i]
                             : param_oid_of(duckdb_param_type(p->ps, i + 1));
  }
  if (rc) {
    free(key);
    sql_prepared_free(p);
    return rc;
  }
  p->parse_key = key; /* only a statement made whole may be kept */
  *out = p;
  return MR_OK;
}

const char *sql_prepared_text(const sql_prepared *p) { return p->sql; }

void sql_prepared_free(sql_prepared *p) {
  if (p == NULL)
    return;
  if (p->prevp) {
    *p->prevp = p->next;
    if (p->next)
      p->next->prevp = p->prevp;
    p->next = NULL;
    p->prevp = NULL;
  }
  sql_session *s = p->s;
  if (!s->closing && p->parse_key && p->ddl_gen == atomic_load(&s->e->ddl_gen) &&
      p->temp_gen == s->temp_gen) {
    /* kept for the next Parse of the same text (SQL_CACHE_PARSED); a kept
     * twin is the older of the two */
    sql_prepared *twin =
        sql_cache_take(&s->prepared_ps, p->ddl_gen, p->temp_gen, SQL_CACHE_PARSED, p->parse_key);
    sql_prepared_destroy(twin);
    if (sql_cache_put(&s->prepared_ps, SQL_CACHE_PARSED, p->parse_key, p))
      return;
  }
  sql_prepared_destroy(p);
}

void sql_prepared_destroy(sql_prepared *p) {
  if (p == NULL)
    return;
  if (p->ps)
    duckdb_destroy_prepare(&p->ps);
  if (p->ps_text)
    duckdb_destroy_prepare(&p->ps_text);
  sql_plans_free(&p->plans);
  free(p->param_oids);
  free(p->parse_key);
  free(p->sql);
  free(p);
}

size_t sql_prepared_nparams(const sql_prepared *p) {
  return p->nparams;
}

mr_status sql_prepared_describe(sql_session *s, sql_prepared *p, bool with_params, size_t nformats,
                                const int16_t *result_formats, const sql_sink *sink,
                                sql_error *err) {
  sql_session_settle(s);
  if (with_params && SQL_SINK_CALL(sink, parameter_description, p->nparams, p->param_oids))
    return sql_fail_lost(err);
  if (p->kind == SQL_KIND_SHOW) {
    sql_column col = {"setting", PG_OID_TEXT, -1, -1, 0};
    return SQL_SINK_CALL(sink, row_description, 1, &col) ? sql_fail_lost(err) : MR_OK;
  }
  if (p->ps == NULL || p->capture || p->kind == SQL_KIND_DDL || p->multi)
    return SQL_SINK_CALL0(sink, no_data) ? sql_fail_lost(err) : MR_OK;
  return sql_describe_columns(p->ps, nformats, result_formats, sink, err);
}

static int64_t be_int(const char *v, size_t n) {
  int64_t x = 0;
  for (size_t i = 0; i < n; i++)
    x = (int64_t)((uint64_t)x << 8 | (uint8_t)v[i]);
  if (n > 0 && n < 8 && ((uint8_t)v[0] & 0x80))
    x -= (int64_t)1 << (8 * n);
  return x;
}

static mr_status bind_param(sql_prepared *p, duckdb_prepared_statement ps, size_t i, const char *v,
                            size_t n, int16_t fmt, sql_error *err) {
  idx_t idx = i + 1;
  duckdb_state st;
  if (v == NULL) {
    st = duckdb_bind_null(ps, idx);
  } else if (fmt == 0) {
    st = duckdb_bind_varchar_length(ps, idx, v, n);
  } else {
    switch (p->param_oids[i]) {
    case 16:
      st = n == 1 ? duckdb_bind_boolean(ps, idx, v[0] != 0) : DuckDBError;
      break;
    case 21:
    case 23:
    case 20:
      st = (n == 2 || n == 4 || n == 8) ? duckdb_bind_int64(ps, idx, be_int(v, n)) : DuckDBError;
      break;
    case 701: {
      uint64_t bits = (uint64_t)be_int(v, 8);
      double d;
      memcpy(&d, &bits, 8);
      st = n == 8 ? duckdb_bind_double(ps, idx, d) : DuckDBError;
      break;
    }
    case 17:
      st = duckdb_bind_blob(ps, idx, v, n);
      break;
    case 25:
    case 1043:
      st = duckdb_bind_varchar_length(ps, idx, v, n);
      break;
    default:
      return sql_fail(err, MR_ERR_INVALID, SQLSTATE_FEATURE_NOT_SUPPORTED,
                      "binary format for parameter %zu (type %u) is not supported", i + 1,
                      p->param_oids[i]);
    }
  }
  if (st != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_TEXT_REPRESENTATION,
                    "invalid value for parameter %zu", i + 1);
  return MR_OK;
}

/* Runs a multi-statement Parse: every statement, results not sent (the
 * client was told NoData), one CommandComplete for the last. */
typedef struct quiet_sink {
  const sql_sink *outer;
  char tag[64];
} quiet_sink;
static int quiet_rowdesc(void *c, size_t n, const sql_column *cols) {
  return 0;
}
static int quiet_row(void *c, size_t n, const char *const *v, const size_t *l) {
  return 0;
}
static int quiet_complete(void *c, const char *tag) {
  snprintf(((quiet_sink *)c)->tag, sizeof((quiet_sink *)c)->tag, "%s", tag);
  return 0;
}

mr_status sql_prepared_execute(sql_session *s, sql_prepared *p, size_t nparams,
                               const char *const *vals, const size_t *lens, size_t nparam_formats,
                               const int16_t *param_formats, size_t nformats,
                               const int16_t *result_formats, const sql_sink *sink,
                               sql_error *err) {
  sql_session_settle(s);
  mr_status rc0 = relations_current(s, err);
  if (rc0)
    return rc0;
  if (p->multi || p->ps == NULL) {
    if (!p->multi && p->plans.n == 0)
      return SQL_SINK_CALL0(sink, empty_query) ? sql_fail_lost(err) : MR_OK;
    if (!p->multi)
      return run_plan(s, &p->plans.v[0], sink, err); /* a session command */
    quiet_sink q = {sink, "SELECT 0"};
    sql_sink inner = *sink;
    inner.ctx = &q;
    inner.row_description = quiet_rowdesc;
    inner.data_row = quiet_row;
    inner.command_complete = quiet_complete;
    inner.copy_out_begin = NULL;
    inner.copy_data = NULL;
    inner.copy_done = NULL;
    inner.copy_in_begin = NULL;
    inner.copy_in_read = NULL;
    inner.empty_query = NULL;
    inner.parameter_status = NULL;
    inner.no_data = NULL;
    inner.parameter_description = NULL;
    mr_status rc = sql_session_simple_query(s, p->sql, &inner, err);
    return rc ? rc : complete(sink, q.tag, err);
  }
  if (s->status == 'E')
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_IN_FAILED_SQL_TRANSACTION,
                    "current transaction is aborted, commands ignored until end of transaction "
                    "block");
  if (nparams != p->nparams)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_PROTOCOL_VIOLATION,
                    "bind message supplies %zu parameters, but prepared statement requires %zu",
                    nparams, p->nparams);
  if (nparam_formats > 1 && nparam_formats != nparams)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_PROTOCOL_VIOLATION,
                    "bind message has %zu parameter formats but %zu parameters", nparam_formats,
                    nparams);
  mr_status rc = read_only_check(s, p->kind, p->sql, err);
  if (rc == MR_OK)
    rc = p->plans.n ? history_resident(s, &p->plans.v[0].hist, err) : MR_OK;
  if (rc)
    return rc;
  if (s->status == 'I' && !runs_in_autocommit(s, p->kind)) {
    rc = begin_txn(s, true, false, err); /* committed at Sync */
    if (rc)
      return rc;
  }
  bool all_text = true;
  for (size_t i = 0; i < nformats; i++)
    if (result_formats[i] != 0)
      all_text = false;
  duckdb_prepared_statement run = all_text && p->ps_text ? p->ps_text : p->ps;
  duckdb_clear_bindings(run);
  for (size_t i = 0; i < nparams; i++) {
    int16_t fmt = nparam_formats == 0   ? 0
                  : nparam_formats == 1 ? param_formats[0]
                                        : param_formats[i];
    rc = bind_param(p, run, i, vals[i], lens[i], fmt, err);
    if (rc)
      return rc;
  }
  duckdb_result r;
  if (p->kind == SQL_KIND_OTHER) {
    /* a SELECT streams (captured DML needs its whole RETURNING result) */
    rc = sql_execute_streaming(run, &r, err);
    if (rc)
      return rc;
  } else if (duckdb_execute_prepared(run, &r) != DuckDBSuccess) {
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return rc;
  }
  char tag[64];
  const sql_dml_target *dml = &p->plans.v[0].dml;
  if (p->capture) {
    uint64_t n = 0;
    const sql_shape *sh = shape_of(s, dml, err);
    rc = sh ? sql_capture_result(&s->cap, sh, dml->op, &r, &n, err)
            : (err ? err->base.code : MR_ERR_INVALID);
    snprintf(tag, sizeof tag, "%s %" PRIu64, dml_tag(dml->op), n);
  } else {
    uint64_t n = 0;
    rc = sql_send_result(s, &r, NULL, false, nformats, result_formats, sink, &n, err);
    if (p->kind == SQL_KIND_DML)
      snprintf(tag, sizeof tag, "%s %" PRIu64, dml_tag(dml->op), n);
    else
      snprintf(tag, sizeof tag, "SELECT %" PRIu64, n);
  }
  duckdb_destroy_result(&r);
  return rc ? rc : complete(sink, tag, err);
}

void sql_session_error_at_sync(sql_session *s) {
  sql_session_settle(s);
  after_error(s);
}

mr_status sql_session_sync(sql_session *s, sql_error *err) {
  sql_session_settle(s);
  if (s->status == 'T' && s->implicit)
    return commit_txn(s, err);
  return MR_OK;
}
