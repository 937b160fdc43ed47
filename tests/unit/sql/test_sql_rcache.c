/* test_sql_rcache.c — the result cache (sql_rcache.h): the table itself
 * (generations, the byte budget, least recently used eviction, an entry
 * held across its eviction), and the cache inside a real engine: a pure
 * binary COPY, or a pure SELECT, is answered again without DuckDB until the
 * rows change, and
 * never when the answer could differ — after a commit, a pre-load, inside
 * a transaction older than the rows, with temporary tables, with a
 * SESSION function — nor kept when too large or abandoned by its client;
 * and a reader racing a writer never gets a row count older than the last
 * acknowledged commit. pg_catalog reads are kept until DDL changes the
 * tables, and a reader counting tables while a writer creates them never
 * falls behind. Refresh ahead
 * (sql_refresh.h): the reads a writer repeats are kept again after its
 * commit, one-off reads are not, and a reader racing a refreshing writer
 * still never goes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql.h"
#include "sql/sql_internal.h" /* the engine's cache, for its counters */
#include "sql/sql_rcache.h"
#include "sql/sql_util.h"

/* ---- the table ---- */

static uint8_t *bytes_of(const char *text, size_t *len) {
  *len = strlen(text);
  uint8_t *b = malloc(*len);
  assert_non_null(b);
  memcpy(b, text, *len);
  return b;
}

static size_t *one_chunk(size_t len) {
  size_t *c = malloc(sizeof *c);
  assert_non_null(c);
  *c = len;
  return c;
}

static bool put_text(sql_rcache *c, const char *key, uint64_t gen, const char *text) {
  size_t len;
  uint8_t *b = bytes_of(text, &len);
  return sql_rcache_put(c, SQL_ANSWER_COPY_BINARY, key, gen, b, len, one_chunk(len), 1, 1, 1);
}

static bool holds(sql_rcache *c, const char *key, uint64_t gen, const char *text) {
  const sql_rentry *e = sql_rcache_get(c, SQL_ANSWER_COPY_BINARY, key, gen);
  if (e == NULL)
    return false;
  bool same = e->len == strlen(text) && memcmp(e->bytes, text, e->len) == 0;
  sql_rcache_release(c, e);
  assert_true(same);
  return true;
}

static void table_keeps_one_generation(void **state) {
  (void)state;
  assert_null(sql_rcache_new(0));
  sql_rcache *c = sql_rcache_new(1 << 20);
  assert_non_null(c);
  assert_true(put_text(c, "q1", 2, "answer one"));
  assert_true(put_text(c, "q2", 2, "answer two"));
  assert_true(holds(c, "q1", 2, "answer one"));
  assert_false(holds(c, "q3", 2, "none"));
  /* the same read again: the newer answer replaces the older */
  assert_true(put_text(c, "q1", 2, "answer one, again"));
  assert_true(holds(c, "q1", 2, "answer one, again"));
  /* a newer generation empties the table; an older one is never kept */
  assert_false(holds(c, "q2", 3, "answer two"));
  assert_false(put_text(c, "q2", 2, "late answer"));
  assert_false(holds(c, "q2", 3, "late answer"));
  sql_rcache_stats st;
  sql_rcache_stats_get(c, &st);
  assert_int_equal(st.entries, 0);
  assert_int_equal(st.bytes, 0);
  assert_int_equal(st.hits, 2);
  sql_rcache_free(c);
}

static void table_stays_within_its_budget(void **state) {
  (void)state;
  sql_rcache *c = sql_rcache_new(16 * 1024); /* one entry may take 2 KiB */
  char big[4096];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_false(put_text(c, "too big", 1, big));
  char text[1201];
  memset(text, 'y', sizeof text - 1);
  text[sizeof text - 1] = '\0';
  char key[32];
  for (int i = 0; i < 40; i++) {
    snprintf(key, sizeof key, "q%d", i);
    assert_true(put_text(c, key, 1, text));
    assert_true(holds(c, "q0", 1, text)); /* used every time: never the oldest */
    sql_rcache_stats st;
    sql_rcache_stats_get(c, &st);
    assert_true(st.bytes <= 16 * 1024);
  }
  assert_true(holds(c, "q39", 1, text));
  assert_false(holds(c, "q1", 1, text)); /* the least recently used went first */
  sql_rcache_free(c);
}

static void held_entry_outlives_its_eviction(void **state) {
  (void)state;
  sql_rcache *c = sql_rcache_new(1 << 20);
  assert_true(put_text(c, "q", 5, "kept bytes"));
  const sql_rentry *e = sql_rcache_get(c, SQL_ANSWER_COPY_BINARY, "q", 5);
  assert_non_null(e);
  /* the same text as another kind of answer is another entry */
  assert_null(sql_rcache_get(c, SQL_ANSWER_SELECT, "q", 5));
  assert_false(sql_rcache_has(c, SQL_ANSWER_SELECT, "q", 5));
  assert_true(sql_rcache_has(c, SQL_ANSWER_COPY_BINARY, "q", 5));
  assert_null(sql_rcache_get(c, SQL_ANSWER_COPY_BINARY, "q", 6)); /* drops it from the table */
  assert_memory_equal(e->bytes, "kept bytes", 10);
  sql_rcache_release(c, e); /* frees it (ASan / valgrind see a leak otherwise) */
  sql_rcache_free(c);
}

/* ---- in an engine ---- */

typedef struct copy_sink {
  sql_strbuf bytes;
  size_t chunks;
} copy_sink;

static int cs_begin(void *c, bool binary, size_t n) {
  (void)c, (void)n;
  return binary ? 0 : 1;
}
static int cs_data(void *c, const uint8_t *d, size_t n) {
  copy_sink *s = c;
  sql_strbuf_addn(&s->bytes, d, n);
  s->chunks++;
  return 0;
}
static int cs_other(void *c) {
  (void)c;
  return 0;
}
static int cs_complete(void *c, const char *tag) {
  (void)c, (void)tag;
  return 0;
}
static int cs_rowdesc(void *c, size_t n, const sql_column *cols) {
  (void)c, (void)n, (void)cols;
  return 0;
}
static int cs_row(void *c, size_t n, const char *const *v, const size_t *l) {
  (void)c, (void)n, (void)v, (void)l;
  return 0;
}

static void run_ok(sql_session *s, const char *sql, copy_sink *out) {
  copy_sink scratch = {0};
  copy_sink *cs = out ? out : &scratch;
  sql_sink sink = {.ctx = cs,
                   .row_description = cs_rowdesc,
                   .data_row = cs_row,
                   .command_complete = cs_complete,
                   .copy_out_begin = cs_begin,
                   .copy_data = cs_data,
                   .copy_done = cs_other};
  sql_error err;
  if (sql_session_simple_query(s, sql, &sink, &err) != MR_OK)
    fail_msg("%s: %s %s", sql, err.sqlstate, err.base.msg);
  sql_strbuf_free(&scratch.bytes);
}

static int64_t be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | p[i];
  return (int64_t)v;
}

/* The one row of two BIGINTs a PGCOPY stream holds: header (19 bytes),
 * field count, then length + value per field, then the trailer. */
static void two_bigints(const copy_sink *cs, int64_t *a, int64_t *b) {
  const uint8_t *p = (const uint8_t *)cs->bytes.data;
  assert_int_equal(cs->bytes.len, 19 + 2 + 2 * (4 + 8) + 2);
  assert_int_equal(p[19] << 8 | p[20], 2);
  *a = be64(p + 21 + 4);
  *b = be64(p + 21 + 4 + 8 + 4);
}

/* count(*) and max(id) of ducklake_t as session s reads them now. */
#define READ_T "COPY (SELECT count(*), max(id) FROM public.ducklake_t) TO STDOUT (FORMAT binary)"
static void read_t(sql_session *s, int64_t *count, int64_t *max) {
  copy_sink cs = {0};
  run_ok(s, READ_T, &cs);
  two_bigints(&cs, count, max);
  sql_strbuf_free(&cs.bytes);
}

typedef struct fixture {
  sql_engine *e;
  sql_session *s1, *s2;
} fixture;

static int setup_with(void **state, bool refresh_ahead) {
  fixture *f = calloc(1, sizeof *f);
  sql_error err;
  sql_engine_options o = {.server_version = "15.0 (moraine test)",
                          .result_cache_bytes = 1 << 20,
                          .refresh_ahead = refresh_ahead};
  if (sql_engine_open(&o, &f->e, &err) != MR_OK ||
      sql_engine_exec(f->e, "CREATE TABLE public.ducklake_t (id BIGINT)", &err) != MR_OK ||
      sql_engine_exec(f->e, "INSERT INTO public.ducklake_t VALUES (1), (2)", &err) != MR_OK ||
      sql_session_open(f->e, "u", "lake", &f->s1, &err) != MR_OK ||
      sql_session_open(f->e, "u", "lake", &f->s2, &err) != MR_OK) {
    fprintf(stderr, "setup: %s\n", err.base.msg);
    return -1;
  }
  *state = f;
  return 0;
}

static int setup(void **state) {
  return setup_with(state, false);
}

static int setup_refresh(void **state) {
  return setup_with(state, true);
}

static int teardown(void **state) {
  fixture *f = *state;
  sql_session_close(f->s1);
  sql_session_close(f->s2);
  sql_engine_close(f->e);
  free(f);
  return 0;
}

static sql_rcache_stats stats(fixture *f) {
  sql_rcache_stats st;
  sql_rcache_stats_get(f->e->rcache, &st);
  return st;
}

static void read_is_kept_until_a_commit(void **state) {
  fixture *f = *state;
  int64_t n, m;
  read_t(f->s1, &n, &m);
  assert_int_equal(n, 2);
  assert_int_equal(m, 2);
  sql_rcache_stats before = stats(f);
  copy_sink again = {0}, first = {0};
  run_ok(f->s2, READ_T, &again); /* another session: the same answer, kept */
  assert_int_equal(stats(f).hits, before.hits + 1);
  run_ok(f->s2, "COPY (SELECT count(*), max(id) FROM public.ducklake_t)  TO STDOUT (FORMAT binary)",
         &first); /* another text: run, and equal byte for byte */
  assert_int_equal(again.bytes.len, first.bytes.len);
  assert_memory_equal(again.bytes.data, first.bytes.data, first.bytes.len);
  run_ok(f->s2, "INSERT INTO public.ducklake_t VALUES (7)", NULL);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, 3);
  assert_int_equal(m, 7);
  sql_strbuf_free(&again.bytes);
  sql_strbuf_free(&first.bytes);
}

static void preload_moves_the_rows_on(void **state) {
  fixture *f = *state;
  int64_t n0, m0, n, m;
  read_t(f->s1, &n0, &m0);
  read_t(f->s1, &n, &m); /* kept */
  sql_value v = SQL_VALUE_TEXT("100", 3);
  sql_error err;
  assert_int_equal(sql_engine_load_rows(f->e, "public", "ducklake_t", 1, 1, &v, &err), MR_OK);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, n0 + 1);
  assert_int_equal(m, 100);
  assert_int_equal(sql_engine_exec_data(f->e, "DELETE FROM public.ducklake_t WHERE id = 100", &err),
                   MR_OK);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, n0);
  assert_int_equal(m, m0);
}

static void transaction_reads_its_own_snapshot(void **state) {
  fixture *f = *state;
  int64_t n0, m0, n, m;
  read_t(f->s2, &n0, &m0); /* kept at this generation */
  run_ok(f->s1, "BEGIN", NULL);
  read_t(f->s1, &n, &m); /* its snapshot is the kept generation: a hit is right */
  assert_int_equal(n, n0);
  run_ok(f->s2, "INSERT INTO public.ducklake_t VALUES (50)", NULL);
  read_t(f->s2, &n, &m); /* the new rows, kept for the new generation */
  assert_int_equal(n, n0 + 1);
  sql_rcache_stats before = stats(f);
  read_t(f->s1, &n, &m); /* still its own snapshot: neither served nor kept */
  assert_int_equal(n, n0);
  assert_int_equal(m, m0);
  assert_int_equal(stats(f).hits, before.hits);
  assert_int_equal(stats(f).puts, before.puts);
  /* its own change is not the engine's rows either */
  run_ok(f->s1, "ROLLBACK", NULL);
  run_ok(f->s1, "BEGIN", NULL);
  run_ok(f->s1, "INSERT INTO public.ducklake_t VALUES (60)", NULL);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, n0 + 2);
  assert_int_equal(m, 60);
  run_ok(f->s1, "ROLLBACK", NULL);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, n0 + 1);
  assert_int_equal(m, 50);
}

static void session_state_is_never_kept(void **state) {
  fixture *f = *state;
  sql_rcache_stats before = stats(f);
  run_ok(f->s1, "COPY (SELECT now()) TO STDOUT (FORMAT binary)", NULL);
  run_ok(f->s1, "COPY (SELECT current_timestamp) TO STDOUT (FORMAT binary)", NULL);
  run_ok(f->s1,
         "COPY (SELECT count(*) FROM pg_catalog.pg_class WHERE pg_table_is_visible(oid)) "
         "TO STDOUT (FORMAT binary)",
         NULL);
  run_ok(f->s1, "COPY (SELECT current_user) TO STDOUT (FORMAT binary)", NULL);
  assert_int_equal(stats(f).puts, before.puts);
  /* a session with a temporary table keeps nothing, not even a pure read */
  run_ok(f->s1, "CREATE TEMP TABLE scratch (id BIGINT)", NULL);
  int64_t n, m;
  read_t(f->s1, &n, &m);
  read_t(f->s1, &n, &m);
  assert_int_equal(stats(f).puts, before.puts);
  assert_int_equal(stats(f).hits, before.hits);
  run_ok(f->s1, "DISCARD ALL", NULL);
  read_t(f->s1, &n, &m);
  read_t(f->s1, &n, &m);
  assert_int_equal(stats(f).hits, before.hits + 1);
}

static void large_answers_are_sent_not_kept(void **state) {
  fixture *f = *state;
  sql_rcache_stats before = stats(f);
  const char *big = "COPY (SELECT i FROM generate_series(1, 100000) t(i)) TO STDOUT (FORMAT binary)";
  for (int round = 0; round < 2; round++) {
    copy_sink cs = {0};
    run_ok(f->s1, big, &cs);
    /* 100,000 rows of one BIGINT (2 + 4 + 8 bytes), header and trailer, in
     * many CopyData messages: over the cache's 128 KiB per answer */
    assert_int_equal(cs.bytes.len, 19 + 100000 * 14 + 2);
    assert_true(cs.chunks > 1);
    assert_int_equal(be64((const uint8_t *)cs.bytes.data + 19 + 99999 * 14 + 6), 100000);
    sql_strbuf_free(&cs.bytes);
  }
  assert_int_equal(stats(f).puts, before.puts);
  assert_int_equal(stats(f).hits, before.hits);
}

static int cs_refuse(void *c, const uint8_t *d, size_t n) {
  (void)c, (void)d, (void)n;
  return 1; /* the client went away */
}

/* A client that goes away in the middle of an answer leaves nothing kept:
 * the next reader gets the whole answer, run again. */
static void abandoned_answers_are_not_kept(void **state) {
  fixture *f = *state;
  sql_rcache_stats before = stats(f);
  copy_sink cs = {0};
  sql_sink gone = {.ctx = &cs,
                   .row_description = cs_rowdesc,
                   .data_row = cs_row,
                   .command_complete = cs_complete,
                   .copy_out_begin = cs_begin,
                   .copy_data = cs_refuse,
                   .copy_done = cs_other};
  sql_error err;
  assert_int_not_equal(sql_session_simple_query(f->s1, READ_T, &gone, &err), MR_OK);
  assert_int_equal(stats(f).puts, before.puts);
  int64_t n, m;
  read_t(f->s2, &n, &m); /* run, and kept now */
  assert_int_equal(n, 2);
  assert_int_equal(m, 2);
  assert_int_equal(stats(f).puts, before.puts + 1);
}

/* A writer commits ids one by one and says so after each commit returns;
 * a reader must never see fewer rows than the writer had acknowledged
 * before the read began. */
typedef struct race {
  fixture *f;
  _Atomic int64_t acked;
  _Atomic bool done, stop;
} race;

#define RACE_COMMITS 300

static void *race_writer(void *arg) {
  race *r = arg;
  char sql[96];
  for (int i = 1; i <= RACE_COMMITS; i++) {
    /* as DuckLake does: the latest rows read inside the writing
     * transaction, so that with refresh ahead each commit queues them */
    snprintf(sql, sizeof sql, "INSERT INTO public.ducklake_t VALUES (%d)", 1000 + i);
    run_ok(r->f->s2, "BEGIN", NULL);
    run_ok(r->f->s2, READ_T, NULL);
    run_ok(r->f->s2, sql, NULL);
    run_ok(r->f->s2, "COMMIT", NULL);
    atomic_store(&r->acked, i);
  }
  atomic_store(&r->done, true);
  return NULL;
}

static void reader_never_sees_an_acknowledged_commit_missing(void **state) {
  fixture *f = *state;
  int64_t n0, m;
  read_t(f->s1, &n0, &m);
  race r = {.f = f};
  pthread_t w;
  assert_int_equal(pthread_create(&w, NULL, race_writer, &r), 0);
  int64_t reads = 0, last = n0;
  while (!atomic_load(&r.done)) {
    int64_t acked = atomic_load(&r.acked), n;
    read_t(f->s1, &n, &m);
    assert_true(n >= n0 + acked);
    assert_true(n >= last); /* nor go back */
    last = n;
    reads++;
  }
  pthread_join(w, NULL);
  read_t(f->s1, &last, &m);
  assert_int_equal(last, n0 + RACE_COMMITS);
  assert_int_equal(m, 1000 + RACE_COMMITS);
  assert_true(reads > 0);
}

/* A SELECT's answer as text: each column's description, then each row. */
static int rs_rowdesc(void *c, size_t n, const sql_column *cols) {
  sql_strbuf *b = c;
  for (size_t i = 0; i < n; i++)
    sql_strbuf_addf(b, "%s:%u:%d:%d:%d|", cols[i].name, cols[i].type_oid, cols[i].type_len,
                    cols[i].typmod, cols[i].format);
  sql_strbuf_add(b, "\n");
  return 0;
}
static int rs_row(void *c, size_t n, const char *const *v, const size_t *l) {
  sql_strbuf *b = c;
  for (size_t i = 0; i < n; i++) {
    if (v[i])
      sql_strbuf_addn(b, v[i], l[i]);
    else
      sql_strbuf_add(b, "<null>");
    sql_strbuf_add(b, ";");
  }
  sql_strbuf_add(b, "\n");
  return 0;
}
static int rs_complete(void *c, const char *tag) {
  sql_strbuf_addf(c, "%s\n", tag);
  return 0;
}

/* The whole answer of a simple-query SELECT, as text (caller frees). */
static char *select_answer(sql_session *s, const char *sql) {
  sql_strbuf b = {0};
  sql_sink sink = {.ctx = &b,
                   .row_description = rs_rowdesc,
                   .data_row = rs_row,
                   .command_complete = rs_complete};
  sql_error err;
  if (sql_session_simple_query(s, sql, &sink, &err) != MR_OK)
    fail_msg("%s: %s %s", sql, err.sqlstate, err.base.msg);
  return sql_strbuf_take(&b);
}

static void selects_are_kept_like_copies(void **state) {
  fixture *f = *state;
  const char *q =
      "SELECT id, NULL::VARCHAR AS nothing, 'x''y' AS text FROM public.ducklake_t ORDER BY id";
  const char *same =
      "SELECT id, NULL::VARCHAR AS nothing, 'x''y' AS text FROM public.ducklake_t  ORDER BY id";
  char *first = select_answer(f->s1, q);
  sql_rcache_stats before = stats(f);
  char *hit = select_answer(f->s2, q);
  assert_int_equal(stats(f).hits, before.hits + 1);
  char *run = select_answer(f->s2, same); /* another text: run */
  assert_string_equal(hit, first);
  assert_string_equal(hit, run);
  assert_non_null(strstr(hit, "1;<null>;x'y;\n2;<null>;x'y;\nSELECT 2\n"));
  /* a commit moves it on */
  run_ok(f->s1, "INSERT INTO public.ducklake_t VALUES (3)", NULL);
  char *after = select_answer(f->s2, q);
  assert_non_null(strstr(after, "3;<null>;x'y;\nSELECT 3\n"));
  /* a constant, and pg_settings' fixed rows, are kept too; the clock is not */
  char *one = select_answer(f->s1, "SELECT 1");
  char *one_again = select_answer(f->s2, "SELECT 1");
  assert_string_equal(one, one_again);
  before = stats(f);
  char *tz = select_answer(f->s1, "SELECT setting FROM pg_settings WHERE name = 'TimeZone'");
  char *tz_again = select_answer(f->s2, "SELECT setting FROM pg_settings WHERE name = 'TimeZone'");
  assert_string_equal(tz, tz_again);
  assert_int_equal(stats(f).hits, before.hits + 1);
  before = stats(f);
  char *t1 = select_answer(f->s1, "SELECT now()");
  char *t2 = select_answer(f->s1, "SELECT now()");
  assert_int_equal(stats(f).hits, before.hits);
  assert_int_equal(stats(f).puts, before.puts);
  /* a COPY of the same query is its own entry, in its own layout */
  copy_sink cs = {0};
  run_ok(f->s1, "COPY (SELECT 1) TO STDOUT (FORMAT binary)", &cs);
  assert_int_equal(cs.bytes.len, 19 + 2 + 4 + 4 + 2);
  sql_strbuf_free(&cs.bytes);
  char *frees[] = {first, hit, run, after, one, one_again, tz, tz_again, t1, t2};
  for (size_t i = 0; i < sizeof frees / sizeof *frees; i++)
    free(frees[i]);
}

/* pg_catalog follows the catalog's committed tables: its reads are kept
 * until a commit or a pre-load changes them, and a session's own DDL is
 * neither served from the cache nor kept. */
#define CATALOG_TABLES                                                                             \
  "SELECT relname FROM pg_class WHERE relname LIKE 'ducklake_inlined%' OR relname = 'ducklake_t' " \
  "ORDER BY relname"

/* An inlined data table's DuckLake table must exist before it may be made,
 * and it has DuckLake's row columns. */
#define INLINED_COLUMNS "(row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)"
static void add_ducklake_tables(fixture *f) {
  sql_error err;
  if (sql_engine_exec(f->e, "CREATE TABLE public.ducklake_table (table_id BIGINT)", &err) ||
      sql_engine_exec(f->e, "INSERT INTO public.ducklake_table VALUES (1), (7)", &err))
    fail_msg("%s", err.base.msg);
}

static void catalog_tables_are_kept_until_ddl(void **state) {
  fixture *f = *state;
  add_ducklake_tables(f);
  char *first = select_answer(f->s1, CATALOG_TABLES);
  assert_string_equal(first, "relname:1043:-1:-1:0|\nducklake_t;\nSELECT 1\n");
  sql_rcache_stats before = stats(f);
  char *kept = select_answer(f->s2, CATALOG_TABLES);
  assert_int_equal(stats(f).hits, before.hits + 1);
  assert_string_equal(kept, first);
  /* the session's own CREATE TABLE: it sees it, keeps nothing; others not yet */
  run_ok(f->s2, "BEGIN", NULL);
  run_ok(f->s2, "CREATE TABLE public.ducklake_inlined_data_1_1 " INLINED_COLUMNS, NULL);
  before = stats(f);
  char *own = select_answer(f->s2, CATALOG_TABLES);
  assert_non_null(strstr(own, "ducklake_inlined_data_1_1;\nducklake_t;\nSELECT 2\n"));
  assert_int_equal(stats(f).puts, before.puts);
  assert_int_equal(stats(f).hits, before.hits);
  char *other = select_answer(f->s1, CATALOG_TABLES);
  assert_string_equal(other, first);
  run_ok(f->s2, "COMMIT", NULL);
  char *committed = select_answer(f->s1, CATALOG_TABLES);
  assert_non_null(strstr(committed, "ducklake_inlined_data_1_1;\nducklake_t;\nSELECT 2\n"));
  char *reg = select_answer(f->s1, "SELECT to_regclass('ducklake_inlined_data_1_1')");
  before = stats(f);
  char *reg_kept = select_answer(f->s2, "SELECT to_regclass('ducklake_inlined_data_1_1')");
  assert_int_equal(stats(f).hits, before.hits + 1);
  assert_string_equal(reg, reg_kept);
  assert_non_null(strstr(reg, "\nducklake_inlined_data_1_1;\nSELECT 1\n"));
  /* a pre-load's table, then a client's DROP */
  sql_error err;
  assert_int_equal(
      sql_engine_exec(f->e, "CREATE TABLE public.ducklake_inlined_data_1_2 (id BIGINT)", &err),
      MR_OK);
  char *preloaded = select_answer(f->s2, CATALOG_TABLES);
  assert_non_null(
      strstr(preloaded,
             "ducklake_inlined_data_1_1;\nducklake_inlined_data_1_2;\nducklake_t;\nSELECT 3\n"));
  run_ok(f->s1, "DROP TABLE public.ducklake_inlined_data_1_1", NULL);
  char *dropped = select_answer(f->s2, CATALOG_TABLES);
  assert_non_null(strstr(dropped, "ducklake_inlined_data_1_2;\nducklake_t;\nSELECT 2\n"));
  char *gone = select_answer(f->s2, "SELECT to_regclass('ducklake_inlined_data_1_1')");
  assert_non_null(strstr(gone, "\n<null>;\nSELECT 1\n"));
  char *frees[] = {first, kept, own, other, committed, reg, reg_kept, preloaded, dropped, gone};
  for (size_t i = 0; i < sizeof frees / sizeof *frees; i++)
    free(frees[i]);
}

/* The race of reader_never_sees_an_acknowledged_commit_missing over tables:
 * a writer creates them one by one, by a client's commit and by the
 * pre-load API in turn, and says so after each returns; a reader's count
 * of them, kept or not, never falls behind. */
#define TABLE_RACE_TABLES 120
#define COUNT_R                                                                                    \
  "COPY (SELECT count(*) FROM pg_class WHERE relname LIKE 'ducklake_inlined_data_7_%') TO STDOUT " \
  "(FORMAT binary)"

static void *table_race_writer(void *arg) {
  race *r = arg;
  char sql[160];
  for (int i = 1; i <= TABLE_RACE_TABLES && !atomic_load(&r->stop); i++) {
    snprintf(sql, sizeof sql, "CREATE TABLE public.ducklake_inlined_data_7_%d " INLINED_COLUMNS, i);
    sql_error err;
    if (i % 2)
      run_ok(r->f->s2, sql, NULL);
    else if (sql_engine_exec(r->f->e, sql, &err) != MR_OK)
      fail_msg("%s: %s", sql, err.base.msg);
    atomic_store(&r->acked, i);
  }
  atomic_store(&r->done, true);
  return NULL;
}

static int64_t count_r(sql_session *s) {
  copy_sink cs = {0};
  run_ok(s, COUNT_R, &cs);
  const uint8_t *p = (const uint8_t *)cs.bytes.data;
  assert_int_equal(cs.bytes.len, 19 + 2 + 4 + 8 + 2);
  int64_t n = be64(p + 21 + 4);
  sql_strbuf_free(&cs.bytes);
  return n;
}

static void reader_never_sees_an_acknowledged_table_missing(void **state) {
  fixture *f = *state;
  add_ducklake_tables(f);
  race r = {.f = f};
  pthread_t w;
  assert_int_equal(pthread_create(&w, NULL, table_race_writer, &r), 0);
  int64_t reads = 0, last = 0, behind = -1, acked = 0;
  sql_rcache_stats before = stats(f);
  /* a read that falls behind stops the writer before the test fails, so
   * that the failure never leaves a thread running into the teardown */
  while (!atomic_load(&r.done) && behind < 0) {
    acked = atomic_load(&r.acked);
    int64_t n = count_r(f->s1);
    if (n < acked || n < last)
      behind = n;
    last = n;
    reads++;
    if (behind < 0 && (n = count_r(f->s1)) < acked) /* the same text again: a hit */
      behind = n;
  }
  atomic_store(&r.stop, true);
  pthread_join(w, NULL);
  if (behind >= 0)
    fail_msg("read %" PRId64 " tables after %" PRId64 " were acknowledged", behind, acked);
  assert_int_equal(count_r(f->s1), TABLE_RACE_TABLES);
  assert_true(reads > 0);
  assert_true(stats(f).hits > before.hits); /* the reads were kept, and raced */
}

static sql_result_cache_counts counts(fixture *f) {
  sql_result_cache_counts c;
  sql_engine_result_cache_counts(f->e, &c);
  return c;
}

/* One DuckLake-like commit on s: BEGIN, the reads, one insert, COMMIT. */
static void read_and_commit(sql_session *s, const char *read, int id) {
  char sql[96];
  snprintf(sql, sizeof sql, "INSERT INTO public.ducklake_t VALUES (%d)", id);
  run_ok(s, "BEGIN", NULL);
  run_ok(s, read, NULL);
  run_ok(s, sql, NULL);
  run_ok(s, "COMMIT", NULL);
}

static void writer_reads_are_refreshed_after_its_commit(void **state) {
  fixture *f = *state;
  read_and_commit(f->s2, READ_T, 10);
  sql_engine_refresh_wait(f->e);
  assert_int_equal(counts(f).refreshed, 0); /* read once so far: not a repeat */
  read_and_commit(f->s2, READ_T, 11);
  sql_engine_refresh_wait(f->e);
  assert_int_equal(counts(f).refreshed, 1);
  /* the next read of it, by anyone, is a hit, and it is the new rows */
  sql_rcache_stats before = stats(f);
  copy_sink hit = {0}, run = {0};
  run_ok(f->s1, READ_T, &hit);
  assert_int_equal(stats(f).hits, before.hits + 1);
  int64_t n, m;
  two_bigints(&hit, &n, &m);
  assert_int_equal(n, 4);
  assert_int_equal(m, 11);
  run_ok(f->s1, "COPY (SELECT count(*), max(id) FROM public.ducklake_t)  TO STDOUT (FORMAT binary)",
         &run); /* another text: run, and equal byte for byte */
  assert_int_equal(hit.bytes.len, run.bytes.len);
  assert_memory_equal(hit.bytes.data, run.bytes.data, run.bytes.len);
  sql_strbuf_free(&hit.bytes);
  sql_strbuf_free(&run.bytes);
  /* stopped (as a catalog is before its close): commits queue nothing */
  sql_engine_stop_background(f->e);
  sql_engine_stop_background(f->e);
  read_and_commit(f->s2, READ_T, 12);
  read_and_commit(f->s2, READ_T, 13);
  sql_engine_refresh_wait(f->e);
  assert_int_equal(counts(f).refreshed, 1);
  read_t(f->s1, &n, &m);
  assert_int_equal(n, 6);
  assert_int_equal(m, 13);
}

static void one_off_reads_are_not_refreshed(void **state) {
  fixture *f = *state;
  /* a read at one id, then at another: no text repeats */
  read_and_commit(
      f->s2, "COPY (SELECT id FROM public.ducklake_t WHERE id = 1) TO STDOUT (FORMAT binary)", 20);
  read_and_commit(
      f->s2, "COPY (SELECT id FROM public.ducklake_t WHERE id = 2) TO STDOUT (FORMAT binary)", 21);
  /* nor an impure one, nor one outside a transaction */
  read_and_commit(f->s2, "COPY (SELECT now()) TO STDOUT (FORMAT binary)", 22);
  read_and_commit(f->s2, "COPY (SELECT now()) TO STDOUT (FORMAT binary)", 23);
  run_ok(f->s2, READ_T, NULL);
  run_ok(f->s2, "INSERT INTO public.ducklake_t VALUES (24)", NULL);
  run_ok(f->s2, READ_T, NULL);
  run_ok(f->s2, "INSERT INTO public.ducklake_t VALUES (25)", NULL);
  /* nor a text past SQL_REFRESH_TEXT_MAX, however often it repeats */
  sql_strbuf long_read = {0};
  sql_strbuf_add(&long_read, "COPY (SELECT count(*) FROM public.ducklake_t WHERE id IN (0");
  while (long_read.len <= SQL_REFRESH_TEXT_MAX)
    sql_strbuf_add(&long_read, ", 0");
  sql_strbuf_add(&long_read, ")) TO STDOUT (FORMAT binary)");
  read_and_commit(f->s2, long_read.data, 27);
  read_and_commit(f->s2, long_read.data, 28);
  sql_strbuf_free(&long_read);
  sql_engine_refresh_wait(f->e);
  assert_int_equal(counts(f).refreshed, 0);
  /* a retry after a rollback repeats its reads: they count */
  run_ok(f->s2, "BEGIN", NULL);
  run_ok(f->s2, READ_T, NULL);
  run_ok(f->s2, "ROLLBACK", NULL);
  read_and_commit(f->s2, READ_T, 26);
  sql_engine_refresh_wait(f->e);
  assert_int_equal(counts(f).refreshed, 1);
  int64_t n, m;
  read_t(f->s1, &n, &m);
  assert_int_equal(n, 2 + 9);
  assert_int_equal(m, 28);
}

/* The race above with the writer's reads refreshed after every commit:
 * the refresher's puts race the writer's next commit and the reader. */
static void refreshed_reads_never_go_back(void **state) {
  reader_never_sees_an_acknowledged_commit_missing(state);
  fixture *f = *state;
  sql_engine_refresh_wait(f->e);
  sql_result_cache_counts c = counts(f);
  assert_true(c.refreshed > 0);
}

int main(void) {
  const struct CMUnitTest table[] = {
      cmocka_unit_test(table_keeps_one_generation),
      cmocka_unit_test(table_stays_within_its_budget),
      cmocka_unit_test(held_entry_outlives_its_eviction),
  };
  const struct CMUnitTest engine[] = {
      cmocka_unit_test_setup_teardown(read_is_kept_until_a_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(preload_moves_the_rows_on, setup, teardown),
      cmocka_unit_test_setup_teardown(transaction_reads_its_own_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(session_state_is_never_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(large_answers_are_sent_not_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(abandoned_answers_are_not_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(selects_are_kept_like_copies, setup, teardown),
      cmocka_unit_test_setup_teardown(reader_never_sees_an_acknowledged_commit_missing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(catalog_tables_are_kept_until_ddl, setup, teardown),
      cmocka_unit_test_setup_teardown(reader_never_sees_an_acknowledged_table_missing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(writer_reads_are_refreshed_after_its_commit, setup_refresh,
                                      teardown),
      cmocka_unit_test_setup_teardown(one_off_reads_are_not_refreshed, setup_refresh, teardown),
      cmocka_unit_test_setup_teardown(refreshed_reads_never_go_back, setup_refresh, teardown),
  };
  int failed = cmocka_run_group_tests_name("rcache table", table, NULL, NULL);
  return failed + cmocka_run_group_tests_name("rcache in an engine", engine, NULL, NULL);
}
