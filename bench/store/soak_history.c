/*
 * soak_history.c — grows a DuckLake catalog's history fast, for
 * `make bench-soak`: appends snapshots to a stopped server's store through
 * the store API until the head snapshot id reaches TARGET. Each new snapshot
 * is the head snapshot record again with the next id and a later time (the
 * same schema version and next ids, changes "inserted_into_table:T"), written
 * as one store commit with its changelog record, as the server writes a
 * commit. It carries no data change, so a read at any of them answers what
 * the head did: what grows is the number of snapshots, the snapshot and
 * changelog subspaces and the engine's ducklake_snapshot tables — the
 * history a commit must not pay for. DuckLake through the server would need
 * hours for 100,000 commits on the 2-core machine.
 * Usage: soak_history STORE_URL TARGET TABLE_ID
 * Not a test. Progress on stderr every 10,000 snapshots.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

static void die(const char *what, const mr_error *e) {
  fprintf(stderr, "soak_history: %s: %s\n", what, e->msg);
  exit(1);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: soak_history STORE_URL TARGET TABLE_ID\n");
    return 2;
  }
  uint64_t target = strtoull(argv[2], NULL, 10);
  char changes[64];
  snprintf(changes, sizeof changes, "inserted_into_table:%s", argv[3]);
  store *st = NULL;
  mr_error e;
  store_options o = {0};
  if (store_open(argv[1], &o, &st, &e))
    die("open", &e);
  store_head h = store_get_head(st);
  mr_key hk = {.kind = MR_KK_SNAPSHOT, .c = {h.snapshot_id}};
  ProtobufCMessage *m = NULL;
  if (store_get(st, &hk, &m, &e))
    die("reading the head snapshot", &e);
  Moraine__V1__Snapshot *head = (Moraine__V1__Snapshot *)m;
  Moraine__V1__Snapshot snap = *head;
  snap.changes_made = changes;
  snap.author = NULL;
  snap.commit_message = NULL;
  snap.commit_extra_info = NULL;
  snap.n_deleted_from_data_files = 0;
  snap.deleted_from_data_files = NULL;
  snap.deletes_untargeted_files = 0;
  uint64_t start = h.snapshot_id;
  for (uint64_t s = h.snapshot_id + 1; s <= target; s++) {
    store_commit *c = NULL;
    if (store_commit_begin(st, store_get_head(st), &c, &e))
      die("begin", &e);
    snap.snapshot_id = (int64_t)s;
    snap.snapshot_time =
        head->snapshot_time + (int64_t)(s - start); /* 1 us apart, after the head */
    if (store_commit_snapshot(c, &snap, &e))
      die("snapshot", &e);
    if (store_commit_write(c, NULL, &e))
      die("write", &e);
    if (s % 10000 == 0)
      fprintf(stderr, "soak_history: snapshot %llu of %llu\n", (unsigned long long)s,
              (unsigned long long)target);
  }
  mr_value_free(m);
  if (store_close(st, &e))
    die("close", &e);
  return 0;
}
