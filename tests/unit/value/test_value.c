/*
 * test_value.c — the value codec: the kind table, exact round trips of a
 * fully populated value of every kind, golden bytes (tests/golden/values.txt),
 * framing and key/value rejections, and every single-byte change (all 255
 * other values) and truncation of every sample ending in Corruption or in a
 * key-consistent value that re-encodes.
 *
 * MORAINE_GOLDEN_UPDATE=1 rewrites the golden file instead of checking it —
 * only for a deliberate format change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "sample.h"
#include "value/value.h"

/* ---- helpers ---- */

static bool has_message(mr_key_kind kind) {
  return mr_value_descriptor(kind) != NULL;
}

static const mr_key_kind_info *info_of(mr_key_kind kind) {
  return mr_key_kind_get(kind);
}

/* Encodes the kind's sample; the caller frees *bytes. */
static void encode_sample(mr_key_kind kind, uint8_t **bytes, size_t *len) {
  ProtobufCMessage *m = sample_value(kind);
  mr_error err;
  mr_status rc = mr_value_encode(kind, m, bytes, len, &err);
  if (rc != MR_OK)
    fail_msg("encode %s: %s", info_of(kind)->text, err.msg);
  mr_value_free(m);
}

static void key_str(const mr_key *k, char *dst, size_t cap) {
  mr_error err;
  assert_int_equal(mr_key_format(k, dst, cap, &err), MR_OK);
}

/* Decode must fail MR_ERR_CORRUPTION, the message naming `what` and the key. */
static void expect_corrupt(const mr_key *k, const uint8_t *b, size_t len,
                           const char *what) {
  ProtobufCMessage *out = (ProtobufCMessage *)1;
  mr_error err;
  mr_status rc = mr_value_decode(k, b, len, &out, &err);
  char kt[MR_KEY_TEXT_MAX];
  key_str(k, kt, sizeof kt);
  if (rc != MR_ERR_CORRUPTION)
    fail_msg("%s: expected corruption (%s), got %s", kt, what,
             mr_status_text(rc));
  assert_null(out);
  if (strstr(err.msg, what) == NULL || strstr(err.msg, kt) == NULL)
    fail_msg("message lacks \"%s\" or the key %s: %s", what, kt, err.msg);
}

/*
 * The fuzz property: a decode either fails Corruption or yields a message
 * that passes the key check and re-encodes, and the re-encoding decodes.
 */
static void expect_corrupt_or_consistent(const mr_key *k, const uint8_t *b,
                                         size_t len) {
  ProtobufCMessage *out = NULL;
  mr_error err;
  mr_status rc = mr_value_decode(k, b, len, &out, &err);
  if (rc == MR_ERR_CORRUPTION) {
    assert_null(out);
    return;
  }
  if (rc != MR_OK)
    fail_msg("decode: unexpected %s: %s", mr_status_text(rc), err.msg);
  if (mr_value_check_key(k, out, &err) != MR_OK)
    fail_msg("decoded value fails the key check: %s", err.msg);
  uint8_t *again;
  size_t n;
  if (mr_value_encode(k->kind, out, &again, &n, &err) != MR_OK)
    fail_msg("decoded value does not re-encode: %s", err.msg);
  ProtobufCMessage *out2;
  if (mr_value_decode(k, again, n, &out2, &err) != MR_OK)
    fail_msg("re-encoded value does not decode: %s", err.msg);
  assert_true(sample_equal(out, out2, false));
  mr_value_free(out2);
  free(again);
  mr_value_free(out);
}

/* Round trip of m under k: decode(encode(m)) == m, re-encoding byte-exact. */
static void roundtrip(const mr_key *k, const ProtobufCMessage *m) {
  mr_error err;
  uint8_t *b, *b2;
  size_t n, n2;
  if (mr_value_encode(k->kind, m, &b, &n, &err) != MR_OK)
    fail_msg("encode: %s", err.msg);
  ProtobufCMessage *out;
  if (mr_value_decode(k, b, n, &out, &err) != MR_OK)
    fail_msg("decode: %s", err.msg);
  assert_true(sample_equal(m, out, true));
  assert_int_equal(mr_value_encode(k->kind, out, &b2, &n2, &err), MR_OK);
  assert_int_equal(n, n2);
  assert_memory_equal(b, b2, n);
  free(b2);
  mr_value_free(out);
  free(b);
}

/* ---- the table ---- */

static void table_covers_every_kind(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    const mr_key_kind_info *info = info_of((mr_key_kind)kind);
    const ProtobufCMessageDescriptor *d =
        mr_value_descriptor((mr_key_kind)kind);
    bool empty = kind == MR_KK_NAME || kind == MR_KK_DELETE_TARGET;
    assert_int_equal(mr_value_kind_is_empty((mr_key_kind)kind), empty);
    if (empty) {
      assert_null(d);
      continue;
    }
    if (d == NULL)
      fail_msg("kind %s has no value message", info->text);
    /* field 1 is value_kind, a required enum */
    const ProtobufCFieldDescriptor *vk =
        protobuf_c_message_descriptor_get_field(d, 1);
    assert_non_null(vk);
    assert_string_equal(vk->name, "value_kind");
    assert_int_equal(vk->type, PROTOBUF_C_TYPE_ENUM);
    assert_int_equal(vk->label, PROTOBUF_C_LABEL_REQUIRED);
    /* key components are required integer fields of the same name */
    for (unsigned i = 0; i < info->ncomp; i++) {
      const ProtobufCFieldDescriptor *f =
          protobuf_c_message_descriptor_get_field_by_name(d, info->comp[i]);
      if (f == NULL)
        fail_msg("%s: no field named %s", d->name, info->comp[i]);
      assert_int_equal(f->label, PROTOBUF_C_LABEL_REQUIRED);
      assert_true(f->type == PROTOBUF_C_TYPE_INT64 ||
                  f->type == PROTOBUF_C_TYPE_UINT64);
    }
    if (info->flags & MR_KF_VERSIONED) {
      const ProtobufCFieldDescriptor *b =
          protobuf_c_message_descriptor_get_field_by_name(d, "begin_snapshot");
      const ProtobufCFieldDescriptor *e =
          protobuf_c_message_descriptor_get_field_by_name(d, "end_snapshot");
      assert_non_null(b);
      assert_non_null(e);
      assert_int_equal(b->label, PROTOBUF_C_LABEL_REQUIRED);
      assert_int_equal(e->label, PROTOBUF_C_LABEL_OPTIONAL);
    }
    /* one message per kind */
    for (int other = 0; other < kind; other++)
      assert_ptr_not_equal(mr_value_descriptor((mr_key_kind)other), d);
  }
  assert_null(mr_value_descriptor(MR_KK_COUNT));
  assert_false(mr_value_kind_is_empty(MR_KK_COUNT));
}

/* ---- round trips ---- */

static void every_kind_roundtrips(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    ProtobufCMessage *m = sample_value((mr_key_kind)kind);
    roundtrip(&k, m);

    /* encode_into agrees with encode and with encoded_size */
    mr_error err;
    size_t need, n, n2;
    uint8_t *b;
    assert_int_equal(mr_value_encoded_size((mr_key_kind)kind, m, &need, &err),
                     MR_OK);
    assert_int_equal(mr_value_encode((mr_key_kind)kind, m, &b, &n, &err),
                     MR_OK);
    assert_int_equal(need, n);
    uint8_t *buf = malloc(need);
    assert_int_equal(
        mr_value_encode_into((mr_key_kind)kind, m, buf, need, &n2, &err),
        MR_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(buf, b, n);
    assert_memory_equal(b, MR_VALUE_MAGIC "\x01", MR_VALUE_HEADER_LEN);
    free(buf);
    free(b);
    mr_value_free(m);
  }
}

/* Bytes a singular optional field with a has_ flag occupies. */
static size_t scalar_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_BYTES:
    return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  default:
    return 4; /* 32-bit ints, float, bool (protobuf_c_boolean), enum */
  }
}

/*
 * Every optional field, at the top level and in the first element of each
 * embedded child: absent (NULL), present-empty / present-zero, each round
 * trip exactly — NULL never comes back as "" or 0, nor the reverse.
 */
static void null_empty_zero_msg(const mr_key *k, ProtobufCMessage *top,
                                ProtobufCMessage *m, bool is_top) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  uint8_t *base = (uint8_t *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REPEATED &&
        f->type == PROTOBUF_C_TYPE_MESSAGE) {
      size_t n = *(size_t *)(base + f->quantifier_offset);
      if (n > 0)
        null_empty_zero_msg(
            k, top, (*(ProtobufCMessage ***)(base + f->offset))[0], false);
      continue;
    }
    if (f->label != PROTOBUF_C_LABEL_OPTIONAL)
      continue;
    if (is_top && k->history && strcmp(f->name, "end_snapshot") == 0)
      continue; /* pinned by the key; see current_and_history_end_snapshot */
    void *p = base + f->offset;
    if (f->type == PROTOBUF_C_TYPE_STRING) {
      char *saved = *(char **)p;
      *(char **)p = NULL;
      roundtrip(k, top);
      *(char **)p = (char *)"";
      roundtrip(k, top);
      *(char **)p = saved;
      continue;
    }
    protobuf_c_boolean *has =
        (protobuf_c_boolean *)(base + f->quantifier_offset);
    size_t sz = scalar_size(f);
    uint8_t saved[sizeof(ProtobufCBinaryData)];
    memcpy(saved, p, sz);
    *has = 0;
    roundtrip(k, top);
    *has = 1;
    memset(p, 0, sz);
    roundtrip(k, top);
    memcpy(p, saved, sz);
  }
}

static void null_empty_zero_roundtrip(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    ProtobufCMessage *m = sample_value((mr_key_kind)kind);
    null_empty_zero_msg(&k, m, m, true);
    mr_value_free(m);
  }
}

/* A value with no rows in its repeated fields and every optional absent. */
static void minimal_values_roundtrip(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    const ProtobufCMessageDescriptor *d =
        mr_value_descriptor((mr_key_kind)kind);
    if (d == NULL)
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    k.history = false;
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    d->message_init(m);
    const mr_key_kind_info *info = info_of((mr_key_kind)kind);
    for (unsigned i = 0; i < info->ncomp; i++)
      assert_true(sample_set_int(m, info->comp[i], k.c[i]));
    /* required strings must be non-NULL: give them "" */
    for (unsigned i = 0; i < d->n_fields; i++)
      if (d->fields[i].label == PROTOBUF_C_LABEL_REQUIRED &&
          d->fields[i].type == PROTOBUF_C_TYPE_STRING)
        *(char **)((uint8_t *)m + d->fields[i].offset) = (char *)"";
    roundtrip(&k, m);
    free(m);
  }
}

/* ---- golden vectors ---- */

static void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", b[i]);
  out[2 * n] = '\0';
}

static char *golden_path(void) {
  const char *src = getenv("MORAINE_SOURCE_DIR");
  static char path[4096];
  snprintf(path, sizeof path, "%s/tests/golden/values.txt", src ? src : ".");
  return path;
}

/* The sample key's text of a kind (a golden line's first token). */
static void sample_key_text(mr_key_kind kind, char *dst, size_t cap) {
  mr_key k;
  sample_key(kind, &k);
  key_str(&k, dst, cap);
}

/* The expected golden line of one kind: "<sample key> <hex>". Caller frees. */
static char *golden_line(mr_key_kind kind) {
  char kt[MR_KEY_TEXT_MAX];
  sample_key_text(kind, kt, sizeof kt);
  uint8_t *b;
  size_t n;
  encode_sample(kind, &b, &n);
  char *line = malloc(strlen(kt) + 2 * n + 2);
  int off = sprintf(line, "%s ", kt);
  hex(b, n, line + off);
  free(b);
  return line;
}

static void golden_update(void) {
  FILE *f = fopen(golden_path(), "w");
  assert_non_null(f);
  fprintf(f, "# Golden value vectors, checked by tests/unit/value/test_value.c "
             "(golden_vectors).\n"
             "# One line per kind with a message: <sample key> <hex of the "
             "encoded sample value>.\n"
             "# The sample sets every field (tests/unit/value/sample.c). A "
             "diff here is a value\n"
             "# format change: regenerate (MORAINE_GOLDEN_UPDATE=1) only for a "
             "deliberate one.\n");
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    char *line = golden_line((mr_key_kind)kind);
    fprintf(f, "%s\n", line);
    free(line);
  }
  fclose(f);
}

/*
 * sys/format as every store before commit_log_batch_origin (field 4) was
 * written: the golden vector of that time. It still decodes, with no origin
 * (a native store), and the new vector is these bytes plus field 4.
 */
static void sys_format_without_origin(void **state) {
  static const char old[] = "4d524e4501080110d08f80800f1a157772697465725f76657273696f6e233020c3a92722";
  uint8_t b[sizeof old / 2];
  size_t n = 0;
  for (const char *p = old; p[0] && p[1]; p += 2) {
    unsigned x;
    assert_int_equal(sscanf(p, "%2x", &x), 1);
    b[n++] = (uint8_t)x;
  }
  mr_key k = {.kind = MR_KK_SYS_FORMAT};
  ProtobufCMessage *m = NULL;
  mr_error err;
  assert_int_equal(mr_value_decode(&k, b, n, &m, &err), MR_OK);
  const Moraine__V1__SysFormat *f = (const Moraine__V1__SysFormat *)m;
  assert_null(f->commit_log_batch_origin);
  assert_string_equal(f->writer_version, "writer_version#0 \xc3\xa9'\"");
  mr_value_free(m);
  char *now = golden_line(MR_KK_SYS_FORMAT);
  assert_non_null(strstr(now, old)); /* the old bytes lead the new vector */
  free(now);
}

static void golden_vectors(void **state) {
  const char *upd = getenv("MORAINE_GOLDEN_UPDATE");
  if (upd && strcmp(upd, "1") == 0)
    golden_update();
  FILE *f = fopen(golden_path(), "r");
  if (f == NULL)
    fail_msg("cannot open %s", golden_path());
  char *buf = NULL;
  size_t cap = 0;
  ssize_t got;
  int checked = 0;
  bool seen[MR_KK_COUNT] = {false};
  while ((got = getline(&buf, &cap, f)) > 0) {
    if (buf[got - 1] == '\n')
      buf[--got] = '\0';
    if (got == 0 || buf[0] == '#')
      continue;
    char *sp = strchr(buf, ' ');
    assert_non_null(sp);
    *sp = '\0';
    int kind;
    for (kind = 0; kind < MR_KK_COUNT; kind++) {
      char kt[MR_KEY_TEXT_MAX];
      if (!has_message((mr_key_kind)kind))
        continue;
      sample_key_text((mr_key_kind)kind, kt, sizeof kt);
      if (strcmp(kt, buf) == 0)
        break;
    }
    if (kind == MR_KK_COUNT)
      fail_msg("golden line for an unknown key: %s", buf);
    *sp = ' ';
    assert_false(seen[kind]);
    seen[kind] = true;
    char *want = golden_line((mr_key_kind)kind);
    if (strcmp(want, buf) != 0)
      fail_msg("golden mismatch for %s\n  file: %s\n  now:  %s",
               info_of((mr_key_kind)kind)->text, buf, want);
    free(want);
    checked++;
  }
  free(buf);
  fclose(f);
  for (int kind = 0; kind < MR_KK_COUNT; kind++)
    if (has_message((mr_key_kind)kind) && !seen[kind])
      fail_msg("no golden line for %s", info_of((mr_key_kind)kind)->text);
  assert_int_equal(checked, MR_KK_COUNT - 2);
}

/* ---- rejections ---- */

static void framing_rejections(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    uint8_t *b;
    size_t n;
    encode_sample((mr_key_kind)kind, &b, &n);
    for (size_t len = 0; len < MR_VALUE_HEADER_LEN; len++)
      expect_corrupt(&k, b, len, "truncated header");
    uint8_t *c = malloc(n);
    for (size_t i = 0; i < MR_VALUE_MAGIC_LEN; i++) {
      memcpy(c, b, n);
      c[i] ^= 0x20;
      expect_corrupt(&k, c, n, "wrong magic");
    }
    memcpy(c, b, n);
    c[4] = MR_VALUE_VERSION + 1;
    expect_corrupt(&k, c, n, "newer encoding version 2");
    c[4] = 0xff;
    expect_corrupt(&k, c, n, "newer encoding version 255");
    c[4] = 0;
    expect_corrupt(&k, c, n, "unknown encoding version 0");
    /* undecodable: a truncated varint, a length running past the end */
    memcpy(c, b, MR_VALUE_HEADER_LEN);
    c[5] = 0x08, c[6] = 0x80;
    expect_corrupt(&k, c, 7, "undecodable");
    c[5] = 0x12, c[6] = 0x7f;
    expect_corrupt(&k, c, 7, "undecodable");
    /* header only: required fields missing */
    expect_corrupt(&k, c, MR_VALUE_HEADER_LEN, "undecodable");
    free(c);
    free(b);
  }
}

static void empty_value_kinds(void **state) {
  mr_key_kind empty[] = {MR_KK_NAME, MR_KK_DELETE_TARGET};
  for (size_t i = 0; i < 2; i++) {
    mr_key k;
    sample_key(empty[i], &k);
    mr_error err;
    ProtobufCMessage *out = (ProtobufCMessage *)1;
    assert_int_equal(mr_value_decode(&k, NULL, 0, &out, &err), MR_OK);
    assert_null(out);
    assert_int_equal(mr_value_decode(&k, (const uint8_t *)"", 0, &out, &err),
                     MR_OK);
    expect_corrupt(&k, (const uint8_t *)"x", 1, "must be empty");
    uint8_t *b;
    size_t n;
    encode_sample(MR_KK_SCHEMA, &b, &n);
    expect_corrupt(&k, b, n, "must be empty");
    free(b);
    uint8_t *bytes = (uint8_t *)1;
    n = 99;
    assert_int_equal(mr_value_encode(empty[i], NULL, &bytes, &n, &err), MR_OK);
    assert_null(bytes);
    assert_int_equal(n, 0);
    assert_int_equal(mr_value_encode_into(empty[i], NULL, NULL, 0, &n, &err),
                     MR_OK);
    assert_int_equal(n, 0);
    assert_int_equal(mr_value_check_key(&k, NULL, &err), MR_OK);
    ProtobufCMessage *m = sample_value(MR_KK_SCHEMA);
    assert_int_equal(mr_value_encode(empty[i], m, &bytes, &n, &err),
                     MR_ERR_INVALID);
    mr_value_free(m);
  }
}

/* Every value under every other kind's key fails: wrong message. */
static void wrong_kind_rejected(void **state) {
  for (int a = 0; a < MR_KK_COUNT; a++) {
    if (!has_message((mr_key_kind)a))
      continue;
    uint8_t *b;
    size_t n;
    encode_sample((mr_key_kind)a, &b, &n);
    for (int kb = 0; kb < MR_KK_COUNT; kb++) {
      if (kb == a)
        continue;
      mr_key k;
      sample_key((mr_key_kind)kb, &k);
      if (!has_message((mr_key_kind)kb)) {
        expect_corrupt(&k, b, n, "must be empty");
        continue;
      }
      /* either undecodable as that message, or its value_kind is wrong */
      ProtobufCMessage *out;
      mr_error err;
      assert_int_equal(mr_value_decode(&k, b, n, &out, &err),
                       MR_ERR_CORRUPTION);
      assert_null(out);
      if (strstr(err.msg, "undecodable") == NULL &&
          strstr(err.msg, "holds a ") == NULL)
        fail_msg("%s value under %s: %s", info_of((mr_key_kind)a)->text,
                 info_of((mr_key_kind)kb)->text, err.msg);
    }
    free(b);
  }
  /* value_kind alone catches it: SysHead and TableStats are wire-compatible
     (an enum and int64s), yet a SysHead is refused under a tstat key */
  Moraine__V1__SysHead head = MORAINE__V1__SYS_HEAD__INIT;
  head.snapshot_id = 3;
  uint8_t *b;
  size_t n;
  mr_error err;
  assert_int_equal(mr_value_encode(MR_KK_SYS_HEAD, &head.base, &b, &n, &err),
                   MR_OK);
  mr_key k;
  sample_key(MR_KK_TSTAT, &k);
  head.snapshot_id = k.c[0];
  free(b);
  assert_int_equal(mr_value_encode(MR_KK_SYS_HEAD, &head.base, &b, &n, &err),
                   MR_OK);
  expect_corrupt(&k, b, n,
                 "holds a SysHead (value_kind 2), expected a TableStats");
  free(b);
}

/* Each key component, and history end_snapshot, must match the value. */
static void key_mismatch_every_kind(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    const mr_key_kind_info *info = info_of((mr_key_kind)kind);
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    uint8_t *b;
    size_t n;
    encode_sample((mr_key_kind)kind, &b, &n);
    ProtobufCMessage *m = sample_value((mr_key_kind)kind);
    unsigned last = info->ncomp + ((info->flags & MR_KF_VERSIONED) ? 1 : 0);
    for (unsigned i = 0; i < last; i++) {
      mr_key bad = k;
      bad.c[i] += 1;
      const char *name = i < info->ncomp ? info->comp[i] : "end_snapshot";
      char what[128];
      snprintf(what, sizeof what, "%s is ", name);
      expect_corrupt(&bad, b, n, what);
      mr_error err;
      assert_int_equal(mr_value_check_key(&bad, m, &err), MR_ERR_INVALID);
      assert_non_null(strstr(err.msg, what));
    }
    mr_error err;
    assert_int_equal(mr_value_check_key(&k, m, &err), MR_OK);
    mr_value_free(m);
    free(b);
  }
}

/* Versioned kinds: current values carry no end_snapshot, history values do. */
static void current_and_history_end_snapshot(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    const mr_key_kind_info *info = info_of((mr_key_kind)kind);
    if (!(info->flags & MR_KF_VERSIONED))
      continue;
    mr_key hist, cur;
    sample_key((mr_key_kind)kind, &hist);
    cur = hist;
    cur.history = false;
    ProtobufCMessage *m = sample_value((mr_key_kind)kind);
    uint8_t *b;
    size_t n;
    mr_error err;
    assert_int_equal(mr_value_encode((mr_key_kind)kind, m, &b, &n, &err),
                     MR_OK);
    expect_corrupt(&cur, b, n, "a current value carries end_snapshot");
    free(b);
    /* clear end_snapshot: fine under current, wrong under history */
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor,
                                                        "end_snapshot");
    *(protobuf_c_boolean *)((uint8_t *)m + f->quantifier_offset) = 0;
    roundtrip(&cur, m);
    assert_int_equal(mr_value_encode((mr_key_kind)kind, m, &b, &n, &err),
                     MR_OK);
    expect_corrupt(&hist, b, n, "end_snapshot is absent in a history value");
    free(b);
    mr_value_free(m);
  }
}

static void decode_rejects_bad_keys(void **state) {
  uint8_t *b;
  size_t n;
  encode_sample(MR_KK_TSTAT, &b, &n);
  mr_key k;
  sample_key(MR_KK_TSTAT, &k);
  mr_error err;
  ProtobufCMessage *out;
  k.history = true; /* tstat is unversioned */
  assert_int_equal(mr_value_decode(&k, b, n, &out, &err), MR_ERR_INVALID);
  assert_null(out);
  k.history = false;
  k.kind = MR_KK_COUNT;
  assert_int_equal(mr_value_decode(&k, b, n, &out, &err), MR_ERR_INVALID);
  free(b);
}

static void encode_rejections(void **state) {
  mr_error err;
  uint8_t *b;
  size_t n;
  ProtobufCMessage *schema = sample_value(MR_KK_SCHEMA);
  /* message of another kind, NULL message, unknown kind */
  assert_int_equal(mr_value_encode(MR_KK_TABLE, schema, &b, &n, &err),
                   MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "moraine.v1.Table"));
  assert_null(b);
  assert_int_equal(mr_value_encode(MR_KK_SCHEMA, NULL, &b, &n, &err),
                   MR_ERR_INVALID);
  assert_int_equal(mr_value_encode(MR_KK_COUNT, schema, &b, &n, &err),
                   MR_ERR_INVALID);
  /* a value_kind set by the caller must be the kind's own */
  ((Moraine__V1__Schema *)schema)->value_kind =
      MORAINE__V1__VALUE_KIND__VALUE_KIND_TABLE;
  assert_int_equal(mr_value_encode(MR_KK_SCHEMA, schema, &b, &n, &err),
                   MR_ERR_INVALID);
  ((Moraine__V1__Schema *)schema)->value_kind =
      MORAINE__V1__VALUE_KIND__VALUE_KIND_SCHEMA;
  assert_int_equal(mr_value_encode(MR_KK_SCHEMA, schema, &b, &n, &err), MR_OK);
  free(b);
  /* buffer too small reports the size needed */
  uint8_t small[8];
  size_t need;
  assert_int_equal(mr_value_encode_into(MR_KK_SCHEMA, schema, small,
                                        sizeof small, &need, &err),
                   MR_ERR_INVALID);
  assert_true(need > sizeof small);
  mr_value_free(schema);
  /* a required string left NULL */
  Moraine__V1__SysFormat fmt = MORAINE__V1__SYS_FORMAT__INIT;
  fmt.layout_version = 1;
  assert_int_equal(mr_value_encode(MR_KK_SYS_FORMAT, &fmt.base, &b, &n, &err),
                   MR_ERR_INVALID);
  fmt.writer_version = (char *)"moraine 0.1.0";
  assert_int_equal(mr_value_encode(MR_KK_SYS_FORMAT, &fmt.base, &b, &n, &err),
                   MR_OK);
  free(b);
}

/* A sys/format value written before created_at (field 5) existed — the
 * golden vector of that time — still decodes, without a creation time; the
 * sample (every field set) carries one. */
static void sys_format_before_created_at(void **state) {
  static const char old_hex[] =
      "4d524e4501080110d08f80800f1a157772697465725f76657273696f6e233020c3a92722";
  uint8_t b[sizeof old_hex / 2];
  for (size_t i = 0; i < sizeof b; i++)
    sscanf(old_hex + 2 * i, "%2hhx", &b[i]);
  mr_key k;
  sample_key(MR_KK_SYS_FORMAT, &k);
  ProtobufCMessage *m = NULL;
  mr_error err;
  assert_int_equal(mr_value_decode(&k, b, sizeof b, &m, &err), MR_OK);
  const Moraine__V1__SysFormat *f = (const Moraine__V1__SysFormat *)m;
  assert_false(f->has_created_at);
  mr_value_free(m);
  uint8_t *nb;
  size_t n;
  encode_sample(MR_KK_SYS_FORMAT, &nb, &n);
  assert_int_equal(mr_value_decode(&k, nb, n, &m, &err), MR_OK);
  assert_true(((const Moraine__V1__SysFormat *)m)->has_created_at);
  mr_value_free(m);
  free(nb);
}

/* sys/maintenance_status holds at most 16 passes: encode and decode agree. */
static void maintenance_pass_cap(void **state) {
  Moraine__V1__MaintenancePass passes[MR_VALUE_MAX_PASSES + 1],
      *ptrs[MR_VALUE_MAX_PASSES + 1];
  for (int i = 0; i <= MR_VALUE_MAX_PASSES; i++) {
    Moraine__V1__MaintenancePass p = MORAINE__V1__MAINTENANCE_PASS__INIT;
    p.start_time_us = 1700000000000000 + i;
    p.trigger = (char *)"auto";
    passes[i] = p;
    ptrs[i] = &passes[i];
  }
  Moraine__V1__MaintenanceStatus st = MORAINE__V1__MAINTENANCE_STATUS__INIT;
  st.pass = ptrs;
  st.n_pass = MR_VALUE_MAX_PASSES;
  mr_key k;
  sample_key(MR_KK_SYS_MAINTENANCE, &k);
  roundtrip(&k, &st.base);
  st.n_pass = MR_VALUE_MAX_PASSES + 1;
  uint8_t *b;
  size_t n;
  mr_error err;
  assert_int_equal(
      mr_value_encode(MR_KK_SYS_MAINTENANCE, &st.base, &b, &n, &err),
      MR_ERR_INVALID);
  /* a stored 17-pass value (packed by hand) is corrupt */
  st.value_kind = MORAINE__V1__VALUE_KIND__VALUE_KIND_SYS_MAINTENANCE;
  n = MR_VALUE_HEADER_LEN + protobuf_c_message_get_packed_size(&st.base);
  b = malloc(n);
  memcpy(b, MR_VALUE_MAGIC "\x01", MR_VALUE_HEADER_LEN);
  protobuf_c_message_pack(&st.base, b + MR_VALUE_HEADER_LEN);
  expect_corrupt(&k, b, n, "more than 16 maintenance passes");
  free(b);
}

/* Fields unknown to this build are skipped (forward compatibility). */
static void unknown_fields_skipped(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    uint8_t *b;
    size_t n;
    encode_sample((mr_key_kind)kind, &b, &n);
    /* field 1000, varint 7, then field 1001 length-delimited "hi" */
    const uint8_t extra[] = {0xc0, 0x3e, 0x07, 0xca, 0x3e, 0x02, 'h', 'i'};
    uint8_t *c = malloc(n + sizeof extra);
    memcpy(c, b, n);
    memcpy(c + n, extra, sizeof extra);
    ProtobufCMessage *out;
    mr_error err;
    if (mr_value_decode(&k, c, n + sizeof extra, &out, &err) != MR_OK)
      fail_msg("%s: %s", info_of((mr_key_kind)kind)->text, err.msg);
    ProtobufCMessage *m = sample_value((mr_key_kind)kind);
    assert_true(sample_equal(m, out, true));
    mr_value_free(m);
    mr_value_free(out);
    free(c);
    free(b);
  }
}

/* Every other value of every byte, every truncation: never a crash. */
static void flips_and_truncations(void **state) {
  for (int kind = 0; kind < MR_KK_COUNT; kind++) {
    if (!has_message((mr_key_kind)kind))
      continue;
    mr_key k;
    sample_key((mr_key_kind)kind, &k);
    uint8_t *b;
    size_t n;
    encode_sample((mr_key_kind)kind, &b, &n);
    uint8_t *c = malloc(n);
    memcpy(c, b, n);
    for (size_t i = 0; i < n; i++) {
      for (unsigned x = 1; x < 256; x++) {
        c[i] = (uint8_t)(b[i] ^ x);
        expect_corrupt_or_consistent(&k, c, n);
      }
      c[i] = b[i];
    }
    for (size_t len = 0; len < n; len++) {
      uint8_t *t =
          malloc(len ? len : 1); /* exact-size copy so ASan sees overreads */
      memcpy(t, b, len);
      expect_corrupt_or_consistent(&k, t, len);
      free(t);
    }
    free(c);
    free(b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(table_covers_every_kind),
      cmocka_unit_test(every_kind_roundtrips),
      cmocka_unit_test(null_empty_zero_roundtrip),
      cmocka_unit_test(minimal_values_roundtrip),
      cmocka_unit_test(golden_vectors),
      cmocka_unit_test(sys_format_without_origin),
      cmocka_unit_test(framing_rejections),
      cmocka_unit_test(empty_value_kinds),
      cmocka_unit_test(wrong_kind_rejected),
      cmocka_unit_test(key_mismatch_every_kind),
      cmocka_unit_test(current_and_history_end_snapshot),
      cmocka_unit_test(decode_rejects_bad_keys),
      cmocka_unit_test(encode_rejections),
      cmocka_unit_test(maintenance_pass_cap),
      cmocka_unit_test(sys_format_before_created_at),
      cmocka_unit_test(unknown_fields_skipped),
      cmocka_unit_test(flips_and_truncations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
