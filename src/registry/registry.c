/*
 * registry.c — the catalogs one server serves (registry.h): a list of
 * entries, one per open catalog, each with its store, engine, catalog and
 * store watcher; sessions counted per entry; a reaper thread that closes
 * entries left without sessions for idle_ms, and retired ones (fenced,
 * or to be reloaded) as soon as their last session ends.
 *
 * Entry states: OPENING (one thread is opening it outside the lock; others
 * wanting it wait on the condition), OPEN, CLOSING (being closed outside
 * the lock; others wanting the same name wait, so two stores on one URL
 * are never open at once except a retired one being replaced).
 */
#include "registry/registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog/catalog.h"

typedef enum entry_state { ENTRY_OPENING, ENTRY_OPEN, ENTRY_CLOSING } entry_state;

typedef struct cat_entry {
  struct cat_entry *next;
  cat_registry *r;
  char name[CAT_REGISTRY_MAX_NAME + 1];
  char *url;
  entry_state state;
  bool pinned;  /* the default catalog: never closed while the server runs */
  bool retired; /* fenced or to be reloaded: no new sessions, close when unused */
  bool fenced;
  size_t sessions;
  uint64_t idle_since_ms; /* monotonic, when sessions last dropped to 0 */
  store *st;
  sql_engine *engine;
  catalog *cat;
  store_watch *watch;
} cat_entry;

struct cat_registry {
  cat_registry_config cfg;
  char *store_url, *default_database, *cache_dir, *server_version, *memory_limit;
  pthread_mutex_t mu;
  pthread_cond_t changed; /* an entry finished opening or closing */
  pthread_cond_t wake;    /* the reaper: something may be closable, or stop */
  bool stopping;
  bool reaper_started;
  pthread_t reaper;
  cat_entry *entries;
  size_t nopen;
  uint64_t opened_total;
};

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ---- naming --------------------------------------------------------------- */

mr_status cat_registry_encode(const char *name, char *out, size_t cap, mr_error *err) {
  size_t n = strlen(name), o = 0;
  if (n == 0 || n > CAT_REGISTRY_MAX_NAME)
    return mr_fail(err, MR_ERR_INVALID, "a database name must have 1 to %d bytes",
                   CAT_REGISTRY_MAX_NAME);
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)name[i];
    bool keep = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
    if (o + (keep ? 1 : 3) >= cap)
      return mr_fail(err, MR_ERR_INVALID, "encoded database name too long");
    if (keep) {
      out[o++] = (char)ch;
    } else {
      out[o++] = '-';
      out[o++] = hex[ch >> 4];
      out[o++] = hex[ch & 15];
    }
  }
  out[o] = '\0';
  return MR_OK;
}

mr_status cat_registry_store_url(const char *root, const char *default_database,
                                 const char *database, char *out, size_t cap, mr_error *err) {
  char enc[3 * CAT_REGISTRY_MAX_NAME + 1];
  if (cat_registry_encode(database, enc, sizeof enc, err) != MR_OK)
    return MR_ERR_INVALID;
  int n;
  if (strcmp(database, default_database) == 0) {
    n = snprintf(out, cap, "%s", root);
  } else {
    size_t len = strlen(root);
    /* "memory://" and "file://dir/" already end the root with a slash */
    const char *sep = len > 0 && root[len - 1] == '/' ? "" : "/";
    n = snprintf(out, cap, "%s%scatalogs/%s/public", root, sep, enc);
  }
  if (n < 0 || (size_t)n >= cap)
    return mr_fail(err, MR_ERR_INVALID, "store url too long for database \"%s\"", database);
  return MR_OK;
}

/* ---- opening and closing one catalog ------------------------------------ */

static void on_fenced(void *ctx);
static void on_reload(void *ctx);

/* Closes what entry e holds (outside the lock); the first error to err. */
static mr_status entry_shut(cat_entry *e, mr_error *err) {
  store_watch_stop(e->watch);
  e->watch = NULL;
  if (e->engine)
    sql_engine_set_commit_hooks(e->engine, NULL);
  catalog_free(e->cat);
  e->cat = NULL;
  if (e->engine)
    sql_engine_close(e->engine);
  e->engine = NULL;
  mr_status rc = store_close(e->st, err);
  e->st = NULL;
  return rc;
}

/* Does the catalog at url exist? (For create = false.) A reader opens only
 * a store that has been written; anything else is "no". */
static bool store_exists(cat_registry *r, const char *url) {
  struct stat sb; /* a folder store: no folder, no store (and none made) */
  if (strncmp(url, "file://", 7) == 0 && stat(url + 7, &sb) != 0)
    return false;
  store_options o = r->cfg.store_opts;
  o.read_only = true;
  store *st = NULL;
  mr_error err;
  if (store_open(url, &o, &st, &err) != MR_OK)
    return false;
  (void)store_close(st, &err);
  return true;
}

/* Opens store, engine and catalog of e (outside the lock). */
static mr_status entry_load(cat_registry *r, cat_entry *e, bool must_exist, sql_error *err) {
  if (must_exist && !store_exists(r, e->url))
    return sql_fail(err, MR_ERR_NOT_FOUND, "3D000", "database \"%s\" does not exist", e->name);
  fprintf(stderr, "moraine: opening catalog \"%s\" from %s\n", e->name, e->url);
  uint64_t t0 = now_ms();
  mr_error me;
  if (store_open(e->url, &r->cfg.store_opts, &e->st, &me) != MR_OK)
    return sql_fail(err, me.code, "57P03", "cannot open the store of database \"%s\": %s", e->name,
                    me.msg);
  sql_error se;
  if (sql_engine_open(&r->cfg.engine_opts, &e->engine, &se) != MR_OK) {
    sql_fail(err, se.base.code, "53000", "database \"%s\": cannot start the SQL engine: %s",
             e->name, se.base.msg);
    (void)entry_shut(e, &me);
    return err->base.code;
  }
  size_t rows = 0;
  if (catalog_open(e->st, e->engine, &e->cat, &me) != MR_OK ||
      catalog_load(e->cat, &rows, &me) != MR_OK) {
    sql_fail(err, me.code, "XX000", "cannot load the catalog of database \"%s\": %s", e->name,
             me.msg);
    mr_error ignored;
    (void)entry_shut(e, &ignored);
    return err->base.code;
  }
  catalog_install_hooks(e->cat);
  store_watch_hooks h = {on_fenced, on_reload, e};
  if (e->pinned)
    h = r->cfg.default_hooks;
  if (store_watch_start(e->st, 1000, &h, &e->watch, &me) != MR_OK)
    fprintf(stderr, "moraine: catalog \"%s\": %s (the store is not watched)\n", e->name, me.msg);
  fprintf(stderr, "moraine: opened catalog \"%s\": %zu rows in %llu ms\n", e->name, rows,
          (unsigned long long)(now_ms() - t0));
  return MR_OK;
}

/* Unlinks e from the list (lock held). */
static void entry_unlink(cat_registry *r, cat_entry *e) {
  for (cat_entry **p = &r->entries; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      return;
    }
}

static void entry_free(cat_entry *e) {
  if (e) {
    free(e->url);
    free(e);
  }
}

/* Closes e, which the caller marked CLOSING (lock not held). */
static void entry_close(cat_registry *r, cat_entry *e, const char *why) {
  mr_error err;
  if (entry_shut(e, &err) != MR_OK && !e->fenced)
    fprintf(stderr, "moraine: closing catalog \"%s\": %s\n", e->name, err.msg);
  fprintf(stderr, "moraine: closed catalog \"%s\" (%s)\n", e->name, why);
  pthread_mutex_lock(&r->mu);
  entry_unlink(r, e);
  r->nopen--;
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->mu);
  entry_free(e);
}

/* The watcher's hooks for a catalog other than the default. */
static void retire(cat_entry *e, bool fenced) {
  cat_registry *r = e->r;
  pthread_mutex_lock(&r->mu);
  e->retired = true;
  e->fenced = e->fenced || fenced;
  pthread_cond_signal(&r->wake);
  pthread_mutex_unlock(&r->mu);
  fprintf(stderr, "moraine: catalog \"%s\" %s\n", e->name,
          fenced ? "was taken over by another server: closing it once its sessions end"
                 : "is behind its store: reopening it for new sessions");
}

static void on_fenced(void *ctx) {
  retire(ctx, true);
}

static void on_reload(void *ctx) {
  retire(ctx, false);
}

/* ---- the reaper ------------------------------------------------------- */

/* Picks one entry to close now and marks it CLOSING (lock held). */
static cat_entry *closable(cat_registry *r, uint64_t now, const char **why) {
  for (cat_entry *e = r->entries; e; e = e->next) {
    if (e->state != ENTRY_OPEN || e->sessions > 0 || e->pinned)
      continue;
    if (e->retired || now - e->idle_since_ms >= r->cfg.idle_ms) {
      *why = e->fenced ? "taken over by another server" : e->retired ? "reloaded" : "idle";
      e->state = ENTRY_CLOSING;
      return e;
    }
  }
  return NULL;
}

size_t cat_registry_reap(cat_registry *r) {
  size_t n = 0;
  for (;;) {
    const char *why = NULL;
    pthread_mutex_lock(&r->mu);
    cat_entry *e = closable(r, now_ms(), &why);
    pthread_mutex_unlock(&r->mu);
    if (e == NULL)
      return n;
    entry_close(r, e, why);
    n++;
  }
}

static void *reaper_main(void *arg) {
  cat_registry *r = arg;
  uint64_t tick = r->cfg.idle_ms / 4;
  if (tick < 50)
    tick = 50;
  if (tick > 1000)
    tick = 1000;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    if (!r->stopping) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += (time_t)(tick / 1000);
      until.tv_nsec += (long)(tick % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&r->wake, &r->mu, &until);
    }
    bool stop = r->stopping;
    pthread_mutex_unlock(&r->mu);
    if (stop)
      return NULL;
    (void)cat_registry_reap(r);
  }
}

/* ---- sessions --------------------------------------------------------- */

static cat_entry *find(cat_registry *r, const char *name, bool *fenced_one) {
  *fenced_one = false;
  for (cat_entry *e = r->entries; e; e = e->next) {
    if (strcmp(e->name, name) != 0)
      continue;
    if (!e->retired || e->state == ENTRY_CLOSING)
      return e;
    if (e->fenced)
      *fenced_one = true;
  }
  return NULL;
}

/* Takes a session slot on name's entry, opening it if needed. */
static mr_status acquire(cat_registry *r, const char *name, cat_entry **out, sql_error *err) {
  pthread_mutex_lock(&r->mu);
  for (;;) {
    if (r->stopping) {
      pthread_mutex_unlock(&r->mu);
      return sql_fail(err, MR_ERR_CLOSED, "57P01", "the server is shutting down");
    }
    bool fenced_one;
    cat_entry *e = find(r, name, &fenced_one);
    if (e && e->state == ENTRY_OPEN) {
      e->sessions++;
      pthread_mutex_unlock(&r->mu);
      *out = e;
      return MR_OK;
    }
    if (e) { /* opening or closing: wait for it */
      pthread_cond_wait(&r->changed, &r->mu);
      continue;
    }
    if (fenced_one) {
      pthread_mutex_unlock(&r->mu);
      return sql_fail(err, MR_ERR_FENCED, "57P03",
                      "database \"%s\" was taken over by another server; it can be opened "
                      "again once its open sessions end",
                      name);
    }
    break;
  }
  cat_entry *e = calloc(1, sizeof *e);
  char url[4096];
  mr_error me;
  if (e == NULL) {
    pthread_mutex_unlock(&r->mu);
    return sql_fail(err, MR_ERR_NOMEM, "53200", "out of memory");
  }
  if (cat_registry_store_url(r->store_url, r->default_database, name, url, sizeof url, &me) !=
          MR_OK ||
      (e->url = strdup(url)) == NULL) {
    pthread_mutex_unlock(&r->mu);
    free(e);
    return sql_fail(err, MR_ERR_INVALID, "3D000", "database \"%s\": %s", name, me.msg);
  }
  snprintf(e->name, sizeof e->name, "%s", name);
  e->r = r;
  e->state = ENTRY_OPENING;
  e->sessions = 1;
  e->pinned = strcmp(name, r->default_database) == 0;
  e->next = r->entries;
  r->entries = e;
  r->nopen++;
  pthread_mutex_unlock(&r->mu);

  mr_status rc = entry_load(r, e, !r->cfg.create && !e->pinned, err);
  pthread_mutex_lock(&r->mu);
  if (rc != MR_OK) {
    entry_unlink(r, e);
    r->nopen--;
  } else {
    e->state = ENTRY_OPEN;
    r->opened_total++;
  }
  pthread_cond_broadcast(&r->changed);
  pthread_mutex_unlock(&r->mu);
  if (rc != MR_OK) {
    entry_free(e);
    return rc;
  }
  *out = e;
  return MR_OK;
}

static void release(cat_registry *r, cat_entry *e) {
  pthread_mutex_lock(&r->mu);
  if (--e->sessions == 0) {
    e->idle_since_ms = now_ms();
    if (e->retired)
      pthread_cond_signal(&r->wake);
  }
  pthread_mutex_unlock(&r->mu);
}

mr_status cat_registry_session_open(void *ctx, const char *user, const char *database,
                                    sql_session **out, void **handle, sql_error *err) {
  cat_registry *r = ctx;
  *out = NULL;
  *handle = NULL;
  if (database[0] == '\0' || strlen(database) > CAT_REGISTRY_MAX_NAME)
    return sql_fail(err, MR_ERR_INVALID, "42602", "invalid database name \"%s\"", database);
  cat_entry *e;
  if (acquire(r, database, &e, err) != MR_OK)
    return err->base.code;
  if (sql_session_open(e->engine, user, database, out, err) != MR_OK) {
    release(r, e);
    return err->base.code;
  }
  *handle = e;
  return MR_OK;
}

void cat_registry_session_close(void *ctx, sql_session *s, void *handle) {
  sql_session_close(s);
  if (handle)
    release(ctx, handle);
}

/* ---- the registry ----------------------------------------------------- */

static char *dup_or_null(const char *s, bool *failed) {
  if (s == NULL)
    return NULL;
  char *d = strdup(s);
  if (d == NULL)
    *failed = true;
  return d;
}

mr_status cat_registry_open(const cat_registry_config *cfg, cat_registry **out, mr_error *err) {
  *out = NULL;
  char enc[3 * CAT_REGISTRY_MAX_NAME + 1];
  if (cat_registry_encode(cfg->default_database, enc, sizeof enc, err) != MR_OK)
    return MR_ERR_INVALID;
  cat_registry *r = calloc(1, sizeof *r);
  if (r == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  bool failed = false;
  r->cfg = *cfg;
  r->store_url = dup_or_null(cfg->store_url, &failed);
  r->default_database = dup_or_null(cfg->default_database, &failed);
  r->cache_dir = dup_or_null(cfg->store_opts.cache_dir, &failed);
  r->server_version = dup_or_null(cfg->engine_opts.server_version, &failed);
  r->memory_limit = dup_or_null(cfg->engine_opts.memory_limit, &failed);
  r->cfg.store_url = r->store_url;
  r->cfg.default_database = r->default_database;
  r->cfg.store_opts.cache_dir = r->cache_dir;
  r->cfg.engine_opts.server_version = r->server_version;
  r->cfg.engine_opts.memory_limit = r->memory_limit;
  if (r->cfg.idle_ms == 0)
    r->cfg.idle_ms = CAT_REGISTRY_DEFAULT_IDLE_MS;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->changed, NULL);
  pthread_cond_init(&r->wake, NULL);
  if (failed) {
    mr_error ignored;
    (void)cat_registry_close(r, &ignored);
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  }
  cat_entry *e;
  sql_error se;
  if (acquire(r, r->default_database, &e, &se) != MR_OK) {
    mr_fail(err, se.base.code, "%s", se.base.msg);
    mr_error ignored;
    (void)cat_registry_close(r, &ignored);
    return err->code;
  }
  release(r, e);
  int prc = pthread_create(&r->reaper, NULL, reaper_main, r);
  if (prc != 0) {
    mr_error ignored;
    (void)cat_registry_close(r, &ignored);
    return mr_fail(err, MR_ERR_IO, "cannot start the catalog reaper: %s", strerror(prc));
  }
  r->reaper_started = true;
  *out = r;
  return MR_OK;
}

mr_status cat_registry_close(cat_registry *r, mr_error *err) {
  if (r == NULL)
    return MR_OK;
  pthread_mutex_lock(&r->mu);
  r->stopping = true;
  pthread_cond_broadcast(&r->wake);
  pthread_mutex_unlock(&r->mu);
  if (r->reaper_started)
    pthread_join(r->reaper, NULL);
  mr_status rc = MR_OK;
  while (r->entries) {
    cat_entry *e = r->entries;
    r->entries = e->next;
    mr_error cerr;
    if (entry_shut(e, &cerr) != MR_OK && rc == MR_OK && !e->fenced)
      rc = mr_fail(err, cerr.code, "catalog \"%s\": %s", e->name, cerr.msg);
    if (!e->pinned)
      fprintf(stderr, "moraine: closed catalog \"%s\" (server stop)\n", e->name);
    entry_free(e);
  }
  pthread_cond_destroy(&r->wake);
  pthread_cond_destroy(&r->changed);
  pthread_mutex_destroy(&r->mu);
  free(r->store_url);
  free(r->default_database);
  free(r->cache_dir);
  free(r->server_version);
  free(r->memory_limit);
  free(r);
  return rc;
}

size_t cat_registry_open_count(cat_registry *r) {
  pthread_mutex_lock(&r->mu);
  size_t n = r->nopen;
  pthread_mutex_unlock(&r->mu);
  return n;
}

uint64_t cat_registry_opened_total(cat_registry *r) {
  pthread_mutex_lock(&r->mu);
  uint64_t n = r->opened_total;
  pthread_mutex_unlock(&r->mu);
  return n;
}
