/*
 * sql_pgcatalog.c — the catalog-introspection answers: moraine's pg_catalog
 * views and macros (see sql_pgcatalog.h), and the pg_bytea type whose casts
 * give '\x..' literals PostgreSQL's bytea meaning.
 *
 * The views are written for the exact queries DuckDB's postgres extension
 * sends (postgres_schema_set / table_set / type_set / index_set on the v1.5
 * line) and for psql's \d family (the catalogs of objects moraine has
 * none of are present and empty); they are not a complete pg_catalog.
 */
#include "sql/sql_pgcatalog.h"
#include "sql/sql_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_types.h"
#include "sql/sql_util.h"

/* ---- pg_bytea ------------------------------------------------------------ */

static void set_null(duckdb_vector out, idx_t row) {
  duckdb_vector_ensure_validity_writable(out);
  duckdb_validity_set_row_invalid(duckdb_vector_get_validity(out), row);
}

/* VARCHAR -> pg_bytea: PostgreSQL bytea input (hex '\x..' or escape). */
static bool cast_text_to_bytea(duckdb_function_info info, idx_t count, duckdb_vector input,
                               duckdb_vector output) {
  duckdb_string_t *in = duckdb_vector_get_data(input);
  uint64_t *valid = duckdb_vector_get_validity(input);
  sql_strbuf b = {0};
  bool ok = true;
  for (idx_t i = 0; i < count; i++) {
    if (valid && !duckdb_validity_row_is_valid(valid, i)) {
      set_null(output, i);
      continue;
    }
    const char *p = duckdb_string_t_data(&in[i]);
    uint32_t n = duckdb_string_t_length(in[i]);
    sql_strbuf_reset(&b);
    if (!pg_bytea_decode(p, n, &b) || b.failed) {
      duckdb_cast_function_set_row_error(info, "invalid input syntax for type bytea", i, output);
      ok = false;
      continue;
    }
    duckdb_vector_assign_string_element_len(output, i, b.data ? b.data : "", b.len);
  }
  sql_strbuf_free(&b);
  return ok;
}

/* BLOB <-> pg_bytea: same bytes. */
static bool cast_same_bytes(duckdb_function_info info, idx_t count, duckdb_vector input,
                            duckdb_vector output) {
  duckdb_string_t *in = duckdb_vector_get_data(input);
  uint64_t *valid = duckdb_vector_get_validity(input);
  for (idx_t i = 0; i < count; i++) {
    if (valid && !duckdb_validity_row_is_valid(valid, i)) {
      set_null(output, i);
      continue;
    }
    duckdb_vector_assign_string_element_len(output, i, duckdb_string_t_data(&in[i]),
                                            duckdb_string_t_length(in[i]));
  }
  return true;
}

/* pg_bytea -> VARCHAR: PostgreSQL's output '\x0102'. */
static bool cast_bytea_to_text(duckdb_function_info info, idx_t count, duckdb_vector input,
                               duckdb_vector output) {
  duckdb_string_t *in = duckdb_vector_get_data(input);
  uint64_t *valid = duckdb_vector_get_validity(input);
  sql_strbuf b = {0};
  for (idx_t i = 0; i < count; i++) {
    if (valid && !duckdb_validity_row_is_valid(valid, i)) {
      set_null(output, i);
      continue;
    }
    sql_strbuf_reset(&b);
    pg_bytea_encode_hex(&b, (const uint8_t *)duckdb_string_t_data(&in[i]),
                        duckdb_string_t_length(in[i]));
    duckdb_vector_assign_string_element_len(output, i, b.data ? b.data : "", b.len);
  }
  sql_strbuf_free(&b);
  return !b.failed;
}

static mr_status add_cast(duckdb_connection con, duckdb_logical_type from, duckdb_logical_type to,
                          duckdb_cast_function_t fn, int64_t cost, sql_error *err) {
  duckdb_cast_function cf = duckdb_create_cast_function();
  duckdb_cast_function_set_source_type(cf, from);
  duckdb_cast_function_set_target_type(cf, to);
  duckdb_cast_function_set_function(cf, fn);
  if (cost >= 0)
    duckdb_cast_function_set_implicit_cast_cost(cf, cost);
  duckdb_state st = duckdb_register_cast_function(con, cf);
  duckdb_destroy_cast_function(&cf);
  if (st != DuckDBSuccess)
    return sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR,
                    "cannot register a pg_bytea cast");
  return MR_OK;
}

static mr_status install_bytea(duckdb_connection con, sql_error *err) {
  duckdb_logical_type bytea = duckdb_create_logical_type(DUCKDB_TYPE_BLOB);
  duckdb_logical_type_set_alias(bytea, "pg_bytea");
  duckdb_logical_type blob = duckdb_create_logical_type(DUCKDB_TYPE_BLOB);
  duckdb_logical_type text = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
  mr_status rc = MR_OK;
  if (duckdb_register_logical_type(con, bytea, NULL) != DuckDBSuccess)
    rc = sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "cannot register type pg_bytea");
  if (!rc)
    rc = add_cast(con, text, bytea, cast_text_to_bytea, 1, err);
  if (!rc)
    rc = add_cast(con, blob, bytea, cast_same_bytes, 1, err);
  if (!rc)
    rc = add_cast(con, bytea, blob, cast_same_bytes, 1, err);
  if (!rc)
    rc = add_cast(con, bytea, text, cast_bytea_to_text, -1, err);
  duckdb_destroy_logical_type(&bytea);
  duckdb_destroy_logical_type(&blob);
  duckdb_destroy_logical_type(&text);
  return rc;
}

/* ---- views and macros --------------------------------------------------- */

static mr_status run(duckdb_connection con, const char *sql, sql_error *err) {
  duckdb_result r;
  if (duckdb_query(con, sql, &r) != DuckDBSuccess) {
    sql_fail(err, MR_ERR_INVALID, SQLSTATE_INTERNAL_ERROR, "installing pg_catalog: %s",
             duckdb_result_error(&r));
    duckdb_destroy_result(&r);
    return MR_ERR_INVALID;
  }
  duckdb_destroy_result(&r);
  return MR_OK;
}

/* Text of the catalog, with @DB@ standing for the catalog database name
 * (a string literal), @NAME@ for the name clients know it by and @VERSION@
 * for version()'s answer. */
static const char *const catalog_sql[] = {
    "CREATE SCHEMA IF NOT EXISTS " SQL_PGCAT_DB ".main",

    /* namespaces: the catalog database's schemas, plus pg_catalog (oid 11) */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_namespace AS "
    "SELECT 11::BIGINT AS oid, 'pg_catalog' AS nspname, 10::BIGINT AS nspowner, NULL::VARCHAR AS "
    "nspacl "
    "UNION ALL "
    "SELECT oid::BIGINT, schema_name, 10::BIGINT, NULL::VARCHAR FROM duckdb_schemas() "
    "WHERE database_name = @DB@",

    /* tables come from moraine's relation directory (sql_relcache.h), not
     * duckdb_tables(): a lookup then costs no row per table of the engine.
     * The catalog database holds no views (the planner admits no CREATE
     * VIEW, the load creates tables only), so none are listed: reading
     * duckdb_views() cost every pg_class reference ~0.4 ms (it renders the
     * SQL of every view of every database, moraine's own pg_catalog's too).
     * reltuples -1 is PostgreSQL's "never analyzed"; there are no indexes
     * as relations (pg_index is empty) and no CHECK constraints */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_class AS "
    "SELECT r.oid, r.relname, n.oid AS relnamespace, "
    "'r' AS relkind, 0::INTEGER AS relpages, -1::FLOAT AS reltuples, "
    "false AS relhasindex, r.oid AS xmin, 10::BIGINT AS relowner, "
    "0::BIGINT AS reltype, 2::BIGINT AS relam, r.oid AS relfilenode, "
    "'p' AS relpersistence, r.relnatts, false AS relispartition, "
    "false AS relhasrules, false AS relhastriggers, false AS relrowsecurity, "
    "false AS relforcerowsecurity, 0::SMALLINT AS relchecks, "
    "NULL::VARCHAR[] AS relacl, NULL::VARCHAR[] AS reloptions, 0::BIGINT AS reltablespace, "
    "0::BIGINT AS reltoastrelid, false AS relhassubclass, 0::BIGINT AS reloftype, "
    "'d' AS relreplident, NULL::VARCHAR AS relpartbound "
    "FROM moraine_pg_class() r JOIN " SQL_PGCAT_DB ".main.pg_namespace n ON n.nspname = r.nspname",

    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_type (oid BIGINT, typname VARCHAR, typnamespace BIGINT, "
    "typlen SMALLINT, typtype VARCHAR, typcategory VARCHAR, typrelid BIGINT, typelem BIGINT, "
    "typarray BIGINT, typbasetype BIGINT, typtypmod INTEGER, typnotnull BOOLEAN, typowner BIGINT, "
    "typisdefined BOOLEAN, typdelim VARCHAR, typndims INTEGER, typcollation BIGINT)",

    /* columns from the relation directory; types by pg_oid_of_duck_name */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_attribute AS "
    "SELECT attrelid, attname, atttypid, attnum, atttypmod, "
    "0::INTEGER AS attndims, attnotnull, false AS attisdropped, "
    "atthasdef, -1::SMALLINT AS attlen, "
    "'' AS attidentity, '' AS attgenerated, 0::BIGINT AS attcollation, "
    "false AS attislocal, -1::INTEGER AS attstattarget, 'p' AS attstorage, "
    "'' AS attcompression "
    "FROM moraine_pg_attribute()",

    /* keys from the relation directory too: moraine's tables have no
     * foreign keys or CHECK constraints (the planner admits neither) */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_constraint AS "
    "SELECT oid, conname, connamespace, contype, conrelid, conkey, 0::BIGINT AS confrelid, "
    "false AS condeferrable, false AS condeferred, true AS convalidated, 0::BIGINT AS conindid "
    "FROM moraine_pg_constraint()",

    /* comments: the engine's tables never have any. DuckDB keeps a comment
     * only from COMMENT ON, which moraine does not admit (test_sql_plan
     * pins the refusal), and the start-up load creates tables without one;
     * DuckLake's own comments live in ducklake_tag. So the relation is
     * empty by construction, and a constant: the postgres extension joins
     * it twice into every table lookup, and reading it from
     * duckdb_tables() and duckdb_columns() cost a scan of every column of
     * every table each time (~0.2 s per lookup at 1,000 tables) */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_description AS "
    "SELECT NULL::BIGINT AS objoid, NULL::BIGINT AS classoid, NULL::INTEGER AS objsubid, "
    "NULL::VARCHAR AS description WHERE false",

    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_enum (oid BIGINT, enumtypid BIGINT, "
    "enumsortorder FLOAT, enumlabel VARCHAR)",

    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_indexes AS "
    "SELECT schema_name AS schemaname, table_name AS tablename, index_name AS indexname, "
    "NULL::VARCHAR AS tablespace, sql AS indexdef FROM duckdb_indexes() WHERE database_name = @DB@",

    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_tables AS "
    "SELECT nspname AS schemaname, relname AS tablename, 'moraine' AS tableowner, "
    "NULL::VARCHAR AS tablespace, false AS hasindexes, false AS hasrules, "
    "false AS hastriggers, false AS rowsecurity FROM moraine_pg_class()",

    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_views AS "
    "SELECT schema_name AS schemaname, view_name AS viewname, 'moraine' AS viewowner, "
    "sql AS definition FROM duckdb_views() WHERE database_name = @DB@ AND NOT internal",

    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_database AS "
    "SELECT 1::BIGINT AS oid, @NAME@ AS datname, 10::BIGINT AS datdba, 6 AS encoding, "
    "'C' AS datcollate, 'C' AS datctype, false AS datistemplate, true AS datallowconn, "
    "-1 AS datconnlimit, NULL::VARCHAR[] AS datacl, 'c' AS datlocprovider, "
    "NULL::VARCHAR AS daticulocale",

    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_roles AS "
    "SELECT 10::BIGINT AS oid, 'moraine' AS rolname, true AS rolsuper, true AS rolinherit, "
    "true AS rolcreaterole, true AS rolcreatedb, true AS rolcanlogin, false AS rolreplication, "
    "-1 AS rolconnlimit, NULL::TIMESTAMP AS rolvaliduntil, false AS rolbypassrls",

    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_settings (name VARCHAR, setting VARCHAR, "
    "unit VARCHAR, category VARCHAR, short_desc VARCHAR, context VARCHAR, vartype VARCHAR, "
    "source VARCHAR)",
    "INSERT INTO " SQL_PGCAT_DB ".main.pg_settings VALUES "
    "('server_version', @VERSION_NUMBER@, NULL, 'Preset Options', 'server version', 'internal', "
    "'string', 'default'), "
    "('server_encoding', 'UTF8', NULL, 'Preset Options', 'encoding', 'internal', 'string', "
    "'default'), "
    "('client_encoding', 'UTF8', NULL, 'Client', 'encoding', 'user', 'string', 'default'), "
    "('standard_conforming_strings', 'on', NULL, 'Compatibility', '', 'user', 'bool', "
    "'default'), "
    "('integer_datetimes', 'on', NULL, 'Preset Options', '', 'internal', 'bool', 'default'), "
    "('DateStyle', 'ISO, MDY', NULL, 'Client', '', 'user', 'string', 'default'), "
    "('TimeZone', 'UTC', NULL, 'Client', '', 'user', 'string', 'default'), "
    "('max_identifier_length', '63', NULL, 'Preset Options', '', 'internal', 'integer', "
    "'default'), "
    "('max_connections', '100', NULL, 'Connections', '', 'postmaster', 'integer', 'default')",

    /* functions PostgreSQL has and DuckDB lacks or answers differently */
    "CREATE MACRO " SQL_PGCAT_DB ".main.version() AS @VERSION@",
    "CREATE MACRO " SQL_PGCAT_DB ".main.to_regclass(name) AS ("
    "SELECT max(CASE WHEN nspname = 'public' THEN relname "
    "ELSE nspname || '.' || relname END) FROM moraine_pg_class() "
    "WHERE relname = name OR nspname || '.' || relname = name)",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_my_temp_schema() AS 0::BIGINT",
    /* '(p,o)' (quotes and spaces allowed) -> the rowid sql_rewrite maps it to */
    "CREATE MACRO " SQL_PGCAT_DB ".main.mr_tid_rowid(x) AS "
    "CAST(regexp_extract(x, '(\\d+)\\s*,\\s*(\\d+)', 1) AS BIGINT) * " PG_TID_PER_BLOCK_TEXT " + "
    "CAST(regexp_extract(x, '(\\d+)\\s*,\\s*(\\d+)', 2) AS BIGINT)",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_is_in_recovery() AS false",
    "CREATE MACRO " SQL_PGCAT_DB ".main.format_type(type_oid, typemod) AS ("
    "SELECT max(typname) FROM " SQL_PGCAT_DB ".main.pg_type WHERE oid = type_oid)",
    "CREATE MACRO " SQL_PGCAT_DB ".main.obj_description(o, c) AS ("
    "SELECT max(description) FROM " SQL_PGCAT_DB ".main.pg_description "
    "WHERE objoid = o AND objsubid = 0 AND c = 'pg_class')",
    "CREATE MACRO " SQL_PGCAT_DB ".main.col_description(o, n) AS ("
    "SELECT max(description) FROM " SQL_PGCAT_DB ".main.pg_description "
    "WHERE objoid = o AND objsubid = n)",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_userbyid(o) AS 'moraine'",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_encoding_to_char(e) AS 'UTF8'",
    "CREATE MACRO " SQL_PGCAT_DB ".main.current_user() AS 'moraine'",
    "CREATE MACRO " SQL_PGCAT_DB ".main.session_user() AS 'moraine'",
    /* DuckDB's would answer its own in-memory database's name */
    "CREATE MACRO " SQL_PGCAT_DB ".main.current_database() AS @NAME@",
    "CREATE MACRO " SQL_PGCAT_DB ".main.current_catalog() AS @NAME@",

    /* what psql's \d family reads besides the relations above: PostgreSQL's
     * catalogs of features moraine has none of (access methods other than
     * heap, indexes as relations, policies, publications, inheritance,
     * extended statistics, extensions, functions, role membership) are
     * present and empty, so its queries run and print what PostgreSQL
     * prints for a database without them */
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_am AS "
    "SELECT 2::BIGINT AS oid, 'heap' AS amname, 'heap_tableam_handler' AS amhandler, "
    "'t' AS amtype UNION ALL SELECT 403, 'btree', 'bthandler', 'i'",
    "CREATE VIEW " SQL_PGCAT_DB ".main.pg_attrdef AS "
    "SELECT (c.table_oid * 1000 + c.column_index)::BIGINT AS oid, r.oid AS adrelid, "
    "c.column_index::SMALLINT AS adnum, c.column_default AS adbin FROM duckdb_columns() c "
    "JOIN moraine_pg_class() r ON r.nspname = c.schema_name AND r.relname = c.table_name "
    "WHERE c.database_name = @DB@ AND c.column_default IS NOT NULL",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_collation (oid BIGINT, collname VARCHAR, "
    "collnamespace BIGINT, collowner BIGINT, collprovider VARCHAR, collisdeterministic BOOLEAN, "
    "collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_index (indexrelid BIGINT, indrelid BIGINT, "
    "indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN, indisprimary BOOLEAN, "
    "indisexclusion BOOLEAN, indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, "
    "indcheckxmin BOOLEAN, indisready BOOLEAN, indislive BOOLEAN, indisreplident BOOLEAN, "
    "indkey VARCHAR, indexprs VARCHAR, indpred VARCHAR)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_policy (oid BIGINT, polname VARCHAR, polrelid BIGINT, "
    "polcmd VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, "
    "polwithcheck VARCHAR)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_statistic_ext (oid BIGINT, stxrelid BIGINT, "
    "stxname VARCHAR, stxnamespace BIGINT, stxowner BIGINT, stxstattarget INTEGER, "
    "stxkeys SMALLINT[], stxkind VARCHAR[])",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_publication (oid BIGINT, pubname VARCHAR, "
    "pubowner BIGINT, puballtables BOOLEAN, pubinsert BOOLEAN, pubupdate BOOLEAN, "
    "pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_publication_namespace (oid BIGINT, pnpubid BIGINT, "
    "pnnspid BIGINT)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_publication_rel (oid BIGINT, prpubid BIGINT, "
    "prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[])",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_inherits (inhrelid BIGINT, inhparent BIGINT, "
    "inhseqno INTEGER, inhdetachpending BOOLEAN)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_auth_members (roleid BIGINT, member BIGINT, "
    "grantor BIGINT, admin_option BOOLEAN)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_extension (oid BIGINT, extname VARCHAR, "
    "extowner BIGINT, extnamespace BIGINT, extrelocatable BOOLEAN, extversion VARCHAR)",
    "CREATE TABLE " SQL_PGCAT_DB ".main.pg_proc (oid BIGINT, proname VARCHAR, "
    "pronamespace BIGINT, proowner BIGINT, prokind VARCHAR, prorettype BIGINT, "
    "pronargs SMALLINT)",
    /* reg* casts keep the number (PostgreSQL prints a name; psql only
     * compares them or reads them from catalogs that are empty here) */
    "CREATE TYPE " SQL_PGCAT_DB ".main.regclass AS BIGINT",
    "CREATE TYPE " SQL_PGCAT_DB ".main.regtype AS BIGINT",
    "CREATE TYPE " SQL_PGCAT_DB ".main.regnamespace AS BIGINT",
    /* 'name'::regclass (sql_rewrite): PostgreSQL's fixed oids for the
     * catalogs, else the oid of the table or view of that name */
    "CREATE MACRO " SQL_PGCAT_DB ".main.mr_regclass(name) AS "
    "CASE regexp_replace(name, '^pg_catalog\\.', '') "
    "WHEN 'pg_type' THEN 1247 WHEN 'pg_attribute' THEN 1249 WHEN 'pg_proc' THEN 1255 "
    "WHEN 'pg_class' THEN 1259 WHEN 'pg_database' THEN 1262 WHEN 'pg_constraint' THEN 2606 "
    "WHEN 'pg_namespace' THEN 2615 WHEN 'pg_extension' THEN 3079 "
    "ELSE (SELECT max(c.oid) FROM " SQL_PGCAT_DB ".main.pg_class c JOIN " SQL_PGCAT_DB
    ".main.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = name OR n.nspname || '.' || c.relname = name) END::BIGINT",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_expr(e, r) AS e, (e, r, pretty) AS e",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_viewdef(o) AS ("
    "SELECT max(sql) FROM duckdb_views() WHERE view_oid = o), (o, pretty) AS ("
    "SELECT max(sql) FROM duckdb_views() WHERE view_oid = o)",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_indexdef(o) AS NULL::VARCHAR, "
    "(o, col, pretty) AS NULL::VARCHAR",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_function_result(o) AS NULL::VARCHAR",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_function_arguments(o) AS NULL::VARCHAR",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_get_statisticsobjdef_columns(o) AS NULL::VARCHAR",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_relation_is_publishable(o) AS false",
    "CREATE MACRO " SQL_PGCAT_DB ".main.array_upper(a, d) AS "
    "CASE WHEN d = 1 AND len(a) > 0 THEN len(a) END",
    /* per-relation sizes: the catalog's rows live in the store, which does
     * not account them per table; PostgreSQL's answer for "unknown" */
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_table_size(o) AS NULL::BIGINT",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_relation_size(o) AS NULL::BIGINT, "
    "(o, fork) AS NULL::BIGINT",
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_total_relation_size(o) AS NULL::BIGINT",
    /* the whole catalog: its bytes in the store (mr_catalog_bytes, a
     * function of the engine); by name or by pg_database's oid */
    "CREATE MACRO " SQL_PGCAT_DB ".main.pg_database_size(d) AS "
    "CASE WHEN d::VARCHAR IN (@DB@, @NAME@, '1') THEN mr_catalog_bytes() "
    "ELSE error('database \"' || d::VARCHAR || '\" does not exist') END",
    NULL,
};

/* Replaces @DB@, @NAME@, @VERSION@ and @VERSION_NUMBER@ with quoted
 * literals. */
static char *expand(const char *tmpl, const char *db_lit, const char *name_lit, const char *ver_lit,
                    const char *vernum_lit) {
  sql_strbuf b = {0};
  const char *p = tmpl;
  while (*p) {
    if (strncmp(p, "@DB@", 4) == 0) {
      sql_strbuf_add(&b, db_lit);
      p += 4;
    } else if (strncmp(p, "@NAME@", 6) == 0) {
      sql_strbuf_add(&b, name_lit);
      p += 6;
    } else if (strncmp(p, "@VERSION_NUMBER@", 16) == 0) {
      sql_strbuf_add(&b, vernum_lit);
      p += 16;
    } else if (strncmp(p, "@VERSION@", 9) == 0) {
      sql_strbuf_add(&b, ver_lit);
      p += 9;
    } else {
      sql_strbuf_addn(&b, p, 1);
      p++;
    }
  }
  return sql_strbuf_take(&b);
}

static mr_status fill_pg_type(duckdb_connection con, sql_error *err) {
  sql_strbuf b = {0};
  sql_strbuf_add(&b, "INSERT INTO " SQL_PGCAT_DB ".main.pg_type VALUES ");
  bool first = true;
#define PG_TYPE_INSERT(oid, name, len, cat)                                                        \
  sql_strbuf_addf(&b,                                                                              \
                  "%s(%d, '%s', 11, %d, 'b', '%s', 0, 0, 0, 0, -1, false, 10, true, ',', "         \
                  "0, 0)",                                                                         \
                  first ? "" : ", ", oid, name, len, cat);                                         \
  first = false;
  PG_TYPE_TABLE(PG_TYPE_INSERT)
#undef PG_TYPE_INSERT
  char *sql = sql_strbuf_take(&b);
  if (sql == NULL)
    return sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  mr_status rc = run(con, sql, err);
  free(sql);
  return rc;
}

mr_status sql_pgcatalog_install(duckdb_connection con, const char *dbname, const char *client_name,
                                const char *version, sql_error *err) {
  mr_status rc = install_bytea(con, err);
  if (rc)
    return rc;
  rc = run(con, "ATTACH ':memory:' AS " SQL_PGCAT_DB, err);
  if (rc)
    return rc;
  char full_version[256];
  snprintf(full_version, sizeof full_version,
           "PostgreSQL %s on x86_64-pc-linux-gnu, compiled by gcc, 64-bit", version);
  char number[32];
  size_t k = 0;
  while (version[k] && version[k] != ' ' && k < sizeof number - 1) {
    number[k] = version[k];
    k++;
  }
  number[k] = '\0';
  char *db_lit = sql_quote_literal(dbname);
  char *name_lit = sql_quote_literal(client_name);
  char *ver_lit = sql_quote_literal(full_version);
  char *num_lit = sql_quote_literal(number);
  if (!db_lit || !name_lit || !ver_lit || !num_lit)
    rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; rc == MR_OK && catalog_sql[i]; i++) {
    char *sql = expand(catalog_sql[i], db_lit, name_lit, ver_lit, num_lit);
    if (sql == NULL) {
      rc = sql_fail(err, MR_ERR_NOMEM, SQLSTATE_OUT_OF_MEMORY, "out of memory");
      break;
    }
    rc = run(con, sql, err);
    free(sql);
  }
  free(db_lit);
  free(name_lit);
  free(ver_lit);
  free(num_lit);
  if (rc == MR_OK)
    rc = fill_pg_type(con, err);
  return rc;
}

char *sql_pgcatalog_search_path(const char *dbname) {
  sql_strbuf b = {0};
  sql_strbuf_addf(&b, "SET search_path = '\"%s\".public,%s.main,\"%s\".main'", dbname, SQL_PGCAT_DB,
                  dbname);
  return sql_strbuf_take(&b);
}
