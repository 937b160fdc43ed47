/*
 * keytool.c — TESTS ONLY: reads and damages a STOPPED store key by key, so
 * the tests can hand `moraine verify` each kind of damage it must report.
 * Keys are given in their text form (key.h, mr_key_format) or, for bytes
 * that are no key, as 0x-hex. It also turns a store into an older layout
 * for the `moraine migrate` tests. Every write goes straight through kv in one
 * batch, bypassing the store's commit rules on purpose. Never shipped: it
 * is built under tests/ and installed nowhere.
 *
 *   moraine-keytool URL keys                  every key, in text form
 *   moraine-keytool URL delete KEY            delete the key
 *   moraine-keytool URL put KEY HEX           put raw value bytes ("" empty)
 *   moraine-keytool URL copy FROM TO          put FROM's value bytes under TO
 *   moraine-keytool URL set-head SNAP BATCHES overwrite sys/head
 *   moraine-keytool URL downgrade FORMAT      the same catalog at layout 9, 10
 *                                             or 11 (common/store_downgrade.h)
 *
 * Exit 0 done, 1 failed (one line on stderr), 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key/key.h"
#include "kv/kv.h"
#include "store_downgrade.h"
#include "value/value.h"

static int fail(const char *what, const mr_error *e) {
  fprintf(stderr, "moraine-keytool: %s: %s\n", what, e ? e->msg : "");
  return 1;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Hex text (an optional 0x) into out; false when malformed. */
static bool unhex(const char *s, uint8_t *out, size_t cap, size_t *len) {
  if (strncmp(s, "0x", 2) == 0)
    s += 2;
  size_t n = strlen(s);
  if (n % 2 || n / 2 > cap)
    return false;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  *len = n / 2;
  return true;
}

/* A key argument: text form, or 0x-hex bytes. */
static bool key_arg(const char *s, mr_keybuf *kb) {
  if (strncmp(s, "0x", 2) == 0)
    return unhex(s, kb->b, sizeof kb->b, &kb->len);
  static uint8_t name[MR_KEY_MAX_NAME];
  mr_key k;
  mr_error e;
  if (mr_key_parse(s, strlen(s), &k, name, sizeof name, &e) != MR_OK ||
      mr_key_encode(&k, kb, &e) != MR_OK) {
    fprintf(stderr, "moraine-keytool: bad key %s: %s\n", s, e.msg);
    return false;
  }
  return true;
}

static int list_keys(kv_db *db) {
  kv_iter *it = NULL;
  mr_error e;
  if (kv_iter_open(db, NULL, 0, NULL, 0, &it, &e))
    return fail("scan", &e);
  const void *kp, *vp;
  size_t kl, vl;
  mr_status rc;
  while ((rc = kv_iter_next(it, &kp, &kl, &vp, &vl, &e)) == MR_OK) {
    mr_key k;
    char text[MR_KEY_TEXT_MAX];
    if (mr_key_decode(kp, kl, &k, &e) == MR_OK &&
        mr_key_format(&k, text, sizeof text, &e) == MR_OK) {
      printf("%s\n", text);
    } else {
      printf("0x");
      for (size_t i = 0; i < kl; i++)
        printf("%02x", ((const uint8_t *)kp)[i]);
      printf("\n");
    }
  }
  kv_iter_close(it);
  return rc == MR_ERR_NOT_FOUND ? 0 : fail("scan", &e);
}

static int apply(kv_db *db, int argc, char **argv) {
  const char *op = argv[2];
  mr_keybuf kb;
  mr_error e;
  kv_batch *b = NULL;
  if (kv_batch_new(&b, &e))
    return fail("batch", &e);
  mr_status rc = MR_OK;
  static uint8_t val[1 << 16];
  size_t vlen = 0;
  if (strcmp(op, "delete") == 0 && argc == 4) {
    if (!key_arg(argv[3], &kb))
      goto usage;
    rc = kv_batch_delete(b, kb.b, kb.len, &e);
  } else if (strcmp(op, "put") == 0 && argc == 5) {
    if (!key_arg(argv[3], &kb) || !unhex(argv[4], val, sizeof val, &vlen))
      goto usage;
    rc = kv_batch_put(b, kb.b, kb.len, val, vlen, &e);
  } else if (strcmp(op, "copy") == 0 && argc == 5) {
    mr_keybuf from;
    void *v = NULL;
    size_t n = 0;
    if (!key_arg(argv[3], &from) || !key_arg(argv[4], &kb))
      goto usage;
    rc = kv_get(db, from.b, from.len, &v, &n, &e);
    if (!rc)
      rc = kv_batch_put(b, kb.b, kb.len, v, n, &e);
    kv_free(v);
  } else if (strcmp(op, "set-head") == 0 && argc == 5) {
    Moraine__V1__SysHead h = MORAINE__V1__SYS_HEAD__INIT;
    h.snapshot_id = strtoull(argv[3], NULL, 10);
    h.batch_count = strtoull(argv[4], NULL, 10);
    mr_key k = {.kind = MR_KK_SYS_HEAD};
    uint8_t *enc = NULL;
    rc = mr_key_encode(&k, &kb, &e);
    if (!rc)
      rc = mr_value_encode(MR_KK_SYS_HEAD, &h.base, &enc, &vlen, &e);
    if (!rc)
      rc = kv_batch_put(b, kb.b, kb.len, enc, vlen, &e);
    free(enc);
  } else if (strcmp(op, "downgrade") == 0 && argc == 4) {
    kv_batch_free(b);
    size_t removed = 0;
    if (test_store_downgrade(db, (unsigned)strtoul(argv[3], NULL, 10), &removed, &e))
      return fail(op, &e);
    printf("%zu keys removed\n", removed);
    return 0;
  } else {
    goto usage;
  }
  if (!rc)
    rc = kv_write(db, b, &e);
  kv_batch_free(b);
  return rc ? fail(op, &e) : 0;
usage:
  kv_batch_free(b);
  fprintf(stderr, "moraine-keytool: bad arguments for '%s' (see tests/tools/keytool.c)\n", op);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: moraine-keytool URL keys|delete|put|copy|set-head|downgrade ...\n");
    return 2;
  }
  kv_open_options o = {.read_only = strcmp(argv[2], "keys") == 0};
  kv_db *db = NULL;
  mr_error e;
  if (kv_open(argv[1], &o, &db, &e))
    return fail("open", &e);
  int status = o.read_only ? list_keys(db) : apply(db, argc, argv);
  if (kv_close(db, &e) && status == 0)
    status = fail("close", &e);
  return status;
}
