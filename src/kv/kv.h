/*
 * kv.h — moraine's only door to SlateDB.
 *
 * One store of ordered byte keys with: point gets, ascending range scans,
 * atomic durable write batches, pinned read snapshots, snapshot-isolated
 * transactions with write-write conflict detection, and read-only readers.
 * It knows nothing of moraine's key layout except that the first byte of
 * every key is its SlateDB segment (RFC 0002, SlateDB RFC-0024).
 *
 * Store URLs
 *   file://DIR        a local folder, absolute or relative to the cwd;
 *                     created if missing; files and directories are fsynced
 *                     on every write.
 *   memory://         a fresh in-memory store, private to this open.
 *   memory://NAME     an in-memory store shared by every open of the same
 *                     NAME in this process, kept until the process exits.
 *   s3://BUCKET[/P]   S3 (or compatible: MinIO, R2, ...) bucket, prefix P.
 *                     From the AWS_* variables: AWS_ACCESS_KEY_ID,
 *                     AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION
 *                     (or AWS_DEFAULT_REGION), AWS_ENDPOINT (AWS_ENDPOINT_URL),
 *                     AWS_ALLOW_HTTP=true for a plain-http endpoint,
 *                     AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true for
 *                     BUCKET.host URLs (default: path style when an endpoint
 *                     is set), AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, ...;
 *                     missing keys, region and endpoint_url come from the
 *                     profile AWS_PROFILE (default "default") of
 *                     ~/.aws/credentials and ~/.aws/config (or the files
 *                     AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE name);
 *                     then the instance / container metadata service.
 *   gs://BUCKET[/P]   Google Cloud Storage. From the GOOGLE_* variables:
 *                     GOOGLE_SERVICE_ACCOUNT (a key file's path),
 *                     GOOGLE_SERVICE_ACCOUNT_KEY (the key's JSON),
 *                     GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_BASE_URL; else
 *                     the metadata service. An emulator: a key JSON with
 *                     "gcs_base_url" and "disable_oauth": true (docs/kv.md).
 *   az://CONTAINER[/P] Azure Blob Storage. From the AZURE_* variables:
 *                     AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY
 *                     (or AZURE_STORAGE_SAS_KEY, AZURE_STORAGE_TOKEN,
 *                     AZURE_CLIENT_ID/_SECRET/AZURE_TENANT_ID, ...),
 *                     AZURE_STORAGE_ENDPOINT; AZURE_STORAGE_USE_EMULATOR=true
 *                     talks to Azurite at AZURITE_BLOB_STORAGE_URL (default
 *                     http://127.0.0.1:10000) as devstoreaccount1 with its
 *                     well-known key unless a key is given.
 *   Before a cloud store opens, one LIST under its root through a client
 *   that retries once checks endpoint, credentials and bucket, so that each
 *   fails at once with the object store's own reason (one line) rather than
 *   as the open deadline passing.
 *
 * Segment extractor
 *   Every open — writer and reader — configures the one-byte segment
 *   extractor "moraine.subspace.v1". A new store records it; an existing
 *   store created without it, or with another extractor, is refused with
 *   MR_ERR_INVALID and a message naming what the store has.
 *
 * Durability
 *   kv_write and kv_txn_commit return MR_OK only once the batch is durable
 *   in the object store (SlateDB await_durable). Reads on a writer see only
 *   durable data, so nothing a crash could undo is ever observed.
 *
 * Errors
 *   Every fallible call returns an mr_status and, on failure, fills err
 *   (when non-NULL) with the code and SlateDB's message:
 *     MR_ERR_NOT_FOUND   absent key (kv_*_get), iterator exhausted
 *     MR_ERR_CONFLICT    kv_txn_commit lost a write-write conflict
 *     MR_ERR_FENCED      a newer writer opened the store; this handle is dead
 *     MR_ERR_CLOSED      the handle was closed or failed earlier
 *     MR_ERR_IO          object store unavailable, or SlateDB internal error
 *     MR_ERR_INVALID     bad argument, wrong handle kind, extractor mismatch
 *     MR_ERR_CORRUPTION  persisted state is not what SlateDB expects
 *     MR_ERR_NOMEM       out of memory
 *   SlateDB 0.14.1 retries failed object-store calls forever, except
 *   not-found / already-exists / precondition / not-implemented /
 *   not-supported: an object store that goes away after the open, or a
 *   full disk, make a call block until its deadline (open and writes of a
 *   writer: deadline_ms, MR_ERR_TIMEOUT) rather than fail.
 *   A fenced writer learns it on its next write, or from its manifest poll
 *   (about 1 s); from then on every call on it returns MR_ERR_FENCED.
 *
 * Threads
 *   A kv_db may be used from several threads at once, except kv_close and
 *   kv_refresh, which need it to themselves. kv_iter, kv_snapshot, kv_txn
 *   and kv_batch are each used by one thread at a time.
 *
 * Lifetimes
 *   Every iterator, snapshot and transaction must be closed (or committed /
 *   rolled back) before kv_close or kv_refresh of its kv_db; those two refuse
 *   with MR_ERR_INVALID while any is open.
 */
#ifndef MR_KV_H
#define MR_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

typedef struct kv_db kv_db;             /* an open store (writer or reader) */
typedef struct kv_iter kv_iter;         /* an ascending scan */
typedef struct kv_batch kv_batch;       /* puts and deletes, written at once */
typedef struct kv_snapshot kv_snapshot; /* a pinned read view of a writer */
typedef struct kv_txn kv_txn;           /* a snapshot-isolated transaction */

/* Which segment extractor to configure. Anything but the default is for
 * tests that must create or open a mismatched store. */
typedef enum kv_extractor {
  KV_EXTRACTOR_SEGMENT = 0, /* the one-byte segment extractor (always) */
  KV_EXTRACTOR_NONE = 1,    /* TESTS ONLY: no extractor */
  KV_EXTRACTOR_OTHER = 2    /* TESTS ONLY: a different extractor name */
} kv_extractor;

/* WAL flush interval of a writer when kv_open_options.wal_flush_ms is 0. A
 * write waits for the next flush, so this bounds commit latency. */
#define KV_DEFAULT_WAL_FLUSH_MS 10

typedef struct kv_open_options {
  int read_only;                   /* 1: open a read-only reader (SlateDB DbReader) */
  uint32_t wal_flush_ms;           /* writer: WAL flush interval, 0 = default above */
  uint32_t poll_ms;                /* reader: background catch-up interval,
                                      0 = SlateDB's default (10 s) */
  kv_extractor extractor_override; /* TESTS ONLY; 0 = the real extractor */
  uint32_t deadline_ms;            /* open, and each write of a writer, fails with
                                      MR_ERR_TIMEOUT when not done by then;
                                      0 = KV_DEFAULT_DEADLINE_MS */
  const char *cache_dir;           /* SlateDB's object-store cache: SST parts read
                                      are kept in this local folder (created if
                                      missing, up to 1 GiB) for later reads and
                                      restarts; NULL = no cache */
  uint32_t l0_sst_bytes;           /* writer: the memtable becomes an L0 SST at this
                                      size; 0 = KV_DEFAULT_L0_SST_BYTES */
  uint32_t gc_interval_ms;         /* writer: garbage collector period;
                                      0 = KV_DEFAULT_GC_INTERVAL_MS */
  uint32_t gc_min_age_ms;          /* writer: an object nothing references is
                                      deleted once this old (it must outlast the
                                      longest compaction and reader refresh);
                                      0 = KV_DEFAULT_GC_MIN_AGE_MS */
} kv_open_options;

/* A catalog writes one small WAL object per commit (about 1 KiB of memtable
 * for a single-row DuckLake commit). At SlateDB's default of 64 MiB (or 4096
 * WAL writes, its floor) every WAL object of thousands of commits is kept
 * and replayed, one GET each, by every open (a restart, a tool, a reader):
 * minutes on an object store. At 64 KiB the memtable becomes an L0 SST every
 * few dozen commits, an open replays at most that many WAL objects, and the
 * ones before it can go. */
#define KV_DEFAULT_L0_SST_BYTES (64u * 1024u)
/* SlateDB's own defaults, chosen here on purpose: unreferenced manifests,
 * WAL objects, SSTs and compaction records older than 5 min go every 60 s.
 * SlateDB's compactor also pins what each merge replaced with a 15-minute
 * checkpoint (fixed in SlateDB 0.14), so space a merge freed is back within
 * about 21 minutes (docs/operations.md, "Space"). */
#define KV_DEFAULT_GC_INTERVAL_MS 60000
#define KV_DEFAULT_GC_MIN_AGE_MS 300000

/* The default deadline of kv_open and kv_write. A write that misses it may
 * still land later: the caller must treat the store as in doubt. */
#define KV_DEFAULT_DEADLINE_MS 10000

/* Reads through one kv_db and everything opened from it. */
typedef struct kv_read_stats {
  uint64_t gets;       /* point gets issued, found or not */
  uint64_t keys_read;  /* keys returned: found gets + keys yielded by scans */
  uint64_t bytes_read; /* key + value bytes of those keys */
} kv_read_stats;

/* ---- open / close ------------------------------------------------------ */

/*
 * Opens (creating if needed, for a writer) the store at url. opts may be
 * NULL for a writer with defaults. Opening a writer fences any older writer
 * of the same store. On MR_OK *out is a new handle the caller releases with
 * kv_close; on failure *out is NULL. url is only read during the call.
 */
mr_status kv_open(const char *url, const kv_open_options *opts, kv_db **out,
                  mr_error *err) MR_MUST_CHECK;

/*
 * The names of the folders directly under url (a store URL as above; no
 * store is opened): *names gets them, each followed by '\n', NUL-terminated
 * (kv_free). An empty text when there are none. Within the open deadline.
 */
mr_status kv_list_folders(const char *url, char **names, mr_error *err) MR_MUST_CHECK;

/*
 * Closes db (a writer first flushes its memtable) and frees it, whatever
 * the status — except MR_ERR_INVALID for open children, which leaves db
 * untouched. db may be NULL.
 */
/*
 * A zero-copy branch: a new store at dst that starts as the store at src
 * holds it now (its latest durable state) and then goes its own way.
 * SlateDB's clone: dst's manifest references src's SSTs, which a
 * checkpoint in src keeps from its garbage collector for good; only the
 * WAL is copied (including WAL objects a writer serving src made durable
 * after its manifest last moved, so every acknowledged commit is there;
 * readers of dst find the borrowed SSTs through the manifest, see
 * external_ssts.rs). src and dst must be in one object store (two file://
 * folders, or two prefixes of one bucket), dst must hold no store, and src
 * must stay where it is. src is not opened as a writer: a server writing
 * it goes on. deadline_ms 0: none. The store at dst is then opened with
 * kv_open like any other.
 */
mr_status kv_clone(const char *src, const char *dst, uint32_t deadline_ms,
                   mr_error *err) MR_MUST_CHECK;

mr_status kv_close(kv_db *db, mr_error *err);

/* 1 if db was opened read-only. */
int kv_is_read_only(const kv_db *db);

/*
 * Writer: writes the memtable out as an L0 SST. Every acknowledged write is
 * already durable in the WAL; this only shortens recovery and reader
 * catch-up. MR_ERR_INVALID on a reader.
 */
mr_status kv_flush(kv_db *db, mr_error *err) MR_MUST_CHECK;

/*
 * Writer: makes every write issued so far durable (a WAL flush), within the
 * open's deadline (MR_ERR_TIMEOUT). After a kv_write missed its deadline,
 * MR_OK here means that write's batch is now either durable or was never
 * taken: a durable read then tells which. MR_ERR_INVALID on a reader.
 */
mr_status kv_sync(kv_db *db, mr_error *err) MR_MUST_CHECK;

/* The objects under the store's root and their total bytes (one LIST per
 * folder, within the open's deadline), leaving out the top-level folder
 * skip_top (NULL: none; a root store keeps other stores in one): the store's
 * footprint right now. */
mr_status kv_usage(kv_db *db, const char *skip_top, uint64_t *objects, uint64_t *bytes,
                   mr_error *err) MR_MUST_CHECK;

/*
 * Reader: catches up now with everything the writer has made durable, by
 * opening a fresh SlateDB reader on the latest manifest and WAL and closing
 * the old one. Without it a reader also catches up on its own every poll_ms.
 * MR_ERR_INVALID on a writer, or while children are open.
 */
mr_status kv_refresh(kv_db *db, mr_error *err) MR_MUST_CHECK;

/* True once a batch or transaction was written through db (kv_write,
 * kv_txn_commit) since it was opened. */
bool kv_has_written(const kv_db *db);

/* Copies db's read counters into *out. */
void kv_stats(const kv_db *db, kv_read_stats *out);
/* Zeroes db's read counters. */
void kv_stats_reset(kv_db *db);

/* ---- point reads ------------------------------------------------------- */

/*
 * Looks up key (klen > 0 bytes). On MR_OK *val is a new malloc'd copy of the
 * value (never NULL, even for an empty value) of *vlen bytes, owned by the
 * caller and freed with kv_free. On MR_ERR_NOT_FOUND, or any error, *val is
 * NULL and *vlen 0. key is only read during the call.
 */
mr_status kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen,
                 mr_error *err) MR_MUST_CHECK;

/* Frees a value returned by a kv_*_get. p may be NULL. */
void kv_free(void *p);

/* ---- scans ------------------------------------------------------------- */

/*
 * Opens an ascending scan of the keys in [start, end). A NULL start (or an
 * empty one) is unbounded below, a NULL end unbounded above; an empty end,
 * or end <= start, scans nothing. The bounds are copied. On MR_OK *out is a
 * new iterator the caller releases with kv_iter_close.
 */
mr_status kv_iter_open(kv_db *db, const void *start, size_t start_len, const void *end,
                       size_t end_len, kv_iter **out, mr_error *err) MR_MUST_CHECK;

/*
 * Advances it. On MR_OK *key and *val point to the next entry; both pointers
 * are owned by it and valid only until the next kv_iter_next or
 * kv_iter_close. Returns MR_ERR_NOT_FOUND once the range is exhausted (and
 * keeps returning it).
 */
mr_status kv_iter_next(kv_iter *it, const void **key, size_t *klen, const void **val, size_t *vlen,
                       mr_error *err) MR_MUST_CHECK;

/*
 * Skips ahead: the next kv_iter_next returns the first entry whose key is
 * at or after key (klen > 0). A key the scan has already passed changes
 * nothing; one at or past the range's end ends the scan. Entries the store
 * read ahead and this skips count as read (kv_stats).
 */
mr_status kv_iter_seek(kv_iter *it, const void *key, size_t klen, mr_error *err) MR_MUST_CHECK;

/* Closes and frees it. it may be NULL. */
void kv_iter_close(kv_iter *it);

/* ---- atomic write batches ---------------------------------------------- */

/* On MR_OK *out is a new empty batch, released with kv_batch_free. */
mr_status kv_batch_new(kv_batch **out, mr_error *err) MR_MUST_CHECK;

/* Adds a put (key and value are copied); a later op on the same key wins. */
mr_status kv_batch_put(kv_batch *b, const void *key, size_t klen, const void *val, size_t vlen,
                       mr_error *err) MR_MUST_CHECK;

/* Adds a delete (key is copied). */
mr_status kv_batch_delete(kv_batch *b, const void *key, size_t klen, mr_error *err) MR_MUST_CHECK;

/* Number of puts and deletes added to b. */
size_t kv_batch_count(const kv_batch *b);

/* Frees b. b may be NULL. */
void kv_batch_free(kv_batch *b);

/*
 * Applies every op of b atomically; MR_OK means durable. b is not modified
 * and stays owned by the caller. An empty batch is MR_ERR_INVALID.
 */
mr_status kv_write(kv_db *db, const kv_batch *b, mr_error *err) MR_MUST_CHECK;

/* ---- pinned snapshots (writer only) ------------------------------------ */

/*
 * Pins the current durable state of db: later writes stay invisible to it.
 * On MR_OK *out is released with kv_snapshot_close.
 */
mr_status kv_snapshot_open(kv_db *db, kv_snapshot **out, mr_error *err) MR_MUST_CHECK;

/* As kv_get, at the snapshot. */
mr_status kv_snapshot_get(kv_snapshot *s, const void *key, size_t klen, void **val, size_t *vlen,
                          mr_error *err) MR_MUST_CHECK;

/* As kv_iter_open, at the snapshot; the iterator may outlive s. */
mr_status kv_snapshot_iter(kv_snapshot *s, const void *start, size_t start_len, const void *end,
                           size_t end_len, kv_iter **out, mr_error *err) MR_MUST_CHECK;

/* Releases s. s may be NULL. */
void kv_snapshot_close(kv_snapshot *s);

/* ---- transactions (writer only) ---------------------------------------- */

/*
 * Begins a snapshot-isolation transaction: its reads see the state at begin
 * plus its own writes. On MR_OK *out must be ended by exactly one of
 * kv_txn_commit or kv_txn_rollback.
 */
mr_status kv_txn_begin(kv_db *db, kv_txn **out, mr_error *err) MR_MUST_CHECK;

/* As kv_get, inside the transaction. */
mr_status kv_txn_get(kv_txn *t, const void *key, size_t klen, void **val, size_t *vlen,
                     mr_error *err) MR_MUST_CHECK;

/* As kv_iter_open, inside the transaction (its own writes included, as of
 * the moment the iterator opens). */
mr_status kv_txn_iter(kv_txn *t, const void *start, size_t start_len, const void *end,
                      size_t end_len, kv_iter **out, mr_error *err) MR_MUST_CHECK;

/* Buffers a put / delete in the transaction (copied). */
mr_status kv_txn_put(kv_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
                     mr_error *err) MR_MUST_CHECK;
mr_status kv_txn_delete(kv_txn *t, const void *key, size_t klen, mr_error *err) MR_MUST_CHECK;

/*
 * Commits t durably and frees it, whatever the status. MR_ERR_CONFLICT: a
 * key t writes was written by someone else after t began; nothing of t was
 * written. A transaction with no writes commits as a no-op.
 */
mr_status kv_txn_commit(kv_txn *t, mr_error *err) MR_MUST_CHECK;

/* Discards t and frees it. t may be NULL. */
void kv_txn_rollback(kv_txn *t);

#endif /* MR_KV_H */
