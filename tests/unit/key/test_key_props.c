/*
 * test_key_props.c — seeded property tests over random keys of every kind:
 * round trips, order (bytes = mr_key_compare = tuples), scan-bound
 * membership, and decoding of random, truncated and mutated bytes.
 *
 * The seed is printed on every run and on every failure; replay one with
 * MORAINE_SEED=<n>. MORAINE_PROP_ITERS scales the iteration count.
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

static uint64_t seed;
static unsigned iters;

static void report(const char *fmt, ...) MR_PRINTF(1, 2);
static void report(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "FAILED with seed %llu (replay: MORAINE_SEED=%llu): ",
          (unsigned long long)seed, (unsigned long long)seed);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      report(__VA_ARGS__);                                                     \
      fail_msg("%s", #cond);                                                   \
    }                                                                          \
  } while (0)

/* A key's text for failure messages (two static buffers, used in turn). */
static const char *show(const mr_key *k) {
  static char bufs[2][MR_KEY_TEXT_MAX];
  static unsigned turn;
  char *buf = bufs[turn++ % 2];
  if (mr_key_format(k, buf, MR_KEY_TEXT_MAX, NULL) != MR_OK)
    snprintf(buf, MR_KEY_TEXT_MAX, "<unformattable kind %d>", (int)k->kind);
  return buf;
}

static int sign(int v) { return (v > 0) - (v < 0); }

/* Calls the body once per (kind, history) the table allows. */
#define FOR_EACH_SHAPE(kind, h)                                                \
  for (unsigned kind = 0; kind < MR_KK_COUNT; kind++)                          \
    for (int h = 0; h <= 1; h++)                                               \
      if (!h || (mr_key_kind_get((mr_key_kind)kind)->flags & MR_KF_VERSIONED))

static void encode_ok(const mr_key *k, mr_keybuf *b) {
  mr_error err;
  CHECK(mr_key_encode(k, b, &err) == MR_OK, "encode %s: %s", show(k), err.msg);
}

static int setup(void **state) {
  seed = test_seed();
  iters = test_iters(2000);
  return 0;
}

/* ---- decode(encode(k)) == k, and the text form round-trips too ---- */

static void round_trip_every_kind(void **state) {
  rng r = {seed ^ 1};
  static uint8_t nb[MR_KEY_MAX_NAME], pb[MR_KEY_MAX_NAME],
      raw[MR_KEY_MAX_NAME + 1];
  static char text[MR_KEY_TEXT_MAX];
  FOR_EACH_SHAPE(kind, h) {
    for (unsigned i = 0; i < iters; i++) {
      mr_key k, d, p;
      mr_keybuf b, b2;
      mr_error err;
      rand_key(&r, (mr_key_kind)kind, h, &k, nb);
      encode_ok(&k, &b);
      CHECK(mr_key_decode(b.b, b.len, &d, &err) == MR_OK, "decode %s: %s",
            show(&k), err.msg);
      CHECK(keys_equal(&d, &k) && mr_key_compare(&d, &k) == 0,
            "decode changed %s", show(&k));
      /* the hash follows compare: a decoded (escaped) name and the raw one
       * hash alike, and components past the key's fields do not count */
      mr_key g = k;
      unsigned used = mr_key_kind_get(k.kind)->ncomp + (k.history ? 1 : 0);
      for (unsigned j = used; j < MR_KEY_MAX_COMP; j++)
        g.c[j] = rng_next(&r);
      CHECK(mr_key_hash(&d) == mr_key_hash(&k) && mr_key_hash(&g) == mr_key_hash(&k),
            "equal keys hash apart: %s", show(&k));
      encode_ok(&d, &b2);
      CHECK(b2.len == b.len && memcmp(b2.b, b.b, b.len) == 0,
            "re-encode differs: %s", show(&k));
      if (mr_key_kind_get(k.kind)->flags & MR_KF_HAS_NAME) {
        size_t n = 0;
        CHECK(mr_key_name_copy(&d, (char *)raw, sizeof raw, &n, &err) == MR_OK,
              "name_copy: %s", err.msg);
        CHECK(n == k.name_len && memcmp(raw, k.name, n) == 0,
              "name_copy differs: %s", show(&k));
      }
      CHECK(mr_key_format(&d, text, sizeof text, &err) == MR_OK, "format: %s",
            err.msg);
      CHECK(mr_key_parse(text, strlen(text), &p, pb, sizeof pb, &err) == MR_OK,
            "parse %s: %s", text, err.msg);
      CHECK(keys_equal(&p, &k), "text round trip changed %s", text);
    }
  }
}

/* ---- order: bytes, mr_key_compare and tuples agree ---- */

/* b = a with each field kept or redrawn, so that ties and near-ties abound. */
static void near_key(rng *r, const mr_key *a, mr_key *b, uint8_t *nb) {
  rand_key(r, a->kind, a->history, b, nb);
  test_field f[6];
  unsigned n = test_fields(a, f);
  for (unsigned i = 0; i < n; i++) {
    if (rng_below(r, 2))
      continue;
    if (!f[i].is_name) {
      b->c[f[i].comp] = a->c[f[i].comp];
      continue;
    }
    size_t len =
        a->name_len; /* same name, a prefix of it, or it plus one byte */
    switch (rng_below(r, 3)) {
    case 0:
      len = rng_below(r, len + 1);
      break;
    case 1:
      if (len < MR_KEY_MAX_NAME)
        nb[len] = (uint8_t)rng_below(r, 3), len++;
      break;
    }
    memcpy(nb, a->name, len < a->name_len ? len : a->name_len);
    b->name_len = len;
  }
}

static void order_matches_bytes_and_tuples(void **state) {
  rng r = {seed ^ 2};
  static uint8_t na[MR_KEY_MAX_NAME], nb[MR_KEY_MAX_NAME];
  FOR_EACH_SHAPE(kind, h) {
    for (unsigned i = 0; i < iters; i++) {
      mr_key a, b;
      mr_keybuf ea, eb;
      rand_key(&r, (mr_key_kind)kind, h, &a, na);
      near_key(&r, &a, &b, nb);
      encode_ok(&a, &ea);
      encode_ok(&b, &eb);
      int m = bytes_compare(ea.b, ea.len, eb.b, eb.len);
      int c = sign(mr_key_compare(&a, &b));
      int t = tuple_compare(&a, &b);
      CHECK(m == c && c == t, "order bytes %d compare %d tuple %d: %s vs %s", m,
            c, t, show(&a), show(&b));
      CHECK(sign(mr_key_compare(&b, &a)) == -c,
            "compare not antisymmetric: %s vs %s", show(&a), show(&b));
      CHECK(c != 0 || mr_key_hash(&a) == mr_key_hash(&b),
            "equal keys hash apart: %s vs %s", show(&a), show(&b));
    }
  }
  /* across kinds and subspaces */
  for (unsigned i = 0; i < 10 * iters; i++) {
    mr_key a, b;
    mr_keybuf ea, eb;
    mr_key_kind ka = (mr_key_kind)rng_below(&r, MR_KK_COUNT),
                kb = (mr_key_kind)rng_below(&r, MR_KK_COUNT);
    bool ha =
        (mr_key_kind_get(ka)->flags & MR_KF_VERSIONED) && rng_below(&r, 2);
    bool hb =
        (mr_key_kind_get(kb)->flags & MR_KF_VERSIONED) && rng_below(&r, 2);
    rand_key(&r, ka, ha, &a, na);
    rand_key(&r, kb, hb, &b, nb);
    encode_ok(&a, &ea);
    encode_ok(&b, &eb);
    int m = bytes_compare(ea.b, ea.len, eb.b, eb.len);
    CHECK(m == sign(mr_key_compare(&a, &b)),
          "cross-kind order differs: %s vs %s", show(&a), show(&b));
  }
}

/* ---- scan bounds hold exactly their keys ---- */

static bool key_in(const mr_key_range *rg, const mr_key *k) {
  mr_keybuf b;
  encode_ok(k, &b);
  return in_range(rg, b.b, b.len);
}

/* A random key of some other (kind, history) shape, table-scoped if asked. */
static void other_shape(rng *r, const mr_key *k, bool scoped, mr_key *o,
                        uint8_t *nb) {
  for (;;) {
    mr_key_kind kind = (mr_key_kind)rng_below(r, MR_KK_COUNT);
    const mr_key_kind_info *info = mr_key_kind_get(kind);
    bool h = (info->flags & MR_KF_VERSIONED) && rng_below(r, 2);
    if ((kind == k->kind && h == k->history) ||
        (scoped && !(info->flags & MR_KF_TABLE_SCOPED)))
      continue;
    rand_key(r, kind, h, o, nb);
    return;
  }
}

/* Changes field f of k to a different value. */
static void alter_field(rng *r, mr_key *k, test_field f, uint8_t *nb) {
  if (f.is_name) {
    if (k->name != nb)
      memcpy(nb, k->name, k->name_len);
    if (k->name_len > 0 && rng_below(r, 2)) {
      k->name_len--;
    } else if (k->name_len < MR_KEY_MAX_NAME) {
      nb[k->name_len++] = (uint8_t)rng_below(r, 256);
    } else {
      k->name_len--;
    }
    k->name = nb;
  } else if (mr_key_kind_get(k->kind)->flags & MR_KF_HAS_NAME && f.comp == 0) {
    k->c[0] = (k->c[0] + 1) % MR_NAME_KIND_COUNT;
  } else {
    k->c[f.comp] ^= 1 + rng_below(r, UINT64_MAX);
  }
}

static void ranges_hold_exactly_their_keys(void **state) {
  rng r = {seed ^ 3};
  static uint8_t nk[MR_KEY_MAX_NAME], no[MR_KEY_MAX_NAME], nj[MR_KEY_MAX_NAME];
  static mr_key_range rk, rs, rt, rp;
  FOR_EACH_SHAPE(kind, h) {
    const mr_key_kind_info *info = mr_key_kind_get((mr_key_kind)kind);
    mr_subspace ss = h ? MR_SS_HISTORY : info->subspace;
    assert_int_equal(mr_key_range_kind((mr_key_kind)kind, h, &rk, NULL), MR_OK);
    assert_int_equal(mr_key_range_subspace(ss, &rs, NULL), MR_OK);
    for (unsigned i = 0; i < iters / 4; i++) {
      mr_key k, o, j;
      rand_key(&r, (mr_key_kind)kind, h, &k, nk);
      CHECK(key_in(&rk, &k) && key_in(&rs, &k), "kind/subspace range misses %s",
            show(&k));
      other_shape(&r, &k, false, &o, no);
      CHECK(!key_in(&rk, &o), "kind range of %s holds %s", info->text,
            show(&o));
      bool same_ss =
          (o.history ? MR_SS_HISTORY : mr_key_kind_get(o.kind)->subspace) == ss;
      CHECK(key_in(&rs, &o) == same_ss, "subspace range wrong for %s",
            show(&o));

      if (info->flags & MR_KF_TABLE_SCOPED) {
        assert_int_equal(
            mr_key_range_table((mr_key_kind)kind, h, k.c[0], &rt, NULL), MR_OK);
        CHECK(key_in(&rt, &k), "table range misses %s", show(&k));
        j = k;
        j.c[0] ^= rng_below(&r, 2) ? 1 : 1 + rng_below(&r, UINT64_MAX);
        CHECK(!key_in(&rt, &j), "table range of %llu holds %s",
              (unsigned long long)k.c[0], show(&j));
        other_shape(&r, &k, true, &o, no);
        o.c[0] = k.c[0];
        CHECK(!key_in(&rt, &o), "table range of %s holds %s", info->text,
              show(&o));
      }

      test_field f[6];
      unsigned n = test_fields(&k, f);
      for (unsigned p = 0; p <= n; p++) {
        assert_int_equal(mr_key_range_prefix(&k, p, &rp, NULL), MR_OK);
        CHECK(key_in(&rp, &k), "prefix %u range misses %s", p, show(&k));
        /* a key sharing the first p fields is inside... */
        rand_key(&r, (mr_key_kind)kind, h, &j, nj);
        for (unsigned q = 0; q < p; q++) {
          if (f[q].is_name)
            j.name = k.name, j.name_len = k.name_len;
          else
            j.c[f[q].comp] = k.c[f[q].comp];
        }
        CHECK(key_in(&rp, &j), "prefix %u range of %s misses %s", p, show(&k),
              show(&j));
        /* ...and one differing in any of them is not */
        if (p > 0) {
          alter_field(&r, &j, f[rng_below(&r, p)], nj);
          CHECK(!key_in(&rp, &j), "prefix %u range holds %s", p, show(&j));
        }
      }

      if (info->flags & MR_KF_HAS_NAME) {
        assert_int_equal(mr_key_range_name((mr_name_kind)k.c[0], k.c[1],
                                           (const char *)k.name, k.name_len,
                                           &rp, NULL),
                         MR_OK);
        j = k;
        j.c[2] = rng_next(&r);
        CHECK(key_in(&rp, &k) && key_in(&rp, &j), "name range misses %s",
              show(&j));
        alter_field(&r, &j, (test_field){true, 0}, nj);
        CHECK(!key_in(&rp, &j), "name range holds %s", show(&j));
        j = k;
        j.c[1] ^= 1;
        CHECK(!key_in(&rp, &j), "name range holds %s", show(&j));
      }
    }
  }
}

/* ---- decoding arbitrary bytes never misreads ---- */

static void check_decode(const uint8_t *b, size_t len) {
  mr_key k;
  mr_error err;
  mr_status rc = mr_key_decode(b, len, &k, &err);
  if (rc != MR_OK) {
    CHECK(rc == MR_ERR_CORRUPTION && err.msg[0] != '\0',
          "decode failed with status %d", rc);
    return;
  }
  mr_keybuf e;
  static char text[MR_KEY_TEXT_MAX];
  encode_ok(&k, &e);
  CHECK(e.len == len && memcmp(e.b, b, len) == 0,
        "decoded %s but it re-encodes differently", show(&k));
  CHECK(mr_key_format(&k, text, sizeof text, &err) == MR_OK,
        "format of decoded key: %s", err.msg);
}

static void decode_never_misreads(void **state) {
  rng r = {seed ^ 4};
  static uint8_t nk[MR_KEY_MAX_NAME];
  static const uint8_t likely[] = {0x00, 0x01, 0x02, 0x03, 0x04,
                                   0x05, 0x0a, 0x0b, 0xff};
  uint8_t b[48];
  unsigned valid = 0;
  for (unsigned i = 0; i < 50 * iters; i++) {
    size_t len = rng_below(&r, sizeof b);
    for (size_t j = 0; j < len; j++)
      b[j] = rng_below(&r, 2) ? likely[rng_below(&r, sizeof likely)]
                              : (uint8_t)rng_next(&r);
    if (len > 0 && rng_below(&r, 2))
      b[0] =
          (uint8_t)(2 +
                    rng_below(&r,
                              MR_SS_COUNT)); /* a real subspace: reach deeper */
    mr_key k;
    valid += mr_key_decode(b, len, &k, NULL) == MR_OK;
    check_decode(b, len);
  }
  assert_true(valid > 0); /* the generator does reach valid keys */

  static mr_keybuf e, m;
  FOR_EACH_SHAPE(kind, h) {
    for (unsigned i = 0; i < iters / 8; i++) {
      mr_key k, d;
      rand_key(&r, (mr_key_kind)kind, h, &k, nk);
      encode_ok(&k, &e);
      /* keys of one kind are prefix-free: no truncation decodes */
      for (size_t len = 0; len < e.len; len++)
        CHECK(mr_key_decode(e.b, len, &d, NULL) == MR_ERR_CORRUPTION,
              "truncation %zu of %s decodes", len, show(&k));
      m = e;
      m.b[m.len++] = (uint8_t)rng_next(&r);
      CHECK(mr_key_decode(m.b, m.len, &d, NULL) == MR_ERR_CORRUPTION,
            "%s plus a byte decodes", show(&k));
      for (unsigned t = 0; t < 8; t++) {
        m = e;
        m.b[rng_below(&r, m.len)] = rng_below(&r, 2)
                                        ? likely[rng_below(&r, sizeof likely)]
                                        : (uint8_t)rng_next(&r);
        check_decode(m.b, m.len);
      }
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip_every_kind),
      cmocka_unit_test(order_matches_bytes_and_tuples),
      cmocka_unit_test(ranges_hold_exactly_their_keys),
      cmocka_unit_test(decode_never_misreads),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
