/*
 * store_test_util.c — temp folders, urls and record lists for the store
 * tests (see store_test_util.h).
 */
#include "store_test_util.h"
#include "test_tmp.h"

#include "key/key.h"
#include "kv/kv.h"
#include "value/value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_tmp_setup(const char *prefix) {
  return test_tmp_setup(prefix);
}

void st_tmp_teardown(void) {
  test_tmp_teardown();
}

void st_url(const char *name, char *url, size_t cap) {
  test_tmp_url(name, url, cap);
}

mr_status st_kv_put(const char *url, const mr_key *k, const ProtobufCMessage *msg, mr_error *e) {
  kv_db *db = NULL;
  mr_status rc = kv_open(url, NULL, &db, e);
  if (rc)
    return rc;
  mr_keybuf kb;
  uint8_t *val = NULL;
  size_t len = 0;
  kv_batch *b = NULL;
  rc = mr_key_encode(k, &kb, e);
  if (!rc)
    rc = mr_value_encode(k->kind, msg, &val, &len, e);
  if (!rc)
    rc = kv_batch_new(&b, e);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, len, e);
  if (!rc)
    rc = kv_write(db, b, e);
  kv_batch_free(b);
  free(val);
  mr_error ignored;
  mr_status crc = kv_close(db, rc ? &ignored : e);
  return rc ? rc : crc;
}

void st_list_add(st_list *l, const mr_key *k, const uint8_t *val, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->r = realloc(l->r, l->cap * sizeof *l->r);
    if (l->r == NULL)
      abort();
  }
  st_rec *r = &l->r[l->n++];
  r->key = *k;
  if (r->key.history) {
    r->key.history = false;
    r->key.c[mr_key_kind_get(k->kind)->ncomp] = 0;
  }
  r->key.name = NULL;
  r->key.name_len = 0;
  r->val = malloc(len ? len : 1);
  if (r->val == NULL)
    abort();
  if (len)
    memcpy(r->val, val, len);
  r->len = len;
}

void st_list_free(st_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->r[i].val);
  free(l->r);
  memset(l, 0, sizeof *l);
}

static int rec_cmp(const void *a, const void *b) {
  const st_rec *x = a, *y = b;
  int c = mr_key_compare(&x->key, &y->key);
  if (c)
    return c;
  size_t n = x->len < y->len ? x->len : y->len;
  c = memcmp(x->val, y->val, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

void st_list_sort(st_list *l) {
  if (l->n)
    qsort(l->r, l->n, sizeof *l->r, rec_cmp);
}

static void print_rec(const char *side, const st_rec *r) {
  char text[MR_KEY_TEXT_MAX];
  mr_error e;
  if (mr_key_format(&r->key, text, sizeof text, &e))
    snprintf(text, sizeof text, "?");
  fprintf(stderr, "  %s %s (%zu value bytes)\n", side, text, r->len);
}

bool st_list_equal(const st_list *got, const st_list *want, const char *what) {
  size_t i = 0, j = 0;
  bool ok = true;
  int shown = 0;
  while ((i < got->n || j < want->n) && shown < 8) {
    int c = i >= got->n ? 1 : j >= want->n ? -1 : rec_cmp(&got->r[i], &want->r[j]);
    if (c == 0) {
      i++, j++;
      continue;
    }
    if (ok)
      fprintf(stderr, "%s: store (got) and model (want) differ:\n", what);
    ok = false;
    shown++;
    if (c < 0)
      print_rec("got only ", &got->r[i++]);
    else
      print_rec("want only", &want->r[j++]);
  }
  if (!ok)
    fprintf(stderr, "  (got %zu records, want %zu)\n", got->n, want->n);
  return ok;
}

mr_status st_collect(void *ctx, const mr_key *k, const ProtobufCMessage *v, mr_error *err) {
  uint8_t *val = NULL;
  size_t len = 0;
  mr_status rc = mr_value_encode(k->kind, v, &val, &len, err);
  if (rc)
    return rc;
  st_list_add(ctx, k, val, len);
  free(val);
  return MR_OK;
}
