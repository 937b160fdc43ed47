/*
 * test_engine.h — an embedded engine for the C tests that run SQL in it: a
 * cmocka group setup that opens one (kept in *state) and its teardown, and
 * an exec that fails the running test with the statement and the engine's
 * error.
 */
#ifndef MR_TEST_ENGINE_H
#define MR_TEST_ENGINE_H

#include "sql/sql.h"

int test_engine_setup(void **state);
int test_engine_teardown(void **state);
void test_engine_exec(sql_engine *e, const char *sql);

#endif
