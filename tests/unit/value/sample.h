/*
 * sample.h — deterministic sample keys and fully populated sample values of
 * every kind, built from the protobuf-c descriptors (so a field added to
 * moraine.proto is populated, compared and pinned without touching tests).
 */
#ifndef MR_TEST_VALUE_SAMPLE_H
#define MR_TEST_VALUE_SAMPLE_H

#include <stdbool.h>

#include "value/value.h"

/*
 * The sample key of a kind: distinct components per kind; versioned kinds
 * get their history key (end_snapshot set), so every value field is set.
 */
void sample_key(mr_key_kind kind, mr_key *k);

/*
 * A new message of the kind's type with every field set (repeated fields
 * hold two elements; optional strings with a field number divisible by 5 are
 * present but empty) and the key components / end_snapshot equal to
 * sample_key's. NULL for empty-value kinds. Free with mr_value_free.
 */
ProtobufCMessage *sample_value(mr_key_kind kind);

/*
 * Field-by-field equality, presence included (absent vs empty vs zero).
 * skip_kind ignores the top-level value_kind (the encoder fills it in).
 */
bool sample_equal(const ProtobufCMessage *a, const ProtobufCMessage *b,
                  bool skip_kind);

/* Sets an integer field by name to v (and its has_ flag); false if absent. */
bool sample_set_int(ProtobufCMessage *m, const char *name, uint64_t v);

#endif /* MR_TEST_VALUE_SAMPLE_H */
