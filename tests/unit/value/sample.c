/*
 * sample.c — sample keys and descriptor-driven sample values for the value
 * tests (see sample.h). Values are deterministic: field number, element
 * index and type decide every byte, so the golden vectors stay stable.
 */
#include "sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (p == NULL)
    abort();
  return p;
}

static char *xstrdup(const char *s) {
  char *p = xcalloc(strlen(s) + 1);
  memcpy(p, s, strlen(s));
  return p;
}

void sample_key(mr_key_kind kind, mr_key *k) {
  const mr_key_kind_info *info = mr_key_kind_get(kind);
  memset(k, 0, sizeof *k);
  k->kind = kind;
  for (unsigned i = 0; i < info->ncomp; i++) {
    k->c[i] = 100 + 10 * (uint64_t)kind + i;
    if (strcmp(info->comp[i], "scope_kind") == 0)
      k->c[i] = MR_SCOPE_TABLE;
    if (strcmp(info->comp[i], "name_kind") == 0)
      k->c[i] = MR_NAME_TABLE;
  }
  if (info->flags & MR_KF_VERSIONED) {
    k->history = true;
    k->c[info->ncomp] = 5000 + (uint64_t)kind;
  }
  if (info->flags & MR_KF_HAS_NAME) {
    k->name = (const uint8_t *)"sample";
    k->name_len = 6;
  }
}

/* Bytes one element of a field's type occupies in the generated struct. */
static size_t elem_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_FLOAT:
    return 4;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  case PROTOBUF_C_TYPE_BOOL:
    return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_ENUM:
    return sizeof(int);
  case PROTOBUF_C_TYPE_STRING:
    return sizeof(char *);
  case PROTOBUF_C_TYPE_BYTES:
    return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_MESSAGE:
    return sizeof(ProtobufCMessage *);
  }
  abort();
}

/* Optional fields with a has_ flag (strings and messages use NULL instead). */
static bool has_flag(const ProtobufCFieldDescriptor *f) {
  return f->label == PROTOBUF_C_LABEL_OPTIONAL &&
         f->type != PROTOBUF_C_TYPE_STRING &&
         f->type != PROTOBUF_C_TYPE_MESSAGE;
}

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d);

/* Writes element idx of field f at p. */
static void fill_elem(const ProtobufCFieldDescriptor *f, void *p,
                      unsigned idx) {
  uint64_t n = (uint64_t)f->id * 1000 + idx;
  bool empty = f->label == PROTOBUF_C_LABEL_OPTIONAL && f->id % 5 == 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SFIXED32:
    *(int32_t *)p = f->id % 2 ? (int32_t)n : -(int32_t)n;
    break;
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32:
    *(uint32_t *)p = 0xf0000000u + (uint32_t)n;
    break;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
    *(int64_t *)p = f->id % 2 ? (int64_t)n * 1000003 : -(int64_t)n;
    break;
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
    *(uint64_t *)p = 0x8000000000000000ull + n;
    break;
  case PROTOBUF_C_TYPE_FLOAT:
    *(float *)p = (float)n;
    break;
  case PROTOBUF_C_TYPE_DOUBLE:
    *(double *)p = (double)n;
    break;
  case PROTOBUF_C_TYPE_BOOL:
    *(protobuf_c_boolean *)p = 1;
    break;
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumDescriptor *e = f->descriptor;
    *(int *)p = e->values[e->n_values - 1].value;
    break;
  }
  case PROTOBUF_C_TYPE_STRING: {
    char buf[128];
    snprintf(buf, sizeof buf, "%s#%u \xc3\xa9'\"", f->name, idx);
    *(char **)p = xstrdup(empty ? "" : buf);
    break;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    ProtobufCBinaryData *b = p;
    b->len = empty ? 0 : 16;
    b->data = empty ? NULL : xcalloc(16);
    for (size_t i = 0; i < b->len; i++)
      b->data[i] = (uint8_t)(i == 0   ? 0x00
                             : i == 1 ? 0xff
                                      : f->id * 16 + idx + i);
    break;
  }
  case PROTOBUF_C_TYPE_MESSAGE:
    *(ProtobufCMessage **)p = fill(f->descriptor);
    break;
  }
}

/* A message of d with every field set; repeated fields hold two elements. */
static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = xcalloc(d->sizeof_message);
  d->message_init(m);
  uint8_t *base = (uint8_t *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = 2, sz = elem_size(f);
      uint8_t *arr = xcalloc(n * sz);
      for (unsigned j = 0; j < n; j++)
        fill_elem(f, arr + j * sz, j);
      *(size_t *)(base + f->quantifier_offset) = n;
      *(void **)(base + f->offset) = arr;
      continue;
    }
    if (has_flag(f))
      *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    fill_elem(f, base + f->offset, 0);
  }
  return m;
}

bool sample_set_int(ProtobufCMessage *m, const char *name, uint64_t v) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
  if (f == NULL || f->label == PROTOBUF_C_LABEL_REPEATED)
    return false;
  uint8_t *base = (uint8_t *)m;
  void *p = base + f->offset;
  if (elem_size(f) == 8)
    *(uint64_t *)p = v;
  else if (elem_size(f) == 4 && f->type != PROTOBUF_C_TYPE_FLOAT)
    *(uint32_t *)p = (uint32_t)v;
  else
    return false;
  if (has_flag(f))
    *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
  return true;
}

ProtobufCMessage *sample_value(mr_key_kind kind) {
  const ProtobufCMessageDescriptor *d = mr_value_descriptor(kind);
  if (d == NULL)
    return NULL;
  ProtobufCMessage *m = fill(d);
  sample_set_int(m, "value_kind", 0);
  mr_key k;
  sample_key(kind, &k);
  const mr_key_kind_info *info = mr_key_kind_get(kind);
  if (info->flags & MR_KF_VERSIONED) {
    sample_set_int(m, "begin_snapshot", k.c[info->ncomp] - 7);
    sample_set_int(m, "end_snapshot", k.c[info->ncomp]);
  }
  for (unsigned i = 0; i < info->ncomp; i++)
    if (!sample_set_int(m, info->comp[i], k.c[i]))
      abort();
  return m;
}

static bool elem_equal(const ProtobufCFieldDescriptor *f, const void *a,
                       const void *b) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: {
    const char *sa = *(char *const *)a, *sb = *(char *const *)b;
    if (sa == NULL || sb == NULL)
      return sa == sb;
    return strcmp(sa, sb) == 0;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *ba = a, *bb = b;
    return ba->len == bb->len &&
           (ba->len == 0 || memcmp(ba->data, bb->data, ba->len) == 0);
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const ProtobufCMessage *ma = *(ProtobufCMessage *const *)a,
                           *mb = *(ProtobufCMessage *const *)b;
    if (ma == NULL || mb == NULL)
      return ma == mb;
    return sample_equal(ma, mb, false);
  }
  default:
    return memcmp(a, b, elem_size(f)) == 0;
  }
}

bool sample_equal(const ProtobufCMessage *a, const ProtobufCMessage *b,
                  bool skip_kind) {
  if (a->descriptor != b->descriptor)
    return false;
  const ProtobufCMessageDescriptor *d = a->descriptor;
  const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (skip_kind && strcmp(f->name, "value_kind") == 0)
      continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t na = *(const size_t *)(pa + f->quantifier_offset);
      size_t nb = *(const size_t *)(pb + f->quantifier_offset);
      if (na != nb)
        return false;
      const uint8_t *ea = *(uint8_t *const *)(pa + f->offset),
                    *eb = *(uint8_t *const *)(pb + f->offset);
      for (size_t j = 0; j < na; j++)
        if (!elem_equal(f, ea + j * elem_size(f), eb + j * elem_size(f)))
          return false;
      continue;
    }
    if (has_flag(f)) {
      protobuf_c_boolean ha =
          *(const protobuf_c_boolean *)(pa + f->quantifier_offset);
      protobuf_c_boolean hb =
          *(const protobuf_c_boolean *)(pb + f->quantifier_offset);
      if (ha != hb)
        return false;
      if (!ha)
        continue;
    }
    if (!elem_equal(f, pa + f->offset, pb + f->offset))
      return false;
  }
  return true;
}
