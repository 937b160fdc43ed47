/*
 * import_plan.h — which store commit of an import a source row goes into.
 *
 * An import replays the source catalog as one store commit per retained
 * snapshot, in id order (group g = the g-th snapshot). A row that began at
 * snapshot b is inserted by the first commit whose snapshot is >= b (b
 * itself, or the next retained one when b was expired), and ended the same
 * way. A row begun and ended within one group is visible at no retained
 * snapshot, yet the source kept it (DuckLake's expiry keeps inlined rows,
 * for one): that group's commit writes it in its ended form only, as a
 * native store holds it.
 */
#ifndef MR_CLI_IMPORT_PLAN_H
#define MR_CLI_IMPORT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMPORT_NO_GROUP SIZE_MAX

/* The group of snapshot id s: the index of the first of the n ascending ids
 * that is >= s; IMPORT_NO_GROUP when s is after the newest. */
size_t import_group_of(const int64_t *ids, size_t n, int64_t s);

/* The groups of a versioned row (begin, and end when has_end): *del is
 * IMPORT_NO_GROUP for a live row, *ins is for a row at no retained snapshot
 * (written ended by *del's commit only). False, *bad, when the row names a
 * snapshot after the newest or ends before it begins. */
bool import_row_groups(const int64_t *ids, size_t n, int64_t begin, bool has_end, int64_t end,
                       size_t *ins, size_t *del, bool *bad);

#endif
