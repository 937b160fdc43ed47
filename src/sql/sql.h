/*
 * sql.h — the SQL engine behind the compatibility front: an embedded DuckDB
 * 1.5.5 holding the materialized catalog, answering what PostgreSQL clients
 * (DuckDB's postgres extension, psql, psycopg) send, in PostgreSQL's terms.
 *
 * pgwire/ owns bytes on sockets and knows nothing of DuckDB; this layer owns
 * statement handling and knows nothing of sockets. The seam is this header:
 * pgwire hands query strings (simple protocol) or one prepared statement
 * (extended protocol) to a session and receives results through a sink.
 *
 * ---------------------------------------------------------------------------
 * The catalog-store seam (for the layer that persists the catalog)
 * ---------------------------------------------------------------------------
 * 1. Pre-load. Before serving, open the engine and materialize the catalog:
 *      sql_engine_exec(e, "CREATE TABLE public.ducklake_snapshot (...)", &err);
 *      sql_engine_load_rows(e, "public", "ducklake_snapshot", ncols, nrows,
 *                           values, &err);          (DuckDB appender, bulk)
 *    Neither call captures changes nor calls the commit hook.
 *
 * 2. Capture. Every session transaction records its row changes as it runs:
 *    INSERT / UPDATE / DELETE (also under WITH, also UPDATE ... FROM) are run
 *    with a RETURNING list of every column appended (cast to text, except
 *    integer, boolean, text and BLOB columns, which capture spells itself
 *    as that same text) and the
 *    returned rows are kept, so the cost is proportional to the rows changed —
 *    tables are never diffed. COPY ... FROM STDIN goes through a staging table
 *    and the same INSERT ... RETURNING. Temporary tables are not captured.
 *    DDL (CREATE / DROP / ALTER ...) is kept as its executed DuckDB SQL text.
 *    The change set is an ordered list of batches (sql_change_batch): a DDL
 *    statement, or the rows one statement (or consecutive statements with the
 *    same table and op) changed in one table.
 *      INSERT: the full new row.  DELETE: the full old row.
 *      UPDATE: the full new row (DuckDB has no RETURNING OLD); DuckLake never
 *              updates an identifying column, so the new row names its record.
 *
 * 3. Commit. On COMMIT (explicit, or the implicit commit of an autocommit
 *    statement or of a multi-statement simple query) with a non-empty change
 *    set, the engine takes ONE engine-wide commit lock, calls hooks.prepare()
 *    with the changes BEFORE DuckDB commits, and then:
 *      prepare() == MR_OK  -> DuckDB COMMIT; then hooks.finished(committed).
 *      prepare() != MR_OK  -> DuckDB ROLLBACK; the client gets prepare()'s
 *                             sql_error (use SQLSTATE 40001 and a message
 *                             containing "conflict" for a write conflict:
 *                             DuckLake then retries the transaction).
 *    If DuckDB's own COMMIT fails after prepare() accepted (rare: a unique
 *    violation DuckDB only detects at commit), finished(committed=false) is
 *    called under the same lock so the store can undo or stop serving.
 *    With no hooks registered, commit just commits. Transactions with no
 *    changes (reads) never call the hooks.
 *
 * Ownership: an sql_engine outlives every session opened on it. A session is
 * used by one thread at a time. Every pointer passed to a sink or hook
 * callback is valid only during that call.
 */
#ifndef MR_SQL_H
#define MR_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

typedef struct sql_engine sql_engine;
typedef struct sql_session sql_session;
typedef struct sql_prepared sql_prepared;

/* A PostgreSQL-visible error: SQLSTATE (5 chars) + message. */
typedef struct sql_error {
  mr_error base;    /* code + message */
  char sqlstate[6]; /* e.g. "42601" syntax, "40001" conflict, "XX000" */
} sql_error;

/* Sets code, SQLSTATE and message; returns code. */
mr_status sql_fail(sql_error *err, mr_status code, const char *sqlstate, const char *fmt, ...)
    MR_PRINTF(4, 5);

/* ---- values exchanged with the catalog store -------------------------- */

/*
 * One cell. For BLOB-backed columns (DuckDB types BLOB and pg_bytea, the
 * latter being what a PostgreSQL BYTEA column becomes) data holds the raw
 * bytes; for every other type it holds DuckDB's text form of the value (what
 * CAST(v AS VARCHAR) gives), which casts back losslessly. data is
 * NUL-terminated one past len.
 */
typedef struct sql_value {
  const char *data;
  size_t len;
  bool is_null;
  /* A pre-load cell may also carry the integer its text spells (the store
   * kept it as one): the load appends it to an integer column without
   * parsing the text. Elsewhere false. */
  bool has_int;
  int64_t int_value;
} sql_value;

/* A text cell (data[0..len), NUL-terminated one past len) and SQL NULL. */
#define SQL_VALUE_TEXT(data_, len_) ((sql_value){.data = (data_), .len = (len_)})
#define SQL_VALUE_NULL ((sql_value){.is_null = true})

typedef enum sql_change_op {
  SQL_CHANGE_DDL = 0, /* batch holds `sql`, no rows */
  SQL_CHANGE_INSERT,  /* rows are new rows */
  SQL_CHANGE_UPDATE,  /* rows are the rows after the update */
  SQL_CHANGE_DELETE,  /* rows are the rows before the delete */
} sql_change_op;

typedef struct sql_change_batch {
  sql_change_op op;
  const char *sql;    /* DDL only: the statement as DuckDB ran it */
  const char *schema; /* row batches: target table's schema; DDL: the schema it
                       * creates or changes in ("public" when unqualified) */
  const char *table;
  size_t ncols; /* columns of the table, in table order */
  const char *const *col_names;
  const char *const *col_types; /* DuckDB type names ("BIGINT", "VARCHAR", "pg_bytea", ...) */
  size_t nrows;
  const sql_value *values; /* nrows * ncols, row-major */
} sql_change_batch;

/* Where one hooked commit's time went, in milliseconds (see
 * sql_session_take_commit_times). */
typedef struct sql_commit_times {
  double lock_wait;     /* waiting for the engine's commit lock */
  double map;           /* prepare(): changes -> store records, minus store_write */
  double store_write;   /* prepare(): the durable store write (set by the hook) */
  double engine_commit; /* DuckDB's own COMMIT */
  double total;         /* COMMIT's start to the lock's release */
  size_t rows;          /* rows captured (DDL statements count one) */
} sql_commit_times;

typedef struct sql_changes {
  size_t nbatches;
  const sql_change_batch *batches; /* in execution order */
  /* Write-write conflict anchor: the number of hook-accepted commits the
   * engine had completed when this transaction began (read before DuckDB's
   * BEGIN, so it never postdates the transaction's snapshot), and the number
   * completed now. They differ exactly when another transaction committed
   * changes since this one began: prepare() should then refuse (40001). */
  uint64_t begin_seq;
  uint64_t commit_seq;
  /* The hook adds the time of its durable write to times->store_write. */
  sql_commit_times *times;
} sql_changes;

typedef struct sql_commit_hooks {
  void *ctx;
  /* Under the commit lock, before DuckDB commits. MR_OK lets it commit. */
  mr_status (*prepare)(void *ctx, const sql_changes *changes, sql_error *err);
  /* Optional. Under the commit lock, after DuckDB's COMMIT ran. */
  void (*finished)(void *ctx, const sql_changes *changes, bool committed);
  /* Is `table` one of DuckLake's spec tables the store keeps? A client may
   * create only those (and inlined tables); without this hook, none. */
  bool (*known_table)(void *ctx, const char *table);
  /* Optional. May a client's UPDATE assign `column` of catalog table
   * `table`? No for a column that identifies the row in the store: the
   * capture sees only the new row, so a changed key would be stored as a
   * second row. Without this hook, every column may be assigned. */
  bool (*may_update)(void *ctx, const char *table, const char *column);
} sql_commit_hooks;

/* ---- engine ----------------------------------------------------------- */

typedef struct sql_engine_options {
  const char *database_path;  /* NULL: in-memory DuckDB (the catalog lives in RAM) */
  const char *server_version; /* reported version(), e.g. "15.0 (moraine 0.1.0)" */
  const char *memory_limit;   /* the engine's memory limit ("2GB"), NULL: DuckDB's default */
  int threads;                /* worker threads per query; 0: DuckDB's default (one per core) */
  bool replica;               /* a read replica: every session refuses writes (25006) */
  /* the database name clients connect with: current_database(),
   * current_catalog and pg_database answer it; NULL: DuckDB's own name */
  const char *database_name;
  /* bytes of catalog-read results kept between changes (sql_rcache.h);
   * 0: none */
  size_t result_cache_bytes;
  /* after each commit, run again in the background the reads its writer
   * repeats, so that their next run is a hit (sql_refresh.h); needs the
   * result cache */
  bool refresh_ahead;
} sql_engine_options;

/* The result cache `moraine serve` gives each catalog (--result-cache-mib). */
#define SQL_RESULT_CACHE_DEFAULT_MIB 32

/* What the result cache did since the engine opened: reads it answered
 * (hits), reads looked up without an answer (misses), answers refreshed
 * ahead after commits; all 0 without a cache. */
typedef struct sql_result_cache_counts {
  uint64_t hits, misses, refreshed;
} sql_result_cache_counts;
void sql_engine_result_cache_counts(sql_engine *e, sql_result_cache_counts *out);

/* Blocks until the refresh after the last commit has run (tests). */
void sql_engine_refresh_wait(sql_engine *e);

/* Stops the engine's background reads (refresh ahead) for good: once it
 * returns, the history function is called from client sessions only. Call
 * before freeing what that function reaches (sql_engine_close does it
 * too). */
void sql_engine_stop_background(sql_engine *e);

/* Opens DuckDB, creates schema `public` and moraine's pg_catalog relations. */
mr_status sql_engine_open(const sql_engine_options *opts, sql_engine **out,
                          sql_error *err) MR_MUST_CHECK;
void sql_engine_close(sql_engine *e);

/* After the pre-load, before serving: reads the tables behind pg_class in
 * a background thread (the first client statement would do it otherwise).
 * Once per engine; sql_engine_close waits for it. */
void sql_engine_warm(sql_engine *e);

/* Registers (or clears, with NULL) the commit hooks; call before serving. */
void sql_engine_set_commit_hooks(sql_engine *e, const sql_commit_hooks *hooks);

/* The catalog's size in bytes, answered by the layer that owns the store
 * (pg_database_size). Called from query threads, concurrently. */
typedef mr_status (*sql_size_fn)(void *ctx, uint64_t *bytes, mr_error *err);
/* Registers the size function; call before serving. Without one,
 * pg_database_size fails with a clear message. */
void sql_engine_set_size_fn(sql_engine *e, sql_size_fn fn, void *ctx);

/* History residency (sql_history.h). Before a statement that may read
 * catalog history runs, the engine hands its needs to the layer that owns
 * the catalog, which loads what is not resident yet through the pre-load
 * API and sets *loaded when it added rows. Called from session threads,
 * concurrently; without one, every needed row is assumed resident. */
struct sql_hist_needs;
typedef mr_status (*sql_history_fn)(void *ctx, const struct sql_hist_needs *needs, bool *loaded,
                                    sql_error *err);
void sql_engine_set_history_fn(sql_engine *e, sql_history_fn fn, void *ctx);

/* Pre-load: runs SQL outside any session (no capture, no hooks). */
mr_status sql_engine_exec(sql_engine *e, const char *sql, sql_error *err) MR_MUST_CHECK;
/* The same for statements over rows only (SELECT, INSERT, DELETE; never
 * CREATE, DROP or ALTER): every session's cached plans and table shapes,
 * and the relation directory behind pg_class, stay valid (sql_engine_exec
 * must assume its SQL created or dropped tables). */
mr_status sql_engine_exec_data(sql_engine *e, const char *sql, sql_error *err) MR_MUST_CHECK;

/* One column of text to check: values[i * stride] for i < n, NULLs
 * skipped; type as duckdb_columns() spells it. */
typedef struct sql_cast_column {
  const char *type;
  const sql_value *values;
  size_t stride, n;
} sql_cast_column;

/*
 * Does every value cast from text to its column's type, by the VARCHAR
 * cast the start-up load runs (sql_load.c)? MR_OK if so. If not,
 * MR_ERR_INVALID with 22P02 and DuckDB's reason, and *bad is the index of
 * the first column that fails on its own (ncols if none does alone). A
 * value holding a NUL byte fails: the load's text cannot carry it. Changes
 * no rows (the data generation stays); thread-safe (sql_castcheck.h).
 */
mr_status sql_engine_check_casts(sql_engine *e, size_t ncols, const sql_cast_column *cols,
                                 size_t *bad, sql_error *err) MR_MUST_CHECK;

/* Pre-load: appends nrows rows (values row-major, ncols per row, in table
 * column order, sql_value conventions above) to schema.table. */
mr_status sql_engine_load_rows(sql_engine *e, const char *schema, const char *table, size_t ncols,
                               size_t nrows, const sql_value *values, sql_error *err) MR_MUST_CHECK;

/*
 * Pre-load transaction: BEGIN on the pre-load connection, held by this
 * thread until sql_engine_admin_end, so that a sequence of sql_engine_exec /
 * sql_engine_load_rows calls commits as one (a replica's catalog swap:
 * sessions see the catalog before or after it, never half of it). Other
 * threads' pre-load calls wait meanwhile. sql_engine_load_rows then runs
 * inside it (no transaction of its own). end: COMMIT when commit, else
 * ROLLBACK; the hold is released either way.
 */
mr_status sql_engine_admin_begin(sql_engine *e, sql_error *err) MR_MUST_CHECK;
mr_status sql_engine_admin_end(sql_engine *e, bool commit, sql_error *err) MR_MUST_CHECK;

/* ---- results ---------------------------------------------------------- */

/* One result column as PostgreSQL describes it in RowDescription. */
typedef struct sql_column {
  const char *name;
  uint32_t type_oid; /* PostgreSQL type OID (int8 20, text 25, ...) */
  int16_t type_len;  /* pg_type.typlen: -1 for varlena */
  int32_t typmod;    /* -1 when none */
  int16_t format;    /* 0 text, 1 binary */
} sql_column;

/*
 * Where results go. Each callback returns 0 to go on, non-zero to stop
 * (e.g. the socket failed); the engine then abandons the statement and the
 * call returns MR_ERR_CLOSED.
 * data_row: vals[i] NULL for SQL NULL, else lens[i] bytes in the column's
 * format. COPY TO STDOUT: copy_out_begin, copy_data chunks each holding whole
 * rows (binary: the PGCOPY header in the first, trailer in the last), then
 * copy_done. COPY FROM STDIN: copy_in_begin, then copy_in_read until it
 * returns 0 (CopyDone) or < 0 (CopyFail / connection lost; msg says why).
 */
typedef struct sql_sink {
  void *ctx;
  int (*row_description)(void *ctx, size_t ncols, const sql_column *cols);
  int (*no_data)(void *ctx);
  int (*parameter_description)(void *ctx, size_t nparams, const uint32_t *oids);
  int (*data_row)(void *ctx, size_t ncols, const char *const *vals, const size_t *lens);
  int (*copy_out_begin)(void *ctx, bool binary, size_t ncols);
  int (*copy_data)(void *ctx, const uint8_t *data, size_t len);
  int (*copy_done)(void *ctx);
  int (*copy_in_begin)(void *ctx, bool binary, size_t ncols);
  int (*copy_in_read)(void *ctx, const uint8_t **data, size_t *len, char *msg, size_t msgcap);
  int (*command_complete)(void *ctx, const char *tag); /* "SELECT 3", "INSERT 0 1", ... */
  int (*empty_query)(void *ctx);
  int (*parameter_status)(void *ctx, const char *name, const char *value);
} sql_sink;

/* ---- sessions --------------------------------------------------------- */

mr_status sql_session_open(sql_engine *e, const char *user, const char *database, sql_session **out,
                           sql_error *err) MR_MUST_CHECK;
void sql_session_close(sql_session *s);

/*
 * Answering before DuckDB's BEGIN / COMMIT. With `on`, an explicit BEGIN
 * and the COMMIT of a transaction that changed nothing (no captured change,
 * no temporary table) are answered at once, and DuckDB's own BEGIN or COMMIT
 * (0.15-0.3 ms each) runs at sql_session_settle, which the caller calls once
 * the answer is sent, before it waits for the client's next message. So the
 * client does its own work meanwhile. Every other call on the session
 * settles first, so no statement ever runs before it; the transaction's
 * snapshot is taken at the settle, which is before its first statement (as
 * PostgreSQL takes it at the first statement). A settle that fails is
 * logged: a failed read-only COMMIT is rolled back (it changed nothing), a
 * failed BEGIN leaves the transaction aborted (25P02 until ROLLBACK).
 */
void sql_session_defer_ends(sql_session *s, bool on);
/* Runs what is deferred, if anything: returns "BEGIN" or "COMMIT" (for the
 * log), NULL when there was nothing. */
const char *sql_session_settle(sql_session *s);

/* Transaction status as ReadyForQuery reports it: 'I', 'T' or 'E'. */
char sql_session_status(const sql_session *s);

/* The value of a GUC as SHOW reports it, or NULL (valid until the next call). */
const char *sql_session_guc(sql_session *s, const char *name);

/*
 * Simple protocol: runs every statement of `query` in order, each result
 * into sink; stops at the first error and returns it (results already sent
 * stay sent). PostgreSQL's rules: outside BEGIN, a multi-statement string is
 * one implicit transaction; inside, an error leaves it aborted ('E') and later
 * statements fail with 25P02 until ROLLBACK. An empty string gives
 * empty_query.
 */
mr_status sql_session_simple_query(sql_session *s, const char *query, const sql_sink *sink,
                                   sql_error *err) MR_MUST_CHECK;

/*
 * Extended protocol. Parse: prepares `query` (one statement; a string with
 * several statements is accepted and described as NoData). param_oids may
 * give the client's parameter types (0 = unspecified). The sql_prepared
 * belongs to the session and dies with sql_prepared_free or the session.
 */
mr_status sql_session_prepare(sql_session *s, const char *query, size_t nparam_oids,
                              const uint32_t *param_oids, sql_prepared **out,
                              sql_error *err) MR_MUST_CHECK;
void sql_prepared_free(sql_prepared *p);
/* The statement text as the client sent it (for the log). */
const char *sql_prepared_text(const sql_prepared *p);
size_t sql_prepared_nparams(const sql_prepared *p);

/* Describe: parameter_description (when with_params) then row_description
 * or no_data. result_formats as in Bind (n = 0: all text; 1: applies to all). */
mr_status sql_prepared_describe(sql_session *s, sql_prepared *p, bool with_params, size_t nformats,
                                const int16_t *result_formats, const sql_sink *sink,
                                sql_error *err) MR_MUST_CHECK;

/* Execute with bound parameters (vals[i] NULL = SQL NULL; formats as in Bind).
 * Sends data rows (no RowDescription: Describe does that) and the command
 * tag. */
mr_status sql_prepared_execute(sql_session *s, sql_prepared *p, size_t nparams,
                               const char *const *vals, const size_t *lens, size_t nparam_formats,
                               const int16_t *param_formats, size_t nformats,
                               const int16_t *result_formats, const sql_sink *sink,
                               sql_error *err) MR_MUST_CHECK;

/* Called by pgwire when an extended-protocol error skips to Sync: marks an
 * open transaction aborted, or rolls back an implicit one. */
void sql_session_error_at_sync(sql_session *s);
/* Called at Sync: commits an implicit extended-protocol transaction. */
mr_status sql_session_sync(sql_session *s, sql_error *err) MR_MUST_CHECK;

/* The session's user may read, not write: every DML, DDL and COPY FROM
 * fails with SQLSTATE 42501 (set once, after authentication). */
void sql_session_set_read_only_role(sql_session *s, bool read_only);

/*
 * Prepared statements and portals belong to the protocol layer; DEALLOCATE
 * and DISCARD ALL reach them through this hook. name NULL: every named
 * prepared statement (DEALLOCATE ALL), and with `portals` every portal but
 * the running one too (DISCARD ALL); otherwise the statement `name`. It
 * returns false when there is no such statement (the statement then fails
 * 26000). Without a hook (tests, tools) these statements change nothing.
 */
typedef bool (*sql_dealloc_fn)(void *ctx, const char *name, bool portals);
void sql_session_set_dealloc(sql_session *s, sql_dealloc_fn fn, void *ctx);

/* True once after each commit that called the hooks, with its times. */
bool sql_session_take_commit_times(sql_session *s, sql_commit_times *out);

/* DISCARD ALL / connection reset outside a transaction. */
void sql_session_reset(sql_session *s);

/* Interrupts the statement the session is running, if any: it fails with
 * SQLSTATE 57014. Safe to call from another thread while the session is in
 * use (the caller guarantees the session is not being closed meanwhile). */
void sql_session_cancel(sql_session *s);

/* The session's statement_timeout in milliseconds (SET statement_timeout;
 * PostgreSQL's units: plain number = ms, or 's', 'min', 'ms' suffixes);
 * 0 when none. */
uint64_t sql_session_statement_timeout_ms(sql_session *s);

#endif /* MR_SQL_H */
