/*
 * user.c — `moraine user add NAME --role read|write --users-file FILE`:
 * asks for a password (twice, without echo, on a terminal; else one line of
 * standard input), turns it into a SCRAM-SHA-256 verifier with a fresh salt
 * and sets NAME's line in the users file (pg_users.h). The password never
 * reaches the disk, the command line or the log.
 */
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cli/cli.h"
#include "pgwire/pg_users.h"

static const char user_usage[] =
    "usage: moraine user add NAME --role read|write --users-file FILE [--databases LIST]\n"
    "  Sets NAME's line in FILE (created if missing, mode 0600): the role and a\n"
    "  SCRAM-SHA-256 verifier of a password read from the terminal (asked twice,\n"
    "  not echoed) or from the first line of standard input. `moraine serve\n"
    "  --users-file FILE` reads it; SIGHUP makes a running server reload it.\n"
    "  read: attach, query and time travel; write: everything a client may do.\n"
    "  --databases a,b: the only database names (catalogs) NAME may connect to\n"
    "  (default *, all).\n";

/* One line from stdin into buf, without its line ending; prompt (on a
 * terminal, echo off) when prompt is non-NULL. false at EOF or error. */
static bool read_secret(const char *prompt, char *buf, size_t cap) {
  bool tty = isatty(STDIN_FILENO);
  struct termios old, quiet;
  if (tty && prompt) {
    fputs(prompt, stderr);
    fflush(stderr);
    if (tcgetattr(STDIN_FILENO, &old) == 0) {
      quiet = old;
      quiet.c_lflag &= ~(tcflag_t)ECHO;
      tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
  }
  bool ok = fgets(buf, (int)cap, stdin) != NULL;
  if (tty && prompt) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fputc('\n', stderr);
  }
  if (ok)
    buf[strcspn(buf, "\r\n")] = '\0';
  return ok;
}

int cli_user(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(user_usage, stdout);
    return 0;
  }
  if (argc < 2 || strcmp(argv[1], "add") != 0) {
    fprintf(stderr, "moraine: user: want 'moraine user add NAME --role read|write --users-file "
                    "FILE' (see moraine user --help)\n");
    return 2;
  }
  const char *name = NULL, *role_text = NULL, *path = NULL, *databases = NULL;
  for (int i = 2; i < argc; i++) {
    const char **slot = strcmp(argv[i], "--role") == 0         ? &role_text
                        : strcmp(argv[i], "--users-file") == 0 ? &path
                        : strcmp(argv[i], "--databases") == 0  ? &databases
                                                               : NULL;
    if (slot && i + 1 < argc) {
      *slot = argv[++i];
    } else if (slot == NULL && argv[i][0] != '-' && name == NULL) {
      name = argv[i];
    } else {
      fprintf(stderr, "moraine: user add: unexpected '%s' (see moraine user --help)\n", argv[i]);
      return 2;
    }
  }
  mr_error err;
  pg_role role;
  if (name == NULL || role_text == NULL || path == NULL) {
    fprintf(stderr, "moraine: user add: NAME, --role and --users-file are all needed\n");
    return 2;
  }
  if (pg_role_parse(role_text, &role, &err) != MR_OK) {
    fprintf(stderr, "moraine: user add: %s\n", err.msg);
    return 2;
  }
  char pw[256], again[256];
  char prompt[200];
  snprintf(prompt, sizeof prompt, "password for %s: ", name);
  int status = 1;
  if (!read_secret(prompt, pw, sizeof pw) || pw[0] == '\0') {
    fprintf(stderr, "moraine: user add: no password given\n");
    goto out;
  }
  if (isatty(STDIN_FILENO) &&
      (!read_secret("again: ", again, sizeof again) || strcmp(pw, again) != 0)) {
    fprintf(stderr, "moraine: user add: the passwords differ; nothing written\n");
    goto out;
  }
  pg_scram_verifier v;
  if (pg_scram_verifier_make(pw, &v, &err) != MR_OK ||
      pg_users_file_set(path, name, role, &v, databases, &err) != MR_OK) {
    fprintf(stderr, "moraine: user add: %s\n", err.msg);
    goto out;
  }
  fprintf(stderr, "moraine: user %s (%s) set in %s\n", name, pg_role_name(role), path);
  status = 0;
out:
  OPENSSL_cleanse(pw, sizeof pw);
  OPENSSL_cleanse(again, sizeof again);
  return status;
}
