/* test_pg_auth.c — SCRAM-SHA-256 against RFC 7677's test vector, a wrong
 * proof, and the password file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgwire/pg_auth.h"

/* RFC 7677 section 3: user "user", password "pencil". */
static const char client_first[] = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
static const char server_first[] =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
static const char client_final[] =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
static const char server_final[] = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
static const uint8_t salt[] = {0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
                               0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81};

static void rfc7677_vector(void **state) {
  pg_scram s;
  mr_error err;
  assert_int_equal(pg_scram_init_fixed(&s, "pencil", salt, sizeof salt, 4096,
                                       "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", &err),
                   MR_OK);
  char out[512];
  assert_int_equal(pg_scram_client_first(&s, client_first, strlen(client_first), out, sizeof out, &err),
                   MR_OK);
  assert_string_equal(out, server_first);
  assert_int_equal(pg_scram_client_final(&s, client_final, strlen(client_final), out, sizeof out, &err),
                   MR_OK);
  assert_string_equal(out, server_final);
}

static void wrong_password_is_refused(void **state) {
  pg_scram s;
  mr_error err;
  assert_int_equal(pg_scram_init_fixed(&s, "pencil2", salt, sizeof salt, 4096,
                                       "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", &err),
                   MR_OK);
  char out[512];
  assert_int_equal(pg_scram_client_first(&s, client_first, strlen(client_first), out, sizeof out, &err),
                   MR_OK);
  assert_int_equal(pg_scram_client_final(&s, client_final, strlen(client_final), out, sizeof out, &err),
                   MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "password authentication failed"));
}

static void nonce_and_binding_are_checked(void **state) {
  pg_scram s;
  mr_error err;
  assert_int_equal(pg_scram_init(&s, "pencil", &err), MR_OK);
  char out[512];
  static const char cb[] = "p=tls-server-end-point,,n=,r=abc";
  assert_int_equal(pg_scram_client_first(&s, cb, strlen(cb), out, sizeof out, &err), MR_ERR_INVALID);
  static const char first[] = "n,,n=,r=abc";
  assert_int_equal(pg_scram_client_first(&s, first, strlen(first), out, sizeof out, &err), MR_OK);
  static const char bad_nonce[] = "c=biws,r=abcX,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
  assert_int_equal(pg_scram_client_final(&s, bad_nonce, strlen(bad_nonce), out, sizeof out, &err),
                   MR_ERR_INVALID);
  assert_int_equal(pg_scram_client_final(&s, "garbage", 7, out, sizeof out, &err), MR_ERR_INVALID);
}

/* The proof must be the last attribute and follow the others: a final
 * message starting with "p=" or with attributes after the proof is
 * refused before any proof arithmetic. */
static void proof_position_is_checked(void **state) {
  pg_scram s;
  mr_error err;
  assert_int_equal(pg_scram_init_fixed(&s, "pencil", salt, sizeof salt, 4096,
                                       "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", &err),
                   MR_OK);
  char out[512];
  assert_int_equal(
      pg_scram_client_first(&s, client_first, strlen(client_first), out, sizeof out, &err), MR_OK);
  static const char proof_first[] = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,c=biws,"
                                    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
  assert_int_equal(
      pg_scram_client_final(&s, proof_first, strlen(proof_first), out, sizeof out, &err),
      MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "malformed"));
  char proof_not_last[256];
  snprintf(proof_not_last, sizeof proof_not_last, "%s,x=1", client_final);
  assert_int_equal(
      pg_scram_client_final(&s, proof_not_last, strlen(proof_not_last), out, sizeof out, &err),
      MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "malformed"));
  /* a length that stops inside the proof: only len bytes count */
  assert_int_equal(
      pg_scram_client_final(&s, client_final, strlen(client_final) - 4, out, sizeof out, &err),
      MR_ERR_INVALID);
  assert_int_equal(
      pg_scram_client_final(&s, client_final, strlen(client_final), out, sizeof out, &err), MR_OK);
}

static void password_file_first_line(void **state) {
  char path[] = "/tmp/moraine-pw-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("hunter2\r\nignored\n", f);
  fclose(f);
  char pw[64];
  mr_error err;
  assert_int_equal(pg_password_file_read(path, pw, sizeof pw, &err), MR_OK);
  assert_string_equal(pw, "hunter2");
  f = fopen(path, "w");
  fclose(f);
  assert_int_equal(pg_password_file_read(path, pw, sizeof pw, &err), MR_ERR_INVALID);
  remove(path);
  assert_int_equal(pg_password_file_read(path, pw, sizeof pw, &err), MR_ERR_IO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rfc7677_vector),
      cmocka_unit_test(wrong_password_is_refused),
      cmocka_unit_test(nonce_and_binding_are_checked),
      cmocka_unit_test(proof_position_is_checked),
      cmocka_unit_test(password_file_first_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
