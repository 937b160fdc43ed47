/*
 * sql_history.h — which catalog history a statement can see, read from its
 * parse tree, so that the server may keep history out of its engine until a
 * statement needs it (issue 13: start and memory that do not grow with
 * history).
 *
 * Four classes of rows may be absent from the engine ("not resident"):
 *   SQL_HIST_SNAPSHOT     ducklake_snapshot / ducklake_snapshot_changes rows
 *                         below the resident floor (old snapshots);
 *   SQL_HIST_DATA_FILE    ducklake_data_file rows that ended at or before the
 *   SQL_HIST_DELETE_FILE  ducklake_delete_file  load's head snapshot (H0);
 *   SQL_HIST_FILE_STATS   ducklake_file_column_stats / _variant_stats rows of
 *                         such data files (bounded through the data file they
 *                         are joined to: bound and ids are the file's);
 *   SQL_HIST_INLINE_ROW   rows of a ducklake_inlined_data_T_V table that ended
 *                         at or before H0 (bound on end_snapshot; the id is
 *                         always T, from the table's name: its other columns
 *                         are the user's and may be named anything).
 * For every reference to such a table the analysis gives a need: a bound
 * the statement's own predicates put on the rows it can see, and the ids it
 * is limited to. The layer that owns residency (catalog) decides from its
 * floor / H0 whether rows must be loaded first.
 *
 * Soundness, the one invariant: a need with bound b promises that the
 * statement's result is the same with or without every row whose column
 * (snapshot_id for snapshots, end_snapshot for files) is non-NULL and below
 * b. A predicate only counts when removing such rows cannot change what the
 * statement returns or changes:
 *   - WHERE conjuncts count for a table that no outer join may NULL-extend;
 *   - ON conditions count for the inner joins above the table and for the
 *     outer joins whose NULL-supplying side it is on (a row failing ON never
 *     joins, so its absence is invisible);
 *   - `SELECT max(snapshot_id) FROM ducklake_snapshot` sees the newest
 *     snapshot, which is always resident, so it needs nothing;
 *   - file stats joined by `s.data_file_id = d.data_file_id` (WHERE, or the
 *     ON of their own join) to a data file item d of the same level take d's
 *     bound: a stats row of a file d's predicates reject only ever joins
 *     that rejected row.
 * Every reference to an inlined-data table gives a need, even one whose
 * predicates see no history (bound SQL_HIST_NONE_SEEN), and so does an
 * INSERT or COPY FROM into one, which reads nothing: a writer may keep a
 * table's current inlined rows out of the engine too, and they must be in
 * before a statement reads them or adds a row next to them.
 *
 * Anything the analysis does not understand (a parameter, a function of the
 * column, an unresolvable unqualified column, a COPY of the table, NOT)
 * gives no bound: the whole class, or the named ids, must be resident.
 */
#ifndef MR_SQL_HISTORY_H
#define MR_SQL_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "sql/sql.h"

typedef enum sql_hist_class {
  SQL_HIST_SNAPSHOT = 0,
  SQL_HIST_DATA_FILE,
  SQL_HIST_DELETE_FILE,
  SQL_HIST_FILE_STATS,
  SQL_HIST_INLINE_ROW,
  SQL_HIST_NCLASS
} sql_hist_class;

/* No bound: every row of the class (or of the ids) may be seen. */
#define SQL_HIST_UNBOUNDED INT64_MIN
/* Rows with a non-NULL column are never seen (`end_snapshot IS NULL`). */
#define SQL_HIST_NONE_SEEN INT64_MAX

typedef struct sql_hist_need {
  sql_hist_class cls;
  /* Rows whose column (snapshot_id; end_snapshot for files) is non-NULL and
   * below bound cannot change the result. */
  int64_t bound;
  /* Snapshots: the snapshot ids the statement is limited to (a point read
   * each); files: the table ids. nids == 0: not limited. Owned. */
  int64_t *ids;
  size_t nids;
  char *schema; /* the table's schema as written; NULL: unqualified. Owned. */
} sql_hist_need;

typedef struct sql_hist_needs {
  sql_hist_need *v;
  size_t n;
} sql_hist_needs;

/* The needs of one statement's parse tree (a PgQuery__Node, passed as
 * const void * so this header does not expose libpg_query). Appends to out;
 * MR_ERR_NOMEM is the only failure. */
mr_status sql_history_analyze(const void *stmt_node, sql_hist_needs *out,
                              sql_error *err) MR_MUST_CHECK;
void sql_hist_needs_free(sql_hist_needs *n);

/* Calls fn on each direct sub-message of a parse-tree message m (through
 * protobuf-c's descriptors, so no node type can hide one), in field order;
 * stops at and returns the first status that is not MR_OK. The one generic
 * tree walk of the planner and of this analysis. */
struct ProtobufCMessage;
typedef mr_status (*sql_tree_fn)(void *ctx, const struct ProtobufCMessage *child);
mr_status sql_tree_each_child(const struct ProtobufCMessage *m, sql_tree_fn fn, void *ctx);

/* The class a table name belongs to, or -1. */
int sql_hist_class_of(const char *relname);
const char *sql_hist_class_name(sql_hist_class c);

#endif /* MR_SQL_HISTORY_H */
