/*
 * sql_rcache.h — the engine's result cache: the answer of a catalog read,
 * kept by the read's text for as long as the catalog's rows stay the same.
 *
 * DuckLake reads the same catalog rows over and over between commits: every
 * transaction starts with the latest snapshot, and every query at a
 * snapshot reads its table's files, deletes and inlined rows at it, each a
 * COPY (SELECT ...) TO STDOUT. Between two commits each such text has one
 * answer, yet DuckDB would plan and run it every time (0.1-0.6 ms each).
 * An entry holds the bytes the read sent, chunk by chunk (a COPY's CopyData
 * payloads, or a SELECT's RowDescription and DataRows: sql_answer_kind),
 * keyed by that kind and the read's text, so that a hit sends them again
 * without DuckDB.
 *
 * Validity is a generation, not a guess. Every change to the engine's rows
 * (a session's commit, a pre-load call: a history load, a replica's
 * replay) moves the engine's data generation when it begins and again when
 * it is visible (sql_engine.c). An entry is made at generation g only when
 * no change was under way from before its read ran until after it ended,
 * and is served only while the generation is still g: a hit is what the
 * read would answer at that moment. Entries of an older generation are
 * dropped together at the first access under a newer one.
 *
 * Which reads may use it is the session's call (sql_session_result_gen):
 * a statement the planner found pure (sql_plan.h), in a session with no
 * temporary table and no change of its own, in a transaction whose
 * snapshot is the current generation, while the relation directory behind
 * pg_class is current (sql_relcache.h).
 *
 * Bounds: at most SQL_RCACHE_SLOTS entries and `budget` bytes of results;
 * one result may take an eighth of the budget; the least recently used
 * entry goes first. Thread-safe (one mutex; entries are reference counted,
 * so a hit is sent without holding it). Entries are immutable once put.
 */
#ifndef MR_SQL_RCACHE_H
#define MR_SQL_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQL_RCACHE_SLOTS 256

typedef struct sql_rcache sql_rcache;

/* What an entry holds; part of its key, so the same text kept as a COPY
 * answer and as a SELECT answer are two entries (sql_keep.c's layouts). */
typedef enum sql_answer_kind {
  SQL_ANSWER_COPY_BINARY, /* a binary COPY's CopyData payloads */
  SQL_ANSWER_SELECT,      /* a SELECT's RowDescription, then its DataRows */
} sql_answer_kind;

/* One kept result. bytes holds nchunks chunks back to back, chunk i being
 * chunks[i] bytes long, as the read first sent them. */
typedef struct sql_rentry {
  uint8_t *bytes;
  size_t len;
  size_t *chunks;
  size_t nchunks;
  size_t ncols;
  uint64_t nrows;
  /* the cache's own */
  sql_answer_kind kind;
  char *key;
  uint64_t hash, used;
  unsigned refs; /* the slot's reference and each caller's */
} sql_rentry;

/* A cache of at most budget bytes; NULL when budget is 0 (no cache) or
 * out of memory. */
sql_rcache *sql_rcache_new(size_t budget);
/* Frees the cache; no entry may still be held. NULL is a no-op. */
void sql_rcache_free(sql_rcache *c);

/* The largest result worth recording for c (0 when c is NULL). */
size_t sql_rcache_entry_max(const sql_rcache *c);

/* The entry of kind for key made at generation gen, held for the caller
 * until sql_rcache_release; NULL on a miss. */
const sql_rentry *sql_rcache_get(sql_rcache *c, sql_answer_kind kind, const char *key,
                                 uint64_t gen);
void sql_rcache_release(sql_rcache *c, const sql_rentry *e);
/* Is an answer for key at generation gen kept? Counts neither a hit nor a
 * miss (the refresher's look, sql_refresh.h). */
bool sql_rcache_has(sql_rcache *c, sql_answer_kind kind, const char *key, uint64_t gen);

/*
 * Keeps a result of kind for key made at generation gen. Takes bytes and chunks
 * (malloc'd) whatever it returns; false when it was not kept (too large,
 * an older generation than the cache's, out of memory). A newer
 * generation drops every entry first.
 */
bool sql_rcache_put(sql_rcache *c, sql_answer_kind kind, const char *key, uint64_t gen,
                    uint8_t *bytes, size_t len, size_t *chunks, size_t nchunks, size_t ncols,
                    uint64_t nrows);

/* Counters since the cache was made (for logs and tests). */
typedef struct sql_rcache_stats {
  uint64_t hits, misses, puts, entries, bytes;
} sql_rcache_stats;
void sql_rcache_stats_get(sql_rcache *c, sql_rcache_stats *out);

#endif /* MR_SQL_RCACHE_H */
