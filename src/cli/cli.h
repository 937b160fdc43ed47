/*
 * cli.h — the subcommands of the moraine binary. Each takes the argument
 * vector starting at its own name and returns the process exit code.
 */
#ifndef MR_CLI_H
#define MR_CLI_H

int cli_serve(int argc, char **argv);
/* `moraine user add ...` (user.c). */
int cli_user(int argc, char **argv);
/* `moraine info` / `moraine census` (inspect.c); cmd names which. */
int cli_inspect(const char *cmd, int argc, char **argv);
/* `moraine verify` (verify.c). */
int cli_verify(int argc, char **argv);
/* `moraine snapshots` (snapshots.c), `moraine show` (show.c). */
int cli_snapshots(int argc, char **argv);
int cli_show(int argc, char **argv);
/* `moraine watch` (watch.c). */
int cli_watch(int argc, char **argv);
/* `moraine import` (import.c). */
int cli_import(int argc, char **argv);
/* `moraine export` (export.c). */
int cli_export(int argc, char **argv);
/* `moraine migrate` (migrate.c). */
int cli_migrate(int argc, char **argv);
/* `moraine branch` (branch.c). */
int cli_branch(int argc, char **argv);

#endif
