/*
 * value.h — the RFC 0002 value codec: one protobuf message per key kind
 * behind a fixed 5-byte header.
 *
 * A value is  "MRNE" | version byte | protobuf payload  where the payload is
 * the kind's message from src/value/moraine.proto. The kind -> message table
 * lives once, in value.c. The name and delete_target kinds have EMPTY values:
 * zero bytes, no header.
 *
 * Decoding is strict: every way a stored value can be wrong — bad magic, a
 * truncated header, a newer or unknown encoding version, an undecodable
 * payload, a message of another kind, an id that disagrees with the key, an
 * end_snapshot that disagrees with current/history — fails MR_ERR_CORRUPTION
 * with a message naming the fault and the key, never a plausible wrong value.
 *
 * Not here: key bytes (key.h), which record goes under which key (store/).
 */
#ifndef MR_VALUE_H
#define MR_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/mr_error.h"
#include "key/key.h"
#include "value/moraine.pb-c.h" /* generated at build time from moraine.proto */

#define MR_VALUE_MAGIC "MRNE"
#define MR_VALUE_MAGIC_LEN 4
#define MR_VALUE_HEADER_LEN 5
/* The encoding version this build writes and the newest it reads. */
#define MR_VALUE_VERSION 1
/* sys/maintenance_status keeps at most this many passes. */
#define MR_VALUE_MAX_PASSES 16

/*
 * The message of a kind's values (static storage), or NULL for the
 * empty-value kinds (name, delete_target) and for kinds out of range.
 */
const ProtobufCMessageDescriptor *mr_value_descriptor(mr_key_kind kind);

/* True for kinds whose values are empty (name, delete_target). */
bool mr_value_kind_is_empty(mr_key_kind kind);

/*
 * Checks that msg may be stored as a value of `kind`: msg is that kind's
 * message (NULL for an empty-value kind), its value_kind is unset (0) or the
 * kind's own, every required field and string is present, and the
 * maintenance status holds at most MR_VALUE_MAX_PASSES passes. Fails
 * MR_ERR_INVALID. The encode functions below run this first.
 */
mr_status mr_value_check(mr_key_kind kind, const ProtobufCMessage *msg,
                         mr_error *err) MR_MUST_CHECK;

/*
 * Checks that msg belongs under key k: each of the kind's key components
 * equals msg's field of the same name, and for versioned kinds end_snapshot
 * is absent under a current key and equal to the key's under a history key.
 * Fails MR_ERR_INVALID (a caller about to write a wrong value); decode runs
 * the same check and reports MR_ERR_CORRUPTION.
 */
mr_status mr_value_check_key(const mr_key *k, const ProtobufCMessage *msg,
                             mr_error *err) MR_MUST_CHECK;

/* Sets *len to the encoded size of msg as a value of kind (header included). */
mr_status mr_value_encoded_size(mr_key_kind kind, const ProtobufCMessage *msg,
                                size_t *len, mr_error *err) MR_MUST_CHECK;

/*
 * Encodes msg into the caller's buffer buf of capacity cap and sets *len to
 * the bytes written. The message is not modified (value_kind is written from
 * the table). Fails MR_ERR_INVALID when mr_value_check does, or when cap is
 * too small (then *len holds the size needed). For empty-value kinds msg must
 * be NULL and *len becomes 0.
 */
mr_status mr_value_encode_into(mr_key_kind kind, const ProtobufCMessage *msg,
                               uint8_t *buf, size_t cap, size_t *len,
                               mr_error *err) MR_MUST_CHECK;

/*
 * As mr_value_encode_into, into a new malloc'd buffer: on success *bytes is
 * owned by the caller (release with free()) and *len is its length. An
 * empty-value kind yields *bytes = NULL, *len = 0. On failure *bytes is NULL.
 * Fails MR_ERR_NOMEM when allocation fails.
 */
mr_status mr_value_encode(mr_key_kind kind, const ProtobufCMessage *msg,
                          uint8_t **bytes, size_t *len,
                          mr_error *err) MR_MUST_CHECK;

/*
 * Decodes the len bytes stored under key k. On success *out is a new message
 * of the kind's type (cast it, e.g. (Moraine__V1__Column *)*out), owned by
 * the caller and independent of bytes; release it with mr_value_free. For an
 * empty-value kind only len 0 is accepted and *out is NULL. On failure *out
 * is NULL. Fails MR_ERR_INVALID for a malformed key (unknown kind, history
 * key of an unversioned kind), MR_ERR_CORRUPTION for a bad value (see the
 * top of this file), MR_ERR_NOMEM when allocation fails.
 */
mr_status mr_value_decode(const mr_key *k, const uint8_t *bytes, size_t len,
                          ProtobufCMessage **out, mr_error *err) MR_MUST_CHECK;

/* Frees a message returned by mr_value_decode; NULL is a no-op. */
void mr_value_free(ProtobufCMessage *msg);

#endif /* MR_VALUE_H */
