/*
 * fuzz_key_decode.c — libFuzzer target for mr_key_decode.
 *
 * Any input must either fail as corruption or decode to a key that
 * re-encodes to exactly the input bytes, formats, and parses back to the
 * same key. Anything else aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_key_decode: %s: %s\n", what, detail);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mr_key k, p;
  mr_error err;
  mr_status rc = mr_key_decode(data, size, &k, &err);
  if (rc != MR_OK) {
    if (rc != MR_ERR_CORRUPTION || err.msg[0] == '\0')
      die("decode failed without a corruption message", err.msg);
    return 0;
  }

  static mr_keybuf out;
  if (mr_key_encode(&k, &out, &err) != MR_OK)
    die("decoded key does not encode", err.msg);
  if (out.len != size || memcmp(out.b, data, size) != 0)
    die("re-encoding differs from the input", "");

  static char text[MR_KEY_TEXT_MAX];
  if (mr_key_format(&k, text, sizeof text, &err) != MR_OK)
    die("decoded key does not format", err.msg);
  static uint8_t name[MR_KEY_MAX_NAME];
  if (mr_key_parse(text, strlen(text), &p, name, sizeof name, &err) != MR_OK)
    die("formatted key does not parse", err.msg);
  if (mr_key_compare(&k, &p) != 0)
    die("formatted key parses to another key", text);
  return 0;
}
