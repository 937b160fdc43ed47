/* key_test_util.c — PRNG, random keys and oracles for the key tests. */
#include "key_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t rng_next(rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rng_below(rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

uint64_t test_seed(void) {
  static bool done;
  static uint64_t seed;
  if (!done) {
    const char *env = getenv("MORAINE_SEED");
    if (env != NULL && *env != '\0')
      seed = strtoull(env, NULL, 0);
    else
      seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    done = true;
    fprintf(stderr, "key property tests: MORAINE_SEED=%llu\n",
            (unsigned long long)seed);
  }
  return seed;
}

unsigned test_iters(unsigned dflt) {
  const char *env = getenv("MORAINE_PROP_ITERS");
  if (env != NULL && *env != '\0')
    return (unsigned)strtoul(env, NULL, 10);
  return dflt;
}

uint64_t rand_u64(rng *r) {
  static const uint64_t edges[] = {0,
                                   1,
                                   2,
                                   0xff,
                                   0x100,
                                   0x101,
                                   UINT64_MAX,
                                   UINT64_MAX - 1,
                                   1ull << 63,
                                   0x0101010101010101ull,
                                   0x00ff00ff00ff00ffull};
  switch (rng_below(r, 4)) {
  case 0:
    return edges[rng_below(r, sizeof edges / sizeof edges[0])];
  case 1:
    return rng_below(r, 4); /* small: makes ties likely in pair tests */
  case 2: {
    uint64_t v = 0; /* bytes drawn from the escape-relevant values */
    static const uint8_t bytes[] = {0x00, 0x01, 0x02, 0xfe, 0xff};
    for (int i = 0; i < 8; i++)
      v = v << 8 | bytes[rng_below(r, sizeof bytes)];
    return v;
  }
  default:
    return rng_next(r);
  }
}

size_t rand_name(rng *r, uint8_t *buf, size_t cap) {
  static const uint8_t bytes[] = {0x00, 0x01, 0x02, 0xff, 'a', 'b', 0xc3, 0xa9};
  size_t n;
  switch (rng_below(r, 16)) {
  case 0:
    n = cap; /* the longest name accepted */
    break;
  case 1:
    n = rng_below(r, cap + 1);
    break;
  default:
    n = rng_below(r, 12);
  }
  if (n > cap)
    n = cap;
  for (size_t i = 0; i < n; i++)
    buf[i] = rng_below(r, 3) ? bytes[rng_below(r, sizeof bytes)]
                             : (uint8_t)rng_next(r);
  return n;
}

unsigned test_fields(const mr_key *k, test_field out[6]) {
  const mr_key_kind_info *info = mr_key_kind_get(k->kind);
  unsigned n = 0;
  if (info->flags & MR_KF_HAS_NAME) {
    out[n++] = (test_field){false, 0};
    out[n++] = (test_field){false, 1};
    out[n++] = (test_field){true, 0};
    out[n++] = (test_field){false, 2};
  } else {
    for (unsigned i = 0; i < info->ncomp; i++)
      out[n++] = (test_field){false, i};
  }
  if (k->history)
    out[n++] = (test_field){false, info->ncomp};
  return n;
}

void rand_key(rng *r, mr_key_kind kind, bool history, mr_key *k,
              uint8_t name_buf[MR_KEY_MAX_NAME]) {
  const mr_key_kind_info *info = mr_key_kind_get(kind);
  memset(k, 0, sizeof *k);
  k->kind = kind;
  k->history = history;
  for (unsigned i = 0; i < info->ncomp + history; i++)
    k->c[i] = rand_u64(r);
  if (info->flags & MR_KF_HAS_NAME) {
    k->c[0] = rng_below(r, MR_NAME_KIND_COUNT);
    k->name = name_buf;
    k->name_len = rand_name(r, name_buf, MR_KEY_MAX_NAME);
  }
}

size_t raw_name(const mr_key *k, uint8_t *buf) {
  size_t n = 0;
  for (size_t i = 0; i < k->name_len; i++) {
    if (k->name_escaped && k->name[i] == 0x01)
      i++;
    buf[n++] = k->name[i];
  }
  return n;
}

static int name_order(const mr_key *a, const mr_key *b) {
  uint8_t x[MR_KEY_MAX_NAME], y[MR_KEY_MAX_NAME];
  size_t nx = raw_name(a, x), ny = raw_name(b, y);
  return bytes_compare(x, nx, y, ny);
}

int tuple_compare(const mr_key *a, const mr_key *b) {
  test_field f[6];
  unsigned n = test_fields(a, f);
  for (unsigned i = 0; i < n; i++) {
    int c;
    if (f[i].is_name)
      c = name_order(a, b);
    else
      c = (a->c[f[i].comp] > b->c[f[i].comp]) -
          (a->c[f[i].comp] < b->c[f[i].comp]);
    if (c)
      return c;
  }
  return 0;
}

bool keys_equal(const mr_key *a, const mr_key *b) {
  return a->kind == b->kind && a->history == b->history &&
         tuple_compare(a, b) == 0;
}

int bytes_compare(const uint8_t *a, size_t alen, const uint8_t *b,
                  size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c)
    return c < 0 ? -1 : 1;
  return (alen > blen) - (alen < blen);
}

bool in_range(const mr_key_range *r, const uint8_t *b, size_t len) {
  if (bytes_compare(r->start.b, r->start.len, b, len) > 0)
    return false;
  return r->end.len == 0 || bytes_compare(b, len, r->end.b, r->end.len) < 0;
}

char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *more = realloc(buf, cap * 2);
      if (more == NULL)
        free(buf);
      buf = more;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf == NULL)
    return NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

const char *source_path(char *buf, size_t cap, const char *rel) {
  const char *dir = getenv("MORAINE_SOURCE_DIR");
  snprintf(buf, cap, "%s/%s", dir != NULL ? dir : MORAINE_TEST_SOURCE_DIR, rel);
  return buf;
}
