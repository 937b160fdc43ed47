/* test_pg_buf.c — message framing: lengths patched once, sticky failure,
 * bounds-checked parsing, and the reader's length checks (per-type limits,
 * bodies larger than one read step). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pgwire/pg_buf.h"

static void message_length_is_patched(void **state) {
  pg_buf b = {0};
  pg_buf_begin(&b, 'C');
  pg_buf_str(&b, "SELECT 1");
  pg_buf_end(&b);
  pg_buf_begin(&b, 'Z');
  pg_buf_u8(&b, 'I');
  pg_buf_end(&b);
  static const uint8_t want[] = {'C', 0, 0, 0, 13, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0,
                                 'Z', 0, 0, 0, 5,  'I'};
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.data, want, sizeof want);
  assert_false(b.failed);
  pg_buf_free(&b);
}

static void integers_are_big_endian(void **state) {
  pg_buf b = {0};
  pg_buf_begin(&b, 'D');
  pg_buf_i16(&b, -2);
  pg_buf_i32(&b, 0x01020304);
  pg_buf_end(&b);
  static const uint8_t want[] = {'D', 0, 0, 0, 10, 0xFF, 0xFE, 1, 2, 3, 4};
  assert_memory_equal(b.data, want, sizeof want);
  pg_buf_free(&b);
}

static void flush_writes_and_empties(void **state) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pg_buf b = {0};
  pg_buf_begin(&b, 'I');
  pg_buf_end(&b);
  mr_error err;
  assert_int_equal(pg_buf_flush(&b, &(pg_io){sv[0], NULL}, &err), MR_OK);
  assert_int_equal(b.len, 0);
  uint8_t got[5];
  assert_int_equal(read(sv[1], got, sizeof got), 5);
  static const uint8_t want[] = {'I', 0, 0, 0, 4};
  assert_memory_equal(got, want, 5);
  close(sv[1]);
  pg_buf_begin(&b, 'I');
  pg_buf_end(&b);
  assert_int_not_equal(pg_buf_flush(&b, &(pg_io){sv[0], NULL}, &err), MR_OK); /* peer gone */
  close(sv[0]);
  pg_buf_free(&b);
}

static void failed_flag_is_sticky(void **state) {
  pg_buf b = {0};
  b.failed = true;
  pg_buf_begin(&b, 'C');
  pg_buf_str(&b, "x");
  pg_buf_end(&b);
  assert_int_equal(b.len, 0);
  mr_error err;
  assert_int_equal(pg_buf_flush(&b, &(pg_io){-1, NULL}, &err), MR_ERR_NOMEM);
  pg_buf_free(&b);
}

static void msg_getters_are_bounds_checked(void **state) {
  uint8_t body[] = {0, 5, 'a', 'b', 0, 0, 0, 0, 0};
  pg_msg m = {'X', body, sizeof body, 0, false};
  assert_int_equal(pg_msg_i16(&m), 5);
  assert_string_equal(pg_msg_str(&m), "ab");
  assert_int_equal(pg_msg_i32(&m), 0);
  assert_false(m.bad);
  assert_true(pg_msg_at_end(&m));
  assert_int_equal(pg_msg_i16(&m), 0);
  assert_true(m.bad);
  uint8_t unterminated[] = {'a', 'b'};
  pg_msg u = {'X', unterminated, sizeof unterminated, 0, false};
  assert_string_equal(pg_msg_str(&u), "");
  assert_true(u.bad);
}

static mr_status read_from(const uint8_t *bytes, size_t n, size_t max, pg_msg *m, bool startup) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  assert_int_equal(write(sv[1], bytes, n), (ssize_t)n);
  close(sv[1]);
  pg_reader *r = calloc(1, sizeof *r);
  pg_io io = {sv[0], NULL};
  r->io = &io;
  r->max_message = max;
  mr_error err;
  mr_status rc = startup ? pg_read_startup(r, m, &err) : pg_read_message(r, m, &err);
  free(r);
  close(sv[0]);
  return rc;
}

static void reader_checks_lengths(void **state) {
  pg_msg m;
  static const uint8_t ok[] = {'Q', 0, 0, 0, 6, 'x', 0};
  assert_int_equal(read_from(ok, sizeof ok, 1024, &m, false), MR_OK);
  assert_int_equal(m.type, 'Q');
  assert_int_equal(m.len, 2);
  pg_msg_free(&m);
  static const uint8_t too_short[] = {'Q', 0, 0, 0, 3};
  assert_int_equal(read_from(too_short, sizeof too_short, 1024, &m, false), MR_ERR_INVALID);
  static const uint8_t oversized[] = {'Q', 0x7F, 0xFF, 0xFF, 0xFF};
  assert_int_equal(read_from(oversized, sizeof oversized, 1024, &m, false), MR_ERR_INVALID);
  static const uint8_t truncated[] = {'Q', 0, 0, 0, 9, 'a'};
  assert_int_equal(read_from(truncated, sizeof truncated, 1024, &m, false), MR_ERR_IO);
  assert_int_equal(read_from(NULL, 0, 1024, &m, false), MR_ERR_CLOSED);
  static const uint8_t big_startup[] = {0, 1, 0, 0, 0, 3, 0, 0};
  assert_int_equal(read_from(big_startup, sizeof big_startup, 1024, &m, true), MR_ERR_INVALID);
}

/* Per-type limits: small messages (Sync, ...) are refused early, and a
 * huge declared length only fails when the bytes do not come. */
static void reader_limits_by_type(void **state) {
  pg_msg m;
  size_t max = (size_t)256 << 20;
  static const uint8_t big_sync[] = {'S', 0, 0, 0x4E, 0x24}; /* 20004 */
  assert_int_equal(read_from(big_sync, sizeof big_sync, max, &m, false), MR_ERR_INVALID);
  static const uint8_t big_query[] = {'Q', 0, 0, 0x4E, 0x24, 'a'};
  assert_int_equal(read_from(big_query, sizeof big_query, max, &m, false), MR_ERR_IO);
  static const uint8_t huge_bind[] = {'B', 0x0C, 0x80, 0x00, 0x04, 'a', 'b', 'c'}; /* 200 MiB */
  assert_int_equal(read_from(huge_bind, sizeof huge_bind, max, &m, false), MR_ERR_IO);
  static const uint8_t over_max[] = {'B', 0x10, 0x00, 0x00, 0x05};
  assert_int_equal(read_from(over_max, sizeof over_max, max, &m, false), MR_ERR_INVALID);
}

typedef struct writer {
  int fd;
  const uint8_t *data;
  size_t n;
} writer;

static void *write_all(void *arg) {
  writer *w = arg;
  size_t off = 0;
  while (off < w->n) {
    ssize_t k = write(w->fd, w->data + off, w->n - off);
    if (k <= 0)
      break;
    off += (size_t)k;
  }
  close(w->fd);
  return NULL;
}

/* A body larger than the first read step arrives whole and in order. */
static void reader_reads_large_bodies(void **state) {
  size_t body = 300000;
  uint8_t *bytes = malloc(body + 5);
  assert_non_null(bytes);
  bytes[0] = 'd';
  uint32_t len = (uint32_t)body + 4;
  bytes[1] = (uint8_t)(len >> 24);
  bytes[2] = (uint8_t)(len >> 16);
  bytes[3] = (uint8_t)(len >> 8);
  bytes[4] = (uint8_t)len;
  for (size_t i = 0; i < body; i++)
    bytes[5 + i] = (uint8_t)(i * 7);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  writer w = {sv[1], bytes, body + 5};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_all, &w), 0);
  pg_reader *r = calloc(1, sizeof *r);
  pg_io io = {sv[0], NULL};
  r->io = &io;
  r->max_message = (size_t)1 << 20;
  pg_msg m;
  mr_error err;
  assert_int_equal(pg_read_message(r, &m, &err), MR_OK);
  assert_int_equal(m.type, 'd');
  assert_int_equal(m.len, body);
  assert_memory_equal(m.data, bytes + 5, body);
  assert_int_equal(m.data[body], 0);
  pg_msg_free(&m);
  pthread_join(t, NULL);
  free(r);
  close(sv[0]);
  free(bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(message_length_is_patched), cmocka_unit_test(integers_are_big_endian),
      cmocka_unit_test(flush_writes_and_empties),  cmocka_unit_test(failed_flag_is_sticky),
      cmocka_unit_test(msg_getters_are_bounds_checked), cmocka_unit_test(reader_checks_lengths),
      cmocka_unit_test(reader_limits_by_type),          cmocka_unit_test(reader_reads_large_bodies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
