/*
 * sdb.h — the C declarations of the slatedb-binding Rust crate (src/lib.rs).
 *
 * Private to src/kv: only kv.c includes this; the rest of moraine reaches
 * SlateDB through kv.h. The crate holds no moraine logic: it opens stores,
 * moves bytes and reports SlateDB's errors as (code, message).
 *
 * Conventions for every function here:
 *  - int return is an sdb_code; SDB_OK is 0.
 *  - msg/cap is a caller buffer that receives a NUL-terminated message on
 *    failure (cut to cap-1 bytes); it is left untouched on SDB_OK.
 *  - handles (sdb_db, sdb_iter, ...) are allocated by the crate and freed only
 *    by the matching *_free / sdb_close / sdb_txn_commit / sdb_txn_rollback.
 *  - a Rust panic is caught at the boundary and reported as SDB_INTERNAL.
 */
#ifndef SDB_H
#define SDB_H

#include <stddef.h>
#include <stdint.h>

enum sdb_code {
  SDB_OK = 0,
  SDB_NOT_FOUND = 1,   /* absent key / iterator exhausted */
  SDB_CONFLICT = 2,    /* SlateDB ErrorKind::Transaction */
  SDB_FENCED = 3,      /* ErrorKind::Closed(Fenced): a newer writer exists */
  SDB_CLOSED = 4,      /* ErrorKind::Closed(Clean or Panic) */
  SDB_UNAVAILABLE = 5, /* ErrorKind::Unavailable: object store / io */
  SDB_INVALID = 6,     /* ErrorKind::Invalid, and bad arguments */
  SDB_DATA = 7,        /* ErrorKind::Data: persisted state unexpected */
  SDB_INTERNAL = 8,    /* ErrorKind::Internal, caught panics */
  SDB_NOMEM = 9,       /* malloc of a returned value failed */
  SDB_TIMEOUT = 10     /* the deadline of sdb_open_args passed (the store did
                          not answer); a timed-out write may still land */
};

/* Which segment extractor an open configures. Only SEGMENT is for real use. */
enum sdb_extractor {
  SDB_EXTRACTOR_SEGMENT = 0, /* fixed length 1, "moraine.subspace.v1" */
  SDB_EXTRACTOR_NONE = 1,    /* tests only: no extractor */
  SDB_EXTRACTOR_OTHER = 2    /* tests only: "moraine.test.other.v1" */
};

typedef struct sdb_open_args {
  const char *url;       /* file://DIR, memory://[NAME], s3://BUCKET[/PREFIX],
                            gs://BUCKET[/PREFIX], az://CONTAINER[/PREFIX] */
  uint32_t read_only;    /* 1: open a DbReader instead of a writer */
  uint32_t extractor;    /* enum sdb_extractor */
  uint32_t wal_flush_ms; /* writer: WAL flush interval; 0 = SlateDB default */
  uint32_t poll_ms;      /* reader: manifest poll interval; 0 = default */
  uint32_t deadline_ms;  /* open and writer writes: fail with SDB_TIMEOUT when
                            not done by then; 0 = no deadline */
  const char *cache_dir; /* SlateDB's object-store read cache in this local
                            folder (created if missing); NULL = none */
  uint32_t l0_sst_bytes;    /* writer: the memtable becomes an L0 SST at this
                               size; 0 = SlateDB default */
  uint32_t gc_interval_ms;  /* writer: garbage collector period; 0 = default */
  uint32_t gc_min_age_ms;   /* writer: an unreferenced object this old goes;
                               0 = SlateDB default */
} sdb_open_args;


typedef struct sdb_db sdb_db;
typedef struct sdb_iter sdb_iter;
typedef struct sdb_batch sdb_batch;
typedef struct sdb_snapshot sdb_snapshot;
typedef struct sdb_txn sdb_txn;

int sdb_open(const sdb_open_args *args, sdb_db **out, char *msg, size_t cap);
/* The names of the folders directly under the store url (no store opened),
 * each followed by '\n', as a malloc'd buffer (*out, *len; free()) — for
 * finding the stores kept beside each other under one root. deadline_ms 0:
 * none. */
int sdb_list_folders(const char *url, uint32_t deadline_ms, uint8_t **out, size_t *len, char *msg,
                     size_t cap);
/* A zero-copy branch: SlateDB's clone of the store at src (its latest
 * durable state) as a new store at dst, in the same object store (two
 * folders, or one bucket); dst must hold no store. deadline_ms 0: none. */
int sdb_clone(const char *src, const char *dst, uint32_t deadline_ms, char *msg, size_t cap);
/* Closes and frees db whatever the result. */
int sdb_close(sdb_db *db, char *msg, size_t cap);
int sdb_flush(sdb_db *db, char *msg, size_t cap);
int sdb_sync(sdb_db *db, char *msg, size_t cap);
/* Objects under the store's path and their total bytes, leaving out the
 * top-level folder skip_top (NULL: none). */
int sdb_usage(sdb_db *db, const char *skip_top, uint64_t *objects, uint64_t *bytes, char *msg,
              size_t cap);
int sdb_refresh(sdb_db *db, char *msg, size_t cap);

/*
 * Point reads. On SDB_OK *val is a malloc'd copy (never NULL, even for an
 * empty value) that the caller releases with free(); on SDB_NOT_FOUND
 * *val is NULL.
 */
int sdb_get(sdb_db *db, const uint8_t *key, size_t klen, uint8_t **val, size_t *vlen, char *msg,
            size_t cap);
int sdb_snapshot_get(sdb_snapshot *s, const uint8_t *key, size_t klen, uint8_t **val, size_t *vlen,
                     char *msg, size_t cap);
int sdb_txn_get(sdb_txn *t, const uint8_t *key, size_t klen, uint8_t **val, size_t *vlen, char *msg,
                size_t cap);

/*
 * Ascending scans of [start, end). A NULL bound is unbounded; an empty start
 * is unbounded; an empty end, or end <= start, gives an empty iterator.
 */
int sdb_scan(sdb_db *db, const uint8_t *start, size_t slen, const uint8_t *end, size_t elen,
             sdb_iter **out, char *msg, size_t cap);
int sdb_snapshot_scan(sdb_snapshot *s, const uint8_t *start, size_t slen, const uint8_t *end,
                      size_t elen, sdb_iter **out, char *msg, size_t cap);
int sdb_txn_scan(sdb_txn *t, const uint8_t *start, size_t slen, const uint8_t *end, size_t elen,
                 sdb_iter **out, char *msg, size_t cap);
/* Key/value pointers stay valid until the next sdb_iter_next or free. */
int sdb_iter_next(sdb_iter *it, const uint8_t **key, size_t *klen, const uint8_t **val,
                  size_t *vlen, char *msg, size_t cap);
/* The next sdb_iter_next returns the first entry at or after key (nothing
 * changes if the scan is already past it; a key at or past the scan's end
 * ends it). *dropped: entries fetched ahead and skipped, which the store
 * read. */
int sdb_iter_seek(sdb_iter *it, const uint8_t *key, size_t klen, size_t *dropped, char *msg,
                  size_t cap);
void sdb_iter_free(sdb_iter *it);

sdb_batch *sdb_batch_new(void);
int sdb_batch_put(sdb_batch *b, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                  char *msg, size_t cap);
int sdb_batch_delete(sdb_batch *b, const uint8_t *key, size_t klen, char *msg, size_t cap);
void sdb_batch_free(sdb_batch *b);
/* Durable when it returns SDB_OK; the batch is not modified. */
int sdb_write(sdb_db *db, const sdb_batch *b, char *msg, size_t cap);

int sdb_snapshot_open(sdb_db *db, sdb_snapshot **out, char *msg, size_t cap);
void sdb_snapshot_free(sdb_snapshot *s);

int sdb_txn_begin(sdb_db *db, sdb_txn **out, char *msg, size_t cap);
int sdb_txn_put(sdb_txn *t, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                char *msg, size_t cap);
int sdb_txn_delete(sdb_txn *t, const uint8_t *key, size_t klen, char *msg, size_t cap);
/* Both end the transaction and free t whatever the result. */
int sdb_txn_commit(sdb_txn *t, char *msg, size_t cap);
void sdb_txn_rollback(sdb_txn *t);

#endif /* SDB_H */
