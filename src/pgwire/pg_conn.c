/*
 * pg_conn.c — one client connection's protocol state machine:
 *
 *   STARTUP  SSLRequest -> 'S' and the TLS handshake when the server has a
 *            certificate (pg_tls.h), else 'N'; GSSENCRequest -> 'N' (once
 *            each); a plain startup packet on a server that requires TLS
 *            -> FATAL 28000; CancelRequest
 *            -> pg_registry_cancel, then close; protocol 3.0 startup packet
 *            -> a connection slot (else FATAL 53300) -> AUTH (other
 *            versions: FATAL 0A000; a malformed packet: FATAL 08P01)
 *   AUTH     trust (no password configured) or SCRAM-SHA-256 (pg_auth.c);
 *            a failed password waits auth_fail_delay_ms, is logged, FATAL
 *            28P01. Until authenticated every message is capped at
 *            PG_PRE_AUTH_MESSAGE bytes, and the registry's watchdog shuts
 *            the socket when authentication takes longer than the timeout.
 *   READY    ParameterStatus*, BackendKeyData, then the query loop:
 *            simple Query; extended Parse/Bind/Describe/Execute/Close/
 *            Flush/Sync (after an error: skip to Sync); COPY in/out happen
 *            inside a statement through the sink callbacks below. Each
 *            message runs between pg_registry_begin and pg_registry_end
 *            with the session's statement_timeout (restarted at every
 *            statement of a multi-statement Query), so the watchdog or a
 *            CancelRequest can cancel it: the error is 57014 with the
 *            reason as PostgreSQL words it.
 *   closed   on Terminate, EOF, a socket error, a badly framed / oversized
 *            message (FATAL 08P01 first when possible), or shutdown (idle:
 *            FATAL 57P01)
 *
 * Message bodies are decoded by pg_proto.c (pure, bounds-checked). A body
 * that does not decode is handled as PostgreSQL does: in the extended
 * protocol an ERROR (08P01, or 22023 for a bad format code) and skip to
 * Sync; a Query gets an ERROR and ReadyForQuery; during startup and
 * authentication FATAL and close. A Bind is checked against its statement
 * (parameter count, result-format count) before anything reaches sql/.
 *
 * Every outgoing message is built in conn->out (pg_buf), which is flushed at
 * ReadyForQuery, Flush, CopyInResponse, and whenever it grows large.
 * Log lines (pg_log.h): connection opened / closed (info), authentication
 * failure (warn), statement cancelled (info), dropped before authentication
 * (info when the timeout ended it, debug otherwise).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "mr_version.h"
#include "pgwire/pg_auth.h"
#include "pgwire/pg_buf.h"
#include "pgwire/pg_log.h"
#include "pgwire/pg_proto.h"
#include "pgwire/pg_registry.h"
#include "pgwire/pg_server.h"

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
  bool doomed; /* closed by DISCARD ALL: freed once the message that ran it is done */
  struct portal *next;
} portal;

typedef struct named_stmt {
  char *name;
  sql_prepared *p;
  bool doomed; /* deallocated by SQL: freed once the message that ran it is done */
  struct named_stmt *next;
} named_stmt;

typedef struct conn {
  const pg_conn_args *a;
  pg_io io; /* the socket, and its TLS once negotiated */
  pg_reader in;
  pg_buf out;
  sql_session *session;
  void *session_handle; /* the session source's, for its close */
  named_stmt *stmts;
  portal *portals;
  portal *running; /* the portal an Execute is running, if any */
  bool io_failed; /* the socket failed: stop at the next check */
  bool skip_to_sync;
  pg_msg copy_msg; /* the last CopyData read; freed at the next read */
  char user[128];
  char database[128];
  pg_role role; /* what the authenticated user may do */
  pg_registry *reg;
  pg_entry *entry;
  struct timespec opened; /* when authentication succeeded */
  bool is_open;           /* logged as opened: log the close too */
  bool stopping;          /* ended by the server's shutdown */
  bool protocol_error;    /* ended by a FATAL of ours */
  bool cancel_request;    /* this connection only carried a CancelRequest */
  uint32_t pid;           /* BackendKeyData process id */
  uint64_t timeout_ms;    /* statement_timeout of the running statement */
} conn;

/* ---- sending -------------------------------------------------------------- */

static int flush(conn *c) {
  mr_error e;
  if (pg_buf_flush(&c->out, &c->io, &e) != MR_OK)
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

/* FATAL, flushed; returns false so a failing step can `return fatal(...)`. */
static bool fatal(conn *c, const char *sqlstate, const char *msg) {
  send_error(c, "FATAL", sqlstate, msg);
  flush(c);
  return false;
}

/* FATAL for a read failure that left the socket usable. */
static void read_failed(conn *c, const mr_error *e) {
  if (e->code == MR_ERR_INVALID)
    fatal(c, "08P01", e->msg);
  else if (e->code == MR_ERR_NOMEM)
    fatal(c, "53200", e->msg);
}

/* A statement the registry cancelled fails with 57014 from the engine;
 * the client is told why in PostgreSQL's words. */
static void send_sql_error(conn *c, const sql_error *e) {
  const char *state = e->sqlstate[0] ? e->sqlstate : "XX000";
  const char *msg = e->base.msg;
  if (strcmp(state, "57014") == 0) {
    switch (pg_registry_reason(c->reg, c->entry)) {
    case PG_CANCEL_USER:
      msg = "canceling statement due to user request";
      break;
    case PG_CANCEL_TIMEOUT:
      msg = "canceling statement due to statement timeout";
      break;
    case PG_CANCEL_GONE:
      msg = "canceling statement due to client disconnect";
      break;
    case PG_CANCEL_SHUTDOWN:
      state = "57P01";
      msg = "terminating connection due to administrator command";
      break;
    case PG_CANCEL_NONE:
      break;
    }
  }
  send_error(c, "ERROR", state, msg);
}

static void send_ready(conn *c) {
  if (c->io_failed)
    return; /* the connection is ending (a FATAL may already be out) */
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
      read_failed(c, &e);
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
    case 'f': {
      const char *why;
      pg_error pe;
      if (pg_decode_copy_fail(c->copy_msg.data, c->copy_msg.len, &why, &pe) != MR_OK)
        why = "malformed CopyFail message";
      snprintf(msg, msgcap, "%s", why[0] ? why : "CopyFail");
      return -1;
    }
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
  /* the next statement of this message gets its own statement_timeout
   * (read now: a SET earlier in the same string counts) */
  c->timeout_ms = sql_session_statement_timeout_ms(c->session);
  pg_registry_restart(c->reg, c->entry, c->timeout_ms);
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

/* A CancelRequest: the target's running statement, if the key matches. */
static void on_cancel_request(conn *c, uint32_t pid, uint32_t key) {
  switch (pg_registry_cancel(c->reg, pid, key)) {
  case PG_CANCEL_SENT:
    pg_log(PG_LOG_DEBUG, "cancel request from %s for connection %u: cancelling its statement",
           c->a->peer, pid);
    break;
  case PG_CANCEL_IDLE:
    pg_log(PG_LOG_DEBUG, "cancel request from %s for connection %u: nothing running", c->a->peer,
           pid);
    break;
  case PG_CANCEL_NO_MATCH:
    pg_log(PG_LOG_WARN, "cancel request from %s for connection %u: no such connection or wrong key",
           c->a->peer, pid);
    break;
  }
}

/* After 'S': the handshake. Bytes the client sent before it (pipelined
 * past the SSLRequest) would be plaintext inside what must be encrypted:
 * refused, as PostgreSQL does. */
static bool start_tls(conn *c) {
  if (pg_reader_buffered(&c->in) > 0) {
    pg_log(PG_LOG_WARN, "connection from %s: unencrypted data after the SSL request", c->a->peer);
    c->protocol_error = true;
    return false;
  }
  mr_error e;
  if (pg_tls_accept(c->a->tls, &c->io, &e) != MR_OK) {
    pg_log(PG_LOG_WARN, "connection from %s: %s", c->a->peer, e.msg);
    return false;
  }
  return true;
}

/* Reads startup packets until the v3 one; false: close the connection. */
static bool startup(conn *c) {
  bool ssl_done = false, gss_done = false;
  for (;;) {
    pg_msg m;
    mr_error e;
    if (pg_read_startup(&c->in, &m, &e) != MR_OK) {
      read_failed(c, &e);
      return false;
    }
    pg_startup st;
    pg_error pe;
    if (pg_decode_startup(m.data, m.len, &st, &pe) != MR_OK) {
      pg_msg_free(&m);
      return fatal(c, pe.sqlstate, pe.base.msg);
    }
    if (st.kind == PG_STARTUP_SSL || st.kind == PG_STARTUP_GSSENC) {
      pg_msg_free(&m);
      bool *done = st.kind == PG_STARTUP_SSL ? &ssl_done : &gss_done;
      if (*done)
        return fatal(c, "08P01", "repeated SSL or GSSAPI encryption request");
      *done = true;
      bool tls = st.kind == PG_STARTUP_SSL && c->a->tls != NULL;
      if (send(c->a->fd, tls ? "S" : "N", 1, MSG_NOSIGNAL) != 1)
        return false;
      if (tls && !start_tls(c))
        return false;
      continue;
    }
    if (st.kind == PG_STARTUP_CANCEL) {
      pg_msg_free(&m);
      c->cancel_request = true;
      on_cancel_request(c, st.cancel_pid, st.cancel_key);
      return false; /* PostgreSQL answers nothing: just close */
    }
    snprintf(c->user, sizeof c->user, "%s", st.user ? st.user : "moraine");
    snprintf(c->database, sizeof c->database, "%s",
             st.database && st.database[0] ? st.database : c->user);
    pg_msg_free(&m);
    if (c->a->tls_required && c->io.ssl == NULL) {
      pg_log(PG_LOG_WARN, "connection from %s (user \"%s\") refused: no TLS", c->a->peer, c->user);
      return fatal(c, "28000", "this server accepts TLS connections only (sslmode=require)");
    }
    return true;
  }
}

static bool expect_password_message(conn *c, pg_msg *m) {
  mr_error e;
  if (pg_read_message(&c->in, m, &e) != MR_OK) {
    read_failed(c, &e);
    return false;
  }
  if (m->type != 'p') {
    pg_msg_free(m);
    return fatal(c, "08P01", "expected a password response");
  }
  return true;
}

/* A failed password: logged once, answered only after a delay, so guessing
 * costs the guesser time (PostgreSQL's auth_delay). */
static bool auth_fail(conn *c, const char *why) {
  pg_log(PG_LOG_WARN, "authentication failed for user \"%s\" (database \"%s\") from %s: %s",
         c->user, c->database, c->a->peer, why);
  uint64_t ms = c->a->auth_fail_delay_ms;
  struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    /* interrupted by a signal: sleep the rest */
  }
  char msg[256];
  snprintf(msg, sizeof msg, "password authentication failed for user \"%s\"", c->user);
  send_error(c, "FATAL", "28P01", msg);
  flush(c);
  return false;
}

static bool authenticate(conn *c) {
  c->role = PG_ROLE_WRITE;
  if (c->a->users == NULL) {
    send_auth(c, 0, NULL, 0); /* AuthenticationOk (trust) */
    return true;
  }
  pg_scram_verifier v;
  bool known = pg_users_find(c->a->users, c->user, &v, &c->role);
  static const char mech[] = "SCRAM-SHA-256\0";
  send_auth(c, 10, mech, sizeof mech); /* AuthenticationSASL, list ends with \0 */
  if (flush(c))
    return false;
  pg_scram scram;
  mr_error e;
  if (pg_scram_init(&scram, &v, &e) != MR_OK)
    return auth_fail(c, e.msg);
  pg_msg m;
  if (!expect_password_message(c, &m))
    return false;
  pg_sasl_initial si;
  pg_error pe;
  if (pg_decode_sasl_initial(m.data, m.len, &si, &pe) != MR_OK) {
    pg_msg_free(&m);
    return fatal(c, pe.sqlstate, pe.base.msg);
  }
  if (strcmp(si.mechanism, "SCRAM-SHA-256") != 0 || si.data == NULL) {
    pg_msg_free(&m);
    return fatal(c, "08P01",
                 si.data ? "client selected an invalid SASL authentication mechanism"
                         : "SASLInitialResponse carries no client-first-message");
  }
  char reply[1024];
  bool ok = pg_scram_client_first(&scram, (const char *)si.data, si.len, reply, sizeof reply, &e) ==
            MR_OK;
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
  if (!ok) /* an unknown user fails here too, with the same answer */
    return auth_fail(c, known ? e.msg : "no such user");
  send_auth(c, 12, reply, strlen(reply)); /* AuthenticationSASLFinal */
  if (!pg_users_may_use(c->a->users, c->user, c->database)) {
    pg_log(PG_LOG_WARN, "connection from %s: user \"%s\" may not use database \"%s\"",
           c->a->peer, c->user, c->database);
    char msg[300];
    snprintf(msg, sizeof msg, "permission denied for database \"%s\"", c->database);
    return fatal(c, "42501", msg);
  }
  send_auth(c, 0, NULL, 0);
  return true;
}

/* ---- extended protocol ---------------------------------------------------- */

static named_stmt **find_stmt(conn *c, const char *name) {
  named_stmt **p = &c->stmts;
  while (*p && ((*p)->doomed || strcmp((*p)->name, name) != 0))
    p = &(*p)->next;
  return p;
}

static portal **find_portal(conn *c, const char *name) {
  portal **p = &c->portals;
  while (*p && ((*p)->doomed || strcmp((*p)->name, name) != 0))
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

/* sql_dealloc_fn: DEALLOCATE name | ALL and DISCARD ALL. What they end is
 * only marked here: the statement running them may be one of those named
 * (or its portal), so the frees wait for reap_doomed after the message. */
static bool dealloc_for_sql(void *ctx, const char *name, bool portals) {
  conn *c = ctx;
  if (name) {
    named_stmt *s = *find_stmt(c, name);
    if (s)
      s->doomed = true;
    return s != NULL;
  }
  for (named_stmt *s = c->stmts; s; s = s->next)
    if (s->name[0] != '\0') /* DEALLOCATE ALL leaves the unnamed statement */
      s->doomed = true;
  for (portal *p = c->portals; portals && p; p = p->next)
    if (p != c->running)
      p->doomed = true;
  return true;
}

static void reap_doomed(conn *c) {
  for (portal **pp = &c->portals; *pp;) {
    portal *p = *pp;
    if (p->doomed) {
      *pp = p->next;
      free_portal(p);
    } else {
      pp = &p->next;
    }
  }
  for (named_stmt **sp = &c->stmts; *sp;) {
    named_stmt *s = *sp;
    if (s->doomed) {
      *sp = s->next;
      drop_portals_of(c, s->p);
      sql_prepared_free(s->p);
      free(s->name);
      free(s);
    } else {
      sp = &s->next;
    }
  }
}

/* Extended-protocol error: report it and ignore messages until Sync. */
static void ext_error(conn *c, const sql_error *e) {
  send_sql_error(c, e);
  sql_session_error_at_sync(c->session);
  c->skip_to_sync = true;
}

static void ext_pg_error(conn *c, const pg_error *pe) {
  sql_error e;
  sql_fail(&e, MR_ERR_INVALID, pe->sqlstate, "%s", pe->base.msg);
  ext_error(c, &e);
}

static void ext_out_of_memory(conn *c) {
  sql_error e;
  sql_fail(&e, MR_ERR_NOMEM, "53200", "out of memory");
  ext_error(c, &e);
}

static void on_parse(conn *c, pg_msg *m) {
  pg_parse pp;
  pg_error pe;
  if (pg_decode_parse(m->data, m->len, &pp, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  if (pp.name[0] != '\0' && *find_stmt(c, pp.name)) {
    sql_error e;
    sql_fail(&e, MR_ERR_INVALID, "42P05", "prepared statement \"%s\" already exists", pp.name);
    ext_error(c, &e);
    return;
  }
  uint32_t *oids = calloc(pp.ntypes ? pp.ntypes : 1, sizeof *oids); /* ntypes fits the body */
  if (oids == NULL) {
    ext_out_of_memory(c);
    return;
  }
  for (size_t i = 0; i < pp.ntypes; i++)
    oids[i] = pg_parse_type(&pp, i);
  if (pp.name[0] == '\0')
    drop_stmt(c, "");
  sql_prepared *p;
  sql_error e;
  mr_status rc = sql_session_prepare(c->session, pp.query, pp.ntypes, oids, &p, &e);
  free(oids);
  if (rc != MR_OK) {
    ext_error(c, &e);
    return;
  }
  named_stmt *s = calloc(1, sizeof *s);
  if (s == NULL || (s->name = strdup(pp.name)) == NULL) {
    free(s);
    sql_prepared_free(p);
    ext_out_of_memory(c);
    return;
  }
  s->p = p;
  s->next = c->stmts;
  c->stmts = s;
  send_simple(c, '1'); /* ParseComplete */
}

/* Result-column count of a statement as Describe reports it; -1 unknown. */
static int count_columns(void *ctx, size_t n, const sql_column *cols) {
  *(long *)ctx = (long)n;
  return 0;
}

static int count_no_columns(void *ctx) {
  *(long *)ctx = 0;
  return 0;
}

static long column_count(conn *c, sql_prepared *p) {
  long n = -1;
  sql_sink sink = {0};
  sink.ctx = &n;
  sink.row_description = count_columns;
  sink.no_data = count_no_columns;
  sql_error e;
  if (sql_prepared_describe(c->session, p, false, 0, NULL, &sink, &e) != MR_OK)
    return -1;
  return n;
}

/* A portal holding copies of a decoded Bind's values and format codes. */
static mr_status make_portal(const pg_bind *b, sql_prepared *stmt, portal **out, sql_error *e) {
  portal *p = calloc(1, sizeof *p);
  if (p == NULL)
    return sql_fail(e, MR_ERR_NOMEM, "53200", "out of memory");
  p->stmt = stmt;
  p->name = strdup(b->portal);
  p->stmt_name = strdup(b->stmt);
  p->vals = calloc(b->nparams ? b->nparams : 1, sizeof *p->vals);
  p->lens = calloc(b->nparams ? b->nparams : 1, sizeof *p->lens);
  p->param_formats = calloc(b->nparam_formats ? b->nparam_formats : 1, sizeof *p->param_formats);
  p->formats = calloc(b->nresult_formats ? b->nresult_formats : 1, sizeof *p->formats);
  if (!p->name || !p->stmt_name || !p->vals || !p->lens || !p->param_formats || !p->formats) {
    free_portal(p);
    return sql_fail(e, MR_ERR_NOMEM, "53200", "out of memory");
  }
  p->nparams = b->nparams; /* from here free_portal frees the values */
  p->nparam_formats = b->nparam_formats;
  for (size_t i = 0; i < b->nparam_formats; i++)
    p->param_formats[i] = pg_format_code(b->param_formats, b->nparam_formats, i);
  p->nformats = b->nresult_formats;
  for (size_t i = 0; i < b->nresult_formats; i++)
    p->formats[i] = pg_format_code(b->result_formats, b->nresult_formats, i);
  size_t pos = 0;
  for (size_t i = 0; i < b->nparams; i++) {
    const uint8_t *d;
    size_t n;
    if (!pg_bind_next_value(b, &pos, &d, &n)) {
      free_portal(p);
      return sql_fail(e, MR_ERR_INVALID, "08P01", "malformed Bind message");
    }
    if (d == NULL)
      continue;
    p->vals[i] = malloc(n + 1);
    if (p->vals[i] == NULL) {
      free_portal(p);
      return sql_fail(e, MR_ERR_NOMEM, "53200", "out of memory");
    }
    memcpy(p->vals[i], d, n);
    p->vals[i][n] = '\0';
    p->lens[i] = n;
  }
  *out = p;
  return MR_OK;
}

static void on_bind(conn *c, pg_msg *m) {
  pg_bind b;
  pg_error pe;
  if (pg_decode_bind(m->data, m->len, &b, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  named_stmt *s = *find_stmt(c, b.stmt);
  sql_error e;
  if (s == NULL) {
    sql_fail(&e, MR_ERR_INVALID, "26000", "prepared statement \"%s\" does not exist", b.stmt);
    ext_error(c, &e);
    return;
  }
  long ncols = b.nresult_formats > 1 ? column_count(c, s->p) : -1;
  if (pg_bind_check(&b, sql_prepared_nparams(s->p), ncols, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  portal *p = NULL;
  if (make_portal(&b, s->p, &p, &e) != MR_OK || p == NULL) {
    ext_error(c, &e);
    return;
  }
  drop_portal(c, b.portal);
  p->next = c->portals;
  c->portals = p;
  send_simple(c, '2'); /* BindComplete */
}

static void on_describe(conn *c, pg_msg *m) {
  pg_target t;
  pg_error pe;
  if (pg_decode_describe(m->data, m->len, &t, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  sql_sink sink = make_sink(c);
  sql_error e;
  mr_status rc;
  if (t.kind == 'S') {
    named_stmt *s = *find_stmt(c, t.name);
    if (s == NULL) {
      sql_fail(&e, MR_ERR_INVALID, "26000", "prepared statement \"%s\" does not exist", t.name);
      ext_error(c, &e);
      return;
    }
    rc = sql_prepared_describe(c->session, s->p, true, 0, NULL, &sink, &e);
  } else {
    portal *p = *find_portal(c, t.name);
    if (p == NULL) {
      sql_fail(&e, MR_ERR_INVALID, "34000", "portal \"%s\" does not exist", t.name);
      ext_error(c, &e);
      return;
    }
    rc = sql_prepared_describe(c->session, p->stmt, false, p->nformats, p->formats, &sink, &e);
  }
  if (rc)
    ext_error(c, &e);
}

static void on_execute(conn *c, pg_msg *m) {
  pg_execute x; /* max_rows is ignored: portals always run to completion */
  pg_error pe;
  if (pg_decode_execute(m->data, m->len, &x, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  portal *p = *find_portal(c, x.portal);
  sql_error e;
  if (p == NULL) {
    sql_fail(&e, MR_ERR_INVALID, "34000", "portal \"%s\" does not exist", x.portal);
    ext_error(c, &e);
    return;
  }
  sql_sink sink = make_sink(c);
  c->running = p;
  if (sql_prepared_execute(c->session, p->stmt, p->nparams, (const char *const *)p->vals, p->lens,
                           p->nparam_formats, p->param_formats, p->nformats, p->formats, &sink,
                           &e) != MR_OK)
    ext_error(c, &e);
  c->running = NULL;
}

static void on_close(conn *c, pg_msg *m) {
  pg_target t;
  pg_error pe;
  if (pg_decode_close(m->data, m->len, &t, &pe) != MR_OK) {
    ext_pg_error(c, &pe);
    return;
  }
  if (t.kind == 'S')
    drop_stmt(c, t.name);
  else
    drop_portal(c, t.name);
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
  const char *q;
  pg_error pe;
  if (pg_decode_query(m->data, m->len, &q, &pe) != MR_OK) {
    send_error(c, "ERROR", pe.sqlstate, pe.base.msg);
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
  static const char *const names[] = {"server_encoding",   "client_encoding",
                                      "DateStyle",         "TimeZone",
                                      "integer_datetimes", "standard_conforming_strings",
                                      "IntervalStyle",     "is_superuser",
                                      "application_name",  NULL};
  for (size_t i = 0; names[i]; i++) {
    const char *v = sql_session_guc(c->session, names[i]);
    send_param_status(c, names[i], v ? v : "");
  }
  send_param_status(c, "session_authorization", c->user);
  uint32_t pid, secret;
  pg_registry_key(c->entry, &pid, &secret);
  pg_buf_begin(&c->out, 'K');
  pg_buf_i32(&c->out, (int32_t)pid);
  pg_buf_i32(&c->out, (int32_t)secret);
  pg_buf_end(&c->out);
  send_ready(c);
}

/* The server is shutting down and this connection is idle: end it as
 * PostgreSQL's fast shutdown does. */
static void terminate_for_shutdown(conn *c) {
  c->stopping = true;
  if (!c->io_failed)
    fatal(c, "57P01", "terminating connection due to administrator command");
}

static void dispatch(conn *c, pg_msg *m) {
  switch (m->type) {
  case 'Q':
    on_query(c, m);
    break;
  case 'P':
    on_parse(c, m);
    break;
  case 'B':
    on_bind(c, m);
    break;
  case 'D':
    on_describe(c, m);
    break;
  case 'E':
    on_execute(c, m);
    break;
  case 'C':
    on_close(c, m);
    break;
  case 'S':
    on_sync(c);
    break;
  case 'H':
    flush(c);
    break;
  case 'd':
  case 'c':
  case 'f':
    break; /* COPY messages after a COPY ended in error are dropped */
  default: {
    char msg[64];
    snprintf(msg, sizeof msg, "invalid frontend message type %d", (unsigned char)m->type);
    c->protocol_error = true;
    fatal(c, "08P01", msg);
    c->io_failed = true;
  }
  }
}

/* Why a cancelled message stopped, for the log. */
static const char *reason_text(pg_cancel_reason why) {
  switch (why) {
  case PG_CANCEL_USER:
    return "cancel request";
  case PG_CANCEL_TIMEOUT:
    return "statement_timeout";
  case PG_CANCEL_GONE:
    return "client disconnected";
  case PG_CANCEL_SHUTDOWN:
    return "server shutdown";
  case PG_CANCEL_NONE:
    break;
  }
  return "none";
}

static double ms_between(const struct timespec *t0, const struct timespec *t1) {
  return (double)(t1->tv_sec - t0->tv_sec) * 1e3 + (double)(t1->tv_nsec - t0->tv_nsec) / 1e6;
}

/* The SQL a message ran, for the slow-statement log: a Query's text, a
 * Parse's statement, an Execute's portal statement; NULL for the others. */
static const char *message_sql(conn *c, const pg_msg *m) {
  pg_error pe;
  if (m->type == 'Q') {
    const char *q;
    return pg_decode_query(m->data, m->len, &q, &pe) == MR_OK ? q : NULL;
  }
  if (m->type == 'P') {
    pg_parse pp;
    return pg_decode_parse(m->data, m->len, &pp, &pe) == MR_OK ? pp.query : NULL;
  }
  if (m->type == 'E') {
    pg_execute x;
    if (pg_decode_execute(m->data, m->len, &x, &pe) != MR_OK)
      return NULL;
    portal *p = *find_portal(c, x.portal);
    return p ? sql_prepared_text(p->stmt) : NULL;
  }
  return NULL;
}

/* One line for a message that took at least slow_statement_ms; a Sync
 * that ends an implicit transaction is where its commit ran. */
static void log_slow(conn *c, const pg_msg *m, double ms, const char *sql) {
  const char *what = m->type == 'S' ? "sync" : m->type == 'B' ? "bind" : "statement";
  if (sql)
    pg_log(PG_LOG_INFO, "connection %u: %s took %.3f ms: %s", c->pid, what, ms, sql);
  else
    pg_log(PG_LOG_INFO, "connection %u: %s ('%c') took %.3f ms", c->pid, what, m->type, ms);
}

static void query_loop(conn *c) {
  while (!c->io_failed) {
    pg_msg m;
    mr_error e;
    pg_msg_free(&c->copy_msg);
    if (pg_read_message(&c->in, &m, &e) != MR_OK) {
      if (pg_registry_stopping(c->reg))
        terminate_for_shutdown(c);
      else {
        if (e.code == MR_ERR_INVALID || e.code == MR_ERR_NOMEM)
          c->protocol_error = true;
        read_failed(c, &e);
      }
      return;
    }
    if (m.type == 'X') {
      pg_msg_free(&m);
      return;
    }
    if (c->skip_to_sync && m.type != 'S') {
      pg_msg_free(&m);
      continue;
    }
    c->timeout_ms = sql_session_statement_timeout_ms(c->session);
    pg_registry_begin(c->reg, c->entry, c->timeout_ms);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* copied first: an Execute may end its own portal (DISCARD ALL) */
    char sqlbuf[1001];
    const char *sql = c->a->slow_statement_ms >= 0 ? message_sql(c, &m) : NULL;
    if (sql) {
      snprintf(sqlbuf, sizeof sqlbuf, "%s", sql);
      sql = sqlbuf;
    }
    dispatch(c, &m);
    reap_doomed(c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ms_between(&t0, &t1);
    if (c->a->slow_statement_ms >= 0 && ms >= (double)c->a->slow_statement_ms && m.type != 'H' &&
        m.type != 'C')
      log_slow(c, &m, ms, sql);
    sql_commit_times ct;
    if (sql_session_take_commit_times(c->session, &ct) && c->a->log_commit_phases)
      pg_log(PG_LOG_INFO,
             "connection %u: commit of %zu rows: lock wait %.3f ms, map %.3f ms, store write "
             "%.3f ms, engine commit %.3f ms, total %.3f ms",
             c->pid, ct.rows, ct.lock_wait, ct.map, ct.store_write, ct.engine_commit, ct.total);
    pg_cancel_reason why = pg_registry_reason(c->reg, c->entry);
    if (why == PG_CANCEL_TIMEOUT)
      pg_log(PG_LOG_INFO, "connection %u (%s, user \"%s\"): statement cancelled: %s of %llu ms",
             c->pid, c->a->peer, c->user, reason_text(why), (unsigned long long)c->timeout_ms);
    else if (why != PG_CANCEL_NONE)
      pg_log(PG_LOG_INFO, "connection %u (%s, user \"%s\"): statement cancelled: %s", c->pid,
             c->a->peer, c->user, reason_text(why));
    /* the answer is out: DuckDB's BEGIN or read-only COMMIT runs while the
     * client reads it (sql_session_defer_ends) */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *settled = sql_session_settle(c->session);
    if (settled && c->a->slow_statement_ms >= 0) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      ms = ms_between(&t0, &t1);
      if (ms >= (double)c->a->slow_statement_ms)
        pg_log(PG_LOG_INFO, "connection %u: settle took %.3f ms: DuckDB's %s after the answer",
               c->pid, ms, settled);
    }
    /* a ReadyForQuery 'I' just went out: between transactions */
    bool idle = (m.type == 'Q' || m.type == 'S') && sql_session_status(c->session) == 'I';
    pg_msg_free(&m);
    if (c->out.failed)
      c->io_failed = true;
    if (pg_registry_end(c->reg, c->entry, idle)) {
      terminate_for_shutdown(c);
      return;
    }
  }
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Startup and authentication; true once the session is open. */
static bool open_session(conn *c) {
  const pg_conn_args *a = c->a;
  c->in.max_message = PG_PRE_AUTH_MESSAGE; /* small until authenticated */
  if (!startup(c))
    return false;
  mr_error me;
  if (pg_registry_claim(c->reg, c->entry, &me) != MR_OK) {
    bool full = me.code == MR_ERR_CONFLICT;
    pg_log(PG_LOG_WARN, "connection from %s (user \"%s\") refused: %s", a->peer, c->user, me.msg);
    return fatal(c, full ? "53300" : "57P03", me.msg);
  }
  if (!authenticate(c))
    return false;
  c->in.max_message = a->max_message;
  sql_error e;
  mr_status orc = a->sessions ? a->sessions->open(a->sessions->ctx, c->user, c->database,
                                                  &c->session, &c->session_handle, &e)
                              : sql_session_open(a->engine, c->user, c->database, &c->session, &e);
  if (orc != MR_OK) {
    pg_log(PG_LOG_WARN, "connection from %s (user \"%s\"): cannot open a session: %s", a->peer,
           c->user, e.base.msg);
    send_error(c, "FATAL", e.sqlstate, e.base.msg);
    flush(c);
    return false;
  }
  sql_session_set_read_only_role(c->session, c->role == PG_ROLE_READ);
  sql_session_set_dealloc(c->session, dealloc_for_sql, c);
  sql_session_defer_ends(c->session, true); /* query_loop settles after each answer */
  pg_registry_authenticated(c->reg, c->entry, c->session);
  return true;
}

/* A zeroed conn except its 64 KiB read buffer, which is only ever read
 * after being filled: calloc would write every page of it, so each silent
 * client would cost 64 KiB of resident memory for nothing. */
static conn *conn_new(void) {
  conn *c = malloc(sizeof *c);
  if (c == NULL)
    return NULL;
  size_t buf_at = offsetof(conn, in) + offsetof(pg_reader, buf);
  size_t buf_end = buf_at + sizeof c->in.buf;
  memset(c, 0, buf_at);
  memset((char *)c + buf_end, 0, sizeof *c - buf_end);
  return c;
}

void pg_conn_run(const pg_conn_args *a) {
  conn *c = conn_new();
  if (c == NULL)
    return;
  c->a = a;
  c->reg = a->registry;
  c->entry = a->entry;
  uint32_t secret;
  pg_registry_key(a->entry, &c->pid, &secret);
  c->io = (pg_io){a->fd, NULL};
  c->in.io = &c->io;
  struct timespec accepted;
  clock_gettime(CLOCK_MONOTONIC, &accepted);
  if (!open_session(c)) {
    if (pg_registry_timed_out(c->reg, c->entry))
      pg_log(PG_LOG_INFO, "connection from %s closed: not authenticated within %llu ms", a->peer,
             (unsigned long long)a->auth_timeout_ms);
    else if (!c->cancel_request)
      pg_log(PG_LOG_DEBUG, "connection from %s closed before authentication after %.3f s", a->peer,
             seconds_since(&accepted));
    goto done;
  }
  c->is_open = true;
  clock_gettime(CLOCK_MONOTONIC, &c->opened);
  pg_log(PG_LOG_INFO, "connection %u opened from %s: user \"%s\", database \"%s\", %s, role %s",
         c->pid, a->peer, c->user, c->database, c->io.ssl ? "TLS" : "no TLS",
         pg_role_name(c->role));
  send_session_start(c);
  query_loop(c);
done:
  pg_registry_detach(c->reg, c->entry); /* no canceller touches the session from here */
  if (c->is_open)
    pg_log(PG_LOG_INFO, "connection %u closed from %s: user \"%s\", database \"%s\", %.3f s%s",
           c->pid, a->peer, c->user, c->database, seconds_since(&c->opened),
           c->stopping         ? " (server shutdown)"
           : c->protocol_error ? " (protocol error)"
                               : "");
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
  if (c->session && a->sessions) /* frees the prepared statements too */
    a->sessions->close(a->sessions->ctx, c->session, c->session_handle);
  else
    sql_session_close(c->session);
  pg_buf_free(&c->out);
  pg_io_end_tls(&c->io);
  free(c);
}
