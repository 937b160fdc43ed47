/*
 * store_downgrade.h — TESTS ONLY: turns a stopped store of the latest
 * layout into the same catalog at an older layout format, as the
 * migration tests need it: the directories that format lacks are deleted
 * (9 and 10: name and delete_target; 11: delete_target) and sys/format is
 * rewritten with that layout_version, its other fields kept. Everything
 * goes straight through kv; the keys come from the key tree (src/key),
 * never from bytes written out here. Used by tests/unit/store/test_migrate.c
 * and by moraine-keytool's `downgrade` (tests/tools/keytool.c).
 */
#ifndef MR_STORE_DOWNGRADE_H
#define MR_STORE_DOWNGRADE_H

#include "base/mr_error.h"
#include "kv/kv.h"

/* Downgrades the store open as db (a kv writer) to layout `format` (9, 10
 * or 11), in one batch. *removed (may be NULL) counts the keys deleted. */
mr_status test_store_downgrade(kv_db *db, unsigned format, size_t *removed,
                               mr_error *err) MR_MUST_CHECK;

#endif
