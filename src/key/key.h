/*
 * key.h — the RFC 0002 keyspace, defined once.
 *
 * This header owns the key tree: every subspace, every kind, the number and
 * names of each kind's components, and which kinds are versioned (mirrored
 * in history) or table-scoped. Encode, decode, the human-readable form, scan
 * bounds, golden vectors and docs/format.md are all derived from the two
 * tables below; nothing else in moraine may restate a key byte.
 *
 * Byte encoding (storekey-compatible, design.md §3):
 *   - each enum level (subspace, kind, name kind) is ONE byte: ordinal + 2;
 *   - u64 components: 8 bytes big-endian, in declaration order;
 *   - the one string (name/exact_name): every byte <= 0x01 is preceded by
 *     0x01, then a 0x00 terminator.
 * History keys are their current key with the subspace byte of `history`
 * and end_snapshot appended as the last u64.
 *
 * Invariants: ordinals and component order are an on-disk format. Append new
 * rows at the end of their subspace; never reorder, renumber or remove one.
 */
#ifndef MR_KEY_H
#define MR_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mr_error.h"

/* X(id, ordinal, text): the subspaces, leading key byte = ordinal + 2. */
#define MR_SUBSPACE_TABLE(X)                                                   \
  X(SYSTEM, 0, "sys")                                                          \
  X(SNAPSHOT, 1, "snapshot")                                                   \
  X(CURRENT, 2, "current")                                                     \
  X(HISTORY, 3, "history")                                                     \
  X(INLINE, 4, "inline")                                                       \
  X(INDEX, 5, "index")                                                         \
  X(SCHEMA_VERSION, 6, "schema_version")                                       \
  X(CHANGELOG, 7, "changelog")                                                 \
  X(NAME, 8, "name")                                                           \
  X(DELETE_TARGET, 9, "delete_target")

typedef enum mr_subspace {
#define MR_SUBSPACE_ENUM(id, ord, text) MR_SS_##id = ord,
  MR_SUBSPACE_TABLE(MR_SUBSPACE_ENUM)
#undef MR_SUBSPACE_ENUM
      MR_SS_COUNT
} mr_subspace;

/* Flags of a kind. */
#define MR_KF_VERSIONED 0x1u    /* mirrored in history with end_snapshot */
#define MR_KF_TABLE_SCOPED 0x2u /* first component is a table_id */
#define MR_KF_HAS_NAME 0x4u     /* carries the exact_name string (name kind) */

/*
 * X(id, subspace, kind_ordinal, text, ncomp, c0, c1, c2, c3, flags)
 *
 * kind_ordinal is the kind byte's ordinal within its subspace, or -1 where
 * the subspace has no kind level (snapshot, schema_version, changelog,
 * name, delete_target: the components follow the subspace byte directly).
 * text is the kind's name within its subspace; a key's printed path is
 * "<subspace>/<text>", or just "<subspace>" where there is no kind byte.
 * c0..c3 name the u64 components (NULL past ncomp). A kind declares at most
 * MR_KEY_MAX_COMP components counting a versioned kind's end_snapshot, so a
 * versioned kind has at most 3 (only inline/data_row, unversioned, has 4:
 * every version of an inlined row is its own key). The name kind's layout
 * is (name_kind enum byte, parent_id, exact_name, entity_id): its name_kind
 * is stored in c0, parent_id in c1, entity_id in c2, and the string beside.
 * The index subspace is reserved (RFC 0016): it has no kinds yet.
 */
#define MR_KEY_KIND_TABLE(X)                                                   \
  X(SYS_FORMAT, SYSTEM, 0, "format", 0, NULL, NULL, NULL, NULL, 0)             \
  X(SYS_HEAD, SYSTEM, 1, "head", 0, NULL, NULL, NULL, NULL, 0)                 \
  X(SYS_MIGRATION, SYSTEM, 2, "migration", 0, NULL, NULL, NULL, NULL, 0)       \
  X(SYS_MAINTENANCE, SYSTEM, 3, "maintenance_status", 0, NULL, NULL, NULL,     \
    NULL, 0)                                                                   \
  X(SNAPSHOT, SNAPSHOT, -1, "snapshot", 1, "snapshot_id", NULL, NULL, NULL, 0) \
  X(SCHEMA, CURRENT, 0, "schema", 1, "schema_id", NULL, NULL, NULL,            \
    MR_KF_VERSIONED)                                                           \
  X(TABLE, CURRENT, 1, "table", 1, "table_id", NULL, NULL, NULL,               \
    MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                      \
  X(VIEW, CURRENT, 2, "view", 1, "view_id", NULL, NULL, NULL, MR_KF_VERSIONED) \
  X(MACRO, CURRENT, 3, "macro", 1, "macro_id", NULL, NULL, NULL,               \
    MR_KF_VERSIONED)                                                           \
  X(COLUMN, CURRENT, 4, "column", 2, "table_id", "column_id", NULL, NULL,      \
    MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                      \
  X(PARTITION, CURRENT, 5, "partition", 2, "table_id", "partition_id", NULL,   \
    NULL, MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                \
  X(SORT, CURRENT, 6, "sort", 2, "table_id", "sort_id", NULL, NULL,            \
    MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                      \
  X(FILE, CURRENT, 7, "file", 2, "table_id", "data_file_id", NULL, NULL,       \
    MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                      \
  X(DELFILE, CURRENT, 8, "delfile", 2, "table_id", "delete_file_id", NULL,     \
    NULL, MR_KF_VERSIONED | MR_KF_TABLE_SCOPED)                                \
  X(MAPPING, CURRENT, 9, "mapping", 2, "table_id", "mapping_id", NULL, NULL,   \
    MR_KF_TABLE_SCOPED)                                                        \
  X(FSTAT, CURRENT, 10, "fstat", 3, "table_id", "data_file_id", "column_id",   \
    NULL, MR_KF_TABLE_SCOPED)                                                  \
  X(TSTAT, CURRENT, 11, "tstat", 1, "table_id", NULL, NULL, NULL,              \
    MR_KF_TABLE_SCOPED)                                                        \
  X(TCSTAT, CURRENT, 12, "tcstat", 2, "table_id", "column_id", NULL, NULL,     \
    MR_KF_TABLE_SCOPED)                                                        \
  X(TAG, CURRENT, 13, "tag", 1, "object_id", NULL, NULL, NULL, 0)              \
  X(OPTION, CURRENT, 14, "option", 2, "scope_kind", "scope_id", NULL, NULL, 0) \
  X(GCFILE, CURRENT, 15, "gcfile", 1, "data_file_id", NULL, NULL, NULL, 0)     \
  X(INLINE_TABLE, INLINE, 0, "data_table", 2, "table_id", "schema_version",    \
    NULL, NULL, MR_KF_TABLE_SCOPED)                                            \
  X(INLINE_ROW, INLINE, 1, "data_row", 4, "table_id", "schema_version",        \
    "row_id", "begin_snapshot", MR_KF_TABLE_SCOPED)                            \
  X(INLINE_DELETE_TABLE, INLINE, 2, "delete_table", 1, "table_id", NULL, NULL, \
    NULL, MR_KF_TABLE_SCOPED)                                                  \
  X(INLINE_DELETE_ROW, INLINE, 3, "delete_row", 3, "table_id", "file_id",      \
    "row_id", NULL, MR_KF_TABLE_SCOPED)                                        \
  X(SCHEMA_VERSION, SCHEMA_VERSION, -1, "schema_version", 2, "table_id",       \
    "begin_snapshot", NULL, NULL, MR_KF_TABLE_SCOPED)                          \
  X(CHANGELOG, CHANGELOG, -1, "changelog", 1, "snapshot_id", NULL, NULL, NULL, \
    0)                                                                         \
  X(NAME, NAME, -1, "name", 3, "name_kind", "parent_id", "entity_id", NULL,    \
    MR_KF_HAS_NAME)                                                            \
  X(DELETE_TARGET, DELETE_TARGET, -1, "delete_target", 3, "table_id",          \
    "data_file_id", "delete_file_id", NULL, MR_KF_TABLE_SCOPED)

typedef enum mr_key_kind {
#define MR_KEY_KIND_ENUM(id, ss, ord, text, n, c0, c1, c2, c3, fl)             \
  MR_KK_##id,
  MR_KEY_KIND_TABLE(MR_KEY_KIND_ENUM)
#undef MR_KEY_KIND_ENUM
      MR_KK_COUNT
} mr_key_kind;

/*
 * X(id, ordinal, text): name-directory kinds, the enum byte after the name
 * subspace byte (ordinal + 2). Schemas use parent_id 0, tables their schema.
 */
#define MR_NAME_KIND_TABLE(X)                                                  \
  X(SCHEMA, 0, "schema")                                                       \
  X(TABLE, 1, "table")

typedef enum mr_name_kind {
#define MR_NAME_KIND_ENUM(id, ord, text) MR_NAME_##id = ord,
  MR_NAME_KIND_TABLE(MR_NAME_KIND_ENUM)
#undef MR_NAME_KIND_ENUM
      MR_NAME_KIND_COUNT
} mr_name_kind;

/* current/option scope_kind values (a u64 component). */
typedef enum mr_option_scope {
  MR_SCOPE_GLOBAL = 0,
  MR_SCOPE_SCHEMA = 1,
  MR_SCOPE_TABLE = 2
} mr_option_scope;

/*
 * Most u64 components of any key: declared ones plus end_snapshot for a
 * history key — 4 declared (inline/data_row, unversioned) or 3 declared + 1
 * (versioned). key.c checks every table row against it at compile time.
 */
#define MR_KEY_MAX_COMP 4
#define MR_KEY_MAX_NAME 1024 /* longest exact_name accepted, in bytes */
#define MR_KEY_MAX_BYTES (2 + 8 * MR_KEY_MAX_COMP + 2 * MR_KEY_MAX_NAME + 1)
/* Room for any key's mr_key_format text, NUL included (\xNN per name byte). */
#define MR_KEY_TEXT_MAX (4 * MR_KEY_MAX_NAME + 320)

/*
 * A decoded key. `history` is true only for versioned kinds in the history
 * subspace; then c[ncomp] holds end_snapshot. For MR_KK_NAME, `name` points
 * at name_len bytes owned by whoever owns the key's storage (see
 * mr_key_decode) — keys never own heap memory.
 */
typedef struct mr_key {
  mr_key_kind kind;
  bool history;
  uint64_t c[MR_KEY_MAX_COMP];
  const uint8_t *name;
  size_t name_len;
  bool name_escaped; /* set by decode: name holds storekey escapes (0x01 xx) */
} mr_key;

/* Static facts of a kind, straight from MR_KEY_KIND_TABLE. */
typedef struct mr_key_kind_info {
  mr_key_kind kind;
  mr_subspace subspace;
  int kind_ordinal; /* -1: the subspace has no kind byte */
  const char *text;
  unsigned ncomp;
  const char *comp[4];
  unsigned flags;
} mr_key_kind_info;

/* Lookups into the tables; NULL (byte: 0) when out of range. */
const mr_key_kind_info *mr_key_kind_get(mr_key_kind kind);
const char *mr_subspace_text(mr_subspace ss);
uint8_t mr_subspace_byte(mr_subspace ss); /* ordinal + 2 */
const char *mr_name_kind_text(mr_name_kind nk);

/* A key's byte form; fixed capacity so encoding never allocates. */
typedef struct mr_keybuf {
  size_t len;
  uint8_t b[MR_KEY_MAX_BYTES];
} mr_keybuf;

/*
 * Encodes k into out. Fails MR_ERR_INVALID for an unknown kind, a history key
 * of an unversioned kind, a name kind out of range, or a name too long.
 */
mr_status mr_key_encode(const mr_key *k, mr_keybuf *out,
                        mr_error *err) MR_MUST_CHECK;

/*
 * Decodes exactly len bytes into k. Fails MR_ERR_CORRUPTION on unknown bytes,
 * truncation, trailing bytes or a malformed string. For the name kind,
 * k->name points INTO bytes[] (valid only while bytes is); when the name held
 * bytes <= 0x01 it still carries their escapes and k->name_escaped is set —
 * mr_key_name_copy always yields the raw name. Encode, compare and format
 * accept both forms.
 */
mr_status mr_key_decode(const uint8_t *bytes, size_t len, mr_key *k,
                        mr_error *err) MR_MUST_CHECK;

/*
 * Copies the unescaped exact_name of a decoded name key into dst (capacity
 * cap, NUL-terminated), its length into *len; fails MR_ERR_INVALID when it
 * does not fit or k is not a name key.
 */
mr_status mr_key_name_copy(const mr_key *k, char *dst, size_t cap, size_t *len,
                           mr_error *err) MR_MUST_CHECK;

/*
 * Human-readable form, e.g. "history/column{table_id=5,column_id=2,
 * end_snapshot=9}", "sys/head", or
 * "name{name_kind=table,parent_id=1,exact_name=\"caf\xc3\xa9\",entity_id=7}"
 * style: u64s in decimal, name_kind by its text, the name quoted with \" \\
 * and \xNN escapes (well-formed UTF-8 from U+00A0 up is printed as is).
 * dst gets a NUL-terminated string; cap MR_KEY_TEXT_MAX always suffices,
 * a smaller cap that is too small fails MR_ERR_INVALID.
 */
mr_status mr_key_format(const mr_key *k, char *dst, size_t cap,
                        mr_error *err) MR_MUST_CHECK;

/*
 * Parses the mr_key_format text of len bytes (no trailing garbage) back
 * into k. Field names must appear in table order. For the name kind the
 * unescaped name is written to name_buf (capacity name_cap; MR_KEY_MAX_NAME
 * suffices) and k->name points there, so k is valid while name_buf is.
 * Fails MR_ERR_INVALID with the offending column on any malformed text.
 */
mr_status mr_key_parse(const char *text, size_t len, mr_key *k,
                       uint8_t *name_buf, size_t name_cap,
                       mr_error *err) MR_MUST_CHECK;

/* Total order of decoded keys equal to the byte order of their encodings. */
int mr_key_compare(const mr_key *a, const mr_key *b);

/* A hash of the fields mr_key_compare looks at: keys that compare equal hash
 * equal (a name hashes by its raw bytes, escaped or not). */
uint64_t mr_key_hash(const mr_key *k);

/*
 * Scan bounds: [start, end) byte ranges, ascending, derived by encoding a
 * sample key and truncating — never hand-assembled.
 */
typedef struct mr_key_range {
  mr_keybuf start;
  /*
   * Exclusive: the prefix with trailing 0xff bytes dropped and the last
   * remaining byte incremented. end.len == 0 would mean "no upper bound"
   * (an all-0xff prefix); no moraine prefix is one, its first byte <= 0x0b.
   */
  mr_keybuf end;
} mr_key_range;

/* Every key of one subspace. */
mr_status mr_key_range_subspace(mr_subspace ss, mr_key_range *r,
                                mr_error *err) MR_MUST_CHECK;
/* Every key of one kind, in current (history=false) or history (true). */
mr_status mr_key_range_kind(mr_key_kind kind, bool history, mr_key_range *r,
                            mr_error *err) MR_MUST_CHECK;
/* Every key of one table-scoped kind for one table; others: MR_ERR_INVALID. */
mr_status mr_key_range_table(mr_key_kind kind, bool history, uint64_t table_id,
                             mr_key_range *r, mr_error *err) MR_MUST_CHECK;
/*
 * Every key sharing the first nprefix encoded fields of k (k->kind,
 * k->history), in byte order: for most kinds the u64 components, then
 * end_snapshot for history; for the name kind name_kind, parent_id,
 * exact_name, entity_id. nprefix 0 is the whole kind; nprefix = ncomp in
 * history gives all ended versions of one entity, nprefix 2 on
 * delete_target the delete files targeting one data file. nprefix past the
 * field count fails MR_ERR_INVALID.
 */
mr_status mr_key_range_prefix(const mr_key *k, unsigned nprefix,
                              mr_key_range *r, mr_error *err) MR_MUST_CHECK;
/* Every name entry (name_kind, parent_id, exact name), any entity_id. */
mr_status mr_key_range_name(mr_name_kind nk, uint64_t parent_id,
                            const char *name, size_t name_len, mr_key_range *r,
                            mr_error *err) MR_MUST_CHECK;

#endif /* MR_KEY_H */
