/*
 * main.c — the moraine command line: argument parsing and dispatch only.
 *
 * Contract (scripts and tests rely on it): logs go to stderr; a failure
 * exits non-zero after one line "moraine: <reason>"; --help and --version
 * print to stdout and exit 0.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sql/sql_admit.h"
#include "mr_version.h"

static const char usage[] =
    "usage: moraine <command> [options]\n"
    "\n"
    "A DuckLake catalog stored in SlateDB, served over the PostgreSQL protocol.\n"
    "\n"
    "commands:\n"
    "  serve [--store URL] [--listen HOST:PORT] [--password-file FILE]\n"
    "        [--max-connections N] [--auth-timeout SECONDS]\n"
    "        [--shutdown-timeout SECONDS] [--log-level error|warn|info|debug]\n"
    "        [--memory-limit SIZE] [--cache-dir DIR]\n"
    "        serve the catalog to DuckDB + DuckLake clients\n"
    "        (defaults: --store file://./moraine-data --listen 127.0.0.1:5433\n"
    "        --max-connections 256 --auth-timeout 10 --shutdown-timeout 10\n"
    "        --log-level info; see moraine serve --help)\n"
    "  info STORE [--json]\n"
    "        a store's format, creator, head snapshot and time, maintenance (read-only)\n"
    "  census STORE [--json]\n"
    "        keys and bytes per subspace and kind (read-only, one full scan)\n"
    "  verify STORE [--json] [--changelog-window N]\n"
    "        check every key, value, directory entry, the changelog and the head\n"
    "        (read-only; exit 0 clean, 3 damaged, 1 could not verify)\n"
    "  snapshots STORE [--json]\n"
    "        every snapshot: id, time, schema version, changes, author, message\n"
    "  show STORE [--at SNAPSHOT|TIMESTAMP] [TABLE] [--json]\n"
    "        the catalog at a snapshot: schemas, tables, columns, files, inlined rows\n"
    "  watch STORE [--from SNAPSHOT] [--interval-ms N]\n"
    "        follow the writer: each commit as a JSON line, until SIGINT/SIGTERM\n"
    "  import SOURCE STORE [--extension-dir DIR] [--metadata-schema NAME] [--json]\n"
    "        adopt a DuckLake catalog (DuckDB file, SQLite, PostgreSQL) into a new store\n"
    "  export STORE [--at SNAPSHOT] FILE\n"
    "        write the catalog into a new DuckDB file that stock DuckLake attaches\n"
    "  migrate STORE [--json] [--step-records N]\n"
    "        bring an older layout up to this build's, in resumable steps\n"
    "  branch STORE --at SNAPSHOT NEW_STORE [--json]\n"
    "        a zero-copy branch of the catalog at a snapshot, serving on its own\n"
    "  user add NAME --role read|write --users-file FILE\n"
    "        add or change a user of --users-file (password asked, never stored)\n"
    "  admission-table\n"
    "        print the statements, functions and relations clients may use\n"
    "        (Markdown; docs/security.md holds it)\n"
    "\n"
    "options:\n"
    "  -h, --help      show this help and exit\n"
    "  -V, --version   show the version and exit\n"
    "\n"
    "Store URLs: file://FOLDER, memory://, s3://BUCKET/PREFIX (AWS_* variables).\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    fprintf(stderr, "moraine: no command given\n");
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
    printf("moraine %s\n", MORAINE_VERSION);
    return 0;
  }
  if (strcmp(cmd, "admission-table") == 0) {
    sql_admit_write_markdown(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
  }
  if (strcmp(cmd, "serve") == 0)
    return cli_serve(argc - 1, argv + 1);
  if (strcmp(cmd, "user") == 0)
    return cli_user(argc - 1, argv + 1);
  if (strcmp(cmd, "info") == 0 || strcmp(cmd, "census") == 0)
    return cli_inspect(cmd, argc - 1, argv + 1);
  if (strcmp(cmd, "verify") == 0)
    return cli_verify(argc - 1, argv + 1);
  if (strcmp(cmd, "snapshots") == 0)
    return cli_snapshots(argc - 1, argv + 1);
  if (strcmp(cmd, "show") == 0)
    return cli_show(argc - 1, argv + 1);
  if (strcmp(cmd, "watch") == 0)
    return cli_watch(argc - 1, argv + 1);
  if (strcmp(cmd, "import") == 0)
    return cli_import(argc - 1, argv + 1);
  if (strcmp(cmd, "export") == 0)
    return cli_export(argc - 1, argv + 1);
  if (strcmp(cmd, "migrate") == 0)
    return cli_migrate(argc - 1, argv + 1);
  if (strcmp(cmd, "branch") == 0)
    return cli_branch(argc - 1, argv + 1);
  fprintf(stderr, "moraine: unknown command '%s' (see moraine --help)\n", cmd);
  return 2;
}
