/*
 * key.c — encode, decode, order and scan bounds of the RFC 0002 keys.
 *
 * Every function here walks MR_KEY_KIND_TABLE (key.h) through
 * mr_key_fields(); none names a kind or restates a key byte. The printed
 * form and its parser live in key_text.c. Nothing here allocates: keys and
 * key buffers are caller-owned values.
 */
#include "key/key_internal.h"

#include <string.h>

/* Rows the encoding cannot express are compile errors, not runtime ones. */
#define MR_KEY_ROW_CHECK(id, ss, ord, text, n, c0, c1, c2, c3, fl)             \
  _Static_assert((n) + (((fl) & MR_KF_VERSIONED) ? 1 : 0) <= MR_KEY_MAX_COMP &&  \
                     (ord) >= -1 && (ord) <= 253,                              \
                 #id ": bad row");
MR_KEY_KIND_TABLE(MR_KEY_ROW_CHECK)
#undef MR_KEY_ROW_CHECK

static const mr_key_kind_info kind_info[MR_KK_COUNT] = {
#define MR_KEY_ROW_INFO(id, ss, ord, text, n, c0, c1, c2, c3, fl)              \
  {MR_KK_##id, MR_SS_##ss, ord, text, n, {c0, c1, c2, c3}, fl},
    MR_KEY_KIND_TABLE(MR_KEY_ROW_INFO)
#undef MR_KEY_ROW_INFO
};

static const char *const subspace_text[MR_SS_COUNT] = {
#define MR_SUBSPACE_TEXT(id, ord, text) [ord] = text,
    MR_SUBSPACE_TABLE(MR_SUBSPACE_TEXT)
#undef MR_SUBSPACE_TEXT
};

static const char *const name_kind_text[MR_NAME_KIND_COUNT] = {
#define MR_NAME_KIND_TEXT(id, ord, text) [ord] = text,
    MR_NAME_KIND_TABLE(MR_NAME_KIND_TEXT)
#undef MR_NAME_KIND_TEXT
};

const mr_key_kind_info *mr_key_kind_get(mr_key_kind kind) {
  if ((unsigned)kind >= MR_KK_COUNT)
    return NULL;
  return &kind_info[kind];
}

const char *mr_subspace_text(mr_subspace ss) {
  if ((unsigned)ss >= MR_SS_COUNT)
    return NULL;
  return subspace_text[ss];
}

uint8_t mr_subspace_byte(mr_subspace ss) {
  if ((unsigned)ss >= MR_SS_COUNT)
    return 0;
  return (uint8_t)(ss + 2);
}

const char *mr_name_kind_text(mr_name_kind nk) {
  if ((unsigned)nk >= MR_NAME_KIND_COUNT)
    return NULL;
  return name_kind_text[nk];
}

mr_subspace mr_key_subspace_of(const mr_key_kind_info *info, bool history) {
  return history ? MR_SS_HISTORY : info->subspace;
}

/*
 * The byte-order field list of a kind. Plain kinds are their u64
 * components in table order. A kind with MR_KF_HAS_NAME (the name
 * directory) leads with an enum byte in c0 and carries its string just
 * before its last component. History appends end_snapshot.
 */
unsigned mr_key_fields(const mr_key_kind_info *info, bool history,
                       key_field out[KEY_MAX_FIELDS]) {
  unsigned n = 0;
  if (info->flags & MR_KF_HAS_NAME) {
    out[n++] = (key_field){KEY_FIELD_ENUM, 0, info->comp[0]};
    for (unsigned i = 1; i + 1 < info->ncomp; i++)
      out[n++] = (key_field){KEY_FIELD_U64, i, info->comp[i]};
    out[n++] = (key_field){KEY_FIELD_NAME, 0, KEY_NAME_LABEL};
    out[n++] = (key_field){KEY_FIELD_U64, info->ncomp - 1,
                           info->comp[info->ncomp - 1]};
  } else {
    for (unsigned i = 0; i < info->ncomp; i++)
      out[n++] = (key_field){KEY_FIELD_U64, i, info->comp[i]};
  }
  if (history)
    out[n++] = (key_field){KEY_FIELD_U64, info->ncomp, KEY_END_LABEL};
  return n;
}

int mr_key_name_next(const mr_key *k, size_t *pos, uint8_t *byte) {
  if (*pos >= k->name_len)
    return 0;
  if (k->name == NULL)
    return -1;
  uint8_t b = k->name[*pos];
  if (k->name_escaped) {
    if (b == 0x00)
      return -1;
    if (b == 0x01) {
      if (*pos + 1 >= k->name_len || k->name[*pos + 1] > 0x01)
        return -1;
      b = k->name[++*pos];
    }
  }
  ++*pos;
  *byte = b;
  return 1;
}

/* True when keys of subspace ss carry a kind byte after the subspace byte. */
static bool has_kind_byte(mr_subspace ss) {
  for (unsigned i = 0; i < MR_KK_COUNT; i++)
    if (kind_info[i].subspace == ss && kind_info[i].kind_ordinal >= 0)
      return true;
  return false;
}

/* The kind a decoder meets: history holds the versioned kinds' kind bytes. */
static const mr_key_kind_info *find_kind(mr_subspace ss, int ordinal) {
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *info = &kind_info[i];
    if (info->kind_ordinal != ordinal)
      continue;
    if (ss == MR_SS_HISTORY ? (info->flags & MR_KF_VERSIONED) != 0
                            : info->subspace == ss)
      return info;
  }
  return NULL;
}

/* ---- encode ---- */

static void put_u64(mr_keybuf *out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out->b[out->len++] = (uint8_t)(v >> shift);
}

/* storekey string: bytes <= 0x01 get a 0x01 escape, then a 0x00 terminator. */
static mr_status put_name(const mr_key *k, mr_keybuf *out, mr_error *err) {
  size_t pos = 0, raw = 0;
  uint8_t b;
  int r;
  while ((r = mr_key_name_next(k, &pos, &b)) > 0) {
    if (++raw > MR_KEY_MAX_NAME)
      return mr_fail(err, MR_ERR_INVALID,
                     "key: exact_name longer than %d bytes", MR_KEY_MAX_NAME);
    if (b <= 0x01)
      out->b[out->len++] = 0x01;
    out->b[out->len++] = b;
  }
  if (r < 0)
    return mr_fail(err, MR_ERR_INVALID,
                   "key: malformed exact_name (bad escape or NULL)");
  out->b[out->len++] = 0x00;
  return MR_OK;
}

/*
 * Encodes the subspace and kind bytes and then all fields of k, or (all
 * false) only its first nfields: a prefix of k's full encoding, which is
 * how every scan bound is made.
 */
static mr_status encode_fields(const mr_key *k, bool all, unsigned nfields,
                               mr_keybuf *out, mr_error *err) {
  const mr_key_kind_info *info = mr_key_kind_get(k->kind);
  if (info == NULL)
    return mr_fail(err, MR_ERR_INVALID, "key: unknown kind %d", (int)k->kind);
  if (k->history && !(info->flags & MR_KF_VERSIONED))
    return mr_fail(err, MR_ERR_INVALID,
                   "key: %s is unversioned and has no history key", info->text);
  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(info, k->history, f);
  if (all)
    nfields = n;
  if (nfields > n)
    return mr_fail(err, MR_ERR_INVALID, "key: %s%s has %u fields, not %u",
                   k->history ? "history " : "", info->text, n, nfields);

  out->len = 0;
  out->b[out->len++] = mr_subspace_byte(mr_key_subspace_of(info, k->history));
  if (info->kind_ordinal >= 0)
    out->b[out->len++] = (uint8_t)(info->kind_ordinal + 2);
  for (unsigned i = 0; i < nfields; i++) {
    uint64_t v = k->c[f[i].comp];
    switch (f[i].type) {
    case KEY_FIELD_U64:
      put_u64(out, v);
      break;
    case KEY_FIELD_ENUM:
      if (v >= MR_NAME_KIND_COUNT)
        return mr_fail(err, MR_ERR_INVALID, "key: %s %llu out of range",
                       f[i].label, (unsigned long long)v);
      out->b[out->len++] = (uint8_t)(v + 2);
      break;
    case KEY_FIELD_NAME: {
      mr_status rc = put_name(k, out, err);
      if (rc)
        return rc;
      break;
    }
    }
  }
  return MR_OK;
}

mr_status mr_key_encode(const mr_key *k, mr_keybuf *out, mr_error *err) {
  return encode_fields(k, true, 0, out, err);
}

/* ---- decode ---- */

static mr_status corrupt(mr_error *err, const char *what, size_t at) {
  return mr_fail(err, MR_ERR_CORRUPTION, "key: %s at byte %zu", what, at);
}

/* Reads one storekey string starting at *pos; leaves *pos past its 0x00. */
static mr_status get_name(const uint8_t *p, size_t len, size_t *pos, mr_key *k,
                          mr_error *err) {
  size_t start = *pos, raw = 0;
  bool escaped = false;
  for (;;) {
    if (*pos >= len)
      return corrupt(err, "unterminated exact_name", *pos);
    uint8_t b = p[(*pos)++];
    if (b == 0x00)
      break;
    if (b == 0x01) {
      if (*pos >= len)
        return corrupt(err, "unterminated exact_name", *pos);
      if (p[*pos] > 0x01)
        return corrupt(err, "bad escape in exact_name", *pos);
      (*pos)++;
      escaped = true;
    }
    if (++raw > MR_KEY_MAX_NAME)
      return corrupt(err, "exact_name too long", *pos);
  }
  k->name = p + start;
  k->name_len = *pos - 1 - start;
  k->name_escaped = escaped;
  return MR_OK;
}

mr_status mr_key_decode(const uint8_t *p, size_t len, mr_key *k,
                        mr_error *err) {
  memset(k, 0, sizeof *k);
  if (len == 0)
    return corrupt(err, "empty key", 0);
  if (p[0] < 2 || p[0] - 2 >= MR_SS_COUNT)
    return corrupt(err, "unknown subspace byte", 0);
  mr_subspace ss = (mr_subspace)(p[0] - 2);
  size_t pos = 1;
  int ordinal = -1;
  if (ss == MR_SS_HISTORY || has_kind_byte(ss)) {
    if (pos >= len)
      return corrupt(err, "missing kind byte", pos);
    if (p[pos] < 2)
      return corrupt(err, "unknown kind byte", pos);
    ordinal = p[pos++] - 2;
  }
  const mr_key_kind_info *info = find_kind(ss, ordinal);
  if (info == NULL)
    return corrupt(err,
                   ordinal < 0 ? "subspace without kinds" : "unknown kind byte",
                   pos - 1);
  k->kind = info->kind;
  k->history = ss == MR_SS_HISTORY;

  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(info, k->history, f);
  for (unsigned i = 0; i < n; i++) {
    switch (f[i].type) {
    case KEY_FIELD_U64: {
      if (len - pos < 8)
        return corrupt(err, "truncated u64", pos);
      uint64_t v = 0;
      for (int j = 0; j < 8; j++)
        v = v << 8 | p[pos++];
      k->c[f[i].comp] = v;
      break;
    }
    case KEY_FIELD_ENUM:
      if (pos >= len)
        return corrupt(err, "truncated enum byte", pos);
      if (p[pos] < 2 || p[pos] - 2 >= MR_NAME_KIND_COUNT)
        return corrupt(err, "unknown name_kind byte", pos);
      k->c[f[i].comp] = (uint64_t)(p[pos++] - 2);
      break;
    case KEY_FIELD_NAME: {
      mr_status rc = get_name(p, len, &pos, k, err);
      if (rc)
        return rc;
      break;
    }
    }
  }
  if (pos != len)
    return corrupt(err, "trailing bytes", pos);
  return MR_OK;
}

mr_status mr_key_name_copy(const mr_key *k, char *dst, size_t cap, size_t *len,
                           mr_error *err) {
  const mr_key_kind_info *info = mr_key_kind_get(k->kind);
  if (info == NULL || !(info->flags & MR_KF_HAS_NAME))
    return mr_fail(err, MR_ERR_INVALID, "key: kind has no exact_name");
  size_t pos = 0, n = 0;
  uint8_t b;
  int r;
  while ((r = mr_key_name_next(k, &pos, &b)) > 0) {
    if (n + 1 >= cap)
      return mr_fail(err, MR_ERR_INVALID,
                     "key: exact_name does not fit in %zu bytes", cap);
    dst[n++] = (char)b;
  }
  if (r < 0)
    return mr_fail(err, MR_ERR_INVALID, "key: malformed exact_name");
  if (cap == 0)
    return mr_fail(err, MR_ERR_INVALID,
                   "key: exact_name does not fit in 0 bytes");
  dst[n] = '\0';
  *len = n;
  return MR_OK;
}

/* ---- order ---- */

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

/* Raw names, bytewise, a prefix first: exactly their encodings' order. */
static int compare_names(const mr_key *a, const mr_key *b) {
  size_t pa = 0, pb = 0;
  uint8_t x = 0, y = 0;
  for (;;) {
    int ra = mr_key_name_next(a, &pa, &x) > 0;
    int rb = mr_key_name_next(b, &pb, &y) > 0;
    if (!ra || !rb)
      return ra - rb;
    if (x != y)
      return x < y ? -1 : 1;
  }
}

int mr_key_compare(const mr_key *a, const mr_key *b) {
  const mr_key_kind_info *ia = mr_key_kind_get(a->kind);
  const mr_key_kind_info *ib = mr_key_kind_get(b->kind);
  if (ia == NULL || ib == NULL)
    return cmp_u64((unsigned)a->kind, (unsigned)b->kind);
  int c = cmp_u64(mr_subspace_byte(mr_key_subspace_of(ia, a->history)),
                  mr_subspace_byte(mr_key_subspace_of(ib, b->history)));
  if (c == 0)
    c = cmp_u64((uint64_t)(ia->kind_ordinal + 1),
                (uint64_t)(ib->kind_ordinal + 1));
  if (c != 0)
    return c;
  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(ia, a->history, f);
  for (unsigned i = 0; i < n && c == 0; i++)
    c = f[i].type == KEY_FIELD_NAME ? compare_names(a, b)
                                    : cmp_u64(a->c[f[i].comp], b->c[f[i].comp]);
  return c;
}

/* FNV-1a, 64 bit. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

uint64_t mr_key_hash(const mr_key *k) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const mr_key_kind_info *ki = mr_key_kind_get(k->kind);
  unsigned kind = (unsigned)k->kind;
  h = hash_bytes(h, &kind, sizeof kind);
  if (ki == NULL)
    return h;
  uint8_t hist = k->history;
  h = hash_bytes(h, &hist, 1);
  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(ki, k->history, f);
  for (unsigned i = 0; i < n; i++) {
    if (f[i].type != KEY_FIELD_NAME) {
      h = hash_bytes(h, &k->c[f[i].comp], sizeof k->c[0]);
      continue;
    }
    size_t pos = 0;
    uint8_t byte;
    while (mr_key_name_next(k, &pos, &byte) > 0)
      h = hash_bytes(h, &byte, 1);
  }
  return h;
}

/* ---- scan bounds ---- */

/* end = start with trailing 0xff dropped and the last byte left incremented. */
static void set_end(mr_key_range *r) {
  size_t n = r->start.len;
  while (n > 0 && r->start.b[n - 1] == 0xff)
    n--;
  memcpy(r->end.b, r->start.b, n);
  r->end.len = n;
  if (n > 0)
    r->end.b[n - 1]++;
}

static mr_status range_of(const mr_key *k, unsigned nfields, mr_key_range *r,
                          mr_error *err) {
  mr_status rc = encode_fields(k, false, nfields, &r->start, err);
  if (rc)
    return rc;
  set_end(r);
  return MR_OK;
}

mr_status mr_key_range_subspace(mr_subspace ss, mr_key_range *r,
                                mr_error *err) {
  if ((unsigned)ss >= MR_SS_COUNT)
    return mr_fail(err, MR_ERR_INVALID, "key: unknown subspace %d", (int)ss);
  r->start.len = 1;
  r->start.b[0] = mr_subspace_byte(ss);
  set_end(r);
  return MR_OK;
}

mr_status mr_key_range_kind(mr_key_kind kind, bool history, mr_key_range *r,
                            mr_error *err) {
  mr_key k = {.kind = kind, .history = history};
  return range_of(&k, 0, r, err);
}

mr_status mr_key_range_table(mr_key_kind kind, bool history, uint64_t table_id,
                             mr_key_range *r, mr_error *err) {
  const mr_key_kind_info *info = mr_key_kind_get(kind);
  if (info == NULL || !(info->flags & MR_KF_TABLE_SCOPED))
    return mr_fail(err, MR_ERR_INVALID, "key: %s is not table-scoped",
                   info ? info->text : "unknown kind");
  mr_key k = {.kind = kind, .history = history, .c = {table_id}};
  return range_of(&k, 1, r, err);
}

mr_status mr_key_range_prefix(const mr_key *k, unsigned nprefix,
                              mr_key_range *r, mr_error *err) {
  return range_of(k, nprefix, r, err);
}

mr_status mr_key_range_name(mr_name_kind nk, uint64_t parent_id,
                            const char *name, size_t name_len, mr_key_range *r,
                            mr_error *err) {
  mr_key k = {.kind = MR_KK_NAME,
              .c = {(uint64_t)nk, parent_id},
              .name = (const uint8_t *)name,
              .name_len = name_len};
  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(mr_key_kind_get(MR_KK_NAME), false, f), upto = 0;
  while (upto < n && f[upto].type != KEY_FIELD_NAME)
    upto++;
  return range_of(&k, upto + 1, r, err);
}
