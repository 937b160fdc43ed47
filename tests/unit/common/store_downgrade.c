/*
 * store_downgrade.c — TESTS ONLY: see store_downgrade.h.
 */
#include "store_downgrade.h"

#include <stdlib.h>

#include "key/key.h"
#include "value/value.h"

/* Adds to b a delete of every key of subspace ss. */
static mr_status delete_subspace(kv_db *db, kv_batch *b, mr_subspace ss, size_t *removed,
                                 mr_error *err) {
  mr_key_range r;
  mr_status rc = mr_key_range_subspace(ss, &r, err);
  if (rc)
    return rc;
  kv_iter *it = NULL;
  rc = kv_iter_open(db, r.start.b, r.start.len, r.end.b, r.end.len, &it, err);
  if (rc)
    return rc;
  const void *kp, *vp;
  size_t kl, vl;
  while ((rc = kv_iter_next(it, &kp, &kl, &vp, &vl, err)) == MR_OK) {
    rc = kv_batch_delete(b, kp, kl, err);
    if (rc)
      break;
    (*removed)++;
  }
  kv_iter_close(it);
  if (rc == MR_ERR_NOT_FOUND) {
    mr_error_clear(err);
    rc = MR_OK;
  }
  return rc;
}

/* Adds to b sys/format with layout_version = format, the rest as stored. */
static mr_status put_format(kv_db *db, kv_batch *b, unsigned format, mr_error *err) {
  mr_key fk = {.kind = MR_KK_SYS_FORMAT};
  mr_keybuf kb;
  mr_status rc = mr_key_encode(&fk, &kb, err);
  if (rc)
    return rc;
  void *old = NULL;
  size_t olen = 0;
  rc = kv_get(db, kb.b, kb.len, &old, &olen, err);
  if (rc)
    return rc;
  ProtobufCMessage *m = NULL;
  rc = mr_value_decode(&fk, old, olen, &m, err);
  kv_free(old);
  if (rc)
    return rc;
  ((Moraine__V1__SysFormat *)m)->layout_version = format;
  uint8_t *val = NULL;
  size_t vlen = 0;
  rc = mr_value_encode(fk.kind, m, &val, &vlen, err);
  mr_value_free(m);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, vlen, err);
  free(val);
  return rc;
}

mr_status test_store_downgrade(kv_db *db, unsigned format, size_t *removed, mr_error *err) {
  size_t n = 0;
  if (format < 9 || format > 11)
    return mr_fail(err, MR_ERR_INVALID, "downgrade: layout %u is not one of 9, 10, 11", format);
  kv_batch *b = NULL;
  mr_status rc = kv_batch_new(&b, err);
  if (rc)
    return rc;
  if (format < 11)
    rc = delete_subspace(db, b, MR_SS_NAME, &n, err);
  if (!rc)
    rc = delete_subspace(db, b, MR_SS_DELETE_TARGET, &n, err);
  if (!rc)
    rc = put_format(db, b, format, err);
  if (!rc)
    rc = kv_write(db, b, err);
  kv_batch_free(b);
  if (removed)
    *removed = n;
  return rc;
}
