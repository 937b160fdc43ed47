/*
 * sql_internal.h — the engine, session and change-capture structures shared
 * by the files of src/sql. Not part of the seam: nothing outside src/sql
 * includes this.
 *
 * Invariants:
 *  - engine->commit_lock is held around every hooks.prepare + DuckDB COMMIT
 *    pair, and nowhere else; so commits are totally ordered, and nothing a
 *    reader does (BEGIN, SELECT, ROLLBACK) ever waits for it.
 *  - session->status is 'T' or 'E' exactly when the session's DuckDB
 *    connection has an open transaction that moraine began.
 *  - session->cap holds the changes of the open transaction only; it is
 *    cleared at every commit and rollback.
 *  - a session in engine->idle is as sql_session_open leaves a new one
 *    (no transaction, temporary table, client statement, GUC or role),
 *    but for its statement caches and table shapes, which hold nothing
 *    of a client's but statement texts and are checked against the
 *    engine's DDL generation like any live session's.
 */
#ifndef MR_SQL_INTERNAL_H
#define MR_SQL_INTERNAL_H

#include <duckdb.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sql/sql.h"
#include "sql/sql_cache.h"
#include "sql/sql_lex.h"
#include "sql/sql_plan.h"
#include "sql/sql_rcache.h"
#include "sql/sql_refresh.h"
#include "sql/sql_relcache.h"
#include "sql/sql_types.h"
#include "sql/sql_util.h"

/* How many closed sessions an engine keeps warm for the next client. */
#define SQL_ENGINE_IDLE_SESSIONS 4

struct sql_engine {
  duckdb_database db;
  duckdb_connection admin; /* pre-load calls; serialized by admin_lock */
  pthread_mutex_t admin_lock; /* recursive: held across sql_engine_admin_begin/end */
  bool admin_in_txn;          /* under admin_lock: a pre-load transaction is open */
  bool admin_txn_ddl;         /* under admin_lock: ... and it ran sql_engine_exec */
  bool replica;               /* sql_engine_options.replica */
  pthread_mutex_t commit_lock;
  sql_commit_hooks hooks;
  bool has_hooks;
  /* commits with changes completed: written under commit_lock, read
   * without it, so a transaction's begin never waits on a store write */
  _Atomic uint64_t commit_seq;
  /* bumped by every DDL a session runs and every commit that held DDL:
   * cached table shapes (sql_shapes) are kept only while it stays put */
  _Atomic uint64_t ddl_gen;
  /* The data generation (sql_data_change_begin): moves twice with every
   * change to the engine's rows; data_busy counts changes under way. */
  _Atomic uint64_t data_gen;
  _Atomic unsigned data_busy;
  sql_rcache *rcache; /* catalog-read results; NULL: none */
  sql_refresh *refresh; /* refresh ahead of rcache (sql_refresh.h); NULL: none */
  char *dbname;          /* DuckDB database holding the catalog tables */
  sql_relcache *relcache;         /* its tables, for pg_class / pg_attribute */
  duckdb_connection relcache_con; /* re-reads the relcache; under its refresh lock */
  struct sql_castcheck *castcheck; /* the load-back cast check (sql_castcheck.h) */
  pthread_t warm_thread; /* sql_engine_warm's first read of the relcache */
  bool warm_started;
  char *search_path_sql; /* SET search_path = ... for every connection */
  char *version;         /* "15.0 (moraine x.y.z)" */
  sql_size_fn size_fn;   /* pg_database_size's answer; set before serving */
  void *size_ctx;
  sql_history_fn history_fn; /* history residency (sql_history.h); set before serving */
  void *history_ctx;
  /* Closed sessions kept for the next client (sql_session_close), each
   * with its DuckDB connection and statement caches: every ATTACH is a new
   * connection, and its first statements would otherwise be admitted and
   * prepared again. Under idle_mu; freed by sql_engine_close. */
  pthread_mutex_t idle_mu;
  sql_session *idle[SQL_ENGINE_IDLE_SESSIONS];
  size_t nidle;
};

/*
 * Changes to the engine's rows, for the result cache (sql_rcache.h): begin
 * before any of a change can be visible to a new DuckDB transaction, end
 * once all of it is. Both move data_gen, so a read that overlapped a
 * change in any way sees two different generations around it.
 */
void sql_data_change_begin(sql_engine *e);
void sql_data_change_end(sql_engine *e);
/* The generation a read starting now sees; false while a change is under
 * way (nothing may be kept or served then). */
bool sql_data_gen(sql_engine *e, uint64_t *gen);

/* Frees the sessions e keeps idle (sql_engine_close, before its database). */
void sql_session_free_idle(sql_engine *e);

/* ---- change capture (sql_capture.c) ------------------------------------ */

typedef struct sql_capture {
  sql_change_batch *batches;
  size_t n;
  size_t cap;
} sql_capture;

void sql_capture_clear(sql_capture *c);
/* The RETURNING list moraine appends to a DML statement on schema.table:
 * every column, as VARCHAR (BLOB-backed columns raw); *ncols gets the
 * column count. Caller frees. */
char *sql_capture_returning(duckdb_connection con, const char *schema, const char *table,
                            size_t *ncols, sql_error *err);

/* What capture needs of a table: its RETURNING list and column types. */
typedef struct sql_shape {
  char *schema, *table, *returning;
  size_t ncols;
  char **types; /* DuckDB type names, in column order */
} sql_shape;

/* A session's shapes, kept while the engine's DDL generation is `gen`:
 * tables change only by DDL, so a DML statement needs no catalog lookups. */
typedef struct sql_shapes {
  sql_shape *v;
  size_t n;
  uint64_t gen;
  sql_shape scratch; /* a shape read by a transaction older than the last DDL */
} sql_shapes;

/* The shape of schema.table as con sees it. seen_gen: the engine's DDL
 * generation when the session's transaction began; now_gen: its value now.
 * Valid until the next call on cache; NULL on error. */
const sql_shape *sql_shape_get(sql_shapes *cache, duckdb_connection con, const char *dbname,
                               const char *schema, const char *table, uint64_t seen_gen,
                               uint64_t now_gen, sql_error *err);
void sql_shapes_clear(sql_shapes *cache);

/* Rows of the result of a DML statement on shape's table run with its
 * RETURNING list; *count gets the number of rows changed. */
mr_status sql_capture_result(sql_capture *c, const sql_shape *shape, int op, duckdb_result *r,
                             uint64_t *count, sql_error *err) MR_MUST_CHECK;
mr_status sql_capture_ddl(sql_capture *c, const char *sql, const char *schema,
                          sql_error *err) MR_MUST_CHECK;
sql_changes sql_capture_view(const sql_capture *c);

/* ---- sessions (sql_session.c) ------------------------------------------ */

typedef struct sql_guc {
  char *name;
  char *value;
} sql_guc;

/* A temporary table of a session: scratch space, never captured. */
typedef struct sql_temp {
  char *name;
  bool on_commit_drop; /* dropped at the end of the transaction */
} sql_temp;

/* DuckDB work a transaction statement left for after its answer went out
 * (sql_session_settle): an explicit BEGIN's DuckDB BEGIN, or a read-only
 * transaction's DuckDB COMMIT. */
typedef enum sql_deferred { SQL_DEFER_NONE, SQL_DEFER_BEGIN, SQL_DEFER_COMMIT } sql_deferred;

/* The transaction statements a session keeps prepared (txn_ps). */
typedef enum sql_txn_verb { SQL_TXN_BEGIN, SQL_TXN_COMMIT, SQL_TXN_ROLLBACK, SQL_TXN_VERBS } sql_txn_verb;

struct sql_session {
  sql_engine *e;
  duckdb_connection con;
  char status;   /* 'I', 'T', 'E' */
  bool implicit; /* the open transaction is implicit (commits at end of query / Sync) */
  bool read_only;
  sql_capture cap;
  uint64_t begin_seq; /* engine commit_seq when the open transaction began */
  /* the data generation when it began; begin_data_ok false when a change
   * was under way then (sql_data_gen) */
  uint64_t begin_data_gen;
  bool begin_data_ok;
  duckdb_prepared_statement txn_ps[SQL_TXN_VERBS]; /* prepared on first use */
  sql_commit_times last_commit; /* of the last hooked commit */
  bool role_read_only;          /* the user's role is read: writes fail 42501 */
  sql_dealloc_fn dealloc;       /* DEALLOCATE / DISCARD ALL: the protocol layer's */
  void *dealloc_ctx;
  bool has_last_commit;         /* last_commit not yet taken */
  sql_guc *gucs;
  size_t ngucs;
  char *user;
  char *database;
  char show_buf[256];
  sql_prepared *prepared; /* list, for cleanup at close */
  sql_temp *temps;        /* temporary tables this session created */
  sql_shapes shapes;      /* capture shapes of the tables it wrote */
  sql_cache plans;        /* admitted query strings (SQL_CACHE_PLANS) */
  sql_cache prepared_ps;  /* DuckDB prepared SELECTs and COPY queries, and
                             closed client statements (SQL_CACHE_PARSED) */
  bool closing;           /* sql_session_close: statements are freed, not kept */
  uint64_t temp_gen;      /* bumped when the temp table set changes */
  uint64_t begin_ddl_gen; /* engine ddl_gen when the open transaction began */
  bool txn_ddl;           /* the open transaction ran DDL */
  uint64_t conn_id;       /* DuckDB's id of con (the relcache's pending key) */
  /* sql_session_cancel interrupts only while no_cancel is false: DuckDB's
   * COMMIT and ROLLBACK must never be interrupted (the store may already
   * hold the commit). Both under cancel_mu. */
  pthread_mutex_t cancel_mu;
  bool no_cancel;
  size_t ntemps;
  /* refresh ahead (sql_refresh.h): the refreshable reads of the open
   * transaction and of the one before it */
  sql_read_set reads, prev_reads;
  bool refresher;       /* the engine's refresher runs this session */
  bool defer_ends;      /* sql_session_defer_ends: its caller settles after each answer */
  sql_deferred deferred; /* what is left to settle; only with defer_ends */
  uint64_t rcache_kept; /* answers this session put in the result cache */
};

struct sql_prepared {
  sql_session *s;
  sql_prepared *next;
  sql_prepared **prevp;
  char *sql;       /* as the client sent it */
  sql_plans plans; /* its admitted statements */
  sql_kind kind;
  bool multi;                        /* several statements: NoData, run like a simple query */
  duckdb_prepared_statement ps;      /* DuckDB-run kinds; NULL otherwise */
  duckdb_prepared_statement ps_text; /* text-format variant (sql_text_wrap) or NULL */
  bool capture;                      /* ps has RETURNING * appended by moraine */
  size_t nparams;
  uint32_t *param_oids;
  /* Its SQL_CACHE_PARSED key (the client's parameter types and text; NULL:
   * never kept) and the generation it was made under: a closed statement
   * is kept for the next Parse of the same key while both still hold. */
  char *parse_key;
  uint64_t ddl_gen, temp_gen;
};

/* Frees p outright (sql_prepared_free keeps it when it can); p must be
 * unlinked from its session's list. */
void sql_prepared_destroy(sql_prepared *p);

/* DuckDB optimizers that fold prepare-time table statistics into a plan
 * (see sql_engine_open): off, so a kept prepared statement stays right. */
#define SQL_ENGINE_DISABLED_OPTIMIZERS \
  "statistics_propagation,compressed_materialization,row_group_pruner"

/* DuckDB's checkpoint_threshold for an in-memory engine: never. An
 * in-memory checkpoint only re-packs every table's rows, and DuckDB runs it
 * inside the COMMIT that crosses the threshold (see sql_engine_open). */
#define SQL_ENGINE_MEMORY_CHECKPOINT_THRESHOLD "none"

/* A SELECT or COPY query prepared once and kept in the session's
 * prepared_ps cache: ps gives the column types, run executes (ps itself or
 * its text-wrapped / binary-wrapped twin). */
typedef struct sql_cached_query {
  duckdb_prepared_statement ps;
  duckdb_prepared_statement wrapped; /* NULL: run ps */
} sql_cached_query;

/* The free function of both session caches. */
void sql_cache_value_free(sql_cache_purpose purpose, void *value);

/* duckdb_prepare, its failure as an sql_error (*ps is then NULL). */
mr_status sql_prepare(duckdb_connection con, const char *sql, duckdb_prepared_statement *ps,
                      sql_error *err) MR_MUST_CHECK;

/* Fills q for the (rewritten) query sql; on failure q needs no cleanup. */
typedef mr_status (*sql_query_maker)(sql_session *s, const char *sql, sql_cached_query *q,
                                     sql_error *err);
/* The prepared form of the client query text for purpose (SQL_CACHE_SELECT
 * or SQL_CACHE_COPY_BINARY): from the session's cache, or rewritten,
 * prepared by make and cached. *out is the cache's: valid until the
 * session's next statement (sql_result.c). */
mr_status sql_query_cached(sql_session *s, sql_cache_purpose purpose, const char *text,
                           sql_query_maker make, sql_cached_query **out,
                           sql_error *err) MR_MUST_CHECK;

/* The DML text full (rewritten, RETURNING added) as its shape's prepared
 * statement with full's values bound, from the session's cache; NULL when
 * it does not lift (run full itself). Valid until the session's next
 * statement (sql_result.c). */
duckdb_prepared_statement sql_dml_lifted(sql_session *s, const char *full);

/* Runs sql on con, discarding any result (sql_engine.c). */
mr_status sql_exec(duckdb_connection con, const char *sql, sql_error *err) MR_MUST_CHECK;

/* The error of a sink that stopped (the client's connection is gone). */
mr_status sql_fail_lost(sql_error *err);

/* Maps a DuckDB error message onto SQLSTATE + message. */
mr_status sql_fail_duckdb(sql_error *err, const char *msg);

/* Result streaming (sql_result.c). Text unless any format is binary. */
mr_status sql_send_result(sql_session *s, duckdb_result *r, duckdb_prepared_statement types_from,
                          bool describe, size_t nformats, const int16_t *formats,
                          const sql_sink *sink, uint64_t *nrows, sql_error *err) MR_MUST_CHECK;
/* For a SELECT with columns a chunk cannot be turned into PostgreSQL text
 * directly (everything but booleans, integers, VARCHAR and BLOB): the same
 * query with those columns cast to their text form in SQL (lists as {a,b},
 * NaN / Infinity for floats); NULL when no wrap is needed. Caller frees. */
char *sql_text_wrap(duckdb_prepared_statement ps, const char *sql);
/* Executes ps as a streaming result: rows are computed as they are
 * fetched (duckdb_fetch_chunk only), so a large result never sits whole in
 * memory and one the client abandons stops with it. On failure r needs no
 * destroy. */
mr_status sql_execute_streaming(duckdb_prepared_statement ps, duckdb_result *r,
                                sql_error *err) MR_MUST_CHECK;
/* Columns of a prepared statement as RowDescription would give them. */
mr_status sql_describe_columns(duckdb_prepared_statement ps, size_t nformats,
                               const int16_t *formats, const sql_sink *sink,
                               sql_error *err) MR_MUST_CHECK;

/* The data generation a pure read of s may be answered at from the
 * result cache, or false when s may not use it now: it has temporary
 * tables or changes of its own, or its transaction's snapshot may be
 * older than the engine's rows (sql_session.c). */
bool sql_session_result_gen(sql_session *s, uint64_t *gen);

/* ---- kept answers (sql_keep.c) ----------------------------------------- */

/* An answer's bytes as they are sent, chunk by chunk, for the result
 * cache; it stops (on = false, nothing kept) past max bytes or when memory
 * runs out. */
typedef struct sql_record {
  bool on;
  size_t max;
  sql_strbuf bytes;
  size_t *chunks;
  size_t nchunks, cap; /* cap: bytes allocated for chunks */
} sql_record;

void sql_record_add(sql_record *rec, const void *data, size_t len);
void sql_record_free(sql_record *rec);
/* Puts rec's answer in the result cache, as kind for key at generation
 * gen, if s still reads at gen (no change began or ended while it ran);
 * frees rec. */
void sql_record_keep(sql_session *s, sql_record *rec, sql_answer_kind kind, const char *key,
                     uint64_t gen, size_t ncols, uint64_t nrows);
/* Sends a kept binary COPY again, chunk for chunk. */
mr_status sql_kept_copy_send(const sql_rentry *r, const sql_sink *sink, uint64_t *nrows,
                             sql_error *err) MR_MUST_CHECK;

/* A sink that records a SELECT's RowDescription and DataRows while
 * passing them on to inner. */
typedef struct sql_select_recorder {
  sql_sink sink; /* hand this to the sender */
  const sql_sink *inner;
  sql_record rec;
  size_t ncols;
  sql_strbuf row; /* one row's encoding, reused */
} sql_select_recorder;
void sql_select_recorder_init(sql_select_recorder *r, const sql_sink *inner, size_t max);
/* Keeps what r recorded (sql_record_keep, as a SELECT) and frees r's
 * buffers; key NULL: keeps nothing. */
void sql_select_recorder_keep(sql_session *s, sql_select_recorder *r, const char *key,
                              uint64_t gen, uint64_t nrows);
/* Sends a kept SELECT again: its RowDescription and DataRows. */
mr_status sql_kept_select_send(const sql_rentry *r, const sql_sink *sink, uint64_t *nrows,
                               sql_error *err) MR_MUST_CHECK;

/* COPY (sql_copy.c). */
/* pure: the planner found the COPY's query pure (sql_plan.h). */
mr_status sql_copy_out(sql_session *s, const sql_copy_stmt *c, bool pure, const sql_sink *sink,
                       uint64_t *nrows, sql_error *err) MR_MUST_CHECK;
mr_status sql_copy_in(sql_session *s, const sql_copy_stmt *c, const sql_sink *sink, uint64_t *nrows,
                      sql_error *err) MR_MUST_CHECK;

/* Staging-table select list for select_sql's columns (pg_bytea -> BLOB). */
char *sql_stage_select(duckdb_connection con, const char *select_sql, sql_error *err);

/* Runs a DML statement (already rewritten) capturing its rows. */
mr_status sql_run_dml(sql_session *s, const char *sql, const sql_dml_target *d, uint64_t *count,
                      sql_error *err) MR_MUST_CHECK;

#define SQL_SINK_CALL(sink, fn, ...) ((sink)->fn ? (sink)->fn((sink)->ctx, __VA_ARGS__) : 0)
#define SQL_SINK_CALL0(sink, fn) ((sink)->fn ? (sink)->fn((sink)->ctx) : 0)

#endif /* MR_SQL_INTERNAL_H */
