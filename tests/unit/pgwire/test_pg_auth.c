/* test_pg_auth.c — SCRAM-SHA-256 against RFC 7677's test vector, a wrong
 * proof, verifiers in PostgreSQL's text form, the users file and the
 * password file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pgwire/pg_auth.h"
#include "pgwire/pg_users.h"

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
  pg_scram_verifier v;
  assert_int_equal(pg_scram_verifier_make("pencil", &v, &err), MR_OK);
  assert_int_equal(pg_scram_init(&s, &v, &err), MR_OK);
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

/* RFC 7677's password and salt as PostgreSQL stores them in pg_authid
 * (computed independently, with Python's hashlib and hmac). */
static const char rfc_verifier[] =
    "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
    "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";

static void verifier_text_form(void **state) {
  mr_error err;
  pg_scram_verifier v, parsed;
  assert_int_equal(pg_scram_verifier_derive("pencil", salt, sizeof salt, 4096, &v, &err), MR_OK);
  char text[256];
  assert_int_equal(pg_scram_verifier_format(&v, text, sizeof text, &err), MR_OK);
  assert_string_equal(text, rfc_verifier);
  assert_int_equal(pg_scram_verifier_parse(rfc_verifier, &parsed, &err), MR_OK);
  assert_memory_equal(&parsed, &v, sizeof v);
  /* a parsed verifier authenticates RFC 7677's exchange */
  pg_scram s;
  assert_int_equal(pg_scram_init(&s, &parsed, &err), MR_OK);
  char out[512];
  assert_int_equal(pg_scram_client_first(&s, client_first, strlen(client_first), out, sizeof out,
                                         &err),
                   MR_OK);
  assert_non_null(strstr(out, ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
  static const char *bad[] = {
      "md5abcdef",
      "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm",
      "SCRAM-SHA-256$0:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
      "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
      "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$AAAA:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
      "SCRAM-SHA-256$4096:!!!!$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
      "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(pg_scram_verifier_parse(bad[i], &parsed, &err), MR_ERR_INVALID);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void users_file(void **state) {
  char dir[] = "/tmp/moraine-users-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/users", dir);
  char text[1024];
  snprintf(text, sizeof text, "# analysts read, the pipeline writes\n\n  alice read %s\nbob write %s\n",
           rfc_verifier, rfc_verifier);
  write_file(path, text);
  mr_error err;
  pg_users *u = NULL;
  assert_int_equal(pg_users_open_file(path, &u, &err), MR_OK);
  pg_scram_verifier v, want;
  pg_role role;
  assert_int_equal(pg_scram_verifier_parse(rfc_verifier, &want, &err), MR_OK);
  assert_true(pg_users_find(u, "alice", &v, &role));
  assert_int_equal(role, PG_ROLE_READ);
  assert_memory_equal(&v, &want, sizeof v);
  assert_true(pg_users_find(u, "bob", &v, &role));
  assert_int_equal(role, PG_ROLE_WRITE);
  /* unknown: no user, and a verifier that is not anyone's */
  assert_false(pg_users_find(u, "mallory", &v, &role));
  assert_memory_not_equal(v.stored_key, want.stored_key, sizeof v.stored_key);

  /* moraine user add: replace alice in place, add carol, keep the rest */
  pg_scram_verifier carol;
  assert_int_equal(pg_scram_verifier_make("secret", &carol, &err), MR_OK);
  assert_int_equal(pg_users_file_set(path, "alice", PG_ROLE_WRITE, &want, NULL, &err), MR_OK);
  assert_int_equal(pg_users_file_set(path, "carol", PG_ROLE_READ, &carol, "lake,lake2", &err), MR_OK);
  assert_int_equal(pg_users_file_set(path, "has space", PG_ROLE_READ, &carol, NULL, &err),
                   MR_ERR_INVALID);
  assert_int_equal(pg_users_reload(u, &err), MR_OK);
  assert_true(pg_users_find(u, "alice", &v, &role));
  assert_int_equal(role, PG_ROLE_WRITE);
  assert_true(pg_users_find(u, "carol", &v, &role));
  assert_memory_equal(&v, &carol, sizeof v);
  /* grants: carol only lake and lake2, alice everything, nobody nothing */
  assert_true(pg_users_may_use(u, "carol", "lake"));
  assert_true(pg_users_may_use(u, "carol", "lake2"));
  assert_false(pg_users_may_use(u, "carol", "lak"));
  assert_false(pg_users_may_use(u, "carol", "other"));
  assert_false(pg_users_may_use(u, "carol", "lake,lake2")); /* a hostile dbname */
  assert_false(pg_users_may_use(u, "carol", ""));
  assert_true(pg_users_may_use(u, "alice", "other"));
  assert_false(pg_users_may_use(u, "mallory", "lake"));
  assert_int_equal(pg_users_file_set(path, "dan", PG_ROLE_READ, &carol, "a,,b", &err),
                   MR_ERR_INVALID);
  FILE *f = fopen(path, "r");
  char first[128];
  assert_non_null(fgets(first, sizeof first, f)); /* the comment stays first */
  fclose(f);
  assert_string_equal(first, "# analysts read, the pipeline writes\n");

  /* a broken file: the reload fails with the line, the old users stay */
  snprintf(text, sizeof text, "alice read %s\nalice write %s\n", rfc_verifier, rfc_verifier);
  write_file(path, text);
  assert_int_equal(pg_users_reload(u, &err), MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "line 2"));
  assert_true(pg_users_find(u, "carol", &v, &role));
  write_file(path, "dave admin SCRAM-SHA-256$1:AAAA$AAAA:AAAA\n");
  assert_int_equal(pg_users_reload(u, &err), MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "unknown role"));
  write_file(path, "erin read\n");
  assert_int_equal(pg_users_reload(u, &err), MR_ERR_INVALID);
  assert_non_null(strstr(err.msg, "NAME ROLE VERIFIER"));
  write_file(path, "erin read SCRAM-SHA-256$1:AAAA$AAAA:AAAA a,,b\n");
  assert_int_equal(pg_users_reload(u, &err), MR_ERR_INVALID);
  pg_users_free(u);

  /* --password-file: any name, write */
  assert_int_equal(pg_users_open_password("pencil", &u, &err), MR_OK);
  assert_true(pg_users_find(u, "anyone", &v, &role));
  assert_int_equal(role, PG_ROLE_WRITE);
  pg_users_free(u);
  remove(path);
  rmdir(dir);
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
      cmocka_unit_test(verifier_text_form),
      cmocka_unit_test(users_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
