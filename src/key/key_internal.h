/*
 * key_internal.h — what key.c shares with key_text.c, and nobody else.
 *
 * The one place that turns a row of MR_KEY_KIND_TABLE into the list of
 * fields its key carries after the subspace and kind bytes, in byte order.
 * Encode, decode, compare, format, parse and the scan bounds all walk this
 * list; none of them knows any kind by name.
 */
#ifndef MR_KEY_INTERNAL_H
#define MR_KEY_INTERNAL_H

#include "key/key.h"

typedef enum key_field_type {
  KEY_FIELD_U64,  /* 8 bytes big-endian */
  KEY_FIELD_ENUM, /* one byte: ordinal + 2, ordinal < MR_NAME_KIND_COUNT */
  KEY_FIELD_NAME  /* escaped bytes, 0x00 terminator */
} key_field_type;

typedef struct key_field {
  key_field_type type;
  unsigned comp;     /* index into mr_key.c (unused for KEY_FIELD_NAME) */
  const char *label; /* the field's name in the printed form */
} key_field;

#define KEY_MAX_FIELDS (MR_KEY_MAX_COMP + 1)
#define KEY_NAME_LABEL "exact_name"
#define KEY_END_LABEL "end_snapshot"

/* Fills out[] with the fields of a key of this kind; returns their count. */
unsigned mr_key_fields(const mr_key_kind_info *info, bool history,
                       key_field out[KEY_MAX_FIELDS]);

/*
 * Iterates the raw (unescaped) bytes of k's name: call with *pos = 0; each
 * call stores the next byte in *byte and returns 1, 0 at the end, and -1
 * on a malformed escape (only possible when k->name_escaped).
 */
int mr_key_name_next(const mr_key *k, size_t *pos, uint8_t *byte);

/* The kind byte's subspace: history keys reuse their current kind byte. */
mr_subspace mr_key_subspace_of(const mr_key_kind_info *info, bool history);

#endif /* MR_KEY_INTERNAL_H */
