/*
 * pg_users.c — the users file (parse, look up, reload, rewrite one line)
 * and the single-password mode; see pg_users.h for the format.
 */
#include "pgwire/pg_users.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define USER_NAME_MAX 128

#define USER_DATABASES_MAX 512

typedef struct pg_user {
  char name[USER_NAME_MAX];
  pg_role role;
  pg_scram_verifier v;
  char databases[USER_DATABASES_MAX]; /* "" = all, else ",a,b," */
} pg_user;

/* Is database in the list (",a,b," form; "" = all)? */
static bool in_list(const char *list, const char *database) {
  if (list[0] == '\0')
    return true;
  if (database[0] == '\0' || strchr(database, ',') != NULL)
    return false; /* "a,b" would match across two granted names */
  size_t n = strlen(database);
  for (const char *p = strstr(list, database); p; p = strstr(p + 1, database))
    if (p > list && p[-1] == ',' && p[n] == ',')
      return true;
  return false;
}

/* "a,b" / "*" -> ",a,b," / ""; false when it does not fit or has blanks. */
static bool list_form(const char *text, char *out, size_t cap) {
  if (text == NULL || strcmp(text, "*") == 0) {
    out[0] = '\0';
    return true;
  }
  if (text[0] == '\0' || strpbrk(text, " \t\r\n") != NULL ||
      (size_t)snprintf(out, cap, ",%s,", text) >= cap)
    return false;
  return strstr(out, ",,") == NULL;
}

struct pg_users {
  char *path;         /* NULL: password mode */
  pthread_mutex_t mu; /* guards v, n */
  pg_user *v;
  size_t n;
  bool any_name;            /* password mode: v[0] for every name */
  pg_scram_verifier nobody; /* no password matches it */
};

const char *pg_role_name(pg_role r) {
  return r == PG_ROLE_WRITE ? "write" : "read";
}

mr_status pg_role_parse(const char *s, pg_role *out, mr_error *err) {
  if (strcmp(s, "read") == 0)
    *out = PG_ROLE_READ;
  else if (strcmp(s, "write") == 0)
    *out = PG_ROLE_WRITE;
  else
    return mr_fail(err, MR_ERR_INVALID, "unknown role '%s' (want read or write)", s);
  return MR_OK;
}

/* A verifier with random keys: the proof of no password matches it. */
static mr_status make_nobody(pg_scram_verifier *v, mr_error *err) {
  memset(v, 0, sizeof *v);
  v->iterations = PG_SCRAM_ITERATIONS;
  v->salt_len = 16;
  if (RAND_bytes(v->salt, (int)v->salt_len) != 1 ||
      RAND_bytes(v->stored_key, sizeof v->stored_key) != 1 ||
      RAND_bytes(v->server_key, sizeof v->server_key) != 1)
    return mr_fail(err, MR_ERR_IO, "no randomness");
  return MR_OK;
}

/* Parses the users file at path into *v / *n (malloc'd). */
static mr_status parse_file(const char *path, pg_user **out, size_t *nout, mr_error *err) {
  *out = NULL;
  *nout = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return mr_fail(err, MR_ERR_IO, "cannot read the users file %s: %s", path, strerror(errno));
  pg_user *v = NULL;
  size_t n = 0, cap = 0, lineno = 0;
  char line[1024];
  mr_status rc = MR_OK;
  while (rc == MR_OK && fgets(line, sizeof line, f)) {
    lineno++;
    if (strchr(line, '\n') == NULL && !feof(f)) {
      rc = mr_fail(err, MR_ERR_INVALID, "users file %s line %zu: longer than %zu bytes", path,
                   lineno, sizeof line - 1);
      break;
    }
    char name[USER_NAME_MAX + 1], role[16], verifier[512], dbs[USER_DATABASES_MAX], extra[2];
    dbs[0] = '\0';
    int k = sscanf(line, " %128s %15s %511s %509s %1s", name, role, verifier, dbs, extra);
    if (k <= 0 || name[0] == '#')
      continue;
    pg_user u;
    memset(&u, 0, sizeof u);
    if (k != 3 && k != 4) {
      rc = mr_fail(err, MR_ERR_INVALID,
                   "users file %s line %zu: want NAME ROLE VERIFIER [DATABASES]", path, lineno);
    } else if (!list_form(k == 4 ? dbs : NULL, u.databases, sizeof u.databases)) {
      rc = mr_fail(err, MR_ERR_INVALID,
                   "users file %s line %zu: DATABASES is * or names separated by commas", path,
                   lineno);
    } else if (strlen(name) >= sizeof u.name) {
      rc = mr_fail(err, MR_ERR_INVALID, "users file %s line %zu: name longer than %d bytes", path,
                   lineno, USER_NAME_MAX - 1);
    } else if (pg_role_parse(role, &u.role, err) != MR_OK ||
               pg_scram_verifier_parse(verifier, &u.v, err) != MR_OK) {
      rc = mr_error_wrap(err, "users file %s line %zu", path, lineno);
    }
    for (size_t i = 0; rc == MR_OK && i < n; i++)
      if (strcmp(v[i].name, name) == 0)
        rc = mr_fail(err, MR_ERR_INVALID, "users file %s line %zu: user %s appears twice", path,
                     lineno, name);
    if (rc)
      break;
    memcpy(u.name, name, strlen(name) + 1); /* fits: checked above */
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 8;
      pg_user *nv = realloc(v, nc * sizeof *nv);
      if (nv == NULL) {
        rc = mr_fail(err, MR_ERR_NOMEM, "out of memory reading %s", path);
        break;
      }
      v = nv;
      cap = nc;
    }
    v[n++] = u;
  }
  fclose(f);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *nout = n;
  return MR_OK;
}

static mr_status users_new(pg_users **out, mr_error *err) {
  pg_users *u = calloc(1, sizeof *u);
  if (u == NULL)
    return mr_fail(err, MR_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&u->mu, NULL);
  mr_status rc = make_nobody(&u->nobody, err);
  if (rc) {
    pg_users_free(u);
    return rc;
  }
  *out = u;
  return MR_OK;
}

mr_status pg_users_open_file(const char *path, pg_users **out, mr_error *err) {
  *out = NULL;
  pg_users *u;
  mr_status rc = users_new(&u, err);
  if (rc)
    return rc;
  u->path = strdup(path);
  rc = u->path ? parse_file(path, &u->v, &u->n, err) : mr_fail(err, MR_ERR_NOMEM, "out of memory");
  if (rc) {
    pg_users_free(u);
    return rc;
  }
  *out = u;
  return MR_OK;
}

mr_status pg_users_open_password(const char *password, pg_users **out, mr_error *err) {
  *out = NULL;
  pg_users *u;
  mr_status rc = users_new(&u, err);
  if (rc)
    return rc;
  u->v = calloc(1, sizeof *u->v);
  rc = u->v ? pg_scram_verifier_make(password, &u->v[0].v, err)
            : mr_fail(err, MR_ERR_NOMEM, "out of memory");
  if (rc) {
    pg_users_free(u);
    return rc;
  }
  u->n = 1;
  u->any_name = true;
  u->v[0].role = PG_ROLE_WRITE;
  *out = u;
  return MR_OK;
}

mr_status pg_users_reload(pg_users *u, mr_error *err) {
  if (u->path == NULL)
    return MR_OK;
  pg_user *v;
  size_t n;
  mr_status rc = parse_file(u->path, &v, &n, err);
  if (rc)
    return rc;
  pthread_mutex_lock(&u->mu);
  pg_user *old = u->v;
  u->v = v;
  u->n = n;
  pthread_mutex_unlock(&u->mu);
  free(old);
  return MR_OK;
}

void pg_users_free(pg_users *u) {
  if (u == NULL)
    return;
  free(u->v);
  free(u->path);
  pthread_mutex_destroy(&u->mu);
  free(u);
}

bool pg_users_may_use(pg_users *u, const char *name, const char *database) {
  bool ok = false;
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; i < u->n; i++)
    if (u->any_name || strcmp(u->v[i].name, name) == 0) {
      ok = in_list(u->v[i].databases, database);
      break;
    }
  pthread_mutex_unlock(&u->mu);
  return ok;
}

bool pg_users_find(pg_users *u, const char *name, pg_scram_verifier *v, pg_role *role) {
  bool found = false;
  pthread_mutex_lock(&u->mu);
  for (size_t i = 0; !found && i < u->n; i++)
    if (u->any_name || strcmp(u->v[i].name, name) == 0) {
      *v = u->v[i].v;
      *role = u->v[i].role;
      found = true;
    }
  pthread_mutex_unlock(&u->mu);
  if (!found) {
    *v = u->nobody;
    *role = PG_ROLE_READ;
  }
  return found;
}

static void write_line(FILE *out, const char *name, pg_role role, const char *verifier,
                       const char *databases) {
  if (databases && strcmp(databases, "*") != 0)
    fprintf(out, "%s %s %s %s\n", name, pg_role_name(role), verifier, databases);
  else
    fprintf(out, "%s %s %s\n", name, pg_role_name(role), verifier);
}

mr_status pg_users_file_set(const char *path, const char *name, pg_role role,
                            const pg_scram_verifier *v, const char *databases, mr_error *err) {
  char list[USER_DATABASES_MAX];
  if (!list_form(databases, list, sizeof list))
    return mr_fail(err, MR_ERR_INVALID, "databases: * or names separated by commas, no blanks");
  if (name[0] == '\0' || name[0] == '#' || strlen(name) >= USER_NAME_MAX ||
      strpbrk(name, " \t\r\n") != NULL)
    return mr_fail(err, MR_ERR_INVALID,
                   "a user name is 1 to %d bytes, without blanks, not starting with '#'",
                   USER_NAME_MAX - 1);
  char vtext[256];
  mr_status rc = pg_scram_verifier_format(v, vtext, sizeof vtext, err);
  if (rc)
    return rc;
  /* the existing file must load (a file it could not read back would be
   * worse than none); its lines are kept as they are but for name's */
  FILE *in = fopen(path, "r");
  if (in == NULL && errno != ENOENT)
    return mr_fail(err, MR_ERR_IO, "cannot read the users file %s: %s", path, strerror(errno));
  if (in) {
    pg_user *users;
    size_t n;
    rc = parse_file(path, &users, &n, err);
    free(users);
    if (rc) {
      fclose(in);
      return rc;
    }
  }
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
    if (in)
      fclose(in);
    return mr_fail(err, MR_ERR_INVALID, "users file path too long");
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (out == NULL) {
    rc = mr_fail(err, MR_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    if (fd >= 0)
      close(fd);
    if (in)
      fclose(in);
    return rc;
  }
  bool replaced = false;
  char line[1024];
  while (in && fgets(line, sizeof line, in)) {
    char first[USER_NAME_MAX + 1];
    if (sscanf(line, " %128s", first) == 1 && first[0] != '#' && strcmp(first, name) == 0) {
      write_line(out, name, role, vtext, databases);
      replaced = true;
    } else {
      fputs(line, out);
    }
  }
  if (!replaced)
    write_line(out, name, role, vtext, databases);
  if (in)
    fclose(in);
  bool ok = fflush(out) == 0 && fsync(fileno(out)) == 0;
  ok = fclose(out) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    rc = mr_fail(err, MR_ERR_IO, "cannot write the users file %s: %s", path, strerror(errno));
    unlink(tmp);
    return rc;
  }
  return MR_OK;
}
