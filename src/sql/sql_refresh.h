/*
 * sql_refresh.h — refresh ahead: after a commit, the engine runs again, in
 * the background, the catalog reads its writer repeats, so that their next
 * run is a result-cache hit.
 *
 * Why: the result cache (sql_rcache.h) keeps an answer only until the
 * catalog's rows change, so a writer's every read, which follows its own
 * last commit, misses. Yet a DuckLake writer reads the same texts in every
 * transaction (the latest snapshot, then its table's stats, column stats
 * and inlined tables: 0.1-0.6 ms each), and other clients read the latest
 * snapshot after each commit too.
 *
 * What is refreshed: the pure binary COPY reads (sql_plan.pure) a session
 * ran inside the transaction it just committed that it also ran inside its
 * previous transaction; a text read once (a read at one snapshot) is not.
 * At most SQL_REFRESH_TEXTS per commit, in the order they were read.
 *
 * How: one thread per engine, started with the first batch, running each
 * text through a session of its own exactly as a client's statement runs
 * (admission, history residency, the cache's keep rule), its answer
 * discarded. Only the newest batch waits: a newer commit's replaces an
 * older one, whose generation has passed. A batch stops at the first text
 * that finds the data generation moved past its commit's; a text whose
 * answer is kept already costs a look-up (which the cache's hit and miss
 * counts do not see).
 *
 * Invariant: a refresh changes no answer. It only puts entries, through
 * the same rule as a client's read, for texts some session admitted.
 */
#ifndef MR_SQL_REFRESH_H
#define MR_SQL_REFRESH_H

#include <stddef.h>
#include <stdint.h>

/* The texts one commit may queue; DuckLake's commit repeats five. */
#define SQL_REFRESH_TEXTS 16
/* The longest text noted (DuckLake's are about 300 bytes): a session holds
 * at most 2 x SQL_REFRESH_TEXTS of them. */
#define SQL_REFRESH_TEXT_MAX 4096

typedef struct sql_engine sql_engine;
typedef struct sql_refresh sql_refresh;

/* The refreshable reads of one transaction: owned copies of their texts,
 * each once. */
typedef struct sql_read_set {
  char *text[SQL_REFRESH_TEXTS];
  size_t n;
} sql_read_set;

/* Adds text (copied) unless it is there already, longer than
 * SQL_REFRESH_TEXT_MAX, or the set is full. */
void sql_read_set_note(sql_read_set *s, const char *text);
void sql_read_set_clear(sql_read_set *s);
/* At a transaction's end: prev gets cur's texts and cur is empty. */
void sql_read_set_rotate(sql_read_set *cur, sql_read_set *prev);

/* The refresher of e (its thread starts with the first batch); NULL when
 * out of memory. */
sql_refresh *sql_refresh_new(sql_engine *e);
/* Stops the thread for good: the read under way is cancelled, and no
 * batch runs after it returns (later commits queue nothing). Idempotent;
 * NULL is a no-op. */
void sql_refresh_stop(sql_refresh *r);
/* Stops r and frees it; before the engine's sessions and database go.
 * NULL is a no-op. */
void sql_refresh_free(sql_refresh *r);

/* After a commit that left the engine at data generation gen: queues the
 * texts of cur also in prev, replacing any batch still waiting. */
void sql_refresh_after_commit(sql_refresh *r, const sql_read_set *cur, const sql_read_set *prev,
                              uint64_t gen);

/* Blocks until no batch waits or runs (tests). */
void sql_refresh_wait_idle(sql_refresh *r);

/* Since r was made: texts whose answer a refresh put in the cache, and
 * texts dropped because the data generation moved first. */
typedef struct sql_refresh_counts {
  uint64_t refreshed, skipped;
} sql_refresh_counts;
void sql_refresh_counts_get(sql_refresh *r, sql_refresh_counts *out);

#endif /* MR_SQL_REFRESH_H */
