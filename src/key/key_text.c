/*
 * key_text.c — the printed form of a key and its parser.
 *
 *   path[{field=value,...}]
 *
 * path is "<subspace>/<kind>" ("history/<kind>" for ended versions) or just
 * "<subspace>" where the subspace has no kind byte; fields follow the byte
 * order of mr_key_fields(). u64s print in decimal, the name_kind enum by its
 * text, the exact_name quoted with \" \\ and \xNN escapes. mr_key_format
 * prints one canonical text per key; the parser is strict about everything
 * but the spelling of name bytes (raw or \xNN): fields in table order, no
 * spaces, no leading zeros. Golden vectors and docs/format.md use this form.
 */
#include "key/key_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- format ---- */

/* An output buffer that remembers overflow instead of checking per call. */
typedef struct textbuf {
  char *p;
  size_t cap, len;
  bool full;
} textbuf;

static void put_bytes(textbuf *t, const char *s, size_t n) {
  if (t->full || t->cap - t->len <= n) {
    t->full = true;
    return;
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

static void put_str(textbuf *t, const char *s) { put_bytes(t, s, strlen(s)); }

/* Writes the path of a kind ("current/column", "snapshot", ...) into t. */
static void put_path(textbuf *t, const mr_key_kind_info *info, bool history) {
  put_str(t, mr_subspace_text(mr_key_subspace_of(info, history)));
  if (info->kind_ordinal >= 0) {
    put_str(t, "/");
    put_str(t, info->text);
  }
}

/*
 * Length of a well-formed UTF-8 sequence at s for a code point from U+00A0
 * up (printable as is), or 0: overlongs, surrogates, C1 controls and
 * anything malformed are printed as \xNN instead.
 */
static size_t utf8_printable(const uint8_t *s, size_t n) {
  size_t len;
  uint32_t cp;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2, cp = s[0] & 0x1fu;
  else if ((s[0] & 0xf0) == 0xe0)
    len = 3, cp = s[0] & 0x0fu;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4, cp = s[0] & 0x07u;
  else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if (cp < 0xa0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
    return 0;
  return len;
}

static mr_status put_name(textbuf *t, const mr_key *k, mr_error *err) {
  uint8_t raw[MR_KEY_MAX_NAME];
  size_t pos = 0, n = 0;
  uint8_t b;
  int r;
  while ((r = mr_key_name_next(k, &pos, &b)) > 0) {
    if (n == sizeof raw)
      return mr_fail(err, MR_ERR_INVALID,
                     "key: exact_name longer than %d bytes", MR_KEY_MAX_NAME);
    raw[n++] = b;
  }
  if (r < 0)
    return mr_fail(err, MR_ERR_INVALID, "key: malformed exact_name");
  put_str(t, "\"");
  for (size_t i = 0; i < n;) {
    size_t u = utf8_printable(raw + i, n - i);
    char esc[8];
    if (u > 0) {
      put_bytes(t, (const char *)raw + i, u);
      i += u;
      continue;
    }
    b = raw[i++];
    if (b == '"' || b == '\\') {
      esc[0] = '\\', esc[1] = (char)b;
      put_bytes(t, esc, 2);
    } else if (b >= 0x20 && b <= 0x7e) {
      esc[0] = (char)b;
      put_bytes(t, esc, 1);
    } else {
      snprintf(esc, sizeof esc, "\\x%02x", b);
      put_str(t, esc);
    }
  }
  put_str(t, "\"");
  return MR_OK;
}

mr_status mr_key_format(const mr_key *k, char *dst, size_t cap, mr_error *err) {
  const mr_key_kind_info *info = mr_key_kind_get(k->kind);
  if (info == NULL)
    return mr_fail(err, MR_ERR_INVALID, "key: unknown kind %d", (int)k->kind);
  if (k->history && !(info->flags & MR_KF_VERSIONED))
    return mr_fail(err, MR_ERR_INVALID,
                   "key: %s is unversioned and has no history key", info->text);
  if (cap == 0)
    return mr_fail(err, MR_ERR_INVALID, "key: no room to format");
  textbuf t = {dst, cap, 0, false};
  dst[0] = '\0';
  put_path(&t, info, k->history);

  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(info, k->history, f);
  for (unsigned i = 0; i < n; i++) {
    char num[24];
    put_str(&t, i == 0 ? "{" : ",");
    put_str(&t, f[i].label);
    put_str(&t, "=");
    uint64_t v = k->c[f[i].comp];
    switch (f[i].type) {
    case KEY_FIELD_U64:
      snprintf(num, sizeof num, "%" PRIu64, v);
      put_str(&t, num);
      break;
    case KEY_FIELD_ENUM:
      if (v >= MR_NAME_KIND_COUNT)
        return mr_fail(err, MR_ERR_INVALID, "key: %s %" PRIu64 " out of range",
                       f[i].label, v);
      put_str(&t, mr_name_kind_text((mr_name_kind)v));
      break;
    case KEY_FIELD_NAME: {
      mr_status rc = put_name(&t, k, err);
      if (rc)
        return rc;
      break;
    }
    }
  }
  if (n > 0)
    put_str(&t, "}");
  if (t.full)
    return mr_fail(err, MR_ERR_INVALID, "key: text does not fit in %zu bytes",
                   cap);
  return MR_OK;
}

/* ---- parse ---- */

typedef struct parser {
  const char *s;
  size_t len, pos;
  mr_error *err;
} parser;

static mr_status bad(parser *ps, const char *what) {
  return mr_fail(ps->err, MR_ERR_INVALID, "key text: %s at column %zu", what,
                 ps->pos + 1);
}

/* Consumes lit if the text continues with it. */
static bool eat(parser *ps, const char *lit) {
  size_t n = strlen(lit);
  if (ps->len - ps->pos < n || memcmp(ps->s + ps->pos, lit, n) != 0)
    return false;
  ps->pos += n;
  return true;
}

static mr_status parse_u64(parser *ps, uint64_t *v) {
  size_t start = ps->pos;
  *v = 0;
  while (ps->pos < ps->len && ps->s[ps->pos] >= '0' && ps->s[ps->pos] <= '9') {
    unsigned d = (unsigned)(ps->s[ps->pos] - '0');
    if (*v > (UINT64_MAX - d) / 10)
      return bad(ps, "number out of u64 range");
    *v = *v * 10 + d;
    ps->pos++;
  }
  if (ps->pos == start)
    return bad(ps, "expected a number");
  if (ps->s[start] == '0' && ps->pos - start > 1)
    return bad(ps, "leading zero");
  return MR_OK;
}

static mr_status parse_enum(parser *ps, uint64_t *v) {
  for (unsigned i = 0; i < MR_NAME_KIND_COUNT; i++) {
    const char *text = mr_name_kind_text((mr_name_kind)i);
    size_t save = ps->pos;
    if (eat(ps, text) && (ps->pos == ps->len || ps->s[ps->pos] == ',' ||
                          ps->s[ps->pos] == '}')) {
      *v = i;
      return MR_OK;
    }
    ps->pos = save;
  }
  return bad(ps, "unknown name_kind");
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

static mr_status parse_name(parser *ps, mr_key *k, uint8_t *buf, size_t cap) {
  size_t n = 0;
  if (!eat(ps, "\""))
    return bad(ps, "expected '\"'");
  for (;;) {
    if (ps->pos >= ps->len)
      return bad(ps, "unterminated exact_name");
    uint8_t b = (uint8_t)ps->s[ps->pos++];
    if (b == '"')
      break;
    if (b == '\\') {
      if (eat(ps, "\"") || eat(ps, "\\")) {
        b = (uint8_t)ps->s[ps->pos - 1];
      } else if (eat(ps, "x")) {
        int hi = ps->pos < ps->len ? hex_digit(ps->s[ps->pos]) : -1;
        int lo = ps->pos + 1 < ps->len ? hex_digit(ps->s[ps->pos + 1]) : -1;
        if (hi < 0 || lo < 0)
          return bad(ps, "expected two lowercase hex digits");
        b = (uint8_t)(hi << 4 | lo);
        ps->pos += 2;
      } else {
        return bad(ps, "unknown escape");
      }
    }
    if (n >= cap || n >= MR_KEY_MAX_NAME)
      return bad(ps, "exact_name too long");
    buf[n++] = b;
  }
  k->name = buf;
  k->name_len = n;
  k->name_escaped = false;
  return MR_OK;
}

/* Finds the kind whose path the text starts with, up to '{' or the end. */
static const mr_key_kind_info *parse_path(parser *ps, bool *history) {
  size_t end = ps->pos;
  while (end < ps->len && ps->s[end] != '{')
    end++;
  for (unsigned i = 0; i < MR_KK_COUNT; i++) {
    const mr_key_kind_info *info = mr_key_kind_get((mr_key_kind)i);
    for (int h = 0; h <= 1; h++) {
      if (h && !(info->flags & MR_KF_VERSIONED))
        continue;
      char path[128];
      textbuf t = {path, sizeof path, 0, false};
      put_path(&t, info, h);
      if (t.len == end - ps->pos && memcmp(path, ps->s + ps->pos, t.len) == 0) {
        ps->pos = end;
        *history = h;
        return info;
      }
    }
  }
  return NULL;
}

mr_status mr_key_parse(const char *text, size_t len, mr_key *k,
                       uint8_t *name_buf, size_t name_cap, mr_error *err) {
  parser ps = {text, len, 0, err};
  memset(k, 0, sizeof *k);
  bool history = false;
  const mr_key_kind_info *info = parse_path(&ps, &history);
  if (info == NULL)
    return bad(&ps, "unknown key path");
  k->kind = info->kind;
  k->history = history;

  key_field f[KEY_MAX_FIELDS];
  unsigned n = mr_key_fields(info, history, f);
  for (unsigned i = 0; i < n; i++) {
    if (!eat(&ps, i == 0 ? "{" : ","))
      return bad(&ps, i == 0 ? "expected '{'" : "expected ','");
    if (!eat(&ps, f[i].label) || !eat(&ps, "="))
      return mr_fail(err, MR_ERR_INVALID,
                     "key text: expected %s= at column %zu", f[i].label,
                     ps.pos + 1);
    mr_status rc = MR_OK;
    switch (f[i].type) {
    case KEY_FIELD_U64:
      rc = parse_u64(&ps, &k->c[f[i].comp]);
      break;
    case KEY_FIELD_ENUM:
      rc = parse_enum(&ps, &k->c[f[i].comp]);
      break;
    case KEY_FIELD_NAME:
      rc = parse_name(&ps, k, name_buf, name_cap);
      break;
    }
    if (rc)
      return rc;
  }
  if (n > 0 && !eat(&ps, "}"))
    return bad(&ps, "expected '}'");
  if (ps.pos != ps.len)
    return bad(&ps, "trailing text");
  return MR_OK;
}
