/*
 * sql_lex.h — PostgreSQL-lexer views of a query string: statement splitting,
 * tokens, statement classification, and the COPY / SET / target-table
 * parsers the session needs. Built on libpg_query's scanner, so quoting,
 * dollar quotes and comments are handled exactly as PostgreSQL does.
 *
 * Nothing here touches DuckDB. Every returned string is heap memory owned by
 * the caller (free()), unless a comment says otherwise.
 */
#ifndef MR_SQL_LEX_H
#define MR_SQL_LEX_H

#include <stdbool.h>
#include <stddef.h>

#include "sql/sql.h"

/* One token: its libpg_query token kind and byte range [start, end). */
typedef struct sql_tok {
  int kind;
  int start;
  int end;
  bool keyword; /* a reserved or unreserved keyword (compare by text) */
} sql_tok;

typedef struct sql_toks {
  sql_tok *v;
  size_t n;
} sql_toks;

/* Tokenizes sql (comments dropped). 42601 on a lexical error. */
mr_status sql_lex_scan(const char *sql, sql_toks *out, sql_error *err) MR_MUST_CHECK;
void sql_toks_free(sql_toks *t);

/* Token i's text equals word, case-insensitively (false past the end). */
bool sql_tok_is(const char *sql, const sql_toks *t, size_t i, const char *word);
/* Token kinds for punctuation, as libpg_query numbers them. */
bool sql_tok_punct(const sql_toks *t, size_t i, char c);

/* The statements of a query string, in order; blank ones dropped. */
typedef struct sql_stmts {
  char **v;
  size_t n;
} sql_stmts;
mr_status sql_lex_split(const char *sql, sql_stmts *out, sql_error *err) MR_MUST_CHECK;
void sql_stmts_free(sql_stmts *s);

/* What kind of statement this is, from its leading words. */
typedef enum sql_kind {
  SQL_KIND_OTHER = 0, /* run by DuckDB (SELECT, DDL, CALL, ...) */
  SQL_KIND_BEGIN,
  SQL_KIND_COMMIT,
  SQL_KIND_ROLLBACK,
  SQL_KIND_SET,
  SQL_KIND_SHOW,
  SQL_KIND_RESET,
  SQL_KIND_DISCARD,
  SQL_KIND_COPY,
  SQL_KIND_DML,         /* INSERT / UPDATE / DELETE, also under WITH */
  SQL_KIND_DDL,         /* CREATE / DROP / ALTER / COMMENT / TRUNCATE */
  SQL_KIND_NOOP,        /* LISTEN, UNLISTEN, SET TRANSACTION ... */
  SQL_KIND_DEALLOCATE,  /* DEALLOCATE name | ALL: the protocol layer's statements */
  SQL_KIND_UNSUPPORTED, /* SAVEPOINT, RELEASE, PREPARE TRANSACTION, ... */
} sql_kind;

sql_kind sql_lex_classify(const char *sql, const sql_toks *t);

/* The command tag PostgreSQL gives a DDL statement ("CREATE TABLE", ...). */
char *sql_lex_ddl_tag(const char *sql, const sql_toks *t);

/* BEGIN / START TRANSACTION: is READ ONLY requested? */
bool sql_lex_begin_read_only(const char *sql, const sql_toks *t);

/* SET: name (lower case) and value (quotes removed; "DEFAULT" -> NULL value).
 * SET TRANSACTION / SET SESSION CHARACTERISTICS give name NULL. */
mr_status sql_lex_parse_set(const char *sql, const sql_toks *t, char **name, char **value,
                            sql_error *err) MR_MUST_CHECK;
/* SHOW / RESET: the name (lower case), "all" for ALL. */
mr_status sql_lex_parse_name_after(const char *sql, const sql_toks *t, size_t first, char **name,
                                   sql_error *err) MR_MUST_CHECK;

/* DML target: the main INSERT/UPDATE/DELETE's table (schema NULL when not
 * qualified), and whether the statement already has a top-level RETURNING. */
typedef struct sql_dml_target {
  char *schema;
  char *table;
  int op; /* SQL_CHANGE_INSERT / _UPDATE / _DELETE */
  bool has_returning;
  char **set_cols; /* an UPDATE's assigned columns (planner only; else NULL) */
  size_t nset_cols;
} sql_dml_target;
mr_status sql_lex_dml_target(const char *sql, const sql_toks *t, sql_dml_target *out,
                             sql_error *err) MR_MUST_CHECK;
void sql_dml_target_free(sql_dml_target *d);

/* COPY statements. */
typedef enum sql_copy_format { SQL_COPY_TEXT = 0, SQL_COPY_BINARY, SQL_COPY_CSV } sql_copy_format;
typedef struct sql_copy_stmt {
  bool from_stdin; /* COPY t FROM STDIN; else COPY ... TO STDOUT */
  char *query;     /* TO STDOUT: the SELECT to run */
  char *schema;    /* FROM STDIN: target (schema may be NULL) */
  char *table;
  char **cols; /* FROM STDIN: column list (ncols 0: all) */
  size_t ncols;
  sql_copy_format format;
  char *null_str; /* text/csv NULL marker (default \N, csv: empty) */
  char delim;     /* text: tab, csv: ',' */
  bool header;    /* csv HEADER */
} sql_copy_stmt;
mr_status sql_lex_parse_copy(const char *sql, const sql_toks *t, sql_copy_stmt *out,
                             sql_error *err) MR_MUST_CHECK;
void sql_copy_stmt_free(sql_copy_stmt *c);

/*
 * The PostgreSQL -> DuckDB rewrite, token by token (see sql_rewrite.c):
 *  - `pg_catalog.x` loses its qualifier, so x resolves to moraine's
 *    pg_catalog relations and functions first on the search path;
 *  - the type name bytea becomes pg_bytea (DuckDB's BLOB with PostgreSQL's
 *    input format, so '\x0102' means bytes 01 02 exactly where the target
 *    is bytea);
 *  - ctid becomes rowid (tid (p,o) <-> rowid p*65536+o; `SELECT ctid` keeps
 *    the column name ctid so the result is typed tid), '(p,o)' literals and
 *    `::tid` casts follow.
 * Returns a new string (never NULL on MR_OK).
 */
mr_status sql_rewrite(const char *sql, char **out, sql_error *err) MR_MUST_CHECK;

/* Quotes an identifier for DuckDB ("a""b"). Caller frees. */
char *sql_quote_ident(const char *name);

#endif /* MR_SQL_LEX_H */
