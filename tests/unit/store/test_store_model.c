/*
 * test_store_model.c — the store against a reference model of DuckLake's
 * relational catalog. The model keeps plain rows (key, begin/end, value
 * bytes) in C arrays; a seeded PRNG drives DuckLake-like operations
 * (schemas, tables, views, macros, columns, files, delete files, stats,
 * tags, column tags, options, mappings, partitions, sorts, inline rows,
 * gc files, expiry), each turned into the store_commit calls DuckLake's
 * write would make. After every commit:
 *   (a) reads at the head, random retained snapshots (all of them every
 *       CHECK_ALL_EVERY ops and at the end) and for one table equal the model;
 *   (b) the current load equals the model's live rows and reads exactly that
 *       many keys (so no history key);
 *   (c) the name and delete_target directories answer as the live rows say,
 *       and hold nothing else (census);
 *   (d) every ABORT_EVERY ops a commit aborted by an injected fault leaves
 *       head, census and load unchanged; every REOPEN_EVERY ops the store is
 *       closed and reopened and must read the same;
 *   (e) at every reopen and at the end, store_verify finds no problem (the
 *       verifier has no false alarm on any store these operations make).
 * MORAINE_STORE_OPS (ops per seed) and MORAINE_SEED (one seed) override the
 * defaults; a failing seed is printed for replay. MORAINE_SEED_SHARD=I/N runs
 * only the default seeds whose index is I modulo N (ctest runs N shards side
 * by side).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_test_util.h"

#define DEFAULT_OPS 300
#define CHECK_ALL_EVERY 50
#define ABORT_EVERY 10
#define REOPEN_EVERY 75
static const uint64_t default_seeds[] = {1, 2, 3, 4, 5, 6}; /* 1800 ops by default */

/* ---- PRNG (splitmix64) --------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static unsigned rn(unsigned n) { return n ? (unsigned)(rnd() % n) : 0; }

/* ---- the model ----------------------------------------------------------- */

typedef struct row {
  mr_key key;     /* current form */
  bool versioned; /* current/history entity */
  bool timed;     /* visibility by begin/end (versioned, inline rows, schema_version) */
  bool live;      /* in current / inline / schema_version now */
  uint64_t begin;
  bool has_end;
  uint64_t end;
  uint8_t *val;
  size_t len;
} row;

typedef struct snaprec {
  uint64_t id;
  uint8_t *val;
  size_t len;
} snaprec;

typedef struct model {
  row *rows;
  size_t n, cap;
  snaprec *snaps;
  size_t ns, caps;
  uint64_t next_catalog_id, next_file_id, schema_version;
} model;

static uint8_t *dup_bytes(const uint8_t *p, size_t n) {
  uint8_t *d = malloc(n ? n : 1);
  assert_non_null(d);
  if (n)
    memcpy(d, p, n);
  return d;
}

static model *model_clone(const model *m) {
  model *c = calloc(1, sizeof *c);
  assert_non_null(c);
  *c = *m;
  c->rows = malloc((m->cap ? m->cap : 1) * sizeof *c->rows);
  c->snaps = malloc((m->caps ? m->caps : 1) * sizeof *c->snaps);
  assert_non_null(c->rows);
  assert_non_null(c->snaps);
  for (size_t i = 0; i < m->n; i++) {
    c->rows[i] = m->rows[i];
    c->rows[i].val = dup_bytes(m->rows[i].val, m->rows[i].len);
  }
  for (size_t i = 0; i < m->ns; i++) {
    c->snaps[i] = m->snaps[i];
    c->snaps[i].val = dup_bytes(m->snaps[i].val, m->snaps[i].len);
  }
  return c;
}

static void model_free(model *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n; i++)
    free(m->rows[i].val);
  for (size_t i = 0; i < m->ns; i++)
    free(m->snaps[i].val);
  free(m->rows);
  free(m->snaps);
  free(m);
}

static row *row_add(model *m) {
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 64;
    m->rows = realloc(m->rows, m->cap * sizeof *m->rows);
    assert_non_null(m->rows);
  }
  row *r = &m->rows[m->n++];
  memset(r, 0, sizeof *r);
  return r;
}

static void row_remove(model *m, size_t i) {
  free(m->rows[i].val);
  m->rows[i] = m->rows[--m->n];
}

static bool key_eq(const mr_key *a, const mr_key *b) { return mr_key_compare(a, b) == 0; }

/* The live row under current key k, or NULL. */
static row *live_row(model *m, const mr_key *k) {
  for (size_t i = 0; i < m->n; i++)
    if (m->rows[i].live && key_eq(&m->rows[i].key, k))
      return &m->rows[i];
  return NULL;
}

static mr_key key1(mr_key_kind kind, uint64_t a) { return (mr_key){.kind = kind, .c = {a}}; }
static mr_key key2(mr_key_kind kind, uint64_t a, uint64_t b) { return (mr_key){.kind = kind, .c = {a, b}}; }
static mr_key key3(mr_key_kind kind, uint64_t a, uint64_t b, uint64_t c) {
  return (mr_key){.kind = kind, .c = {a, b, c}};
}

/* Picks a random live row of kind (table t if t != 0), or NULL. */
static row *pick(model *m, mr_key_kind kind, uint64_t t) {
  size_t count = 0;
  for (size_t i = 0; i < m->n; i++)
    if (m->rows[i].live && m->rows[i].key.kind == kind && (t == 0 || m->rows[i].key.c[0] == t))
      count++;
  if (count == 0)
    return NULL;
  size_t want = rn((unsigned)count);
  for (size_t i = 0; i < m->n; i++)
    if (m->rows[i].live && m->rows[i].key.kind == kind && (t == 0 || m->rows[i].key.c[0] == t) && want-- == 0)
      return &m->rows[i];
  return NULL;
}

/* Largest component `comp` among all rows of kind in table t (live or not). */
static uint64_t max_comp(model *m, mr_key_kind kind, uint64_t t, int comp) {
  uint64_t mx = 0;
  for (size_t i = 0; i < m->n; i++)
    if (m->rows[i].key.kind == kind && m->rows[i].key.c[0] == t && m->rows[i].key.c[comp] > mx)
      mx = m->rows[i].key.c[comp];
  return mx;
}

static ProtobufCMessage *decode_row(const row *r) {
  ProtobufCMessage *msg = NULL;
  mr_error e;
  mr_key k = r->key;
  if (r->versioned && !r->live) { /* an ended version: its history key */
    k.history = true;
    k.c[mr_key_kind_get(k.kind)->ncomp] = r->end;
  }
  mr_status rc = mr_value_decode(&k, r->val, r->len, &msg, &e);
  if (rc)
    fprintf(stderr, "model decode: %s\n", e.msg);
  assert_int_equal(rc, MR_OK);
  return msg;
}

static void set_i64(ProtobufCMessage *msg, const char *field, int64_t v) {
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);
  assert_non_null(f);
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
    *(protobuf_c_boolean *)((char *)msg + f->quantifier_offset) = 1;
  memcpy((char *)msg + f->offset, &v, sizeof v);
}

/* ---- a transaction: model working copy + store commit -------------------- */

typedef struct tx {
  model *m; /* working copy */
  store_commit *c;
  uint64_t S; /* the snapshot this commit creates (0 = none) */
  mr_error err;
} tx;

static void ok_or_die(mr_status rc, const mr_error *e, const char *what) {
  if (rc)
    fprintf(stderr, "%s: %s\n", what, e->msg);
  assert_int_equal(rc, MR_OK);
}

static void encode(mr_key_kind kind, const ProtobufCMessage *msg, uint8_t **val, size_t *len) {
  mr_error e;
  ok_or_die(mr_value_encode(kind, msg, val, len, &e), &e, "encode");
}

/* A new version / record under current key k (replacing an unversioned one). */
static void tx_put(tx *t, const mr_key *k, const ProtobufCMessage *msg) {
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  row *r = live_row(t->m, k);
  if (r == NULL) {
    r = row_add(t->m);
    r->key = *k;
  } else {
    free(r->val);
  }
  r->versioned = ki->flags & MR_KF_VERSIONED;
  r->live = true;
  uint64_t begin = 0, end = 0;
  const ProtobufCFieldDescriptor *fb = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "begin_snapshot");
  r->timed = fb != NULL;
  if (fb)
    memcpy(&begin, (const char *)msg + fb->offset, sizeof begin);
  const ProtobufCFieldDescriptor *fe = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "end_snapshot");
  r->has_end = fe && *(const protobuf_c_boolean *)((const char *)msg + fe->quantifier_offset);
  if (r->has_end)
    memcpy(&end, (const char *)msg + fe->offset, sizeof end);
  r->begin = begin;
  r->end = end;
  encode(k->kind, msg, &r->val, &r->len);
  ok_or_die(store_commit_put(t->c, k, msg, &t->err), &t->err, "store_commit_put");
}

/* Ends the live version under k at this commit's snapshot. */
static void tx_end(tx *t, const mr_key *k) {
  row *r = live_row(t->m, k);
  assert_non_null(r);
  assert_true(r->versioned);
  ProtobufCMessage *msg = decode_row(r);
  set_i64(msg, "end_snapshot", (int64_t)t->S);
  free(r->val);
  encode(k->kind, msg, &r->val, &r->len);
  r->live = false;
  r->has_end = true;
  r->end = t->S;
  ok_or_die(store_commit_end(t->c, k, msg, &t->err), &t->err, "store_commit_end");
  mr_value_free(msg);
}

static void tx_del(tx *t, const mr_key *k) {
  for (size_t i = 0; i < t->m->n; i++)
    if (t->m->rows[i].live && key_eq(&t->m->rows[i].key, k)) {
      row_remove(t->m, i);
      break;
    }
  ok_or_die(store_commit_delete(t->c, k, &t->err), &t->err, "store_commit_delete");
}

static void tx_snapshot(tx *t, const char *changes, uint64_t target) {
  Moraine__V1__Snapshot s = MORAINE__V1__SNAPSHOT__INIT;
  s.snapshot_id = (int64_t)t->S;
  s.has_snapshot_time = 1;
  s.snapshot_time = 1700000000000000 + (int64_t)t->S;
  s.has_schema_version = 1;
  s.schema_version = (int64_t)t->m->schema_version;
  s.has_next_catalog_id = 1;
  s.next_catalog_id = (int64_t)t->m->next_catalog_id;
  s.has_next_file_id = 1;
  s.next_file_id = (int64_t)t->m->next_file_id;
  s.changes_made = (char *)changes;
  s.n_deleted_from_data_files = target ? 1 : 0;
  s.deleted_from_data_files = &target;
  ok_or_die(store_commit_snapshot(t->c, &s, &t->err), &t->err, "store_commit_snapshot");
  model *m = t->m;
  if (m->ns == m->caps) {
    m->caps = m->caps ? 2 * m->caps : 64;
    m->snaps = realloc(m->snaps, m->caps * sizeof *m->snaps);
    assert_non_null(m->snaps);
  }
  snaprec *r = &m->snaps[m->ns++];
  r->id = t->S;
  encode(MR_KK_SNAPSHOT, &s.base, &r->val, &r->len);
}

/* ---- DuckLake-like operations ------------------------------------------- */

static char namebuf[128];
static char *fmt_name(const char *p, uint64_t id, uint64_t s) {
  snprintf(namebuf, sizeof namebuf, "%s%llu_%llu", p, (unsigned long long)id, (unsigned long long)s);
  return namebuf;
}

static void sv_row(tx *t, uint64_t table_id) {
  t->m->schema_version++;
  Moraine__V1__SchemaVersion v = MORAINE__V1__SCHEMA_VERSION__INIT;
  v.begin_snapshot = (int64_t)t->S;
  v.has_schema_version = 1;
  v.schema_version = (int64_t)t->m->schema_version;
  v.table_id = (int64_t)table_id;
  mr_key k = key2(MR_KK_SCHEMA_VERSION, table_id, t->S);
  tx_put(t, &k, &v.base);
}

static void put_schema(tx *t, uint64_t id, const char *name) {
  Moraine__V1__Schema s = MORAINE__V1__SCHEMA__INIT;
  s.schema_id = (int64_t)id;
  s.begin_snapshot = (int64_t)t->S;
  s.schema_name = (char *)name;
  s.path = (char *)"p/";
  s.has_path_is_relative = 1;
  s.path_is_relative = 1;
  mr_key k = key1(MR_KK_SCHEMA, id);
  tx_put(t, &k, &s.base);
}

static void put_table(tx *t, uint64_t id, uint64_t schema, const char *name) {
  Moraine__V1__Table x = MORAINE__V1__TABLE__INIT;
  x.table_id = (int64_t)id;
  x.begin_snapshot = (int64_t)t->S;
  x.has_schema_id = 1;
  x.schema_id = (int64_t)schema;
  x.table_name = (char *)name;
  mr_key k = key1(MR_KK_TABLE, id);
  tx_put(t, &k, &x.base);
}

static void put_column(tx *t, uint64_t table, uint64_t col, const char *type, Moraine__V1__ColumnTag **tags,
                       size_t ntags, uint64_t begin) {
  Moraine__V1__Column c = MORAINE__V1__COLUMN__INIT;
  c.column_id = (int64_t)col;
  c.table_id = (int64_t)table;
  c.begin_snapshot = (int64_t)begin;
  c.has_column_order = 1;
  c.column_order = (int64_t)col;
  char nm[32];
  snprintf(nm, sizeof nm, "c%llu_%llu", (unsigned long long)col, (unsigned long long)t->S);
  c.column_name = nm;
  c.column_type = (char *)type;
  c.has_nulls_allowed = 1;
  c.nulls_allowed = 1;
  c.n_column_tag = ntags;
  c.column_tag = tags;
  mr_key k = key2(MR_KK_COLUMN, table, col);
  tx_put(t, &k, &c.base);
}

static void put_tstat(tx *t, uint64_t table) {
  Moraine__V1__TableStats s = MORAINE__V1__TABLE_STATS__INIT;
  s.table_id = (int64_t)table;
  s.has_record_count = 1;
  s.record_count = (int64_t)rn(100000);
  s.has_next_row_id = 1;
  s.next_row_id = (int64_t)t->S * 1000;
  mr_key k = key1(MR_KK_TSTAT, table);
  tx_put(t, &k, &s.base);
}

static void op_create_schema(tx *t) {
  uint64_t id = t->m->next_catalog_id++;
  put_schema(t, id, fmt_name("s", id, 0));
}

static void op_rename_schema(tx *t) {
  row *r = pick(t->m, MR_KK_SCHEMA, 0);
  if (r == NULL)
    return op_create_schema(t);
  mr_key k = r->key;
  tx_end(t, &k);
  put_schema(t, k.c[0], fmt_name("s", k.c[0], t->S));
}

static void op_drop_schema(tx *t) {
  for (int tries = 0; tries < 4; tries++) {
    row *r = pick(t->m, MR_KK_SCHEMA, 0);
    if (r == NULL)
      break;
    uint64_t id = r->key.c[0];
    bool used = false;
    for (size_t i = 0; i < t->m->n && !used; i++) {
      row *x = &t->m->rows[i];
      if (x->live && (x->key.kind == MR_KK_TABLE || x->key.kind == MR_KK_VIEW || x->key.kind == MR_KK_MACRO)) {
        ProtobufCMessage *msg = decode_row(x);
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "schema_id");
        int64_t sid;
        memcpy(&sid, (char *)msg + f->offset, sizeof sid);
        used = (uint64_t)sid == id;
        mr_value_free(msg);
      }
    }
    if (!used) {
      mr_key k = r->key;
      tx_end(t, &k);
      return;
    }
  }
  op_create_schema(t);
}

static void op_create_table(tx *t) {
  row *s = pick(t->m, MR_KK_SCHEMA, 0);
  if (s == NULL)
    return op_create_schema(t);
  uint64_t sid = s->key.c[0];
  uint64_t id = t->m->next_catalog_id++;
  put_table(t, id, sid, fmt_name("t", id, 0));
  unsigned ncols = 1 + rn(4);
  for (unsigned c = 1; c <= ncols; c++)
    put_column(t, id, c, c % 2 ? "BIGINT" : "VARCHAR", NULL, 0, t->S);
  put_tstat(t, id);
  sv_row(t, id);
}

static void op_alter_table(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  mr_key k = r->key;
  uint64_t schema = 0;
  ProtobufCMessage *msg = decode_row(r);
  schema = (uint64_t)((Moraine__V1__Table *)msg)->schema_id;
  mr_value_free(msg);
  if (rn(3) == 0) { /* move to another schema */
    row *s = pick(t->m, MR_KK_SCHEMA, 0);
    if (s)
      schema = s->key.c[0];
  }
  tx_end(t, &k);
  put_table(t, k.c[0], schema, fmt_name("t", k.c[0], t->S));
  sv_row(t, k.c[0]);
}

/* Ends every live row of kind in table id. */
static void end_all(tx *t, mr_key_kind kind, uint64_t table) {
  for (size_t i = 0; i < t->m->n; i++) {
    row *x = &t->m->rows[i];
    if (x->live && x->key.kind == kind && x->key.c[0] == table) {
      mr_key k = x->key;
      tx_end(t, &k);
    }
  }
}

static void del_all(tx *t, mr_key_kind kind, uint64_t table) {
  for (size_t i = 0; i < t->m->n;) {
    row *x = &t->m->rows[i];
    if (x->live && x->key.kind == kind && x->key.c[0] == table) {
      mr_key k = x->key;
      tx_del(t, &k); /* moves the last row into i */
    } else {
      i++;
    }
  }
}

static void op_drop_table(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t id = r->key.c[0];
  static const mr_key_kind versioned[] = {MR_KK_TABLE, MR_KK_COLUMN, MR_KK_PARTITION, MR_KK_SORT, MR_KK_FILE,
                                          MR_KK_DELFILE};
  for (size_t i = 0; i < sizeof versioned / sizeof *versioned; i++)
    end_all(t, versioned[i], id);
  del_all(t, MR_KK_TSTAT, id);
  del_all(t, MR_KK_TCSTAT, id);
}

static void op_add_column(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t id = r->key.c[0];
  put_column(t, id, max_comp(t->m, MR_KK_COLUMN, id, 1) + 1, "DOUBLE", NULL, 0, t->S);
  sv_row(t, id);
}

static void op_alter_column(tx *t) {
  row *r = pick(t->m, MR_KK_COLUMN, 0);
  if (r == NULL)
    return op_add_column(t);
  mr_key k = r->key;
  tx_end(t, &k);
  if (rn(3)) /* rename or retype: a new version */
    put_column(t, k.c[0], k.c[1], rn(2) ? "INTEGER" : "VARCHAR", NULL, 0, t->S);
  sv_row(t, k.c[0]);
}

/* Column tags: rewrite the live column in place with a tag appended/ended. */
static void op_column_tag(tx *t) {
  row *r = pick(t->m, MR_KK_COLUMN, 0);
  if (r == NULL)
    return op_add_column(t);
  mr_key k = r->key;
  Moraine__V1__Column *c = (Moraine__V1__Column *)decode_row(r);
  Moraine__V1__ColumnTag *tags[16], extra = MORAINE__V1__COLUMN_TAG__INIT;
  size_t n = c->n_column_tag < 15 ? c->n_column_tag : 15;
  for (size_t i = 0; i < n; i++)
    tags[i] = c->column_tag[i];
  bool ended = false;
  for (size_t i = 0; i < n && !ended; i++)
    if (!tags[i]->has_end_snapshot && rn(2)) {
      tags[i]->has_end_snapshot = 1;
      tags[i]->end_snapshot = (int64_t)t->S;
      ended = true;
    }
  if (!ended) {
    extra.begin_snapshot = (int64_t)t->S;
    extra.key = (char *)"comment";
    extra.value = fmt_name("v", k.c[1], t->S);
    tags[n++] = &extra;
  }
  /* same version, same begin: an in-place rewrite of the live column */
  Moraine__V1__Column copy = *c;
  copy.n_column_tag = n;
  copy.column_tag = tags;
  tx_put(t, &k, &copy.base);
  mr_value_free(&c->base);
}

static void op_add_files(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t id = r->key.c[0];
  unsigned nfiles = 1 + rn(3);
  for (unsigned i = 0; i < nfiles; i++) {
    uint64_t f = t->m->next_file_id++;
    Moraine__V1__DataFile d = MORAINE__V1__DATA_FILE__INIT;
    d.data_file_id = (int64_t)f;
    d.table_id = (int64_t)id;
    d.begin_snapshot = (int64_t)t->S;
    d.path = fmt_name("f", f, t->S);
    d.file_format = (char *)"parquet";
    d.has_record_count = 1;
    d.record_count = (int64_t)rn(1000);
    mr_key k = key2(MR_KK_FILE, id, f);
    tx_put(t, &k, &d.base);
    for (size_t j = 0; j < t->m->n; j++) {
      row *c = &t->m->rows[j];
      if (!c->live || c->key.kind != MR_KK_COLUMN || c->key.c[0] != id)
        continue;
      uint64_t col = c->key.c[1];
      Moraine__V1__FileColumnStats s = MORAINE__V1__FILE_COLUMN_STATS__INIT;
      s.data_file_id = (int64_t)f;
      s.table_id = (int64_t)id;
      s.column_id = (int64_t)col;
      s.has_value_count = 1;
      s.value_count = (int64_t)rn(1000);
      s.min_value = (char *)"10";
      s.max_value = (char *)"9";
      mr_key sk = key3(MR_KK_FSTAT, id, f, col);
      tx_put(t, &sk, &s.base);
      Moraine__V1__TableColumnStats tc = MORAINE__V1__TABLE_COLUMN_STATS__INIT;
      tc.table_id = (int64_t)id;
      tc.column_id = (int64_t)col;
      tc.has_contains_null = 1;
      tc.contains_null = rn(2);
      tc.max_value = fmt_name("m", f, t->S);
      mr_key tk = key2(MR_KK_TCSTAT, id, col);
      tx_put(t, &tk, &tc.base);
    }
  }
  put_tstat(t, id);
}

static uint64_t op_add_delete(tx *t) {
  row *r = pick(t->m, MR_KK_FILE, 0);
  if (r == NULL) {
    op_add_files(t);
    return 0;
  }
  uint64_t table = r->key.c[0], f = r->key.c[1];
  /* DuckLake replaces the delete file of a data file: end the old one. */
  for (size_t i = 0; i < t->m->n; i++) {
    row *x = &t->m->rows[i];
    if (!x->live || x->key.kind != MR_KK_DELFILE || x->key.c[0] != table)
      continue;
    Moraine__V1__DeleteFile *d = (Moraine__V1__DeleteFile *)decode_row(x);
    bool same = (uint64_t)d->data_file_id == f;
    mr_value_free(&d->base);
    if (same && rn(4)) {
      mr_key k = x->key;
      tx_end(t, &k);
    }
  }
  uint64_t id = t->m->next_file_id++;
  Moraine__V1__DeleteFile d = MORAINE__V1__DELETE_FILE__INIT;
  d.delete_file_id = (int64_t)id;
  d.table_id = (int64_t)table;
  d.begin_snapshot = (int64_t)t->S;
  d.has_data_file_id = 1;
  d.data_file_id = (int64_t)f;
  d.path = fmt_name("d", id, t->S);
  d.has_delete_count = 1;
  d.delete_count = 1 + rn(10);
  mr_key k = key2(MR_KK_DELFILE, table, id);
  tx_put(t, &k, &d.base);
  return f;
}

static void op_drop_file(tx *t) {
  row *r = pick(t->m, MR_KK_FILE, 0);
  if (r == NULL)
    return op_add_files(t);
  uint64_t table = r->key.c[0], f = r->key.c[1];
  mr_key k = r->key;
  tx_end(t, &k);
  for (size_t i = 0; i < t->m->n; i++) {
    row *x = &t->m->rows[i];
    if (!x->live || x->key.kind != MR_KK_DELFILE || x->key.c[0] != table)
      continue;
    Moraine__V1__DeleteFile *d = (Moraine__V1__DeleteFile *)decode_row(x);
    bool same = (uint64_t)d->data_file_id == f;
    mr_value_free(&d->base);
    if (same) {
      mr_key dk = x->key;
      tx_end(t, &dk);
    }
  }
  Moraine__V1__GcFile g = MORAINE__V1__GC_FILE__INIT;
  g.data_file_id = (int64_t)f;
  g.path = fmt_name("f", f, 0);
  g.has_schedule_start = 1;
  g.schedule_start = (int64_t)t->S;
  mr_key gk = key1(MR_KK_GCFILE, f);
  tx_put(t, &gk, &g.base);
}

static void op_tag(tx *t) {
  row *obj = rn(2) ? pick(t->m, MR_KK_TABLE, 0) : pick(t->m, MR_KK_SCHEMA, 0);
  if (obj == NULL)
    return op_create_schema(t);
  uint64_t oid = obj->key.c[0];
  mr_key k = key1(MR_KK_TAG, oid);
  row *cur = live_row(t->m, &k);
  Moraine__V1__Tag *old = cur ? (Moraine__V1__Tag *)decode_row(cur) : NULL;
  Moraine__V1__TagEntry *entries[32], extra = MORAINE__V1__TAG_ENTRY__INIT;
  size_t n = old ? (old->n_entries < 31 ? old->n_entries : 31) : 0;
  for (size_t i = 0; i < n; i++)
    entries[i] = old->entries[i];
  bool ended = false;
  for (size_t i = 0; i < n && !ended; i++)
    if (!entries[i]->has_end_snapshot && rn(2)) {
      entries[i]->has_end_snapshot = 1;
      entries[i]->end_snapshot = (int64_t)t->S;
      ended = true;
    }
  if (!ended) {
    extra.key = (char *)"owner";
    extra.value = fmt_name("o", oid, t->S);
    extra.begin_snapshot = (int64_t)t->S;
    entries[n++] = &extra;
  }
  Moraine__V1__Tag tag = MORAINE__V1__TAG__INIT;
  tag.object_id = (int64_t)oid;
  tag.n_entries = n;
  tag.entries = entries;
  tx_put(t, &k, &tag.base);
  if (old)
    mr_value_free(&old->base);
}

/* Options-only: no snapshot (the caller commits without one). */
static void op_option(tx *t) {
  uint64_t scope = rn(3), sid = 0;
  if (scope == MR_SCOPE_SCHEMA || scope == MR_SCOPE_TABLE) {
    row *r = pick(t->m, scope == MR_SCOPE_SCHEMA ? MR_KK_SCHEMA : MR_KK_TABLE, 0);
    if (r == NULL)
      scope = MR_SCOPE_GLOBAL;
    else
      sid = r->key.c[0];
  }
  mr_key k = key2(MR_KK_OPTION, scope, sid);
  row *cur = live_row(t->m, &k);
  if (cur && rn(4) == 0) {
    tx_del(t, &k);
    return;
  }
  Moraine__V1__OptionEntry e1 = MORAINE__V1__OPTION_ENTRY__INIT, e2 = MORAINE__V1__OPTION_ENTRY__INIT;
  e1.key = (char *)"target_file_size";
  char v[32];
  snprintf(v, sizeof v, "%u", rn(1000000));
  e1.value = v;
  e2.key = (char *)"data_inlining_row_limit";
  e2.value = (char *)"10";
  Moraine__V1__OptionEntry *es[2] = {&e1, &e2};
  Moraine__V1__Option o = MORAINE__V1__OPTION__INIT;
  o.scope_kind = scope;
  o.scope_id = (int64_t)sid;
  o.n_entries = 1 + rn(2);
  o.entries = es;
  tx_put(t, &k, &o.base);
}

static void op_mapping(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t id = t->m->next_file_id++;
  Moraine__V1__NameMapping nm = MORAINE__V1__NAME_MAPPING__INIT;
  nm.has_column_id = 1;
  nm.column_id = 1;
  nm.source_name = (char *)"src";
  Moraine__V1__NameMapping *nms[1] = {&nm};
  Moraine__V1__ColumnMapping m = MORAINE__V1__COLUMN_MAPPING__INIT;
  m.mapping_id = (int64_t)id;
  m.table_id = (int64_t)r->key.c[0];
  m.type = (char *)"map_by_name";
  m.n_name_mapping = 1;
  m.name_mapping = nms;
  mr_key k = key2(MR_KK_MAPPING, r->key.c[0], id);
  tx_put(t, &k, &m.base);
}

static void op_partition_or_sort(tx *t, mr_key_kind kind) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t table = r->key.c[0];
  end_all(t, kind, table);
  uint64_t id = t->m->next_catalog_id++;
  mr_key k = key2(kind, table, id);
  if (kind == MR_KK_PARTITION) {
    Moraine__V1__PartitionColumn pc = MORAINE__V1__PARTITION_COLUMN__INIT;
    pc.has_column_id = 1;
    pc.column_id = 1;
    pc.transform = (char *)"identity";
    Moraine__V1__PartitionColumn *pcs[1] = {&pc};
    Moraine__V1__Partition p = MORAINE__V1__PARTITION__INIT;
    p.partition_id = (int64_t)id;
    p.table_id = (int64_t)table;
    p.begin_snapshot = (int64_t)t->S;
    p.n_partition_column = 1;
    p.partition_column = pcs;
    tx_put(t, &k, &p.base);
  } else {
    Moraine__V1__SortExpression se = MORAINE__V1__SORT_EXPRESSION__INIT;
    se.expression = (char *)"c1";
    se.sort_direction = (char *)"ASC";
    Moraine__V1__SortExpression *ses[1] = {&se};
    Moraine__V1__Sort s = MORAINE__V1__SORT__INIT;
    s.sort_id = (int64_t)id;
    s.table_id = (int64_t)table;
    s.begin_snapshot = (int64_t)t->S;
    s.n_sort_expression = 1;
    s.sort_expression = ses;
    tx_put(t, &k, &s.base);
  }
}

static void op_view_or_macro(tx *t, mr_key_kind kind) {
  row *old = pick(t->m, kind, 0);
  if (old && rn(2)) {
    mr_key k = old->key;
    tx_end(t, &k);
    return;
  }
  row *s = pick(t->m, MR_KK_SCHEMA, 0);
  if (s == NULL)
    return op_create_schema(t);
  uint64_t id = t->m->next_catalog_id++;
  mr_key k = key1(kind, id);
  if (kind == MR_KK_VIEW) {
    Moraine__V1__View v = MORAINE__V1__VIEW__INIT;
    v.view_id = (int64_t)id;
    v.begin_snapshot = (int64_t)t->S;
    v.has_schema_id = 1;
    v.schema_id = (int64_t)s->key.c[0];
    v.view_name = fmt_name("v", id, 0);
    v.sql = (char *)"SELECT 1";
    tx_put(t, &k, &v.base);
  } else {
    Moraine__V1__MacroImpl mi = MORAINE__V1__MACRO_IMPL__INIT;
    mi.has_impl_id = 1;
    mi.sql = (char *)"x + 1";
    Moraine__V1__MacroImpl *mis[1] = {&mi};
    Moraine__V1__MacroParameter mp = MORAINE__V1__MACRO_PARAMETER__INIT;
    mp.parameter_name = (char *)"x";
    Moraine__V1__MacroParameter *mps[1] = {&mp};
    Moraine__V1__Macro m = MORAINE__V1__MACRO__INIT;
    m.macro_id = (int64_t)id;
    m.begin_snapshot = (int64_t)t->S;
    m.has_schema_id = 1;
    m.schema_id = (int64_t)s->key.c[0];
    m.macro_name = fmt_name("m", id, 0);
    m.n_macro_impl = 1;
    m.macro_impl = mis;
    m.n_macro_parameters = 1;
    m.macro_parameters = mps;
    tx_put(t, &k, &m.base);
  }
}

static void op_inline(tx *t) {
  row *r = pick(t->m, MR_KK_TABLE, 0);
  if (r == NULL)
    return op_create_table(t);
  uint64_t table = r->key.c[0];
  row *live = pick(t->m, MR_KK_INLINE_ROW, table);
  if (live && !live->has_end && rn(2)) { /* inline delete: end the row */
    mr_key k = live->key;
    Moraine__V1__InlineDataRow *d = (Moraine__V1__InlineDataRow *)decode_row(live);
    d->has_end_snapshot = 1;
    d->end_snapshot = (int64_t)t->S;
    tx_put(t, &k, &d->base);
    mr_value_free(&d->base);
    return;
  }
  if (rn(4) == 0) { /* a delete against a data file, inlined */
    row *f = pick(t->m, MR_KK_FILE, table);
    if (f) {
      Moraine__V1__InlineDeleteRow d = MORAINE__V1__INLINE_DELETE_ROW__INIT;
      d.table_id = (int64_t)table;
      d.file_id = (int64_t)f->key.c[1];
      d.row_id = (int64_t)rn(1000);
      d.begin_snapshot = (int64_t)t->S;
      mr_key k = key3(MR_KK_INLINE_DELETE_ROW, table, f->key.c[1], (uint64_t)d.row_id);
      /* as DuckLake creates ducklake_inlined_delete_T before its first row */
      mr_key dk = key1(MR_KK_INLINE_DELETE_TABLE, table);
      if (live_row(t->m, &dk) == NULL) {
        Moraine__V1__InlineDeleteTable dt = MORAINE__V1__INLINE_DELETE_TABLE__INIT;
        char dname[64];
        snprintf(dname, sizeof dname, "ducklake_inlined_delete_%llu", (unsigned long long)table);
        dt.table_id = (int64_t)table;
        dt.table_name = dname;
        tx_put(t, &dk, &dt.base);
      }
      if (live_row(t->m, &k) == NULL)
        tx_put(t, &k, &d.base);
      return;
    }
  }
  uint64_t sv = t->m->schema_version;
  mr_key tk = key2(MR_KK_INLINE_TABLE, table, sv);
  if (live_row(t->m, &tk) == NULL) {
    Moraine__V1__InlineColumn ic = MORAINE__V1__INLINE_COLUMN__INIT;
    ic.name = (char *)"c1";
    ic.type = (char *)"BIGINT";
    Moraine__V1__InlineColumn *ics[1] = {&ic};
    Moraine__V1__InlineDataTable dt = MORAINE__V1__INLINE_DATA_TABLE__INIT;
    dt.table_id = (int64_t)table;
    dt.schema_version = (int64_t)sv;
    dt.n_column = 1;
    dt.column = ics;
    tx_put(t, &tk, &dt.base);
  }
  uint64_t row_id = max_comp(t->m, MR_KK_INLINE_ROW, table, 2) + 1;
  unsigned nrows = 1 + rn(5);
  for (unsigned i = 0; i < nrows; i++) {
    char v[16];
    snprintf(v, sizeof v, "%u", rn(100));
    Moraine__V1__InlineCell cell = MORAINE__V1__INLINE_CELL__INIT;
    cell.is_null = rn(5) == 0;
    cell.value = (ProtobufCBinaryData){strlen(v), (uint8_t *)v};
    Moraine__V1__InlineCell *cells[1] = {&cell};
    Moraine__V1__InlineDataRow d = MORAINE__V1__INLINE_DATA_ROW__INIT;
    d.table_id = (int64_t)table;
    d.schema_version = (int64_t)sv;
    d.row_id = (int64_t)(row_id + i);
    d.begin_snapshot = (int64_t)t->S;
    d.n_cell = 1;
    d.cell = cells;
    mr_key k = key3(MR_KK_INLINE_ROW, table, sv, row_id + i);
    k.c[3] = t->S; /* begin_snapshot: each inlined row version is its own key */
    tx_put(t, &k, &d.base);
  }
}

/* gc cleanup: a snapshot-less commit removing a scheduled file. */
static void op_gc_cleanup(tx *t) {
  row *r = pick(t->m, MR_KK_GCFILE, 0);
  if (r == NULL)
    return;
  mr_key k = r->key;
  tx_del(t, &k);
}

/* ---- checks ---------------------------------------------------------------- */

typedef struct world {
  store *st;
  model *m;
  char url[4096];
  uint64_t seed;
  unsigned op;
} world;

/* A tag container or column value filtered to the entries live at s. */
static void filtered_bytes(const row *r, uint64_t s, uint8_t **val, size_t *len) {
  if (r->key.kind != MR_KK_TAG && r->key.kind != MR_KK_COLUMN) {
    *val = dup_bytes(r->val, r->len);
    *len = r->len;
    return;
  }
  ProtobufCMessage *msg = decode_row(r);
  if (r->key.kind == MR_KK_TAG) {
    Moraine__V1__Tag *t = (Moraine__V1__Tag *)msg;
    size_t n = 0, all = t->n_entries;
    Moraine__V1__TagEntry **keep = calloc(all + 1, sizeof *keep);
    for (size_t i = 0; i < all; i++) {
      Moraine__V1__TagEntry *e = t->entries[i];
      if ((uint64_t)e->begin_snapshot <= s && (!e->has_end_snapshot || s < (uint64_t)e->end_snapshot))
        keep[n++] = e;
    }
    Moraine__V1__TagEntry **orig = t->entries;
    t->entries = keep;
    t->n_entries = n;
    encode(MR_KK_TAG, msg, val, len);
    t->entries = orig;
    t->n_entries = all;
    free(keep);
  } else {
    Moraine__V1__Column *c = (Moraine__V1__Column *)msg;
    size_t n = 0, all = c->n_column_tag;
    Moraine__V1__ColumnTag **keep = calloc(all + 1, sizeof *keep);
    for (size_t i = 0; i < all; i++) {
      Moraine__V1__ColumnTag *e = c->column_tag[i];
      if ((uint64_t)e->begin_snapshot <= s && (!e->has_end_snapshot || s < (uint64_t)e->end_snapshot))
        keep[n++] = e;
    }
    Moraine__V1__ColumnTag **orig = c->column_tag;
    c->column_tag = keep;
    c->n_column_tag = n;
    encode(MR_KK_COLUMN, msg, val, len);
    c->column_tag = orig;
    c->n_column_tag = all;
    free(keep);
  }
  mr_value_free(msg);
}

static bool in_table(const row *r, uint64_t table) {
  const mr_key_kind_info *ki = mr_key_kind_get(r->key.kind);
  if (ki->flags & MR_KF_TABLE_SCOPED)
    return r->key.c[0] == table;
  if (r->key.kind == MR_KK_TAG)
    return r->key.c[0] == table;
  if (r->key.kind == MR_KK_OPTION)
    return r->key.c[0] == MR_SCOPE_TABLE && r->key.c[1] == table;
  return false;
}

static void model_at(const model *m, uint64_t s, uint64_t table, st_list *out) {
  for (size_t i = 0; i < m->n; i++) {
    const row *r = &m->rows[i];
    if (table && !in_table(r, table))
      continue;
    if (r->timed && !(r->begin <= s && (!r->has_end || s < r->end)))
      continue;
    if (!r->timed && !r->live)
      continue;
    uint8_t *val;
    size_t len;
    filtered_bytes(r, s, &val, &len);
    st_list_add(out, &r->key, val, len);
    free(val);
  }
  st_list_sort(out);
}

static void fail_seed(const world *w, const char *what) {
  fprintf(stderr, "FAILED: seed %llu op %u: %s (replay: MORAINE_SEED=%llu MORAINE_STORE_OPS=%u)\n",
          (unsigned long long)w->seed, w->op, what, (unsigned long long)w->seed, w->op + 1);
  fail();
}

static void check_read_at(world *w, uint64_t s, uint64_t table) {
  st_list got = {0}, want = {0};
  mr_error e;
  mr_status rc = store_read_at(w->st, s, table, st_collect, &got, &e);
  ok_or_die(rc, &e, "store_read_at");
  st_list_sort(&got);
  model_at(w->m, s, table, &want);
  char what[96];
  snprintf(what, sizeof what, "read at snapshot %llu table %llu", (unsigned long long)s, (unsigned long long)table);
  bool ok = st_list_equal(&got, &want, what);
  st_list_free(&got);
  st_list_free(&want);
  if (!ok)
    fail_seed(w, what);
}

static void check_load(world *w) {
  st_list got = {0}, want = {0};
  mr_error e;
  uint64_t before = store_keys_read(w->st);
  ok_or_die(store_load_current(w->st, st_collect, &got, &e), &e, "store_load_current");
  uint64_t touched = store_keys_read(w->st) - before;
  for (size_t i = 0; i < w->m->n; i++) {
    const row *r = &w->m->rows[i];
    if (r->live && mr_key_kind_get(r->key.kind)->subspace == MR_SS_CURRENT)
      st_list_add(&want, &r->key, r->val, r->len);
  }
  st_list_sort(&got);
  st_list_sort(&want);
  bool ok = st_list_equal(&got, &want, "current load");
  if (ok && touched != want.n) {
    fprintf(stderr, "current load read %llu keys for %zu live records\n", (unsigned long long)touched, want.n);
    ok = false;
  }
  st_list_free(&got);
  st_list_free(&want);
  if (!ok)
    fail_seed(w, "current load");
}

static void check_snapshots(world *w) {
  st_list got = {0}, want = {0};
  mr_error e;
  ok_or_die(store_list_snapshots(w->st, st_collect, &got, &e), &e, "store_list_snapshots");
  for (size_t i = 0; i < w->m->ns; i++) {
    mr_key k = key1(MR_KK_SNAPSHOT, w->m->snaps[i].id);
    st_list_add(&want, &k, w->m->snaps[i].val, w->m->snaps[i].len);
  }
  st_list_sort(&want);
  bool ok = st_list_equal(&got, &want, "snapshot list");
  st_list_free(&got);
  st_list_free(&want);
  if (!ok)
    fail_seed(w, "snapshot list");
}

static mr_status count_visit(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  (*(size_t *)ctx)++;
  return MR_OK;
}

static void check_directories(world *w) {
  store_census cs;
  mr_error e;
  ok_or_die(store_take_census(w->st, &cs, &e), &e, "census");
  size_t names = 0, targets = 0;
  for (size_t i = 0; i < w->m->n; i++) {
    const row *r = &w->m->rows[i];
    if (!r->live)
      continue;
    if (r->key.kind == MR_KK_SCHEMA || r->key.kind == MR_KK_TABLE) {
      ProtobufCMessage *msg = decode_row(r);
      bool schema = r->key.kind == MR_KK_SCHEMA;
      const char *name = schema ? ((Moraine__V1__Schema *)msg)->schema_name : ((Moraine__V1__Table *)msg)->table_name;
      uint64_t parent = schema ? 0 : (uint64_t)((Moraine__V1__Table *)msg)->schema_id;
      uint64_t id = 0;
      bool found = false;
      ok_or_die(store_lookup_name(w->st, schema ? MR_NAME_SCHEMA : MR_NAME_TABLE, parent, name, &id, &found, &e), &e,
                "store_lookup_name");
      mr_value_free(msg);
      if (!found || id != r->key.c[0])
        fail_seed(w, "name lookup");
      names++;
    } else if (r->key.kind == MR_KK_FILE) {
      size_t want = 0, got = 0;
      for (size_t j = 0; j < w->m->n; j++) {
        const row *d = &w->m->rows[j];
        if (d->live && d->key.kind == MR_KK_DELFILE && d->key.c[0] == r->key.c[0]) {
          Moraine__V1__DeleteFile *df = (Moraine__V1__DeleteFile *)decode_row(d);
          want += (uint64_t)df->data_file_id == r->key.c[1];
          mr_value_free(&df->base);
        }
      }
      ok_or_die(store_delete_files_for(w->st, r->key.c[0], r->key.c[1], count_visit, &got, &e), &e,
                "store_delete_files_for");
      if (got != want)
        fail_seed(w, "delete files for a data file");
    } else if (r->key.kind == MR_KK_DELFILE) {
      targets++;
    }
  }
  if (cs.subspace[MR_SS_NAME].keys != names || cs.subspace[MR_SS_DELETE_TARGET].keys != targets) {
    fprintf(stderr, "name entries %llu (want %zu), delete_target entries %llu (want %zu)\n",
            (unsigned long long)cs.subspace[MR_SS_NAME].keys, names,
            (unsigned long long)cs.subspace[MR_SS_DELETE_TARGET].keys, targets);
    fail_seed(w, "directory census");
  }
}

static void check_all(world *w, bool every_snapshot) {
  check_load(w);
  check_snapshots(w);
  check_directories(w);
  size_t ns = w->m->ns;
  if (ns == 0)
    return;
  if (every_snapshot) {
    for (size_t i = 0; i < ns; i++)
      check_read_at(w, w->m->snaps[i].id, 0);
  } else {
    check_read_at(w, w->m->snaps[ns - 1].id, 0);
    for (int i = 0; i < 2; i++)
      check_read_at(w, w->m->snaps[rn((unsigned)ns)].id, 0);
  }
  row *t = pick(w->m, MR_KK_TABLE, 0);
  if (t)
    check_read_at(w, w->m->snaps[rn((unsigned)ns)].id, t->key.c[0]);
}

/* ---- driving --------------------------------------------------------------- */

typedef enum op_kind {
  OP_CREATE_SCHEMA, OP_RENAME_SCHEMA, OP_DROP_SCHEMA, OP_CREATE_TABLE, OP_ALTER_TABLE, OP_DROP_TABLE,
  OP_ADD_COLUMN, OP_ALTER_COLUMN, OP_COLUMN_TAG, OP_ADD_FILES, OP_ADD_DELETE, OP_DROP_FILE, OP_TAG, OP_OPTION,
  OP_MAPPING, OP_PARTITION, OP_SORT, OP_VIEW, OP_MACRO, OP_INLINE, OP_GC_CLEANUP, OP_EXPIRE, OP_COUNT
} op_kind;

/* Relative weights: inserts and inline rows dominate, as in DuckLake use. */
static const unsigned op_weight[OP_COUNT] = {3, 2, 1, 5, 2, 1, 2, 2, 2, 12, 5, 3, 2, 2, 2, 1, 1, 1, 1, 8, 1, 1};

static op_kind pick_op(void) {
  unsigned total = 0;
  for (int i = 0; i < OP_COUNT; i++)
    total += op_weight[i];
  unsigned x = rn(total);
  for (int i = 0; i < OP_COUNT; i++) {
    if (x < op_weight[i])
      return (op_kind)i;
    x -= op_weight[i];
  }
  return OP_ADD_FILES;
}

/* Runs op k into t (a fresh commit on a model copy). */
static void run_op(tx *t, op_kind k) {
  uint64_t target = 0;
  const char *changes = "altered";
  switch (k) {
  case OP_CREATE_SCHEMA: op_create_schema(t); changes = "created_schema"; break;
  case OP_RENAME_SCHEMA: op_rename_schema(t); break;
  case OP_DROP_SCHEMA: op_drop_schema(t); changes = "dropped_schema"; break;
  case OP_CREATE_TABLE: op_create_table(t); changes = "created_table"; break;
  case OP_ALTER_TABLE: op_alter_table(t); break;
  case OP_DROP_TABLE: op_drop_table(t); changes = "dropped_table"; break;
  case OP_ADD_COLUMN: op_add_column(t); break;
  case OP_ALTER_COLUMN: op_alter_column(t); break;
  case OP_COLUMN_TAG: op_column_tag(t); break;
  case OP_ADD_FILES: op_add_files(t); changes = "inserted_into_table"; break;
  case OP_ADD_DELETE: target = op_add_delete(t); changes = "deleted_from_table"; break;
  case OP_DROP_FILE: op_drop_file(t); changes = "compacted_table"; break;
  case OP_TAG: op_tag(t); break;
  case OP_MAPPING: op_mapping(t); break;
  case OP_PARTITION: op_partition_or_sort(t, MR_KK_PARTITION); break;
  case OP_SORT: op_partition_or_sort(t, MR_KK_SORT); break;
  case OP_VIEW: op_view_or_macro(t, MR_KK_VIEW); break;
  case OP_MACRO: op_view_or_macro(t, MR_KK_MACRO); break;
  case OP_INLINE: op_inline(t); changes = "inlined_insert"; break;
  case OP_OPTION: op_option(t); return;
  case OP_GC_CLEANUP: op_gc_cleanup(t); return;
  default: return;
  }
  tx_snapshot(t, changes, target);
}

/* Applies expiry below horizon h to the model. */
static void model_expire(model *m, uint64_t h) {
  size_t n = 0;
  for (size_t i = 0; i < m->ns; i++) {
    if (m->snaps[i].id < h)
      free(m->snaps[i].val);
    else
      m->snaps[n++] = m->snaps[i];
  }
  m->ns = n;
  for (size_t i = 0; i < m->n;) {
    row *r = &m->rows[i];
    if (r->versioned && !r->live && r->end <= h)
      row_remove(m, i);
    else
      i++;
  }
  for (size_t i = 0; i < m->n;) {
    row *r = &m->rows[i];
    if (r->key.kind == MR_KK_FSTAT) {
      bool file = false;
      for (size_t j = 0; j < m->n && !file; j++)
        file = m->rows[j].key.kind == MR_KK_FILE && m->rows[j].key.c[0] == r->key.c[0] &&
               m->rows[j].key.c[1] == r->key.c[1];
      if (!file) {
        row_remove(m, i);
        continue;
      }
    }
    if (r->key.kind == MR_KK_TAG) {
      Moraine__V1__Tag *t = (Moraine__V1__Tag *)decode_row(r);
      size_t all = t->n_entries, k = 0;
      Moraine__V1__TagEntry **keep = calloc(all + 1, sizeof *keep);
      for (size_t j = 0; j < all; j++)
        if (!(t->entries[j]->has_end_snapshot && (uint64_t)t->entries[j]->end_snapshot <= h))
          keep[k++] = t->entries[j];
      if (k == 0) {
        free(keep);
        mr_value_free(&t->base);
        row_remove(m, i);
        continue;
      }
      Moraine__V1__TagEntry **orig = t->entries;
      t->entries = keep;
      t->n_entries = k;
      free(r->val);
      encode(MR_KK_TAG, &t->base, &r->val, &r->len);
      t->entries = orig;
      t->n_entries = all;
      free(keep);
      mr_value_free(&t->base);
    }
    i++;
  }
}

static mr_status fault_abort(void *ctx, const char *point, mr_error *err) {
  return mr_fail(err, MR_ERR_IO, "injected fault at %s", point);
}

static void census_equal(world *w, const store_census *a, const store_census *b, const char *what) {
  if (memcmp(a, b, sizeof *a) != 0)
    fail_seed(w, what);
}

/* A random commit built on a throwaway model copy and aborted by a fault. */
static void check_abort(world *w) {
  store_census before, after;
  mr_error e;
  ok_or_die(store_take_census(w->st, &before, &e), &e, "census");
  store_head h = store_get_head(w->st);
  tx t = {.m = model_clone(w->m), .S = h.snapshot_id + 1};
  ok_or_die(store_commit_begin(w->st, h, &t.c, &e), &e, "begin");
  run_op(&t, pick_op());
  store_set_fault(w->st, fault_abort, NULL);
  mr_status rc = store_commit_write(t.c, NULL, &e);
  store_set_fault(w->st, NULL, NULL);
  model_free(t.m);
  if (rc != MR_ERR_IO || store_failed(w->st, NULL) != MR_OK)
    fail_seed(w, "injected abort did not fail cleanly");
  store_head h2 = store_get_head(w->st);
  ok_or_die(store_take_census(w->st, &after, &e), &e, "census");
  if (h2.snapshot_id != h.snapshot_id || h2.batch_count != h.batch_count)
    fail_seed(w, "abort moved the head");
  census_equal(w, &before, &after, "abort changed the store");
  check_load(w);
}

static void reopen(world *w) {
  store_census before, after;
  mr_error e;
  ok_or_die(store_take_census(w->st, &before, &e), &e, "census");
  store_head h = store_get_head(w->st);
  ok_or_die(store_close(w->st, &e), &e, "close");
  w->st = NULL;
  store_options o = {.changelog_window = 8};
  ok_or_die(store_open(w->url, &o, &w->st, &e), &e, "reopen");
  store_head h2 = store_get_head(w->st);
  if (h.snapshot_id != h2.snapshot_id || h.batch_count != h2.batch_count)
    fail_seed(w, "reopen changed the head");
  ok_or_die(store_take_census(w->st, &after, &e), &e, "census");
  census_equal(w, &before, &after, "reopen changed the store");
}

static void do_expire(world *w) {
  if (w->m->ns < 3)
    return;
  uint64_t lo = w->m->snaps[0].id + 1, hi = w->m->snaps[w->m->ns - 1].id;
  uint64_t h = lo + rn((unsigned)(hi - lo + 1));
  store_expire_progress p;
  mr_error e;
  ok_or_die(store_expire(w->st, h, "model", 1 + rn(20), NULL, NULL, &p, &e), &e, "store_expire");
  model_expire(w->m, h);
}

static mr_status verify_problem(void *ctx, const store_problem *p, mr_error *err) {
  fprintf(stderr, "verify: %s %s: %s\n", store_check_text(p->check), p->key, p->what);
  return MR_OK;
}

/* (e): the store as these operations left it verifies clean. */
static void check_verify(const world *w) {
  store_verify_hooks hooks = {verify_problem, NULL, NULL};
  store_verify_result r;
  mr_error e;
  ok_or_die(store_verify(w->st, 8, &hooks, &r, &e), &e, "store_verify");
  if (r.problems)
    fail_seed(w, "store_verify");
}

static void run_seed(uint64_t seed, unsigned ops) {
  world w = {.seed = seed, .m = calloc(1, sizeof(model))};
  assert_non_null(w.m);
  w.m->next_catalog_id = 1;
  w.m->next_file_id = 1;
  rng_state = seed;
  char name[64];
  snprintf(name, sizeof name, "model-%llu", (unsigned long long)seed);
  st_url(name, w.url, sizeof w.url);
  mr_error e;
  store_options o = {.changelog_window = 8};
  ok_or_die(store_open(w.url, &o, &w.st, &e), &e, "store_open");

  /* DuckLake's catalog initialisation: snapshot 0 with the main schema. */
  tx t0 = {.m = model_clone(w.m), .S = 0};
  ok_or_die(store_commit_begin(w.st, store_get_head(w.st), &t0.c, &e), &e, "begin");
  put_schema(&t0, t0.m->next_catalog_id++, "main");
  tx_snapshot(&t0, "created_schema:main", 0);
  ok_or_die(store_commit_write(t0.c, NULL, &e), &e, "write");
  model_free(w.m);
  w.m = t0.m;

  for (w.op = 0; w.op < ops; w.op++) {
    op_kind k = pick_op();
    if (k == OP_EXPIRE) {
      do_expire(&w);
    } else {
      store_head h = store_get_head(w.st);
      tx t = {.m = model_clone(w.m), .S = h.snapshot_id + 1};
      ok_or_die(store_commit_begin(w.st, h, &t.c, &e), &e, "begin");
      run_op(&t, k);
      mr_status rc = store_commit_write(t.c, NULL, &e);
      if (rc) {
        fprintf(stderr, "commit: %s\n", e.msg);
        model_free(t.m);
        fail_seed(&w, "commit");
      }
      model_free(w.m);
      w.m = t.m;
    }
    check_all(&w, (w.op + 1) % CHECK_ALL_EVERY == 0);
    if ((w.op + 1) % ABORT_EVERY == 0)
      check_abort(&w);
    if ((w.op + 1) % REOPEN_EVERY == 0) {
      reopen(&w);
      check_all(&w, false);
      check_verify(&w);
    }
  }
  check_all(&w, true);
  reopen(&w);
  check_all(&w, true);
  check_verify(&w);
  ok_or_die(store_close(w.st, &e), &e, "close");
  model_free(w.m);
}

static void test_model(void **state) {
  const char *ops_env = getenv("MORAINE_STORE_OPS");
  const char *seed_env = getenv("MORAINE_SEED");
  unsigned ops = ops_env ? (unsigned)strtoul(ops_env, NULL, 10) : DEFAULT_OPS;
  if (seed_env) {
    uint64_t seed = strtoull(seed_env, NULL, 10);
    fprintf(stderr, "seed %llu, %u ops\n", (unsigned long long)seed, ops);
    run_seed(seed, ops);
    return;
  }
  unsigned shard = 0, nshards = 1;
  const char *shard_env = getenv("MORAINE_SEED_SHARD");
  if (shard_env && (sscanf(shard_env, "%u/%u", &shard, &nshards) != 2 || nshards == 0 ||
                    shard >= nshards))
    fail_msg("MORAINE_SEED_SHARD wants I/N with I < N, got '%s'", shard_env);
  for (size_t i = 0; i < sizeof default_seeds / sizeof *default_seeds; i++) {
    if (i % nshards != shard)
      continue;
    fprintf(stderr, "seed %llu, %u ops\n", (unsigned long long)default_seeds[i], ops);
    run_seed(default_seeds[i], ops);
  }
}

static int setup(void **state) { return st_tmp_setup("store-model"); }
static int teardown(void **state) {
  st_tmp_teardown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_model)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
