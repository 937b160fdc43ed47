/*
 * store_test_util.h — helpers shared by the store tests: temp folders under
 * $MORAINE_TEST_TMP, fresh file:// stores, and record lists (a visited
 * record as its normalized key + encoded value bytes) to compare reads.
 */
#ifndef STORE_TEST_UTIL_H
#define STORE_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Creates this run's temp root (prefix names it); 0 on success. */
int st_tmp_setup(const char *prefix);
/* Removes the temp root and everything in it. */
void st_tmp_teardown(void);
/* Writes a fresh file:// url for `name` under the temp root into url. */
void st_url(const char *name, char *url, size_t cap);

/* One record: key with history dropped (current form), value bytes. */
typedef struct st_rec {
  mr_key key;
  uint8_t *val;
  size_t len;
} st_rec;

typedef struct st_list {
  st_rec *r;
  size_t n, cap;
} st_list;

void st_list_add(st_list *l, const mr_key *k, const uint8_t *val, size_t len); /* copies */
void st_list_free(st_list *l);
void st_list_sort(st_list *l);
/* Compares two sorted lists; on a difference prints both sides under `what`
 * and returns false. */
bool st_list_equal(const st_list *got, const st_list *want, const char *what);

/* Writes one record straight through kv, under its encoded key, as only
 * damage or an older layout would (the store at url must be closed). */
mr_status st_kv_put(const char *url, const mr_key *k, const ProtobufCMessage *msg, mr_error *e);

/* A store_visit_fn appending to the st_list ctx (history keys normalized). */
mr_status st_collect(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err);

/*
 * Builds a catalog through the store API in the new store at url: schemas
 * 1 "main" and 2 "scratch" (dropped at the end), tables 100+i "t<i>"
 * (i < ST_CATALOG_TABLES) each with data files 1000+10i and +1 and delete
 * file +2 on the first, every third table renamed "renamed<i>", every
 * fourth-plus-one delete file replaced by a newer one (+3). Snapshot 0
 * makes the schemas, snapshot i+1 table i; the renames and replacements
 * follow, the drop of schema 2 last. Aborts on any failure.
 */
#define ST_CATALOG_TABLES 12
void st_build_catalog(const char *url);

#endif
