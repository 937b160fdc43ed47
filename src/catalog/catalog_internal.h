/*
 * catalog_internal.h — what the files of src/catalog share: DDL column-list
 * parsing, message helpers. Not part of the layer's contract.
 */
#ifndef MR_CATALOG_INTERNAL_H
#define MR_CATALOG_INTERNAL_H

#include <pthread.h>

#include "catalog/catalog.h"

/* A growing set of ids (small; searched linearly). */
typedef struct cat_idset {
  uint64_t *v;
  size_t n, cap;
} cat_idset;

/* What a lazy load left out of the engine, and what was loaded since. */
#define CAT_HIST_NTABLE_CLASSES 5

typedef struct cat_history {
  bool lazy;           /* the load left history out */
  uint64_t h0;         /* the load's head snapshot */
  uint64_t snap_floor; /* snapshots below it were left out */
  bool snap_all;       /* ... and have all been loaded since */
  cat_idset snap_points;
  /* per class (data_file, delete_file, file stats, ended inlined rows,
   * current inlined rows): every table's rows loaded, or the tables whose
   * are */
  bool files_all[CAT_HIST_NTABLE_CLASSES];
  cat_idset file_tables[CAT_HIST_NTABLE_CLASSES];
  bool inline_out; /* the load left current inlined rows out too */
} cat_history;

/* The lazy parts of a load (catalog_history.c): the snapshot records from
 * the floor up, and the history of every versioned kind but files. */
mr_status cat_history_load(catalog *c, store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;
/* The current subspace as a load reads it: lazy, without the stats of data
 * files that are not current (catalog_history.c). */
mr_status cat_history_load_current(catalog *c, store_visit_fn fn, void *ctx,
                                   mr_error *err) MR_MUST_CHECK;
/* The inline subspace as a load reads it: lazy, without the inlined rows
 * that have ended (catalog_history.c). */
mr_status cat_history_load_inline(catalog *c, store_visit_fn fn, void *ctx,
                                  mr_error *err) MR_MUST_CHECK;
/* Makes c's residency what a load just gave (lazy or not); frees the old. */
void cat_history_reset(cat_history *h, bool lazy, uint64_t h0, uint64_t tail);
void cat_history_free(cat_history *h);

struct catalog {
  store *st;
  sql_engine *e;
  char schema[CATALOG_MAX_SCHEMA + 1]; /* its DuckDB schema; "": public */
  /* What the last catalog_load / catalog_reload put in the engine: whether
   * the ducklake_* tables exist, and the inlined tables' names (malloc'd). */
  bool spec_tables;
  char **inline_names;
  size_t ninline;
  /* sys/maintenance_status as of the load: a replica that finds it changed
   * reloads in full (expiry removes records the changelog does not list) */
  size_t passes;
  int64_t last_pass_us;
  unsigned follow_conflicts; /* catch-ups in a row the writer outran */
  /* History residency (catalog_history.c). lazy_history: loads leave old
   * snapshots and ended file versions in the store (set by the server;
   * tools that export load everything). hist: what the last load left out
   * and what has been loaded since, under hist_mu. */
  bool lazy_history;
  /* lazy_current_inline: a lazy load leaves current inlined rows out too,
   * each table's loaded by the first statement naming its inlined table
   * (a writer only: a replica's follower changes rows a later load from
   * the store would put in again) */
  bool lazy_current_inline;
  uint64_t snapshot_tail; /* snapshots a lazy load keeps below its head */
  pthread_mutex_t hist_mu;
  cat_history hist;
};

/* Reads sys/maintenance_status into c->passes / c->last_pass_us (a
 * replica's catalog_follow compares it with the store's now). */
mr_status cat_mark_maintenance(catalog *c, mr_error *err) MR_MUST_CHECK;


/* s as a quoted SQL identifier (malloc'd; NULL: out of memory). */
char *cat_quote_ident(const char *s);
/* The catalog's schema, quoted (malloc'd; NULL: out of memory). */
char *cat_quoted_schema(const catalog *c);
/* Frees c's list of inlined table names. */
void cat_inline_names_free(catalog *c);
/* Adds name (copied) to c's list of inlined table names. */
mr_status cat_inline_names_add(catalog *c, const char *name, mr_error *err) MR_MUST_CHECK;

/*
 * The start-up load's gathering, for a few records (a replica applying one
 * commit): visit turns each store record into rows of its tables (and the
 * CREATE of an inlined table); finish sends the CREATEs and appends the rows
 * — inside the caller's pre-load transaction (sql_engine_admin_begin), which
 * must be open — and adds new inlined tables to c's list.
 */
typedef struct cat_loader cat_loader;
mr_status cat_loader_new(catalog *c, cat_loader **out, mr_error *err) MR_MUST_CHECK;
mr_status cat_loader_visit(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                           mr_error *err) MR_MUST_CHECK; /* a store_visit_fn */
mr_status cat_loader_finish(cat_loader *ld, size_t *nrows, mr_error *err) MR_MUST_CHECK;
void cat_loader_free(cat_loader *ld);

/*
 * cat_feed (catalog_feed.c): a load's engine calls, run one at a time in
 * queue order: on a thread of their own while the load reads on
 * (threaded), or each inside its queue call. A threaded queue call waits
 * while the feed is full (a bounded number of jobs); every queue call takes
 * what it is given (even when it fails) and fails with the feed's first
 * failure, after which nothing more runs. cat_feed_sql runs sql (a batch;
 * rollback: it opens a transaction, rolled back if it fails);
 * cat_feed_rows appends rows with sql_engine_load_rows (vals and, through
 * text_free, text: what the cells point into). cat_feed_finish waits for
 * what is queued (or drops it, discard) and frees the feed;
 * cat_feed_discard drops it and frees the feed (it cannot fail).
 */
typedef struct cat_feed cat_feed;
mr_status cat_feed_start(sql_engine *e, const char *schema, bool threaded, cat_feed **out,
                         mr_error *err) MR_MUST_CHECK;
mr_status cat_feed_sql(cat_feed *f, char *sql, bool rollback, mr_error *err) MR_MUST_CHECK;
mr_status cat_feed_rows(cat_feed *f, const char *table, size_t ncols, size_t nrows, sql_value *vals,
                        void *text, void (*text_free)(void *text), mr_error *err) MR_MUST_CHECK;
mr_status cat_feed_finish(cat_feed *f, bool discard, mr_error *err) MR_MUST_CHECK;
void cat_feed_discard(cat_feed *f);

/* One parsed column of a CREATE TABLE: name and type text (malloc'd). */
typedef struct cat_ddl_col {
  char *name;
  char *type;
} cat_ddl_col;

/*
 * Parses "CREATE TABLE [IF NOT EXISTS] [schema.]name(col type, ...)" into the
 * table name (malloc'd, unquoted, without schema) and its columns. Returns
 * false when sql is not such a statement.
 */
bool cat_parse_create(const char *sql, char **table, cat_ddl_col **cols, size_t *ncols);
/* "DROP TABLE [IF EXISTS] [schema.]name" -> name (malloc'd), else false. */
bool cat_parse_drop(const char *sql, char **table);
void cat_ddl_cols_free(cat_ddl_col *cols, size_t n);

/* A new, initialized message of descriptor d (malloc'd; mr_value_free). */
ProtobufCMessage *cat_msg_new(const ProtobufCMessageDescriptor *d);
/* Deep copy through pack/unpack; NULL on allocation failure. */
ProtobufCMessage *cat_msg_copy(const ProtobufCMessage *m);
/* int64/uint64 field by name (false when absent/unset). */
bool cat_msg_i64(const ProtobufCMessage *m, const char *field, int64_t *v);
void cat_msg_set_i64(ProtobufCMessage *m, const char *field, int64_t v);
/* Appends child (ownership moves) to repeated message field fname. */
mr_status cat_msg_append(ProtobufCMessage *m, const char *fname, ProtobufCMessage *child,
                         mr_error *err) MR_MUST_CHECK;
/* Removes (frees) element i of repeated message field fname. */
void cat_msg_remove(ProtobufCMessage *m, const char *fname, size_t i);
/* Repeated message field access. */
size_t cat_msg_nrep(const ProtobufCMessage *m, const char *fname, ProtobufCMessage ***arr);
/* The same by field (one of m's descriptor's): no lookup by name per call. */
size_t cat_msg_rep(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                   ProtobufCMessage ***arr);
/* Do a and b (same descriptor) agree on every non-repeated field, except the
 * one named skip (may be NULL)? */
bool cat_msg_same(const ProtobufCMessage *a, const ProtobufCMessage *b, const char *skip);

/* The DuckLake table whose rows are the records of `kind` (the parent of
 * that kind's child rows), e.g. "ducklake_column"; "a record" if none. */
const char *catalog_parent_table(mr_key_kind kind);

/* Builds the key of `kind` from msg's fields named as the key components. */
bool cat_key_from_msg(mr_key_kind kind, const ProtobufCMessage *msg, mr_key *k);

/* Is this an inlined table name? Sets the ids (ver only for data tables). */
bool cat_inline_data_name(const char *name, int64_t *tid, int64_t *ver);
bool cat_inline_delete_name(const char *name, int64_t *tid);

/*
 * The load-back guarantee (catalog_check.c): refuses (22P02, naming table,
 * column and type) a commit holding an inlined value that the start-up load
 * could not cast back into its column. No engine call when every inlined
 * column the commit writes has a text-safe type.
 */
mr_status cat_check_loadable(catalog *c, const sql_changes *ch, sql_error *err) MR_MUST_CHECK;

#endif /* MR_CATALOG_INTERNAL_H */
