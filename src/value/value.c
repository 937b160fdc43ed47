/*
 * value.c — the value codec of value.h: framing, the kind -> message table,
 * and the key/value consistency check.
 *
 * The check knows no kind by name: it looks the key's component names (and
 * end_snapshot) up in the kind's message descriptor and compares the values.
 * Framing is "MRNE", one version byte, then the protobuf payload.
 */
#include "value/value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The kind -> message table, defined once. M(kind, message): the values of
 * MR_KK_<kind> are moraine__v1__<message> with value_kind VALUE_KIND_<kind>.
 * E(kind): the kind's values are empty. Every key kind appears exactly once
 * (the unit tests walk MR_KK_COUNT).
 */
#define MR_VALUE_TABLE(M, E)                                                   \
  M(SYS_FORMAT, sys_format)                                                    \
  M(SYS_HEAD, sys_head)                                                        \
  M(SYS_MIGRATION, sys_migration)                                              \
  M(SYS_MAINTENANCE, maintenance_status)                                       \
  M(SNAPSHOT, snapshot)                                                        \
  M(SCHEMA, schema)                                                            \
  M(TABLE, table)                                                              \
  M(VIEW, view)                                                                \
  M(MACRO, macro)                                                              \
  M(COLUMN, column)                                                            \
  M(PARTITION, partition)                                                      \
  M(SORT, sort)                                                                \
  M(FILE, data_file)                                                           \
  M(DELFILE, delete_file)                                                      \
  M(MAPPING, column_mapping)                                                   \
  M(FSTAT, file_column_stats)                                                  \
  M(TSTAT, table_stats)                                                        \
  M(TCSTAT, table_column_stats)                                                \
  M(TAG, tag)                                                                  \
  M(OPTION, option)                                                            \
  M(GCFILE, gc_file)                                                           \
  M(INLINE_TABLE, inline_data_table)                                           \
  M(INLINE_ROW, inline_data_row)                                               \
  M(INLINE_DELETE_TABLE, inline_delete_table)                                  \
  M(INLINE_DELETE_ROW, inline_delete_row)                                      \
  M(SCHEMA_VERSION, schema_version)                                            \
  M(CHANGELOG, changelog)                                                      \
  E(NAME)                                                                      \
  E(DELETE_TARGET)

typedef struct value_entry {
  bool defined; /* the kind has a row in MR_VALUE_TABLE */
  const ProtobufCMessageDescriptor *desc; /* NULL: empty values */
  int value_kind;
} value_entry;

static const value_entry value_table[MR_KK_COUNT] = {
#define MR_VALUE_MSG(id, msg)                                                  \
  [MR_KK_##id] = {true, &moraine__v1__##msg##__descriptor,                     \
                  MORAINE__V1__VALUE_KIND__VALUE_KIND_##id},
#define MR_VALUE_EMPTY(id) [MR_KK_##id] = {true, NULL, 0},
    MR_VALUE_TABLE(MR_VALUE_MSG, MR_VALUE_EMPTY)
#undef MR_VALUE_MSG
#undef MR_VALUE_EMPTY
};

/* Largest generated message struct the encoder may copy (see set_kind). */
#define VALUE_MAX_STRUCT 1024

static const value_entry *entry_of(mr_key_kind kind) {
  if ((unsigned)kind >= MR_KK_COUNT || !value_table[kind].defined)
    return NULL;
  return &value_table[kind];
}

const ProtobufCMessageDescriptor *mr_value_descriptor(mr_key_kind kind) {
  const value_entry *e = entry_of(kind);
  return e ? e->desc : NULL;
}

bool mr_value_kind_is_empty(mr_key_kind kind) {
  const value_entry *e = entry_of(kind);
  return e != NULL && e->desc == NULL;
}

static const char *kind_text(mr_key_kind kind) {
  const mr_key_kind_info *info = mr_key_kind_get(kind);
  return info ? info->text : "?";
}

/* The message name of a value_kind number, for error messages. */
static const char *value_kind_name(int vk) {
  for (unsigned i = 0; i < MR_KK_COUNT; i++)
    if (value_table[i].desc != NULL && value_table[i].value_kind == vk)
      return value_table[i].desc->short_name;
  return "unknown";
}

/*
 * Reads a singular integer field as its 64-bit pattern; false when the field
 * is absent (an unset optional), repeated or not an integer.
 */
static bool field_u64(const ProtobufCMessage *m,
                      const ProtobufCFieldDescriptor *f, uint64_t *v) {
  const uint8_t *base = (const uint8_t *)m;
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return false;
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
      !*(const protobuf_c_boolean *)(base + f->quantifier_offset))
    return false;
  const void *p = base + f->offset;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
    *v = (uint64_t) * (const int64_t *)p;
    return true;
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
    *v = *(const uint64_t *)p;
    return true;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_ENUM:
    *v = (uint64_t)(int64_t) * (const int32_t *)p;
    return true;
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32:
    *v = *(const uint32_t *)p;
    return true;
  default:
    return false;
  }
}

/* The message's value_kind field (field 1 of every top-level message). */
static const ProtobufCFieldDescriptor *
kind_field(const ProtobufCMessageDescriptor *d) {
  return protobuf_c_message_descriptor_get_field_by_name(d, "value_kind");
}

/*
 * The key's text for messages (dst holds KEY_TEXT_CUT + 4 bytes): cut with
 * "..." past KEY_TEXT_CUT so a long name never crowds out the fault.
 */
#define KEY_TEXT_CUT 200
static void key_text(const mr_key *k, char *dst) {
  char full[MR_KEY_TEXT_MAX];
  mr_error e;
  if (mr_key_format(k, full, sizeof full, &e) != MR_OK)
    snprintf(full, sizeof full, "%s{?}", kind_text(k->kind));
  if (strlen(full) > KEY_TEXT_CUT)
    memcpy(full + KEY_TEXT_CUT, "...", 4);
  memcpy(dst, full, strlen(full) + 1);
}

/* The kind's entry for a key, or MR_ERR_INVALID for a malformed key. */
static mr_status key_entry(const mr_key *k, const value_entry **e,
                           mr_error *err) {
  const mr_key_kind_info *info = k ? mr_key_kind_get(k->kind) : NULL;
  *e = info ? entry_of(k->kind) : NULL;
  if (*e == NULL)
    return mr_fail(err, MR_ERR_INVALID, "value: no such key kind %d",
                   k ? (int)k->kind : -1);
  if (k->history && !(info->flags & MR_KF_VERSIONED))
    return mr_fail(err, MR_ERR_INVALID,
                   "value: %s is not versioned, it has no history key",
                   info->text);
  return MR_OK;
}

/*
 * The key/value check of mr_value_check_key, failing with `code`: the key's
 * components, then end_snapshot for versioned kinds, against msg's fields
 * of the same names.
 */
static mr_status check_key(const mr_key *k, const ProtobufCMessage *msg,
                           mr_status code, mr_error *err) {
  const mr_key_kind_info *info = mr_key_kind_get(k->kind);
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  char kt[KEY_TEXT_CUT + 4];
  for (unsigned i = 0; i < info->ncomp; i++) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(d, info->comp[i]);
    uint64_t v;
    if (f == NULL)
      return mr_fail(err, MR_ERR_INVALID, "value: %s has no field %s", d->name,
                     info->comp[i]);
    if (!field_u64(msg, f, &v)) {
      key_text(k, kt);
      return mr_fail(err, code, "value of %s: %s is absent", kt, info->comp[i]);
    }
    if (v != k->c[i]) {
      key_text(k, kt);
      return mr_fail(
          err, code, "value of %s: %s is %lld in the value, %llu in the key",
          kt, info->comp[i], (long long)v, (unsigned long long)k->c[i]);
    }
  }
  if (!(info->flags & MR_KF_VERSIONED))
    return MR_OK;
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(d, "end_snapshot");
  if (f == NULL)
    return mr_fail(err, MR_ERR_INVALID, "value: %s has no field end_snapshot",
                   d->name);
  uint64_t end;
  bool has_end = field_u64(msg, f, &end);
  if (k->history && (!has_end || end != k->c[info->ncomp])) {
    key_text(k, kt);
    if (!has_end)
      return mr_fail(err, code,
                     "value of %s: end_snapshot is absent in a history value",
                     kt);
    return mr_fail(
        err, code,
        "value of %s: end_snapshot is %lld in the value, %llu in the key", kt,
        (long long)end, (unsigned long long)k->c[info->ncomp]);
  }
  if (!k->history && has_end) {
    key_text(k, kt);
    return mr_fail(err, code,
                   "value of %s: a current value carries end_snapshot %lld", kt,
                   (long long)end);
  }
  return MR_OK;
}

mr_status mr_value_check_key(const mr_key *k, const ProtobufCMessage *msg,
                             mr_error *err) {
  const value_entry *e;
  mr_status rc = key_entry(k, &e, err);
  if (rc)
    return rc;
  rc = mr_value_check(k->kind, msg, err);
  if (rc || msg == NULL)
    return rc;
  return check_key(k, msg, MR_ERR_INVALID, err);
}

/* Per-kind limits beyond the message shape: the maintenance pass cap. */
static bool within_limits(mr_key_kind kind, const ProtobufCMessage *msg) {
  if (kind != MR_KK_SYS_MAINTENANCE)
    return true;
  return ((const Moraine__V1__MaintenanceStatus *)msg)->n_pass <=
         MR_VALUE_MAX_PASSES;
}

mr_status mr_value_check(mr_key_kind kind, const ProtobufCMessage *msg,
                         mr_error *err) {
  const value_entry *e = entry_of(kind);
  if (e == NULL)
    return mr_fail(err, MR_ERR_INVALID, "value: no such key kind %d",
                   (int)kind);
  if (e->desc == NULL) {
    if (msg != NULL)
      return mr_fail(err, MR_ERR_INVALID,
                     "value: %s values are empty, got a %s", kind_text(kind),
                     msg->descriptor->name);
    return MR_OK;
  }
  if (msg == NULL || msg->descriptor != e->desc)
    return mr_fail(err, MR_ERR_INVALID, "value: %s values are %s, got %s",
                   kind_text(kind), e->desc->name,
                   msg ? msg->descriptor->name : "NULL");
  uint64_t vk = 0;
  (void)field_u64(msg, kind_field(e->desc), &vk);
  if (vk != 0 && vk != (uint64_t)e->value_kind)
    return mr_fail(
        err, MR_ERR_INVALID, "value: %s has value_kind %lld, %s expects %d",
        e->desc->name, (long long)vk, kind_text(kind), e->value_kind);
  if (!protobuf_c_message_check(msg))
    return mr_fail(
        err, MR_ERR_INVALID,
        "value: %s has a required field unset (NULL string or message)",
        e->desc->name);
  if (!within_limits(kind, msg))
    return mr_fail(err, MR_ERR_INVALID,
                   "value: sys/maintenance_status holds more than %d passes",
                   MR_VALUE_MAX_PASSES);
  return MR_OK;
}

/*
 * A shallow copy of msg with value_kind set from the table, so the caller's
 * message stays const. The copy shares msg's strings and children and is
 * only packed, never freed.
 */
typedef union value_copy {
  max_align_t align;
  uint8_t b[VALUE_MAX_STRUCT];
} value_copy;

static mr_status set_kind(const value_entry *e, const ProtobufCMessage *msg,
                          value_copy *c, mr_error *err) {
  if (e->desc->sizeof_message > sizeof c->b)
    return mr_fail(err, MR_ERR_INVALID,
                   "value: %s is larger than the encoder's copy",
                   e->desc->name);
  memcpy(c->b, msg, e->desc->sizeof_message);
  *(int *)(c->b + kind_field(e->desc)->offset) = e->value_kind;
  return MR_OK;
}

/*
 * Checks msg for kind and prepares the copy to pack; *need is the encoded
 * size, header included (0 for an empty-value kind, then c is unused).
 */
static mr_status prepare(mr_key_kind kind, const ProtobufCMessage *msg,
                         value_copy *c, size_t *need, mr_error *err) {
  mr_status rc = mr_value_check(kind, msg, err);
  if (rc)
    return rc;
  const value_entry *e = entry_of(kind);
  *need = 0;
  if (e->desc == NULL)
    return MR_OK;
  rc = set_kind(e, msg, c, err);
  if (rc)
    return rc;
  *need = MR_VALUE_HEADER_LEN +
          protobuf_c_message_get_packed_size((const ProtobufCMessage *)c->b);
  return MR_OK;
}

/* Writes the header and packs the prepared copy into buf (need bytes). */
static void write_value(const value_copy *c, uint8_t *buf) {
  memcpy(buf, MR_VALUE_MAGIC, MR_VALUE_MAGIC_LEN);
  buf[MR_VALUE_MAGIC_LEN] = MR_VALUE_VERSION;
  protobuf_c_message_pack((const ProtobufCMessage *)c->b,
                          buf + MR_VALUE_HEADER_LEN);
}

mr_status mr_value_encoded_size(mr_key_kind kind, const ProtobufCMessage *msg,
                                size_t *len, mr_error *err) {
  value_copy c;
  return prepare(kind, msg, &c, len, err);
}

mr_status mr_value_encode_into(mr_key_kind kind, const ProtobufCMessage *msg,
                               uint8_t *buf, size_t cap, size_t *len,
                               mr_error *err) {
  value_copy c;
  mr_status rc = prepare(kind, msg, &c, len, err);
  if (rc || *len == 0)
    return rc;
  if (buf == NULL || cap < *len)
    return mr_fail(err, MR_ERR_INVALID,
                   "value: %s needs %zu bytes, the buffer holds %zu",
                   kind_text(kind), *len, cap);
  write_value(&c, buf);
  return MR_OK;
}

mr_status mr_value_encode(mr_key_kind kind, const ProtobufCMessage *msg,
                          uint8_t **bytes, size_t *len, mr_error *err) {
  *bytes = NULL;
  value_copy c;
  size_t need;
  mr_status rc = prepare(kind, msg, &c, &need, err);
  if (rc)
    return rc;
  *len = 0;
  if (need == 0)
    return MR_OK;
  uint8_t *buf = malloc(need);
  if (buf == NULL)
    return mr_fail(err, MR_ERR_NOMEM,
                   "value: cannot allocate %zu bytes for a %s value", need,
                   kind_text(kind));
  write_value(&c, buf);
  *bytes = buf;
  *len = need;
  return MR_OK;
}

/* malloc/free for protobuf-c that remembers whether an allocation failed. */
typedef struct tracked_alloc {
  bool failed;
} tracked_alloc;

static void *tracked_malloc(void *data, size_t size) {
  void *p = malloc(size);
  if (p == NULL)
    ((tracked_alloc *)data)->failed = true;
  return p;
}

static void tracked_free(void *data, void *p) { free(p); }

/* Checks the 5-byte header; fails MR_ERR_CORRUPTION naming the fault. */
static mr_status check_header(const mr_key *k, const uint8_t *bytes, size_t len,
                              mr_error *err) {
  char kt[KEY_TEXT_CUT + 4];
  if (len < MR_VALUE_HEADER_LEN) {
    key_text(k, kt);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: truncated header (%zu of %d bytes)", kt, len,
                   MR_VALUE_HEADER_LEN);
  }
  if (memcmp(bytes, MR_VALUE_MAGIC, MR_VALUE_MAGIC_LEN) != 0) {
    key_text(k, kt);
    return mr_fail(
        err, MR_ERR_CORRUPTION,
        "value of %s: wrong magic %02x%02x%02x%02x (expected \"%s\")", kt,
        bytes[0], bytes[1], bytes[2], bytes[3], MR_VALUE_MAGIC);
  }
  unsigned version = bytes[MR_VALUE_MAGIC_LEN];
  if (version == 0 || version > MR_VALUE_VERSION) {
    key_text(k, kt);
    return mr_fail(
        err, MR_ERR_CORRUPTION,
        "value of %s: %s encoding version %u (this build reads 1..%d)", kt,
        version == 0 ? "unknown" : "newer", version, MR_VALUE_VERSION);
  }
  return MR_OK;
}

/*
 * True when msg or a child holds an unknown field numbered 0. protobuf-c
 * accepts that tag when it is spelled with a redundant varint byte (80 00),
 * yet refuses it in canonical form — so such a value would not survive a
 * re-encode. No valid writer emits field 0.
 */
static bool has_field_zero(const ProtobufCMessage *msg) {
  for (unsigned i = 0; i < msg->n_unknown_fields; i++)
    if (msg->unknown_fields[i].tag == 0)
      return true;
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      continue;
    const uint8_t *p = (const uint8_t *)msg + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)((const uint8_t *)msg + f->quantifier_offset);
      for (size_t j = 0; j < n; j++)
        if (has_field_zero((*(ProtobufCMessage *const *const *)p)[j]))
          return true;
    } else if (*(ProtobufCMessage *const *)p != NULL &&
               has_field_zero(*(ProtobufCMessage *const *)p)) {
      return true;
    }
  }
  return false;
}

/* Checks a decoded message: field numbers, value_kind, limits, its key. */
static mr_status check_decoded(const mr_key *k, const value_entry *e,
                               const ProtobufCMessage *msg, mr_error *err) {
  char kt[KEY_TEXT_CUT + 4];
  if (has_field_zero(msg)) {
    key_text(k, kt);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: undecodable %s payload (field number 0)", kt,
                   e->desc->short_name);
  }
  uint64_t vk = 0;
  (void)field_u64(msg, kind_field(e->desc), &vk);
  if (vk != (uint64_t)e->value_kind) {
    key_text(k, kt);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: holds a %s (value_kind %lld), expected a %s",
                   kt, value_kind_name((int)vk), (long long)vk,
                   e->desc->short_name);
  }
  if (!within_limits(k->kind, msg)) {
    key_text(k, kt);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: more than %d maintenance passes", kt,
                   MR_VALUE_MAX_PASSES);
  }
  return check_key(k, msg, MR_ERR_CORRUPTION, err);
}

mr_status mr_value_decode(const mr_key *k, const uint8_t *bytes, size_t len,
                          ProtobufCMessage **out, mr_error *err) {
  *out = NULL;
  const value_entry *e;
  mr_status rc = key_entry(k, &e, err);
  if (rc)
    return rc;
  if (bytes == NULL && len > 0)
    return mr_fail(err, MR_ERR_INVALID, "value: NULL bytes with length %zu",
                   len);
  char kt[KEY_TEXT_CUT + 4];
  if (e->desc == NULL) {
    if (len == 0)
      return MR_OK;
    key_text(k, kt);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: must be empty, holds %zu bytes", kt, len);
  }
  rc = check_header(k, bytes, len, err);
  if (rc)
    return rc;
  tracked_alloc track = {false};
  ProtobufCAllocator alloc = {tracked_malloc, tracked_free, &track};
  ProtobufCMessage *msg = protobuf_c_message_unpack(
      e->desc, &alloc, len - MR_VALUE_HEADER_LEN, bytes + MR_VALUE_HEADER_LEN);
  if (msg == NULL) {
    key_text(k, kt);
    if (track.failed)
      return mr_fail(err, MR_ERR_NOMEM,
                     "value of %s: out of memory decoding %zu bytes", kt, len);
    return mr_fail(err, MR_ERR_CORRUPTION,
                   "value of %s: undecodable %s payload (%zu bytes)", kt,
                   e->desc->short_name, len - MR_VALUE_HEADER_LEN);
  }
  rc = check_decoded(k, e, msg, err);
  if (rc) {
    mr_value_free(msg);
    return rc;
  }
  *out = msg;
  return MR_OK;
}

void mr_value_free(ProtobufCMessage *msg) {
  if (msg != NULL)
    protobuf_c_message_free_unpacked(msg, NULL);
}
