/*
 * store_internal.h — what the store's .c files share and nobody else sees:
 * the store struct, key/value helpers, and the head-bumping batch writer
 * that commits and maintenance batches both go through.
 */
#ifndef MR_STORE_INTERNAL_H
#define MR_STORE_INTERNAL_H

#include <pthread.h>

#include <stdatomic.h>

#include "kv/kv.h"
#include "store/store.h"

struct store {
  kv_db *db;
  char *url;                /* as opened, for store_open_view */
  char *cache_dir;          /* store_options.cache_dir (copy) or NULL */
  uint32_t deadline_ms;     /* store_options.deadline_ms */
  bool read_only;
  uint64_t changelog_window;
  const char *origin; /* borrowed from store_options for the open only (format_new) */
  pthread_mutex_t mu; /* the commit lock: guards head, failed, fail_msg */
  store_head head;    /* the sys/head this process last wrote or read */
  bool failed;        /* a write failed or we were fenced: no more commits */
  bool reload_needed; /* failed for good: the store holds what the owner lacks */
  mr_status fail_code;
  char fail_msg[MR_ERROR_MSG_MAX];
  store_fault_fn fault; /* TESTS ONLY: injected failure before kv_write */
  void *fault_ctx;
  store_write_fault write_fault; /* TESTS ONLY: the next write fails so */
  atomic_bool flush_wanted;      /* a maintenance commit landed: the watcher
                                    flushes the memtable (store_flush_if_wanted) */
};

/* After a commit that removed records (expiry, flushed inlined rows): the
 * memtable is written out as an L0 SST, so the compactor merges the removals
 * down and their space comes back even when no commit follows (an idle
 * catalog never fills the 64 KiB memtable). Called by the watcher thread;
 * a no-op unless a maintenance commit asked for it. */
mr_status store_flush_if_wanted(store *st, mr_error *err) MR_MUST_CHECK;

/* Every key of [start, end) in order (NULL/0 bounds: the whole store),
 * decoded, with its raw key and value bytes (valid only during the call;
 * read.c). A key that does not decode fails the walk. */
typedef mr_status (*store_raw_fn)(void *ctx, const mr_key *k, const void *kp, size_t kl,
                                  const void *vp, size_t vl, mr_error *err);
mr_status store_walk_raw(store *st, const void *start, size_t slen, const void *end, size_t elen,
                         store_raw_fn fn, void *ctx, mr_error *err) MR_MUST_CHECK;
/* Does [start, end) hold no key? (NULL/0 bounds: the whole store.) */
mr_status store_range_empty(store *st, const void *start, size_t slen, const void *end,
                            size_t elen, bool *empty, mr_error *err) MR_MUST_CHECK;

/* Encodes k, wrapping the error with the caller's context. */
mr_status store_key_bytes(const mr_key *k, mr_keybuf *out, mr_error *err) MR_MUST_CHECK;

/* Point read + decode of key k. MR_ERR_NOT_FOUND when absent; *out is
 * owned by the caller (mr_value_free). */
mr_status store_get_msg(store *st, const mr_key *k, ProtobufCMessage **out, mr_error *err) MR_MUST_CHECK;

/* Reads a singular int64/uint64 field by name; false when absent. */
bool store_msg_u64(const ProtobufCMessage *m, const char *field, uint64_t *v);
/* Reads a string field by name; NULL when absent. */
const char *store_msg_str(const ProtobufCMessage *m, const char *field);

/*
 * Writes b plus sys/head {snapshot_id, head.batch_count + 1} as one batch,
 * under the commit lock, if the head still equals *expected (NULL: any head; else
 * MR_ERR_CONFLICT, nothing written). A kv failure marks the store failed.
 * On success *new_head (may be NULL) is the head written. `snapshot_id` of
 * UINT64_MAX keeps the head's snapshot id.
 */
mr_status store_write_batch(store *st, kv_batch *b, const store_head *expected, uint64_t snapshot_id,
                            store_head *new_head, mr_error *err) MR_MUST_CHECK;

/* One step of a maintenance pass (sys/maintenance_status). */
#define STORE_MAINT_MAX_STEPS 4
typedef struct store_maint_step {
  const char *name;
  const char *outcome; /* done, stopped, failed */
  char detail[96];
} store_maint_step;

/* Adds to b the put of sys/maintenance_status with one more pass (keeping
 * the last MR_VALUE_MAX_PASSES): maintenance.c. */
mr_status store_maintenance_append(store *st, kv_batch *b, int64_t start_us, const char *trigger,
                                   const store_maint_step *steps, size_t nsteps,
                                   mr_error *err) MR_MUST_CHECK;

/*
 * The directory entries a record implies (commit.c): the name entry of a
 * current schema or table value (none for a NULL name or a table with no
 * schema; nk->name points into v, valid while v is), and the delete_target
 * entry of a delete file value (none without a data file). *has is false
 * for every other kind.
 */
void store_name_entry_of(const mr_key *k, const ProtobufCMessage *v, mr_key *nk, bool *has);
void store_delete_target_of(const mr_key *k, const ProtobufCMessage *v, mr_key *tk, bool *has);

/* Microseconds since the epoch, UTC. */
int64_t store_now_us(void);

#endif /* MR_STORE_INTERNAL_H */
