/*
 * pg_users.h — who may connect and what they may do: the users file of
 * `--users-file`, or the one password of `--password-file`, behind a single
 * lookup that SIGHUP can reload.
 *
 * The users file: one user per line, fields separated by blanks,
 *   NAME ROLE VERIFIER [DATABASES]
 * ROLE is `read` (attach, query, time travel; every write fails 42501) or
 * `write`; VERIFIER is a SCRAM-SHA-256 verifier exactly as PostgreSQL keeps
 * it in pg_authid.rolpassword (pg_auth.h), so one can be pasted from a
 * PostgreSQL server. DATABASES, when given, is a comma-separated list of the
 * database names (catalogs) the user may connect to, `*` for all (the
 * default); a connection to any other is refused with 42501. Blank lines and lines starting with '#' are ignored; a
 * repeated name, an unknown role or a malformed verifier fails the load
 * with the line number. `moraine user add` writes lines (pg_users_file_set).
 *
 * With `--password-file` every user name is accepted with that password
 * and the write role (moraine's behaviour before users existed).
 *
 * Threads: pg_users_find and pg_users_reload may run concurrently; a reload
 * that fails keeps the users loaded before.
 */
#ifndef MR_PG_USERS_H
#define MR_PG_USERS_H

#include <stdbool.h>

#include "base/mr_error.h"
#include "pgwire/pg_auth.h"

typedef enum pg_role { PG_ROLE_READ = 0, PG_ROLE_WRITE = 1 } pg_role;

/* "read" / "write". */
const char *pg_role_name(pg_role r);
mr_status pg_role_parse(const char *s, pg_role *out, mr_error *err) MR_MUST_CHECK;

typedef struct pg_users pg_users;

mr_status pg_users_open_file(const char *path, pg_users **out, mr_error *err) MR_MUST_CHECK;
mr_status pg_users_open_password(const char *password, pg_users **out, mr_error *err) MR_MUST_CHECK;
/* Re-reads the users file (a password never changes: MR_OK). */
mr_status pg_users_reload(pg_users *u, mr_error *err) MR_MUST_CHECK;
void pg_users_free(pg_users *u);

/* name's verifier and role; false when there is no such user — *v is then
 * a verifier no password matches, so that the exchange can run to its end
 * and fail like a wrong password (an unknown name is not revealed). */
bool pg_users_find(pg_users *u, const char *name, pg_scram_verifier *v, pg_role *role);
/* May name connect to database? (false for an unknown name) */
bool pg_users_may_use(pg_users *u, const char *name, const char *database);

/* Sets name's line in the users file at path (added, or replaced in
 * place), written to a temporary file and renamed over, mode 0600.
 * databases: NULL or "*" for all, else a comma-separated list. */
mr_status pg_users_file_set(const char *path, const char *name, pg_role role,
                            const pg_scram_verifier *v, const char *databases,
                            mr_error *err) MR_MUST_CHECK;

#endif /* MR_PG_USERS_H */
