/*
 * sql_types.h — the one table of PostgreSQL types moraine speaks, and the
 * mapping of DuckDB column types onto it. Everything type-related derives
 * from these X-macro tables: RowDescription OIDs, moraine's pg_type and
 * pg_attribute rows, the PGCOPY binary encoders and decoders, and text
 * formatting. A DuckDB type with no row here is sent as text (OID 25) in its
 * DuckDB text form.
 */
#ifndef MR_SQL_TYPES_H
#define MR_SQL_TYPES_H

#include <duckdb.h>
#include <stdbool.h>
#include <stdint.h>

#include "sql/sql_util.h"

/* X(oid, typname, typlen, typcategory): PostgreSQL types moraine knows. */
#define PG_TYPE_TABLE(X)                                                                           \
  X(16, "bool", 1, "B")                                                                            \
  X(17, "bytea", -1, "U")                                                                          \
  X(18, "char", 1, "Z")                                                                            \
  X(19, "name", 64, "S")                                                                           \
  X(20, "int8", 8, "N")                                                                            \
  X(21, "int2", 2, "N")                                                                            \
  X(23, "int4", 4, "N")                                                                            \
  X(25, "text", -1, "S")                                                                           \
  X(26, "oid", 4, "N")                                                                             \
  X(27, "tid", 6, "U")                                                                             \
  X(114, "json", -1, "U")                                                                          \
  X(700, "float4", 4, "N")                                                                         \
  X(701, "float8", 8, "N")                                                                         \
  X(1043, "varchar", -1, "S")                                                                      \
  X(1082, "date", 4, "D")                                                                          \
  X(1083, "time", 8, "D")                                                                          \
  X(1114, "timestamp", 8, "D")                                                                     \
  X(1184, "timestamptz", 8, "D")                                                                   \
  X(1186, "interval", 16, "T")                                                                     \
  X(1700, "numeric", -1, "N")                                                                      \
  X(2950, "uuid", 16, "U")                                                                         \
  X(3802, "jsonb", -1, "U")

/* X(duckdb type id, DuckDB's name for it in duckdb_columns(), PG OID). */
#define PG_DUCK_TYPE_TABLE(X)                                                                      \
  X(DUCKDB_TYPE_BOOLEAN, "BOOLEAN", 16)                                                            \
  X(DUCKDB_TYPE_TINYINT, "TINYINT", 21)                                                            \
  X(DUCKDB_TYPE_SMALLINT, "SMALLINT", 21)                                                          \
  X(DUCKDB_TYPE_INTEGER, "INTEGER", 23)                                                            \
  X(DUCKDB_TYPE_BIGINT, "BIGINT", 20)                                                              \
  X(DUCKDB_TYPE_UTINYINT, "UTINYINT", 21)                                                          \
  X(DUCKDB_TYPE_USMALLINT, "USMALLINT", 23)                                                        \
  X(DUCKDB_TYPE_UINTEGER, "UINTEGER", 20)                                                          \
  X(DUCKDB_TYPE_UBIGINT, "UBIGINT", 1700)                                                          \
  X(DUCKDB_TYPE_HUGEINT, "HUGEINT", 1700)                                                          \
  X(DUCKDB_TYPE_UHUGEINT, "UHUGEINT", 1700)                                                        \
  X(DUCKDB_TYPE_FLOAT, "FLOAT", 700)                                                               \
  X(DUCKDB_TYPE_DOUBLE, "DOUBLE", 701)                                                             \
  X(DUCKDB_TYPE_DECIMAL, "DECIMAL", 1700)                                                          \
  X(DUCKDB_TYPE_VARCHAR, "VARCHAR", 1043)                                                          \
  X(DUCKDB_TYPE_BLOB, "BLOB", 17)                                                                  \
  X(DUCKDB_TYPE_DATE, "DATE", 1082)                                                                \
  X(DUCKDB_TYPE_TIME, "TIME", 1083)                                                                \
  X(DUCKDB_TYPE_TIMESTAMP, "TIMESTAMP", 1114)                                                      \
  X(DUCKDB_TYPE_TIMESTAMP_TZ, "TIMESTAMP WITH TIME ZONE", 1184)                                    \
  X(DUCKDB_TYPE_INTERVAL, "INTERVAL", 1186)                                                        \
  X(DUCKDB_TYPE_UUID, "UUID", 2950)

/* DuckDB type aliases moraine registers or knows: X(alias, PG OID). */
#define PG_DUCK_ALIAS_TABLE(X)                                                                     \
  X("PG_BYTEA", 17)                                                                                \
  X("JSON", 114)

#define PG_OID_TEXT 25
#define PG_OID_TID 27

/*
 * A tuple id (ctid) stands for a DuckDB rowid: block rid / PG_TID_PER_BLOCK,
 * offset rid % PG_TID_PER_BLOCK, and '(b,o)' maps back to
 * b * PG_TID_PER_BLOCK + o. Offsets stay below 2^15: DuckDB's postgres
 * extension reads a tid's offset as a signed 16-bit number (a real heap page
 * holds at most 291 tuples), so with 2^16 per block every row from 32768 on
 * came back as '(-1,32768)' and DuckLake's ctid-keyed DELETE failed.
 * PG_TID_PER_BLOCK_TEXT is the same number for SQL text.
 */
#define PG_TID_PER_BLOCK 32768
#define PG_TID_STR2(x) #x
#define PG_TID_STR(x) PG_TID_STR2(x)
#define PG_TID_PER_BLOCK_TEXT PG_TID_STR(PG_TID_PER_BLOCK)

/* pg_type facts for an OID; false when moraine does not know it. */
bool pg_type_info(uint32_t oid, const char **typname, int16_t *typlen);

/* The column's PostgreSQL description: OID, typlen, typmod. A column named
 * "ctid" holding BIGINT is a tid (see sql_rewrite). */
typedef struct pg_coltype {
  duckdb_type duck; /* DuckDB physical/logical id */
  uint32_t oid;
  int16_t typlen;
  int32_t typmod;    /* numeric: ((precision << 16) | scale) + 4 */
  uint8_t dec_width; /* DECIMAL */
  uint8_t dec_scale;
  duckdb_type dec_internal; /* DECIMAL storage: SMALLINT/INTEGER/BIGINT/HUGEINT */
  bool binary_ok;           /* moraine can binary-encode this column as is */
} pg_coltype;

void pg_coltype_of(duckdb_logical_type lt, const char *colname, pg_coltype *out);

/* The PostgreSQL OID of a column by its DuckDB type name (the same table),
 * and its typmod (numeric: as above; else -1). pg_attribute uses this. */
uint32_t pg_oid_of_duck_name(const char *name, int32_t *typmod);

/* Appends one PGCOPY / DataRow binary field (int32 length, then bytes; -1
 * for NULL) for row `row` of vector data. Requires ct->binary_ok. */
void pg_encode_binary(sql_strbuf *b, const pg_coltype *ct, duckdb_vector vec, uint64_t row);

/* Appends the numeric binary form of a decimal given as digits (no sign),
 * sign and scale: "12345", neg, 2 -> 123.45. */
void pg_encode_numeric(sql_strbuf *b, const char *digits, bool neg, int scale);
/* Decodes a numeric binary value into decimal text ("-123.45"). */
bool pg_decode_numeric(const uint8_t *p, size_t n, sql_strbuf *out);

/* PostgreSQL text form of one value of a materialized result (NULL check is
 * the caller's). Appends to out. */
void pg_format_text(sql_strbuf *out, const pg_coltype *ct, duckdb_result *r, uint64_t col,
                    uint64_t row);

/* PostgreSQL bytea input ('\x0102' hex, or escape format) -> bytes. */
bool pg_bytea_decode(const char *s, size_t n, sql_strbuf *out);
/* bytes -> '\x0102' (no quotes). */
void pg_bytea_encode_hex(sql_strbuf *out, const uint8_t *p, size_t n);

/* Days / microseconds between 1970-01-01 and PostgreSQL's epoch 2000-01-01. */
#define PG_EPOCH_DAYS 10957
#define PG_EPOCH_MICROS INT64_C(946684800000000)

#endif /* MR_SQL_TYPES_H */
