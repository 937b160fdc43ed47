/*
 * serve.c — `moraine serve`: parses the serve options and runs the server.
 *
 * The pgwire server is not built yet (issue: moraine serve); until it lands
 * this command validates its options and says so, exiting non-zero.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char serve_usage[] =
    "usage: moraine serve [--store URL] [--listen HOST:PORT] [--password-file FILE]\n"
    "  --store URL           catalog store (default file://./moraine-data)\n"
    "  --listen HOST:PORT    address to listen on (default 127.0.0.1:5433)\n"
    "  --password-file FILE  require SCRAM-SHA-256 with the password in FILE\n";

int cli_serve(int argc, char **argv) {
  const char *store = "file://./moraine-data";
  const char *listen_addr = "127.0.0.1:5433";
  const char *password_file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(serve_usage, stdout);
      return 0;
    }
    const char **slot = strcmp(a, "--store") == 0           ? &store
                        : strcmp(a, "--listen") == 0        ? &listen_addr
                        : strcmp(a, "--password-file") == 0 ? &password_file
                                                            : NULL;
    if (slot == NULL) {
      fprintf(stderr, "moraine: serve: unknown option '%s' (see moraine serve --help)\n", a);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "moraine: serve: %s needs a value\n", a);
      return 2;
    }
    *slot = argv[++i];
  }
  (void)password_file;
  fprintf(stderr, "moraine: serve: the server is not built yet (store %s, listen %s)\n", store,
          listen_addr);
  return 1;
}
