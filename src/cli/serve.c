/*
 * serve.c — `moraine serve`: parses the serve options, opens the catalogs
 * (registry.h: one store + SQL engine + catalog per database, the default
 * database's at the store root, others on demand) and runs the
 * PostgreSQL-protocol server until SIGTERM / SIGINT.
 *
 * Contract: when ready it prints exactly one line
 *   moraine: serving <store> on <host:port>
 * to stderr (flushed); a failure to start exits 1 with one line
 * "moraine: <reason>" (a bad option: exit 2). Start-up order: claim the
 * port, open the default database's catalog (its store — a refused or
 * fenced store exits 1 —, its SQL engine, the whole retained catalog loaded
 * and logged with its row count and time, the commit hooks), then accept:
 * the ready line comes only after the load. Other databases' catalogs open
 * when a client first names them and close when idle, each logged. SIGTERM / SIGINT: stop accepting, let running
 * statements finish (up to --shutdown-timeout), exit 0.
 *
 * Store faults: while the store is failed, reads go on and writes are
 * refused; the store watcher resumes writes when it answers again. If a
 * write reported failed landed after all, the engine no longer matches the
 * store: the server then stops as on SIGTERM and executes itself again with
 * the same arguments (same pid), which reloads the catalog — what PostgreSQL
 * does when its WAL write fails, without its downtime during the outage.
 * Fenced by another writer: stop, exit 3. All of this concerns the default
 * database's catalog; the others' faults close or reopen just that catalog
 * (registry.h).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cli/cli.h"
#include "mr_version.h"
#include "pgwire/pg_auth.h"
#include "pgwire/pg_log.h"
#include "pgwire/pg_server.h"
#include "registry/registry.h"
#include "sql/sql.h"

static const char serve_usage[] =
    "usage: moraine serve [--store URL] [--listen HOST:PORT]\n"
    "                     [--users-file FILE | --password-file FILE]\n"
    "                     [--max-connections N] [--auth-timeout SECONDS]\n"
    "                     [--shutdown-timeout SECONDS] [--log-level LEVEL]\n"
    "                     [--memory-limit SIZE] [--engine-threads N] [--result-cache-mib N]\n"
    "                     [--refresh-ahead on|off]\n"
    "                     [--log-min-duration MS] [--log-commit-phases] [--cache-dir DIR]\n"
    "                     [--gc-interval SECONDS] [--gc-min-age SECONDS]\n"
    "                     [--tls-cert FILE --tls-key FILE [--tls-required]]\n"
    "                     [--default-database NAME] [--unknown-databases create|refuse]\n"
    "                     [--catalog-idle-timeout SECONDS]\n"
    "                     [--replica [--follow-interval MS]] [--changelog-window N]\n"
    "                     [--resident-snapshots N] [--load-history on-demand|all]\n"
    "  --store URL           catalog store root: file://DIR, s3://BUCKET/PREFIX,\n"
    "                        gs://BUCKET/PREFIX, az://CONTAINER/PREFIX or memory://\n"
    "                        (default file://./moraine-data); each database is its own\n"
    "                        catalog: the default database's at the root itself, any\n"
    "                        other's under catalogs/ (docs/catalogs.md)\n"
    "  --default-database NAME\n"
    "                        the database whose catalog is the store root, opened at\n"
    "                        start and kept open (default lake)\n"
    "  --unknown-databases create|refuse\n"
    "                        a connection to a database with no catalog yet creates an\n"
    "                        empty one (default), or is refused with 3D000\n"
    "  --catalog-idle-timeout SECONDS\n"
    "                        close a catalog (not the default one) this long after its\n"
    "                        last session ended (default 60)\n"
    "  --replica             serve the store read-only, as a read replica of the server\n"
    "                        writing it: follows its commits, refuses writes with 25006;\n"
    "                        any number of replicas may serve one store (docs/replicas.md)\n"
    "  --follow-interval MS  how often a replica looks for new commits (default 100)\n"
    "  --changelog-window N  keep the changelog records of the last N snapshots (default\n"
    "                        1024): a replica (or moraine watch) further behind than that\n"
    "                        loads the whole catalog again\n"
    "  --resident-snapshots N\n"
    "                        snapshots kept in memory below the newest (default 1000);\n"
    "                        older ones, ended data / delete file versions, their stats\n"
    "                        and ended inlined rows (a writer: every inlined row, a\n"
    "                        table's at its first statement) load from the store when\n"
    "                        a statement reads them (docs/operations.md)\n"
    "  --load-history on-demand|all\n"
    "                        all: load all of the above at start, as before (start time\n"
    "                        and memory grow with history; default on-demand)\n"
    "  --listen HOST:PORT    address to listen on (default 127.0.0.1:5433; port 0 picks one)\n"
    "  --users-file FILE     users who may connect, each with a role (read or write) and a\n"
    "                        SCRAM-SHA-256 verifier (moraine user add; docs/operations.md);\n"
    "                        SIGHUP reloads it\n"
    "  --password-file FILE  require SCRAM-SHA-256 with the password in FILE (first line;\n"
    "                        any user name is accepted)\n"
    "  --max-connections N   client sessions at once; more get 53300 (default 256)\n"
    "  --auth-timeout SECONDS\n"
    "                        close a connection not authenticated within this time\n"
    "                        (default 10)\n"
    "  --shutdown-timeout SECONDS\n"
    "                        on SIGTERM, how long running statements may take before\n"
    "                        they are cancelled (default 10)\n"
    "  --log-level LEVEL     error, warn, info or debug (default info)\n"
    "  --memory-limit SIZE   memory the SQL engine may use, e.g. 2GB (default: DuckDB's,\n"
    "                        80% of RAM); a query over it fails with 53200\n"
    "  --engine-threads N    threads one query may use in the SQL engine (default 1:\n"
    "                        catalog queries are small; sessions run in parallel)\n"
    "  --result-cache-mib N  MiB of catalog-read answers each catalog keeps until its next\n"
    "                        change (default 32; 0 turns the cache off)\n"
    "  --refresh-ahead on|off\n"
    "                        after each commit, re-read in the background the catalog\n"
    "                        reads its writer repeats, so they are answered from the\n"
    "                        cache (default on; docs/pgwire.md)\n"
    "  --log-min-duration MS log each statement (and each Sync that commits) taking at\n"
    "                        least MS milliseconds; 0 logs all, -1 none (default 1000)\n"
    "  --log-commit-phases   log one line per commit: lock wait, mapping to store records,\n"
    "                        durable store write, engine commit, total (milliseconds)\n"
    "  --tls-cert FILE       PEM certificate chain (leaf first) for TLS; with --tls-key, an\n"
    "                        SSLRequest is answered 'S' (sslmode=require, verify-ca,\n"
    "                        verify-full); SIGHUP reloads both files\n"
    "  --tls-key FILE        PEM private key of --tls-cert\n"
    "  --tls-required        refuse connections that do not negotiate TLS (28000)\n"
    "  --cache-dir DIR       keep the store's SST parts read from object storage in this\n"
    "                        local folder (up to 1 GiB), for faster restarts and old\n"
    "                        snapshots (default: no cache)\n"
    "  --gc-interval SECONDS how often SlateDB's garbage collector runs (default 60)\n"
    "  --gc-min-age SECONDS  how old an unreferenced store object must be before it is\n"
    "                        deleted (default 300; it must outlast the longest\n"
    "                        compaction and reader refresh)\n";

/* A replica's look for new commits (--follow-interval). */
#define SERVE_DEFAULT_FOLLOW_MS 100

static pg_server *volatile running_server;
static volatile sig_atomic_t fenced;      /* another writer took the store over */
static volatile sig_atomic_t must_reload; /* the store holds commits we lack */

/* The store watcher's fencing hook: this server may no longer write nor
 * vouch that its catalog is current, so it stops (exit status 3). */
static void on_fenced(void *ctx) {
  fenced = 1;
  pg_server *s = running_server;
  if (s)
    pg_server_stop(s);
}

/* The store watcher's reload hook: stop, then start again (see above). */
static void on_reload(void *ctx) {
  must_reload = 1;
  pg_server *s = running_server;
  if (s)
    pg_server_stop(s);
}

static volatile sig_atomic_t hup_stop; /* the reload thread's end */

/* What SIGHUP reloads (either may be NULL). */
typedef struct serve_reloadable {
  pg_tls *tls;
  pg_users *users;
} serve_reloadable;

/* Reloads the TLS certificate and key and the users file on each SIGHUP
 * (blocked in every thread, taken here with sigwait) until hup_stop. */
static void *hup_main(void *arg) {
  const serve_reloadable *r = arg;
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  for (;;) {
    int sig;
    if (sigwait(&hup, &sig) != 0)
      continue;
    if (hup_stop)
      return NULL;
    mr_error e;
    if (r->tls && pg_tls_reload(r->tls, &e) == MR_OK)
      pg_log(PG_LOG_INFO, "SIGHUP: TLS certificate and key reloaded");
    else if (r->tls)
      pg_log(PG_LOG_WARN, "SIGHUP: TLS reload failed, the current certificate stays: %s", e.msg);
    if (r->users && pg_users_reload(r->users, &e) == MR_OK)
      pg_log(PG_LOG_INFO, "SIGHUP: users file reloaded");
    else if (r->users)
      pg_log(PG_LOG_WARN, "SIGHUP: users file reload failed, the current users stay: %s", e.msg);
  }
}

/* Executes this binary again as `moraine serve` with argv, listening where
 * this process listened (a port 0 was resolved: clients keep their port; a
 * later --listen wins); returns only on failure. */
static void serve_again(int argc, char **argv, char *listened) {
  char **again = calloc((size_t)argc + 4, sizeof *again);
  if (again == NULL)
    return;
  again[0] = "moraine";
  for (int i = 0; i < argc; i++)
    again[i + 1] = argv[i];
  again[argc + 1] = "--listen";
  again[argc + 2] = listened;
  fflush(NULL);
  execv("/proc/self/exe", again);
  fprintf(stderr, "moraine: cannot start again: %s\n", strerror(errno));
  free(again);
}

static void on_signal(int sig) {
  (void)sig;
  pg_server *s = running_server;
  if (s)
    pg_server_stop(s);
}

/* Splits "host:port", "[v6]:port" into its parts. */
static int split_listen(const char *in, char *host, size_t hcap, char *port, size_t pcap) {
  const char *colon = strrchr(in, ':');
  if (colon == NULL || colon[1] == '\0')
    return -1;
  const char *h = in;
  size_t hlen = (size_t)(colon - in);
  if (hlen >= 2 && in[0] == '[' && in[hlen - 1] == ']') {
    h++;
    hlen -= 2;
  }
  if (hlen == 0 || hlen >= hcap || strlen(colon + 1) >= pcap)
    return -1;
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  snprintf(port, pcap, "%s", colon + 1);
  return 0;
}

/* A positive whole number no larger than max; -1 if s is not one. */
static long parse_count(const char *s, long max) {
  char *end;
  long v = strtol(s, &end, 10);
  return end == s || *end != '\0' || v <= 0 || v > max ? -1 : v;
}

/* Seconds (fractions allowed, e.g. 0.5) as milliseconds; 0 if invalid. */
static uint64_t parse_seconds(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0.001) || v > 86400.0)
    return 0;
  return (uint64_t)(v * 1000.0 + 0.5);
}

int cli_serve(int argc, char **argv) {
  const char *store_url = "file://./moraine-data";
  const char *listen_addr = "127.0.0.1:5433";
  const char *password_file = NULL, *users_file = NULL;
  const char *max_conn = NULL, *auth_timeout = NULL, *shutdown_timeout = NULL;
  const char *log_level = "info";
  const char *memory_limit = NULL;
  const char *min_duration = NULL;
  const char *engine_threads = "1";
  const char *result_cache_mib = NULL;
  const char *refresh_ahead = "on";
  const char *cache_dir = NULL;
  const char *default_database = "lake";
  const char *unknown_databases = "create";
  const char *idle_timeout = NULL;
  const char *gc_interval = NULL, *gc_min_age = NULL;
  bool log_commit_phases = false, tls_required = false, replica = false;
  const char *follow_interval = NULL, *changelog_window = NULL, *resident_snapshots = NULL;
  const char *load_history = "on-demand";
  serve_reloadable reloadable = {NULL, NULL};
  const char *tls_cert = NULL, *tls_key = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(serve_usage, stdout);
      return 0;
    }
    if (strcmp(a, "--log-commit-phases") == 0) {
      log_commit_phases = true;
      continue;
    }
    if (strcmp(a, "--tls-required") == 0) {
      tls_required = true;
      continue;
    }
    if (strcmp(a, "--replica") == 0) {
      replica = true;
      continue;
    }
    const char **slot = strcmp(a, "--store") == 0              ? &store_url
                        : strcmp(a, "--listen") == 0           ? &listen_addr
                        : strcmp(a, "--password-file") == 0    ? &password_file
                        : strcmp(a, "--users-file") == 0       ? &users_file
                        : strcmp(a, "--max-connections") == 0  ? &max_conn
                        : strcmp(a, "--auth-timeout") == 0     ? &auth_timeout
                        : strcmp(a, "--shutdown-timeout") == 0 ? &shutdown_timeout
                        : strcmp(a, "--log-level") == 0        ? &log_level
                        : strcmp(a, "--memory-limit") == 0     ? &memory_limit
                        : strcmp(a, "--log-min-duration") == 0 ? &min_duration
                        : strcmp(a, "--engine-threads") == 0   ? &engine_threads
                        : strcmp(a, "--result-cache-mib") == 0 ? &result_cache_mib
                        : strcmp(a, "--refresh-ahead") == 0    ? &refresh_ahead
                        : strcmp(a, "--cache-dir") == 0        ? &cache_dir
                        : strcmp(a, "--tls-cert") == 0         ? &tls_cert
                        : strcmp(a, "--tls-key") == 0          ? &tls_key
                        : strcmp(a, "--default-database") == 0 ? &default_database
                        : strcmp(a, "--unknown-databases") == 0 ? &unknown_databases
                        : strcmp(a, "--catalog-idle-timeout") == 0 ? &idle_timeout
                        : strcmp(a, "--gc-interval") == 0      ? &gc_interval
                        : strcmp(a, "--gc-min-age") == 0       ? &gc_min_age
                        : strcmp(a, "--follow-interval") == 0  ? &follow_interval
                        : strcmp(a, "--changelog-window") == 0 ? &changelog_window
                        : strcmp(a, "--resident-snapshots") == 0 ? &resident_snapshots
                        : strcmp(a, "--load-history") == 0     ? &load_history
                                                               : NULL;
    if (slot == NULL) {
      fprintf(stderr, "moraine: serve: unknown option '%s' (see moraine serve --help)\n", a);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "moraine: serve: %s needs a value\n", a);
      return 2;
    }
    *slot = argv[++i];
  }
  char host[256], port[32];
  if (split_listen(listen_addr, host, sizeof host, port, sizeof port) != 0) {
    fprintf(stderr, "moraine: serve: --listen wants HOST:PORT, got '%s'\n", listen_addr);
    return 2;
  }
  pg_server_config cfg = {.host = host,
                          .port = port,
                          .max_connections = PG_DEFAULT_MAX_CONNECTIONS,
                          .max_message = PG_DEFAULT_MAX_MESSAGE,
                          .auth_timeout_ms = PG_DEFAULT_AUTH_TIMEOUT_MS,
                          .shutdown_timeout_ms = PG_DEFAULT_SHUTDOWN_TIMEOUT_MS,
                          .auth_fail_delay_ms = PG_DEFAULT_AUTH_FAIL_DELAY_MS,
                          .slow_statement_ms = PG_DEFAULT_SLOW_STATEMENT_MS,
                          .log_commit_phases = log_commit_phases};
  /* MORAINE_MAX_CONNECTIONS: the limit when --max-connections is not given
   * (older scripts and tests set it); the flag wins */
  if (max_conn == NULL)
    max_conn = getenv("MORAINE_MAX_CONNECTIONS");
  if (max_conn) {
    long n = parse_count(max_conn, 100000);
    if (n < 0) {
      fprintf(stderr,
              "moraine: serve: --max-connections wants a number from 1 to 100000, got '%s'\n",
              max_conn);
      return 2;
    }
    cfg.max_connections = (int)n;
  }
  if (auth_timeout && (cfg.auth_timeout_ms = parse_seconds(auth_timeout)) == 0) {
    fprintf(stderr, "moraine: serve: --auth-timeout wants seconds (0.001 to 86400), got '%s'\n",
            auth_timeout);
    return 2;
  }
  if (shutdown_timeout && (cfg.shutdown_timeout_ms = parse_seconds(shutdown_timeout)) == 0) {
    fprintf(stderr, "moraine: serve: --shutdown-timeout wants seconds (0.001 to 86400), got '%s'\n",
            shutdown_timeout);
    return 2;
  }
  if (min_duration) {
    char *end;
    long v = strtol(min_duration, &end, 10);
    if (end == min_duration || *end != '\0' || v < -1 || v > 86400000) {
      fprintf(stderr,
              "moraine: serve: --log-min-duration wants milliseconds (-1 to 86400000), got '%s'\n",
              min_duration);
      return 2;
    }
    cfg.slow_statement_ms = v;
  }
  long threads = parse_count(engine_threads, 1024);
  if (threads < 0) {
    fprintf(stderr, "moraine: serve: --engine-threads wants a number from 1 to 1024, got '%s'\n",
            engine_threads);
    return 2;
  }
  long cache_mib = SQL_RESULT_CACHE_DEFAULT_MIB;
  if (result_cache_mib && strcmp(result_cache_mib, "0") == 0)
    cache_mib = 0;
  else if (result_cache_mib && (cache_mib = parse_count(result_cache_mib, 65536)) < 0) {
    fprintf(stderr, "moraine: serve: --result-cache-mib wants a number from 0 to 65536, got '%s'\n",
            result_cache_mib);
    return 2;
  }
  if (strcmp(refresh_ahead, "on") != 0 && strcmp(refresh_ahead, "off") != 0) {
    fprintf(stderr, "moraine: serve: --refresh-ahead wants on or off, got '%s'\n", refresh_ahead);
    return 2;
  }
  if (default_database[0] == '\0' || strlen(default_database) > CAT_REGISTRY_MAX_NAME) {
    fprintf(stderr, "moraine: serve: --default-database wants a name of 1 to %d bytes\n",
            CAT_REGISTRY_MAX_NAME);
    return 2;
  }
  bool no_create = strcmp(unknown_databases, "refuse") == 0;
  if (!no_create && strcmp(unknown_databases, "create") != 0) {
    fprintf(stderr, "moraine: serve: --unknown-databases wants create or refuse, got '%s'\n",
            unknown_databases);
    return 2;
  }
  uint64_t idle_ms = CAT_REGISTRY_DEFAULT_IDLE_MS;
  if (idle_timeout && (idle_ms = parse_seconds(idle_timeout)) == 0) {
    fprintf(stderr,
            "moraine: serve: --catalog-idle-timeout wants seconds (0.001 to 86400), got '%s'\n",
            idle_timeout);
    return 2;
  }
  unsigned follow_ms = SERVE_DEFAULT_FOLLOW_MS;
  if (follow_interval) {
    char *end;
    unsigned long v = strtoul(follow_interval, &end, 10);
    if (!replica || *follow_interval == '\0' || *end != '\0' || v < 1 || v > 3600000) {
      fprintf(stderr, "moraine: serve: --follow-interval wants milliseconds (1 to 3600000) "
                      "and --replica, got '%s'\n", follow_interval);
      return 2;
    }
    follow_ms = (unsigned)v;
  }
  uint64_t window = 0; /* 0: STORE_CHANGELOG_WINDOW */
  if (changelog_window) {
    char *end;
    unsigned long long v = strtoull(changelog_window, &end, 10);
    if (*changelog_window == '\0' || *changelog_window == '-' || *end != '\0' || v < 1 ||
        v > 1000000) {
      fprintf(stderr, "moraine: serve: --changelog-window wants a number of snapshots "
                      "(1 to 1000000), got '%s'\n", changelog_window);
      return 2;
    }
    window = v;
  }
  uint64_t snapshot_tail = 1000;
  if (resident_snapshots) {
    char *end;
    unsigned long long v = strtoull(resident_snapshots, &end, 10);
    if (*resident_snapshots == '\0' || *resident_snapshots == '-' || *end != '\0' ||
        v > 1000000000ULL) {
      fprintf(stderr, "moraine: serve: --resident-snapshots wants a number of snapshots "
                      "(0 to 1000000000), got '%s'\n", resident_snapshots);
      return 2;
    }
    snapshot_tail = v;
  }
  bool history_on_demand = strcmp(load_history, "on-demand") == 0;
  if (!history_on_demand && strcmp(load_history, "all") != 0) {
    fprintf(stderr, "moraine: serve: --load-history wants on-demand or all, got '%s'\n",
            load_history);
    return 2;
  }
  uint64_t gc_interval_ms = 0, gc_min_age_ms = 0; /* 0: kv.h's defaults */
  if (gc_interval && (gc_interval_ms = parse_seconds(gc_interval)) == 0) {
    fprintf(stderr, "moraine: serve: --gc-interval wants seconds (0.001 to 86400), got '%s'\n",
            gc_interval);
    return 2;
  }
  if (gc_min_age && (gc_min_age_ms = parse_seconds(gc_min_age)) == 0) {
    fprintf(stderr, "moraine: serve: --gc-min-age wants seconds (0.001 to 86400), got '%s'\n",
            gc_min_age);
    return 2;
  }
  pg_log_level level;
  mr_error err;
  if (pg_log_parse_level(log_level, &level, &err) != MR_OK) {
    fprintf(stderr, "moraine: serve: --log-level: %s\n", err.msg);
    return 2;
  }
  pg_log_set_level(level);
  if (password_file && users_file) {
    fprintf(stderr, "moraine: serve: --users-file and --password-file exclude each other\n");
    return 2;
  }
  if ((tls_cert == NULL) != (tls_key == NULL)) {
    fprintf(stderr, "moraine: serve: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (tls_required && tls_cert == NULL) {
    fprintf(stderr, "moraine: serve: --tls-required needs --tls-cert and --tls-key\n");
    return 2;
  }
  pg_users *users = NULL;
  if (users_file && pg_users_open_file(users_file, &users, &err) != MR_OK) {
    fprintf(stderr, "moraine: %s\n", err.msg);
    return 1;
  }
  if (password_file) {
    char password[256];
    mr_status prc = pg_password_file_read(password_file, password, sizeof password, &err);
    if (prc == MR_OK)
      prc = pg_users_open_password(password, &users, &err);
    OPENSSL_cleanse(password, sizeof password);
    if (prc) {
      fprintf(stderr, "moraine: %s\n", err.msg);
      return 1;
    }
  }
  if (users == NULL && tls_cert == NULL && !pg_host_is_loopback(host)) {
    fprintf(stderr,
            "moraine: refusing to listen on non-loopback address %s without --users-file, "
            "--password-file or TLS\n",
            host);
    return 1;
  }
  pg_tls *tls = NULL;
  if (tls_cert && pg_tls_open(tls_cert, tls_key, &tls, &err) != MR_OK) {
    fprintf(stderr, "moraine: %s\n", err.msg);
    pg_users_free(users);
    return 1;
  }
  reloadable.tls = tls;
  reloadable.users = users;
  bool watch_hup = tls || users_file;
  cfg.tls = tls;
  cfg.tls_required = tls_required;
  /* SIGHUP reloads the certificate: taken by one thread with sigwait, so it
   * is blocked here, before any other thread exists to inherit the mask */
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  if (watch_hup)
    pthread_sigmask(SIG_BLOCK, &hup, NULL);

  int status = 1;
  pthread_t hup_thread;
  if (watch_hup && pthread_create(&hup_thread, NULL, hup_main, &reloadable) != 0) {
    fprintf(stderr, "moraine: cannot start the SIGHUP thread\n");
    pg_tls_free(tls);
    pg_users_free(users);
    return 1;
  }

  /* The default database's catalog opens now (a store that cannot be
   * opened or loaded fails the start); others open on first use. */
  cat_registry_config rcfg = {
      .store_url = store_url,
      .default_database = default_database,
      .create = !no_create && !replica, /* a replica never creates a catalog */
      .idle_ms = idle_ms,
      .store_opts = {.cache_dir = cache_dir,
                     .gc_interval_ms = (uint32_t)gc_interval_ms,
                     .gc_min_age_ms = (uint32_t)gc_min_age_ms,
                     .read_only = replica,
                     .changelog_window = window,
                     .reader_poll_ms = replica ? follow_ms : 0},
      .engine_opts = {.server_version = "15.0 (moraine " MORAINE_VERSION ")",
                      .memory_limit = memory_limit,
                      .threads = (int)threads,
                      .replica = replica,
                      .result_cache_bytes = (size_t)cache_mib << 20,
                      .refresh_ahead = strcmp(refresh_ahead, "on") == 0},
      .default_hooks = {on_fenced, on_reload, NULL, NULL},
      .replica = replica,
      .follow_ms = follow_ms,
      .snapshot_tail = snapshot_tail,
      .history_on_demand = history_on_demand,
  };
  /* Claim the port before the (possibly long) load, so a taken port fails
   * at once with one line; nothing is accepted until pg_server_run. */
  pg_session_source sessions = {NULL, cat_registry_session_open, cat_registry_session_close};
  cfg.users = users;
  cfg.sessions = &sessions;
  pg_server *server;
  if (pg_server_start(&cfg, NULL, &server, &err) != MR_OK) {
    fprintf(stderr, "moraine: %s\n", err.msg);
    status = 1;
    goto out;
  }
  cat_registry *reg = NULL;
  if (cat_registry_open(&rcfg, &reg, &err) != MR_OK) {
    fprintf(stderr, "moraine: %s\n", err.msg);
    pg_server_free(server);
    status = 1;
    goto out;
  }
  sessions.ctx = reg;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  running_server = server;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  fprintf(stderr, "moraine: serving %s on %s\n", store_url, pg_server_address(server));
  fflush(stderr);

  mr_status rc = pg_server_run(server, &err);
  running_server = NULL;
  char listened[300];
  snprintf(listened, sizeof listened, "%s", pg_server_address(server));
  pg_server_free(server);
  mr_error cerr;
  mr_status crc = cat_registry_close(reg, &cerr);
  if (must_reload && !fenced) {
    fprintf(stderr, "moraine: restarting to reload the catalog from the store\n");
    serve_again(argc, argv, listened);
    status = 1;
    goto out;
  }
  if (fenced) { /* closing a fenced store may fail too: the takeover is the news */
    fprintf(stderr, "moraine: stopped: another server has taken over the store\n");
    status = 3;
    goto out;
  }
  if (crc != MR_OK && rc == MR_OK) {
    fprintf(stderr, "moraine: closing the store: %s\n", cerr.msg);
    status = 1;
    goto out;
  }
  if (rc != MR_OK) {
    fprintf(stderr, "moraine: %s\n", err.msg);
    status = 1;
    goto out;
  }
  fprintf(stderr, "moraine: stopped\n");
  status = 0;
out:
  if (watch_hup) {
    hup_stop = 1;
    pthread_kill(hup_thread, SIGHUP);
    pthread_join(hup_thread, NULL);
  }
  pg_tls_free(tls);
  pg_users_free(users);
  return status;
}
