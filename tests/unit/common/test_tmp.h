/*
 * test_tmp.h — per-run temp folders for the C tests that need a real
 * SlateDB folder: one mkdtemp root under $MORAINE_TEST_TMP (or /tmp), and
 * file:// urls of fresh stores below it. Not thread-safe; one root a process.
 */
#ifndef MR_TEST_TMP_H
#define MR_TEST_TMP_H

#include <stddef.h>

/* Creates this run's temp root, named after prefix; 0 on success. */
int test_tmp_setup(const char *prefix);
/* Removes the temp root and everything in it. */
void test_tmp_teardown(void);
/* Writes the file:// url of a store folder `name` under the root into url. */
void test_tmp_url(const char *name, char *url, size_t cap);

#endif
