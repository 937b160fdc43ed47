/*
 * test_key.c — the key table's shape, the golden vectors (and their copy in
 * docs/format.md), and every rejection path of encode, decode, format,
 * parse and the scan-bound constructors. Random inputs: test_key_props.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "key_test_util.h"

/* ---- the table ---- */

static void kind_table_is_well_formed(void **state) {
  int versioned_ss = -1;
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *a = mr_key_kind_get((mr_key_kind)i);
    assert_non_null(a);
    assert_int_equal(a->kind, i);
    assert_non_null(a->text);
    assert_non_null(mr_subspace_text(a->subspace));
    /* declared components plus a history key's end_snapshot fit in c[] */
    assert_true(a->ncomp + ((a->flags & MR_KF_VERSIONED) ? 1u : 0u) <=
                MR_KEY_MAX_COMP);
    for (unsigned c = 0; c < 4; c++)
      assert_true((c < a->ncomp) == (a->comp[c] != NULL));
    if (a->flags & MR_KF_TABLE_SCOPED)
      assert_string_equal(a->comp[0], "table_id");
    if (a->flags & MR_KF_HAS_NAME)
      assert_int_equal(a->ncomp, 3);
    if (a->flags & MR_KF_VERSIONED) {
      /* history reuses kind bytes: all versioned kinds share one subspace */
      assert_true(a->kind_ordinal >= 0);
      assert_true(versioned_ss < 0 || versioned_ss == (int)a->subspace);
      versioned_ss = (int)a->subspace;
    }
    unsigned same_ss = 0, max_ord = 0;
    for (unsigned j = 0; j < MR_KK_COUNT; j++) {
      const mr_key_kind_info *b = mr_key_kind_get((mr_key_kind)j);
      if (b->subspace != a->subspace)
        continue;
      same_ss++;
      if (b->kind_ordinal > (int)max_ord)
        max_ord = (unsigned)b->kind_ordinal;
      if (j != i) {
        assert_int_not_equal(a->kind_ordinal, b->kind_ordinal);
        assert_string_not_equal(a->text, b->text);
      }
    }
    /* a kind-less subspace holds one kind; otherwise ordinals are 0..n-1 */
    if (a->kind_ordinal < 0)
      assert_int_equal(same_ss, 1);
    else
      assert_int_equal(max_ord + 1, same_ss);
  }
  assert_int_equal(versioned_ss, MR_SS_CURRENT);
  for (unsigned s = 0; s < MR_SS_COUNT; s++)
    assert_int_equal(mr_subspace_byte((mr_subspace)s), s + 2);
  assert_int_equal(mr_subspace_byte(MR_SS_NAME), 0x0a);
  assert_int_equal(mr_subspace_byte(MR_SS_DELETE_TARGET), 0x0b);
  assert_null(mr_key_kind_get(MR_KK_COUNT));
  assert_null(mr_subspace_text(MR_SS_COUNT));
  assert_int_equal(mr_subspace_byte(MR_SS_COUNT), 0);
  assert_string_equal(mr_name_kind_text(MR_NAME_TABLE), "table");
  assert_null(mr_name_kind_text(MR_NAME_KIND_COUNT));
}

/* ---- golden vectors ---- */

typedef struct golden {
  unsigned line;
  bool covered[MR_KK_COUNT][2];
  bool name_escape, name_utf8;
  uint8_t prev[MR_KEY_MAX_BYTES];
  size_t prev_len;
} golden;

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Where each field of k starts in its encoding, after the subspace byte. */
static unsigned field_starts(const mr_key *k, size_t len, size_t starts[8]) {
  unsigned n = 0;
  starts[n++] = 1;
  for (unsigned p = 0;; p++) {
    mr_key_range r;
    if (mr_key_range_prefix(k, p, &r, NULL) != MR_OK)
      break;
    if (r.start.len != starts[n - 1] && r.start.len < len)
      starts[n++] = r.start.len;
  }
  return n;
}

static void check_golden_line(golden *g, const char *line, size_t n) {
  uint8_t want[MR_KEY_MAX_BYTES];
  size_t len = 0, starts[8], nstarts = 0;
  size_t i = 0;
  /* hex groups, one space apart, then two or more spaces, then the text */
  for (;;) {
    if (i < n && line[i] == ' ') {
      if (i + 1 < n && line[i + 1] == ' ')
        break;
      starts[nstarts++] = len;
      i++;
    }
    int hi = i + 1 < n ? hexval(line[i]) : -1,
        lo = i + 1 < n ? hexval(line[i + 1]) : -1;
    if (hi < 0 || lo < 0)
      fail_msg("golden line %u: bad hex at column %zu", g->line, i + 1);
    want[len++] = (uint8_t)(hi << 4 | lo);
    i += 2;
  }
  while (i < n && line[i] == ' ')
    i++;
  const char *text = line + i;
  size_t tlen = n - i;

  mr_key k, d, p2;
  uint8_t name_buf[MR_KEY_MAX_NAME], name_buf2[MR_KEY_MAX_NAME];
  mr_error err;
  if (mr_key_parse(text, tlen, &k, name_buf, sizeof name_buf, &err) != MR_OK)
    fail_msg("golden line %u: parse: %s", g->line, err.msg);

  mr_keybuf got;
  if (mr_key_encode(&k, &got, &err) != MR_OK)
    fail_msg("golden line %u: encode: %s", g->line, err.msg);
  if (got.len != len || memcmp(got.b, want, len) != 0)
    fail_msg("golden line %u: encoding differs from the pinned bytes", g->line);

  size_t expect[8];
  unsigned nexpect = field_starts(&k, len, expect);
  if (nexpect != nstarts ||
      memcmp(expect, starts, nstarts * sizeof starts[0]) != 0)
    fail_msg("golden line %u: hex groups are not the key's fields", g->line);

  if (mr_key_decode(want, len, &d, &err) != MR_OK)
    fail_msg("golden line %u: decode: %s", g->line, err.msg);
  if (!keys_equal(&d, &k) || mr_key_compare(&d, &k) != 0)
    fail_msg("golden line %u: decoded key differs from the parsed one",
             g->line);

  char out[MR_KEY_TEXT_MAX];
  if (mr_key_format(&d, out, sizeof out, &err) != MR_OK)
    fail_msg("golden line %u: format: %s", g->line, err.msg);
  if (strlen(out) != tlen || memcmp(out, text, tlen) != 0)
    fail_msg("golden line %u: formats as %s", g->line, out);
  assert_int_equal(
      mr_key_parse(out, strlen(out), &p2, name_buf2, sizeof name_buf2, NULL),
      MR_OK);
  assert_true(keys_equal(&p2, &d));

  /* lines ascend in byte order, and mr_key_compare agrees */
  if (g->prev_len > 0) {
    mr_key prev;
    if (bytes_compare(g->prev, g->prev_len, want, len) >= 0)
      fail_msg("golden line %u: not in ascending byte order", g->line);
    assert_int_equal(mr_key_decode(g->prev, g->prev_len, &prev, NULL), MR_OK);
    assert_true(mr_key_compare(&prev, &d) < 0);
  }
  memcpy(g->prev, want, len);
  g->prev_len = len;

  g->covered[k.kind][k.history] = true;
  for (size_t j = 0; j < k.name_len; j++) {
    if (k.name[j] <= 0x01)
      g->name_escape = true;
  }
  for (size_t j = 0; j < tlen; j++) {
    if ((uint8_t)text[j] >= 0x80)
      g->name_utf8 = true; /* printed raw: well-formed UTF-8 */
  }
}

/* Calls fn for every data line (not blank, not '#') of the golden file. */
static char *golden_text(void) {
  char path[4096];
  size_t len;
  char *text =
      read_file(source_path(path, sizeof path, "tests/golden/keys.txt"), &len);
  if (text == NULL)
    fail_msg("cannot read %s", path);
  return text;
}

static const char *next_line(const char *s, size_t *n, const char **next) {
  for (;;) {
    if (*s == '\0')
      return NULL;
    const char *nl = strchr(s, '\n');
    *n = nl ? (size_t)(nl - s) : strlen(s);
    *next = s + *n + (nl != NULL);
    if (*n > 0 && s[0] != '#')
      return s;
    s = *next;
  }
}

static void golden_vectors(void **state) {
  char *text = golden_text();
  golden *g = calloc(1, sizeof *g);
  assert_non_null(g);
  const char *line, *next = text;
  size_t n;
  while ((line = next_line(next, &n, &next)) != NULL) {
    g->line++;
    check_golden_line(g, line, n);
  }
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *info = mr_key_kind_get((mr_key_kind)i);
    if (!g->covered[i][0])
      fail_msg("no golden vector for %s", info->text);
    if ((info->flags & MR_KF_VERSIONED) && !g->covered[i][1])
      fail_msg("no golden vector for history/%s", info->text);
  }
  assert_true(g->name_escape);
  assert_true(g->name_utf8);
  free(g);
  free(text);
}

static void docs_show_every_golden_line(void **state) {
  char path[4096];
  size_t dlen, n;
  char *doc =
      read_file(source_path(path, sizeof path, "docs/format.md"), &dlen);
  if (doc == NULL)
    fail_msg("cannot read %s", path);
  assert_non_null(strstr(doc, "\n## Keys\n"));
  char *text = golden_text();
  const char *line, *next = text;
  while ((line = next_line(next, &n, &next)) != NULL) {
    char *needle = malloc(n + 3);
    assert_non_null(needle);
    needle[0] = '\n';
    memcpy(needle + 1, line, n);
    memcpy(needle + 1 + n, "\n", 2);
    if (strstr(doc, needle) == NULL)
      fail_msg("docs/format.md lacks the golden line: %.*s", (int)n, line);
    free(needle);
  }
  free(text);
  free(doc);
}

/* ---- rejections ---- */

static void history_of_unversioned_kinds_is_rejected(void **state) {
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *info = mr_key_kind_get((mr_key_kind)i);
    if (info->flags & MR_KF_VERSIONED)
      continue;
    mr_key k = {.kind = (mr_key_kind)i,
                .history = true,
                .name = (const uint8_t *)"x",
                .name_len = 1};
    mr_keybuf b;
    mr_key_range r;
    char text[MR_KEY_TEXT_MAX];
    mr_error err;
    assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unversioned"));
    assert_int_equal(mr_key_format(&k, text, sizeof text, NULL),
                     MR_ERR_INVALID);
    assert_int_equal(mr_key_range_kind((mr_key_kind)i, true, &r, NULL),
                     MR_ERR_INVALID);
    assert_int_equal(mr_key_range_prefix(&k, 0, &r, NULL), MR_ERR_INVALID);
    if (info->flags & MR_KF_TABLE_SCOPED)
      assert_int_equal(mr_key_range_table((mr_key_kind)i, true, 1, &r, NULL),
                       MR_ERR_INVALID);
  }
}

static void range_table_rejects_unscoped_kinds(void **state) {
  unsigned scoped = 0;
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *info = mr_key_kind_get((mr_key_kind)i);
    mr_key_range r;
    mr_error err;
    mr_status rc = mr_key_range_table((mr_key_kind)i, false, 7, &r, &err);
    if (info->flags & MR_KF_TABLE_SCOPED) {
      assert_int_equal(rc, MR_OK);
      scoped++;
    } else {
      assert_int_equal(rc, MR_ERR_INVALID);
      assert_non_null(strstr(err.msg, "not table-scoped"));
      assert_int_equal(mr_key_range_table((mr_key_kind)i, true, 7, &r, NULL),
                       MR_ERR_INVALID);
    }
  }
  assert_true(scoped > 0);
  mr_key_range r;
  assert_int_equal(mr_key_range_table(MR_KK_COUNT, false, 7, &r, NULL),
                   MR_ERR_INVALID);
  assert_int_equal(mr_key_range_table((mr_key_kind)-1, false, 7, &r, NULL),
                   MR_ERR_INVALID);
}

static void encode_rejects_bad_keys(void **state) {
  mr_keybuf b;
  mr_error err;
  static uint8_t big[MR_KEY_MAX_NAME + 1];
  mr_key k = {.kind = MR_KK_COUNT};
  assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
  k = (mr_key){.kind = MR_KK_NAME, .c = {MR_NAME_KIND_COUNT}};
  assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
  k = (mr_key){
      .kind = MR_KK_NAME, .name = big, .name_len = MR_KEY_MAX_NAME + 1};
  assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
  k.name_len = MR_KEY_MAX_NAME; /* the longest accepted, all escaped */
  assert_int_equal(mr_key_encode(&k, &b, &err), MR_OK);
  assert_int_equal(b.len, 2 + 8 + 2 * MR_KEY_MAX_NAME + 1 + 8);
  k = (mr_key){.kind = MR_KK_NAME, .name = NULL, .name_len = 3};
  assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
  /* an escaped name must be well-formed */
  static const uint8_t bad_escapes[][2] = {
      {0x01, 0x02}, {0x00, 'a'}, {'a', 0x01}};
  for (unsigned i = 0; i < 3; i++) {
    k = (mr_key){.kind = MR_KK_NAME,
                 .name = bad_escapes[i],
                 .name_len = 2,
                 .name_escaped = true};
    assert_int_equal(mr_key_encode(&k, &b, &err), MR_ERR_INVALID);
  }
  mr_key_range r;
  k = (mr_key){.kind = MR_KK_COLUMN};
  assert_int_equal(mr_key_range_prefix(&k, 3, &r, NULL), MR_ERR_INVALID);
  assert_int_equal(mr_key_range_prefix(&k, 2, &r, NULL), MR_OK);
  k.history = true;
  assert_int_equal(mr_key_range_prefix(&k, 3, &r, NULL), MR_OK);
  assert_int_equal(mr_key_range_prefix(&k, 0xffffu, &r, NULL), MR_ERR_INVALID);
  assert_int_equal(mr_key_range_subspace(MR_SS_COUNT, &r, NULL),
                   MR_ERR_INVALID);
  assert_int_equal(mr_key_range_name(MR_NAME_KIND_COUNT, 0, "a", 1, &r, NULL),
                   MR_ERR_INVALID);
}

typedef struct bad_bytes {
  const char *why;
  size_t len;
  uint8_t b[24];
} bad_bytes;

static void decode_rejects_malformed_bytes(void **state) {
  static const bad_bytes cases[] = {
      {"empty", 0, {0}},
      {"subspace 0x00", 1, {0x00}},
      {"subspace 0x01", 1, {0x01}},
      {"subspace past the table", 1, {0x0c}},
      {"index has no kinds yet", 3, {0x07, 0x02, 0x00}},
      {"sys kind byte missing", 1, {0x02}},
      {"sys kind byte 0x01", 2, {0x02, 0x01}},
      {"unknown sys kind", 2, {0x02, 0x06}},
      {"unknown current kind", 10, {0x04, 0x12, 0, 0, 0, 0, 0, 0, 0, 1}},
      {"history of unversioned fstat", 2, {0x05, 0x0c}},
      {"history without kind byte", 1, {0x05}},
      {"trailing byte after sys/head", 3, {0x02, 0x03, 0x00}},
      {"truncated snapshot_id", 8, {0x03, 0, 0, 0, 0, 0, 0, 0}},
      {"history/table without end_snapshot",
       10,
       {0x05, 0x03, 0, 0, 0, 0, 0, 0, 0, 5}},
      {"name_kind 2", 2, {0x0a, 0x04}},
      {"name_kind 0x00", 2, {0x0a, 0x00}},
      {"unterminated name", 12, {0x0a, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'}},
      {"escape at end", 11, {0x0a, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}},
      {"bad escape 01 02",
       13,
       {0x0a, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x00}},
      {"name without entity_id",
       11,
       {0x0a, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0x00}},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mr_key k;
    mr_error err = {0};
    mr_status rc = mr_key_decode(cases[i].b, cases[i].len, &k, &err);
    if (rc != MR_ERR_CORRUPTION)
      fail_msg("%s: decoded with status %d", cases[i].why, rc);
    assert_true(strlen(err.msg) > 0);
  }
  /* a name one byte over the limit */
  uint8_t *big = calloc(1, 2 + 8 + MR_KEY_MAX_NAME + 1 + 1 + 8);
  assert_non_null(big);
  big[0] = 0x0a, big[1] = 0x02;
  memset(big + 10, 'n', MR_KEY_MAX_NAME + 1);
  mr_key k;
  assert_int_equal(
      mr_key_decode(big, 2 + 8 + MR_KEY_MAX_NAME + 2 + 8, &k, NULL),
      MR_ERR_CORRUPTION);
  big[10 + MR_KEY_MAX_NAME] = 0x00; /* exactly the limit decodes */
  assert_int_equal(
      mr_key_decode(big, 2 + 8 + MR_KEY_MAX_NAME + 1 + 8, &k, NULL), MR_OK);
  assert_int_equal(k.name_len, MR_KEY_MAX_NAME);
  free(big);
}

static void decoded_names_keep_their_escapes(void **state) {
  static const uint8_t bytes[] = {
      0x0a, 0x03, 0,    0,    0, 0, 0, 0, 0, 9, 'a', 0x01, 0x00,
      'b',  0x01, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0,   4};
  mr_key k;
  assert_int_equal(mr_key_decode(bytes, sizeof bytes, &k, NULL), MR_OK);
  assert_true(k.name_escaped);
  assert_ptr_equal(k.name, bytes + 10);
  assert_int_equal(k.name_len, 6);
  assert_int_equal(k.c[0], MR_NAME_TABLE);
  assert_int_equal(k.c[1], 9);
  assert_int_equal(k.c[2], 4);
  char raw[8];
  size_t n = 0;
  assert_int_equal(mr_key_name_copy(&k, raw, sizeof raw, &n, NULL), MR_OK);
  assert_int_equal(n, 4);
  assert_memory_equal(raw, "a\0b\1", 5);
  assert_int_equal(mr_key_name_copy(&k, raw, 4, &n, NULL),
                   MR_ERR_INVALID); /* no room for NUL */
  assert_int_equal(mr_key_name_copy(&k, raw, 0, &n, NULL), MR_ERR_INVALID);
  mr_key col = {.kind = MR_KK_COLUMN};
  assert_int_equal(mr_key_name_copy(&col, raw, sizeof raw, &n, NULL),
                   MR_ERR_INVALID);

  /* the escaped form and the raw form are the same key */
  mr_key r = {.kind = MR_KK_NAME,
              .c = {MR_NAME_TABLE, 9, 4},
              .name = (const uint8_t *)"a\0b\1",
              .name_len = 4};
  mr_keybuf b;
  assert_int_equal(mr_key_compare(&k, &r), 0);
  assert_int_equal(mr_key_encode(&r, &b, NULL), MR_OK);
  assert_int_equal(b.len, sizeof bytes);
  assert_memory_equal(b.b, bytes, sizeof bytes);
  assert_int_equal(mr_key_encode(&k, &b, NULL), MR_OK);
  assert_memory_equal(b.b, bytes, sizeof bytes);
  char t1[MR_KEY_TEXT_MAX], t2[MR_KEY_TEXT_MAX];
  assert_int_equal(mr_key_format(&k, t1, sizeof t1, NULL), MR_OK);
  assert_int_equal(mr_key_format(&r, t2, sizeof t2, NULL), MR_OK);
  assert_string_equal(t1, t2);
  assert_string_equal(t1, "name{name_kind=table,parent_id=9,exact_name="
                          "\"a\\x00b\\x01\",entity_id=4}");
}

static void format_needs_room(void **state) {
  mr_key k = {.kind = MR_KK_FSTAT, .c = {1, 2, 3}};
  static const char want[] =
      "current/fstat{table_id=1,data_file_id=2,column_id=3}";
  char out[sizeof want];
  mr_error err;
  assert_int_equal(mr_key_format(&k, out, sizeof out, &err), MR_OK);
  assert_string_equal(out, want);
  assert_int_equal(mr_key_format(&k, out, sizeof out - 1, &err),
                   MR_ERR_INVALID);
  assert_int_equal(mr_key_format(&k, out, 0, &err), MR_ERR_INVALID);
  /* the worst case fits MR_KEY_TEXT_MAX: a full name of bytes printed as \xNN
   */
  static uint8_t name[MR_KEY_MAX_NAME];
  memset(name, 0x80, sizeof name);
  k = (mr_key){.kind = MR_KK_NAME,
               .c = {1, UINT64_MAX, UINT64_MAX},
               .name = name,
               .name_len = sizeof name};
  char *big = malloc(MR_KEY_TEXT_MAX);
  assert_non_null(big);
  assert_int_equal(mr_key_format(&k, big, MR_KEY_TEXT_MAX, &err), MR_OK);
  assert_true(strlen(big) > 4 * MR_KEY_MAX_NAME);
  free(big);
  k = (mr_key){.kind = MR_KK_NAME, .c = {5}};
  assert_int_equal(mr_key_format(&k, out, sizeof out, &err), MR_ERR_INVALID);
}

static void format_prints_names_readably(void **state) {
  static const struct {
    const char *name;
    size_t len;
    const char *want;
  } cases[] = {
      {"say \"hi\"\\", 9, "\"say \\\"hi\\\"\\\\\""},
      {"tab\there\x7f", 9, "\"tab\\x09here\\x7f\""},
      {"\xc3\xa9\xe6\x97\xa5\xf0\x9f\xa6\x86", 9,
       "\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\xa6\x86\""},
      {"\xc2\x85", 2, "\"\\xc2\\x85\""}, /* C1 control */
      {"\xc0\xaf\xed\xa0\x80", 5,
       "\"\\xc0\\xaf\\xed\\xa0\\x80\""}, /* overlong, surrogate */
      {"\xe6\x97", 2, "\"\\xe6\\x97\""}, /* cut sequence */
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mr_key k = {.kind = MR_KK_NAME,
                .name = (const uint8_t *)cases[i].name,
                .name_len = cases[i].len};
    char out[MR_KEY_TEXT_MAX], want[256];
    snprintf(want, sizeof want,
             "name{name_kind=schema,parent_id=0,exact_name=%s,entity_id=0}",
             cases[i].want);
    assert_int_equal(mr_key_format(&k, out, sizeof out, NULL), MR_OK);
    assert_string_equal(out, want);
    mr_key p;
    uint8_t buf[MR_KEY_MAX_NAME];
    assert_int_equal(mr_key_parse(out, strlen(out), &p, buf, sizeof buf, NULL),
                     MR_OK);
    assert_true(keys_equal(&p, &k));
  }
}

static void parse_rejects_malformed_text(void **state) {
  static const char *const bad[] = {
      "",
      "sys",
      "sys/head{}",
      "current/nothing",
      "current/column",
      "current/column{table_id=1}",
      "current/column{column_id=1,table_id=1}",
      "current/column{table_id=1,column_id=1",
      "current/column{table_id=1,column_id=1}x",
      "current/column{table_id=01,column_id=1}",
      "current/column{table_id=-1,column_id=1}",
      "current/column{table_id=1, column_id=1}",
      "current/tstat{table_id=18446744073709551616}",
      "history/tstat{table_id=1,end_snapshot=2}",
      "history/table{table_id=1}",
      "snapshot{snapshot_id=}",
      "name{name_kind=view,parent_id=0,exact_name=\"a\",entity_id=1}",
      "name{name_kind=1,parent_id=0,exact_name=\"a\",entity_id=1}",
      "name{name_kind=table,parent_id=0,exact_name=a,entity_id=1}",
      "name{name_kind=table,parent_id=0,exact_name=\"a,entity_id=1}",
      "name{name_kind=table,parent_id=0,exact_name=\"\\q\",entity_id=1}",
      "name{name_kind=table,parent_id=0,exact_name=\"\\x4\",entity_id=1}",
      "name{name_kind=table,parent_id=0,exact_name=\"\\xAB\",entity_id=1}",
  };
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mr_key k;
    uint8_t buf[MR_KEY_MAX_NAME];
    mr_error err = {0};
    if (mr_key_parse(bad[i], strlen(bad[i]), &k, buf, sizeof buf, &err) !=
        MR_ERR_INVALID)
      fail_msg("parsed: %s", bad[i]);
    assert_non_null(strstr(err.msg, "column"));
  }
  /* the name buffer bounds the name */
  mr_key k;
  uint8_t small[2];
  const char *t =
      "name{name_kind=table,parent_id=0,exact_name=\"abc\",entity_id=1}";
  assert_int_equal(mr_key_parse(t, strlen(t), &k, small, sizeof small, NULL),
                   MR_ERR_INVALID);
}

/* ---- scan bounds at the edges ---- */

static void assert_bytes(const mr_keybuf *b, const uint8_t *want, size_t len) {
  assert_int_equal(b->len, len);
  assert_memory_equal(b->b, want, len);
}

static void range_ends_carry_past_0xff(void **state) {
  mr_key_range r;
  const uint64_t max = UINT64_MAX;
  /* table_id all 0xff: the end drops the 0xff bytes and bumps the kind */
  assert_int_equal(mr_key_range_table(MR_KK_FSTAT, false, max, &r, NULL),
                   MR_OK);
  static const uint8_t s1[] = {0x04, 0x0c, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff, 0xff};
  static const uint8_t e1[] = {0x04, 0x0d};
  assert_bytes(&r.start, s1, sizeof s1);
  assert_bytes(&r.end, e1, sizeof e1);
  /* a full key of all-0xff components as the prefix */
  mr_key k = {.kind = MR_KK_FSTAT, .c = {max, max, max}};
  assert_int_equal(mr_key_range_prefix(&k, 3, &r, NULL), MR_OK);
  assert_int_equal(r.start.len, 26);
  assert_bytes(&r.end, e1, sizeof e1);
  /* trailing 0xff inside one u64 carries into its next byte up */
  assert_int_equal(
      mr_key_range_table(MR_KK_COLUMN, true, 0x00ffffffffffffffull, &r, NULL),
      MR_OK);
  static const uint8_t e2[] = {0x05, 0x06, 0x01};
  assert_bytes(&r.end, e2, sizeof e2);
  /* delete_target has no kind byte: the carry reaches the next subspace */
  k = (mr_key){.kind = MR_KK_DELETE_TARGET, .c = {max, max, 9}};
  assert_int_equal(mr_key_range_prefix(&k, 2, &r, NULL), MR_OK);
  static const uint8_t e3[] = {0x0c};
  assert_bytes(&r.end, e3, sizeof e3);
  /* a plain increment */
  assert_int_equal(mr_key_range_table(MR_KK_TABLE, false, 0x1ff, &r, NULL),
                   MR_OK);
  static const uint8_t e5[] = {0x04, 0x03, 0, 0, 0, 0, 0, 0, 0x02};
  assert_bytes(&r.end, e5, sizeof e5);
  /* every subspace is one byte wide */
  for (unsigned s = 0; s < MR_SS_COUNT; s++) {
    assert_int_equal(mr_key_range_subspace((mr_subspace)s, &r, NULL), MR_OK);
    uint8_t b = (uint8_t)(s + 2), e = (uint8_t)(s + 3);
    assert_bytes(&r.start, &b, 1);
    assert_bytes(&r.end, &e, 1);
  }
}

static void range_name_stops_at_the_terminator(void **state) {
  mr_key_range r;
  assert_int_equal(mr_key_range_name(MR_NAME_TABLE, 3, "ab", 2, &r, NULL),
                   MR_OK);
  static const uint8_t s[] = {0x0a, 0x03, 0, 0,   0,   0,   0,
                              0,    0,    3, 'a', 'b', 0x00};
  static const uint8_t e[] = {0x0a, 0x03, 0, 0,   0,   0,   0,
                              0,    0,    3, 'a', 'b', 0x01};
  assert_bytes(&r.start, s, sizeof s);
  assert_bytes(&r.end, e, sizeof e);
  /* "ab\0" and "abc" sort after every "ab" entry, whatever its entity_id */
  const char *names[] = {"ab\0", "abc", "a"};
  size_t lens[] = {3, 3, 1};
  for (unsigned i = 0; i < 3; i++) {
    mr_key k = {.kind = MR_KK_NAME,
                .c = {MR_NAME_TABLE, 3, 0},
                .name = (const uint8_t *)names[i],
                .name_len = lens[i]};
    mr_keybuf b;
    assert_int_equal(mr_key_encode(&k, &b, NULL), MR_OK);
    assert_false(in_range(&r, b.b, b.len));
  }
  mr_key k = {.kind = MR_KK_NAME,
              .c = {MR_NAME_TABLE, 3, UINT64_MAX},
              .name = (const uint8_t *)"ab",
              .name_len = 2};
  mr_keybuf b;
  assert_int_equal(mr_key_encode(&k, &b, NULL), MR_OK);
  assert_true(in_range(&r, b.b, b.len));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kind_table_is_well_formed),
      cmocka_unit_test(golden_vectors),
      cmocka_unit_test(docs_show_every_golden_line),
      cmocka_unit_test(history_of_unversioned_kinds_is_rejected),
      cmocka_unit_test(range_table_rejects_unscoped_kinds),
      cmocka_unit_test(encode_rejects_bad_keys),
      cmocka_unit_test(decode_rejects_malformed_bytes),
      cmocka_unit_test(decoded_names_keep_their_escapes),
      cmocka_unit_test(format_needs_room),
      cmocka_unit_test(format_prints_names_readably),
      cmocka_unit_test(parse_rejects_malformed_text),
      cmocka_unit_test(range_ends_carry_past_0xff),
      cmocka_unit_test(range_name_stops_at_the_terminator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
