/*
 * sql_rcache.c — the result cache (see sql_rcache.h): a fixed table of
 * SQL_RCACHE_SLOTS entry pointers searched linearly by hash, then text,
 * under one mutex. A search is a few hundred 64-bit compares, far below
 * the DuckDB run a hit saves; a fixed table needs no rehashing.
 *
 * Every entry in a slot belongs to the cache's generation `gen`; moving to
 * a newer one empties the table. An entry leaves its slot when evicted,
 * replaced or outdated, and is freed when its last reference goes.
 */
#include "sql/sql_rcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct sql_rcache {
  pthread_mutex_t mu;
  size_t budget; /* bytes of results (and keys) the slots may hold */
  size_t bytes;  /* what they hold */
  uint64_t gen;  /* every slotted entry's generation */
  uint64_t tick;
  sql_rentry *slot[SQL_RCACHE_SLOTS];
  sql_rcache_stats stats;
};

/* FNV-1a over the kind and the text; never 0. */
static uint64_t key_hash(sql_answer_kind kind, const char *key) {
  uint64_t h = (1469598103934665603ULL ^ (uint64_t)kind) * 1099511628211ULL;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h ? h : 1;
}

static size_t entry_size(const sql_rentry *e) {
  return e->len + strlen(e->key) + e->nchunks * sizeof(size_t) + sizeof *e;
}

static void entry_destroy(sql_rentry *e) {
  free(e->bytes);
  free(e->chunks);
  free(e->key);
  free(e);
}

/* Drops the slot's reference (under mu). */
static void unslot(sql_rcache *c, size_t i) {
  sql_rentry *e = c->slot[i];
  c->slot[i] = NULL;
  c->bytes -= entry_size(e);
  c->stats.entries--;
  if (--e->refs == 0)
    entry_destroy(e);
}

/* Moves the cache to generation gen (under mu): older entries go. */
static void advance(sql_rcache *c, uint64_t gen) {
  if (gen <= c->gen)
    return;
  for (size_t i = 0; i < SQL_RCACHE_SLOTS; i++)
    if (c->slot[i])
      unslot(c, i);
  c->gen = gen;
}

static size_t find(const sql_rcache *c, uint64_t h, sql_answer_kind kind, const char *key) {
  for (size_t i = 0; i < SQL_RCACHE_SLOTS; i++) {
    const sql_rentry *e = c->slot[i];
    if (e && e->hash == h && e->kind == kind && strcmp(e->key, key) == 0)
      return i;
  }
  return SQL_RCACHE_SLOTS;
}

sql_rcache *sql_rcache_new(size_t budget) {
  if (budget == 0)
    return NULL;
  sql_rcache *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->budget = budget;
  return c;
}

void sql_rcache_free(sql_rcache *c) {
  if (c == NULL)
    return;
  for (size_t i = 0; i < SQL_RCACHE_SLOTS; i++)
    if (c->slot[i])
      unslot(c, i);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

size_t sql_rcache_entry_max(const sql_rcache *c) {
  return c ? c->budget / 8 : 0;
}

const sql_rentry *sql_rcache_get(sql_rcache *c, sql_answer_kind kind, const char *key,
                                 uint64_t gen) {
  if (c == NULL)
    return NULL;
  uint64_t h = key_hash(kind, key);
  pthread_mutex_lock(&c->mu);
  advance(c, gen);
  sql_rentry *e = NULL;
  size_t i = gen == c->gen ? find(c, h, kind, key) : SQL_RCACHE_SLOTS;
  if (i < SQL_RCACHE_SLOTS) {
    e = c->slot[i];
    e->refs++;
    e->used = ++c->tick;
    c->stats.hits++;
  } else {
    c->stats.misses++;
  }
  pthread_mutex_unlock(&c->mu);
  return e;
}

bool sql_rcache_has(sql_rcache *c, sql_answer_kind kind, const char *key, uint64_t gen) {
  if (c == NULL)
    return false;
  uint64_t h = key_hash(kind, key);
  pthread_mutex_lock(&c->mu);
  bool has = gen == c->gen && find(c, h, kind, key) < SQL_RCACHE_SLOTS;
  pthread_mutex_unlock(&c->mu);
  return has;
}

void sql_rcache_release(sql_rcache *c, const sql_rentry *ce) {
  if (c == NULL || ce == NULL)
    return;
  sql_rentry *e = (sql_rentry *)ce; /* the caller's reference, handed back */
  pthread_mutex_lock(&c->mu);
  bool last = --e->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    entry_destroy(e);
}

/* The least recently used entry's slot, SQL_RCACHE_SLOTS when the table
 * is empty (under mu). */
static size_t lru_slot(const sql_rcache *c) {
  size_t lru = SQL_RCACHE_SLOTS;
  for (size_t i = 0; i < SQL_RCACHE_SLOTS; i++)
    if (c->slot[i] && (lru == SQL_RCACHE_SLOTS || c->slot[i]->used < c->slot[lru]->used))
      lru = i;
  return lru;
}

/* Evicts least recently used entries until `need` more bytes fit, then
 * returns a free slot (under mu). */
static size_t make_room(sql_rcache *c, size_t need) {
  size_t lru;
  while (c->bytes + need > c->budget && (lru = lru_slot(c)) < SQL_RCACHE_SLOTS)
    unslot(c, lru);
  for (size_t i = 0; i < SQL_RCACHE_SLOTS; i++)
    if (c->slot[i] == NULL)
      return i;
  lru = lru_slot(c); /* every slot is taken, so there is one */
  if (lru < SQL_RCACHE_SLOTS)
    unslot(c, lru);
  return lru;
}

bool sql_rcache_put(sql_rcache *c, sql_answer_kind kind, const char *key, uint64_t gen,
                    uint8_t *bytes, size_t len, size_t *chunks, size_t nchunks, size_t ncols,
                    uint64_t nrows) {
  sql_rentry *e = c ? calloc(1, sizeof *e) : NULL;
  char *k = e ? strdup(key) : NULL;
  if (k == NULL) {
    free(e);
    free(bytes);
    free(chunks);
    return false;
  }
  *e = (sql_rentry){.bytes = bytes,
                    .len = len,
                    .chunks = chunks,
                    .nchunks = nchunks,
                    .ncols = ncols,
                    .nrows = nrows,
                    .kind = kind,
                    .key = k,
                    .hash = key_hash(kind, key),
                    .refs = 1};
  size_t size = entry_size(e);
  pthread_mutex_lock(&c->mu);
  advance(c, gen);
  bool kept = false;
  if (gen == c->gen && size <= sql_rcache_entry_max(c)) {
    size_t i = find(c, e->hash, kind, key);
    if (i < SQL_RCACHE_SLOTS)
      unslot(c, i); /* the same read again: the newer answer stays */
    i = make_room(c, size);
    if (i < SQL_RCACHE_SLOTS) {
      e->used = ++c->tick;
      c->slot[i] = e;
      c->bytes += size;
      c->stats.entries++;
      c->stats.puts++;
      kept = true;
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (!kept)
    entry_destroy(e);
  return kept;
}

void sql_rcache_stats_get(sql_rcache *c, sql_rcache_stats *out) {
  memset(out, 0, sizeof *out);
  if (c == NULL)
    return;
  pthread_mutex_lock(&c->mu);
  *out = c->stats;
  out->bytes = c->bytes;
  pthread_mutex_unlock(&c->mu);
}
