/*
 * pg_server.c — listening, accepting, the connection limit, and shutdown.
 * One detached thread per connection; the server counts them and waits for
 * the count to reach zero when it stops (after shutting their sockets).
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

typedef struct conn_slot {
  int fd;
  struct conn_slot *next;
} conn_slot;

struct pg_server {
  pg_server_config cfg;
  char *password;
  sql_engine *engine;
  int listen_fd;
  int stop_pipe[2];
  char address[300];
  pthread_mutex_t lock;
  pthread_cond_t idle;
  int active;          /* connections inside the limit */
  int threads;         /* all connection threads alive */
  conn_slot *conns;
  uint32_t next_id;
};

typedef struct conn_start {
  pg_server *srv;
  pg_conn_args args;
  conn_slot slot;
} conn_start;

bool pg_host_is_loopback(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
    return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  return false;
}

mr_status pg_server_start(const pg_server_config *cfg, sql_engine *engine, pg_server **out,
                          mr_error *err) {
  *out = NULL;
  if (cfg->password == NULL && !pg_host_is_loopback(cfg->host))
    return mr_fail(err, MR_ERR_INVALID,
                   "refusing to listen on non-loopback address %s without --password-file",
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
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0)
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
  s->password = cfg->password ? strdup(cfg->password) : NULL;
  s->cfg.password = s->password;
  s->engine = engine;
  s->listen_fd = fd;
  s->next_id = (uint32_t)getpid() << 8;
  if (s->cfg.max_connections <= 0)
    s->cfg.max_connections = PG_DEFAULT_MAX_CONNECTIONS;
  if (s->cfg.max_message == 0)
    s->cfg.max_message = PG_DEFAULT_MAX_MESSAGE;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->idle, NULL);
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
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) {
      struct sockaddr_in *a = (struct sockaddr_in *)&ss;
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
    }
  }
  snprintf(s->address, sizeof s->address, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
  *out = s;
  return MR_OK;
}

const char *pg_server_address(const pg_server *s) { return s->address; }

void pg_server_stop(pg_server *s) {
  char c = 1;
  ssize_t n = write(s->stop_pipe[1], &c, 1);
  (void)n;
}

static void *conn_thread(void *arg) {
  conn_start *cs = arg;
  pg_server *srv = cs->srv;
  pg_conn_run(&cs->args);
  pthread_mutex_lock(&srv->lock);
  for (conn_slot **p = &srv->conns; *p; p = &(*p)->next) {
    if (*p == &cs->slot) {
      *p = cs->slot.next;
      break;
    }
  }
  if (!cs->args.over_limit)
    srv->active--;
  srv->threads--;
  close(cs->args.fd);
  pthread_cond_broadcast(&srv->idle);
  pthread_mutex_unlock(&srv->lock);
  free(cs);
  return NULL;
}

static void accept_one(pg_server *s) {
  int fd = accept(s->listen_fd, NULL, NULL);
  if (fd < 0)
    return; /* EINTR, ECONNABORTED, EMFILE: try again on the next poll */
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  conn_start *cs = calloc(1, sizeof *cs);
  pthread_mutex_lock(&s->lock);
  /* hard ceiling on threads: past limit + a few, just close */
  if (cs == NULL || s->threads >= s->cfg.max_connections + 16) {
    pthread_mutex_unlock(&s->lock);
    free(cs);
    close(fd);
    return;
  }
  cs->srv = s;
  cs->args.fd = fd;
  cs->args.id = ++s->next_id;
  cs->args.secret = (uint32_t)rand();
  cs->args.engine = s->engine;
  cs->args.password = s->cfg.password;
  cs->args.max_message = s->cfg.max_message;
  cs->args.over_limit = s->active >= s->cfg.max_connections;
  cs->slot.fd = fd;
  cs->slot.next = s->conns;
  s->conns = &cs->slot;
  if (!cs->args.over_limit)
    s->active++;
  s->threads++;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_t th;
  int rc = pthread_create(&th, &attr, conn_thread, cs);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    s->conns = cs->slot.next;
    if (!cs->args.over_limit)
      s->active--;
    s->threads--;
    close(fd);
    free(cs);
  }
  pthread_mutex_unlock(&s->lock);
}

mr_status pg_server_run(pg_server *s, mr_error *err) {
  for (;;) {
    struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
    int n = poll(p, 2, -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return mr_fail(err, MR_ERR_IO, "poll: %s", strerror(errno));
    if (p[1].revents)
      break;
    if (p[0].revents & POLLIN)
      accept_one(s);
  }
  /* stop: no new connections; end the open ones and wait for them */
  close(s->listen_fd);
  s->listen_fd = -1;
  pthread_mutex_lock(&s->lock);
  for (conn_slot *c = s->conns; c; c = c->next)
    shutdown(c->fd, SHUT_RDWR);
  while (s->threads > 0)
    pthread_cond_wait(&s->idle, &s->lock);
  pthread_mutex_unlock(&s->lock);
  return MR_OK;
}

void pg_server_free(pg_server *s) {
  if (s == NULL)
    return;
  if (s->listen_fd >= 0)
    close(s->listen_fd);
  if (s->stop_pipe[0] > 0)
    close(s->stop_pipe[0]);
  if (s->stop_pipe[1] > 0)
    close(s->stop_pipe[1]);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->idle);
  free(s->password);
  free(s);
}
