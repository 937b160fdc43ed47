/*
 * sql_cache.h — a session's statement cache: what admitting or preparing a
 * statement text produced, kept so that the same text next time costs only
 * its execution. DuckLake sends the same few texts on every transaction
 * (the snapshot query, one COPY per table it reads, SELECT 1), so most of a
 * commit's statements are hits.
 *
 * An entry is keyed by (purpose, exact text) and holds an opaque value the
 * cache frees with the function given at init:
 *   SQL_CACHE_PLANS        the admitted plans of a whole query string
 *   SQL_CACHE_SELECT       a SELECT prepared in DuckDB (+ its text-wrapped twin)
 *   SQL_CACHE_COPY_BINARY  a COPY TO's query prepared for binary output
 *   SQL_CACHE_PARSED       a client's closed extended-protocol statement
 *                          (keyed by its parameter types and text): the
 *                          postgres extension parses the same snapshot query
 *                          on every transaction, and closes it each time
 *   SQL_CACHE_DML_SHAPE    an INSERT ... VALUES prepared by its shape, the
 *                          literals lifted to parameters (sql_lift.h), so
 *                          the rows of every commit share one statement
 *
 * Invalidation: every entry belongs to the generation pair (engine ddl_gen,
 * session temp_gen) it was made under; a lookup under another pair empties
 * the cache first. DuckDB itself rebinds a prepared statement whose tables
 * changed, but the cached text wraps and admissions were derived from the
 * old shapes, so they go too. DDL is rare (DuckLake creates inlined tables
 * at schema changes), so whole-cache invalidation costs little.
 *
 * Bounds: the slots given at init (at most SQL_CACHE_MAX_SLOTS); the least
 * recently used entry is evicted. A session's admitted texts get
 * SQL_CACHE_PLAN_SLOTS: a plan is small, and time travel over many versions
 * cycles through four texts per version (an LRU smaller than a cycle misses
 * every time); its DuckDB statements get SQL_CACHE_PREPARED_SLOTS, each
 * holding a plan of DuckDB's.
 * Ownership: a value returned by sql_cache_get stays owned by the cache and
 * valid until the next sql_cache_put, sql_cache_get under a new generation,
 * or sql_cache_clear on the same cache. Not thread-safe: one session's.
 */
#ifndef MR_SQL_CACHE_H
#define MR_SQL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQL_CACHE_MAX_SLOTS 256
#define SQL_CACHE_PLAN_SLOTS 256
#define SQL_CACHE_PREPARED_SLOTS 64

typedef enum sql_cache_purpose {
  SQL_CACHE_PLANS = 1,
  SQL_CACHE_SELECT = 2,
  SQL_CACHE_COPY_BINARY = 3,
  SQL_CACHE_PARSED = 4,
  SQL_CACHE_DML_SHAPE = 5,
} sql_cache_purpose;

typedef struct sql_cache_entry {
  uint64_t hash; /* of purpose and key; 0 = empty slot */
  sql_cache_purpose purpose;
  char *key;
  void *value;
  uint64_t used; /* tick of the last hit or put */
} sql_cache_entry;

typedef struct sql_cache {
  void (*free_value)(sql_cache_purpose purpose, void *value);
  sql_cache_entry slot[SQL_CACHE_MAX_SLOTS];
  size_t nslots; /* slots in use: the first nslots of slot */
  uint64_t tick;
  uint64_t ddl_gen, temp_gen; /* the generation every entry belongs to */
  uint64_t hits, misses;
} sql_cache;

/* nslots: 1 to SQL_CACHE_MAX_SLOTS (clamped). */
void sql_cache_init(sql_cache *c, void (*free_value)(sql_cache_purpose, void *), size_t nslots);
/* The value cached for (purpose, key) under generation (ddl_gen, temp_gen),
 * or NULL. A new generation empties the cache. */
void *sql_cache_get(sql_cache *c, uint64_t ddl_gen, uint64_t temp_gen, sql_cache_purpose purpose,
                    const char *key);
/* Caches value for (purpose, key) in the current generation, evicting the
 * least recently used entry when full. true: the cache owns value now;
 * false (out of memory): the caller still does. A key already present is
 * replaced. */
bool sql_cache_put(sql_cache *c, sql_cache_purpose purpose, const char *key, void *value);
/* Like sql_cache_get, but the entry leaves the cache: the caller owns the
 * value (NULL if there is none). */
void *sql_cache_take(sql_cache *c, uint64_t ddl_gen, uint64_t temp_gen, sql_cache_purpose purpose,
                     const char *key);
/* Frees every entry (the cache stays usable). */
void sql_cache_clear(sql_cache *c);

#endif /* MR_SQL_CACHE_H */
