/*
 * catalog_internal.h — what the files of src/catalog share: DDL column-list
 * parsing, message helpers. Not part of the layer's contract.
 */
#ifndef MR_CATALOG_INTERNAL_H
#define MR_CATALOG_INTERNAL_H

#include "catalog/catalog.h"

struct catalog {
  store *st;
  sql_engine *e;
  char schema[CATALOG_MAX_SCHEMA + 1]; /* its DuckDB schema; "": public */
};

/* One parsed column of a CREATE TABLE: name and type text (malloc'd). */
typedef struct cat_ddl_col {
  char *name;
  char *type;
} cat_ddl_col;

/*
 * Parses "CREATE TABLE [IF NOT EXISTS] [schema.]name(col type, ...)" into the
 * table name (malloc'd, unquoted, without schema) and its columns. Returns
 * false when sql is not such a statement.
 */
bool cat_parse_create(const char *sql, char **table, cat_ddl_col **cols, size_t *ncols);
/* "DROP TABLE [IF EXISTS] [schema.]name" -> name (malloc'd), else false. */
bool cat_parse_drop(const char *sql, char **table);
void cat_ddl_cols_free(cat_ddl_col *cols, size_t n);

/* A new, initialized message of descriptor d (malloc'd; mr_value_free). */
ProtobufCMessage *cat_msg_new(const ProtobufCMessageDescriptor *d);
/* Deep copy through pack/unpack; NULL on allocation failure. */
ProtobufCMessage *cat_msg_copy(const ProtobufCMessage *m);
/* int64/uint64 field by name (false when absent/unset). */
bool cat_msg_i64(const ProtobufCMessage *m, const char *field, int64_t *v);
void cat_msg_set_i64(ProtobufCMessage *m, const char *field, int64_t v);
/* Appends child (ownership moves) to repeated message field fname. */
mr_status cat_msg_append(ProtobufCMessage *m, const char *fname, ProtobufCMessage *child,
                         mr_error *err) MR_MUST_CHECK;
/* Removes (frees) element i of repeated message field fname. */
void cat_msg_remove(ProtobufCMessage *m, const char *fname, size_t i);
/* Repeated message field access. */
size_t cat_msg_nrep(const ProtobufCMessage *m, const char *fname, ProtobufCMessage ***arr);
/* Do a and b (same descriptor) agree on every non-repeated field, except the
 * one named skip (may be NULL)? */
bool cat_msg_same(const ProtobufCMessage *a, const ProtobufCMessage *b, const char *skip);

/* The DuckLake table whose rows are the records of `kind` (the parent of
 * that kind's child rows), e.g. "ducklake_column"; "a record" if none. */
const char *catalog_parent_table(mr_key_kind kind);

/* Builds the key of `kind` from msg's fields named as the key components. */
bool cat_key_from_msg(mr_key_kind kind, const ProtobufCMessage *msg, mr_key *k);

/* Is this an inlined table name? Sets the ids (ver only for data tables). */
bool cat_inline_data_name(const char *name, int64_t *tid, int64_t *ver);
bool cat_inline_delete_name(const char *name, int64_t *tid);

/*
 * The load-back guarantee (catalog_check.c): refuses (22P02, naming table,
 * column and type) a commit holding an inlined value that the start-up load
 * could not cast back into its column. No engine call when every inlined
 * column the commit writes has a text-safe type.
 */
mr_status cat_check_loadable(catalog *c, const sql_changes *ch, sql_error *err) MR_MUST_CHECK;

#endif /* MR_CATALOG_INTERNAL_H */
