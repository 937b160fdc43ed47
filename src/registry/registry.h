/*
 * registry.h — the catalogs one server serves. A catalog is named by
 * (database, metadata schema): the client's startup `database`, and the
 * DuckLake METADATA_SCHEMA its tables live in (default public). Each is its
 * own RFC 0002 store (its own SlateDB under the server's store root, its
 * own fencing and head) with its own catalog object; the metadata schemas
 * of one database share that database's embedded SQL engine, which hosts
 * each as a DuckDB schema and routes each transaction's captured changes to
 * the store of the one schema it writes (a transaction writing two is
 * refused, 0A000). A database's engine and stores open on demand and close
 * when no session has used it for idle_ms (docs/catalogs.md).
 *
 * Layout under the store root R (cat_registry_store_url):
 *   (default database, public)  R itself (the single-catalog layout of
 *                               earlier releases: such a store keeps
 *                               working as the default database's catalog)
 *   any other (D, S)            R/catalogs/<enc(D)>/<enc(S)>
 * A database's metadata schemas are found when it opens by listing
 * R/catalogs/<enc(D)>/ (a directory read, or one object-store LIST), or
 * for memory:// from what this process created.
 * enc keeps a-z, 0-9 and '_' and writes every other byte as '-' and two
 * lowercase hex digits ("Lake.2" -> "-4cake-2e2"), so names never collide,
 * never differ only by case, and are safe in every object store.
 *
 * Threads: sessions are opened and closed from connection threads at once.
 * The registry's mutex is held only to find, count or mark entries, never
 * during I/O, so opening, loading or closing one catalog never holds up
 * sessions of another; sessions of one catalog wait only for that catalog
 * to finish opening (or closing). A reaper thread closes idle catalogs.
 *
 * Faults, per catalog (the default catalog's go to the server's hooks
 * instead, which stop the server as a single-catalog server did):
 *  - fenced (another server took the store over): the catalog takes no new
 *    sessions (57P03) and closes once its open sessions end; a later
 *    session opens it again, taking the store back.
 *  - reload (the store holds commits the engine lacks): the catalog is
 *    retired; new sessions open it afresh (a new load), the old one closes
 *    when its sessions end.
 *
 * Ownership: cat_registry_close closes every catalog; call it after the
 * last session is closed.
 */
#ifndef MR_REGISTRY_H
#define MR_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"
#include "sql/sql.h"
#include "store/store.h"

typedef struct cat_registry cat_registry;

/* Default idle timeout: a catalog without sessions this long is closed. */
#define CAT_REGISTRY_DEFAULT_IDLE_MS 60000
/* Longest database name accepted (PostgreSQL's NAMEDATALEN - 1). */
#define CAT_REGISTRY_MAX_NAME 63
/* The folder under the store root that holds every other catalog's store. */
#define CAT_REGISTRY_CATALOGS_FOLDER "catalogs"

typedef struct cat_registry_config {
  const char *store_url;        /* the --store root */
  const char *default_database; /* its catalog is the root store itself */
  bool create;                  /* open unknown databases as new, empty catalogs;
                                 * false: refuse them (3D000) */
  uint64_t idle_ms;             /* close a catalog unused this long (0: default) */
  store_options store_opts;     /* cache_dir etc. for every catalog's store */
  sql_engine_options engine_opts;
  /* The default catalog's store watcher hooks (the server's own). */
  store_watch_hooks default_hooks;
  /* A read replica: stores open read-only (store_opts.read_only must be
   * set, create off) and each catalog's watcher follows the writer every
   * follow_ms, applying the writer's new commits (catalog_follow). */
  bool replica;
  unsigned follow_ms;
  /* Snapshots each catalog keeps in the engine below its head; older ones
   * and ended file versions load when a statement reads them (catalog.h). */
  uint64_t snapshot_tail;
  bool history_on_demand; /* false: every load materializes all history */
} cat_registry_config;

/*
 * Opens the registry and, at once, the default database's catalog (kept
 * open for the server's life): a store that cannot be opened or loaded
 * fails here, as a single-catalog server's start did. *out: cat_registry_close.
 */
mr_status cat_registry_open(const cat_registry_config *cfg, cat_registry **out,
                            mr_error *err) MR_MUST_CHECK;
/* Closes every catalog (stopping watchers, closing engines and stores) and
 * frees r; the first store close error, if any, is returned. NULL: no-op. */
mr_status cat_registry_close(cat_registry *r, mr_error *err);

/*
 * A session on `database`'s catalog, opening the catalog when needed.
 * Refusals: 3D000 (unknown database and create is off), 42602 (a name that
 * is empty or too long), 57P03 (the catalog was taken over by another
 * server and still has sessions), or why the catalog could not open.
 * Fits pg_session_source.open (ctx = the registry).
 */
mr_status cat_registry_session_open(void *ctx, const char *user, const char *database,
                                    sql_session **out, void **handle,
                                    sql_error *err) MR_MUST_CHECK;
/* Closes a session from cat_registry_session_open. Fits pg_session_source.close. */
void cat_registry_session_close(void *ctx, sql_session *s, void *handle);

/* Catalogs open now (the default one included), and opened since start. */
size_t cat_registry_open_count(cat_registry *r);
uint64_t cat_registry_opened_total(cat_registry *r);

/* Closes every catalog without sessions whose idle time has passed, now
 * (the reaper does this by itself; for tests). Returns how many closed. */
size_t cat_registry_reap(cat_registry *r);

/* ---- naming (exposed for tests and the docs) --------------------------- */

/* enc(name) into out (at most 3 * CAT_REGISTRY_MAX_NAME + 1 bytes needed). */
mr_status cat_registry_encode(const char *name, char *out, size_t cap, mr_error *err) MR_MUST_CHECK;

/* The inverse of enc; MR_ERR_INVALID for text enc never writes. */
mr_status cat_registry_decode(const char *enc, char *out, size_t cap, mr_error *err) MR_MUST_CHECK;

/* The store URL of the catalog of (database, metadata schema) under root
 * (see the layout above). */
mr_status cat_registry_store_url(const char *root, const char *default_database,
                                 const char *database, const char *schema, char *out, size_t cap,
                                 mr_error *err) MR_MUST_CHECK;

#endif /* MR_REGISTRY_H */
