/*
 * import_commit.c — `moraine import`'s commits: which commit each source
 * row goes into (import_plan.h: versioned rows by their snapshots, child
 * rows with their parent, options first, unversioned records last), and
 * each commit built as the captured changes of one DuckLake transaction
 * and handed to the catalog layer's prepare hook (catalog_prepare), which
 * maps them through its one table and writes one store commit.
 */
#include "cli/import_internal.h"

#include <stdlib.h>
#include <string.h>

#include "mr_version.h"

/* ---- commit groups ----------------------------------------------------------- */

/* Sorts the rows that have a group by it (a counting pass; groups ascend). */
static mr_status order_rows(importer *im, const size_t *grp, size_t nrows, size_t **order,
                            size_t *n) {
  *n = 0;
  *order = malloc((nrows ? nrows : 1) * sizeof **order);
  if (*order == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  for (size_t r = 0; r < nrows; r++)
    if (grp[r] != IMPORT_NO_GROUP)
      (*order)[(*n)++] = r;
  /* stable insertion by group would be O(n^2); sort pairs instead */
  size_t m = *n;
  size_t *tmp = malloc((m ? m : 1) * sizeof *tmp);
  if (tmp == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  /* bottom-up merge sort on grp[], stable (rows keep their source order) */
  size_t *src = *order, *dst = tmp;
  for (size_t w = 1; w < m; w *= 2) {
    for (size_t lo = 0; lo < m; lo += 2 * w) {
      size_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        dst[k++] = grp[src[j]] < grp[src[i]] ? src[j++] : src[i++];
      while (i < mid)
        dst[k++] = src[i++];
      while (j < hi)
        dst[k++] = src[j++];
    }
    size_t *sw = src;
    src = dst;
    dst = sw;
  }
  if (src != *order) {
    memcpy(*order, src, m * sizeof *src);
    free(src);
  } else {
    free(dst);
  }
  return MR_OK;
}

static int cmp_pkey(const void *a, const void *b) {
  return strcmp(((const pkey *)a)->key, ((const pkey *)b)->key);
}

/* The key text of row r of rows, by the columns cols[0..n). */
static char *key_text(const import_rows *rows, size_t r, const int *cols, unsigned n) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (f == NULL)
    return NULL;
  for (unsigned i = 0; i < n; i++) {
    const char *t = imp_cell_text(rows, r, cols[i]);
    fprintf(f, "%s%s", i ? "|" : "", t ? t : "");
  }
  fclose(f);
  return out;
}

/* The key columns of kind that rows has (all of them, or false). */
static bool key_cols(const import_rows *rows, mr_key_kind kind, int *cols, unsigned *n) {
  const mr_key_kind_info *ki = mr_key_kind_get(kind);
  *n = ki->ncomp;
  for (unsigned i = 0; i < ki->ncomp; i++)
    if ((cols[i] = import_rows_col(rows, ki->comp[i])) < 0)
      return false;
  return true;
}

static mr_status build_pidx(importer *im, stable *p) {
  int cols[MR_KEY_MAX_COMP];
  unsigned n;
  p->pidx_built = true;
  if (!key_cols(&p->rows, p->tb->kind, cols, &n))
    return MR_OK;
  p->pidx = calloc(p->rows.nrows ? p->rows.nrows : 1, sizeof *p->pidx);
  if (p->pidx == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  for (size_t r = 0; r < p->rows.nrows; r++) {
    /* a version at no retained snapshot is written (ended) by its del commit */
    size_t g = p->ins[r] != IMPORT_NO_GROUP ? p->ins[r] : p->del[r];
    if (g == IMPORT_NO_GROUP)
      continue;
    char *k = key_text(&p->rows, r, cols, n);
    if (k == NULL)
      return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
    p->pidx[p->npidx++] = (pkey){k, g};
  }
  qsort(p->pidx, p->npidx, sizeof *p->pidx, cmp_pkey);
  return MR_OK;
}

/* The first commit of any version of the parent record a child row names;
 * IMPORT_NO_GROUP when no commit has it. An unversioned parent (statistics,
 * a column mapping) comes with the last commit, and its children too. */
static mr_status parent_group(importer *im, const stable *child, size_t row, size_t *out) {
  *out = IMPORT_NO_GROUP;
  /* the parent: the mapping's table whose rows are the records of the kind */
  const catalog_table *ptb = NULL;
  for (size_t i = 0; ptb == NULL && i < catalog_table_count(); i++) {
    const catalog_table *t = catalog_table_at(i);
    if (t->kind == child->tb->kind && t->field == NULL)
      ptb = t;
  }
  stable *p = ptb ? imp_find_table(im, ptb->name) : NULL;
  if (p == NULL)
    return MR_OK;
  if (p->ibegin < 0) {
    *out = im->n - 1;
    return MR_OK;
  }
  mr_status rc = p->pidx_built ? MR_OK : build_pidx(im, p);
  int cols[MR_KEY_MAX_COMP];
  unsigned n;
  if (rc || p->npidx == 0 || !key_cols(&child->rows, child->tb->kind, cols, &n))
    return rc;
  pkey want = {key_text(&child->rows, row, cols, n), 0};
  if (want.key == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  pkey *hit = bsearch(&want, p->pidx, p->npidx, sizeof *p->pidx, cmp_pkey);
  /* several versions may share the key: the earliest commit of them */
  while (hit && hit > p->pidx && strcmp(hit[-1].key, want.key) == 0)
    hit--;
  for (pkey *e = hit; e && e < p->pidx + p->npidx && strcmp(e->key, want.key) == 0; e++)
    if (e->group < *out)
      *out = e->group;
  free(want.key);
  return MR_OK;
}

/* The commits of every row of s. Versioned tables first (parents are). */
static mr_status plan_table(importer *im, stable *s, bool children) {
  size_t n = s->rows.nrows, last = im->n - 1;
  const catalog_table *tb = s->tb;
  bool child = tb && tb->role == CAT_CHILD && s->ibegin < 0;
  if (child != children)
    return MR_OK;
  s->ins = malloc((n ? n : 1) * sizeof *s->ins);
  s->del = malloc((n ? n : 1) * sizeof *s->del);
  if (s->ins == NULL || s->del == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  int isid = tb ? import_rows_col(&s->rows, "snapshot_id") : -1;
  for (size_t r = 0; r < n; r++) {
    s->ins[r] = s->del[r] = IMPORT_NO_GROUP;
    int64_t b, e, sid;
    if (s->ibegin >= 0) {
      if (!imp_cell_i64(&s->rows, r, s->ibegin, &b))
        return mr_fail(im->err, MR_ERR_INVALID, "%s: a row without begin_snapshot", s->name);
      bool has_end = imp_cell_i64(&s->rows, r, s->iend, &e), bad;
      import_row_groups(im->ids, im->n, b, has_end, e, &s->ins[r], &s->del[r], &bad);
      if (bad)
        return mr_fail(im->err, MR_ERR_INVALID,
                       "%s: a row of snapshots %lld..%lld, after the newest snapshot %lld or "
                       "ending before it begins",
                       s->name, (long long)b, has_end ? (long long)e : -1LL,
                       (long long)im->ids[im->n - 1]);
    } else if (tb && (tb->role == CAT_SNAPSHOT || tb->role == CAT_SNAPSHOT_CHANGES)) {
      if (!imp_cell_i64(&s->rows, r, isid, &sid))
        return mr_fail(im->err, MR_ERR_INVALID, "%s: a row without snapshot_id", s->name);
      size_t g = import_group_of(im->ids, im->n, sid);
      if (g != IMPORT_NO_GROUP && im->ids[g] == sid)
        s->ins[r] = g; /* the changes of an expired snapshot go with it */
    } else if (tb && tb->role == CAT_OPTION) {
      s->ins[r] = 0; /* DuckLake writes its options as it creates the catalog */
    } else if (child) {
      mr_status rc = parent_group(im, s, r, &s->ins[r]);
      if (rc)
        return rc;
      if (s->ins[r] == IMPORT_NO_GROUP)
        im->orphans++;
    } else if (tb && tb->role == CAT_INLINE_TABLES) {
      int64_t tid, ver;
      char nm[96];
      if (imp_cell_i64(&s->rows, r, import_rows_col(&s->rows, "table_id"), &tid) &&
          imp_cell_i64(&s->rows, r, import_rows_col(&s->rows, "schema_version"), &ver)) {
        snprintf(nm, sizeof nm, "ducklake_inlined_data_%lld_%lld", (long long)tid, (long long)ver);
        stable *d = imp_find_table(im, nm);
        s->ins[r] = d && d->ddl_group != IMPORT_NO_GROUP ? d->ddl_group : last;
      } else {
        s->ins[r] = last;
      }
    } else {
      s->ins[r] = last; /* statistics, mappings, files scheduled for deletion */
    }
  }
  /* an inlined table is created no later than its first row */
  if (s->ddl) {
    for (size_t r = 0; r < n; r++)
      if (s->ins[r] != IMPORT_NO_GROUP &&
          (s->ddl_group == IMPORT_NO_GROUP || s->ins[r] < s->ddl_group))
        s->ddl_group = s->ins[r];
    if (s->ddl_group == IMPORT_NO_GROUP)
      s->ddl_group = last;
  }
  mr_status rc = order_rows(im, s->ins, n, &s->ins_order, &s->nins);
  if (!rc)
    rc = order_rows(im, s->del, n, &s->del_order, &s->ndel);
  return rc;
}

/* ---- one commit -------------------------------------------------------------- */

typedef struct commit_build {
  sql_change_batch *b;
  size_t nb, cap;
  sql_value **vals; /* per batch, owned arrays */
} commit_build;

static void build_reset(commit_build *cb) {
  for (size_t i = 0; i < cb->nb; i++)
    free(cb->vals[i]);
  cb->nb = 0;
}

static void build_free(commit_build *cb) {
  build_reset(cb);
  free(cb->b);
  free(cb->vals);
}

static sql_change_batch *new_batch(importer *im, commit_build *cb) {
  if (cb->nb == cb->cap) {
    size_t nc = cb->cap ? 2 * cb->cap : 64;
    sql_change_batch *nb = realloc(cb->b, nc * sizeof *nb);
    if (nb)
      cb->b = nb;
    sql_value **nv = nb ? realloc(cb->vals, nc * sizeof *nv) : NULL;
    if (nv)
      cb->vals = nv;
    if (nb == NULL || nv == NULL) {
      mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
      return NULL;
    }
    cb->cap = nc;
  }
  sql_change_batch *b = &cb->b[cb->nb];
  memset(b, 0, sizeof *b);
  cb->vals[cb->nb++] = NULL;
  b->schema = "public";
  return b;
}

/* A row batch of s with the rows order[from..to); insert rows have their
 * end_snapshot blanked (it is set by the later commit ending them). */
static mr_status rows_batch(importer *im, commit_build *cb, stable *s, sql_change_op op,
                            const size_t *order, size_t from, size_t to) {
  if (to <= from)
    return MR_OK;
  sql_change_batch *b = new_batch(im, cb);
  if (b == NULL)
    return im->err->code;
  size_t nc = s->rows.ncols, nr = to - from;
  sql_value *v = malloc(nc * nr * sizeof *v);
  if (v == NULL)
    return mr_fail(im->err, MR_ERR_NOMEM, "out of memory");
  cb->vals[cb->nb - 1] = v;
  for (size_t i = 0; i < nr; i++) {
    memcpy(&v[i * nc], &s->rows.values[order[from + i] * nc], nc * sizeof *v);
    if (op == SQL_CHANGE_INSERT && s->iend >= 0)
      v[i * nc + (size_t)s->iend] = SQL_VALUE_NULL;
  }
  b->op = op;
  b->table = s->name;
  b->ncols = nc;
  b->col_names = (const char *const *)s->rows.names;
  b->col_types = s->types;
  b->nrows = nr;
  b->values = v;
  im->rows += nr;
  return MR_OK;
}

/* The batches of commit g: its snapshot, the inlined tables it creates, then
 * every table's ends and inserts. */
static mr_status build_commit(importer *im, commit_build *cb, size_t g) {
  build_reset(cb);
  mr_status rc = MR_OK;
  /* the snapshot rows first, as DuckLake writes them */
  for (int pass = 0; pass < 3 && !rc; pass++) {
    for (size_t i = 0; !rc && i < im->nt; i++) {
      stable *s = &im->t[i];
      bool snap = s->tb && (s->tb->role == CAT_SNAPSHOT || s->tb->role == CAT_SNAPSHOT_CHANGES);
      if (pass == 1 && s->ddl && s->ddl_group == g) {
        sql_change_batch *b = new_batch(im, cb);
        if (b == NULL)
          return im->err->code;
        b->op = SQL_CHANGE_DDL;
        b->sql = s->ddl;
        b->table = s->name;
      }
      if ((pass == 0) != snap || pass == 1)
        continue;
      size_t from = s->cd;
      while (s->cd < s->ndel && s->del[s->del_order[s->cd]] == g)
        s->cd++;
      rc = rows_batch(im, cb, s, SQL_CHANGE_UPDATE, s->del_order, from, s->cd);
      from = s->ci;
      while (!rc && s->ci < s->nins && s->ins[s->ins_order[s->ci]] == g)
        s->ci++;
      if (!rc)
        rc = rows_batch(im, cb, s, SQL_CHANGE_INSERT, s->ins_order, from, s->ci);
    }
  }
  return rc;
}

/* The commits of every row: parents first (children go with them). */
mr_status import_plan_tables(importer *im) {
  mr_status rc = MR_OK;
  for (int children = 0; !rc && children < 2; children++)
    for (size_t i = 0; !rc && i < im->nt; i++)
      rc = plan_table(im, &im->t[i], children == 1);
  return rc;
}


void import_free(importer *im) {
  for (size_t i = 0; i < im->nt; i++)
    imp_stable_free(&im->t[i]);
  free(im->t);
  free(im->ids);
}

/* Replays the commits into st. */
mr_status import_replay(importer *im, store *st, tool_progress *pr) {
  sql_engine_options eo = {.database_path = NULL, .server_version = "moraine import " MORAINE_VERSION};
  sql_engine *e = NULL;
  sql_error se;
  memset(&se, 0, sizeof se);
  /* the catalog layer's load-back check casts inlined values in an engine */
  if (sql_engine_open(&eo, &e, &se) != MR_OK)
    return mr_fail(im->err, se.base.code ? se.base.code : MR_ERR_IO, "%s", se.base.msg);
  catalog *c = NULL;
  mr_status rc = catalog_open(st, e, &c, im->err);
  commit_build cb = {0};
  for (size_t g = 0; !rc && g < im->n; g++) {
    tool_progress_note(pr, "snapshot %lld (%zu of %zu)", (long long)im->ids[g], g + 1, im->n);
    rc = build_commit(im, &cb, g);
    if (rc)
      break;
    sql_changes ch = {.nbatches = cb.nb, .batches = cb.b, .begin_seq = 0, .commit_seq = 0};
    memset(&se, 0, sizeof se);
    if (catalog_prepare(c, &ch, &se) != MR_OK)
      rc = mr_fail(im->err, se.base.code ? se.base.code : MR_ERR_IO, "snapshot %lld: %s",
                   (long long)im->ids[g], se.base.msg);
  }
  build_free(&cb);
  catalog_free(c);
  sql_engine_close(e);
  return rc;
}

