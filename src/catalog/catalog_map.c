/*
 * catalog_map.c — the mapping between DuckLake v1.0's catalog tables and
 * store records, defined once in CATALOG_TABLES, with the column <-> field
 * mapping derived from the protobuf-c descriptors by name and the cell text
 * <-> field conversions by field type. Also the DDL column-list parser the
 * commit path uses for inlined tables.
 */
#include "catalog/catalog_internal.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mr_format.h"

/*
 * X(name, role, kind, field, ddl): one row per DuckLake v1.0 table. The DDL
 * is the table as DuckLake 1.5.5 creates it through moraine (what the load
 * recreates); its columns map to the same-named fields of the row's message.
 */
#define CATALOG_TABLES(X)                                                                          \
  X("ducklake_metadata", CAT_OPTION, MR_KK_OPTION, "entries",                                      \
    "(\"key\" VARCHAR NOT NULL, \"value\" VARCHAR NOT NULL, \"scope\" VARCHAR, scope_id BIGINT)")  \
  X("ducklake_snapshot", CAT_SNAPSHOT, MR_KK_SNAPSHOT, NULL,                                       \
    "(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMP WITH TIME ZONE, schema_version "     \
    "BIGINT, next_catalog_id BIGINT, next_file_id BIGINT)")                                        \
  X("ducklake_snapshot_changes", CAT_SNAPSHOT_CHANGES, MR_KK_SNAPSHOT, NULL,                       \
    "(snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR, author VARCHAR, commit_message "       \
    "VARCHAR, commit_extra_info VARCHAR)")                                                         \
  X("ducklake_schema", CAT_ENTITY, MR_KK_SCHEMA, NULL,                                             \
    "(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, begin_snapshot BIGINT, end_snapshot "        \
    "BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)")                        \
  X("ducklake_table", CAT_ENTITY, MR_KK_TABLE, NULL,                                               \
    "(table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id "    \
    "BIGINT, table_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)")                         \
  X("ducklake_view", CAT_ENTITY, MR_KK_VIEW, NULL,                                                 \
    "(view_id BIGINT, view_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id "      \
    "BIGINT, view_name VARCHAR, dialect VARCHAR, \"sql\" VARCHAR, column_aliases VARCHAR)")        \
  X("ducklake_tag", CAT_TAG, MR_KK_TAG, "entries",                                                 \
    "(object_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, \"key\" VARCHAR, \"value\" "   \
    "VARCHAR)")                                                                                    \
  X("ducklake_column_tag", CAT_CHILD, MR_KK_COLUMN, "column_tag",                                  \
    "(table_id BIGINT, column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, \"key\" "     \
    "VARCHAR, \"value\" VARCHAR)")                                                                 \
  X("ducklake_data_file", CAT_ENTITY, MR_KK_FILE, NULL,                                            \
    "(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot "      \
    "BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR, "     \
    "record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT, "       \
    "partition_id BIGINT, encryption_key VARCHAR, mapping_id BIGINT, partial_max BIGINT)")         \
  X("ducklake_file_column_stats", CAT_RECORD, MR_KK_FSTAT, NULL,                                   \
    "(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, column_size_bytes BIGINT, "          \
    "value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan "   \
    "BOOLEAN, extra_stats VARCHAR)")                                                               \
  X("ducklake_file_variant_stats", CAT_CHILD, MR_KK_FSTAT, "file_variant_stats",                   \
    "(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, variant_path VARCHAR, "              \
    "shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, "     \
    "min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR)")            \
  X("ducklake_delete_file", CAT_ENTITY, MR_KK_DELFILE, NULL,                                       \
    "(delete_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot "    \
    "BIGINT, data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, format VARCHAR, "        \
    "delete_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, encryption_key VARCHAR, "    \
    "partial_max BIGINT)")                                                                         \
  X("ducklake_column", CAT_ENTITY, MR_KK_COLUMN, NULL,                                             \
    "(column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, table_id BIGINT, "             \
    "column_order BIGINT, column_name VARCHAR, column_type VARCHAR, initial_default VARCHAR, "     \
    "default_value VARCHAR, nulls_allowed BOOLEAN, parent_column BIGINT, default_value_type "      \
    "VARCHAR, default_value_dialect VARCHAR)")                                                     \
  X("ducklake_table_stats", CAT_RECORD, MR_KK_TSTAT, NULL,                                         \
    "(table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT)")          \
  X("ducklake_table_column_stats", CAT_RECORD, MR_KK_TCSTAT, NULL,                                 \
    "(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value "  \
    "VARCHAR, max_value VARCHAR, extra_stats VARCHAR)")                                            \
  X("ducklake_partition_info", CAT_ENTITY, MR_KK_PARTITION, NULL,                                  \
    "(partition_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)")          \
  X("ducklake_partition_column", CAT_CHILD, MR_KK_PARTITION, "partition_column",                   \
    "(partition_id BIGINT, table_id BIGINT, partition_key_index BIGINT, column_id BIGINT, "        \
    "\"transform\" VARCHAR)")                                                                      \
  X("ducklake_file_partition_value", CAT_CHILD, MR_KK_FILE, "file_partition_value",                \
    "(data_file_id BIGINT, table_id BIGINT, partition_key_index BIGINT, partition_value VARCHAR)") \
  X("ducklake_files_scheduled_for_deletion", CAT_RECORD, MR_KK_GCFILE, NULL,                       \
    "(data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, schedule_start TIMESTAMP WITH " \
    "TIME ZONE)")                                                                                  \
  X("ducklake_inlined_data_tables", CAT_INLINE_TABLES, MR_KK_INLINE_TABLE, NULL,                   \
    "(table_id BIGINT, table_name VARCHAR, schema_version BIGINT)")                                \
  X("ducklake_column_mapping", CAT_RECORD, MR_KK_MAPPING, NULL,                                    \
    "(mapping_id BIGINT, table_id BIGINT, \"type\" VARCHAR)")                                      \
  X("ducklake_name_mapping", CAT_CHILD, MR_KK_MAPPING, "name_mapping",                             \
    "(mapping_id BIGINT, column_id BIGINT, source_name VARCHAR, target_field_id BIGINT, "          \
    "parent_column BIGINT, is_partition BOOLEAN)")                                                 \
  X("ducklake_schema_versions", CAT_SCHEMA_VERSION, MR_KK_SCHEMA_VERSION, NULL,                    \
    "(begin_snapshot BIGINT, schema_version BIGINT, table_id BIGINT)")                             \
  X("ducklake_macro", CAT_ENTITY, MR_KK_MACRO, NULL,                                               \
    "(schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot " \
    "BIGINT)")                                                                                     \
  X("ducklake_macro_impl", CAT_CHILD, MR_KK_MACRO, "macro_impl",                                   \
    "(macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, \"sql\" VARCHAR, \"type\" VARCHAR)")       \
  X("ducklake_macro_parameters", CAT_CHILD, MR_KK_MACRO, "macro_parameters",                       \
    "(macro_id BIGINT, impl_id BIGINT, column_id BIGINT, parameter_name VARCHAR, parameter_type "  \
    "VARCHAR, default_value VARCHAR, default_value_type VARCHAR)")                                 \
  X("ducklake_sort_info", CAT_ENTITY, MR_KK_SORT, NULL,                                            \
    "(sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)")               \
  X("ducklake_sort_expression", CAT_CHILD, MR_KK_SORT, "sort_expression",                          \
    "(sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT, expression VARCHAR, dialect "        \
    "VARCHAR, sort_direction VARCHAR, null_order VARCHAR)")

#define CAT_ROW(n, r, k, f, d) {n, r, k, f, "CREATE TABLE public." n d, NULL, NULL, 0, 0, {{0}}},
static catalog_table tables[] = {CATALOG_TABLES(CAT_ROW)};
#undef CAT_ROW
#define NTABLES (sizeof tables / sizeof tables[0])

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* tables by home kind, for the loads that place each record's rows */
static const catalog_table *of_kind[MR_KK_COUNT][NTABLES];
static size_t nof_kind[MR_KK_COUNT];

/* The message a row of t becomes. */
static const ProtobufCMessageDescriptor *row_descriptor(const catalog_table *t) {
  const ProtobufCMessageDescriptor *d = mr_value_descriptor(t->kind);
  if (d == NULL || t->field == NULL)
    return d;
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, t->field);
  return f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
}

static void resolve_tables(void) {
  for (size_t i = 0; i < NTABLES; i++) {
    catalog_table *t = &tables[i];
    t->msg = row_descriptor(t);
    t->index = i;
    const ProtobufCMessageDescriptor *home = mr_value_descriptor(t->kind);
    t->rep =
        home && t->field ? protobuf_c_message_descriptor_get_field_by_name(home, t->field) : NULL;
    if ((size_t)t->kind < MR_KK_COUNT)
      of_kind[t->kind][nof_kind[t->kind]++] = t;
    char *name = NULL;
    cat_ddl_col *cols = NULL;
    size_t n = 0;
    if (!cat_parse_create(t->ddl, &name, &cols, &n) || n > CATALOG_MAX_COLS)
      n = 0; /* the unit test reports a table with no columns */
    for (size_t j = 0; j < n; j++) {
      t->cols[j].name = cols[j].name; /* kept for the process lifetime */
      t->cols[j].type = cols[j].type;
      t->cols[j].field =
          t->msg ? protobuf_c_message_descriptor_get_field_by_name(t->msg, cols[j].name) : NULL;
    }
    t->ncols = n;
    free(cols);
    free(name);
  }
}

size_t catalog_table_count(void) {
  return NTABLES;
}

const catalog_table *catalog_table_at(size_t i) {
  pthread_once(&tables_once, resolve_tables);
  return i < NTABLES ? &tables[i] : NULL;
}

const catalog_table *catalog_table_find(const char *name) {
  pthread_once(&tables_once, resolve_tables);
  for (size_t i = 0; i < NTABLES; i++)
    if (strcmp(tables[i].name, name) == 0)
      return &tables[i];
  return NULL;
}

const catalog_table *const *catalog_tables_of_kind(mr_key_kind kind, size_t *n) {
  pthread_once(&tables_once, resolve_tables);
  *n = (size_t)kind < MR_KK_COUNT ? nof_kind[kind] : 0;
  return *n ? of_kind[kind] : NULL;
}

const char *catalog_parent_table(mr_key_kind kind) {
  for (size_t i = 0; i < NTABLES; i++)
    if (tables[i].kind == kind && tables[i].field == NULL)
      return tables[i].name;
  return "a record";
}

/* ---- DDL parsing ---------------------------------------------------------- */

static const char *skip_ws(const char *p) {
  while (*p && isspace((unsigned char)*p))
    p++;
  return p;
}

static bool eat_word(const char **pp, const char *w) {
  const char *p = skip_ws(*pp);
  size_t n = strlen(w);
  if (strncasecmp(p, w, n) != 0 || (p[n] && (isalnum((unsigned char)p[n]) || p[n] == '_')))
    return false;
  *pp = p + n;
  return true;
}

/* One identifier, quoted or bare; malloc'd. */
static char *read_ident(const char **pp) {
  const char *p = skip_ws(*pp);
  char *out = malloc(strlen(p) + 1);
  if (out == NULL)
    return NULL;
  size_t n = 0;
  if (*p == '"') {
    p++;
    while (*p) {
      if (*p == '"' && p[1] == '"') {
        out[n++] = '"';
        p += 2;
      } else if (*p == '"') {
        p++;
        break;
      } else {
        out[n++] = *p++;
      }
    }
  } else {
    while (*p && (isalnum((unsigned char)*p) || *p == '_' || (unsigned char)*p >= 0x80))
      out[n++] = *p++;
  }
  out[n] = '\0';
  *pp = p;
  if (n == 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* [schema.]name -> name */
static char *read_qualified(const char **pp) {
  char *a = read_ident(pp);
  if (a && **pp == '.') {
    (*pp)++;
    free(a);
    a = read_ident(pp);
  }
  return a;
}

void cat_ddl_cols_free(cat_ddl_col *cols, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(cols[i].name);
    free(cols[i].type);
  }
  free(cols);
}

static char *trim_dup(const char *s, size_t n) {
  while (n && isspace((unsigned char)*s)) {
    s++;
    n--;
  }
  while (n && isspace((unsigned char)s[n - 1]))
    n--;
  char *o = malloc(n + 1);
  if (o) {
    memcpy(o, s, n);
    o[n] = '\0';
  }
  return o;
}

/* Drops a trailing constraint word pair ("PRIMARY KEY", "NOT NULL"). */
static void strip_constraints(char *type) {
  static const char *const tails[] = {" PRIMARY KEY", " NOT NULL", " UNIQUE"};
  bool again = true;
  while (again) {
    again = false;
    size_t n = strlen(type);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
      size_t m = strlen(tails[i]);
      if (n > m && strcasecmp(type + n - m, tails[i]) == 0) {
        type[n - m] = '\0';
        again = true;
        break;
      }
    }
  }
}

bool cat_parse_create(const char *sql, char **table, cat_ddl_col **cols, size_t *ncols) {
  const char *p = sql;
  *table = NULL;
  *cols = NULL;
  *ncols = 0;
  if (!eat_word(&p, "CREATE"))
    return false;
  if (!eat_word(&p, "TABLE"))
    return false;
  const char *q = p;
  if (eat_word(&q, "IF") && eat_word(&q, "NOT") && eat_word(&q, "EXISTS"))
    p = q;
  char *name = read_qualified(&p);
  if (name == NULL)
    return false;
  p = skip_ws(p);
  if (*p != '(') {
    free(name);
    return false;
  }
  p++;
  size_t cap = 8, n = 0;
  cat_ddl_col *c = calloc(cap, sizeof *c);
  bool ok = c != NULL;
  while (ok) {
    char *cname = read_ident(&p);
    if (cname == NULL) {
      ok = false;
      break;
    }
    const char *start = p;
    int depth = 0;
    bool inq = false;
    while (*p && (inq || depth > 0 || (*p != ',' && *p != ')'))) {
      if (*p == '\'')
        inq = !inq;
      else if (!inq && *p == '(')
        depth++;
      else if (!inq && *p == ')')
        depth--;
      p++;
    }
    if (*p == '\0') {
      free(cname);
      ok = false;
      break;
    }
    if (n == cap) {
      cat_ddl_col *nc = realloc(c, 2 * cap * sizeof *c);
      if (nc == NULL) {
        free(cname);
        ok = false;
        break;
      }
      c = nc;
      cap *= 2;
    }
    c[n].name = cname;
    c[n].type = trim_dup(start, (size_t)(p - start));
    if (c[n].type == NULL) {
      free(cname);
      ok = false;
      break;
    }
    strip_constraints(c[n].type);
    n++;
    if (*p == ')')
      break;
    p++; /* , */
  }
  if (!ok) {
    cat_ddl_cols_free(c, n);
    free(name);
    return false;
  }
  *table = name;
  *cols = c;
  *ncols = n;
  return true;
}

bool cat_parse_drop(const char *sql, char **table) {
  const char *p = sql;
  *table = NULL;
  if (!eat_word(&p, "DROP") || !eat_word(&p, "TABLE"))
    return false;
  const char *q = p;
  if (eat_word(&q, "IF") && eat_word(&q, "EXISTS"))
    p = q;
  *table = read_qualified(&p);
  return *table != NULL;
}

static bool parse_ids(const char *s, int64_t *a, int64_t *b, bool two) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (end == s || errno || x < 0)
    return false;
  *a = x;
  if (!two)
    return *end == '\0';
  if (*end != '_')
    return false;
  s = end + 1;
  long long y = strtoll(s, &end, 10);
  if (end == s || *end || y < 0)
    return false;
  *b = y;
  return true;
}

bool cat_inline_data_name(const char *name, int64_t *tid, int64_t *ver) {
  static const char pre[] = "ducklake_inlined_data_";
  if (strncmp(name, pre, sizeof pre - 1) != 0 || !isdigit((unsigned char)name[sizeof pre - 1]))
    return false;
  return parse_ids(name + sizeof pre - 1, tid, ver, true);
}

bool cat_inline_delete_name(const char *name, int64_t *tid) {
  static const char pre[] = "ducklake_inlined_delete_";
  if (strncmp(name, pre, sizeof pre - 1) != 0)
    return false;
  int64_t unused;
  return parse_ids(name + sizeof pre - 1, tid, &unused, false);
}

/* ---- messages --------------------------------------------------------------- */

ProtobufCMessage *cat_msg_new(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = malloc(d->sizeof_message);
  if (m)
    d->message_init(m);
  return m;
}

ProtobufCMessage *cat_msg_copy(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (buf == NULL)
    return NULL;
  protobuf_c_message_pack(m, buf);
  ProtobufCMessage *c = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
  free(buf);
  return c;
}

static void *at(const ProtobufCMessage *m, unsigned off) {
  return (char *)m + off;
}

static protobuf_c_boolean *has_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
  if (f->label != PROTOBUF_C_LABEL_OPTIONAL || f->type == PROTOBUF_C_TYPE_STRING ||
      f->type == PROTOBUF_C_TYPE_MESSAGE)
    return NULL;
  return at(m, f->quantifier_offset);
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
  protobuf_c_boolean *h = has_of(m, f);
  if (h)
    return *h;
  if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
    return *(void **)at(m, f->offset) != NULL;
  return true;
}

bool cat_msg_i64(const ProtobufCMessage *m, const char *field, int64_t *v) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
  if (f == NULL || f->label == PROTOBUF_C_LABEL_REPEATED || !field_present(m, f))
    return false;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
    *v = *(int64_t *)at(m, f->offset);
    return true;
  default:
    return false;
  }
}

void cat_msg_set_i64(ProtobufCMessage *m, const char *field, int64_t v) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
  if (f == NULL || f->label == PROTOBUF_C_LABEL_REPEATED)
    return;
  *(int64_t *)at(m, f->offset) = v;
  protobuf_c_boolean *h = has_of(m, f);
  if (h)
    *h = 1;
}

size_t cat_msg_nrep(const ProtobufCMessage *m, const char *fname, ProtobufCMessage ***arr) {
  return cat_msg_rep(m, protobuf_c_message_descriptor_get_field_by_name(m->descriptor, fname), arr);
}

size_t cat_msg_rep(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                   ProtobufCMessage ***arr) {
  if (f == NULL || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) {
    *arr = NULL;
    return 0;
  }
  *arr = *(ProtobufCMessage ***)at(m, f->offset);
  return *(size_t *)at(m, f->quantifier_offset);
}

mr_status cat_msg_append(ProtobufCMessage *m, const char *fname, ProtobufCMessage *child,
                         mr_error *err) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, fname);
  if (f == NULL || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) {
    protobuf_c_message_free_unpacked(child, NULL);
    return mr_fail(err, MR_ERR_INVALID, "catalog: %s has no repeated field %s", m->descriptor->name,
                   fname);
  }
  ProtobufCMessage ***arr = at(m, f->offset);
  size_t *n = at(m, f->quantifier_offset);
  ProtobufCMessage **na = realloc(*arr, (*n + 1) * sizeof **arr);
  if (na == NULL) {
    protobuf_c_message_free_unpacked(child, NULL);
    return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
  }
  na[(*n)++] = child;
  *arr = na;
  return MR_OK;
}

void cat_msg_remove(ProtobufCMessage *m, const char *fname, size_t i) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(m->descriptor, fname);
  if (f == NULL || f->label != PROTOBUF_C_LABEL_REPEATED)
    return;
  ProtobufCMessage **arr = *(ProtobufCMessage ***)at(m, f->offset);
  size_t *n = at(m, f->quantifier_offset);
  if (i >= *n)
    return;
  protobuf_c_message_free_unpacked(arr[i], NULL);
  memmove(arr + i, arr + i + 1, (*n - i - 1) * sizeof *arr);
  (*n)--;
}

static size_t scalar_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  case PROTOBUF_C_TYPE_BOOL:
    return sizeof(protobuf_c_boolean);
  default:
    return 4;
  }
}

bool cat_msg_same(const ProtobufCMessage *a, const ProtobufCMessage *b, const char *skip) {
  const ProtobufCMessageDescriptor *d = a->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if (skip && strcmp(f->name, skip) == 0)
      continue;
    bool pa = field_present(a, f), pb = field_present(b, f);
    if (pa != pb)
      return false;
    if (!pa)
      continue;
    if (f->type == PROTOBUF_C_TYPE_STRING) {
      if (strcmp(*(char **)at(a, f->offset), *(char **)at(b, f->offset)) != 0)
        return false;
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
      ProtobufCBinaryData *x = at(a, f->offset), *y = at(b, f->offset);
      if (x->len != y->len || (x->len && memcmp(x->data, y->data, x->len) != 0))
        return false;
    } else if (memcmp(at(a, f->offset), at(b, f->offset), scalar_size(f->type)) != 0) {
      return false;
    }
  }
  return true;
}

bool cat_key_from_msg(mr_key_kind kind, const ProtobufCMessage *msg, mr_key *k) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  if (ki == NULL)
    return false;
  memset(k, 0, sizeof *k);
  k->kind = kind;
  for (unsigned i = 0; i < ki->ncomp; i++) {
    int64_t v;
    if (!cat_msg_i64(msg, ki->comp[i], &v))
      return false;
    k->c[i] = (uint64_t)v;
  }
  return true;
}

/* ---- cell text <-> field ------------------------------------------------------ */

static bool is_timestamptz(const char *t) {
  /* the first letter first: this runs for every integer cell of a load */
  return t && (t[0] == 'T' || t[0] == 't') &&
         (strcasecmp(t, "TIMESTAMP WITH TIME ZONE") == 0 || strcasecmp(t, "TIMESTAMPTZ") == 0);
}

static bool is_uuid(const char *t) {
  return t && strcasecmp(t, "UUID") == 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = (unsigned)(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = (int64_t)yoe + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
}

/* "YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]" -> us since epoch, UTC. */
static bool parse_timestamptz(const char *s, int64_t *out) {
  int y, mo, d, h, mi, sec, n = 0;
  if (sscanf(s, "%d-%d-%d%*[ T]%d:%d:%d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n == 0)
    return false;
  const char *p = s + n;
  int64_t frac = 0;
  if (*p == '.') {
    p++;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
      if (digits < 6) {
        frac = frac * 10 + (*p - '0');
        digits++;
      }
      p++;
    }
    while (digits++ < 6)
      frac *= 10;
  }
  int64_t off = 0;
  if (*p == '+' || *p == '-') {
    int sign = *p == '-' ? -1 : 1;
    p++;
    int oh = 0, om = 0, os = 0;
    if (sscanf(p, "%d", &oh) != 1)
      return false;
    while (isdigit((unsigned char)*p))
      p++;
    if (*p == ':') {
      om = atoi(++p);
      while (isdigit((unsigned char)*p))
        p++;
      if (*p == ':') {
        os = atoi(++p);
        while (isdigit((unsigned char)*p))
          p++;
      }
    }
    off = sign * ((int64_t)oh * 3600 + om * 60 + os);
  }
  if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31)
    return false;
  int64_t secs =
      days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec - off;
  *out = secs * 1000000 + frac;
  return true;
}

static void format_timestamptz(int64_t us, char *buf, size_t cap) {
  int64_t secs = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
  int64_t frac = us - secs * 1000000;
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
  int64_t rem = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  snprintf(buf, cap, "%04lld-%02u-%02u %02lld:%02lld:%02lld.%06lld+00", (long long)y, m, d,
           (long long)(rem / 3600), (long long)(rem / 60 % 60), (long long)(rem % 60),
           (long long)frac);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_uuid(const char *s, uint8_t out[16]) {
  size_t n = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '-')
      continue;
    int a = hexval(p[0]);
    int b = p[1] ? hexval(p[1]) : -1;
    if (a < 0 || b < 0 || n == 16)
      return false;
    out[n++] = (uint8_t)(a * 16 + b);
    p++;
  }
  return n == 16;
}

mr_status catalog_set_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const char *duck_type, const sql_value *v, mr_error *err) {
  void *dst = at(m, f->offset);
  protobuf_c_boolean *has = has_of(m, f);
  if (v->is_null) {
    if (f->label == PROTOBUF_C_LABEL_REQUIRED)
      return mr_fail(err, MR_ERR_INVALID, "catalog: NULL in required field %s.%s",
                     m->descriptor->name, f->name);
    if (f->type == PROTOBUF_C_TYPE_STRING) {
      char **sp = dst;
      if (*sp != f->default_value)
        free(*sp);
      *sp = NULL;
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
      ProtobufCBinaryData *b = dst;
      free(b->data);
      b->data = NULL;
      b->len = 0;
    }
    if (has)
      *has = 0;
    return MR_OK;
  }
  const char *s = v->data;
  char *end = NULL;
  errno = 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64: {
    int64_t x;
    if (is_timestamptz(duck_type)) {
      if (!parse_timestamptz(s, &x))
        return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad timestamp '%s'", f->name, s);
    } else {
      x = strtoll(s, &end, 10);
      if (end == s || *end || errno)
        return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad integer '%s'", f->name, s);
    }
    *(int64_t *)dst = x;
    break;
  }
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64: {
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end || errno || *s == '-')
      return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad unsigned integer '%s'", f->name, s);
    *(uint64_t *)dst = x;
    break;
  }
  case PROTOBUF_C_TYPE_UINT32: {
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end || errno || x > UINT32_MAX)
      return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad integer '%s'", f->name, s);
    *(uint32_t *)dst = (uint32_t)x;
    break;
  }
  case PROTOBUF_C_TYPE_BOOL: {
    bool t = strcasecmp(s, "true") == 0 || strcmp(s, "t") == 0 || strcmp(s, "1") == 0;
    bool fl = strcasecmp(s, "false") == 0 || strcmp(s, "f") == 0 || strcmp(s, "0") == 0;
    if (!t && !fl)
      return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad boolean '%s'", f->name, s);
    *(protobuf_c_boolean *)dst = t;
    break;
  }
  case PROTOBUF_C_TYPE_DOUBLE: {
    double x = strtod(s, &end);
    if (end == s || *end)
      return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad number '%s'", f->name, s);
    *(double *)dst = x;
    break;
  }
  case PROTOBUF_C_TYPE_STRING: {
    char *c = malloc(v->len + 1);
    if (c == NULL)
      return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
    memcpy(c, s, v->len);
    c[v->len] = '\0';
    char **sp = dst;
    if (*sp != f->default_value)
      free(*sp);
    *sp = c;
    break;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    ProtobufCBinaryData *b = dst;
    uint8_t *c;
    size_t n;
    if (is_uuid(duck_type)) {
      c = malloc(16);
      if (c == NULL)
        return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
      if (!parse_uuid(s, c)) {
        free(c);
        return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad uuid '%s'", f->name, s);
      }
      n = 16;
    } else {
      c = malloc(v->len ? v->len : 1);
      if (c == NULL)
        return mr_fail(err, MR_ERR_NOMEM, "catalog: out of memory");
      memcpy(c, s, v->len);
      n = v->len;
    }
    free(b->data);
    b->data = c;
    b->len = n;
    break;
  }
  case PROTOBUF_C_TYPE_ENUM:
  case PROTOBUF_C_TYPE_INT32: {
    long x = strtol(s, &end, 10);
    if (end == s || *end || errno)
      return mr_fail(err, MR_ERR_INVALID, "catalog: %s: bad integer '%s'", f->name, s);
    *(int32_t *)dst = (int32_t)x;
    break;
  }
  default:
    return mr_fail(err, MR_ERR_INVALID, "catalog: field %s has an unsupported type", f->name);
  }
  if (has)
    *has = 1;
  return MR_OK;
}

mr_status catalog_get_field(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const char *duck_type, catalog_cell *out, mr_error *err) {
  out->text = NULL;
  out->len = 0;
  out->has_int = false;
  out->int_value = 0;
  if (!field_present(m, f))
    return MR_OK;
  char *buf = out->buf;
  const void *src = at(m, f->offset);
  const char *text = buf;
  size_t n = 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
    if (is_timestamptz(duck_type)) {
      format_timestamptz(*(const int64_t *)src, buf, sizeof out->buf);
    } else {
      out->int_value = *(const int64_t *)src;
      out->has_int = true;
      mr_format_i64(out->int_value, buf);
    }
    break;
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
    mr_format_u64(*(const uint64_t *)src, buf);
    if (*(const uint64_t *)src <= (uint64_t)INT64_MAX) {
      out->int_value = (int64_t) * (const uint64_t *)src;
      out->has_int = true;
    }
    break;
  case PROTOBUF_C_TYPE_UINT32:
    out->int_value = *(const uint32_t *)src;
    out->has_int = true;
    mr_format_u64(*(const uint32_t *)src, buf);
    break;
  case PROTOBUF_C_TYPE_ENUM:
  case PROTOBUF_C_TYPE_INT32:
    out->int_value = *(const int32_t *)src;
    out->has_int = true;
    mr_format_i64(*(const int32_t *)src, buf);
    break;
  case PROTOBUF_C_TYPE_BOOL:
    text = *(const protobuf_c_boolean *)src ? "true" : "false";
    n = strlen(text);
    break;
  case PROTOBUF_C_TYPE_DOUBLE:
    snprintf(buf, sizeof out->buf, "%.17g", *(const double *)src);
    break;
  case PROTOBUF_C_TYPE_STRING:
    text = *(char *const *)src;
    n = strlen(text);
    break;
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *b = src;
    if (is_uuid(duck_type) && b->len == 16) {
      const uint8_t *u = b->data;
      snprintf(buf, sizeof out->buf,
               "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
               u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
               u[15]);
    } else {
      text = (const char *)b->data;
      n = b->len;
      if (text == NULL)
        text = "";
    }
    break;
  }
  default:
    return mr_fail(err, MR_ERR_INVALID, "catalog: field %s has an unsupported type", f->name);
  }
  if (text == buf)
    n = strlen(buf);
  out->text = text;
  out->len = n;
  return MR_OK;
}
