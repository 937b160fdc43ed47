/*
 * sql_engine.c — the embedded DuckDB: opening it, moraine's pg_catalog,
 * the commit hooks and the pre-load API of sql.h. Sessions live in
 * sql_session.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sql/sql_castcheck.h"
#include "sql/sql_internal.h"
#include "sql/sql_pgcatalog.h"
#include "sql/sql_state.h"

mr_status sql_fail(sql_error *err, mr_status code, const char *sqlstate, const char *fmt, ...) {
  if (err == NULL)
    return code;
  err->base.code = code;
  snprintf(err->sqlstate, sizeof err->sqlstate, "%s",
           sqlstate ? sqlstate : SQLSTATE_INTERNAL_ERROR);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(err->base.msg, sizeof err->base.msg, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof err->base.msg)
    memcpy(err->base.msg + sizeof err->base.msg - 4, "...", 4);
  return code;
}

/* X(DuckDB message prefix, SQLSTATE): DuckDB error classes -> SQLSTATE. */
#define DUCK_ERROR_TABLE(X)                                                                        \
  X("Parser Error", SQLSTATE_SYNTAX_ERROR)                                                         \
  X("Syntax Error", SQLSTATE_SYNTAX_ERROR)                                                         \
  X("Catalog Error", "42P01")                                                                      \
  X("Binder Error", "42703")                                                                       \
  X("Constraint Error", "23000")                                                                   \
  X("Conversion Error", SQLSTATE_INVALID_TEXT_REPRESENTATION)                                      \
  X("Out of Range Error", SQLSTATE_NUMERIC_OUT_OF_RANGE)                                           \
  X("Invalid Input Error", SQLSTATE_INVALID_PARAMETER_VALUE)                                       \
  X("Not implemented Error", SQLSTATE_FEATURE_NOT_SUPPORTED)                                       \
  X("TransactionContext Error", "25000")                                                           \
  X("Dependency Error", "2BP01")                                                                   \
  X("Permission Error", SQLSTATE_INSUFFICIENT_PRIVILEGE)                                           \
  X("IO Error", SQLSTATE_IO_ERROR)                                                                 \
  X("Out of Memory Error", SQLSTATE_OUT_OF_MEMORY)                                                 \
  X("INTERRUPT Error", SQLSTATE_QUERY_CANCELED)                                                    \
  X("Interrupt Error", SQLSTATE_QUERY_CANCELED)                                                    \
  X("Sequence Error", "2200H")                                                                     \
  X("Invalid Error", SQLSTATE_INTERNAL_ERROR)                                                      \
  X("Internal Error", SQLSTATE_INTERNAL_ERROR)                                                     \
  X("FATAL Error", SQLSTATE_INTERNAL_ERROR)

static bool contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = hay; *p; p++)
    if (strncasecmp(p, needle, n) == 0)
      return true;
  return false;
}

mr_status sql_fail_lost(sql_error *err) {
  return sql_fail(err, MR_ERR_CLOSED, SQLSTATE_CONNECTION_FAILURE, "client connection lost");
}

mr_status sql_fail_duckdb(sql_error *err, const char *msg) {
  if (msg == NULL)
    msg = "unknown DuckDB error";
  const char *state = "XX000";
#define DUCK_ERROR_MATCH(prefix, code)                                                             \
  if (strncmp(msg, prefix, strlen(prefix)) == 0)                                                   \
    state = code;
  DUCK_ERROR_TABLE(DUCK_ERROR_MATCH)
#undef DUCK_ERROR_MATCH
  /* finer classes within a DuckDB error class */
  if (strcmp(state, "23000") == 0) {
    if (contains_ci(msg, "NOT NULL"))
      state = "23502";
    else if (contains_ci(msg, "primary key") || contains_ci(msg, "unique") ||
             contains_ci(msg, "duplicate key"))
      state = "23505";
    else if (contains_ci(msg, "foreign key"))
      state = "23503";
  } else if (strcmp(state, "42P01") == 0) {
    if (contains_ci(msg, "already exists"))
      state = "42P07";
    else if (contains_ci(msg, "Schema with name") && contains_ci(msg, "does not exist"))
      state = "3F000";
    else if (contains_ci(msg, "Function") || contains_ci(msg, "Macro"))
      state = "42883";
    else if (!contains_ci(msg, "Table") && !contains_ci(msg, "View"))
      state = "42704";
  } else if (strcmp(state, "42703") == 0) {
    if (contains_ci(msg, "No function matches"))
      state = "42883";
    else if (!contains_ci(msg, "column"))
      state = "42000";
  } else if (strcmp(state, "25000") == 0 && contains_ci(msg, "conflict")) {
    state = "40001";
  }
  return sql_fail(err, MR_ERR_INVALID, state, "%s", msg);
}

mr_status sql_exec(duckdb_connection con, const char *sql, sql_error *err) {
  duckdb_result r;
  mr_status rc = MR_OK;
  if (duckdb_query(con, sql, &r) != DuckDBSuccess)
    rc = sql_fail_duckdb(err, duckdb_result_error(&r));
  duckdb_destroy_result(&r);
  return rc;
}

static char *query_string(duckdb_connection con, const char *sql) {
  duckdb_result r;
  char *out = NULL;
  if (duckdb_query(con, sql, &r) == DuckDBSuccess && duckdb_row_count(&r) > 0) {
    char *v = duckdb_value_varchar(&r, 0, 0);
    out = sql_strdup(v);
    duckdb_free(v);
  }
  duckdb_destroy_result(&r);
  return out;
}

/* Defence in depth behind the planner (sql_plan.h): once set up, the engine
 * can reach no file, load no extension and change no global setting, so a
 * statement the planner wrongly admitted still cannot touch the server.
 * Session-local settings (the search path) stay settable. */
static mr_status engine_lock_down(duckdb_connection con, sql_error *err) {
  static const char *const steps[] = {
      "SET enable_external_access = false",
      "SET allow_community_extensions = false",
      "SET allow_unsigned_extensions = false",
      "SET lock_configuration = true",
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    mr_status rc = sql_exec(con, steps[i], err);
    if (rc)
      return rc;
  }
  return MR_OK;
}

/* mr_catalog_bytes(): the catalog's size from the registered size function
 * (behind pg_database_size); volatile, the store grows as commits land. */
static void catalog_bytes(duckdb_function_info info, duckdb_data_chunk input,
                          duckdb_vector output) {
  sql_engine *e = duckdb_scalar_function_get_extra_info(info);
  if (e->size_fn == NULL) {
    duckdb_scalar_function_set_error(info, "moraine: this server does not know its catalog size");
    return;
  }
  uint64_t bytes = 0;
  mr_error err;
  mr_error_clear(&err);
  if (e->size_fn(e->size_ctx, &bytes, &err) != MR_OK) {
    duckdb_scalar_function_set_error(info, err.msg);
    return;
  }
  int64_t *out = duckdb_vector_get_data(output);
  idx_t n = duckdb_data_chunk_get_size(input);
  for (idx_t i = 0; i < (n ? n : 1); i++)
    out[i] = (int64_t)bytes;
}

static mr_status register_catalog_bytes(sql_engine *e, sql_error *err) {
  duckdb_scalar_function f = duckdb_create_scalar_function();
  duckdb_scalar_function_set_name(f, "mr_catalog_bytes");
  duckdb_logical_type t = duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
  duckdb_scalar_function_set_return_type(f, t);
  duckdb_destroy_logical_type(&t);
  duckdb_scalar_function_set_volatile(f);
  duckdb_scalar_function_set_extra_info(f, e, NULL);
  duckdb_scalar_function_set_function(f, catalog_bytes);
  duckdb_state st = duckdb_register_scalar_function(e->admin, f);
  duckdb_destroy_scalar_function(&f);
  if (st != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot register mr_catalog_bytes");
  return MR_OK;
}

void sql_data_change_begin(sql_engine *e) {
  atomic_fetch_add(&e->data_busy, 1);
  atomic_fetch_add(&e->data_gen, 1);
}

void sql_data_change_end(sql_engine *e) {
  atomic_fetch_add(&e->data_gen, 1);
  atomic_fetch_sub(&e->data_busy, 1);
}

void sql_engine_result_cache_counts(sql_engine *e, sql_result_cache_counts *out) {
  sql_rcache_stats st;
  sql_rcache_stats_get(e->rcache, &st);
  sql_refresh_counts rf;
  sql_refresh_counts_get(e->refresh, &rf);
  *out = (sql_result_cache_counts){.hits = st.hits, .misses = st.misses,
                                   .refreshed = rf.refreshed};
}

void sql_engine_refresh_wait(sql_engine *e) {
  sql_refresh_wait_idle(e->refresh);
}

void sql_engine_stop_background(sql_engine *e) {
  sql_refresh_stop(e->refresh);
}

bool sql_data_gen(sql_engine *e, uint64_t *gen) {
  *gen = atomic_load(&e->data_gen);
  return atomic_load(&e->data_busy) == 0;
}

void sql_engine_set_history_fn(sql_engine *e, sql_history_fn fn, void *ctx) {
  e->history_fn = fn;
  e->history_ctx = ctx;
}

void sql_engine_set_size_fn(sql_engine *e, sql_size_fn fn, void *ctx) {
  e->size_fn = fn;
  e->size_ctx = ctx;
}

/* The engine's DuckDB settings, in cfg; path NULL: in memory. */
static mr_status engine_config(const sql_engine_options *opts, const char *path, duckdb_config cfg,
                               sql_error *err) {
  /* no downloads, no extension autoloading: the engine is self-contained */
  duckdb_set_config(cfg, "autoinstall_known_extensions", "false");
  duckdb_set_config(cfg, "autoload_known_extensions", "false");
  if (opts && opts->threads > 0) {
    char n[16];
    snprintf(n, sizeof n, "%d", opts->threads);
    duckdb_set_config(cfg, "threads", n);
  }
  /* Prepared statements are kept and re-executed (sql_cache.h, Parse once
   * / Execute many), but DuckDB bakes the table statistics of prepare time
   * into the plan through these three: a statement prepared over an empty
   * table would then answer "no rows" after rows arrive. Without them a
   * plan depends on no data, only on the catalog (which DuckDB rebinds). */
  if (duckdb_set_config(cfg, "disabled_optimizers", SQL_ENGINE_DISABLED_OPTIMIZERS) !=
      DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot disable DuckDB's statistics optimizers");
  /* A transaction's snapshot is taken at its BEGIN, not at its first read
   * of the catalog: the result cache (sql_rcache.h) may answer that read,
   * and the snapshot must then still be the rows it answered from. */
  if (duckdb_set_config(cfg, "immediate_transaction_mode", "true") != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot set DuckDB's immediate transaction mode");
  if (opts && opts->memory_limit &&
      duckdb_set_config(cfg, "memory_limit", opts->memory_limit) != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INVALID_PARAMETER_VALUE,
                    "invalid memory limit '%s' (use e.g. 512MB or 4GB)", opts->memory_limit);
  /* In memory there is nothing to make durable: a checkpoint only re-packs
   * each table's rows. DuckDB runs one inside the COMMIT whose estimated
   * WAL crosses checkpoint_threshold (16 MB), so every few dozen commits one
   * client's commit paid for a pass over every table of the engine, under
   * moraine's commit lock: 54-114 ms at 1,000 DuckLake tables, 3.3 ms a
   * commit on average. Without them the server's RSS was lower, not higher
   * (BENCHMARK.md, 2026-12-07 night, last). A file-backed engine (export)
   * keeps DuckDB's default. */
  if (path == NULL && duckdb_set_config(cfg, "checkpoint_threshold",
                                        SQL_ENGINE_MEMORY_CHECKPOINT_THRESHOLD) != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot set DuckDB's checkpoint threshold");
  return MR_OK;
}

mr_status sql_engine_open(const sql_engine_options *opts, sql_engine **out, sql_error *err) {
  *out = NULL;
  sql_engine *e = calloc(1, sizeof *e);
  if (e == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  pthread_mutexattr_t recursive;
  pthread_mutexattr_init(&recursive);
  pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&e->admin_lock, &recursive);
  pthread_mutexattr_destroy(&recursive);
  pthread_mutex_init(&e->commit_lock, NULL);
  pthread_mutex_init(&e->idle_mu, NULL);
  e->replica = opts && opts->replica;
  e->version = sql_strdup(opts && opts->server_version ? opts->server_version : "15.0 (moraine)");
  duckdb_config cfg;
  mr_status rc = MR_OK;
  if (duckdb_create_config(&cfg) != DuckDBSuccess) {
    free(e->version);
    free(e);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "cannot create DuckDB config");
  }
  const char *path = opts && opts->database_path ? opts->database_path : NULL;
  rc = engine_config(opts, path, cfg, err);
  if (rc) {
    duckdb_destroy_config(&cfg);
    free(e->version);
    free(e);
    return rc;
  }
  char *open_err = NULL;
  if (duckdb_open_ext(path, &e->db, cfg, &open_err) != DuckDBSuccess) {
    rc = sql_fail(err, MR_ERR_IO, SQLSTATE_IO_ERROR, "cannot open DuckDB: %s",
                  open_err ? open_err : "?");
    duckdb_free(open_err);
    duckdb_destroy_config(&cfg);
    free(e->version);
    free(e);
    return rc;
  }
  duckdb_destroy_config(&cfg);
  if (opts && opts->result_cache_bytes &&
      (e->rcache = sql_rcache_new(opts->result_cache_bytes)) == NULL) {
    sql_engine_close(e);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  if (e->rcache && opts->refresh_ahead && (e->refresh = sql_refresh_new(e)) == NULL) {
    sql_engine_close(e);
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  if (duckdb_connect(e->db, &e->admin) != DuckDBSuccess) {
    sql_engine_close(e);
    return sql_fail(err, MR_ERR_IO, SQLSTATE_IO_ERROR, "cannot connect to DuckDB");
  }
  e->dbname = query_string(e->admin, "SELECT current_database()");
  if (e->dbname == NULL) {
    sql_engine_close(e);
    return sql_fail(err, MR_ERR_IO, SQLSTATE_INTERNAL_ERROR, "cannot read DuckDB's database name");
  }
  rc = sql_exec(e->admin, "CREATE SCHEMA IF NOT EXISTS public", err);
  if (rc == MR_OK)
    rc = register_catalog_bytes(e, err);
  if (rc == MR_OK && ((e->relcache = sql_relcache_create(e->dbname)) == NULL ||
                      duckdb_connect(e->db, &e->relcache_con) != DuckDBSuccess))
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "cannot set up the relation cache");
  if (rc == MR_OK) /* before the pg_catalog views that read them */
    rc = sql_relcache_register(e->relcache, e->admin, err);
  if (rc == MR_OK)
    rc = sql_pgcatalog_install(e->admin, e->dbname,
                               opts->database_name ? opts->database_name : e->dbname, e->version,
                               err);
  if (rc == MR_OK) {
    e->search_path_sql = sql_pgcatalog_search_path(e->dbname);
    if (e->search_path_sql == NULL)
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  }
  if (rc == MR_OK)
    rc = sql_exec(e->admin, e->search_path_sql, err);
  if (rc == MR_OK)
    rc = engine_lock_down(e->admin, err);
  if (rc == MR_OK && (e->castcheck = sql_castcheck_new(e->db)) == NULL)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "cannot set up the cast check");
  if (rc) {
    sql_engine_close(e);
    return rc;
  }
  *out = e;
  return MR_OK;
}

/* The relation directory's first read, off the start-up path: the server
 * is ready without it, and a client statement waits for it only while it
 * is still running (a failure leaves it stale: the statement re-reads and
 * reports). */
static void *warm_relations(void *arg) {
  sql_engine *e = arg;
  sql_error err;
  if (sql_relcache_refresh(e->relcache, e->relcache_con, &err) != MR_OK) {
    /* still stale: the next statement's re-read reports the error */
  }
  return NULL;
}

void sql_engine_warm(sql_engine *e) {
  if (!e->warm_started)
    e->warm_started = pthread_create(&e->warm_thread, NULL, warm_relations, e) == 0;
}

void sql_engine_close(sql_engine *e) {
  if (e == NULL)
    return;
  sql_refresh_free(e->refresh); /* its session goes before the others */
  if (e->warm_started)
    pthread_join(e->warm_thread, NULL);
  sql_session_free_idle(e);
  pthread_mutex_destroy(&e->idle_mu);
  if (e->admin)
    duckdb_disconnect(&e->admin);
  if (e->relcache_con)
    duckdb_disconnect(&e->relcache_con);
  sql_castcheck_free(e->castcheck);
  if (e->db)
    duckdb_close(&e->db);
  sql_relcache_free(e->relcache); /* after the database: its functions point here */
  sql_rcache_free(e->rcache);
  pthread_mutex_destroy(&e->admin_lock);
  pthread_mutex_destroy(&e->commit_lock);
  free(e->dbname);
  free(e->search_path_sql);
  free(e->version);
  free(e);
}

void sql_engine_set_commit_hooks(sql_engine *e, const sql_commit_hooks *hooks) {
  pthread_mutex_lock(&e->commit_lock);
  if (hooks && hooks->prepare) {
    e->hooks = *hooks;
    e->has_hooks = true;
  } else {
    memset(&e->hooks, 0, sizeof e->hooks);
    e->has_hooks = false;
  }
  pthread_mutex_unlock(&e->commit_lock);
}

mr_status sql_engine_admin_begin(sql_engine *e, sql_error *err) {
  pthread_mutex_lock(&e->admin_lock);
  mr_status rc = e->admin_in_txn ? sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                                            "a pre-load transaction is already open")
                                 : sql_exec(e->admin, "BEGIN", err);
  if (rc != MR_OK) {
    pthread_mutex_unlock(&e->admin_lock);
    return rc;
  }
  e->admin_in_txn = true;
  sql_data_change_begin(e); /* until admin_end: its rows show at once */
  return MR_OK;
}

mr_status sql_engine_admin_end(sql_engine *e, bool commit, sql_error *err) {
  mr_status rc = sql_exec(e->admin, commit ? "COMMIT" : "ROLLBACK", err);
  if (rc != MR_OK && commit) { /* a failed COMMIT leaves DuckDB's transaction to roll back */
    sql_error ignore;
    if (sql_exec(e->admin, "ROLLBACK", &ignore) != MR_OK) {
      /* none was left open */
    }
  }
  e->admin_in_txn = false;
  /* its DDL shows only now: a re-read before saw none; marked before the
   * generation moves on, so no read is kept with the old directory */
  if (e->admin_txn_ddl)
    sql_relcache_invalidate(e->relcache);
  e->admin_txn_ddl = false;
  sql_data_change_end(e);
  pthread_mutex_unlock(&e->admin_lock);
  return rc;
}

/* Runs sql (after the engine's statement rewrite) on the pre-load
 * connection; `ddl`: it may have created or dropped tables. */
static mr_status admin_run(sql_engine *e, const char *sql, bool ddl, sql_error *err) {
  char *rewritten;
  mr_status rc = sql_rewrite(sql, &rewritten, err);
  if (rc)
    return rc;
  pthread_mutex_lock(&e->admin_lock);
  if (!e->admin_in_txn)
    sql_data_change_begin(e);
  rc = sql_exec(e->admin, rewritten, err);
  /* marked after it ran (a re-read racing with it is marked stale again)
   * and before the generation moves on, and again when a pre-load
   * transaction holding it commits */
  if (ddl)
    sql_relcache_invalidate(e->relcache);
  if (ddl && e->admin_in_txn)
    e->admin_txn_ddl = true;
  if (!e->admin_in_txn)
    sql_data_change_end(e);
  pthread_mutex_unlock(&e->admin_lock);
  if (ddl)
    atomic_fetch_add(&e->ddl_gen, 1);
  free(rewritten);
  return rc;
}

mr_status sql_engine_exec_data(sql_engine *e, const char *sql, sql_error *err) {
  return admin_run(e, sql, false, err);
}

mr_status sql_engine_check_casts(sql_engine *e, size_t ncols, const sql_cast_column *cols,
                                 size_t *bad, sql_error *err) {
  return sql_castcheck_run(e->castcheck, ncols, cols, bad, err);
}

mr_status sql_engine_exec(sql_engine *e, const char *sql, sql_error *err) {
  return admin_run(e, sql, true, err);
}
