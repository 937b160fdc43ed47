/*
 * sql_cache.c — the session statement cache (see sql_cache.h): a fixed
 * table of up to SQL_CACHE_MAX_SLOTS entries searched linearly by hash, then
 * text. 256 slots of a 64-bit compare each cost far less than one prepare,
 * and a fixed table keeps a session's cache bounded without a free list.
 */
#include "sql/sql_cache.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a over the purpose byte and the text; never 0 (0 marks a free slot). */
static uint64_t key_hash(sql_cache_purpose purpose, const char *key) {
  uint64_t h = 1469598103934665603ULL;
  h = (h ^ (uint8_t)purpose) * 1099511628211ULL;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h ? h : 1;
}

static void entry_free(sql_cache *c, sql_cache_entry *e) {
  if (e->hash == 0)
    return;
  c->free_value(e->purpose, e->value);
  free(e->key);
  memset(e, 0, sizeof *e);
}

void sql_cache_init(sql_cache *c, void (*free_value)(sql_cache_purpose, void *), size_t nslots) {
  memset(c, 0, sizeof *c);
  c->free_value = free_value;
  c->nslots = nslots < 1 ? 1 : nslots > SQL_CACHE_MAX_SLOTS ? SQL_CACHE_MAX_SLOTS : nslots;
}

void sql_cache_clear(sql_cache *c) {
  for (size_t i = 0; i < c->nslots; i++)
    entry_free(c, &c->slot[i]);
}

static sql_cache_entry *find(sql_cache *c, uint64_t h, sql_cache_purpose purpose,
                             const char *key) {
  for (size_t i = 0; i < c->nslots; i++) {
    sql_cache_entry *e = &c->slot[i];
    if (e->hash == h && e->purpose == purpose && strcmp(e->key, key) == 0)
      return e;
  }
  return NULL;
}

/* The entry for (purpose, key) under generation (ddl_gen, temp_gen),
 * counted as a hit or a miss; a new generation empties the cache first. */
static sql_cache_entry *lookup(sql_cache *c, uint64_t ddl_gen, uint64_t temp_gen,
                               sql_cache_purpose purpose, const char *key) {
  if (ddl_gen != c->ddl_gen || temp_gen != c->temp_gen) {
    sql_cache_clear(c);
    c->ddl_gen = ddl_gen;
    c->temp_gen = temp_gen;
  }
  sql_cache_entry *e = find(c, key_hash(purpose, key), purpose, key);
  if (e == NULL) {
    c->misses++;
    return NULL;
  }
  c->hits++;
  e->used = ++c->tick;
  return e;
}

void *sql_cache_get(sql_cache *c, uint64_t ddl_gen, uint64_t temp_gen, sql_cache_purpose purpose,
                    const char *key) {
  sql_cache_entry *e = lookup(c, ddl_gen, temp_gen, purpose, key);
  return e ? e->value : NULL;
}

void *sql_cache_take(sql_cache *c, uint64_t ddl_gen, uint64_t temp_gen, sql_cache_purpose purpose,
                     const char *key) {
  sql_cache_entry *e = lookup(c, ddl_gen, temp_gen, purpose, key);
  if (e == NULL)
    return NULL;
  void *value = e->value;
  free(e->key);
  memset(e, 0, sizeof *e);
  return value;
}

bool sql_cache_put(sql_cache *c, sql_cache_purpose purpose, const char *key, void *value) {
  uint64_t h = key_hash(purpose, key);
  char *k = strdup(key);
  if (k == NULL)
    return false;
  sql_cache_entry *slot = find(c, h, purpose, key);
  if (slot == NULL) {
    slot = &c->slot[0];
    for (size_t i = 0; i < c->nslots && slot->hash != 0; i++)
      if (c->slot[i].hash == 0 || c->slot[i].used < slot->used)
        slot = &c->slot[i];
  }
  entry_free(c, slot);
  slot->hash = h;
  slot->purpose = purpose;
  slot->key = k;
  slot->value = value;
  slot->used = ++c->tick;
  return true;
}
