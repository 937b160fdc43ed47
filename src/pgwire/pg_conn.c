/*
 * pg_conn.c — one client connection's protocol state machine:
 *
 *   STARTUP  SSLRequest / GSSENCRequest -> 'N'; CancelRequest -> close;
 *            protocol 3.0 startup packet -> AUTH (others: FATAL 08P01)
 *   AUTH     trust (no password configured) or SCRAM-SHA-256 (pg_auth.c)
 *   READY    ParameterStatus*, BackendKeyData, then the query loop:
 *            simple Query; extended Parse/Bind/Describe/Execute/Close/
 *            Flush/Sync (after an error: skip to Sync); COPY in/out happen
 *            inside a statement through the sink callbacks below
 *   closed   on Terminate, EOF, a socket error, or a malformed / oversized
 *            message (FATAL 08P01 first when possible)
 *
 * Every outgoing message is built in conn->out (pg_buf), which is flushed at
 * ReadyForQuery, Flush, CopyInResponse, and whenever it grows large.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "mr_version.h"
#include "pgwire/pg_auth.h"
#include "pgwire/pg_buf.h"
#include "pgwire/pg_server.h"

#define PROTO_V3 196608
#define SSL_REQUEST 80877103
#define GSSENC_REQUEST 80877104
#define CANCEL_REQUEST 80877102
#define FLUSH_THRESHOLD (256 * 1024)

typedef struct portal {
  char *name;
  sql_prepared *stmt;
  char *stmt_name;
  size_t nparams;
  char **vals;
  size_t *lens;
  size_t nparam_formats;
  int16_t *param_formats;
  size_t nformats;
  int16_t *formats;
  struct portal *next;
} portal;

typedef struct named_stmt {
  char *name;
  sql_prepared *p;
  struct named_stmt *next;
} named_stmt;

typedef struct conn {
  const pg_conn_args *a;
  pg_reader in;
  pg_buf out;
  sql_session *session;
  named_stmt *stmts;
  portal *portals;
  bool io_failed; /* the socket failed: stop at the next check */
  bool skip_to_sync;
  pg_msg copy_msg; /* the last CopyData read; freed at the next read */
  char user[128];
  char database[128];
} conn;

/* ---- sending -------------------------------------------------------------- */

static int flush(conn *c) {
  mr_error e;
  if (pg_buf_flush(&c->out, c->a->fd, &e) != MR_OK)
    c->io_failed = true;
  return c->io_failed ? -1 : 0;
}

static int maybe_flush(conn *c) {
  if (c->out.failed)
    c->io_failed = true;
  return c->out.len >= FLUSH_THRESHOLD ? flush(c) : (c->io_failed ? -1 : 0);
}

static void send_error(conn *c, const char *severity, const char *sqlstate, const char *msg) {
  pg_buf_begin(&c->out, 'E');
  pg_buf_u8(&c->out, 'S');
  pg_buf_str(&c->out, severity);
  pg_buf_u8(&c->out, 'V');
  pg_buf_str(&c->out, severity);
  pg_buf_u8(&c->out, 'C');
  pg_buf_str(&c->out, sqlstate);
  pg_buf_u8(&c->out, 'M');
  pg_buf_str(&c->out, msg);
  pg_buf_u8(&c->out, 0);
  pg_buf_end(&c->out);
}

static void send_sql_error(conn *c, const sql_error *e) {
  send_error(c, "ERROR", e->sqlstate[0] ? e->sqlstate : "XX000", e->base.msg);
}

static void send_ready(conn *c) {
  pg_buf_begin(&c->out, 'Z');
  pg_buf_u8(&c->out, (uint8_t)(c->session ? sql_session_status(c->session) : 'I'));
  pg_buf_end(&c->out);
  flush(c);
}

static void send_simple(conn *c, char type) {
  pg_buf_begin(&c->out, type);
  pg_buf_end(&c->out);
}

static void send_param_status(conn *c, const char *name, const char *value) {
  pg_buf_begin(&c->out, 'S');
  pg_buf_str(&c->out, name);
  pg_buf_str(&c->out, value);
  pg_buf_end(&c->out);
}

static void send_auth(conn *c, int32_t code, const void *data, size_t n) {
  pg_buf_begin(&c->out, 'R');
  pg_buf_i32(&c->out, code);
  pg_buf_bytes(&c->out, data, n);
  pg_buf_end(&c->out);
}

/* ---- the sink: results from the sql layer --------------------------------- */

static int sk_row_description(void *ctx, size_t n, const sql_column *cols) {
  conn *c = ctx;
  pg_buf_begin(&c->out, 'T');
  pg_buf_i16(&c->out, (int16_t)n);
  for (size_t i = 0; i < n; i++) {
    pg_buf_str(&c->out, cols[i].name ? cols[i].name : "?column?");
    pg_buf_i32(&c->out, 0); /* table OID */
    pg_buf_i16(&c->out, 0); /* column attnum */
    pg_buf_i32(&c->out, (int32_t)cols[i].type_oid);
    pg_buf_i16(&c->out, cols[i].type_len);
    pg_buf_i32(&c->out, cols[i].typmod);
    pg_buf_i16(&c->out, cols[i].format);
  }
  pg_buf_end(&c->out);
  return maybe_flush(c);
}

static int sk_no_data(void *ctx) {
  conn *c = ctx;
  send_simple(c, 'n');
  return maybe_flush(c);
}

static int sk_param_desc(void *ctx, size_t n, const uint32_t *oids) {
  conn *c = ctx;
  pg_buf_begin(&c->out, 't');
  pg_buf_i16(&c->out, (int16_t)n);
  for (size_t i = 0; i < n; i++)
    pg_buf_i32(&c->out, (int32_t)oids[i]);
  pg_buf_end(&c->out);
  return maybe_flush(c);
}

static int sk_data_row(void *ctx, size_t n, const char *const *vals, const size_t *lens) {
  conn *c = ctx;
  pg_buf_begin(&c->out, 'D');
  pg_buf_i16(&c->out, (int16_t)n);
  for (size_t i = 0; i < n; i++) {
    if (vals[i] == NULL) {
      pg_buf_i32(&c->out, -1);
      continue;
    }
    pg_buf_i32(&c->out, (int32_t)lens[i]);
    pg_buf_bytes(&c->out, vals[i], lens[i]);
  }
  pg_buf_end(&c->out);
  return maybe_flush(c);
}

static void copy_response(conn *c, char type, bool binary, size_t ncols) {
  pg_buf_begin(&c->out, type);
  pg_buf_u8(&c->out, binary ? 1 : 0);
  pg_buf_i16(&c->out, (int16_t)ncols);
  for (size_t i = 0; i < ncols; i++)
    pg_buf_i16(&c->out, binary ? 1 : 0);
  pg_buf_end(&c->out);
}

static int sk_copy_out_begin(void *ctx, bool binary, size_t ncols) {
  conn *c = ctx;
  copy_response(c, 'H', binary, ncols);
  return maybe_flush(c);
}

static int sk_copy_data(void *ctx, const uint8_t *data, size_t len) {
  conn *c = ctx;
  pg_buf_begin(&c->out, 'd');
  pg_buf_bytes(&c->out, data, len);
  pg_buf_end(&c->out);
  return maybe_flush(c);
}

static int sk_copy_done(void *ctx) {
  conn *c = ctx;
  send_simple(c, 'c');
  return maybe_flush(c);
}

static int sk_copy_in_begin(void *ctx, bool binary, size_t ncols) {
  conn *c = ctx;
  copy_response(c, 'G', binary, ncols);
  return flush(c); /* the client waits for it before sending */
}


static int sk_copy_in_read(void *ctx, const uint8_t **data, size_t *len, char *msg, size_t msgcap) {
  conn *c = ctx;
  for (;;) {
    pg_msg_free(&c->copy_msg);
    mr_error e;
    if (pg_read_message(&c->in, &c->copy_msg, &e) != MR_OK) {
      snprintf(msg, msgcap, "%s", e.msg);
      c->io_failed = true;
      return -1;
    }
    switch (c->copy_msg.type) {
    case 'd':
      *data = c->copy_msg.data;
      *len = c->copy_msg.len;
      return 1;
    case 'c':
      return 0;
    case 'f':
      snprintf(msg, msgcap, "%s", c->copy_msg.len ? (const char *)c->copy_msg.data : "CopyFail");
      return -1;
    case 'H':
    case 'S':
      continue; /* PostgreSQL ignores Flush and Sync during COPY IN */
    default:
      snprintf(msg, msgcap, "unexpected message type '%c' during COPY", c->copy_msg.type);
      c->io_failed = true; /* out of step: end the connection */
      return -1;
    }
  }
}

static int sk_command_complete(void *ctx, const char *tag) {
  conn *c = ctx;
  pg_buf_begin(&c->out, 'C');
  pg_buf_str(&c->out, tag);
  pg_buf_end(&c->out);
  return maybe_flush(c);
}

static int sk_empty_query(void *ctx) {
  conn *c = ctx;
  send_simple(c, 'I');
  return maybe_flush(c);
}

static int sk_parameter_status(void *ctx, const char *name, const char *value) {
  conn *c = ctx;
  send_param_status(c, name, value);
  return maybe_flush(c);
}

static sql_sink make_sink(conn *c) {
  sql_sink s = {c,
                sk_row_description,
                sk_no_data,
                sk_param_desc,
                sk_data_row,
                sk_copy_out_begin,
                sk_copy_data,
                sk_copy_done,
                sk_copy_in_begin,
                sk_copy_in_read,
                sk_command_complete,
                sk_empty_query,
                sk_parameter_status};
  return s;
}

/* ---- startup and authentication ------------------------------------------- */

/* Reads startup packets until the v3 one; false: close the connection. */
static bool startup(conn *c) {
  for (;;) {
    pg_msg m;
    mr_error e;
    if (pg_read_startup(&c->in, &m, &e) != MR_OK) {
      if (e.code == MR_ERR_INVALID) {
        send_error(c, "FATAL", "08P01", e.msg);
        flush(c);
      }
      return false;
    }
    int32_t code = pg_msg_i32(&m);
    if (code == SSL_REQUEST || code == GSSENC_REQUEST) {
      pg_msg_free(&m);
      if (send(c->a->fd, "N", 1, MSG_NOSIGNAL) != 1)
        return false;
      continue;
    }
    if (code == CANCEL_REQUEST) {
      pg_msg_free(&m); /* queries are not cancellable yet: just close */
      return false;
    }
    if (code != PROTO_V3) {
      pg_msg_free(&m);
      send_error(c, "FATAL", "0A000", "unsupported frontend protocol");
      flush(c);
      return false;
    }
    snprintf(c->user, sizeof c->user, "moraine");
    c->database[0] = '\0';
    while (!m.bad && !pg_msg_at_end(&m)) {
      const char *k = pg_msg_str(&m);
      if (k[0] == '\0')
        break;
      const char *v = pg_msg_str(&m);
      if (strcmp(k, "user") == 0)
        snprintf(c->user, sizeof c->user, "%s", v);
      else if (strcmp(k, "database") == 0)
        snprintf(c->database, sizeof c->database, "%s", v);
    }
    bool bad = m.bad;
    pg_msg_free(&m);
    if (bad) {
      send_error(c, "FATAL", "08P01", "invalid startup packet layout");
      flush(c);
      return false;
    }
    if (c->database[0] == '\0')
      snprintf(c->database, sizeof c->database, "%s", c->user);
    return true;
  }
}

static bool expect_password_message(conn *c, pg_msg *m) {
  mr_error e;
  if (pg_read_message(&c->in, m, &e) != MR_OK)
    return false;
  if (m->type != 'p') {
    pg_msg_free(m);
    send_error(c, "FATAL", "08P01", "expected a password response");
    flush(c);
    return false;
  }
  return true;
}

static bool auth_fail(conn *c, const char *why) {
  char msg[256];
  snprintf(msg, sizeof msg, "password authentication failed for user \"%s\"", c->user);
  (void)why;
  send_error(c, "FATAL", "28P01", msg);
  flush(c);
  return false;
}

static bool authenticate(conn *c) {
  if (c->a->password == NULL) {
    send_auth(c, 0, NULL, 0); /* AuthenticationOk (trust) */
    return true;
  }
  static const char mech[] = "SCRAM-SHA-256\0";
  send_auth(c, 10, mech, sizeof mech); /* AuthenticationSASL, list ends with \0 */
  if (flush(c))
    return false;
  pg_scram scram;
  mr_error e;
  if (pg_scram_init(&scram, c->a->password, &e) != MR_OK)
    return auth_fail(c, e.msg);
  pg_msg m;
  if (!expect_password_message(c, &m))
    return false;
  const char *mechanism = pg_msg_str(&m);
  int32_t n = pg_msg_i32(&m);
  const uint8_t *first = n >= 0 ? pg_msg_bytes(&m, (size_t)n) : NULL;
  char reply[1024];
  bool ok = !m.bad && first && strcmp(mechanism, "SCRAM-SHA-256") == 0 &&
            pg_scram_client_first(&scram, (const char *)first, (size_t)n, reply, sizeof reply,
                                  &e) == MR_OK;
  pg_msg_free(&m);
  if (!ok)
    return auth_fail(c, "bad client-first-message");
  send_auth(c, 11, reply, strlen(reply)); /* AuthenticationSASLContinue */
  if (flush(c))
    return false;
  if (!expect_password_message(c, &m))
    return false;
  ok = pg_scram_client_final(&scram, (const char *)m.data, m.len, reply, sizeof reply, &e) == MR_OK;
  pg_msg_free(&m);
  if (!ok)
    return auth_fail(c, e.msg);
  send_auth(c, 12, reply, strlen(reply)); /* AuthenticationSASLFinal */
  send_auth(c, 0, NULL, 0);
  return true;
}

/* ---- extended protocol ---------------------------------------------------- */

static named_stmt **find_stmt(conn *c, const char *name) {
  named_stmt **p = &c->stmts;
  while (*p && strcmp((*p)->name, name) != 0)
    p = &(*p)->next;
  return p;
}

static portal **find_portal(conn *c, const char *name) {
  portal **p = &c->portals;
  while (*p && strcmp((*p)->name, name) != 0)
    p = &(*p)->next;
  return p;
}

static void free_portal(portal *p) {
  for (size_t i = 0; i < p->nparams; i++)
    free(p->vals[i]);
  free(p->vals);
  free(p->lens);
  free(p->param_formats);
  free(p->formats);
  free(p->name);
  free(p->stmt_name);
  free(p);
}

static void drop_portal(conn *c, const char *name) {
  portal **pp = find_portal(c, name);
  if (*pp) {
    portal *p = *pp;
    *pp = p->next;
    free_portal(p);
  }
}

/* Portals bound to a statement die with it. */
static void drop_portals_of(conn *c, sql_prepared *stmt) {
  portal **pp = &c->portals;
  while (*pp) {
    if ((*pp)->stmt == stmt) {
      portal *p = *pp;
      *pp = p->next;
      free_portal(p);
    } else {
      pp = &(*pp)->next;
    }
  }
}

static void drop_stmt(conn *c, const char *name) {
  named_stmt **sp = find_stmt(c, name);
  if (*sp) {
    named_stmt *s = *sp;
    *sp = s->next;
    drop_portals_of(c, s->p);
    sql_prepared_free(s->p);
    free(s->name);
    free(s);
  }
}

/* Extended-protocol error: report it and ignore messages until Sync. */
static void ext_error(conn *c, const sql_error *e) {
  send_sql_error(c, e);
  sql_session_error_at_sync(c->session);
  c->skip_to_sync = true;
}

static void ext_proto_error(conn *c, const char *msg) {
  sql_error e;
  sql_fail(&e, MR_ERR_INVALID, "08P01", "%s", msg);
  ext_error(c, &e);
}

static void on_parse(conn *c, pg_msg *m) {
  const char *name = pg_msg_str(m);
  const char *query = pg_msg_str(m);
  int16_t n = pg_msg_i16(m);
  uint32_t oids[1024];
  if (n < 0 || n > 1024) {
    ext_proto_error(c, "invalid parameter count in Parse");
    return;
  }
  for (int i = 0; i < n; i++)
    oids[i] = (uint32_t)pg_msg_i32(m);
  if (m->bad) {
    ext_proto_error(c, "malformed Parse message");
    return;
  }
  if (name[0] != '\0' && *find_stmt(c, name)) {
    sql_error e;
    sql_fail(&e, MR_ERR_INVALID, "42P05", "prepared statement \"%s\" already exists", name);
    ext_error(c, &e);
    return;
  }
  if (name[0] == '\0')
    drop_stmt(c, "");
  sql_prepared *p;
  sql_error e;
  if (sql_session_prepare(c->session, query, (size_t)n, oids, &p, &e) != MR_OK) {
    ext_error(c, &e);
    return;
  }
  named_stmt *s = calloc(1, sizeof *s);
  if (s == NULL || (s->name = strdup(name)) == NULL) {
    free(s);
    sql_prepared_free(p);
    ext_proto_error(c, "out of memory");
    return;
  }
  s->p = p;
  s->next = c->stmts;
  c->stmts = s;
  send_simple(c, '1'); /* ParseComplete */
}

static bool read_formats(pg_msg *m, size_t *n, int16_t **out) {
  int16_t k = pg_msg_i16(m);
  if (k < 0 || m->bad)
    return false;
  *n = (size_t)k;
  *out = calloc(k ? (size_t)k : 1, sizeof **out);
  if (*out == NULL)
    return false;
  for (int i = 0; i < k; i++)
    (*out)[i] = pg_msg_i16(m);
  return !m->bad;
}

static void on_bind(conn *c, pg_msg *m) {
  const char *pname = pg_msg_str(m);
  const char *sname = pg_msg_str(m);
  named_stmt *s = *find_stmt(c, sname);
  portal *p = calloc(1, sizeof *p);
  if (p == NULL) {
    ext_proto_error(c, "out of memory");
    return;
  }
  bool ok = read_formats(m, &p->nparam_formats, &p->param_formats);
  int16_t np = ok ? pg_msg_i16(m) : -1;
  if (np < 0 || m->bad)
    ok = false;
  if (ok) {
    p->nparams = (size_t)np;
    p->vals = calloc(np ? (size_t)np : 1, sizeof *p->vals);
    p->lens = calloc(np ? (size_t)np : 1, sizeof *p->lens);
    ok = p->vals && p->lens;
    for (int i = 0; ok && i < np; i++) {
      int32_t len = pg_msg_i32(m);
      if (len < -1 || m->bad) {
        ok = false;
        break;
      }
      if (len == -1)
        continue;
      const uint8_t *d = pg_msg_bytes(m, (size_t)len);
      if (d == NULL) {
        ok = false;
        break;
      }
      p->vals[i] = malloc((size_t)len + 1);
      if (p->vals[i] == NULL) {
        ok = false;
        break;
      }
      memcpy(p->vals[i], d, (size_t)len);
      p->vals[i][len] = '\0';
      p->lens[i] = (size_t)len;
    }
  }
  if (ok)
    ok = read_formats(m, &p->nformats, &p->formats);
  p->name = strdup(pname);
  p->stmt_name = strdup(sname);
  if (!ok || !p->name || !p->stmt_name) {
    free_portal(p);
    ext_proto_error(c, "malformed Bind message");
    return;
  }
  if (s == NULL) {
    free_portal(p);
    sql_error e;
    sql_fail(&e, MR_ERR_INVALID, "26000", "prepared statement \"%s\" does not exist", sname);
    ext_error(c, &e);
    return;
  }
  p->stmt = s->p;
  drop_portal(c, pname);
  p->next = c->portals;
  c->portals = p;
  send_simple(c, '2'); /* BindComplete */
}

static void on_describe(conn *c, pg_msg *m) {
  char what = (char)pg_msg_u8(m);
  const char *name = pg_msg_str(m);
  if (m->bad) {
    ext_proto_error(c, "malformed Describe message");
    return;
  }
  sql_sink sink = make_sink(c);
  sql_error e;
  mr_status rc;
  if (what == 'S') {
    named_stmt *s = *find_stmt(c, name);
    if (s == NULL) {
      sql_fail(&e, MR_ERR_INVALID, "26000", "prepared statement \"%s\" does not exist", name);
      ext_error(c, &e);
      return;
    }
    rc = sql_prepared_describe(c->session, s->p, true, 0, NULL, &sink, &e);
  } else if (what == 'P') {
    portal *p = *find_portal(c, name);
    if (p == NULL) {
      sql_fail(&e, MR_ERR_INVALID, "34000", "portal \"%s\" does not exist", name);
      ext_error(c, &e);
      return;
    }
    rc = sql_prepared_describe(c->session, p->stmt, false, p->nformats, p->formats, &sink, &e);
  } else {
    ext_proto_error(c, "invalid Describe target");
    return;
  }
  if (rc)
    ext_error(c, &e);
}

static void on_execute(conn *c, pg_msg *m) {
  const char *name = pg_msg_str(m);
  (void)pg_msg_i32(m); /* max rows: portals always run to completion */
  if (m->bad) {
    ext_proto_error(c, "malformed Execute message");
    return;
  }
  portal *p = *find_portal(c, name);
  sql_error e;
  if (p == NULL) {
    sql_fail(&e, MR_ERR_INVALID, "34000", "portal \"%s\" does not exist", name);
    ext_error(c, &e);
    return;
  }
  sql_sink sink = make_sink(c);
  if (sql_prepared_execute(c->session, p->stmt, p->nparams, (const char *const *)p->vals, p->lens,
                           p->nparam_formats, p->param_formats, p->nformats, p->formats, &sink,
                           &e) != MR_OK)
    ext_error(c, &e);
}

static void on_close(conn *c, pg_msg *m) {
  char what = (char)pg_msg_u8(m);
  const char *name = pg_msg_str(m);
  if (m->bad || (what != 'S' && what != 'P')) {
    ext_proto_error(c, "malformed Close message");
    return;
  }
  if (what == 'S')
    drop_stmt(c, name);
  else
    drop_portal(c, name);
  send_simple(c, '3'); /* CloseComplete */
}

static void on_sync(conn *c) {
  c->skip_to_sync = false;
  drop_portal(c, "");
  sql_error e;
  if (sql_session_sync(c->session, &e) != MR_OK)
    send_sql_error(c, &e);
  send_ready(c);
}

/* ---- the query loop -------------------------------------------------------- */

static void on_query(conn *c, pg_msg *m) {
  const char *q = pg_msg_str(m);
  if (m->bad) {
    send_error(c, "ERROR", "08P01", "malformed Query message");
    send_ready(c);
    return;
  }
  sql_sink sink = make_sink(c);
  sql_error e;
  if (sql_session_simple_query(c->session, q, &sink, &e) != MR_OK && !c->io_failed)
    send_sql_error(c, &e);
  send_ready(c);
}

static void send_session_start(conn *c) {
  send_param_status(c, "server_version", sql_session_guc(c->session, "server_version"));
  static const char *const names[] = {"server_encoding", "client_encoding", "DateStyle",
                                      "TimeZone", "integer_datetimes", "standard_conforming_strings",
                                      "IntervalStyle", "is_superuser", "application_name", NULL};
  for (size_t i = 0; names[i]; i++) {
    const char *v = sql_session_guc(c->session, names[i]);
    send_param_status(c, names[i], v ? v : "");
  }
  send_param_status(c, "session_authorization", c->user);
  pg_buf_begin(&c->out, 'K');
  pg_buf_i32(&c->out, (int32_t)c->a->id);
  pg_buf_i32(&c->out, (int32_t)c->a->secret);
  pg_buf_end(&c->out);
  send_ready(c);
}

static void query_loop(conn *c) {
  while (!c->io_failed) {
    pg_msg m;
    mr_error e;
    pg_msg_free(&c->copy_msg);
    mr_status rc = pg_read_message(&c->in, &m, &e);
    if (rc) {
      if (rc == MR_ERR_INVALID) {
        send_error(c, "FATAL", "08P01", e.msg);
        flush(c);
      }
      return;
    }
    if (c->skip_to_sync && m.type != 'S' && m.type != 'X') {
      pg_msg_free(&m);
      continue;
    }
    switch (m.type) {
    case 'Q':
      on_query(c, &m);
      break;
    case 'P':
      on_parse(c, &m);
      break;
    case 'B':
      on_bind(c, &m);
      break;
    case 'D':
      on_describe(c, &m);
      break;
    case 'E':
      on_execute(c, &m);
      break;
    case 'C':
      on_close(c, &m);
      break;
    case 'S':
      on_sync(c);
      break;
    case 'H':
      flush(c);
      break;
    case 'X':
      pg_msg_free(&m);
      return;
    case 'd':
    case 'c':
    case 'f':
      break; /* COPY messages after a COPY ended in error are dropped */
    default: {
      char msg[64];
      snprintf(msg, sizeof msg, "invalid frontend message type %d", (unsigned char)m.type);
      send_error(c, "FATAL", "08P01", msg);
      flush(c);
      pg_msg_free(&m);
      return;
    }
    }
    pg_msg_free(&m);
    if (c->out.failed)
      c->io_failed = true;
  }
}

void pg_conn_run(const pg_conn_args *a) {
  conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return;
  c->a = a;
  c->in.fd = a->fd;
  c->in.max_message = a->max_message;
  if (!startup(c))
    goto done;
  if (a->over_limit) {
    send_error(c, "FATAL", "53300", "sorry, too many clients already (too many connections)");
    flush(c);
    goto done;
  }
  if (!authenticate(c))
    goto done;
  sql_error e;
  if (sql_session_open(a->engine, c->user, c->database, &c->session, &e) != MR_OK) {
    send_error(c, "FATAL", e.sqlstate, e.base.msg);
    flush(c);
    goto done;
  }
  send_session_start(c);
  query_loop(c);
done:
  pg_msg_free(&c->copy_msg);
  while (c->portals) {
    portal *p = c->portals;
    c->portals = p->next;
    free_portal(p);
  }
  while (c->stmts) {
    named_stmt *s = c->stmts;
    c->stmts = s->next;
    free(s->name);
    free(s);
  }
  sql_session_close(c->session); /* frees the prepared statements too */
  pg_buf_free(&c->out);
  free(c);
}
