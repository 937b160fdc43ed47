/*
 * registry.c — the catalogs one server serves (registry.h): a list of
 * entries, one per open database, each with its SQL engine and, per
 * metadata schema, a store, catalog and store watcher; the commit router
 * that sends each transaction to its schema's catalog; sessions counted per
 * entry; a reaper thread that closes entries left without sessions for
 * idle_ms, and retired ones (fenced, or to be reloaded) as soon as their
 * last session ends.
 *
 * Entry states: OPENING (one thread is opening it outside the lock; others
 * wanting it wait on the condition), OPEN, CLOSING (being closed outside
 * the lock; others wanting the same name wait, so two stores on one URL
 * are never open at once except a retired one being replaced).
 */
#include "registry/registry.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog/catalog.h"
#include "kv/kv.h"

/* A replica's catch-up that takes this long is logged. */
enum { REPLICA_SLOW_MS = 1000 };

typedef enum entry_state { ENTRY_OPENING, ENTRY_OPEN, ENTRY_CLOSING } entry_state;

/* One metadata schema of a database: its own store and catalog, its tables
 * in the database's engine under that schema's name. */
typedef struct cat_schema {
  char name[CAT_REGISTRY_MAX_NAME + 1];
  store *st;
  catalog *cat;
  store_watch *watch;
  sql_commit_hooks hooks; /* its catalog's */
  uint64_t last_seq;      /* the engine's commit count just after this
                           * schema's last commit (0: none since open) */
} cat_schema;

typedef struct cat_entry {
  struct cat_entry *next;
  cat_registry *r;
  char name[CAT_REGISTRY_MAX_NAME + 1];
  entry_state state;
  bool pinned;  /* the default catalog: never closed while the server runs */
  bool retired; /* fenced or to be reloaded: no new sessions, close when unused */
  bool fenced;
  size_t sessions;
  uint64_t idle_since_ms; /* monotonic, when sessions last dropped to 0 */
  sql_engine *engine;
  /* [0] is public; others are added at open (found in the store) or by the
   * first commit to a new metadata schema, under the engine's commit lock */
  cat_schema *schemas;
  size_t nschemas, cap;
  sql_commit_hooks known; /* public's, for known_table: sessions ask it
                           * outside the commit lock, while schemas may grow */
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
  /* memory:// roots cannot be listed: the metadata schemas created in this
   * process, "database\0schema" each (memory stores live as long) */
  char **memory_schemas;
  size_t nmemory_schemas;
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

mr_status cat_registry_decode(const char *enc, char *out, size_t cap, mr_error *err) {
  size_t o = 0;
  for (const char *p = enc; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == '-') {
      int v = 0;
      for (int i = 1; i <= 2; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
        if (d < 0)
          return mr_fail(err, MR_ERR_INVALID, "not an encoded name: \"%s\"", enc);
        v = v * 16 + d;
      }
      ch = (unsigned char)v;
      p += 2;
      /* a byte enc keeps never comes escaped: one name, one encoding */
      if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '\0')
        return mr_fail(err, MR_ERR_INVALID, "not an encoded name: \"%s\"", enc);
    } else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) {
      return mr_fail(err, MR_ERR_INVALID, "not an encoded name: \"%s\"", enc);
    }
    if (o + 1 >= cap || o >= CAT_REGISTRY_MAX_NAME)
      return mr_fail(err, MR_ERR_INVALID, "encoded name too long: \"%s\"", enc);
    out[o++] = (char)ch;
  }
  if (o == 0)
    return mr_fail(err, MR_ERR_INVALID, "empty encoded name");
  out[o] = '\0';
  return MR_OK;
}

/* root + "/" CAT_REGISTRY_CATALOGS_FOLDER "/<enc(database)>" (no slash doubled). */
static mr_status database_prefix(const char *root, const char *database, char *out, size_t cap,
                                 mr_error *err) {
  char enc[3 * CAT_REGISTRY_MAX_NAME + 1];
  if (cat_registry_encode(database, enc, sizeof enc, err) != MR_OK)
    return MR_ERR_INVALID;
  size_t len = strlen(root);
  /* "memory://" and "file://dir/" already end the root with a slash */
  const char *sep = len > 0 && root[len - 1] == '/' ? "" : "/";
  int n = snprintf(out, cap, "%s%s" CAT_REGISTRY_CATALOGS_FOLDER "/%s", root, sep, enc);
  if (n < 0 || (size_t)n >= cap)
    return mr_fail(err, MR_ERR_INVALID, "store url too long for database \"%s\"", database);
  return MR_OK;
}

mr_status cat_registry_store_url(const char *root, const char *default_database,
                                 const char *database, const char *schema, char *out, size_t cap,
                                 mr_error *err) {
  char enc[3 * CAT_REGISTRY_MAX_NAME + 1];
  if (cat_registry_encode(database, enc, sizeof enc, err) != MR_OK ||
      cat_registry_encode(schema, enc, sizeof enc, err) != MR_OK)
    return MR_ERR_INVALID;
  if (strcmp(database, default_database) == 0 && strcmp(schema, "public") == 0) {
    int n = snprintf(out, cap, "%s", root);
    if (n < 0 || (size_t)n >= cap)
      return mr_fail(err, MR_ERR_INVALID, "store url too long");
    return MR_OK;
  }
  if (database_prefix(root, database, out, cap, err) != MR_OK)
    return MR_ERR_INVALID;
  size_t len = strlen(out);
  int n = snprintf(out + len, cap - len, "/%s", enc);
  if (n < 0 || (size_t)n >= cap - len)
    return mr_fail(err, MR_ERR_INVALID, "store url too long for database \"%s\"", database);
  return MR_OK;
}

/* ---- opening and closing one catalog ------------------------------------ */

static void on_fenced(void *ctx);
static void on_reload(void *ctx);

static void schema_shut(cat_schema *s, mr_error *err, mr_status *rc) {
  store_watch_stop(s->watch);
  s->watch = NULL;
  catalog_free(s->cat);
  s->cat = NULL;
  mr_error e;
  mr_status src = store_close(s->st, &e);
  s->st = NULL;
  if (src != MR_OK && *rc == MR_OK) {
    *rc = src;
    *err = e;
  }
}

/* Closes what entry e holds (outside the lock); the first error to err. */
static mr_status entry_shut(cat_entry *e, mr_error *err) {
  mr_status rc = MR_OK;
  if (e->engine) /* its refresher may call route_history, which reads the catalogs */
    sql_engine_stop_background(e->engine);
  for (size_t i = 0; i < e->nschemas; i++) { /* watchers first: no hook runs later */
    store_watch_stop(e->schemas[i].watch);
    e->schemas[i].watch = NULL;
  }
  if (e->engine)
    sql_engine_set_commit_hooks(e->engine, NULL);
  for (size_t i = 0; i < e->nschemas; i++) {
    catalog_free(e->schemas[i].cat);
    e->schemas[i].cat = NULL;
  }
  if (e->engine)
    sql_engine_close(e->engine);
  e->engine = NULL;
  for (size_t i = 0; i < e->nschemas; i++)
    schema_shut(&e->schemas[i], err, &rc);
  free(e->schemas);
  e->schemas = NULL;
  e->nschemas = e->cap = 0;
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

static mr_status count_one(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  (*(size_t *)ctx)++;
  return MR_ERR_NOT_FOUND; /* one is enough */
}

/* Does st hold a DuckLake catalog (a snapshot)? */
static mr_status store_has_snapshot(store *st, bool *yes, mr_error *err) {
  size_t n = 0;
  mr_status rc = store_list_snapshots(st, count_one, &n, err);
  if (rc == MR_ERR_NOT_FOUND && n > 0)
    rc = MR_OK;
  *yes = n > 0;
  return rc;
}

/* A replica's watcher saw the writer's head move: catch the catalog up
 * (ctx: the catalog; catalog_follow). Logged when slow; a failure is
 * retried by the watcher from the same head. */
static mr_status on_advanced(void *ctx, store_head from, store_head to, store_head *reached,
                             mr_error *err) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t rows = 0;
  bool reloaded = false;
  mr_status rc = catalog_follow(ctx, from, to, reached, &rows, &reloaded, err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long long ms = (t1.tv_sec - t0.tv_sec) * 1000LL + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  if (rc == MR_OK && ms >= REPLICA_SLOW_MS)
    fprintf(stderr, "moraine: replica: caught up from snapshot %llu to %llu in %lld ms (%zu rows%s)\n",
            (unsigned long long)from.snapshot_id, (unsigned long long)reached->snapshot_id, ms, rows,
            reloaded ? ", catalog reloaded" : "");
  return rc;
}

/* Opens the store of schema `name` of e and its catalog (loaded when load),
 * watched; appends it to e->schemas. */
static mr_status schema_open(cat_registry *r, cat_entry *e, const char *name, bool load,
                             size_t *rows, sql_error *err) {
  char url[4096];
  mr_error me;
  if (e->nschemas == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 2;
    cat_schema *v = realloc(e->schemas, cap * sizeof *v);
    if (v == NULL)
      return sql_fail(err, MR_ERR_NOMEM, "53200", "out of memory");
    e->schemas = v;
    e->cap = cap;
  }
  if (cat_registry_store_url(r->store_url, r->default_database, e->name, name, url, sizeof url,
                             &me) != MR_OK)
    return sql_fail(err, MR_ERR_INVALID, "42602", "database \"%s\", schema \"%s\": %s", e->name,
                    name, me.msg);
  cat_schema *s = &e->schemas[e->nschemas];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  if (store_open(url, &r->cfg.store_opts, &s->st, &me) != MR_OK)
    return sql_fail(err, me.code, "57P03", "cannot open the store %s: %s", url, me.msg);
  if (load && strcmp(name, "public") == 0) /* a failed start stays one line */
    fprintf(stderr, "moraine: opening catalog \"%s\" from %s\n", e->name, url);
  mr_status rc = MR_OK;
  if (!load) { /* a schema new to this engine must be new to the store too */
    bool has = false;
    rc = store_has_snapshot(s->st, &has, &me);
    if (rc == MR_OK && has)
      rc = mr_fail(&me, MR_ERR_CONFLICT,
                   "the store %s already holds the catalog of metadata schema \"%s\" but this "
                   "server has not loaded it; reconnect to load it",
                   url, name);
  }
  if (rc == MR_OK)
    rc = catalog_open(s->st, e->engine, &s->cat, &me);
  if (rc == MR_OK)
    catalog_set_lazy_history(s->cat, r->cfg.history_on_demand, r->cfg.snapshot_tail);
  if (rc == MR_OK) /* a replica's follower changes rows behind the loads */
    catalog_set_lazy_current_inline(s->cat, r->cfg.history_on_demand && !r->cfg.replica);
  if (rc == MR_OK && strcmp(name, "public") != 0)
    rc = catalog_set_schema(s->cat, name, &me);
  if (rc == MR_OK && load) /* a replica's store moves under its reader: load from a view */
    rc = r->cfg.replica ? catalog_reload(s->cat, NULL, rows, &me) : catalog_load(s->cat, rows, &me);
  if (rc != MR_OK) {
    sql_fail(err, me.code, me.code == MR_ERR_CONFLICT ? "55000" : "XX000",
             "cannot load the catalog of database \"%s\" (metadata schema \"%s\"): %s", e->name,
             name, me.msg);
    mr_error ignored;
    mr_status irc = MR_OK;
    schema_shut(s, &ignored, &irc);
    return err->base.code;
  }
  catalog_hooks(s->cat, &s->hooks);
  store_watch_hooks h = {on_fenced, on_reload, e, NULL};
  if (e->pinned)
    h = r->cfg.default_hooks;
  unsigned interval = 1000;
  if (r->cfg.replica) { /* a reader's watcher follows the writer instead */
    h = (store_watch_hooks){NULL, NULL, s->cat, on_advanced};
    interval = r->cfg.follow_ms;
  }
  if (store_watch_start(s->st, interval, &h, &s->watch, &me) != MR_OK)
    fprintf(stderr, "moraine: catalog \"%s\" (schema \"%s\"): %s (the store is not watched)\n",
            e->name, name, me.msg);
  e->nschemas++;
  if (strncmp(url, "memory://", 9) == 0 && strcmp(name, "public") != 0) {
    /* remember it: memory stores cannot be listed (lock: see memory_note) */
    pthread_mutex_lock(&r->mu);
    char **v = realloc(r->memory_schemas, (r->nmemory_schemas + 1) * sizeof *v);
    size_t dl = strlen(e->name), sl = strlen(name);
    char *note = v ? malloc(dl + sl + 2) : NULL;
    if (v)
      r->memory_schemas = v;
    if (note) {
      memcpy(note, e->name, dl + 1);
      memcpy(note + dl + 1, name, sl + 1);
      bool seen = false;
      for (size_t i = 0; i < r->nmemory_schemas && !seen; i++)
        seen = strcmp(r->memory_schemas[i], e->name) == 0 &&
               strcmp(r->memory_schemas[i] + dl + 1, name) == 0;
      if (seen)
        free(note);
      else
        r->memory_schemas[r->nmemory_schemas++] = note;
    }
    pthread_mutex_unlock(&r->mu);
  }
  return MR_OK;
}

/* Appends the decoded folder name enc to the list (skipping what enc never
 * writes, and public). */
static mr_status add_schema(const char *enc, char ***out, size_t *n, size_t *cap, mr_error *err) {
  char name[CAT_REGISTRY_MAX_NAME + 1];
  mr_error ignored;
  if (cat_registry_decode(enc, name, sizeof name, &ignored) != MR_OK ||
      strcmp(name, "public") == 0)
    return MR_OK;
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 4;
    char **v = realloc(*out, c * sizeof *v);
    if (v == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "out of memory");
    *out = v;
    *cap = c;
  }
  if (((*out)[*n] = strdup(name)) == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  (*n)++;
  return MR_OK;
}

/* The metadata schemas other than public that e's store root holds: the
 * folders under catalogs/<enc(D)>/ (a directory read for file://, one LIST
 * for object stores), or those created in this process (memory://). */
static mr_status list_schemas(cat_registry *r, cat_entry *e, char ***out, size_t *n,
                              mr_error *err) {
  *out = NULL;
  *n = 0;
  char prefix[4096];
  if (database_prefix(r->store_url, e->name, prefix, sizeof prefix, err) != MR_OK)
    return MR_ERR_INVALID;
  size_t cap = 0;
  bool file = strncmp(prefix, "file://", 7) == 0, memory = strncmp(prefix, "memory://", 9) == 0;
  if (!file && !memory) {
    char *text = NULL;
    mr_status rc = kv_list_folders(prefix, &text, err);
    for (char *p = text, *nl; rc == MR_OK && p && (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
      *nl = '\0';
      rc = add_schema(p, out, n, &cap, err);
    }
    kv_free(text);
    return rc;
  }
  if (strncmp(prefix, "file://", 7) == 0) {
    DIR *d = opendir(prefix + 7);
    if (d == NULL)
      return MR_OK;
    struct dirent *de;
    mr_status rc = MR_OK;
    while (rc == MR_OK && (de = readdir(d)) != NULL)
      rc = add_schema(de->d_name, out, n, &cap, err);
    closedir(d);
    return rc;
  }
  if (strncmp(prefix, "memory://", 9) == 0) {
    pthread_mutex_lock(&r->mu);
    mr_status rc = MR_OK;
    size_t dl = strlen(e->name);
    char enc[3 * CAT_REGISTRY_MAX_NAME + 1];
    for (size_t i = 0; rc == MR_OK && i < r->nmemory_schemas; i++)
      if (strcmp(r->memory_schemas[i], e->name) == 0 &&
          cat_registry_encode(r->memory_schemas[i] + dl + 1, enc, sizeof enc, err) == MR_OK)
        rc = add_schema(enc, out, n, &cap, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
  }
  return MR_OK;
}

static void names_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

/* ---- one engine, many metadata schemas: routing commits ---------------- */

/* The one metadata schema a change set writes; NULL (err set) when it
 * writes two, "public" when it names none. */
static const char *changes_schema(const sql_changes *ch, sql_error *err) {
  const char *one = NULL;
  for (size_t i = 0; i < ch->nbatches; i++) {
    const char *s = ch->batches[i].schema ? ch->batches[i].schema : "public";
    if (one && strcmp(one, s) != 0) {
      sql_fail(err, MR_ERR_INVALID, "0A000",
               "a transaction may write the DuckLake catalog of one metadata schema only; "
               "this one writes \"%s\" and \"%s\"",
               one, s);
      return NULL;
    }
    one = s;
  }
  return one ? one : "public";
}

static cat_schema *schema_find(cat_entry *e, const char *name) {
  for (size_t i = 0; i < e->nschemas; i++)
    if (strcmp(e->schemas[i].name, name) == 0)
      return &e->schemas[i];
  return NULL;
}

static mr_status route_prepare(void *ctx, const sql_changes *changes, sql_error *err) {
  cat_entry *e = ctx;
  const char *name = changes_schema(changes, err);
  if (name == NULL)
    return err->base.code;
  cat_schema *s = schema_find(e, name);
  if (s == NULL) { /* a new metadata schema: its own new store */
    if (strlen(name) > CAT_REGISTRY_MAX_NAME)
      return sql_fail(err, MR_ERR_INVALID, "42602", "metadata schema name too long");
    if (schema_open(e->r, e, name, false, NULL, err) != MR_OK)
      return err->base.code;
    fprintf(stderr, "moraine: catalog \"%s\": new metadata schema \"%s\"\n", e->name, name);
    s = &e->schemas[e->nschemas - 1];
  }
  /* Conflicts are per catalog: commits to the engine's other metadata
   * schemas since this transaction began do not touch this one (DuckDB
   * still refuses a write-write conflict on the same rows). sql.h's seqs
   * count the engine's commits, one per hook-accepted commit. */
  sql_changes mine = *changes;
  if (s->last_seq <= changes->begin_seq)
    mine.begin_seq = mine.commit_seq;
  return s->hooks.prepare(s->hooks.ctx, &mine, err);
}

static void route_finished(void *ctx, const sql_changes *changes, bool committed) {
  cat_entry *e = ctx;
  sql_error ignored;
  const char *name = changes_schema(changes, &ignored);
  cat_schema *s = name ? schema_find(e, name) : NULL;
  if (s && committed)
    s->last_seq = changes->commit_seq + 1;
  if (s && s->hooks.finished)
    s->hooks.finished(s->hooks.ctx, changes, committed);
}

/* History needs go to the catalog of each metadata schema they name
 * (unqualified: public); a schema with no catalog has nothing lazy. */
static mr_status route_history(void *ctx, const sql_hist_needs *needs, bool *loaded,
                               sql_error *err) {
  cat_entry *e = ctx;
  *loaded = false;
  sql_hist_need *sub = malloc(needs->n * sizeof *sub);
  if (sub == NULL)
    return sql_fail(err, MR_ERR_NOMEM, "53200", "out of memory");
  mr_status rc = MR_OK;
  for (size_t i = 0; rc == MR_OK && i < e->nschemas; i++) {
    cat_schema *s = &e->schemas[i];
    sql_hist_needs mine = {sub, 0};
    for (size_t j = 0; j < needs->n; j++) {
      const char *name = needs->v[j].schema ? needs->v[j].schema : "public";
      if (strcmp(name, s->name) == 0)
        sub[mine.n++] = needs->v[j];
    }
    bool more = false;
    if (mine.n && s->cat)
      rc = catalog_history_ensure(s->cat, &mine, &more, err);
    *loaded = *loaded || more;
  }
  free(sub);
  return rc;
}

static bool route_known_table(void *ctx, const char *table) {
  cat_entry *e = ctx;
  return e->known.known_table && e->known.known_table(e->known.ctx, table);
}

/* Which columns identify a stored row is the same in every metadata
 * schema: the first catalog's answer is everyone's. */
static bool route_may_update(void *ctx, const char *table, const char *column) {
  cat_entry *e = ctx;
  return !e->known.may_update || e->known.may_update(e->known.ctx, table, column);
}

/* Opens e's engine and every metadata schema's store and catalog (outside
 * the lock). */
static mr_status entry_load(cat_registry *r, cat_entry *e, bool must_exist, sql_error *err) {
  char url[4096];
  mr_error me;
  if (cat_registry_store_url(r->store_url, r->default_database, e->name, "public", url, sizeof url,
                             &me) != MR_OK)
    return sql_fail(err, MR_ERR_INVALID, "42602", "database \"%s\": %s", e->name, me.msg);
  if (must_exist && !store_exists(r, url))
    return sql_fail(err, MR_ERR_NOT_FOUND, "3D000", "database \"%s\" does not exist", e->name);
  uint64_t t0 = now_ms();
  sql_error se;
  sql_engine_options eo = r->cfg.engine_opts;
  eo.database_name = e->name;
  if (sql_engine_open(&eo, &e->engine, &se) != MR_OK)
    return sql_fail(err, se.base.code, "53000", "database \"%s\": cannot start the SQL engine: %s",
                    e->name, se.base.msg);
  size_t rows = 0, more = 0;
  char **names = NULL;
  size_t nnames = 0;
  mr_status rc = schema_open(r, e, "public", true, &rows, err);
  if (rc == MR_OK && list_schemas(r, e, &names, &nnames, &me) != MR_OK)
    rc = sql_fail(err, me.code, "XX000", "database \"%s\": %s", e->name, me.msg);
  for (size_t i = 0; rc == MR_OK && i < nnames; i++) {
    rc = schema_open(r, e, names[i], true, &more, err);
    rows += more;
  }
  names_free(names, nnames);
  if (rc != MR_OK) {
    (void)entry_shut(e, &me);
    return rc;
  }
  catalog_install_hooks(e->schemas[0].cat); /* pg_database_size: public's store */
  e->known = e->schemas[0].hooks;
  sql_commit_hooks route = {e, route_prepare, route_finished, route_known_table, route_may_update};
  sql_engine_set_commit_hooks(e->engine, &route);
  sql_engine_set_history_fn(e->engine, route_history, e);
  sql_engine_warm(e->engine);
  fprintf(stderr, "moraine: opened catalog \"%s\": %zu rows", e->name, rows);
  for (size_t i = 1; i < e->nschemas; i++)
    fprintf(stderr, "%s\"%s\"", i == 1 ? ", metadata schemas public, " : ", ", e->schemas[i].name);
  uint64_t keys = 0; /* what the load read: not all history (catalog.h) */
  for (size_t i = 0; i < e->nschemas; i++)
    keys += store_keys_read(e->schemas[i].st);
  fprintf(stderr, " in %llu ms, %llu store keys read\n", (unsigned long long)(now_ms() - t0),
          (unsigned long long)keys);
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
  free(e);
}

/* Shuts e (entry_shut) and logs why, with what its result cache served. */
static mr_status entry_shut_logged(cat_entry *e, const char *why, mr_error *err) {
  sql_result_cache_counts rc_counts = {0};
  if (e->engine)
    sql_engine_result_cache_counts(e->engine, &rc_counts);
  mr_status rc = entry_shut(e, err);
  fprintf(stderr,
          "moraine: closed catalog \"%s\" (%s); result cache: %llu hits, %llu misses, "
          "%llu refreshed ahead\n",
          e->name, why, (unsigned long long)rc_counts.hits, (unsigned long long)rc_counts.misses,
          (unsigned long long)rc_counts.refreshed);
  return rc;
}

/* Closes e, which the caller marked CLOSING (lock not held). */
static void entry_close(cat_registry *r, cat_entry *e, const char *why) {
  mr_error err;
  if (entry_shut_logged(e, why, &err) != MR_OK && !e->retired) /* a retired one was superseded */
    fprintf(stderr, "moraine: closing catalog \"%s\": %s\n", e->name, err.msg);
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
  if (e == NULL) {
    pthread_mutex_unlock(&r->mu);
    return sql_fail(err, MR_ERR_NOMEM, "53200", "out of memory");
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
    if (entry_shut_logged(e, "server stop", &cerr) != MR_OK && rc == MR_OK && !e->retired)
      rc = mr_fail(err, cerr.code, "catalog \"%s\": %s", e->name, cerr.msg);
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
  names_free(r->memory_schemas, r->nmemory_schemas);
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
