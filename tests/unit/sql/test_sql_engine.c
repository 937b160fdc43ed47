/* test_sql_engine.c — the seam of sql.h: pre-load, change capture, the
 * commit hooks (success, refusal -> rollback + the hook's SQLSTATE), the
 * transaction states, bytea literals, introspection answers (and the relation
 * directory behind them following DDL), and the exact
 * PGCOPY bytes of every binary-encoded type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sql/sql.h"
#include "sql/sql_internal.h" /* the engine's own connection, for its catalog */
#include "sql/sql_util.h"

/* ---- a sink that records everything as text ---- */
typedef struct rec {
  sql_strbuf log;  /* "T a,b|D 1,x|C SELECT 1|" */
  sql_strbuf copy; /* concatenated CopyData */
} rec;

static int r_rowdesc(void *c, size_t n, const sql_column *cols) {
  rec *r = c;
  sql_strbuf_add(&r->log, "T ");
  for (size_t i = 0; i < n; i++)
    sql_strbuf_addf(&r->log, "%s%s:%u", i ? "," : "", cols[i].name, cols[i].type_oid);
  sql_strbuf_add(&r->log, "|");
  return 0;
}
static int r_row(void *c, size_t n, const char *const *v, const size_t *l) {
  rec *r = c;
  sql_strbuf_add(&r->log, "D ");
  for (size_t i = 0; i < n; i++) {
    if (i)
      sql_strbuf_add(&r->log, ",");
    if (v[i])
      sql_strbuf_addn(&r->log, v[i], l[i]);
    else
      sql_strbuf_add(&r->log, "NULL");
  }
  sql_strbuf_add(&r->log, "|");
  return 0;
}
static int r_complete(void *c, const char *tag) {
  sql_strbuf_addf(&((rec *)c)->log, "C %s|", tag);
  return 0;
}
static int r_copy_begin(void *c, bool binary, size_t n) {
  sql_strbuf_addf(&((rec *)c)->log, "H %d %zu|", binary, n);
  return 0;
}
static int r_copy_data(void *c, const uint8_t *d, size_t n) {
  sql_strbuf_addn(&((rec *)c)->copy, d, n);
  return 0;
}
static int r_copy_done(void *c) {
  sql_strbuf_add(&((rec *)c)->log, "c|");
  return 0;
}

static int r_params(void *c, size_t n, const uint32_t *oids) {
  rec *r = c;
  sql_strbuf_add(&r->log, "P");
  for (size_t i = 0; i < n; i++)
    sql_strbuf_addf(&r->log, " %u", oids[i]);
  sql_strbuf_add(&r->log, "|");
  return 0;
}

static sql_sink sink_for(rec *r) {
  sql_sink s = {0};
  s.ctx = r;
  s.row_description = r_rowdesc;
  s.data_row = r_row;
  s.command_complete = r_complete;
  s.copy_out_begin = r_copy_begin;
  s.copy_data = r_copy_data;
  s.copy_done = r_copy_done;
  s.parameter_description = r_params;
  return s;
}

typedef struct fixture {
  sql_engine *e;
  sql_session *s;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  sql_error err;
  sql_engine_options o = {.server_version = "15.0 (moraine test)"};
  if (sql_engine_open(&o, &f->e, &err) != MR_OK) {
    fprintf(stderr, "open: %s\n", err.base.msg);
    return -1;
  }
  if (sql_session_open(f->e, "u", "lake", &f->s, &err) != MR_OK)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  sql_session_close(f->s);
  sql_engine_close(f->e);
  free(f);
  return 0;
}

/* Runs sql; returns the log (caller frees) or "ERR <sqlstate> <msg>". */
static char *run_on(sql_session *s, const char *sql) {
  rec r = {0};
  sql_sink sink = sink_for(&r);
  sql_error err;
  if (sql_session_simple_query(s, sql, &sink, &err) != MR_OK)
    sql_strbuf_addf(&r.log, "ERR %s %s", err.sqlstate, err.base.msg);
  sql_strbuf_free(&r.copy);
  return sql_strbuf_take(&r.log);
}

static char *run(fixture *f, const char *sql) {
  return run_on(f->s, sql);
}

#define ASSERT_RUN_ON(s, sql, want)                                                        \
  do {                                                                                     \
    char *got_ = run_on(s, sql);                                                           \
    assert_string_equal(got_, want);                                                       \
    free(got_);                                                                            \
  } while (0)
#define ASSERT_RUN(f, sql, want) ASSERT_RUN_ON((f)->s, sql, want)

/* Creates a catalog table outside any session, as the catalog load does. */
#define PRELOAD(f, sql)                                                                            \
  do {                                                                                             \
    sql_error perr_;                                                                               \
    assert_int_equal(sql_engine_exec((f)->e, (sql), &perr_), MR_OK);                               \
  } while (0)

/* ---- commit hooks ---- */

/* The catalog's known_table hook: here every table is one. */
static bool known_any(void *ctx, const char *table) { return true; }
typedef struct hook_log {
  int prepares;
  int finished_ok;
  mr_status answer;
  sql_strbuf seen;
} hook_log;

static mr_status h_prepare(void *ctx, const sql_changes *ch, sql_error *err) {
  hook_log *h = ctx;
  h->prepares++;
  for (size_t i = 0; i < ch->nbatches; i++) {
    const sql_change_batch *b = &ch->batches[i];
    if (b->op == SQL_CHANGE_DDL) {
      sql_strbuf_addf(&h->seen, "[DDL %s]", b->sql);
      continue;
    }
    static const char *const ops[] = {"DDL", "INSERT", "UPDATE", "DELETE"};
    sql_strbuf_addf(&h->seen, "[%s %s.%s", ops[b->op], b->schema, b->table);
    for (size_t r = 0; r < b->nrows; r++) {
      sql_strbuf_add(&h->seen, " (");
      for (size_t c = 0; c < b->ncols; c++) {
        const sql_value *v = &b->values[r * b->ncols + c];
        if (c)
          sql_strbuf_add(&h->seen, ",");
        if (v->is_null)
          sql_strbuf_add(&h->seen, "NULL");
        else if (strcmp(b->col_types[c], "BLOB") == 0 || strcmp(b->col_types[c], "pg_bytea") == 0)
          for (size_t k = 0; k < v->len; k++)
            sql_strbuf_addf(&h->seen, "%02x", (uint8_t)v->data[k]);
        else
          sql_strbuf_addn(&h->seen, v->data, v->len);
      }
      sql_strbuf_add(&h->seen, ")");
    }
    sql_strbuf_add(&h->seen, "]");
  }
  if (h->answer != MR_OK)
    return sql_fail(err, h->answer, "40001", "could not commit: write conflict on the store");
  return MR_OK;
}

static void h_finished(void *ctx, const sql_changes *ch, bool committed) {
  if (committed)
    ((hook_log *)ctx)->finished_ok++;
}

static void preload_then_query(void **state) {
  fixture *f = *state;
  sql_error err;
  assert_int_equal(sql_engine_exec(f->e, "CREATE TABLE public.ducklake_cat (id BIGINT, name VARCHAR, raw BYTEA)",
                                   &err),
                   MR_OK);
  sql_value rows[] = {
      SQL_VALUE_TEXT("1", 1), SQL_VALUE_TEXT("one", 3), SQL_VALUE_TEXT("\x00\x01", 2),
      SQL_VALUE_TEXT("2", 1), SQL_VALUE_NULL,           SQL_VALUE_NULL};
  assert_int_equal(sql_engine_load_rows(f->e, "public", "ducklake_cat", 3, 2, rows, &err), MR_OK);
  ASSERT_RUN(f, "SELECT id, name, raw FROM ducklake_cat ORDER BY id",
             "T id:20,name:1043,raw:17|D 1,one,\\x0001|D 2,NULL,NULL|C SELECT 2|");
  assert_int_not_equal(sql_engine_load_rows(f->e, "public", "ducklake_cat", 2, 0, rows, &err), MR_OK);
}

/* An in-memory engine never checkpoints: DuckDB would otherwise re-pack
 * every table inside whichever COMMIT crossed its threshold (sql_engine.c). */
static void memory_engine_never_checkpoints_in_a_commit(void **state) {
  fixture *f = *state;
  duckdb_result r;
  assert_int_equal(duckdb_query(f->e->admin, "SELECT current_setting('checkpoint_threshold')", &r),
                   DuckDBSuccess);
  char *v = duckdb_value_varchar(&r, 0, 0);
  assert_non_null(v);
  /* "none" reads back as the largest size DuckDB prints (16 MiB by default) */
  assert_string_equal(v, "16383.9 PiB");
  duckdb_free(v);
  duckdb_destroy_result(&r);
}

static void capture_and_hooks(void **state) {
  fixture *f = *state;
  hook_log h = {0};
  sql_commit_hooks hooks = {&h, h_prepare, h_finished, known_any, NULL};
  sql_engine_set_commit_hooks(f->e, &hooks);

  ASSERT_RUN(f, "CREATE TABLE ducklake_k (a BIGINT, b VARCHAR, c BYTEA)", "C CREATE TABLE|");
  assert_int_equal(h.prepares, 1);
  assert_string_equal(h.seen.data, "[DDL CREATE TABLE ducklake_k (a BIGINT, b VARCHAR, c pg_bytea)]");
  sql_strbuf_reset(&h.seen);

  ASSERT_RUN(f, "INSERT INTO ducklake_k VALUES (1, '\\x41', '\\x0a0b'), (2, NULL, NULL)", "C INSERT 0 2|");
  assert_string_equal(h.seen.data, "[INSERT public.ducklake_k (1,\\x41,0a0b) (2,NULL,NULL)]");
  sql_strbuf_reset(&h.seen);

  /* one explicit transaction: one hook call, batches in order */
  ASSERT_RUN(f,
             "BEGIN; UPDATE ducklake_k SET b = 'z' WHERE a = 1; DELETE FROM ducklake_k WHERE a = 2; "
             "WITH v(x) AS (VALUES (1)) UPDATE ducklake_k SET b = 'w' FROM v WHERE a = x; COMMIT",
             "C BEGIN|C UPDATE 1|C DELETE 1|C UPDATE 1|C COMMIT|");
  assert_int_equal(h.prepares, 3);
  assert_string_equal(h.seen.data,
                      "[UPDATE public.ducklake_k (1,z,0a0b)][DELETE public.ducklake_k (2,NULL,NULL)]"
                      "[UPDATE public.ducklake_k (1,w,0a0b)]");
  sql_strbuf_reset(&h.seen);

  /* reads never call the hooks */
  ASSERT_RUN(f, "SELECT a, b FROM ducklake_k", "T a:20,b:1043|D 1,w|C SELECT 1|");
  assert_int_equal(h.prepares, 3);
  assert_int_equal(h.finished_ok, 3);

  /* a refusing hook: rollback, the hook's error, nothing visible */
  h.answer = MR_ERR_CONFLICT;
  ASSERT_RUN(f, "BEGIN; INSERT INTO ducklake_k VALUES (9, 'no', NULL); COMMIT",
             "C BEGIN|C INSERT 0 1|ERR 40001 could not commit: write conflict on the store");
  assert_int_equal(sql_session_status(f->s), 'I');
  h.answer = MR_OK;
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_k WHERE a = 9", "T count_star():20|D 0|C SELECT 1|");

  /* without hooks commit just commits */
  sql_engine_set_commit_hooks(f->e, NULL);
  ASSERT_RUN(f, "INSERT INTO ducklake_k VALUES (3, 'c', NULL)", "C INSERT 0 1|");
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_k", "T count_star():20|D 2|C SELECT 1|");
  sql_strbuf_free(&h.seen);
}

/* The capture forms the text of integer, boolean and text columns itself
 * (sql_capture.c) and has the engine cast the rest: either way each cell
 * must be the text DuckDB's own CAST(... AS VARCHAR) gives, which is what
 * the store parses. The engine's cast of the same rows is the oracle. */
static void captured_text_is_the_engines_cast(void **state) {
  fixture *f = *state;
  hook_log h = {0};
  sql_commit_hooks hooks = {&h, h_prepare, h_finished, known_any, NULL};
  sql_engine_set_commit_hooks(f->e, &hooks);
  PRELOAD(f, "CREATE TABLE public.ducklake_ty (b BOOLEAN, i1 TINYINT, i2 SMALLINT, i4 INTEGER, "
             "i8 BIGINT, u1 UTINYINT, u2 USMALLINT, u4 UINTEGER, u8 UBIGINT, t VARCHAR, "
             "ts TIMESTAMP WITH TIME ZONE, d DECIMAL(18,3), f DOUBLE, u UUID)");
  ASSERT_RUN(f,
             "INSERT INTO ducklake_ty VALUES "
             "(false, -128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 0, '', "
             "'1970-01-01 00:00:00+00', -0.5, -1e300, '00000000-0000-0000-0000-000000000000'), "
             "(NULL, NULL, NULL, 0, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
             "(true, 127, 32767, 2147483647, 9223372036854775807, 255, 65535, 4294967295, "
             "18446744073709551615, 'caf\xc3\xa9 \"x\"', '2024-02-29 23:59:59.123456+00', "
             "123456789012345.678, 0.1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')",
             "C INSERT 0 3|");
  /* (the front admits || and coalesce, not concat_ws) */
  sql_strbuf q = {0};
  static const char *const cols[] = {"b",  "i1", "i2", "i4", "i8", "u1", "u2",
                                     "u4", "u8", "t",  "ts", "d",  "f",  "u"};
  sql_strbuf_add(&q, "SELECT ");
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
    sql_strbuf_addf(&q, "%scoalesce(CAST(%s AS VARCHAR), 'NULL')", i ? " || ',' || " : "", cols[i]);
  sql_strbuf_add(&q, " AS r FROM ducklake_ty ORDER BY i8");
  char *oracle = run(f, q.data);
  sql_strbuf_free(&q);
  /* "T r:1043|D <row>|D <row>|D <row>|C SELECT 3|" -> the capture's form */
  sql_strbuf want = {0};
  sql_strbuf_add(&want, "[INSERT public.ducklake_ty");
  const char *p = oracle;
  int rows = 0;
  while ((p = strstr(p, "|D ")) != NULL) {
    p += 3;
    const char *end = strchr(p, '|');
    assert_non_null(end);
    sql_strbuf_add(&want, " (");
    sql_strbuf_addn(&want, p, (size_t)(end - p));
    sql_strbuf_add(&want, ")");
    rows++;
  }
  sql_strbuf_add(&want, "]");
  assert_int_equal(rows, 3);
  assert_string_equal(h.seen.data, want.data);
  free(oracle);
  sql_strbuf_free(&want);
  sql_strbuf_free(&h.seen);
}

static void transaction_states(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_m (a INT)");
  char *got = run(f, "INSERT INTO ducklake_m VALUES (1); SELECT nope; INSERT INTO ducklake_m VALUES (2)");
  assert_non_null(strstr(got, "C INSERT 0 1|ERR 42703"));
  free(got);
  assert_int_equal(sql_session_status(f->s), 'I');
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_m", "T count_star():20|D 0|C SELECT 1|");
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  assert_int_equal(sql_session_status(f->s), 'T');
  got = run(f, "SELECT nope");
  assert_non_null(strstr(got, "ERR 42703"));
  free(got);
  assert_int_equal(sql_session_status(f->s), 'E');
  got = run(f, "SELECT 1");
  assert_non_null(strstr(got, "ERR 25P02"));
  free(got);
  ASSERT_RUN(f, "COMMIT", "C ROLLBACK|");
  assert_int_equal(sql_session_status(f->s), 'I');
  ASSERT_RUN(f, "DISCARD ALL", "C DISCARD ALL|");
  ASSERT_RUN(f, "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", "C BEGIN|");
  got = run(f, "INSERT INTO ducklake_m VALUES (1)");
  assert_non_null(strstr(got, "ERR 25006"));
  free(got);
  ASSERT_RUN(f, "ROLLBACK", "C ROLLBACK|");
}

/* What a session asked of its protocol layer's prepared statements. */
typedef struct dealloc_log {
  sql_strbuf calls;
} dealloc_log;

static bool record_dealloc(void *ctx, const char *name, bool portals) {
  dealloc_log *d = ctx;
  sql_strbuf_addf(&d->calls, "%s%s;", name ? name : "(all)", portals ? "+portals" : "");
  return name == NULL || strcmp(name, "known") == 0;
}

static void deallocate_and_discard_reach_the_protocol_layer(void **state) {
  fixture *f = *state;
  ASSERT_RUN(f, "DEALLOCATE unknown", "C DEALLOCATE|"); /* no hook: nothing to end */
  dealloc_log d = {{0}};
  sql_session_set_dealloc(f->s, record_dealloc, &d);
  ASSERT_RUN(f, "DEALLOCATE known", "C DEALLOCATE|");
  ASSERT_RUN(f, "DEALLOCATE PREPARE known", "C DEALLOCATE|");
  ASSERT_RUN(f, "DEALLOCATE unknown",
             "ERR 26000 prepared statement \"unknown\" does not exist");
  ASSERT_RUN(f, "DEALLOCATE ALL", "C DEALLOCATE ALL|");
  ASSERT_RUN(f, "DISCARD ALL", "C DISCARD ALL|");
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  char *got = run(f, "DISCARD ALL"); /* refused in a block: ends nothing */
  assert_non_null(strstr(got, "ERR 25001"));
  free(got);
  ASSERT_RUN(f, "ROLLBACK", "C ROLLBACK|");
  char *calls = sql_strbuf_take(&d.calls);
  assert_string_equal(calls, "known;known;unknown;(all);(all)+portals;");
  free(calls);
  sql_session_set_dealloc(f->s, NULL, NULL);
}

/* The session keeps each SELECT / COPY text prepared (sql_cache.h) and a
 * Parse is executed many times: each run must answer from the data of its
 * own time, never from the table statistics of the time it was prepared. */
static void kept_statements_see_new_rows(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_k (table_id BIGINT, n BIGINT)");
  ASSERT_RUN(f, "INSERT INTO ducklake_k VALUES (7, 5)", "C INSERT 0 1|");
  static const char *const queries[] = {
      "SELECT count(*) FROM ducklake_k WHERE table_id = '1'",
      "SELECT count(*) FROM ducklake_k WHERE n IS NULL",
      "SELECT count(*) FROM ducklake_k WHERE n > 10",
      "SELECT max(n) FROM ducklake_k",
      "SELECT n FROM ducklake_k GROUP BY n ORDER BY n DESC LIMIT 1",
  };
  static const char *const before[] = {"D 0|", "D 0|", "D 0|", "D 5|", "D 5|"};
  static const char *const after[] = {"D 1|", "D 1|", "D 1|", "D 5000000000000|",
                                      "D 5000000000000|"};
  size_t n = sizeof queries / sizeof queries[0];
  sql_prepared *ps[sizeof queries / sizeof queries[0]];
  sql_error err;
  for (size_t i = 0; i < n; i++) {
    char *got = run(f, queries[i]);
    assert_non_null(strstr(got, before[i]));
    free(got);
    assert_int_equal(sql_session_prepare(f->s, queries[i], 0, NULL, &ps[i], &err), MR_OK);
  }
  ASSERT_RUN(f, "INSERT INTO ducklake_k VALUES (1, NULL), (2, 5000000000000)", "C INSERT 0 2|");
  for (size_t i = 0; i < n; i++) {
    char *got = run(f, queries[i]);
    assert_non_null(strstr(got, after[i]));
    free(got);
    rec r = {0};
    sql_sink sink = sink_for(&r);
    assert_int_equal(
        sql_prepared_execute(f->s, ps[i], 0, NULL, NULL, 0, NULL, 0, NULL, &sink, &err), MR_OK);
    char *log = sql_strbuf_take(&r.log);
    assert_non_null(strstr(log, after[i]));
    free(log);
    sql_strbuf_free(&r.copy);
    sql_prepared_free(ps[i]);
  }
}

/* Parses query (parameter types oids) and returns its Describe, or
 * "ERR <sqlstate>"; the statement is closed again. */
static char *parse_describe(fixture *f, const char *query, size_t noids, const uint32_t *oids) {
  rec r = {0};
  sql_sink sink = sink_for(&r);
  sql_error err;
  sql_prepared *p;
  if (sql_session_prepare(f->s, query, noids, oids, &p, &err) != MR_OK) {
    sql_strbuf_addf(&r.log, "ERR %s", err.sqlstate);
  } else {
    assert_int_equal(sql_prepared_describe(f->s, p, true, 0, NULL, &sink, &err), MR_OK);
    sql_prepared_free(p);
  }
  return sql_strbuf_take(&r.log);
}

#define ASSERT_PARSE(f, query, noids, oids, want)                                          \
  do {                                                                                     \
    char *got_ = parse_describe(f, query, noids, oids);                                    \
    assert_string_equal(got_, want);                                                       \
    free(got_);                                                                            \
  } while (0)

/* A closed statement is kept for the next Parse of the same text and
 * parameter types, and only while no DDL has happened since. */
static void closed_statements_are_kept_until_ddl(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_kp (a INTEGER)");
  const char *q = "SELECT * FROM ducklake_kp";
  ASSERT_PARSE(f, q, 0, NULL, "P|T a:23|");
  uint64_t hits = f->s->prepared_ps.hits;
  ASSERT_PARSE(f, q, 0, NULL, "P|T a:23|");
  assert_int_equal(f->s->prepared_ps.hits, hits + 1); /* the kept one */
  /* kept statements still run, and see rows written since */
  sql_error err;
  sql_prepared *p;
  assert_int_equal(sql_session_prepare(f->s, q, 0, NULL, &p, &err), MR_OK);
  ASSERT_RUN(f, "INSERT INTO ducklake_kp VALUES (4)", "C INSERT 0 1|");
  rec r = {0};
  sql_sink sink = sink_for(&r);
  assert_int_equal(sql_prepared_execute(f->s, p, 0, NULL, NULL, 0, NULL, 0, NULL, &sink, &err),
                   MR_OK);
  char *log = sql_strbuf_take(&r.log);
  assert_string_equal(log, "D 4|C SELECT 1|");
  free(log);
  assert_int_equal(sql_session_sync(f->s, &err), MR_OK); /* ends the implicit transaction */
  sql_prepared_free(p);
  /* the table changes shape: the next Parse sees the new one */
  PRELOAD(f, "DROP TABLE public.ducklake_kp; "
             "CREATE TABLE public.ducklake_kp (a INTEGER, b VARCHAR)");
  ASSERT_PARSE(f, q, 0, NULL, "P|T a:23,b:1043|");
  /* parameter types are part of the statement */
  const char *pq = "SELECT a FROM ducklake_kp WHERE a = $1";
  uint32_t int8[] = {20};
  ASSERT_PARSE(f, pq, 0, NULL, "P 23|T a:23|");
  ASSERT_PARSE(f, pq, 1, int8, "P 20|T a:23|");
  ASSERT_PARSE(f, pq, 0, NULL, "P 23|T a:23|");
  /* a failed Parse is never kept: it fails again */
  ASSERT_PARSE(f, "SELECT * FROM ducklake_nope", 0, NULL, "ERR 42P01");
  ASSERT_PARSE(f, "SELECT * FROM ducklake_nope", 0, NULL, "ERR 42P01");
}

/* Executes prepared statement p (no parameters) and returns what the sink
 * saw, or "ERR <sqlstate>". */
static char *execute(fixture *f, sql_prepared *p) {
  rec r = {0};
  sql_sink sink = sink_for(&r);
  sql_error err;
  if (sql_prepared_execute(f->s, p, 0, NULL, NULL, 0, NULL, 0, NULL, &sink, &err) != MR_OK)
    sql_strbuf_addf(&r.log, "ERR %s", err.sqlstate);
  sql_strbuf_free(&r.copy);
  return sql_strbuf_take(&r.log);
}

/* An extended-protocol read outside a block runs in DuckDB's autocommit and
 * opens no implicit transaction; a write opens one that lasts to Sync, and a
 * read after it runs inside it (sees its rows, goes with its rollback). */
static void extended_reads_outside_a_block_open_none(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_xr (a INTEGER)");
  sql_error err;
  sql_prepared *sel, *ins;
  const char *select = "SELECT count(*) FROM ducklake_xr";
  const char *insert = "INSERT INTO ducklake_xr VALUES (1)";
  assert_int_equal(sql_session_prepare(f->s, select, 0, NULL, &sel, &err), MR_OK);
  assert_int_equal(sql_session_prepare(f->s, insert, 0, NULL, &ins, &err), MR_OK);
  char *got = execute(f, sel);
  assert_string_equal(got, "D 0|C SELECT 1|");
  free(got);
  assert_int_equal(sql_session_status(f->s), 'I'); /* no block opened */
  got = execute(f, ins);
  assert_string_equal(got, "C INSERT 0 1|");
  free(got);
  assert_int_equal(sql_session_status(f->s), 'T'); /* implicit, up to Sync */
  got = execute(f, sel);
  assert_string_equal(got, "D 1|C SELECT 1|"); /* inside it */
  free(got);
  sql_session_error_at_sync(f->s); /* a later message failed: all of it goes */
  assert_int_equal(sql_session_status(f->s), 'I');
  got = execute(f, sel);
  assert_string_equal(got, "D 0|C SELECT 1|");
  free(got);
  got = execute(f, ins);
  assert_string_equal(got, "C INSERT 0 1|");
  free(got);
  assert_int_equal(sql_session_sync(f->s, &err), MR_OK);
  assert_int_equal(sql_session_status(f->s), 'I');
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_xr", "T count_star():20|D 1|C SELECT 1|");
  /* in an explicit block a read stays in it */
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  got = execute(f, sel);
  assert_string_equal(got, "D 1|C SELECT 1|");
  free(got);
  assert_int_equal(sql_session_status(f->s), 'T');
  ASSERT_RUN(f, "ROLLBACK", "C ROLLBACK|");
  sql_prepared_free(sel);
  sql_prepared_free(ins);
}

/* The catalog's may_update hook: here only ducklake_r.a identifies a row. */
static bool a_is_the_key(void *ctx, const char *table, const char *column) {
  return strcmp(table, "ducklake_r") != 0 || strcmp(column, "a") != 0;
}

/* What the capture could not carry to the store whole is refused (0A000)
 * before it runs, by the simple and the extended protocol, and changes
 * nothing: a client's own RETURNING (the capture needs the statement's
 * RETURNING for itself) and an UPDATE of a column that identifies the
 * stored row. Either would be served and then lost (or doubled) at the
 * next start. Temporary tables capture nothing and take both. */
static void uncapturable_changes_are_refused(void **state) {
  fixture *f = *state;
  hook_log h = {0};
  sql_commit_hooks hooks = {&h, h_prepare, h_finished, known_any, a_is_the_key};
  sql_engine_set_commit_hooks(f->e, &hooks);
  PRELOAD(f, "CREATE TABLE public.ducklake_r (a INTEGER, b INTEGER)");
  PRELOAD(f, "INSERT INTO public.ducklake_r VALUES (1, 10)");
  static const char *const writes[] = {
      "INSERT INTO ducklake_r VALUES (2, 20) RETURNING a",
      "UPDATE ducklake_r SET b = 3 RETURNING a",
      "DELETE FROM public.ducklake_r RETURNING *",
      "UPDATE ducklake_r SET a = 2",
      "UPDATE public.ducklake_r SET b = 11, a = a + 1 WHERE a = 1",
      "UPDATE ducklake_r SET (b, a) = (12, 5)",
      "UPDATE ducklake_r SET \"A\" = 6", /* DuckDB resolves column names in any case */
  };
  for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
    char *got = run(f, writes[i]);
    if (strncmp(got, "ERR 0A000", 9) != 0)
      fail_msg("%s: %s", writes[i], got);
    free(got);
    sql_prepared *p = NULL;
    sql_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(sql_session_prepare(f->s, writes[i], 0, NULL, &p, &err), MR_ERR_INVALID);
    assert_string_equal(err.sqlstate, "0A000");
    assert_null(p);
  }
  ASSERT_RUN(f, "SELECT a, b FROM ducklake_r", "T a:23,b:23|D 1,10|C SELECT 1|");
  assert_int_equal(h.prepares, 0);
  /* a column that does not identify the row is captured as always */
  ASSERT_RUN(f, "UPDATE ducklake_r SET b = 11 WHERE a = 1", "C UPDATE 1|");
  assert_int_equal(h.prepares, 1);
  assert_string_equal(h.seen.data, "[UPDATE public.ducklake_r (1,11)]");
  ASSERT_RUN(f, "CREATE TEMP TABLE scratch (a INTEGER)", "C CREATE TABLE|");
  ASSERT_RUN(f, "INSERT INTO scratch VALUES (7) RETURNING a", "T a:23|D 7|C INSERT 0 1|");
  ASSERT_RUN(f, "UPDATE scratch SET a = 8", "C UPDATE 1|");
  ASSERT_RUN(f, "DELETE FROM temp.scratch RETURNING a", "T a:23|D 8|C DELETE 1|");
  sql_engine_set_commit_hooks(f->e, NULL);
  sql_strbuf_free(&h.seen);
}

/* sql_session_defer_ends: BEGIN and a read-only COMMIT are answered first
 * and DuckDB's own run at the settle, or at the session's next call,
 * whichever comes first. The snapshot is the settle's; a write's COMMIT is
 * never deferred. */
static void deferred_ends_keep_transactions_whole(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_d (a INTEGER)");
  sql_session *other;
  sql_error err;
  assert_int_equal(sql_session_open(f->e, "u", "lake", &other, &err), MR_OK);
  const char *count = "SELECT count(*) FROM ducklake_d";
  sql_session_defer_ends(f->s, true);
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  assert_int_equal(sql_session_status(f->s), 'T');
  /* committed after the answer, before the settle: in the snapshot */
  ASSERT_RUN_ON(other, "INSERT INTO ducklake_d VALUES (1)", "C INSERT 0 1|");
  assert_string_equal(sql_session_settle(f->s), "BEGIN");
  assert_null(sql_session_settle(f->s));
  ASSERT_RUN(f, count, "T count_star():20|D 1|C SELECT 1|");
  /* committed after the settle: not in it */
  ASSERT_RUN_ON(other, "INSERT INTO ducklake_d VALUES (2)", "C INSERT 0 1|");
  ASSERT_RUN(f, count, "T count_star():20|D 1|C SELECT 1|");
  ASSERT_RUN(f, "COMMIT", "C COMMIT|");
  assert_int_equal(sql_session_status(f->s), 'I');
  assert_string_equal(sql_session_settle(f->s), "COMMIT");
  /* unsettled: the next call settles first, whatever it is, so the block
   * keeps one snapshot */
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  ASSERT_RUN(f, count, "T count_star():20|D 2|C SELECT 1|");
  ASSERT_RUN_ON(other, "INSERT INTO ducklake_d VALUES (3)", "C INSERT 0 1|");
  ASSERT_RUN(f, count, "T count_star():20|D 2|C SELECT 1|");
  ASSERT_RUN(f, "COMMIT", "C COMMIT|");
  ASSERT_RUN(f, "BEGIN; SELECT count(*) FROM ducklake_d; COMMIT; BEGIN; ROLLBACK",
             "C BEGIN|T count_star():20|D 3|C SELECT 1|C COMMIT|C BEGIN|C ROLLBACK|");
  sql_prepared *sel;
  assert_int_equal(sql_session_prepare(f->s, count, 0, NULL, &sel, &err), MR_OK);
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  char *got = execute(f, sel);
  assert_string_equal(got, "D 3|C SELECT 1|");
  free(got);
  ASSERT_RUN_ON(other, "INSERT INTO ducklake_d VALUES (4)", "C INSERT 0 1|");
  got = execute(f, sel);
  assert_string_equal(got, "D 3|C SELECT 1|");
  free(got);
  ASSERT_RUN(f, "COMMIT", "C COMMIT|");
  got = execute(f, sel);
  assert_string_equal(got, "D 4|C SELECT 1|");
  free(got);
  sql_prepared_free(sel);
  /* a write's COMMIT is durable and everyone's when it is answered */
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  ASSERT_RUN(f, "INSERT INTO ducklake_d VALUES (5)", "C INSERT 0 1|");
  ASSERT_RUN(f, "COMMIT", "C COMMIT|");
  assert_null(sql_session_settle(f->s));
  ASSERT_RUN_ON(other, count, "T count_star():20|D 5|C SELECT 1|");
  /* an aborted block still rolls back; a session closes with a COMMIT
   * left to settle (teardown) */
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  got = run(f, "SELECT nope");
  assert_non_null(strstr(got, "ERR 42703"));
  free(got);
  ASSERT_RUN(f, "COMMIT", "C ROLLBACK|");
  ASSERT_RUN(f, "BEGIN; SELECT 1; COMMIT", "C BEGIN|T 1:23|D 1|C SELECT 1|C COMMIT|");
  sql_session_close(other);
}

/* A closed session is kept for the next client with its statement caches
 * (sql_internal.h, engine->idle), and with nothing else of its client's:
 * no transaction or its writes, GUC, role, user or client statement; a
 * session that ever had a temporary table is not kept at all. */
static void a_closed_session_is_kept_warm_and_clean(void **state) {
  fixture *f = *state;
  sql_error err;
  PRELOAD(f, "CREATE TABLE public.ducklake_w (a INTEGER)");
  const char *q = "SELECT count(*) FROM ducklake_w";
  ASSERT_RUN(f, q, "T count_star():20|D 0|C SELECT 1|");
  ASSERT_RUN(f, "SET application_name = 'first'", "C SET|");
  ASSERT_RUN(f, "BEGIN", "C BEGIN|");
  ASSERT_RUN(f, "INSERT INTO ducklake_w VALUES (1)", "C INSERT 0 1|");
  sql_prepared *p;
  assert_int_equal(sql_session_prepare(f->s, "SELECT a FROM ducklake_w", 0, NULL, &p, &err), MR_OK);
  sql_session_set_read_only_role(f->s, true);
  sql_session *first = f->s;
  uint64_t plan_hits = first->plans.hits;
  sql_session_close(f->s); /* p goes with it, as the protocol layer expects */
  assert_int_equal(f->e->nidle, 1);

  assert_int_equal(sql_session_open(f->e, "second", "lake", &f->s, &err), MR_OK);
  assert_ptr_equal(f->s, first);
  assert_int_equal(f->e->nidle, 0);
  assert_int_equal(sql_session_status(f->s), 'I');
  assert_string_equal(sql_session_guc(f->s, "application_name"), "");
  assert_string_equal(sql_session_guc(f->s, "session_authorization"), "second");
  ASSERT_RUN(f, q, "T count_star():20|D 0|C SELECT 1|"); /* the open write was rolled back */
  assert_int_equal(f->s->plans.hits, plan_hits + 1);      /* admitted by the first client */
  ASSERT_RUN(f, "INSERT INTO ducklake_w VALUES (2)", "C INSERT 0 1|"); /* no read role now */

  /* the roles are checked at each run, not at admission: a reader handed
   * the writer's session, with that INSERT cached, still may not write */
  sql_session_close(f->s);
  assert_int_equal(sql_session_open(f->e, "reader", "lake", &f->s, &err), MR_OK);
  sql_session_set_read_only_role(f->s, true);
  char *got = run(f, "INSERT INTO ducklake_w VALUES (2)");
  assert_non_null(strstr(got, "ERR 42501"));
  free(got);
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_w", "T count_star():20|D 1|C SELECT 1|");
  sql_session_set_read_only_role(f->s, false); /* the fixture's session writes again */

  /* a temporary table: the session is closed for good, never handed on */
  ASSERT_RUN(f, "CREATE TEMP TABLE scratch (x INTEGER)", "C CREATE TABLE|");
  sql_session_close(f->s);
  assert_int_equal(f->e->nidle, 0);
  assert_int_equal(sql_session_open(f->e, "third", "lake", &f->s, &err), MR_OK);
  duckdb_result r; /* the planner would refuse the name: ask DuckDB itself */
  assert_int_equal(duckdb_query(f->s->con, "SELECT * FROM temp.main.scratch", &r), DuckDBError);
  duckdb_destroy_result(&r);
  assert_int_equal(f->s->plans.hits, 0);

  /* the engine keeps a few, not every session a burst of clients opened */
  sql_session *many[SQL_ENGINE_IDLE_SESSIONS + 2];
  for (size_t i = 0; i < SQL_ENGINE_IDLE_SESSIONS + 2; i++)
    assert_int_equal(sql_session_open(f->e, "u", "lake", &many[i], &err), MR_OK);
  for (size_t i = 0; i < SQL_ENGINE_IDLE_SESSIONS + 2; i++)
    sql_session_close(many[i]);
  assert_int_equal(f->e->nidle, SQL_ENGINE_IDLE_SESSIONS);
}

static void bytea_literals_follow_the_column_type(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_s (v VARCHAR, b BYTEA)");
  ASSERT_RUN(f, "INSERT INTO ducklake_s VALUES ('\\x01\\x02', '\\x6f6e65')", "C INSERT 0 1|");
  ASSERT_RUN(f, "SELECT v, b, octet_length(b::BLOB) AS n FROM ducklake_s",
             "T v:1043,b:17,n:20|D \\x01\\x02,\\x6f6e65,3|C SELECT 1|");
}

static void introspection_answers(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_intro (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ, n DECIMAL(10,2), "
                "b BYTEA NOT NULL, UNIQUE (ts, n))");
  ASSERT_RUN(f,
             "SELECT attname, pg_type.typname, atttypmod, attnum, attnotnull FROM pg_class "
             "JOIN pg_namespace ON relnamespace = pg_namespace.oid "
             "JOIN pg_attribute ON pg_class.oid=pg_attribute.attrelid "
             "JOIN pg_type ON atttypid=pg_type.oid "
             "JOIN pg_catalog.pg_namespace type_ns ON pg_type.typnamespace = type_ns.oid "
             "WHERE relname = 'ducklake_intro' AND pg_namespace.nspname IN ('public') ORDER BY attnum",
             "T attname:1043,typname:1043,atttypmod:23,attnum:21,attnotnull:16|"
             "D id,int8,-1,1,t|D ts,timestamptz,-1,2,f|D n,numeric,655366,3,f|D b,bytea,-1,4,t|"
             "C SELECT 4|");
  ASSERT_RUN(f,
             "SELECT contype, conkey FROM pg_class JOIN pg_constraint ON "
             "(pg_class.oid=pg_constraint.conrelid) WHERE relname = 'ducklake_intro' AND contype IN ('p','u') "
             "ORDER BY contype",
             "T contype:1043,conkey:1043|D p,{1}|D u,{2,3}|C SELECT 2|");
  ASSERT_RUN(f, "SELECT relpages FROM pg_class WHERE relname = 'ducklake_intro'",
             "T relpages:23|D 0|C SELECT 1|");
  ASSERT_RUN(f, "SELECT to_regclass('duckdb_secrets'), to_regclass('ducklake_intro')",
             "T to_regclass('duckdb_secrets'):1043,to_regclass('ducklake_intro'):1043|D NULL,ducklake_intro|C SELECT 1|");
  ASSERT_RUN(f, "SELECT COUNT(*) FROM pg_settings WHERE name LIKE 'rds%'",
             "T count_star():20|D 0|C SELECT 1|");
}

/* The relation directory behind pg_class / pg_attribute (sql_relcache.h):
 * a session's CREATE and DROP are its own until it commits, a rollback
 * forgets them, a pre-load re-read keeps every oid. */
#define LAYOUT_Q(t)                                                                                \
  "SELECT attname, atttypid, atttypmod, attnum FROM pg_class JOIN pg_attribute "                   \
  "ON pg_class.oid = pg_attribute.attrelid WHERE relname = '" t "' ORDER BY attnum"
#define OID_Q(t) "SELECT oid FROM pg_class WHERE relname = '" t "'"

static void relations_follow_ddl(void **state) {
  fixture *f = *state;
  hook_log h = {0};
  sql_commit_hooks hooks = {&h, h_prepare, h_finished, known_any, NULL};
  sql_engine_set_commit_hooks(f->e, &hooks);
  sql_session *other;
  sql_error err;
  assert_int_equal(sql_session_open(f->e, "u", "lake", &other, &err), MR_OK);
  const char *none = "T attname:1043,atttypid:20,atttypmod:23,attnum:21|C SELECT 0|";
  const char *two = "T attname:1043,atttypid:20,atttypmod:23,attnum:21|"
                    "D a,23,-1,1|D d,1700,589830,2|C SELECT 2|";

  ASSERT_RUN(f, "BEGIN; CREATE TABLE ducklake_rel (a INTEGER, d DECIMAL(9,2))",
             "C BEGIN|C CREATE TABLE|");
  ASSERT_RUN(f, LAYOUT_Q("ducklake_rel"), two);   /* its own transaction sees it */
  ASSERT_RUN_ON(other, LAYOUT_Q("ducklake_rel"), none); /* nobody else yet */
  ASSERT_RUN(f, "ROLLBACK", "C ROLLBACK|");
  ASSERT_RUN(f, LAYOUT_Q("ducklake_rel"), none);

  ASSERT_RUN(f, "BEGIN; CREATE TABLE ducklake_rel (a INTEGER, d DECIMAL(9,2)); COMMIT",
             "C BEGIN|C CREATE TABLE|C COMMIT|");
  ASSERT_RUN_ON(other, LAYOUT_Q("ducklake_rel"), two);
  ASSERT_RUN_ON(other, "SELECT to_regclass('ducklake_rel'), to_regclass('public.ducklake_rel')",
                "T to_regclass('ducklake_rel'):1043,to_regclass('public.ducklake_rel'):1043|"
                "D ducklake_rel,ducklake_rel|C SELECT 1|");
  char *oid = run(f, OID_Q("ducklake_rel"));
  /* re-created IF NOT EXISTS: the same relation */
  ASSERT_RUN(f, "CREATE TABLE IF NOT EXISTS ducklake_rel (a INTEGER, d DECIMAL(9,2))",
             "C CREATE TABLE|");
  char *again = run_on(other, OID_Q("ducklake_rel"));
  assert_string_equal(again, oid);
  free(again);
  /* a pre-load re-read of every table keeps the oid */
  PRELOAD(f, "CREATE TABLE public.ducklake_rel_other (x VARCHAR NOT NULL)");
  again = run_on(other, OID_Q("ducklake_rel"));
  assert_string_equal(again, oid);
  free(again);
  ASSERT_RUN_ON(other, LAYOUT_Q("ducklake_rel_other"),
                "T attname:1043,atttypid:20,atttypmod:23,attnum:21|D x,1043,-1,1|C SELECT 1|");
  free(oid);

  /* names that need quoting, NOT NULL and a key, read in the session's
   * transaction and again by a re-read after a pre-load */
  ASSERT_RUN(f, "CREATE SCHEMA \"'q' s \"\"x\"\"\"", "C CREATE SCHEMA|");
  ASSERT_RUN(f,
             "CREATE TABLE \"'q' s \"\"x\"\"\".ducklake_qq "
             "(id BIGINT PRIMARY KEY, a VARCHAR NOT NULL, b INTEGER)",
             "C CREATE TABLE|");
  const char *quoted_q =
      "SELECT attname, attnotnull, atthasdef FROM pg_class "
      "JOIN pg_namespace ON relnamespace = pg_namespace.oid "
      "JOIN pg_attribute ON pg_class.oid = pg_attribute.attrelid "
      "WHERE nspname = '''q'' s \"x\"' AND relname = 'ducklake_qq' ORDER BY attnum";
  const char *quoted_want = "T attname:1043,attnotnull:16,atthasdef:16|"
                            "D id,t,f|D a,t,f|D b,f,f|C SELECT 3|";
  ASSERT_RUN_ON(other, quoted_q, quoted_want);
  PRELOAD(f, "CREATE TABLE public.ducklake_rel_third (x INTEGER)");
  ASSERT_RUN_ON(other, quoted_q, quoted_want);

  /* a dropped table leaves pg_class at its commit */
  PRELOAD(f, "CREATE TABLE public.ducklake_table (table_id BIGINT); "
             "INSERT INTO public.ducklake_table VALUES (7)");
  ASSERT_RUN(f,
             "CREATE TABLE ducklake_inlined_data_7_1 (row_id BIGINT, begin_snapshot BIGINT, "
             "end_snapshot BIGINT, v VARCHAR)",
             "C CREATE TABLE|");
  ASSERT_RUN_ON(other, "SELECT relnatts FROM pg_class WHERE relname = 'ducklake_inlined_data_7_1'",
                "T relnatts:21|D 4|C SELECT 1|");
  ASSERT_RUN(f, "BEGIN; DROP TABLE ducklake_inlined_data_7_1",
             "C BEGIN|C DROP TABLE|");
  ASSERT_RUN(f, "SELECT count(*) FROM pg_class WHERE relname = 'ducklake_inlined_data_7_1'",
             "T count_star():20|D 0|C SELECT 1|");
  ASSERT_RUN_ON(other, "SELECT count(*) FROM pg_class WHERE relname = 'ducklake_inlined_data_7_1'",
                "T count_star():20|D 1|C SELECT 1|");
  ASSERT_RUN(f, "COMMIT", "C COMMIT|");
  ASSERT_RUN_ON(other, "SELECT count(*) FROM pg_class WHERE relname = 'ducklake_inlined_data_7_1'",
                "T count_star():20|D 0|C SELECT 1|");
  /* the directory's table functions serve the views, never a client */
  char *direct = run(f, "SELECT * FROM moraine_pg_attribute()");
  assert_non_null(strstr(direct, "ERR 42501"));
  free(direct);
  direct = run(f, "SELECT oid FROM moraine_pg_class()");
  assert_non_null(strstr(direct, "ERR 42501"));
  free(direct);
  sql_session_close(other);
  sql_engine_set_commit_hooks(f->e, NULL);
  sql_strbuf_free(&h.seen);
}

/* A re-read running on another thread (the engine's warm-up after a load)
 * holds a client statement until it is published: a statement arriving
 * mid-read once took the set being replaced and answered pg_class without
 * the tables the load had just created (DuckLake then saw no
 * ducklake_metadata and tried to create a new lake on an existing one). */
typedef struct reread_arg {
  sql_engine *e;
  atomic_bool started;
} reread_arg;

static void *reread(void *arg) {
  reread_arg *a = arg;
  sql_error err;
  atomic_store(&a->started, true);
  if (sql_relcache_refresh(a->e->relcache, a->e->relcache_con, &err) != MR_OK)
    return arg;
  return NULL;
}

static void a_statement_waits_for_a_reread_in_flight(void **state) {
  fixture *f = *state;
  sql_strbuf many = {0};
  for (int i = 0; i < 1000; i++)
    sql_strbuf_addf(&many, "CREATE TABLE public.ducklake_bulk_%d (a BIGINT, b VARCHAR, c DOUBLE);",
                    i);
  char *sql = sql_strbuf_take(&many);
  PRELOAD(f, sql);
  free(sql);
  for (int round = 0; round < 20; round++) {
    char create[96], want[96];
    snprintf(create, sizeof create, "CREATE TABLE public.ducklake_round_%d (a INTEGER)", round);
    PRELOAD(f, create); /* marks the directory stale */
    pthread_t t;
    reread_arg a = {f->e, false};
    assert_int_equal(pthread_create(&t, NULL, reread, &a), 0);
    while (!atomic_load(&a.started))
      sched_yield();
    /* into its read of ~1,000 tables (the window, not a timed assertion) */
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    snprintf(want, sizeof want, "T count_star():20|D %d|C SELECT 1|", round + 1);
    ASSERT_RUN(f, "SELECT count(*) FROM pg_class WHERE relname LIKE 'ducklake_round_%'", want);
    void *failed;
    assert_int_equal(pthread_join(t, &failed), 0);
    assert_null(failed);
  }
}

/* pg_attribute's type of every column is the type a SELECT of that column
 * describes (two independent paths: DuckDB's type name, and the result's
 * logical type), and its names, positions, NOT NULL and defaults are
 * DuckDB's own. */
/* Rows of sql on the engine's own connection, as the sink logs them. */
static char *engine_rows(fixture *f, const char *sql) {
  duckdb_result r;
  assert_int_equal(duckdb_query(f->e->admin, sql, &r), DuckDBSuccess);
  sql_strbuf b = {0};
  for (idx_t i = 0; i < duckdb_row_count(&r); i++) {
    sql_strbuf_add(&b, "|D ");
    for (idx_t c = 0; c < duckdb_column_count(&r); c++) {
      char *v = duckdb_value_varchar(&r, c, i);
      sql_strbuf_addf(&b, "%s%s", c ? "," : "", v ? v : "NULL");
      duckdb_free(v);
    }
  }
  sql_strbuf_add(&b, "|");
  duckdb_destroy_result(&r);
  return sql_strbuf_take(&b);
}

static void relations_agree_with_the_engine(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_every (b BOOLEAN NOT NULL, t TINYINT, s SMALLINT, "
             "i INTEGER DEFAULT 4, g BIGINT, ut UTINYINT, us USMALLINT, ui UINTEGER, ub UBIGINT, "
             "h HUGEINT, uh UHUGEINT, fl FLOAT, db DOUBLE, d1 DECIMAL(4,1), d2 DECIMAL(18,3), "
             "d3 DECIMAL(38,10), v VARCHAR, bl BLOB, dt DATE, tm TIME, ts TIMESTAMP, "
             "tz TIMESTAMPTZ, iv INTERVAL, u UUID, l VARCHAR[], st STRUCT(k VARCHAR, v INT), "
             "ba BYTEA, js JSON, \"Mixed Case\" INTEGER)");
  char *cols = run(f, "SELECT attname, atttypid, attnotnull, atthasdef FROM pg_class "
                      "JOIN pg_attribute ON pg_class.oid = pg_attribute.attrelid "
                      "WHERE relname = 'ducklake_every' ORDER BY attnum");
  /* DuckDB's own view, read on the engine's pre-load connection: a client
   * may not call duckdb_columns() */
  char *want = engine_rows(f, "SELECT column_name, "
                              "CASE WHEN is_nullable THEN 'f' ELSE 't' END, "
                              "CASE WHEN column_default IS NULL THEN 'f' ELSE 't' END "
                              "FROM duckdb_columns() WHERE table_name = 'ducklake_every' "
                              "ORDER BY column_index");
  char *star = run(f, "SELECT * FROM ducklake_every");
  /* the row description of SELECT * names each column with its OID */
  const char *p = strchr(star, ' ') + 1, *w = strstr(want, "|D ");
  const char *c = strstr(cols, "|D ");
  int n = 0;
  while (c && w) {
    char name[64], oid[16], nn[8], hd[8], wname[64], wnn[8], whd[8], tname[64], toid[16];
    assert_int_equal(sscanf(c, "|D %63[^,],%15[^,],%7[^,],%7[^|]", name, oid, nn, hd), 4);
    assert_int_equal(sscanf(w, "|D %63[^,],%7[^,],%7[^|]", wname, wnn, whd), 3);
    assert_int_equal(sscanf(p, "%63[^:]:%15[^,|]", tname, toid), 2);
    assert_string_equal(name, wname);
    assert_string_equal(nn, wnn);
    assert_string_equal(hd, whd);
    assert_string_equal(name, tname);
    assert_string_equal(oid, toid);
    p = strpbrk(p, ",|") + 1;
    c = strstr(c + 1, "|D ");
    w = strstr(w + 1, "|D ");
    n++;
  }
  assert_null(c);
  assert_null(w);
  assert_int_equal(n, 29);
  free(cols);
  free(want);
  free(star);
}

/* ---- exact PGCOPY bytes ---- */
static void be(sql_strbuf *b, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--)
    sql_strbuf_add_u8(b, (uint8_t)(v >> (8 * i)));
}

static void pgcopy_every_type(void **state) {
  fixture *f = *state;
  rec r = {0};
  sql_sink sink = sink_for(&r);
  sql_error err;
  const char *q =
      "COPY (SELECT true, -3::SMALLINT, 7::INTEGER, 1::BIGINT, 2.5::REAL, 1.5::DOUBLE, 'x', "
      "'\\x00ff'::BYTEA, DATE '2000-01-02', TIMESTAMP '2000-01-01 00:00:01', "
      "TIMESTAMPTZ '2000-01-01 00:00:00+00', UUID '00010203-0405-0607-0809-0a0b0c0d0e0f', "
      "INTERVAL '1 month 3 days 1 second', 12.345::DECIMAL(10,3), TIME '00:00:01', NULL::BIGINT, "
      "'{\"a\":1}'::JSON, 5::UTINYINT, ARRAY[1, 2]) TO STDOUT (FORMAT binary)";
  assert_int_equal(sql_session_simple_query(f->s, q, &sink, &err), MR_OK);
  sql_strbuf w = {0};
  sql_strbuf_addn(&w, "PGCOPY\n\377\r\n\0", 11);
  be(&w, 0, 4);
  be(&w, 0, 4);
  be(&w, 19, 2);
  be(&w, 1, 4), be(&w, 1, 1);                                  /* bool */
  be(&w, 2, 4), be(&w, (uint16_t)-3, 2);                       /* int2 */
  be(&w, 4, 4), be(&w, 7, 4);                                  /* int4 */
  be(&w, 8, 4), be(&w, 1, 8);                                  /* int8 */
  be(&w, 4, 4), be(&w, 0x40200000, 4);                         /* float4 2.5 */
  be(&w, 8, 4), be(&w, 0x3FF8000000000000ull, 8);              /* float8 1.5 */
  be(&w, 1, 4), sql_strbuf_add(&w, "x");                       /* text */
  be(&w, 2, 4), sql_strbuf_addn(&w, "\x00\xff", 2);            /* bytea */
  be(&w, 4, 4), be(&w, 1, 4);                                  /* date: 1 day after 2000 */
  be(&w, 8, 4), be(&w, 1000000, 8);                            /* timestamp */
  be(&w, 8, 4), be(&w, 0, 8);                                  /* timestamptz */
  be(&w, 16, 4);                                               /* uuid */
  for (int i = 0; i < 16; i++)
    sql_strbuf_add_u8(&w, (uint8_t)i);
  be(&w, 16, 4), be(&w, 1000000, 8), be(&w, 3, 4), be(&w, 1, 4); /* interval */
  be(&w, 12, 4), be(&w, 2, 2), be(&w, 0, 2), be(&w, 0, 2), be(&w, 3, 2), be(&w, 12, 2),
      be(&w, 3450, 2);                                         /* numeric 12.345 */
  be(&w, 8, 4), be(&w, 1000000, 8);                            /* time */
  be(&w, 0xFFFFFFFF, 4);                                       /* NULL */
  be(&w, 7, 4), sql_strbuf_add(&w, "{\"a\":1}");                 /* json */
  be(&w, 2, 4), be(&w, 5, 2);                                  /* utinyint as int2 */
  be(&w, 6, 4), sql_strbuf_add(&w, "[1, 2]");                  /* no binary layout: text */
  be(&w, 0xFFFF, 2);                                           /* trailer */
  assert_int_equal(r.copy.len, w.len);
  assert_memory_equal(r.copy.data, w.data, w.len);
  assert_non_null(strstr(r.log.data, "H 1 19|c|C COPY 1|"));
  sql_strbuf_free(&w);
  sql_strbuf_free(&r.copy);
  sql_strbuf_free(&r.log);

  /* the header is sent even for an empty result */
  rec e = {0};
  sink = sink_for(&e);
  assert_int_equal(sql_session_simple_query(f->s, "COPY (SELECT 1 WHERE false) TO STDOUT (FORMAT binary)",
                                            &sink, &err),
                   MR_OK);
  assert_int_equal(e.copy.len, 11 + 8 + 2);
  assert_memory_equal(e.copy.data + 19, "\xff\xff", 2);
  sql_strbuf_free(&e.copy);
  sql_strbuf_free(&e.log);
}

static void ctid_round_trip(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_c (a INT)");
  ASSERT_RUN(f, "INSERT INTO ducklake_c VALUES (10), (11), (12)", "C INSERT 0 3|");
  ASSERT_RUN(f, "SELECT a, ctid FROM ducklake_c ORDER BY a", "T a:23,ctid:27|D 10,(0,0)|D 11,(0,1)|D 12,(0,2)|C SELECT 3|");
  ASSERT_RUN(f, "DELETE FROM ducklake_c WHERE ctid IN ('(0,1)')", "C DELETE 1|");
  ASSERT_RUN(f, "SELECT a FROM ducklake_c ORDER BY a", "T a:23|D 10|D 12|C SELECT 2|");
}

/* Rows from 32768 on: the offset wraps at 2^15, never into the sign bit the
 * postgres extension reads (DuckLake's expiry of 100,000 snapshots deletes
 * by ctid far past it). */
static void ctid_past_one_block(void **state) {
  fixture *f = *state;
  PRELOAD(f, "CREATE TABLE public.ducklake_d (a INT)");
  PRELOAD(f, "INSERT INTO public.ducklake_d SELECT range FROM range(32770)");
  ASSERT_RUN(f, "SELECT a, ctid FROM ducklake_d WHERE a >= 32767 ORDER BY a",
             "T a:23,ctid:27|D 32767,(0,32767)|D 32768,(1,0)|D 32769,(1,1)|C SELECT 3|");
  ASSERT_RUN(f, "DELETE FROM ducklake_d WHERE ctid IN ('(1,0)', '(0,32767)')", "C DELETE 2|");
  ASSERT_RUN(f, "SELECT a FROM ducklake_d WHERE a >= 32766 ORDER BY a",
             "T a:23|D 32766|D 32769|C SELECT 2|");
  /* an offset no row of ours has is refused, and deletes nothing */
  char *got = run(f, "DELETE FROM ducklake_d WHERE ctid IN ('(0,40000)')");
  assert_non_null(strstr(got, "ERR 22P02 "));
  free(got);
  ASSERT_RUN(f, "SELECT count(*) FROM ducklake_d", "T count_star():20|D 32768|C SELECT 1|");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(preload_then_query, setup, teardown),
      cmocka_unit_test_setup_teardown(memory_engine_never_checkpoints_in_a_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(capture_and_hooks, setup, teardown),
      cmocka_unit_test_setup_teardown(captured_text_is_the_engines_cast, setup, teardown),
      cmocka_unit_test_setup_teardown(transaction_states, setup, teardown),
      cmocka_unit_test_setup_teardown(deferred_ends_keep_transactions_whole, setup, teardown),
      cmocka_unit_test_setup_teardown(uncapturable_changes_are_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(extended_reads_outside_a_block_open_none, setup, teardown),
      cmocka_unit_test_setup_teardown(deallocate_and_discard_reach_the_protocol_layer, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(kept_statements_see_new_rows, setup, teardown),
      cmocka_unit_test_setup_teardown(closed_statements_are_kept_until_ddl, setup, teardown),
      cmocka_unit_test_setup_teardown(a_closed_session_is_kept_warm_and_clean, setup, teardown),
      cmocka_unit_test_setup_teardown(bytea_literals_follow_the_column_type, setup, teardown),
      cmocka_unit_test_setup_teardown(introspection_answers, setup, teardown),
      cmocka_unit_test_setup_teardown(relations_follow_ddl, setup, teardown),
      cmocka_unit_test_setup_teardown(relations_agree_with_the_engine, setup, teardown),
      cmocka_unit_test_setup_teardown(a_statement_waits_for_a_reread_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(pgcopy_every_type, setup, teardown),
      cmocka_unit_test_setup_teardown(ctid_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(ctid_past_one_block, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
