/*
 * pg_server.c — listening, accepting, one detached thread per connection,
 * and the drain at shutdown. The live connections, their limits, keys and
 * deadlines are the registry's (pg_registry.c); accepting never reads from
 * a client, so a slow or silent one never holds up the next.
 */
#include "pgwire/pg_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pgwire/pg_log.h"
#include "pgwire/pg_registry.h"

struct pg_server {
  pg_server_config cfg;
  sql_engine *engine;
  pg_registry *registry;
  int listen_fd;
  int stop_pipe[2];
  char address[300];
};

/* After the drain's cancel, how long threads get to tell their clients. */
#define PG_SHUTDOWN_GRACE_MS 2000

typedef struct conn_start {
  pg_server *srv;
  pg_conn_args args;
  char peer[INET6_ADDRSTRLEN + 8];
} conn_start;

bool pg_host_is_loopback(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
    return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  return false;
}

/* "host:port" ("[v6]:port") of a socket address. */
static void peer_name(const struct sockaddr_storage *ss, char *out, size_t cap) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  snprintf(out, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

static void cancel_session(void *session) {
  sql_session_cancel(session);
}

mr_status pg_server_start(const pg_server_config *cfg, sql_engine *engine, pg_server **out,
                          mr_error *err) {
  *out = NULL;
  if (cfg->users == NULL && cfg->tls == NULL && !pg_host_is_loopback(cfg->host))
    return mr_fail(err, MR_ERR_INVALID,
                   "refusing to listen on non-loopback address %s without passwords or TLS",
                   cfg->host);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int gai = getaddrinfo(cfg->host, cfg->port, &hints, &res);
  if (gai != 0)
    return mr_fail(err, MR_ERR_INVALID, "cannot resolve %s:%s: %s", cfg->host, cfg->port,
                   gai_strerror(gai));
  int fd = -1;
  int saved = 0;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      saved = errno;
      continue;
    }
    int one = 1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
      break;
    saved = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0)
    return mr_fail(err, MR_ERR_IO, "cannot listen on %s:%s: %s", cfg->host, cfg->port,
                   strerror(saved));
  pg_server *s = calloc(1, sizeof *s);
  if (s == NULL) {
    close(fd);
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  }
  s->cfg = *cfg;
  s->engine = engine;
  s->listen_fd = fd;
  s->stop_pipe[0] = s->stop_pipe[1] = -1;
  if (s->cfg.max_connections <= 0)
    s->cfg.max_connections = PG_DEFAULT_MAX_CONNECTIONS;
  if (s->cfg.max_message == 0)
    s->cfg.max_message = PG_DEFAULT_MAX_MESSAGE;
  if (s->cfg.auth_timeout_ms == 0)
    s->cfg.auth_timeout_ms = PG_DEFAULT_AUTH_TIMEOUT_MS;
  if (s->cfg.shutdown_timeout_ms == 0)
    s->cfg.shutdown_timeout_ms = PG_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  if (s->cfg.auth_fail_delay_ms == 0)
    s->cfg.auth_fail_delay_ms = PG_DEFAULT_AUTH_FAIL_DELAY_MS;
  pg_registry_config rcfg = {
      .max_connections = s->cfg.max_connections,
      .max_pending =
          s->cfg.max_connections > PG_MIN_PENDING ? s->cfg.max_connections : PG_MIN_PENDING,
      .auth_timeout_ms = s->cfg.auth_timeout_ms,
      .cancel = cancel_session,
      .now_ms = NULL,
  };
  mr_status rc = pg_registry_new(&rcfg, &s->registry, err);
  if (rc != MR_OK) {
    pg_server_free(s);
    return rc;
  }
  if (pipe(s->stop_pipe) != 0) {
    pg_server_free(s);
    return mr_fail(err, MR_ERR_IO, "pipe: %s", strerror(errno));
  }
  for (int k = 0; k < 2; k++) {
    fcntl(s->stop_pipe[k], F_SETFD, FD_CLOEXEC);
    fcntl(s->stop_pipe[k], F_SETFL, O_NONBLOCK);
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  memset(&ss, 0, sizeof ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
    ss.ss_family = AF_UNSPEC;
  peer_name(&ss, s->address, sizeof s->address);
  *out = s;
  return MR_OK;
}

const char *pg_server_address(const pg_server *s) {
  return s->address;
}

void pg_server_stop(pg_server *s) {
  char c = 1;
  ssize_t n = write(s->stop_pipe[1], &c, 1);
  (void)n;
}

static void *conn_thread(void *arg) {
  conn_start *cs = arg;
  pg_conn_run(&cs->args);
  /* remove before close: the registry never shuts a reused descriptor */
  pg_registry_remove(cs->srv->registry, cs->args.entry);
  close(cs->args.fd);
  free(cs);
  return NULL;
}

/* Refuses a connection before reading anything from it: one FATAL, sent
 * without waiting (the client may not read), then close. */
static void refuse(int fd, const char *sqlstate, const char *msg) {
  uint8_t b[256];
  size_t n = 5;
  const char *fields[] = {"SFATAL", "VFATAL", NULL, NULL};
  char code[8], text[200];
  snprintf(code, sizeof code, "C%s", sqlstate);
  snprintf(text, sizeof text, "M%s", msg);
  fields[2] = code;
  fields[3] = text;
  for (size_t i = 0; i < 4; i++) {
    size_t k = strlen(fields[i]) + 1;
    memcpy(b + n, fields[i], k);
    n += k;
  }
  b[n++] = 0;
  b[0] = 'E';
  uint32_t len = (uint32_t)(n - 1);
  b[1] = (uint8_t)(len >> 24);
  b[2] = (uint8_t)(len >> 16);
  b[3] = (uint8_t)(len >> 8);
  b[4] = (uint8_t)len;
  ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w;
  close(fd);
}

static void accept_one(pg_server *s) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  memset(&ss, 0, sizeof ss);
  int fd = accept(s->listen_fd, (struct sockaddr *)&ss, &sl);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE)
      pg_log(PG_LOG_ERROR, "accept: %s", strerror(errno));
    return; /* EINTR, ECONNABORTED, EMFILE: try again on the next poll */
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  conn_start *cs = calloc(1, sizeof *cs);
  if (cs == NULL) {
    refuse(fd, "53200", "out of memory");
    return;
  }
  peer_name(&ss, cs->peer, sizeof cs->peer);
  mr_error err;
  pg_entry *e;
  if (pg_registry_add(s->registry, fd, &e, &err) != MR_OK) {
    pg_log(PG_LOG_WARN, "connection from %s refused: %s", cs->peer, err.msg);
    refuse(fd, err.code == MR_ERR_CLOSED ? "57P03" : "53300",
           err.code == MR_ERR_CLOSED ? "the database system is shutting down"
                                     : "sorry, too many clients already (too many connections "
                                       "waiting to authenticate)");
    free(cs);
    return;
  }
  pg_log(PG_LOG_DEBUG, "accepted a connection from %s", cs->peer);
  cs->srv = s;
  cs->args.fd = fd;
  cs->args.peer = cs->peer;
  cs->args.registry = s->registry;
  cs->args.entry = e;
  cs->args.engine = s->engine;
  cs->args.users = s->cfg.users;
  cs->args.sessions = s->cfg.sessions;
  cs->args.max_message = s->cfg.max_message;
  cs->args.auth_timeout_ms = s->cfg.auth_timeout_ms;
  cs->args.auth_fail_delay_ms = s->cfg.auth_fail_delay_ms;
  cs->args.slow_statement_ms = s->cfg.slow_statement_ms;
  cs->args.log_commit_phases = s->cfg.log_commit_phases;
  cs->args.tls = s->cfg.tls;
  cs->args.tls_required = s->cfg.tls_required;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* 16 MiB of address space (pages are committed only when touched): the
   * SQL parser recurses once per level of a statement's tree, and the
   * planner admits up to PLAN_MAX_NESTING levels (sql_plan.c) */
  pthread_attr_setstacksize(&attr, 16 << 20);
  pthread_t th;
  int rc = pthread_create(&th, &attr, conn_thread, cs);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    pg_log(PG_LOG_ERROR, "connection from %s refused: cannot start a thread (error %d)", cs->peer,
           rc);
    pg_registry_remove(s->registry, e);
    refuse(fd, "53300", "sorry, too many clients already (no thread)");
    free(cs);
  }
}

/* Stop accepting, end idle connections, give busy ones shutdown_timeout_ms,
 * then cancel what is left (its client is told why), and after a grace
 * period shut every socket and wait for the threads. */
static void drain(pg_server *s) {
  close(s->listen_fd);
  s->listen_fd = -1;
  pg_registry_stop(s->registry);
  if (pg_registry_wait_empty(s->registry, s->cfg.shutdown_timeout_ms))
    return;
  size_t left = pg_registry_abort_all(s->registry, false);
  pg_log(PG_LOG_WARN, "shutdown: %zu connection(s) still busy after %llu ms; cancelling them", left,
         (unsigned long long)s->cfg.shutdown_timeout_ms);
  if (pg_registry_wait_empty(s->registry, PG_SHUTDOWN_GRACE_MS))
    return;
  left = pg_registry_abort_all(s->registry, true);
  pg_log(PG_LOG_WARN, "shutdown: closing the sockets of %zu connection(s)", left);
  while (!pg_registry_wait_empty(s->registry, 5000))
    pg_log(PG_LOG_WARN, "shutdown: still waiting for connections to end");
}

mr_status pg_server_run(pg_server *s, mr_error *err) {
  if (pg_registry_watch(s->registry, err) != MR_OK)
    return err ? err->code : MR_ERR_IO;
  mr_status rc = MR_OK;
  for (;;) { /* accept never reads from a client: a silent one cannot hold it up */
    struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
    int n = poll(p, 2, -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = mr_fail(err, MR_ERR_IO, "poll: %s", strerror(errno));
      break;
    }
    if (p[1].revents)
      break;
    if (p[0].revents & POLLIN)
      accept_one(s);
  }
  pg_log(PG_LOG_INFO,
         "shutting down: no new connections; waiting up to %llu ms for running "
         "statements",
         (unsigned long long)s->cfg.shutdown_timeout_ms);
  drain(s);
  return rc;
}

void pg_server_free(pg_server *s) {
  if (s == NULL)
    return;
  if (s->listen_fd >= 0)
    close(s->listen_fd);
  if (s->stop_pipe[0] >= 0)
    close(s->stop_pipe[0]);
  if (s->stop_pipe[1] >= 0)
    close(s->stop_pipe[1]);
  pg_registry_free(s->registry);
  free(s);
}
