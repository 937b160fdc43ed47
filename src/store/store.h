/*
 * store.h — the RFC 0002 catalog store: DuckLake catalog state as keys and
 * records in SlateDB. It knows keys (key.h) and records (value.h), never SQL.
 *
 * What it owns:
 *  - store lifecycle: creating a store (sys/format + sys/head in its first
 *    batch) and refusing one it cannot serve (unknown or newer format, a
 *    sys/migration marker, a store without the segment extractor);
 *  - commits: one DuckLake commit = one store_commit = one durable WriteBatch,
 *    conditioned on sys/head (the write-write conflict anchor);
 *  - the derived directories kept atomic with entities: name (current schema
 *    and table names), delete_target (current delete files by data file),
 *    changelog (the current keys each snapshot commit wrote, sliding window);
 *  - reads: the current load (current subspace only), reads at a snapshot,
 *    name lookup, delete files by target, changelog replay, census, and
 *    verification (store_verify: every key checked against the layout);
 *  - maintenance: snapshot expiry in bounded, resumable batches, recorded in
 *    sys/maintenance_status;
 *  - migration: older layout formats brought up to this one in bounded,
 *    resumable steps under a sys/migration marker (migrate.c).
 *
 * Threads: a store may be shared by threads; commits are serialized by an
 * internal commit lock, reads need no lock. One process writes a store at a
 * time: a second writer fences the first, whose commits then fail
 * MR_ERR_FENCED and whose store turns read-failed for good (store_failed).
 *
 * Failed writes: a write that errs or misses its deadline turns the store
 * failed (no more commits) and its batch "in doubt": SlateDB may still land
 * it. store_recover, run by the watcher, waits for the store to answer and
 * settles the doubt: if the batch never landed, commits resume; if it
 * landed, the store stays failed and asks its owner to reload (the engine no
 * longer matches the store).
 *
 * Ownership: every record handed to a visitor (ProtobufCMessage *, mr_key *)
 * is valid only during that call; copy what you keep. Records passed in to a
 * commit are encoded at once, so the caller may free them after the call.
 */
#ifndef MR_STORE_H
#define MR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/mr_error.h"
#include "key/key.h"
#include "value/value.h"

/* The layout format this build writes (RFC 0002 with name + delete_target). */
#define STORE_FORMAT_LATEST 12
/* The oldest format this build reads. */
#define STORE_FORMAT_OLDEST 12
/* The oldest format store_migrate brings up to STORE_FORMAT_LATEST. */
#define STORE_FORMAT_MIGRATE_OLDEST 9
/* Default changelog window: records older than this many snapshots go. */
#define STORE_CHANGELOG_WINDOW 1024

typedef struct store store;

typedef struct store_options {
  bool read_only;              /* open a SlateDB reader, no commits */
  uint64_t changelog_window;   /* 0 = STORE_CHANGELOG_WINDOW */
  const char *cache_dir;       /* local object-store read cache (kv_open_options) or NULL */
  uint32_t deadline_ms;        /* open (and a writer's writes) must finish within this;
                                  0 = KV_DEFAULT_DEADLINE_MS */
  uint32_t gc_interval_ms;     /* SlateDB garbage collector (kv_open_options); 0 = default */
  uint32_t gc_min_age_ms;
  uint32_t reader_poll_ms;     /* with read_only: how often SlateDB's reader catches
                                  up with the writer by itself (0: SlateDB's
                                  default, 10 s); a replica sets its follow
                                  interval (store_read_head) */
  const char *origin;          /* a new store only: sys/format's commit_log_batch_origin
                                  (where an imported catalog came from); NULL: native */
  bool unchecked;              /* with read_only: skip the format, migration and
                                  head checks of the open (sys/head read if it
                                  decodes), so that store_verify can report a
                                  damaged store instead of being refused it */
  bool migrating;              /* a writer open for store_migrate only: the
                                  format and migration checks are left to it
                                  (sys/format and sys/head must be there) */
} store_options;

/* sys/head: the latest snapshot and the count of batches that landed. */
typedef struct store_head {
  uint64_t snapshot_id;
  uint64_t batch_count;
} store_head;

/*
 * TESTS ONLY: called with the store's head just before each kv_write of a
 * commit or maintenance batch, the batch fully built. A non-OK return aborts
 * that batch as if the process died there: nothing is written, the status
 * (with err filled by the hook) is returned, and the store stays usable.
 */
typedef mr_status (*store_fault_fn)(void *ctx, const char *point, mr_error *err);

/*
 * Opens (creating if empty) the store at url (file://, memory://, s3://).
 * opts may be NULL. On success *out is owned by the caller: store_close.
 */
mr_status store_open(const char *url, const store_options *opts, store **out, mr_error *err) MR_MUST_CHECK;

/* Flushes and closes; frees st whatever the result. NULL is a no-op. */
mr_status store_close(store *st, mr_error *err);

/* The head as of the last commit this process made or observed. */
store_head store_get_head(const store *st);

/* TESTS ONLY: installs (fn non-NULL) or removes the fault hook above. */
void store_set_fault(store *st, store_fault_fn fn, void *ctx);

/* TESTS ONLY: how the next commit or maintenance write fails, once, as a
 * store failure (MR_ERR_IO, the store turns failed): its batch never
 * written, or written (durable) but reported failed, as a write that missed
 * its deadline and landed later. */
typedef enum store_write_fault {
  STORE_WRITE_FAULT_NONE = 0,
  STORE_WRITE_FAULT_LOST,   /* the batch is not written */
  STORE_WRITE_FAULT_LANDED, /* the batch is written, then the write fails */
} store_write_fault;
void store_set_write_fault(store *st, store_write_fault f);

/* Non-OK once a write failed or the store was fenced: the store then takes no
 * more commits (it never serves state that is not durable). */
mr_status store_failed(const store *st, mr_error *err);

/*
 * Marks the store failed because its owner's view no longer matches it (a
 * commit landed that the owner could not apply): no more commits, and
 * store_recover asks for a reload. `why` is kept for store_failed's message.
 */
void store_set_in_doubt(store *st, const char *why);

/*
 * Tries to bring a failed store back (see "Failed writes" above). MR_OK with
 * *reload false: the store was not failed, or it answers again and the
 * in-doubt batch never landed, so commits resume. MR_OK with *reload true:
 * a batch reported failed did land (or store_set_in_doubt was called): the
 * store stays failed until its owner reloads from it. Non-OK: still down
 * (MR_ERR_TIMEOUT, MR_ERR_IO, ... within the write deadline) or fenced
 * (MR_ERR_FENCED, for good).
 */
mr_status store_recover(store *st, bool *reload, mr_error *err) MR_MUST_CHECK;

/*
 * A second, read-only handle on st's store that does not follow the writer:
 * its reader catches up once, right after it opens (SlateDB's first poll is
 * immediate), and then not again for STORE_VIEW_POLL_MS. Several scans
 * through it between two equal reads of sys/head (store_read_head) see one
 * state, as a replica's catch-up needs while the writer goes on
 * committing; a caller that finds the head moved reads again, at most once
 * more. Its SlateDB reader registers a checkpoint in the store's manifest
 * until store_close. *out: store_close.
 */
#define STORE_VIEW_POLL_MS 600000
mr_status store_open_view(const store *st, store **out, mr_error *err) MR_MUST_CHECK;

/* Was st opened read-only (store_options.read_only)? */
bool store_read_only(const store *st);

/* One durable point read of sys/head: MR_OK while the store answers. A
 * writer that another writer has fenced learns it here too (MR_ERR_FENCED,
 * and the store turns failed), without having to attempt a commit. */
mr_status store_probe(store *st, mr_error *err) MR_MUST_CHECK;

/* The store watcher (watch.c): a thread probing st every interval_ms (0:
 * 1000), and running store_recover while st is failed. It logs a store that
 * stops answering and its recovery, once each. When another writer has
 * taken the store over it logs that, calls fenced(ctx) once and stops; when
 * recovery finds the owner must reload, it logs that, calls reload(ctx) once
 * and stops. Callbacks run on the watcher's thread. store_watch_stop joins
 * the thread; call it before closing st. */
/*
 * On a read-only store the watcher follows the writer instead: every
 * interval it rereads sys/head (store_read_head; open the store with
 * reader_poll_ms = the interval, so the reader itself keeps up with the
 * writer's manifest and WAL) and, when it moved, calls
 * advanced(ctx, from, to, &reached) with the head the owner has and the
 * new one; the owner says which head it reached (to, or a later one). A
 * failed advanced() is retried from the same `from` the next interval, so
 * the owner never skips a change (MR_ERR_CONFLICT: the store moved during
 * it, retried without a log line); an unreachable store is logged once and
 * once again when it answers.
 */
typedef struct store_watch_hooks {
  void (*fenced)(void *ctx); /* another writer owns the store */
  void (*reload)(void *ctx); /* the store holds commits the owner lacks */
  void *ctx;
  /* readers only (NULL: a reader's watcher just refreshes); a reader's
   * watcher never calls fenced or reload (they may be NULL) */
  mr_status (*advanced)(void *ctx, store_head from, store_head to, store_head *reached,
                        mr_error *err);
} store_watch_hooks;
typedef struct store_watch store_watch;
mr_status store_watch_start(store *st, unsigned interval_ms, const store_watch_hooks *hooks,
                            store_watch **out, mr_error *err) MR_MUST_CHECK;
void store_watch_stop(store_watch *w);

/* ---- commits ----------------------------------------------------------- */

typedef struct store_commit store_commit;

/*
 * Starts a commit that will land only if sys/head still equals `expected`
 * (snapshot id and batch count) when it is written.
 *
 * Within one commit all removals (store_commit_end, store_commit_delete)
 * apply before all writes (store_commit_put), whatever the call order, so
 * ending a version and putting its successor under the same current key
 * works either way round. *out is owned by the caller
 * until store_commit_write or store_commit_abort, which free it.
 */
mr_status store_commit_begin(store *st, store_head expected, store_commit **out, mr_error *err) MR_MUST_CHECK;

/*
 * The DuckLake snapshot this commit creates (snapshot + snapshot_changes +
 * conflict facts). A commit without one keeps the head's snapshot id (an
 * options-only or maintenance batch) and writes no changelog record.
 */
mr_status store_commit_snapshot(store_commit *c, const Moraine__V1__Snapshot *snap, mr_error *err) MR_MUST_CHECK;

/*
 * Writes value under current key k: a new entity version (versioned kinds),
 * an overwrite (fstat, tstat, tcstat, tag, option), a create-only mapping
 * (refused MR_ERR_INVALID if one exists), a gcfile, a schema_version row or
 * an inline record. Name and delete_target entries follow automatically.
 */
mr_status store_commit_put(store_commit *c, const mr_key *k, const ProtobufCMessage *value,
                           mr_error *err) MR_MUST_CHECK;

/*
 * Ends the current version of a versioned entity at end_snapshot: deletes its
 * current key and puts `ended` (the version with end_snapshot set) under the
 * history key — in this same batch. Its name / delete_target entry goes too.
 */
mr_status store_commit_end(store_commit *c, const mr_key *k, const ProtobufCMessage *ended,
                           mr_error *err) MR_MUST_CHECK;

/* Deletes an unversioned record (gcfile, inline row, schema_version, ...). */
mr_status store_commit_delete(store_commit *c, const mr_key *k, mr_error *err) MR_MUST_CHECK;

/*
 * Removes a record outright, with no history kept — DuckLake's own snapshot
 * expiry and compaction (ducklake_expire_snapshots, merge_adjacent_files):
 *   - snapshot/{id} (value unused): the snapshot record and its changelog
 *     record (neither listed in any changelog);
 *   - a history key of a versioned entity (c[ncomp] = end_snapshot; value
 *     unused): that ended version (not listed in any changelog);
 *   - a current key of a versioned entity: its current version and the name /
 *     delete_target entry `value` (that version, required) implies; listed in
 *     the changelog like any current key.
 * Other kinds: MR_ERR_INVALID (use store_commit_delete / store_commit_end).
 */
mr_status store_commit_forget(store_commit *c, const mr_key *k, const ProtobufCMessage *value,
                              mr_error *err) MR_MUST_CHECK;

/*
 * Writes the batch durably, then frees c. A commit with a snapshot also
 * writes changelog/{snapshot_id}: every current, inline and schema_version
 * key it put or removed, sorted and deduplicated (derived name, history and
 * delete_target keys are not listed), and deletes the changelog record
 * changelog_window snapshots back. MR_ERR_CONFLICT (nothing written)
 * when the head moved since store_commit_begin; on success *new_head (may be
 * NULL) is the head this batch wrote.
 */
mr_status store_commit_write(store_commit *c, store_head *new_head, mr_error *err) MR_MUST_CHECK;

/*
 * What a commit removes outright (RFC 0002 maintenance): a commit that
 * forgets snapshots (DuckLake's expiry) or deletes inlined rows (DuckLake's
 * flush of inlined data, a dropped table's rows) also appends a pass to
 * sys/maintenance_status in its own batch, with these counts.
 */
typedef struct store_commit_counts {
  uint64_t snapshots_forgotten; /* snapshot records */
  uint64_t history_forgotten;   /* ended versions */
  uint64_t current_forgotten;   /* current versions removed with no history */
  uint64_t inline_deleted;      /* inlined rows and inline records */
} store_commit_counts;
void store_commit_get_counts(const store_commit *c, store_commit_counts *out);

/* Drops a commit without writing anything. NULL is a no-op. */
void store_commit_abort(store_commit *c);

/* ---- reads ------------------------------------------------------------- */

/* Visitor: return MR_OK to go on; anything else stops the scan and is returned. */
typedef mr_status (*store_visit_fn)(void *ctx, const mr_key *k, const ProtobufCMessage *value,
                                    mr_error *err);

/* Every record of the current subspace, in key order. Reads no other subspace. */
mr_status store_load_current(store *st, store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;

/*
 * The catalog as of snapshot s: current records with begin_snapshot <= s and
 * history records with begin_snapshot <= s < end_snapshot, plus the
 * unversioned kinds as they are now (stats, tags filtered by entry, options).
 * table_id = 0 reads the whole catalog, otherwise only that table's ranges.
 */
mr_status store_read_at(store *st, uint64_t s, uint64_t table_id, store_visit_fn fn, void *ctx,
                        mr_error *err) MR_MUST_CHECK;

/* Point read of the record under k (current, inline, ... key): on success
 * *out is owned by the caller (mr_value_free); MR_ERR_NOT_FOUND if absent. */
mr_status store_get(store *st, const mr_key *k, ProtobufCMessage **out, mr_error *err) MR_MUST_CHECK;

/* Every record of one subspace, in key order (the catalog load reads
 * current, history, inline and schema_version this way). */
mr_status store_load_subspace(store *st, mr_subspace ss, store_visit_fn fn, void *ctx,
                              mr_error *err) MR_MUST_CHECK;

/* Decodes and visits every record of range r (mr_key_range_*), in key
 * order: the ranged read a lazy catalog load and its history loads use. */
mr_status store_scan(store *st, const mr_key_range *r, store_visit_fn fn, void *ctx,
                     mr_error *err) MR_MUST_CHECK;

/*
 * A ranged read that skips: pick sees each key before its value is decoded
 * and says whether fn gets the record (TAKE), or not (SKIP), or not and the
 * scan jumps to the key bytes it wrote into *seek (SEEK; a key at or before
 * the current one is not a jump, one at or past r's end ends the scan), or
 * that the scan fails with *err (FAIL). What a skip-scan saves shows in the
 * kv layer's keys_read.
 *
 * Threads: the scan and pick run on a reader thread of their own, up to
 * sixteen batches (a bounded read-ahead) ahead of fn, which runs on the
 * caller's thread, in key order (a start-up load overlaps the store's
 * iteration with the engine's appends).
 * pick and fn get the same ctx and may run at once: whatever pick changes,
 * fn must not read. A failure on either side stops both; the call returns
 * once the reader has ended.
 */
typedef enum store_pick {
  STORE_PICK_TAKE,
  STORE_PICK_SKIP,
  STORE_PICK_SEEK,
  STORE_PICK_FAIL
} store_pick;
typedef store_pick (*store_pick_fn)(void *ctx, const mr_key *k, mr_keybuf *seek, mr_error *err);
mr_status store_scan_picked(store *st, const mr_key_range *r, store_pick_fn pick,
                            store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;

/* Snapshot records in ascending id order. */
mr_status store_list_snapshots(store *st, store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;

/* Current schema (parent 0) or table (parent = schema id) by exact name; the
 * greatest matching id wins, validated against the current entity. */
mr_status store_lookup_name(store *st, mr_name_kind nk, uint64_t parent_id, const char *name,
                            uint64_t *entity_id, bool *found, mr_error *err) MR_MUST_CHECK;

/* Current delete files that target one data file (each validated by a point read). */
mr_status store_delete_files_for(store *st, uint64_t table_id, uint64_t data_file_id,
                                 store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;

/* Changelog records of snapshots in (from, to], ascending. */
mr_status store_changelog_replay(store *st, uint64_t from, uint64_t to, store_visit_fn fn, void *ctx,
                                 mr_error *err) MR_MUST_CHECK;

/* Every version of the entity whose current key is k: the current record
 * (if there is one), then for a versioned kind its history records (all of
 * them, oldest end first). A replica applying a commit re-reads the entities
 * it changed this way. */
mr_status store_entity_versions(store *st, const mr_key *k, store_visit_fn fn, void *ctx,
                                mr_error *err) MR_MUST_CHECK;

/* As store_read_at, for one kind only (a versioned kind: its current and
 * history ranges; table_id = 0: every table; else the kind must be
 * table-scoped). The tools read a catalog's tables this way without
 * reading everything else. */
mr_status store_read_kind_at(store *st, mr_key_kind kind, uint64_t s, uint64_t table_id,
                             store_visit_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;

/* Read-only store: catches up with what the writer has made durable
 * (kv_refresh) and rereads sys/head into *head (and store_get_head). */
mr_status store_refresh(store *st, store_head *head, mr_error *err) MR_MUST_CHECK;
/* Read-only store: rereads sys/head as the reader sees it now (it catches
 * up by itself every store_options.reader_poll_ms), into *head and
 * store_get_head. No new reader: kv_refresh opens one, and every SlateDB
 * reader registers a checkpoint in the writer's manifest. */
mr_status store_read_head(store *st, store_head *head, mr_error *err) MR_MUST_CHECK;

typedef struct store_census_row {
  uint64_t keys;
  uint64_t bytes; /* keys + values */
} store_census_row;

typedef struct store_census {
  store_census_row subspace[MR_SS_COUNT];
  store_census_row current_kind[MR_KK_COUNT];
  store_census_row history_kind[MR_KK_COUNT];
} store_census;

/* What `moraine info` shows of a store: its sys records and the time of
 * its head snapshot. */
typedef struct store_description {
  unsigned format;              /* sys/format layout_version */
  char writer_version[64];      /* the moraine that created the store */
  char origin[512];             /* sys/format's commit_log_batch_origin, "" when native */
  bool has_created_at;          /* sys/format records the creation time
                                   (stores created before it did not) */
  int64_t created_at_us;        /* when the store was created */
  bool has_migration;           /* a sys/migration marker is there */
  unsigned migration_from;      /* its from_format and to_format */
  unsigned migration_to;
  store_head head;              /* sys/head */
  bool has_head_time;           /* the head snapshot's record is there */
  int64_t head_time_us;         /* its snapshot_time */
  size_t maintenance_passes;    /* recorded in sys/maintenance_status */
  int64_t last_pass_us;         /* the newest pass's start, 0 when none */
  char last_pass_trigger[64];
  char last_pass_steps[400];    /* "step: outcome, detail; ..." */
  uint64_t objects;             /* objects under the store's root now */
  uint64_t bytes;               /* and their bytes: what the store occupies */
} store_description;

/* Reads the store's description (a few point reads and one LIST per
 * folder of the store); its size leaves out the top-level folder skip_top
 * (NULL: none), where a root store keeps other catalogs' stores. */
mr_status store_describe(store *st, const char *skip_top, store_description *out,
                         mr_error *err) MR_MUST_CHECK;

/* Counts every key of the store (one full scan). */
mr_status store_take_census(store *st, store_census *out, mr_error *err) MR_MUST_CHECK;

/* ---- verification (verify.c) ------------------------------------------ */

/* X(id, text): what a problem store_verify reports is about. */
#define STORE_CHECK_TABLE(X)                                                   \
  X(KEY, "key")             /* a key that does not decode */                 \
  X(VALUE, "value")         /* a value that does not decode */               \
  X(IDS, "ids")             /* a value whose ids disagree with its key */    \
  X(LIFECYCLE, "lifecycle") /* begin/end snapshots against each other, head */ \
  X(NAME, "name")           /* name directory against current records */    \
  X(DELETE_TARGET, "delete_target") /* delete_target directory */            \
  X(CHANGELOG, "changelog") /* the changelog window */                       \
  X(HEAD, "head")           /* sys/head against the snapshot records */      \
  X(SYSTEM, "system")       /* sys/format, sys/migration */                  \
  X(INLINE, "inline")       /* inlined rows against their inlined tables */

typedef enum store_check {
#define STORE_CHECK_ENUM(id, text) STORE_CHECK_##id,
  STORE_CHECK_TABLE(STORE_CHECK_ENUM)
#undef STORE_CHECK_ENUM
      STORE_CHECK_COUNT
} store_check;

const char *store_check_text(store_check c);

/* One problem: valid only during the report call. */
typedef struct store_problem {
  store_check check;
  const char *key;  /* the key's text form (key.h); an undecodable key as "0x" + hex */
  const char *what; /* one line saying what is wrong */
} store_problem;

typedef struct store_verify_hooks {
  /* every problem, in the order found; return non-OK to stop the walk */
  mr_status (*problem)(void *ctx, const store_problem *p, mr_error *err);
  /* every 4096 keys walked (may be NULL) */
  void (*progress)(void *ctx, uint64_t keys);
  void *ctx;
} store_verify_hooks;

typedef struct store_verify_result {
  uint64_t keys;            /* keys walked */
  uint64_t problems;        /* problems reported */
  store_head head;          /* sys/head as read (zero if it did not decode) */
  uint64_t snapshots;       /* snapshot records */
  uint64_t newest_snapshot; /* the greatest snapshot id (0 when none) */
  uint64_t changelog_records;
} store_verify_result;

/*
 * Walks every key of st once (open it read_only + unchecked to verify a
 * store the open checks would refuse): decodes each key and value (ids in
 * key and value must agree), checks each versioned record's begin/end
 * against each other and the head (and that the ended versions of one
 * entity do not overlap), that every name and delete_target entry
 * is the one a current record implies (store_name_entry_of, ...) and every
 * such record has its entry, that the changelog holds a record for each
 * snapshot of the window (head - changelog_window, head] (0: the default
 * window) and none outside it, each listing decodable current-side keys,
 * that every inlined row belongs to an inlined table of its width, and that
 * sys/head names the newest snapshot record. Problems go to
 * hooks->problem; MR_OK means the walk finished (clean when out->problems
 * is 0). Fails (not a problem) when the store cannot be read, is empty, or
 * has a layout format this build does not know.
 */
mr_status store_verify(store *st, uint64_t changelog_window, const store_verify_hooks *hooks,
                       store_verify_result *out, mr_error *err) MR_MUST_CHECK;

/* Keys read through this store's kv handle so far (tests prove O(live) loads). */
uint64_t store_keys_read(const store *st);

/* ---- maintenance ------------------------------------------------------- */

typedef struct store_expire_progress {
  uint64_t snapshots_dropped;
  uint64_t history_dropped;
  uint64_t fstat_dropped;
  uint64_t tag_entries_dropped;
  uint64_t batches;
  bool stopped; /* the progress callback asked to stop */
} store_expire_progress;

/* Called after every expiry batch; return false to stop the pass early
 * (it ends MR_OK with out->stopped set; rerunning finishes the job). */
typedef bool (*store_progress_fn)(void *ctx, const store_expire_progress *p);

/*
 * Expires snapshots older than `horizon` (ids < horizon; horizon <= the
 * head's snapshot id, so the head snapshot always survives): drops their snapshot
 * records, history versions with end_snapshot <= horizon, fstat of files
 * whose history is gone, ended tag entries; keeps schema_version rows.
 * Works in batches of at most batch_keys mutations, each a normal batch that
 * bumps head, so a crash resumes by simply running it again. Records the pass
 * in sys/maintenance_status (last 16). progress may be NULL; trigger is a
 * short text ("manual", "test", ...). batch_keys 0 means 1000.
 */
mr_status store_expire(store *st, uint64_t horizon, const char *trigger, size_t batch_keys,
                       store_progress_fn progress, void *ctx, store_expire_progress *out,
                       mr_error *err) MR_MUST_CHECK;

/* ---- migration (migrate.c) -------------------------------------------- */

/* Where a migration is, after each of its steps. */
typedef struct store_migrate_progress {
  unsigned from_format, to_format; /* the hop under way */
  const char *what;                /* the directory it builds */
  uint64_t records;                /* current records walked in this hop */
  uint64_t entries;                /* directory entries written in this hop */
  uint64_t steps;                  /* batches written by this run */
  bool hop_done;                   /* this step published to_format */
} store_migrate_progress;

/* Called after every step; return false to stop (rerunning goes on). */
typedef bool (*store_migrate_fn)(void *ctx, const store_migrate_progress *p);

typedef struct store_migrate_result {
  unsigned format_before; /* sys/format when the run began */
  unsigned format_after;  /* and when it ended */
  bool resumed;           /* a sys/migration marker was found and finished */
  uint64_t steps;         /* batches written */
  uint64_t entries;       /* directory entries written */
  bool stopped;           /* the progress callback stopped it */
} store_migrate_result;

/*
 * Brings st (opened with store_options.migrating) from its layout format
 * (STORE_FORMAT_MIGRATE_OLDEST..STORE_FORMAT_LATEST) up to
 * STORE_FORMAT_LATEST: 9 or 10 -> 11 builds the name directory, 11 -> 12
 * the delete_target directory, in steps of at most step_records current
 * records (0: 1000). Each step is one batch writing its entries and
 * sys/migration {from, to, cursor}; a hop's last step deletes the marker
 * and publishes the new sys/format (its other fields kept). A run that
 * crashed or was stopped is resumed by running it again. A store already
 * at STORE_FORMAT_LATEST with no marker is left alone (MR_OK, no step).
 * progress may be NULL.
 */
mr_status store_migrate(store *st, size_t step_records, store_migrate_fn progress, void *ctx,
                        store_migrate_result *out, mr_error *err) MR_MUST_CHECK;

/* ---- branches (branch.c) ---------------------------------------------- */

typedef struct store_cut_result {
  uint64_t head_before;      /* the head snapshot the store had */
  uint64_t keys_walked;
  uint64_t records_removed;  /* snapshot, changelog, version, row ... records */
  uint64_t records_restored; /* versions and inlined rows live again */
} store_cut_result;

/*
 * Cuts st (a writer; a fresh branch, kv_clone) back to the catalog as it
 * was at snapshot `at` (<= the head, its snapshot record still there), in
 * one batch: later snapshots and what they began go, what they ended is
 * current again, directories follow, sys/format's created_at becomes now
 * (a branch is a store made now), sys/head becomes {at, batch + 1}
 * (branch.c says exactly what happens to each kind). Statistics of what
 * remains are the current ones; changelog records older than the source's
 * window are not made up.
 */
mr_status store_cut_back(store *st, uint64_t at, store_cut_result *out, mr_error *err) MR_MUST_CHECK;

#endif /* MR_STORE_H */
