/*
 * catalog.h — the catalog layer: DuckLake v1.0 catalog rows (as src/sql
 * captures them) <-> RFC 0002 store records (src/store).
 *
 * Two jobs, both driven by one mapping table (catalog_map.c):
 *  - commit: sql.h's prepare hook turns one transaction's captured changes
 *    into exactly one store commit, conditioned on the head the transaction
 *    began from (a stale head fails SQLSTATE 40001 "... conflict ...");
 *  - load: before serving, the whole retained catalog (snapshots, current,
 *    history, inline tables, schema versions) is materialized into the
 *    embedded DuckDB through sql.h's pre-load API.
 *
 * Ownership: a catalog borrows the store and the engine; both must outlive
 * it. Not here: key bytes (key.h), value bytes (value.h), SQL (sql/).
 */
#ifndef MR_CATALOG_H
#define MR_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"
#include "sql/sql.h"
#include "sql/sql_history.h"
#include "store/store.h"

typedef struct catalog catalog;

/* Creates the catalog over st and e (no I/O). *out: catalog_free. */
mr_status catalog_open(store *st, sql_engine *e, catalog **out, mr_error *err) MR_MUST_CHECK;
void catalog_free(catalog *c);

/*
 * Materializes the store into the engine (call once, before serving): an
 * empty store loads nothing (DuckLake creates its tables on first ATTACH);
 * otherwise the 28 ducklake_* tables are created and filled, and every
 * inlined data / delete table is recreated. *nrows (may be NULL) gets the
 * number of rows loaded.
 */
mr_status catalog_load(catalog *c, size_t *nrows, mr_error *err) MR_MUST_CHECK;

/*
 * History residency (issue 13; catalog_history.c). With lazy set (the
 * server sets it; tools that export leave it off), catalog_load and
 * catalog_reload materialize the current catalog, every snapshot from
 * snapshot_tail below the head up, and the history of schemas,
 * tables, views, macros, columns, partitions and sorts; old snapshots and
 * ended data / delete file versions stay in the store until a statement
 * may read them. catalog_history_ensure is the engine's sql_history_fn:
 * it loads, through the pre-load API, the snapshots and the tables' ended
 * file versions the needs name (all of a class when they name none), each
 * at most once, and logs what it loaded with the store keys it read.
 */
void catalog_set_lazy_history(catalog *c, bool lazy, uint64_t snapshot_tail);
/* A lazy load also leaves every table's current inlined rows in the store;
 * the first statement that names one of the table's inlined-data tables (a
 * read, or a write: an INSERT too) loads them. Only for a catalog whose
 * rows change through its own sessions alone: a writer, never a replica.
 * At 1,000 tables of a few inlined rows each this is most of the engine's
 * memory at start (BENCHMARK.md). */
void catalog_set_lazy_current_inline(catalog *c, bool lazy);
mr_status catalog_history_ensure(catalog *c, const sql_hist_needs *needs, bool *loaded,
                                 sql_error *err);

/*
 * A read replica's catch-up, whole (catalog_follow.c): loads the catalog
 * again, from a view of the store that stays put while the writer goes on
 * (store_open_view), into a scratch schema first, outside any transaction
 * (the slow part, and the one that can fail on a value); then one engine
 * transaction replaces every ducklake_* and inlined table of the catalog's
 * schema with the scratch copy and drops inlined tables the store no longer
 * has, so a session reads the catalog before or after, never a mix. A
 * failure leaves the engine as it was. *reached gets the head loaded,
 * *nrows (may be NULL) the rows. Only for a catalog nothing else writes.
 */
mr_status catalog_reload(catalog *c, store_head *reached, size_t *nrows,
                         mr_error *err) MR_MUST_CHECK;

/*
 * A read replica's catch-up from head `from` (what the engine holds) to
 * `to` (the store's head now): applies just what the commits in between
 * changed, from their changelog records — each changed entity's rows are
 * replaced by what the store holds for it (every version), each new
 * snapshot's rows added — in one engine transaction. The store's own
 * reader catches up by itself, so when sys/head moved during the reads the
 * catch-up applies nothing and fails MR_ERR_CONFLICT (try again); after
 * CATALOG_FOLLOW_LIVE_TRIES such tries in a row it reads through a view
 * (store_open_view) instead, up to that view's head. Falls back to
 * catalog_reload when commit by commit cannot be exact: a batch without a
 * snapshot in the gap, a changelog record missing (past the window,
 * expired), a maintenance pass (expiry removes records the changelog does
 * not list), more than CATALOG_FOLLOW_MAX_GAP commits, or a failure
 * applying them. *reached gets the head the engine now holds; *reloaded
 * says which way it went; *nrows (may be NULL) the rows written.
 */
#define CATALOG_FOLLOW_MAX_GAP 256
#define CATALOG_FOLLOW_LIVE_TRIES 3
mr_status catalog_follow(catalog *c, store_head from, store_head to, store_head *reached,
                         size_t *nrows, bool *reloaded, mr_error *err) MR_MUST_CHECK;

/* Longest metadata schema name (PostgreSQL's NAMEDATALEN - 1). */
#define CATALOG_MAX_SCHEMA 63
/* The DuckDB schema the catalog's tables live in (DuckLake's METADATA_SCHEMA;
 * default public): catalog_load creates it and loads into it. Call before
 * catalog_load. MR_ERR_INVALID for an empty or too long name. */
mr_status catalog_set_schema(catalog *c, const char *schema, mr_error *err) MR_MUST_CHECK;

/* Registers the commit hooks on the engine (prepare + finished). */
void catalog_install_hooks(catalog *c);
/* The hooks catalog_install_hooks registers, for a caller that routes one
 * engine's commits to several catalogs (one per metadata schema). */
void catalog_hooks(catalog *c, sql_commit_hooks *out);

/* The prepare hook itself (exposed for tests). */
mr_status catalog_prepare(void *ctx, const sql_changes *changes, sql_error *err);

/* ---- the mapping table (exposed for tests and the docs) ----------------- */

typedef enum catalog_role {
  CAT_SNAPSHOT,         /* ducklake_snapshot -> snapshot record */
  CAT_SNAPSHOT_CHANGES, /* merged 1:1 into the snapshot record */
  CAT_ENTITY,           /* versioned kind: current/history */
  CAT_CHILD,            /* embedded rows of a parent record (field) */
  CAT_RECORD,           /* unversioned record: overwrite / delete */
  CAT_TAG,              /* entries of the tag container (field) */
  CAT_OPTION,           /* entries of the option record of its scope (field) */
  CAT_SCHEMA_VERSION,   /* schema_version subspace */
  CAT_INLINE_TABLES,    /* ducklake_inlined_data_tables -> inline/data_table */
} catalog_role;

#define CATALOG_MAX_COLS 20

typedef struct catalog_column {
  const char *name; /* DuckLake column name */
  const char *type; /* DuckDB type as in the DDL (BIGINT, VARCHAR, UUID, ...) */
  const ProtobufCFieldDescriptor *field; /* same-named field, NULL: a parent key
                                          * column of a child / option's scope */
} catalog_column;

typedef struct catalog_table {
  const char *name;   /* ducklake_* */
  catalog_role role;
  mr_key_kind kind;   /* the home kind (parent kind for children, tag, option) */
  const char *field;  /* CHILD/TAG/OPTION: the repeated field of the parent */
  const char *ddl;    /* DuckLake 1.0 CREATE TABLE as DuckLake runs it on moraine */
  const ProtobufCMessageDescriptor *msg; /* the message a row becomes */
  const ProtobufCFieldDescriptor *rep;   /* `field` in the home kind's message */
  size_t index;                          /* its position: catalog_table_at(index) */
  size_t ncols;
  catalog_column cols[CATALOG_MAX_COLS];
} catalog_table;

/* The 28 DuckLake v1.0 tables, resolved against the descriptors. */
size_t catalog_table_count(void);
const catalog_table *catalog_table_at(size_t i);
const catalog_table *catalog_table_find(const char *name);
/* The tables whose home is kind, in catalog_table_at order; *n of them. */
const catalog_table *const *catalog_tables_of_kind(mr_key_kind kind, size_t *n);

/*
 * Sets field f of message m from one cell in DuckDB's text form (or raw
 * bytes for BLOB-backed types); NULL clears an optional field. duck_type
 * says how to read the text (TIMESTAMP WITH TIME ZONE -> microseconds,
 * UUID -> 16 bytes). Fails MR_ERR_INVALID for text that does not parse or a
 * NULL in a required field.
 */
mr_status catalog_set_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const char *duck_type, const sql_value *v, mr_error *err) MR_MUST_CHECK;

/* The inverse: the cell of field f, without copying. text points into m
 * (string and bytes fields) or into buf (numbers, timestamps, UUIDs), so it
 * lives as long as both; it is NUL-terminated only in buf or for a string
 * field. An integer field (not a timestamp) also gives its value. */
typedef struct catalog_cell {
  const char *text; /* NULL: SQL NULL (the field is absent) */
  size_t len;
  bool has_int;
  int64_t int_value;
  char buf[160];
} catalog_cell;
mr_status catalog_get_field(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const char *duck_type, catalog_cell *out, mr_error *err) MR_MUST_CHECK;

#endif /* MR_CATALOG_H */
