/*
 * key_test_util.h — helpers shared by the key tests: a seeded PRNG, random
 * keys of any kind, the byte order of encodings, and file reading.
 *
 * The tests restate the key layout here on purpose (an independent oracle):
 * a key's fields in byte order are its u64 components, except that the
 * name kind is (name_kind, parent_id, exact_name, entity_id); history keys
 * end with end_snapshot.
 */
#ifndef KEY_TEST_UTIL_H
#define KEY_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "key/key.h"

/* splitmix64: tiny, fast, and good enough to drive property tests. */
typedef struct rng {
  uint64_t s;
} rng;

uint64_t rng_next(rng *r);
uint64_t rng_below(rng *r, uint64_t n); /* uniform-ish in [0, n) */

/*
 * The run's seed: $MORAINE_SEED if set, else one from the clock. Printed
 * once per run so any failure can be replayed.
 */
uint64_t test_seed(void);
/* Iterations per property: $MORAINE_PROP_ITERS if set, else dflt. */
unsigned test_iters(unsigned dflt);

/* A u64 biased towards edges: 0, 1, 0xff.., bytes of 0x00/0x01/0xff. */
uint64_t rand_u64(rng *r);
/* A random name of up to cap bytes (<= MR_KEY_MAX_NAME), biased to
 * 0x00/0x01/0xff. */
size_t rand_name(rng *r, uint8_t *buf, size_t cap);

/* A key of kind/history with random fields; name bytes go to name_buf. */
void rand_key(rng *r, mr_key_kind kind, bool history, mr_key *k,
              uint8_t name_buf[MR_KEY_MAX_NAME]);

/* A test field: a u64/enum component (comp) or the name (is_name). */
typedef struct test_field {
  bool is_name;
  unsigned comp;
} test_field;
/* The fields of k's kind in byte order; returns their count. */
unsigned test_fields(const mr_key *k, test_field out[6]);

/* Raw (unescaped) name of k into buf (MR_KEY_MAX_NAME); returns its length. */
size_t raw_name(const mr_key *k, uint8_t *buf);
/* True when a and b are the same key: kind, history, fields, raw name. */
bool keys_equal(const mr_key *a, const mr_key *b);
/* Tuple order of two keys of the same kind and history: -1, 0 or 1. */
int tuple_compare(const mr_key *a, const mr_key *b);
/* Byte order of two byte strings, shorter-prefix first: -1, 0 or 1. */
int bytes_compare(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
/* True when bytes lie in [r->start, r->end). */
bool in_range(const mr_key_range *r, const uint8_t *b, size_t len);

/* Reads a whole file (NUL-terminated, malloc'd); NULL on failure. */
char *read_file(const char *path, size_t *len);
/* $MORAINE_SOURCE_DIR/rel into buf; falls back to the compiled-in source dir.
 */
const char *source_path(char *buf, size_t cap, const char *rel);

#endif /* KEY_TEST_UTIL_H */
