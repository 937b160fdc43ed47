/*
 * bench_store.c — the store's two hot paths on a file:// store:
 *  1. current load (store_load_current) of a fixed live catalog —
 *     TABLES tables x COLS columns x FILES data files, with per-file column
 *     stats — while the history subspace grows to 1x, 10x, 100x the live
 *     file count (ended data-file versions); prints time and keys read;
 *  2. latency of a typical insert commit (snapshot + 2 data files + their
 *     column stats + table and column stats), p50 / p99 over COMMITS.
 * Usage: bench_store [DIR] [TABLES COLS FILES COMMITS]   (defaults 50 20 50 200)
 * DIR defaults to a fresh folder under $TMPDIR or /tmp; it is removed after.
 * The store is reopened before each history measurement, then left alone
 * MORAINE_BENCH_SETTLE seconds (default 2).
 * Not a test: prints a markdown table for BENCHMARK.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

static unsigned TABLES = 50, COLS = 20, FILES = 50, COMMITS = 200;
static unsigned settle_s = 2; /* env MORAINE_BENCH_SETTLE: seconds to wait after each reopen */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what, const mr_error *e) {
  fprintf(stderr, "bench_store: %s: %s\n", what, e->msg);
  exit(1);
}

static store *st;
static uint64_t next_file = 1000000;

static void put_file(store_commit *c, uint64_t table, uint64_t file, uint64_t s) {
  mr_error e;
  Moraine__V1__DataFile f = MORAINE__V1__DATA_FILE__INIT;
  f.data_file_id = (int64_t)file;
  f.table_id = (int64_t)table;
  f.begin_snapshot = (int64_t)s;
  f.path = (char *)"ducklake-0199-0000-7000-8000-000000000000.parquet";
  f.file_format = (char *)"parquet";
  f.has_record_count = 1;
  f.record_count = 1000;
  f.has_file_size_bytes = 1;
  f.file_size_bytes = 123456;
  mr_key k = {.kind = MR_KK_FILE, .c = {table, file}};
  if (store_commit_put(c, &k, &f.base, &e))
    die("put file", &e);
  for (unsigned col = 1; col <= COLS; col++) {
    Moraine__V1__FileColumnStats fs = MORAINE__V1__FILE_COLUMN_STATS__INIT;
    fs.data_file_id = (int64_t)file;
    fs.table_id = (int64_t)table;
    fs.column_id = col;
    fs.has_value_count = 1;
    fs.value_count = 1000;
    fs.has_null_count = 1;
    fs.min_value = (char *)"1";
    fs.max_value = (char *)"99999";
    mr_key sk = {.kind = MR_KK_FSTAT, .c = {table, file, col}};
    if (store_commit_put(c, &sk, &fs.base, &e))
      die("put fstat", &e);
  }
}

static void put_stats(store_commit *c, uint64_t table) {
  mr_error e;
  Moraine__V1__TableStats ts = MORAINE__V1__TABLE_STATS__INIT;
  ts.table_id = (int64_t)table;
  ts.has_record_count = 1;
  ts.record_count = 1;
  mr_key k = {.kind = MR_KK_TSTAT, .c = {table}};
  if (store_commit_put(c, &k, &ts.base, &e))
    die("put tstat", &e);
  for (unsigned col = 1; col <= COLS; col++) {
    Moraine__V1__TableColumnStats tc = MORAINE__V1__TABLE_COLUMN_STATS__INIT;
    tc.table_id = (int64_t)table;
    tc.column_id = col;
    tc.min_value = (char *)"1";
    tc.max_value = (char *)"99999";
    mr_key ck = {.kind = MR_KK_TCSTAT, .c = {table, col}};
    if (store_commit_put(c, &ck, &tc.base, &e))
      die("put tcstat", &e);
  }
}

static store_commit *begin(uint64_t *s) {
  mr_error e;
  store_head h = store_get_head(st);
  store_commit *c = NULL;
  if (store_commit_begin(st, h, &c, &e))
    die("begin", &e);
  *s = h.batch_count == 0 ? 0 : h.snapshot_id + 1;
  Moraine__V1__Snapshot snap = MORAINE__V1__SNAPSHOT__INIT;
  snap.snapshot_id = (int64_t)*s;
  snap.changes_made = (char *)"inserted_into_table:1";
  if (store_commit_snapshot(c, &snap, &e))
    die("snapshot", &e);
  return c;
}

static void write_or_die(store_commit *c) {
  mr_error e;
  if (store_commit_write(c, NULL, &e))
    die("write", &e);
}

/* The live catalog: one commit per table (table, columns, files, stats). */
static void build_live(void) {
  mr_error e;
  uint64_t s;
  store_commit *c = begin(&s);
  Moraine__V1__Schema sc = MORAINE__V1__SCHEMA__INIT;
  sc.schema_id = 0;
  sc.begin_snapshot = (int64_t)s;
  sc.schema_name = (char *)"main";
  mr_key sk = {.kind = MR_KK_SCHEMA, .c = {0}};
  if (store_commit_put(c, &sk, &sc.base, &e))
    die("schema", &e);
  write_or_die(c);
  for (uint64_t t = 1; t <= TABLES; t++) {
    c = begin(&s);
    Moraine__V1__Table tb = MORAINE__V1__TABLE__INIT;
    tb.table_id = (int64_t)t;
    tb.begin_snapshot = (int64_t)s;
    tb.has_schema_id = 1;
    char name[32];
    snprintf(name, sizeof name, "t%llu", (unsigned long long)t);
    tb.table_name = name;
    mr_key tk = {.kind = MR_KK_TABLE, .c = {t}};
    if (store_commit_put(c, &tk, &tb.base, &e))
      die("table", &e);
    for (uint64_t col = 1; col <= COLS; col++) {
      Moraine__V1__Column cl = MORAINE__V1__COLUMN__INIT;
      cl.column_id = (int64_t)col;
      cl.table_id = (int64_t)t;
      cl.begin_snapshot = (int64_t)s;
      cl.column_name = (char *)"some_column";
      cl.column_type = (char *)"BIGINT";
      mr_key ck = {.kind = MR_KK_COLUMN, .c = {t, col}};
      if (store_commit_put(c, &ck, &cl.base, &e))
        die("column", &e);
    }
    for (unsigned f = 0; f < FILES; f++)
      put_file(c, t, next_file++, s);
    put_stats(c, t);
    write_or_die(c);
  }
}

/* Adds `n` ended data-file versions to history, up to 2000 per commit. */
static void grow_history(uint64_t n) {
  mr_error e;
  while (n > 0) {
    uint64_t s;
    store_commit *c = begin(&s);
    uint64_t k = n < 2000 ? n : 2000;
    for (uint64_t i = 0; i < k; i++) {
      uint64_t file = next_file++;
      Moraine__V1__DataFile f = MORAINE__V1__DATA_FILE__INIT;
      f.data_file_id = (int64_t)file;
      f.table_id = (int64_t)(1 + file % TABLES);
      f.begin_snapshot = (int64_t)(s ? s - 1 : 0);
      f.has_end_snapshot = 1;
      f.end_snapshot = (int64_t)s;
      f.path = (char *)"ducklake-0199-0000-7000-8000-000000000000.parquet";
      f.has_record_count = 1;
      f.record_count = 1000;
      mr_key key = {.kind = MR_KK_FILE, .c = {1 + file % TABLES, file}};
      if (store_commit_end(c, &key, &f.base, &e))
        die("end", &e);
    }
    write_or_die(c);
    n -= k;
  }
}

static mr_status count_visit(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  (*(uint64_t *)ctx)++;
  return MR_OK;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void measure_load(const char *label) {
  mr_error e;
  double t[7];
  uint64_t keys = 0, records = 0;
  for (int i = 0; i < 7; i++) {
    uint64_t before = store_keys_read(st);
    records = 0;
    double t0 = now_ms();
    if (store_load_current(st, count_visit, &records, &e))
      die("load", &e);
    t[i] = now_ms() - t0;
    keys = store_keys_read(st) - before;
  }
  qsort(t, 7, sizeof *t, cmp_d);
  store_census cs;
  if (store_take_census(st, &cs, &e))
    die("census", &e);
  printf("| %-5s | %9llu | %9llu | %9llu | %8.1f | %8.1f |\n", label,
         (unsigned long long)cs.subspace[MR_SS_HISTORY].keys, (unsigned long long)records,
         (unsigned long long)keys, t[3], t[0]);
}

static void bench_commits(void) {
  double *lat = calloc(COMMITS, sizeof *lat);
  for (unsigned i = 0; i < COMMITS; i++) {
    double t0 = now_ms();
    uint64_t s;
    store_commit *c = begin(&s);
    uint64_t table = 1 + i % TABLES;
    put_file(c, table, next_file++, s);
    put_file(c, table, next_file++, s);
    put_stats(c, table);
    write_or_die(c);
    lat[i] = now_ms() - t0;
  }
  qsort(lat, COMMITS, sizeof *lat, cmp_d);
  printf("\n| commit (snapshot + 2 files + %u fstat + tstat + %u tcstat) | p50 ms | p99 ms | max ms |\n", 2 * COLS,
         COLS);
  printf("|---|---|---|---|\n");
  printf("| %u commits | %.1f | %.1f | %.1f |\n", COMMITS, lat[COMMITS / 2], lat[(COMMITS * 99) / 100],
         lat[COMMITS - 1]);
  free(lat);
}

int main(int argc, char **argv) {
  char dir[4096];
  bool own = argc < 2;
  if (own) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/moraine-bench-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
      perror("mkdtemp");
      return 1;
    }
  } else {
    snprintf(dir, sizeof dir, "%s", argv[1]);
  }
  if (argc >= 6) {
    TABLES = (unsigned)atoi(argv[2]);
    COLS = (unsigned)atoi(argv[3]);
    FILES = (unsigned)atoi(argv[4]);
    COMMITS = (unsigned)atoi(argv[5]);
  }
  const char *settle = getenv("MORAINE_BENCH_SETTLE");
  if (settle)
    settle_s = (unsigned)atoi(settle);
  char url[4200];
  snprintf(url, sizeof url, "file://%s/store", dir);
  mr_error e;
  if (store_open(url, NULL, &st, &e))
    die("open", &e);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("bench_store: %u tables x %u columns x %u files (%u live data files, %u fstat), %ld cores, %s\n\n", TABLES,
         COLS, FILES, TABLES * FILES, TABLES * FILES * COLS, cores, url);
  build_live();
  uint64_t live_files = (uint64_t)TABLES * FILES;
  printf("| history | history keys | live records | keys read | load ms (median of 7) | load ms (min) |\n");
  printf("|---|---|---|---|---|---|\n");
  measure_load("0x");
  uint64_t have = 0;
  static const unsigned mult[] = {1, 10, 100};
  for (int i = 0; i < 3; i++) {
    grow_history(mult[i] * live_files - have);
    have = mult[i] * live_files;
    if (store_close(st, &e)) /* reopen: measure from the persisted store */
      die("close", &e);
    if (store_open(url, NULL, &st, &e))
      die("reopen", &e);
    sleep(settle_s); /* let the reopened writer's background work settle */
    char label[8];
    snprintf(label, sizeof label, "%ux", mult[i]);
    measure_load(label);
  }
  bench_commits();
  if (store_close(st, &e))
    die("close", &e);
  if (own) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
      fprintf(stderr, "bench_store: could not remove %s\n", dir);
  }
  return 0;
}
