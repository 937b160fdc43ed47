/*
 * watch.c — `moraine watch STORE [--from SNAPSHOT] [--interval-ms N]`: a
 * live feed of commits as JSON lines, one per snapshot, from the changelog
 * (RFC 0002: the current keys each snapshot's batch wrote), following the
 * writer until SIGINT or SIGTERM.
 *
 * How it follows: the store is opened read-only (a SlateDB reader that
 * catches up with the writer by itself every interval; the writer is not
 * disturbed); every interval it rereads sys/head (store_read_head) and,
 * when it moved, reads each new snapshot's record and changelog
 * record by point reads — one each per snapshot, as a read replica
 * advancing its view does. Snapshot ids without a record (expired, or never
 * written) are skipped; a snapshot whose changelog record has left the
 * window is printed with "tables": null and "catalog": null.
 *
 * Each line: the snapshot's DuckLake fields (tool_json_snapshot_fields),
 * then "tables": [{"table_id", "schema_name", "table_name", "changes":
 * {KIND: keys}}] for the table-scoped keys the commit wrote or removed,
 * grouped by table (names as of that snapshot, or the one before for a
 * table the commit dropped), and "catalog": {KIND: keys} for the rest
 * (schemas, views, tags, options, ...).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/tool.h"

static const char watch_usage[] =
    "usage: moraine watch STORE [--from SNAPSHOT] [--interval-ms N]\n"
    "  Prints each commit to STORE (a folder path, or a file://, s3://, gs://, az:// URL)\n"
    "  as one JSON line: the snapshot's id, time, schema version, author, message and\n"
    "  changes as DuckLake recorded them, and the keys the commit changed per table and\n"
    "  kind (from the changelog). Follows the writer, polling its head every N ms\n"
    "  (default 500), until SIGINT or SIGTERM (exit 0). --from prints the snapshots from\n"
    "  SNAPSHOT on first; without it only commits made after the start. The store is\n"
    "  opened read-only: a running server is not disturbed.\n";

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig) {
  stop_requested = 1;
}

/* ---- one line ------------------------------------------------------------- */

typedef struct kind_count {
  uint64_t table_id; /* 0 for the catalog-wide keys */
  bool table_scoped;
  unsigned kind;
  uint64_t keys;
} kind_count;

typedef struct change_set {
  kind_count *c;
  size_t n, cap;
} change_set;

static bool count_key(change_set *cs, bool scoped, uint64_t table_id, unsigned kind) {
  for (size_t i = 0; i < cs->n; i++)
    if (cs->c[i].table_scoped == scoped && cs->c[i].table_id == table_id && cs->c[i].kind == kind) {
      cs->c[i].keys++;
      return true;
    }
  if (cs->n == cs->cap) {
    size_t cap = cs->cap ? 2 * cs->cap : 16;
    kind_count *n = realloc(cs->c, cap * sizeof *n);
    if (n == NULL)
      return false;
    cs->c = n;
    cs->cap = cap;
  }
  cs->c[cs->n++] = (kind_count){table_id, scoped, kind, 1};
  return true;
}

static int by_table_then_kind(const void *a, const void *b) {
  const kind_count *x = a, *y = b;
  if (x->table_scoped != y->table_scoped)
    return x->table_scoped ? 1 : -1;
  if (x->table_id != y->table_id)
    return (x->table_id > y->table_id) - (x->table_id < y->table_id);
  return (x->kind > y->kind) - (x->kind < y->kind);
}

typedef struct name_at {
  char *table;
  uint64_t schema_id;
  bool found;
} name_at;

static mr_status on_table(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  name_at *n = ctx;
  const Moraine__V1__Table *t = (const Moraine__V1__Table *)m;
  free(n->table);
  n->table = t->table_name ? strdup(t->table_name) : NULL;
  n->schema_id = t->has_schema_id ? (uint64_t)t->schema_id : 0;
  n->found = true;
  return MR_OK;
}

/* Prints "schema_name": .., "table_name": .. of table id at snapshot s (or
 * s - 1, for a table this commit dropped); null for a name that is NULL or
 * no longer there (a dropped schema). Fails only when the store does. */
static mr_status print_table_names(FILE *out, store *st, uint64_t s, uint64_t id, mr_error *err) {
  name_at n = {0};
  mr_status rc = store_read_kind_at(st, MR_KK_TABLE, s, id, on_table, &n, err);
  if (rc == MR_OK && !n.found && s > 0)
    rc = store_read_kind_at(st, MR_KK_TABLE, s - 1, id, on_table, &n, err);
  char *schema = NULL;
  if (rc == MR_OK && n.found) {
    mr_key sk = {.kind = MR_KK_SCHEMA, .c = {n.schema_id}};
    ProtobufCMessage *m = NULL;
    rc = store_get(st, &sk, &m, err);
    if (rc == MR_OK) {
      const char *name = ((const Moraine__V1__Schema *)m)->schema_name;
      schema = name ? strdup(name) : NULL;
      mr_value_free(m);
    } else if (rc == MR_ERR_NOT_FOUND) {
      mr_error_clear(err);
      rc = MR_OK;
    }
  }
  if (rc == MR_OK) {
    fputs(", \"schema_name\": ", out);
    tool_json_str(out, schema);
    fputs(", \"table_name\": ", out);
    tool_json_str(out, n.table);
  }
  free(schema);
  free(n.table);
  return rc ? mr_error_wrap(err, "the name of table %llu", (unsigned long long)id) : MR_OK;
}

/* The "tables" and "catalog" members from a changelog record. */
static mr_status print_changes(FILE *out, store *st, uint64_t s, const Moraine__V1__Changelog *cl,
                               mr_error *err) {
  change_set cs = {0};
  for (size_t i = 0; i < cl->n_keys; i++) {
    mr_key k;
    mr_status rc = mr_key_decode(cl->keys[i].data, cl->keys[i].len, &k, err);
    if (rc) {
      free(cs.c);
      return mr_error_wrap(err, "changelog of snapshot %llu", (unsigned long long)s);
    }
    bool scoped = (mr_key_kind_get(k.kind)->flags & MR_KF_TABLE_SCOPED) != 0;
    if (!count_key(&cs, scoped, scoped ? k.c[0] : 0, (unsigned)k.kind)) {
      free(cs.c);
      return mr_fail(err, MR_ERR_NOMEM, "out of memory");
    }
  }
  if (cs.n)
    qsort(cs.c, cs.n, sizeof *cs.c, by_table_then_kind);
  fputs(", \"tables\": [", out);
  for (size_t i = 0; i < cs.n;) {
    if (!cs.c[i].table_scoped) {
      i++;
      continue;
    }
    uint64_t t = cs.c[i].table_id;
    fprintf(out, "%s{\"table_id\": %llu", i > 0 && cs.c[i - 1].table_scoped ? ", " : "",
            (unsigned long long)t);
    mr_status rc = print_table_names(out, st, s, t, err);
    if (rc) {
      free(cs.c);
      return rc;
    }
    fputs(", \"changes\": {", out);
    for (size_t j = i; i < cs.n && cs.c[i].table_id == t; i++)
      fprintf(out, "%s\"%s\": %llu", i > j ? ", " : "",
              mr_key_kind_get((mr_key_kind)cs.c[i].kind)->text, (unsigned long long)cs.c[i].keys);
    fputs("}}", out);
  }
  fputs("], \"catalog\": {", out);
  for (size_t i = 0; i < cs.n && !cs.c[i].table_scoped; i++)
    fprintf(out, "%s\"%s\": %llu", i ? ", " : "", mr_key_kind_get((mr_key_kind)cs.c[i].kind)->text,
            (unsigned long long)cs.c[i].keys);
  fputs("}", out);
  free(cs.c);
  return MR_OK;
}

/* Prints snapshot s's line whole; *printed false when it has no record. */
static mr_status print_commit(store *st, uint64_t s, bool *printed, mr_error *err) {
  *printed = false;
  mr_key sk = {.kind = MR_KK_SNAPSHOT, .c = {s}};
  ProtobufCMessage *snap = NULL;
  mr_status rc = store_get(st, &sk, &snap, err);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    return MR_OK;
  }
  if (rc)
    return mr_error_wrap(err, "reading snapshot %llu", (unsigned long long)s);
  mr_key ck = {.kind = MR_KK_CHANGELOG, .c = {s}};
  ProtobufCMessage *cl = NULL;
  rc = store_get(st, &ck, &cl, err);
  if (rc && rc != MR_ERR_NOT_FOUND) {
    mr_value_free(snap);
    return mr_error_wrap(err, "reading the changelog of snapshot %llu", (unsigned long long)s);
  }
  mr_error_clear(err);
  rc = MR_OK; /* no changelog record: the window has slid past it */
  /* the line is built whole first: a failure midway prints none of it */
  char *buf = NULL;
  size_t len = 0;
  FILE *line = open_memstream(&buf, &len);
  if (line == NULL)
    rc = mr_fail(err, MR_ERR_NOMEM, "out of memory");
  if (!rc) {
    fputs("{", line);
    tool_json_snapshot_fields(line, (const Moraine__V1__Snapshot *)snap);
    if (cl)
      rc = print_changes(line, st, s, (const Moraine__V1__Changelog *)cl, err);
    else
      fputs(", \"tables\": null, \"catalog\": null", line);
    fputs("}\n", line);
    if (fclose(line) != 0 && !rc)
      rc = mr_fail(err, MR_ERR_NOMEM, "out of memory");
  }
  if (!rc)
    fwrite(buf, 1, len, stdout);
  free(buf);
  mr_value_free(snap);
  mr_value_free(cl);
  *printed = rc == MR_OK;
  return rc;
}

/* ---- following -------------------------------------------------------------- */

/* Sleeps ms milliseconds, waking early on a stop signal. */
static void nap(unsigned ms) {
  for (unsigned slept = 0; slept < ms && !stop_requested; slept += 50) {
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

static int watch(store *st, bool has_from, uint64_t from, unsigned interval_ms) {
  store_head head = store_get_head(st);
  /* next: the first snapshot id not printed yet */
  uint64_t next = has_from ? from : head.snapshot_id + (head.batch_count > 0 ? 1 : 0);
  fprintf(stderr, "moraine: watch: at snapshot %llu, following the writer\n",
          (unsigned long long)head.snapshot_id);
  mr_error err;
  while (!stop_requested) {
    for (; next <= head.snapshot_id && !stop_requested; next++) {
      bool printed = false;
      if (print_commit(st, next, &printed, &err) != MR_OK) {
        fprintf(stderr, "moraine: watch: %s\n", err.msg);
        return TOOL_EXIT_FAILED;
      }
      if (printed && fflush(stdout) != 0) /* the reader went away (a closed pipe) */
        return errno == EPIPE ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
    }
    nap(interval_ms);
    if (stop_requested)
      break;
    if (store_read_head(st, &head, &err) != MR_OK) {
      fprintf(stderr, "moraine: watch: %s\n", err.msg);
      return TOOL_EXIT_FAILED;
    }
  }
  return TOOL_EXIT_OK;
}

int cli_watch(int argc, char **argv) {
  const char *where = NULL;
  bool has_from = false;
  uint64_t from = 0, interval = 500;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(watch_usage, stdout);
      return TOOL_EXIT_OK;
    }
    if (strcmp(argv[i], "--from") == 0) {
      if (i + 1 >= argc || !tool_parse_u64(argv[i + 1], &from)) {
        fprintf(stderr, "moraine: watch: --from takes a snapshot id\n");
        return TOOL_EXIT_USAGE;
      }
      has_from = true;
      i++;
    } else if (strcmp(argv[i], "--interval-ms") == 0) {
      if (i + 1 >= argc || !tool_parse_u64(argv[i + 1], &interval) || interval == 0 ||
          interval > 3600000) {
        fprintf(stderr, "moraine: watch: --interval-ms takes 1 to 3600000\n");
        return TOOL_EXIT_USAGE;
      }
      i++;
    } else if (argv[i][0] != '-' && where == NULL) {
      where = argv[i];
    } else {
      fprintf(stderr, "moraine: watch: unexpected '%s' (see moraine watch --help)\n", argv[i]);
      return TOOL_EXIT_USAGE;
    }
  }
  if (where == NULL) {
    fprintf(stderr, "moraine: watch: which store? (see moraine watch --help)\n");
    return TOOL_EXIT_USAGE;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  store *st = tool_open_following("watch", where, false, (uint32_t)interval);
  if (st == NULL)
    return TOOL_EXIT_FAILED;
  return tool_close("watch", st, watch(st, has_from, from, (unsigned)interval));
}
