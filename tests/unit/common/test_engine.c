/*
 * test_engine.c — see test_engine.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "test_engine.h"

int test_engine_setup(void **state) {
  sql_engine *e = NULL;
  sql_error err;
  sql_engine_options o = {.server_version = "15.0 (moraine test)"};
  if (sql_engine_open(&o, &e, &err) != MR_OK) {
    fprintf(stderr, "open: %s\n", err.base.msg);
    return -1;
  }
  *state = e;
  return 0;
}

int test_engine_teardown(void **state) {
  sql_engine_close(*state);
  return 0;
}

void test_engine_exec(sql_engine *e, const char *sql) {
  sql_error err;
  if (sql_engine_exec(e, sql, &err) != MR_OK)
    fail_msg("%s\n  -> %s %s", sql, err.sqlstate, err.base.msg);
}
