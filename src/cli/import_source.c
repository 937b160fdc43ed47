/*
 * import_source.c — the source catalog of `moraine import` (import_source.h):
 * parsing its attach string, a read-only DuckDB of the tool's own holding
 * it, and reading rows out as the commit path takes them (text, or raw
 * bytes for BLOB).
 */
#include "cli/import_source.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <duckdb.h>

struct import_source {
  duckdb_database db;
  duckdb_connection con;
  char schema[128];
};

/* ---- SOURCE ------------------------------------------------------------------ */

void import_strip_password(const char *conn, char *out, size_t cap) {
  size_t n = 0;
  const char *p = conn;
  const char *scheme = strstr(conn, "://");
  if (scheme) { /* postgresql://user:secret@host/db: drop ":secret" */
    const char *at = strchr(scheme + 3, '@');
    const char *colon = strchr(scheme + 3, ':');
    const char *slash = strchr(scheme + 3, '/');
    if (at && colon && colon < at && (slash == NULL || at < slash)) {
      n = (size_t)snprintf(out, cap, "%.*s%s", (int)(colon - conn), conn, at);
      if (n >= cap)
        out[cap - 1] = '\0';
    } else {
      snprintf(out, cap, "%s", conn);
    }
    /* a URI's ?password=... is a parameter like key=value below */
    char *q = strstr(out, "password=");
    if (q) {
      char *end = strchr(q, '&');
      if (end)
        memmove(q, end + 1, strlen(end + 1) + 1);
      else
        *(q > out && (q[-1] == '?' || q[-1] == '&') ? q - 1 : q) = '\0';
    }
    return;
  }
  /* key=value pairs separated by spaces; a value may be 'quoted' */
  out[0] = '\0';
  while (*p) {
    while (isspace((unsigned char)*p))
      p++;
    if (!*p)
      break;
    const char *start = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p))
      p++;
    size_t klen = (size_t)(p - start);
    while (isspace((unsigned char)*p))
      p++;
    if (*p == '=') {
      p++;
      while (isspace((unsigned char)*p))
        p++;
      if (*p == '\'') {
        for (p++; *p && *p != '\''; p++)
          if (*p == '\\' && p[1])
            p++;
        if (*p)
          p++;
      } else {
        while (*p && !isspace((unsigned char)*p))
          p++;
      }
    }
    if (klen == 8 && strncasecmp(start, "password", 8) == 0)
      continue;
    int w = snprintf(out + n, cap > n ? cap - n : 0, "%s%.*s", n ? " " : "", (int)(p - start), start);
    if (w < 0 || (size_t)w >= (cap > n ? cap - n : 0))
      return;
    n += (size_t)w;
  }
}

mr_status import_spec_parse(const char *source, import_spec *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  const char *rest = source;
  out->kind = IMPORT_DUCKDB;
  if (strncmp(rest, "ducklake:", 9) == 0) {
    rest += 9;
    if (strncmp(rest, "sqlite:", 7) == 0) {
      out->kind = IMPORT_SQLITE;
      rest += 7;
    } else if (strncmp(rest, "postgres:", 9) == 0) {
      out->kind = IMPORT_POSTGRES;
      rest += 9;
    } else if (strncmp(rest, "duckdb:", 7) == 0) {
      rest += 7;
    } else {
      /* another "KIND:" (mysql:, ...) is not a file name moraine should guess at */
      const char *colon = strchr(rest, ':');
      const char *slash = strchr(rest, '/');
      if (colon && (slash == NULL || colon < slash) && colon > rest)
        return mr_fail(err, MR_ERR_INVALID,
                       "'%s': a %.*s catalog cannot be imported (sources: a DuckDB file, "
                       "ducklake:sqlite:FILE, ducklake:postgres:CONNSTR)",
                       source, (int)(colon - rest), rest);
    }
  }
  if (*rest == '\0')
    return mr_fail(err, MR_ERR_INVALID, "'%s' names no catalog", source);
  if (strlen(rest) >= sizeof out->target)
    return mr_fail(err, MR_ERR_INVALID, "the source is too long");
  snprintf(out->target, sizeof out->target, "%s", rest);
  switch (out->kind) {
  case IMPORT_DUCKDB:
    snprintf(out->origin, sizeof out->origin, "ducklake:%s", rest);
    break;
  case IMPORT_SQLITE:
    snprintf(out->origin, sizeof out->origin, "ducklake:sqlite:%s", rest);
    break;
  case IMPORT_POSTGRES: {
    static const char prefix[] = "ducklake:postgres:";
    memcpy(out->origin, prefix, sizeof prefix);
    import_strip_password(rest, out->origin + sizeof prefix - 1, sizeof out->origin - sizeof prefix + 1);
    break;
  }
  }
  return MR_OK;
}

/* ---- rows -------------------------------------------------------------------- */

void import_rows_free(import_rows *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->ncols; i++)
    free(r->names ? r->names[i] : NULL);
  free(r->names);
  for (size_t i = 0; r->values && i < r->ncols * r->nrows; i++)
    free((char *)r->values[i].data);
  free(r->values);
  memset(r, 0, sizeof *r);
}

int import_rows_col(const import_rows *r, const char *name) {
  for (size_t i = 0; i < r->ncols; i++)
    if (strcmp(r->names[i], name) == 0)
      return (int)i;
  return -1;
}

/* ---- the engine -------------------------------------------------------------- */

static mr_status exec(import_source *s, const char *sql, mr_error *err) {
  duckdb_result r;
  if (duckdb_query(s->con, sql, &r) != DuckDBSuccess) {
    mr_status rc = mr_fail(err, MR_ERR_IO, "%s", duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return rc;
  }
  duckdb_destroy_result(&r);
  return MR_OK;
}

void import_source_literal(const char *s, char *out, size_t cap) {
  size_t n = 0;
  if (cap < 3)
    return;
  out[n++] = '\'';
  for (; *s && n + 3 < cap; s++) {
    if (*s == '\'')
      out[n++] = '\'';
    out[n++] = *s;
  }
  out[n++] = '\'';
  out[n] = '\0';
}

static mr_status load_extension(import_source *s, const char *name, const char *ext_dir,
                                mr_error *err) {
  char sql[4300];
  if (ext_dir) {
    char path[4200], lit[4250];
    snprintf(path, sizeof path, "%s/%s.duckdb_extension", ext_dir, name);
    import_source_literal(path, lit, sizeof lit);
    snprintf(sql, sizeof sql, "LOAD %s", lit);
  } else {
    snprintf(sql, sizeof sql, "LOAD %s", name);
  }
  mr_status rc = exec(s, sql, err);
  if (rc) {
    char why[MR_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err->msg);
    for (char *p = why; *p; p++) /* one line */
      if (*p == '\n')
        *p = ' ';
    return mr_fail(err, MR_ERR_INVALID,
                   "cannot load DuckDB's %s extension%s%s (it must be DuckDB %s's, as "
                   "%s.duckdb_extension; moraine never downloads one): %s",
                   name, ext_dir ? " from " : " from DuckDB's extension folder",
                   ext_dir ? ext_dir : "", duckdb_library_version(), name, why);
  }
  return MR_OK;
}

mr_status import_source_open(const import_spec *spec, const char *ext_dir, const char *schema,
                             import_source **out, mr_error *err) {
  *out = NULL;
  import_source *s = calloc(1, sizeof *s);
  if (s == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  snprintf(s->schema, sizeof s->schema, "%s",
           schema ? schema : spec->kind == IMPORT_POSTGRES ? "public" : "main");
  duckdb_config cfg = NULL;
  char *open_err = NULL;
  mr_status rc = MR_OK;
  if (duckdb_create_config(&cfg) != DuckDBSuccess) {
    free(s);
    return mr_fail(err, MR_ERR_NOMEM, "cannot configure DuckDB");
  }
  /* nothing is fetched from the network: extensions come from local files */
  duckdb_set_config(cfg, "autoinstall_known_extensions", "false");
  duckdb_set_config(cfg, "autoload_known_extensions", "false");
  if (duckdb_open_ext(NULL, &s->db, cfg, &open_err) != DuckDBSuccess) {
    rc = mr_fail(err, MR_ERR_IO, "cannot open DuckDB: %s", open_err ? open_err : "?");
    duckdb_free(open_err);
    duckdb_destroy_config(&cfg);
    free(s);
    return rc;
  }
  duckdb_destroy_config(&cfg);
  if (duckdb_connect(s->db, &s->con) != DuckDBSuccess) {
    duckdb_close(&s->db);
    free(s);
    return mr_fail(err, MR_ERR_IO, "cannot connect to DuckDB");
  }
  /* timestamps as text in UTC (the offset is printed either way) */
  mr_error ignore;
  (void)exec(s, "SET TimeZone = 'UTC'", &ignore);
  const char *type = "";
  if (spec->kind == IMPORT_SQLITE) {
    rc = load_extension(s, "sqlite_scanner", ext_dir, err);
    type = ", TYPE sqlite";
  } else if (spec->kind == IMPORT_POSTGRES) {
    rc = load_extension(s, "postgres_scanner", ext_dir, err);
    type = ", TYPE postgres";
  }
  if (!rc) {
    char lit[8300], sql[8400];
    import_source_literal(spec->target, lit, sizeof lit);
    snprintf(sql, sizeof sql, "ATTACH %s AS src (READ_ONLY%s)", lit, type);
    rc = exec(s, sql, err);
    if (rc) {
      char why[MR_ERROR_MSG_MAX];
      snprintf(why, sizeof why, "%s", err->msg);
      char *nl = strchr(why, '\n');
      if (nl)
        *nl = '\0';
      rc = mr_fail(err, MR_ERR_INVALID, "cannot open the source catalog: %s", why);
    }
  }
  if (rc) {
    import_source_close(s);
    return rc;
  }
  *out = s;
  return MR_OK;
}

void import_source_close(import_source *s) {
  if (s == NULL)
    return;
  duckdb_disconnect(&s->con);
  duckdb_close(&s->db);
  free(s);
}

static void put_ident(char *out, size_t cap, const char *s) {
  size_t n = 0;
  if (cap < 3)
    return;
  out[n++] = '"';
  for (; *s && n + 3 < cap; s++) {
    if (*s == '"')
      out[n++] = '"';
    out[n++] = *s;
  }
  out[n++] = '"';
  out[n] = '\0';
}

const char *import_source_schema(const import_source *s) {
  return s->schema;
}

void import_source_table(const import_source *s, const char *table, char *out, size_t cap) {
  char sch[300], tab[300];
  put_ident(sch, sizeof sch, s->schema);
  put_ident(tab, sizeof tab, table);
  snprintf(out, cap, "src.%s.%s", sch, tab);
}

mr_status import_source_query(import_source *s, const char *sql, import_rows *out, mr_error *err) {
  memset(out, 0, sizeof *out);
  duckdb_result r;
  if (duckdb_query(s->con, sql, &r) != DuckDBSuccess) {
    mr_status rc = mr_fail(err, MR_ERR_IO, "%s", duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return rc;
  }
  size_t nc = (size_t)duckdb_column_count(&r), nr = (size_t)duckdb_row_count(&r);
  out->names = calloc(nc ? nc : 1, sizeof *out->names);
  out->values = calloc(nc > 0 && nr > 0 ? nc * nr : 1, sizeof *out->values);
  mr_status rc = out->names && out->values ? MR_OK : mr_fail(err, MR_ERR_NOMEM, "out of memory");
  out->ncols = out->names ? nc : 0;
  for (size_t c = 0; !rc && c < nc; c++) {
    out->names[c] = strdup(duckdb_column_name(&r, c));
    if (out->names[c] == NULL)
      rc = mr_fail(err, MR_ERR_NOMEM, "out of memory");
  }
  if (!rc)
    out->nrows = nr;
  for (size_t row = 0; !rc && row < nr; row++) {
    for (size_t c = 0; !rc && c < nc; c++) {
      sql_value *v = &out->values[row * nc + c];
      if (duckdb_value_is_null(&r, c, row)) {
        v->is_null = true;
        continue;
      }
      char *data;
      size_t len;
      if (duckdb_column_type(&r, c) == DUCKDB_TYPE_BLOB) {
        duckdb_blob b = duckdb_value_blob(&r, c, row);
        data = malloc(b.size + 1);
        if (data) {
          if (b.size)
            memcpy(data, b.data, b.size);
          data[b.size] = '\0';
        }
        len = b.size;
        duckdb_free(b.data);
      } else {
        char *t = duckdb_value_varchar(&r, c, row);
        data = t ? strdup(t) : NULL;
        len = t ? strlen(t) : 0;
        duckdb_free(t);
      }
      if (data == NULL) {
        rc = mr_fail(err, MR_ERR_NOMEM, "out of memory");
        break;
      }
      v->data = data;
      v->len = len;
    }
  }
  duckdb_destroy_result(&r);
  if (rc)
    import_rows_free(out);
  return rc;
}

mr_status import_source_has_table(import_source *s, const char *table, bool *has, mr_error *err) {
  char sql[1024], lt[300], ls[300];
  import_source_literal(table, lt, sizeof lt);
  import_source_literal(s->schema, ls, sizeof ls);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'src' AND schema_name = %s "
           "AND table_name = %s",
           ls, lt);
  import_rows r;
  mr_status rc = import_source_query(s, sql, &r, err);
  if (rc)
    return rc;
  *has = r.nrows == 1 && !r.values[0].is_null && strcmp(r.values[0].data, "0") != 0;
  import_rows_free(&r);
  return MR_OK;
}
