/*
 * lakeview.c — reads the catalog at a snapshot into a lakeview (see
 * lakeview.h): schemas, tables and views first, then per kind the details
 * the tables collect. A kind's records come current range first, history
 * range second, so the arrays are sorted by id after each kind.
 */
#include "cli/lakeview.h"

#include <stdlib.h>
#include <string.h>

#include "base/mr_grow.h"

/* Appends one zeroed element to *arr (n, cap counted in elements). */
static void *push(void *arr_ptr, size_t *n, size_t *cap, size_t size, mr_error *err) {
  void **arr = arr_ptr;
  size_t bytes = *cap * size;
  if (mr_grow(arr, &bytes, (*n + 1) * size, 16 * size) != MR_OK) {
    mr_fail(err, MR_ERR_NOMEM, "out of memory reading the catalog");
    return NULL;
  }
  *cap = bytes / size;
  void *e = (char *)*arr + (*n)++ * size;
  memset(e, 0, size);
  return e;
}

/* A copy of s (NULL stays NULL); false when out of memory. */
static bool dup(const char *s, char **out) {
  *out = NULL;
  if (s == NULL)
    return true;
  *out = strdup(s);
  return *out != NULL;
}

static mr_status nomem(mr_error *err) {
  return mr_fail(err, MR_ERR_NOMEM, "out of memory reading the catalog");
}

static int by_table_id(const void *a, const void *b) {
  const lv_table *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_schema_id(const void *a, const void *b) {
  const lv_schema *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_view_id(const void *a, const void *b) {
  const lv_view *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_file_id(const void *a, const void *b) {
  const lv_file *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_column(const void *a, const void *b) {
  const lv_column *x = a, *y = b;
  if (x->order != y->order)
    return (x->order > y->order) - (x->order < y->order);
  return (x->id > y->id) - (x->id < y->id);
}

lv_table *lakeview_table(const lakeview *v, uint64_t id) {
  lv_table key = {.id = id};
  return v->ntables ? bsearch(&key, v->tables, v->ntables, sizeof key, by_table_id) : NULL;
}

static lv_file *table_file(const lv_table *t, uint64_t id) {
  lv_file key = {.id = id};
  return t->nfiles ? bsearch(&key, t->files, t->nfiles, sizeof key, by_file_id) : NULL;
}

const lv_schema *lakeview_schema(const lakeview *v, uint64_t id) {
  for (size_t i = 0; i < v->nschemas; i++)
    if (v->schemas[i].id == id)
      return &v->schemas[i];
  return NULL;
}

/* ---- visitors, one per kind ------------------------------------------------ */

static mr_status on_schema(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lakeview *v = ctx;
  const Moraine__V1__Schema *s = (const Moraine__V1__Schema *)m;
  lv_schema *e = push(&v->schemas, &v->nschemas, &v->capschemas, sizeof *e, err);
  if (e == NULL)
    return MR_ERR_NOMEM;
  e->id = (uint64_t)s->schema_id;
  return dup(s->schema_name, &e->name) ? MR_OK : nomem(err);
}

static mr_status on_table(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lakeview *v = ctx;
  const Moraine__V1__Table *t = (const Moraine__V1__Table *)m;
  lv_table *e = push(&v->tables, &v->ntables, &v->captables, sizeof *e, err);
  if (e == NULL)
    return MR_ERR_NOMEM;
  e->id = (uint64_t)t->table_id;
  e->schema_id = t->has_schema_id ? (uint64_t)t->schema_id : 0;
  return dup(t->table_name, &e->name) ? MR_OK : nomem(err);
}

static mr_status on_view(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lakeview *v = ctx;
  const Moraine__V1__View *w = (const Moraine__V1__View *)m;
  lv_view *e = push(&v->views, &v->nviews, &v->capviews, sizeof *e, err);
  if (e == NULL)
    return MR_ERR_NOMEM;
  e->id = (uint64_t)w->view_id;
  e->schema_id = w->has_schema_id ? (uint64_t)w->schema_id : 0;
  return dup(w->view_name, &e->name) && dup(w->sql, &e->sql) ? MR_OK : nomem(err);
}

static mr_status on_column(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lv_table *t = lakeview_table(ctx, k->c[0]);
  if (t == NULL) /* a column of a table not live at the snapshot */
    return MR_OK;
  const Moraine__V1__Column *c = (const Moraine__V1__Column *)m;
  lv_column *e = push(&t->cols, &t->ncols, &t->capcols, sizeof *e, err);
  if (e == NULL)
    return MR_ERR_NOMEM;
  e->id = (uint64_t)c->column_id;
  e->order = c->has_column_order ? c->column_order : 0;
  e->nulls_allowed = !c->has_nulls_allowed || c->nulls_allowed;
  e->has_parent = c->has_parent_column;
  e->parent = c->parent_column;
  return dup(c->column_name, &e->name) && dup(c->column_type, &e->type) ? MR_OK : nomem(err);
}

static mr_status on_file(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lv_table *t = lakeview_table(ctx, k->c[0]);
  if (t == NULL)
    return MR_OK;
  const Moraine__V1__DataFile *f = (const Moraine__V1__DataFile *)m;
  lv_file *e = push(&t->files, &t->nfiles, &t->capfiles, sizeof *e, err);
  if (e == NULL)
    return MR_ERR_NOMEM;
  e->id = (uint64_t)f->data_file_id;
  e->records = f->has_record_count ? f->record_count : 0;
  e->bytes = f->has_file_size_bytes ? f->file_size_bytes : 0;
  return dup(f->path, &e->path) ? MR_OK : nomem(err);
}

static mr_status on_delfile(void *ctx, const mr_key *k, const ProtobufCMessage *m, mr_error *err) {
  lv_table *t = lakeview_table(ctx, k->c[0]);
  if (t == NULL)
    return MR_OK;
  const Moraine__V1__DeleteFile *d = (const Moraine__V1__DeleteFile *)m;
  t->delete_files++;
  lv_file *f = d->has_data_file_id ? table_file(t, (uint64_t)d->data_file_id) : NULL;
  if (f && d->has_delete_count)
    f->deleted += d->delete_count;
  return MR_OK;
}

static mr_status on_inline_row(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                               mr_error *err) {
  lv_table *t = lakeview_table(ctx, k->c[0]);
  if (t)
    t->inlined_rows++;
  return MR_OK;
}

static mr_status on_inline_delete(void *ctx, const mr_key *k, const ProtobufCMessage *m,
                                  mr_error *err) {
  lv_table *t = lakeview_table(ctx, k->c[0]);
  lv_file *f = t ? table_file(t, k->c[1]) : NULL;
  if (f) {
    f->deleted++;
    t->inline_deletes++;
  }
  return MR_OK;
}

/* ---- reading ------------------------------------------------------------------ */

static mr_status read_kind(store *st, mr_key_kind kind, uint64_t s, uint64_t table_id,
                           store_visit_fn fn, lakeview *v, mr_error *err) {
  mr_status rc = store_read_kind_at(st, kind, s, table_id, fn, v, err);
  if (rc)
    return mr_error_wrap(err, "reading %s records at snapshot %llu", mr_key_kind_get(kind)->text,
                         (unsigned long long)s);
  return MR_OK;
}

static void sort_files(lakeview *v) {
  for (size_t i = 0; i < v->ntables; i++)
    if (v->tables[i].nfiles)
      qsort(v->tables[i].files, v->tables[i].nfiles, sizeof *v->tables[i].files, by_file_id);
}

static void sort_columns(lakeview *v) {
  for (size_t i = 0; i < v->ntables; i++)
    if (v->tables[i].ncols)
      qsort(v->tables[i].cols, v->tables[i].ncols, sizeof *v->tables[i].cols, by_column);
}

mr_status lakeview_read(store *st, uint64_t s, uint64_t detail_table, lakeview *out,
                        mr_error *err) {
  memset(out, 0, sizeof *out);
  out->snapshot = s;
  mr_status rc = read_kind(st, MR_KK_SCHEMA, s, 0, on_schema, out, err);
  if (!rc)
    rc = read_kind(st, MR_KK_TABLE, s, 0, on_table, out, err);
  if (!rc)
    rc = read_kind(st, MR_KK_VIEW, s, 0, on_view, out, err);
  if (rc)
    goto fail;
  if (out->nschemas)
    qsort(out->schemas, out->nschemas, sizeof *out->schemas, by_schema_id);
  if (out->ntables)
    qsort(out->tables, out->ntables, sizeof *out->tables, by_table_id);
  if (out->nviews)
    qsort(out->views, out->nviews, sizeof *out->views, by_view_id);
  if (detail_table == LAKEVIEW_NO_DETAILS)
    return MR_OK;
  rc = read_kind(st, MR_KK_COLUMN, s, detail_table, on_column, out, err);
  if (!rc)
    rc = read_kind(st, MR_KK_FILE, s, detail_table, on_file, out, err);
  if (rc)
    goto fail;
  sort_columns(out);
  sort_files(out);
  rc = read_kind(st, MR_KK_DELFILE, s, detail_table, on_delfile, out, err);
  if (!rc)
    rc = read_kind(st, MR_KK_INLINE_ROW, s, detail_table, on_inline_row, out, err);
  if (!rc)
    rc = read_kind(st, MR_KK_INLINE_DELETE_ROW, s, detail_table, on_inline_delete, out, err);
  if (rc)
    goto fail;
  for (size_t i = 0; i < out->ntables; i++)
    out->tables[i].detailed = detail_table == 0 || out->tables[i].id == detail_table;
  return MR_OK;
fail:
  lakeview_free(out);
  return rc;
}

void lakeview_free(lakeview *v) {
  for (size_t i = 0; i < v->nschemas; i++)
    free(v->schemas[i].name);
  for (size_t i = 0; i < v->ntables; i++) {
    lv_table *t = &v->tables[i];
    for (size_t j = 0; j < t->ncols; j++) {
      free(t->cols[j].name);
      free(t->cols[j].type);
    }
    for (size_t j = 0; j < t->nfiles; j++)
      free(t->files[j].path);
    free(t->cols);
    free(t->files);
    free(t->name);
  }
  for (size_t i = 0; i < v->nviews; i++) {
    free(v->views[i].name);
    free(v->views[i].sql);
  }
  free(v->schemas);
  free(v->tables);
  free(v->views);
  memset(v, 0, sizeof *v);
}

int64_t lakeview_rows(const lv_table *t) {
  int64_t rows = (int64_t)t->inlined_rows;
  for (size_t i = 0; i < t->nfiles; i++)
    rows += t->files[i].records - t->files[i].deleted;
  return rows;
}

lv_table *lakeview_find(const lakeview *v, const char *spec, bool *ambiguous) {
  *ambiguous = false;
  const char *dot = strchr(spec, '.');
  lv_table *found = NULL;
  for (size_t i = 0; i < v->ntables; i++) {
    lv_table *t = &v->tables[i];
    const lv_schema *sc = lakeview_schema(v, t->schema_id);
    if (t->name == NULL)
      continue;
    bool match;
    if (dot && sc && sc->name) {
      size_t sl = (size_t)(dot - spec);
      match = strlen(sc->name) == sl && strncmp(sc->name, spec, sl) == 0 &&
              strcmp(t->name, dot + 1) == 0;
      if (match)
        return t;
    }
    if (strcmp(t->name, spec) == 0) {
      if (found)
        *ambiguous = true;
      found = t;
    }
  }
  return found;
}
