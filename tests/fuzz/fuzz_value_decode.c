/*
 * fuzz_value_decode.c — libFuzzer target for mr_value_decode.
 *
 * Input: byte 0 picks the kind, byte 1 bit 0 the history flag (versioned
 * kinds only), then MR_KEY_MAX_COMP big-endian u16 key components (small,
 * so the fuzzer can match them in a value; end_snapshot last), the rest is
 * the value. Seeds: tests/golden/values.txt lines, prefixed so. A decode
 * must never crash; a success must pass the key check, re-encode, and the
 * re-encoding must decode to an equal encoding again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "value/value.h"

#define KEY_PREFIX (2 + 2 * MR_KEY_MAX_COMP)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < KEY_PREFIX)
    return 0;
  mr_key k;
  memset(&k, 0, sizeof k);
  k.kind = (mr_key_kind)(data[0] % MR_KK_COUNT);
  const mr_key_kind_info *info = mr_key_kind_get(k.kind);
  k.history = (info->flags & MR_KF_VERSIONED) && (data[1] & 1);
  for (unsigned i = 0; i < MR_KEY_MAX_COMP; i++)
    k.c[i] = (uint64_t)data[2 + 2 * i] << 8 | data[3 + 2 * i];
  if (info->flags & MR_KF_HAS_NAME) {
    k.c[0] %= MR_NAME_KIND_COUNT;
    k.name = (const uint8_t *)"n";
    k.name_len = 1;
  }

  /* an exact-size copy, so any read past the value is an ASan report */
  size_t len = size - KEY_PREFIX;
  uint8_t *val = malloc(len ? len : 1);
  if (val == NULL)
    return 0;
  memcpy(val, data + KEY_PREFIX, len);

  ProtobufCMessage *msg = NULL;
  mr_error err;
  mr_status rc = mr_value_decode(&k, val, len, &msg, &err);
  if (rc == MR_OK) {
    uint8_t *again = NULL, *third = NULL;
    size_t n = 0, n3 = 0;
    ProtobufCMessage *msg2 = NULL;
    if (mr_value_check_key(&k, msg, &err) != MR_OK)
      abort();
    if (mr_value_encode(k.kind, msg, &again, &n, &err) != MR_OK)
      abort();
    if (mr_value_decode(&k, again, n, &msg2, &err) != MR_OK)
      abort();
    if (mr_value_encode(k.kind, msg2, &third, &n3, &err) != MR_OK)
      abort();
    if (n3 != n || (n > 0 && memcmp(again, third, n) != 0))
      abort();
    mr_value_free(msg2);
    free(third);
    free(again);
    mr_value_free(msg);
  } else if (rc != MR_ERR_CORRUPTION || msg != NULL) {
    abort();
  }
  free(val);
  return 0;
}
