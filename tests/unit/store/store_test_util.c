/*
 * store_test_util.c — temp folders, urls and record lists for the store
 * tests (see store_test_util.h).
 */
#include "store_test_util.h"
#include "test_tmp.h"

#include "key/key.h"
#include "kv/kv.h"
#include "value/value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_tmp_setup(const char *prefix) {
  return test_tmp_setup(prefix);
}

void st_tmp_teardown(void) {
  test_tmp_teardown();
}

void st_url(const char *name, char *url, size_t cap) {
  test_tmp_url(name, url, cap);
}

mr_status st_kv_put(const char *url, const mr_key *k, const ProtobufCMessage *msg, mr_error *e) {
  kv_db *db = NULL;
  mr_status rc = kv_open(url, NULL, &db, e);
  if (rc)
    return rc;
  mr_keybuf kb;
  uint8_t *val = NULL;
  size_t len = 0;
  kv_batch *b = NULL;
  rc = mr_key_encode(k, &kb, e);
  if (!rc)
    rc = mr_value_encode(k->kind, msg, &val, &len, e);
  if (!rc)
    rc = kv_batch_new(&b, e);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, len, e);
  if (!rc)
    rc = kv_write(db, b, e);
  kv_batch_free(b);
  free(val);
  mr_error ignored;
  mr_status crc = kv_close(db, rc ? &ignored : e);
  return rc ? rc : crc;
}

void st_list_add(st_list *l, const mr_key *k, const uint8_t *val, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->r = realloc(l->r, l->cap * sizeof *l->r);
    if (l->r == NULL)
      abort();
  }
  st_rec *r = &l->r[l->n++];
  r->key = *k;
  if (r->key.history) {
    r->key.history = false;
    r->key.c[mr_key_kind_get(k->kind)->ncomp] = 0;
  }
  r->key.name = NULL;
  r->key.name_len = 0;
  r->val = malloc(len ? len : 1);
  if (r->val == NULL)
    abort();
  if (len)
    memcpy(r->val, val, len);
  r->len = len;
}

void st_list_free(st_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->r[i].val);
  free(l->r);
  memset(l, 0, sizeof *l);
}

static int rec_cmp(const void *a, const void *b) {
  const st_rec *x = a, *y = b;
  int c = mr_key_compare(&x->key, &y->key);
  if (c)
    return c;
  size_t n = x->len < y->len ? x->len : y->len;
  c = memcmp(x->val, y->val, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

void st_list_sort(st_list *l) {
  if (l->n)
    qsort(l->r, l->n, sizeof *l->r, rec_cmp);
}

static void print_rec(const char *side, const st_rec *r) {
  char text[MR_KEY_TEXT_MAX];
  mr_error e;
  if (mr_key_format(&r->key, text, sizeof text, &e))
    snprintf(text, sizeof text, "?");
  fprintf(stderr, "  %s %s (%zu value bytes)\n", side, text, r->len);
}

bool st_list_equal(const st_list *got, const st_list *want, const char *what) {
  size_t i = 0, j = 0;
  bool ok = true;
  int shown = 0;
  while ((i < got->n || j < want->n) && shown < 8) {
    int c = i >= got->n ? 1 : j >= want->n ? -1 : rec_cmp(&got->r[i], &want->r[j]);
    if (c == 0) {
      i++, j++;
      continue;
    }
    if (ok)
      fprintf(stderr, "%s: store (got) and model (want) differ:\n", what);
    ok = false;
    shown++;
    if (c < 0)
      print_rec("got only ", &got->r[i++]);
    else
      print_rec("want only", &want->r[j++]);
  }
  if (!ok)
    fprintf(stderr, "  (got %zu records, want %zu)\n", got->n, want->n);
  return ok;
}

mr_status st_collect(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  uint8_t *val = NULL;
  size_t len = 0;
  mr_status rc = mr_value_encode(k->kind, v, &val, &len, err);
  if (rc)
    return rc;
  st_list_add(ctx, k, val, len);
  free(val);
  return MR_OK;
}

/* ---- a catalog built through the store API (st_build_catalog) ---------------- */

static void ok(mr_status rc, const mr_error *e) {
  if (rc) {
    fprintf(stderr, "st_build_catalog: %s\n", e->msg);
    abort();
  }
}

typedef struct builder {
  store *st;
  store_commit *c;
  uint64_t snap;
} builder;

static void begin(builder *b) {
  mr_error e;
  ok(store_commit_begin(b->st, store_get_head(b->st), &b->c, &e), &e);
  Moraine__V1__Snapshot s = MORAINE__V1__SNAPSHOT__INIT;
  s.snapshot_id = (int64_t)b->snap;
  ok(store_commit_snapshot(b->c, &s, &e), &e);
}

static void commit(builder *b) {
  mr_error e;
  ok(store_commit_write(b->c, NULL, &e), &e);
  b->c = NULL;
  b->snap++;
}

static void put(builder *b, mr_key_kind kind, uint64_t c0, uint64_t c1, const ProtobufCMessage *v) {
  mr_error e;
  mr_key k = {.kind = kind, .c = {c0, c1}};
  ok(store_commit_put(b->c, &k, v, &e), &e);
}

static void end(builder *b, mr_key_kind kind, uint64_t c0, uint64_t c1, ProtobufCMessage *v) {
  mr_error e;
  mr_key k = {.kind = kind, .c = {c0, c1}};
  ok(store_commit_end(b->c, &k, v, &e), &e);
}

static Moraine__V1__Schema schema(uint64_t id, uint64_t begin, const char *name) {
  Moraine__V1__Schema s = MORAINE__V1__SCHEMA__INIT;
  s.schema_id = (int64_t)id;
  s.begin_snapshot = (int64_t)begin;
  s.schema_name = (char *)name;
  return s;
}

static Moraine__V1__Table table(uint64_t id, uint64_t schema_id, uint64_t begin, const char *name) {
  Moraine__V1__Table t = MORAINE__V1__TABLE__INIT;
  t.table_id = (int64_t)id;
  t.begin_snapshot = (int64_t)begin;
  t.has_schema_id = 1;
  t.schema_id = (int64_t)schema_id;
  t.table_name = (char *)name;
  return t;
}

static Moraine__V1__DataFile data_file(uint64_t table_id, uint64_t id, uint64_t begin) {
  Moraine__V1__DataFile f = MORAINE__V1__DATA_FILE__INIT;
  f.data_file_id = (int64_t)id;
  f.table_id = (int64_t)table_id;
  f.begin_snapshot = (int64_t)begin;
  f.path = (char *)"f.parquet";
  return f;
}

static Moraine__V1__DeleteFile delete_file(uint64_t table_id, uint64_t id, uint64_t data_file_id,
                                           uint64_t begin) {
  Moraine__V1__DeleteFile d = MORAINE__V1__DELETE_FILE__INIT;
  d.delete_file_id = (int64_t)id;
  d.table_id = (int64_t)table_id;
  d.begin_snapshot = (int64_t)begin;
  d.has_data_file_id = 1;
  d.data_file_id = (int64_t)data_file_id;
  d.path = (char *)"d.parquet";
  return d;
}

/*
 * Schema 1 "main"; tables 100+i named "t<i>" with two data files and a
 * delete file on the first one; every third table renamed, every fourth
 * delete file replaced by a newer one, schema 2 created and dropped, one
 * table with a name shared by a dropped one.
 */
void st_build_catalog(const char *url) {
  builder b = {0};
  mr_error e;
  ok(store_open(url, NULL, &b.st, &e), &e);
  begin(&b);
  Moraine__V1__Schema s1 = schema(1, b.snap, "main"), s2 = schema(2, b.snap, "scratch");
  put(&b, MR_KK_SCHEMA, 1, 0, &s1.base);
  put(&b, MR_KK_SCHEMA, 2, 0, &s2.base);
  commit(&b);
  for (uint64_t i = 0; i < ST_CATALOG_TABLES; i++) {
    begin(&b);
    char name[16];
    snprintf(name, sizeof name, "t%llu", (unsigned long long)i);
    uint64_t tid = 100 + i, f0 = 1000 + 10 * i, f1 = f0 + 1, d0 = f0 + 2;
    Moraine__V1__Table t = table(tid, 1, b.snap, name);
    Moraine__V1__DataFile a = data_file(tid, f0, b.snap), c = data_file(tid, f1, b.snap);
    Moraine__V1__DeleteFile d = delete_file(tid, d0, f0, b.snap);
    put(&b, MR_KK_TABLE, tid, 0, &t.base);
    put(&b, MR_KK_FILE, tid, f0, &a.base);
    put(&b, MR_KK_FILE, tid, f1, &c.base);
    put(&b, MR_KK_DELFILE, tid, d0, &d.base);
    commit(&b);
  }
  for (uint64_t i = 0; i < ST_CATALOG_TABLES; i++) {
    uint64_t tid = 100 + i, f0 = 1000 + 10 * i, d0 = f0 + 2;
    if (i % 3 == 0) { /* rename */
      begin(&b);
      char old[16], now[16];
      snprintf(old, sizeof old, "t%llu", (unsigned long long)i);
      snprintf(now, sizeof now, "renamed%llu", (unsigned long long)i);
      Moraine__V1__Table was = table(tid, 1, b.snap - 0, old), is = table(tid, 1, b.snap, now);
      was.begin_snapshot = 1 + (int64_t)i;
      was.has_end_snapshot = 1;
      was.end_snapshot = (int64_t)b.snap;
      end(&b, MR_KK_TABLE, tid, 0, &was.base);
      put(&b, MR_KK_TABLE, tid, 0, &is.base);
      commit(&b);
    }
    if (i % 4 == 1) { /* a newer delete file replaces the first */
      begin(&b);
      Moraine__V1__DeleteFile was = delete_file(tid, d0, f0, 1 + i),
                              is = delete_file(tid, d0 + 1, f0, b.snap);
      was.has_end_snapshot = 1;
      was.end_snapshot = (int64_t)b.snap;
      end(&b, MR_KK_DELFILE, tid, d0, &was.base);
      put(&b, MR_KK_DELFILE, tid, d0 + 1, &is.base);
      commit(&b);
    }
  }
  begin(&b); /* drop schema 2 */
  Moraine__V1__Schema gone = schema(2, 0, "scratch");
  gone.has_end_snapshot = 1;
  gone.end_snapshot = (int64_t)b.snap;
  end(&b, MR_KK_SCHEMA, 2, 0, &gone.base);
  commit(&b);
  ok(store_close(b.st, &e), &e);
}
