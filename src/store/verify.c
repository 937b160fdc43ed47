/*
 * verify.c — store_verify: one ascending walk over every key of a store,
 * checking what RFC 0002 promises about it:
 *   - every key decodes (key.h) and every value decodes under its key, with
 *     the ids of key and value agreeing (value.h);
 *   - versioned records begin no later than they end and than the head,
 *     and the ended versions of one entity do not overlap;
 *   - the name and delete_target directories hold exactly the entries the
 *     current records imply (store_name_entry_of / store_delete_target_of,
 *     the same functions commits use), no more, no fewer;
 *   - the changelog holds one record for every snapshot of its window and
 *     none outside it, each listing current-side keys;
 *   - every inlined row belongs to an inlined table of its width;
 *   - sys/format and sys/head are there, and sys/head names the newest
 *     snapshot record.
 * It only reads: problems are reported, never repaired.
 *
 * The walk leans on the subspace order of the key bytes: sys (0x02) comes
 * first, so the head is known before any record is checked against it, and
 * current (0x04) comes before name (0x0a) and delete_target (0x0b), so the
 * entries the current records imply are all collected — as encoded keys,
 * which sort in store order — before the directory entries arrive to be
 * merged against them. Memory: O(snapshots + changelog records + current
 * schemas, tables and delete files).
 */
#include "store/store_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *store_check_text(store_check c) {
  static const char *const text[] = {
#define STORE_CHECK_TEXT(id, t) t,
      STORE_CHECK_TABLE(STORE_CHECK_TEXT)
#undef STORE_CHECK_TEXT
  };
  return (unsigned)c < STORE_CHECK_COUNT ? text[c] : "?";
}

/* ---- growable arrays ------------------------------------------------------ */

typedef struct entry {
  uint8_t *b;
  size_t len;
} entry;

typedef struct entry_vec {
  entry *e;
  size_t n, cap;
  size_t at;   /* merge cursor: entries before it have been met or reported */
  bool sorted; /* sorted once, when the first directory entry arrives */
} entry_vec;

typedef struct u64_vec {
  uint64_t *v;
  size_t n, cap;
} u64_vec;

static mr_status u64_push(u64_vec *a, uint64_t x, mr_error *err) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 256;
    uint64_t *n = realloc(a->v, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "verify: out of memory");
    a->v = n;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return MR_OK;
}

/* True when sorted a holds x. */
static bool u64_has(const u64_vec *a, uint64_t x) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->n && a->v[lo] == x;
}

static mr_status entry_push(entry_vec *a, const mr_key *k, mr_error *err) {
  mr_keybuf kb;
  mr_status rc = mr_key_encode(k, &kb, err);
  if (rc)
    return rc;
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    entry *n = realloc(a->e, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "verify: out of memory");
    a->e = n;
    a->cap = cap;
  }
  uint8_t *b = malloc(kb.len);
  if (b == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "verify: out of memory");
  memcpy(b, kb.b, kb.len);
  a->e[a->n++] = (entry){b, kb.len};
  return MR_OK;
}

/* An inline/data_table record: (table_id, schema_version) and its width. */
typedef struct inline_table {
  uint64_t table_id, schema_version;
  size_t ncols;
} inline_table;

typedef struct inline_vec {
  inline_table *t;
  size_t n, cap;
} inline_vec;

static mr_status inline_push(inline_vec *a, inline_table x, mr_error *err) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    inline_table *n = realloc(a->t, cap * sizeof *n);
    if (n == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "verify: out of memory");
    a->t = n;
    a->cap = cap;
  }
  a->t[a->n++] = x;
  return MR_OK;
}

/* The table (t, v) of sorted a, or NULL. */
static const inline_table *inline_find(const inline_vec *a, uint64_t t, uint64_t v) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const inline_table *m = &a->t[mid];
    if (m->table_id < t || (m->table_id == t && m->schema_version < v))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->n && a->t[lo].table_id == t && a->t[lo].schema_version == v ? &a->t[lo] : NULL;
}

static int bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
  int r = memcmp(a, b, al < bl ? al : bl);
  return r ? r : (al > bl) - (al < bl);
}

static int entry_cmp(const void *x, const void *y) {
  const entry *a = x, *b = y;
  return bytes_cmp(a->b, a->len, b->b, b->len);
}

static void entry_vec_free(entry_vec *a) {
  for (size_t i = 0; i < a->n; i++)
    free(a->e[i].b);
  free(a->e);
}

/* ---- the walk's state ---------------------------------------------------- */

typedef struct verifier {
  store *st;
  const store_verify_hooks *hooks;
  store_verify_result *out;
  uint64_t window;
  bool format_seen, head_seen;   /* the keys are there (decodable or not) */
  bool head_ok;                  /* sys/head decoded: out->head holds it */
  entry_vec names, targets;      /* entries the current records imply */
  u64_vec snapshots, changelogs; /* ids, ascending (the walk's order) */
  /* The previous history version walked: history keys sort by entity, then
   * end_snapshot, so an entity's ended versions arrive one after another,
   * oldest first, and each must begin no earlier than the one before ended. */
  bool has_prev;
  mr_key prev;       /* its key (no name: history kinds carry none) */
  uint64_t prev_end; /* its end_snapshot */
  /* The inlined tables: within the inline subspace data_table keys sort
   * before data_row keys and delete_table before delete_row, so the tables
   * are all known, in key order, before the first row of their kind. */
  inline_vec inline_tables;
  u64_vec delete_tables;
} verifier;

/* The text form of k into buf (MR_KEY_TEXT_MAX), "?" if it has none. */
static const char *key_text(const mr_key *k, char *buf) {
  mr_error e;
  if (mr_key_format(k, buf, MR_KEY_TEXT_MAX, &e) != MR_OK)
    snprintf(buf, MR_KEY_TEXT_MAX, "?");
  return buf;
}

/* An undecodable key as "0x" + hex, cut after 128 bytes. */
static const char *raw_text(const uint8_t *b, size_t len, char *buf) {
  size_t n = len < 128 ? len : 128, o = 0;
  o += (size_t)snprintf(buf, MR_KEY_TEXT_MAX, "0x");
  for (size_t i = 0; i < n; i++)
    o += (size_t)snprintf(buf + o, MR_KEY_TEXT_MAX - o, "%02x", b[i]);
  if (n < len)
    snprintf(buf + o, MR_KEY_TEXT_MAX - o, "...");
  return buf;
}

static mr_status report(verifier *v, store_check check, const char *key, mr_error *err,
                        const char *fmt, ...) MR_PRINTF(5, 6);

static mr_status report(verifier *v, store_check check, const char *key, mr_error *err,
                        const char *fmt, ...) {
  char what[2 * MR_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  v->out->problems++;
  store_problem p = {check, key, what};
  return v->hooks->problem(v->hooks->ctx, &p, err);
}

/* ---- values -------------------------------------------------------------- */

/*
 * Why a value did not decode: IDS when its payload is a well-formed message
 * of the right kind whose ids disagree with the key, else VALUE.
 */
static store_check classify_value(const mr_key *k, const uint8_t *val, size_t len) {
  const ProtobufCMessageDescriptor *d = mr_value_descriptor(k->kind);
  if (d == NULL || len < MR_VALUE_HEADER_LEN ||
      memcmp(val, MR_VALUE_MAGIC, MR_VALUE_MAGIC_LEN) != 0 ||
      val[MR_VALUE_MAGIC_LEN] != MR_VALUE_VERSION)
    return STORE_CHECK_VALUE;
  ProtobufCMessage *m =
      protobuf_c_message_unpack(d, NULL, len - MR_VALUE_HEADER_LEN, val + MR_VALUE_HEADER_LEN);
  if (m == NULL)
    return STORE_CHECK_VALUE;
  mr_error e;
  store_check c = STORE_CHECK_VALUE;
  if (mr_value_check(k->kind, m, &e) == MR_OK && mr_value_check_key(k, m, &e) != MR_OK)
    c = STORE_CHECK_IDS;
  protobuf_c_message_free_unpacked(m, NULL);
  return c;
}

/* The decoder's message without its "value of KEY: " lead (the report names
 * the key already). */
static const char *value_fault(const char *msg, const char *key) {
  size_t kl = strlen(key);
  if (strncmp(msg, "value of ", 9) == 0 && strncmp(msg + 9, key, kl) == 0 &&
      strncmp(msg + 9 + kl, ": ", 2) == 0)
    return msg + 9 + kl + 2;
  return msg;
}

/* ---- per-record checks ----------------------------------------------------- */

/* Two ended versions of one entity live at the same snapshot: time travel
 * to it would see the entity twice. */
static mr_status check_overlap(verifier *v, const mr_key *k, uint64_t begin, uint64_t end,
                               const char *kt, mr_error *err) {
  unsigned ncomp = mr_key_kind_get(k->kind)->ncomp;
  bool same = v->has_prev && v->prev.kind == k->kind &&
              memcmp(v->prev.c, k->c, ncomp * sizeof k->c[0]) == 0;
  mr_status rc = MR_OK;
  if (same && begin < v->prev_end) {
    char pt[MR_KEY_TEXT_MAX];
    rc = report(v, STORE_CHECK_LIFECYCLE, kt, err,
                "begins at snapshot %llu, before the version before it (%s) ends",
                (unsigned long long)begin, key_text(&v->prev, pt));
  }
  v->has_prev = true;
  v->prev = *k;
  v->prev_end = end;
  return rc;
}

static mr_status check_lifecycle(verifier *v, const mr_key *k, const ProtobufCMessage *m,
                                 const char *kt, mr_error *err) {
  uint64_t begin = 0, end = 0;
  if (!store_msg_u64(m, "begin_snapshot", &begin))
    return MR_OK;
  bool has_end = store_msg_u64(m, "end_snapshot", &end);
  uint64_t head = v->out->head.snapshot_id;
  mr_status rc = MR_OK;
  if (has_end && begin > end)
    rc = report(v, STORE_CHECK_LIFECYCLE, kt, err, "begins at snapshot %llu, after it ends at %llu",
                (unsigned long long)begin, (unsigned long long)end);
  if (!rc && v->head_ok && begin > head)
    rc = report(v, STORE_CHECK_LIFECYCLE, kt, err,
                "begins at snapshot %llu, after the head snapshot %llu", (unsigned long long)begin,
                (unsigned long long)head);
  if (!rc && v->head_ok && has_end && end > head)
    rc = report(v, STORE_CHECK_LIFECYCLE, kt, err,
                "ends at snapshot %llu, after the head snapshot %llu", (unsigned long long)end,
                (unsigned long long)head);
  if (!rc && k->history)
    rc = check_overlap(v, k, begin, end, kt, err);
  return rc;
}

/* A changelog record lists current, inline and schema_version keys. */
static mr_status check_changelog(verifier *v, const Moraine__V1__Changelog *cl, const char *kt,
                                 mr_error *err) {
  for (size_t i = 0; i < cl->n_keys; i++) {
    mr_key lk;
    mr_error e;
    char text[MR_KEY_TEXT_MAX];
    mr_status rc = MR_OK;
    if (mr_key_decode(cl->keys[i].data, cl->keys[i].len, &lk, &e) != MR_OK) {
      rc = report(v, STORE_CHECK_CHANGELOG, kt, err, "lists key %s, which does not decode (%s)",
                  raw_text(cl->keys[i].data, cl->keys[i].len, text), e.msg);
    } else {
      mr_subspace ss = mr_key_kind_get(lk.kind)->subspace;
      if (lk.history || (ss != MR_SS_CURRENT && ss != MR_SS_INLINE && ss != MR_SS_SCHEMA_VERSION))
        rc = report(v, STORE_CHECK_CHANGELOG, kt, err,
                    "lists %s, which is not a current, inline or schema_version key",
                    key_text(&lk, text));
    }
    if (rc)
      return rc;
  }
  return MR_OK;
}

static mr_status check_format_record(verifier *v, const Moraine__V1__SysFormat *f, mr_error *err) {
  if (f->layout_version < STORE_FORMAT_OLDEST || f->layout_version > STORE_FORMAT_LATEST)
    return mr_fail(
        err, MR_ERR_INVALID,
        "sys/format is layout %u (written by moraine %s); this build verifies layouts %d..%d",
        f->layout_version, f->writer_version, STORE_FORMAT_OLDEST, STORE_FORMAT_LATEST);
  return MR_OK;
}

/*
 * An inlined row needs its inlined table, of its width: the catalog load
 * makes the tables from those records and fills them with the rows, so a
 * row without one (or of another width) is a store that does not load.
 */
static mr_status check_inline_row(verifier *v, const mr_key *k, const ProtobufCMessage *m,
                                  const char *kt, mr_error *err) {
  char tt[MR_KEY_TEXT_MAX];
  if (k->kind == MR_KK_INLINE_ROW) {
    const inline_table *t = inline_find(&v->inline_tables, k->c[0], k->c[1]);
    mr_key tk = {.kind = MR_KK_INLINE_TABLE, .c = {k->c[0], k->c[1]}};
    size_t cells = ((const Moraine__V1__InlineDataRow *)m)->n_cell;
    if (t == NULL)
      return report(v, STORE_CHECK_INLINE, kt, err, "belongs to no inlined table (%s is missing)",
                    key_text(&tk, tt));
    if (t->ncols != cells)
      return report(v, STORE_CHECK_INLINE, kt, err, "holds %zu values, but %s has %zu columns",
                    cells, key_text(&tk, tt), t->ncols);
  } else if (k->kind == MR_KK_INLINE_DELETE_ROW && !u64_has(&v->delete_tables, k->c[0])) {
    mr_key tk = {.kind = MR_KK_INLINE_DELETE_TABLE, .c = {k->c[0]}};
    return report(v, STORE_CHECK_INLINE, kt, err,
                  "belongs to no inlined delete table (%s is missing)", key_text(&tk, tt));
  }
  return MR_OK;
}

/* Every check of one decoded record. */
static mr_status check_record(verifier *v, const mr_key *k, const ProtobufCMessage *m,
                              const char *kt, mr_error *err) {
  switch (k->kind) {
  case MR_KK_SYS_FORMAT:
    return check_format_record(v, (const Moraine__V1__SysFormat *)m, err);
  case MR_KK_SYS_HEAD: {
    const Moraine__V1__SysHead *h = (const Moraine__V1__SysHead *)m;
    v->out->head = (store_head){h->snapshot_id, h->batch_count};
    v->head_ok = true;
    return MR_OK;
  }
  case MR_KK_SYS_MIGRATION: {
    const Moraine__V1__SysMigration *mg = (const Moraine__V1__SysMigration *)m;
    return report(v, STORE_CHECK_SYSTEM, kt, err,
                  "a migration from format %u to %u is unfinished; servers refuse the store until "
                  "it completes",
                  mg->from_format, mg->to_format);
  }
  case MR_KK_SNAPSHOT:
    v->out->snapshots++;
    v->out->newest_snapshot = k->c[0];
    return u64_push(&v->snapshots, k->c[0], err);
  case MR_KK_CHANGELOG: {
    v->out->changelog_records++;
    mr_status rc = u64_push(&v->changelogs, k->c[0], err);
    return rc ? rc : check_changelog(v, (const Moraine__V1__Changelog *)m, kt, err);
  }
  case MR_KK_INLINE_TABLE: {
    inline_table t = {k->c[0], k->c[1], ((const Moraine__V1__InlineDataTable *)m)->n_column};
    return inline_push(&v->inline_tables, t, err);
  }
  case MR_KK_INLINE_DELETE_TABLE:
    return u64_push(&v->delete_tables, k->c[0], err);
  default:
    break;
  }
  mr_status rc = check_inline_row(v, k, m, kt, err);
  if (rc)
    return rc;
  rc = check_lifecycle(v, k, m, kt, err);
  if (rc || k->history)
    return rc;
  mr_key dk;
  bool has = false;
  store_name_entry_of(k, m, &dk, &has);
  if (has)
    return entry_push(&v->names, &dk, err);
  store_delete_target_of(k, m, &dk, &has);
  if (has)
    return entry_push(&v->targets, &dk, err);
  return MR_OK;
}

/* ---- directories ----------------------------------------------------------- */

/* The current record a directory entry stands for. */
static mr_key record_of_entry(const mr_key *e) {
  mr_key r = {0};
  if (e->kind == MR_KK_NAME) {
    r.kind = e->c[0] == MR_NAME_SCHEMA ? MR_KK_SCHEMA : MR_KK_TABLE;
    r.c[0] = e->c[2];
  } else {
    r.kind = MR_KK_DELFILE;
    r.c[0] = e->c[0];
    r.c[1] = e->c[2];
  }
  return r;
}

/* A current record whose entry is not in the directory. */
static mr_status report_missing(verifier *v, const entry *want, mr_error *err) {
  mr_key e;
  char et[MR_KEY_TEXT_MAX], rt[MR_KEY_TEXT_MAX];
  mr_status rc = mr_key_decode(want->b, want->len, &e, err);
  if (rc)
    return rc;
  mr_key r = record_of_entry(&e);
  bool name = e.kind == MR_KK_NAME;
  return report(v, name ? STORE_CHECK_NAME : STORE_CHECK_DELETE_TARGET, key_text(&r, rt), err,
                "has no %s entry (expected %s)", name ? "name" : "delete_target", key_text(&e, et));
}

/* Why a directory entry no current record implies is there. */
static mr_status report_stray(verifier *v, const mr_key *k, const char *kt, mr_error *err) {
  mr_key r = record_of_entry(k);
  char rt[MR_KEY_TEXT_MAX], et[MR_KEY_TEXT_MAX];
  key_text(&r, rt);
  store_check check = k->kind == MR_KK_NAME ? STORE_CHECK_NAME : STORE_CHECK_DELETE_TARGET;
  ProtobufCMessage *m = NULL;
  mr_error e;
  mr_status rc = store_get_msg(v->st, &r, &m, &e);
  if (rc == MR_ERR_NOT_FOUND)
    return report(v, check, kt, err, "stands for %s, which is not a current record", rt);
  if (rc == MR_ERR_NOMEM)
    return mr_fail(err, rc, "verify: %s", e.msg);
  if (rc)
    return report(v, check, kt, err, "stands for %s, which cannot be read (%s)", rt, e.msg);
  mr_key want;
  bool has = false;
  if (check == STORE_CHECK_NAME)
    store_name_entry_of(&r, m, &want, &has);
  else
    store_delete_target_of(&r, m, &want, &has);
  if (has)
    rc = report(v, check, kt, err, "stands for %s, whose entry is %s", rt, key_text(&want, et));
  else
    rc = report(v, check, kt, err, "stands for %s, which implies no %s entry", rt,
                check == STORE_CHECK_NAME ? "name (no name or no schema)"
                                          : "delete_target (no data file)");
  mr_value_free(m);
  return rc;
}

/* Reports every wanted entry that sorts before (kb, kl) as missing. */
static mr_status flush_missing(verifier *v, entry_vec *want, const uint8_t *kb, size_t kl,
                               mr_error *err) {
  if (!want->sorted) {
    if (want->n)
      qsort(want->e, want->n, sizeof *want->e, entry_cmp);
    want->sorted = true;
  }
  while (want->at < want->n &&
         (kb == NULL || bytes_cmp(want->e[want->at].b, want->e[want->at].len, kb, kl) < 0)) {
    mr_status rc = report_missing(v, &want->e[want->at], err);
    if (rc)
      return rc;
    want->at++;
  }
  return MR_OK;
}

/* A directory entry met by the walk, merged against the wanted entries. */
static mr_status meet_entry(verifier *v, entry_vec *want, const mr_key *k, const uint8_t *kb,
                            size_t kl, const char *kt, mr_error *err) {
  mr_status rc = flush_missing(v, want, kb, kl, err);
  if (rc)
    return rc;
  if (want->at < want->n && bytes_cmp(want->e[want->at].b, want->e[want->at].len, kb, kl) == 0) {
    want->at++;
    return MR_OK;
  }
  return report_stray(v, k, kt, err);
}

/* ---- one key --------------------------------------------------------------- */

static mr_status check_key(verifier *v, const uint8_t *kb, size_t kl, const uint8_t *vb, size_t vl,
                           mr_error *err) {
  char kt[MR_KEY_TEXT_MAX];
  mr_key k;
  mr_error e;
  if (mr_key_decode(kb, kl, &k, &e) != MR_OK)
    return report(v, STORE_CHECK_KEY, raw_text(kb, kl, kt), err, "does not decode: %s", e.msg);
  key_text(&k, kt);
  if (k.kind == MR_KK_SYS_FORMAT)
    v->format_seen = true;
  if (k.kind == MR_KK_SYS_HEAD)
    v->head_seen = true;
  ProtobufCMessage *m = NULL;
  mr_status rc = mr_value_decode(&k, vb, vl, &m, &e);
  if (rc == MR_ERR_NOMEM)
    return mr_fail(err, rc, "verify: %s", e.msg);
  if (rc)
    return report(v, classify_value(&k, vb, vl), kt, err, "%s", value_fault(e.msg, kt));
  if (k.kind == MR_KK_NAME)
    rc = meet_entry(v, &v->names, &k, kb, kl, kt, err);
  else if (k.kind == MR_KK_DELETE_TARGET)
    rc = meet_entry(v, &v->targets, &k, kb, kl, kt, err);
  else
    rc = check_record(v, &k, m, kt, err);
  mr_value_free(m);
  return rc;
}

/* ---- after the walk -------------------------------------------------------- */

static mr_status check_system(verifier *v, mr_error *err) {
  mr_status rc = MR_OK;
  if (!v->format_seen)
    rc = report(v, STORE_CHECK_SYSTEM, "sys/format", err,
                "is missing: the store has keys but no layout format");
  if (!rc && !v->head_seen)
    rc = report(v, STORE_CHECK_HEAD, "sys/head", err, "is missing");
  return rc;
}

/* sys/head names the newest snapshot record. */
static mr_status check_head(verifier *v, mr_error *err) {
  if (!v->head_ok)
    return MR_OK;
  uint64_t head = v->out->head.snapshot_id, newest = v->out->newest_snapshot;
  char kt[MR_KEY_TEXT_MAX];
  if (v->snapshots.n == 0)
    return head == 0 ? MR_OK
                     : report(v, STORE_CHECK_HEAD, "sys/head", err,
                              "names snapshot %llu, but the store has no snapshot record",
                              (unsigned long long)head);
  if (newest > head) {
    mr_key k = {.kind = MR_KK_SNAPSHOT, .c = {newest}};
    return report(v, STORE_CHECK_HEAD, key_text(&k, kt), err,
                  "is newer than the head snapshot %llu (sys/head)", (unsigned long long)head);
  }
  if (newest < head)
    return report(v, STORE_CHECK_HEAD, "sys/head", err,
                  "names snapshot %llu, but the newest snapshot record is %llu",
                  (unsigned long long)head, (unsigned long long)newest);
  return MR_OK;
}

/*
 * The window: each snapshot commit writes changelog/{s} and deletes
 * changelog/{s - window}, so after head H the records (H - window, H] are
 * there for every snapshot of that range, and no others.
 */
static mr_status check_window(verifier *v, mr_error *err) {
  if (!v->head_ok)
    return MR_OK;
  uint64_t head = v->out->head.snapshot_id, w = v->window;
  uint64_t first = head >= w ? head - w + 1 : 0; /* oldest snapshot inside the window */
  char kt[MR_KEY_TEXT_MAX];
  for (size_t i = 0; i < v->changelogs.n; i++) {
    uint64_t c = v->changelogs.v[i];
    mr_key k = {.kind = MR_KK_CHANGELOG, .c = {c}};
    mr_status rc = MR_OK;
    if (c > head)
      rc = report(v, STORE_CHECK_CHANGELOG, key_text(&k, kt), err,
                  "is newer than the head snapshot %llu", (unsigned long long)head);
    else if (c < first)
      rc = report(v, STORE_CHECK_CHANGELOG, key_text(&k, kt), err,
                  "is outside the window (head %llu, window %llu: records %llu..%llu are kept)",
                  (unsigned long long)head, (unsigned long long)w, (unsigned long long)first,
                  (unsigned long long)head);
    if (rc)
      return rc;
  }
  for (size_t i = 0; i < v->snapshots.n; i++) {
    uint64_t s = v->snapshots.v[i];
    if (s < first || s > head || u64_has(&v->changelogs, s))
      continue;
    mr_key k = {.kind = MR_KK_CHANGELOG, .c = {s}};
    mr_status rc =
        report(v, STORE_CHECK_CHANGELOG, key_text(&k, kt), err,
               "is missing: snapshot %llu is inside the window, and a reader replaying across it "
               "would miss its changes",
               (unsigned long long)s);
    if (rc)
      return rc;
  }
  return MR_OK;
}

/* ---- the walk -------------------------------------------------------------- */

static mr_status walk(verifier *v, mr_error *err) {
  kv_iter *it = NULL;
  mr_status rc = kv_iter_open(v->st->db, NULL, 0, NULL, 0, &it, err);
  if (rc)
    return mr_error_wrap(err, "verify: opening the scan");
  for (;;) {
    const void *kp, *vp;
    size_t kl, vl;
    rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err);
    if (rc == MR_ERR_NOT_FOUND) {
      mr_error_clear(err);
      rc = MR_OK;
      break;
    }
    if (rc) {
      mr_error_wrap(err, "verify: reading the store");
      break;
    }
    rc = check_key(v, kp, kl, vp, vl, err);
    if (rc)
      break;
    if (++v->out->keys % 4096 == 0 && v->hooks->progress)
      v->hooks->progress(v->hooks->ctx, v->out->keys);
  }
  kv_iter_close(it);
  return rc;
}

mr_status store_verify(store *st, uint64_t changelog_window, const store_verify_hooks *hooks,
                       store_verify_result *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  verifier v = {.st = st, .hooks = hooks, .out = out};
  v.window = changelog_window ? changelog_window : STORE_CHANGELOG_WINDOW;
  mr_status rc = walk(&v, err);
  if (!rc && out->keys == 0)
    rc = mr_fail(err, MR_ERR_NOT_FOUND, "the store is empty: nothing to verify");
  if (!rc)
    rc = flush_missing(&v, &v.names, NULL, 0, err);
  if (!rc)
    rc = flush_missing(&v, &v.targets, NULL, 0, err);
  if (!rc)
    rc = check_system(&v, err);
  if (!rc)
    rc = check_head(&v, err);
  if (!rc)
    rc = check_window(&v, err);
  entry_vec_free(&v.names);
  entry_vec_free(&v.targets);
  free(v.snapshots.v);
  free(v.changelogs.v);
  free(v.inline_tables.t);
  free(v.delete_tables.v);
  return rc;
}
