/*
 * sql_types.c — type mapping, PostgreSQL binary encoders/decoders and text
 * formatting, all derived from the tables in sql_types.h.
 */
#include "sql/sql_types.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct pg_type_row {
  uint32_t oid;
  const char *name;
  int16_t len;
} pg_type_row;

static const pg_type_row pg_types[] = {
#define PG_TYPE_ROW(oid, name, len, cat) {oid, name, len},
    PG_TYPE_TABLE(PG_TYPE_ROW)
#undef PG_TYPE_ROW
};

bool pg_type_info(uint32_t oid, const char **typname, int16_t *typlen) {
  for (size_t i = 0; i < sizeof pg_types / sizeof pg_types[0]; i++) {
    if (pg_types[i].oid == oid) {
      if (typname)
        *typname = pg_types[i].name;
      if (typlen)
        *typlen = pg_types[i].len;
      return true;
    }
  }
  return false;
}

typedef struct duck_map_row {
  duckdb_type duck;
  const char *name;
  uint32_t oid;
} duck_map_row;

static const duck_map_row duck_map[] = {
#define DUCK_ROW(id, name, oid) {id, name, oid},
    PG_DUCK_TYPE_TABLE(DUCK_ROW)
#undef DUCK_ROW
};

typedef struct alias_row {
  const char *alias;
  uint32_t oid;
} alias_row;

static const alias_row alias_map[] = {
#define ALIAS_ROW(alias, oid) {alias, oid},
    PG_DUCK_ALIAS_TABLE(ALIAS_ROW)
#undef ALIAS_ROW
};

/* DuckDB type names here are as duckdb_columns() and pragma_table_info()
 * print them: "DECIMAL(18,3)", "TIMESTAMP WITH TIME ZONE", "VARCHAR[]". */
uint32_t pg_oid_of_duck_name(const char *name, int32_t *typmod) {
  *typmod = -1;
  unsigned width, scale;
  if (strncasecmp(name, "DECIMAL(", 8) == 0 && sscanf(name + 8, "%u,%u", &width, &scale) == 2) {
    *typmod = (int32_t)((width << 16) | scale) + 4;
    return 1700;
  }
  for (size_t i = 0; i < sizeof duck_map / sizeof duck_map[0]; i++)
    if (strcasecmp(name, duck_map[i].name) == 0)
      return duck_map[i].oid;
  for (size_t i = 0; i < sizeof alias_map / sizeof alias_map[0]; i++)
    if (strcasecmp(name, alias_map[i].alias) == 0)
      return alias_map[i].oid;
  return PG_OID_TEXT;
}

void pg_coltype_of(duckdb_logical_type lt, const char *colname, pg_coltype *out) {
  memset(out, 0, sizeof *out);
  out->duck = duckdb_get_type_id(lt);
  out->oid = PG_OID_TEXT;
  out->typmod = -1;
  char *alias = duckdb_logical_type_get_alias(lt);
  bool found = false;
  if (alias) {
    for (size_t i = 0; i < sizeof alias_map / sizeof alias_map[0]; i++) {
      if (strcasecmp(alias, alias_map[i].alias) == 0) {
        out->oid = alias_map[i].oid;
        found = true;
      }
    }
    duckdb_free(alias);
  }
  if (!found && out->duck == DUCKDB_TYPE_BIGINT && colname && strcmp(colname, "ctid") == 0) {
    out->oid = PG_OID_TID;
    found = true;
  }
  if (!found) {
    for (size_t i = 0; i < sizeof duck_map / sizeof duck_map[0]; i++) {
      if (duck_map[i].duck == out->duck) {
        out->oid = duck_map[i].oid;
        found = true;
      }
    }
  }
  out->binary_ok = found;
  if (out->duck == DUCKDB_TYPE_DECIMAL) {
    out->dec_width = duckdb_decimal_width(lt);
    out->dec_scale = duckdb_decimal_scale(lt);
    out->dec_internal = duckdb_decimal_internal_type(lt);
    out->typmod = (int32_t)(((uint32_t)out->dec_width << 16) | out->dec_scale) + 4;
  }
  if (!pg_type_info(out->oid, NULL, &out->typlen))
    out->typlen = -1;
}

/* ---- numeric ---------------------------------------------------------- */

void pg_encode_numeric(sql_strbuf *b, const char *digits, bool neg, int scale) {
  while (*digits == '0' && digits[1])
    digits++;
  size_t nd = strlen(digits);
  /* integer part and fraction part as decimal digit strings */
  char ip[64], fp[64];
  size_t ni = nd > (size_t)scale ? nd - (size_t)scale : 0;
  memcpy(ip, digits, ni);
  ip[ni] = '\0';
  size_t nf = 0;
  for (int k = 0; k < scale; k++) {
    int src = (int)nd - scale + k;
    fp[nf++] = src >= 0 ? digits[src] : '0';
  }
  fp[nf] = '\0';
  /* base-10000 groups: integer part left-padded, fraction right-padded */
  int16_t groups[40];
  int ng = 0;
  size_t ipad = (4 - ni % 4) % 4;
  char buf[80];
  memset(buf, '0', ipad);
  memcpy(buf + ipad, ip, ni);
  size_t il = ipad + ni;
  for (size_t k = 0; k < il; k += 4)
    groups[ng++] = (int16_t)((buf[k] - '0') * 1000 + (buf[k + 1] - '0') * 100 +
                             (buf[k + 2] - '0') * 10 + (buf[k + 3] - '0'));
  int int_groups = ng;
  size_t fl = nf + (4 - nf % 4) % 4;
  memset(buf, '0', fl);
  memcpy(buf, fp, nf);
  for (size_t k = 0; k < fl; k += 4)
    groups[ng++] = (int16_t)((buf[k] - '0') * 1000 + (buf[k + 1] - '0') * 100 +
                             (buf[k + 2] - '0') * 10 + (buf[k + 3] - '0'));
  int weight = int_groups - 1;
  int first = 0;
  while (first < ng && groups[first] == 0) {
    first++;
    weight--;
  }
  int last = ng;
  while (last > first && groups[last - 1] == 0)
    last--;
  int ndig = last - first;
  if (ndig == 0) {
    weight = 0;
    neg = false;
  }
  sql_strbuf_add_be32(b, (uint32_t)(8 + 2 * ndig));
  sql_strbuf_add_be16(b, (uint16_t)ndig);
  sql_strbuf_add_be16(b, (uint16_t)(int16_t)weight);
  sql_strbuf_add_be16(b, neg ? 0x4000 : 0x0000);
  sql_strbuf_add_be16(b, (uint16_t)scale);
  for (int k = first; k < last; k++)
    sql_strbuf_add_be16(b, (uint16_t)groups[k]);
}

static uint16_t rd16(const uint8_t *p) {
  return (uint16_t)(p[0] << 8 | p[1]);
}

bool pg_decode_numeric(const uint8_t *p, size_t n, sql_strbuf *out) {
  if (n < 8)
    return false;
  int ndig = rd16(p);
  int weight = (int16_t)rd16(p + 2);
  uint16_t sign = rd16(p + 4);
  int dscale = rd16(p + 6);
  if (n != 8 + 2 * (size_t)ndig || dscale > 1000)
    return false;
  if (sign == 0xC000) {
    sql_strbuf_add(out, "NaN");
    return true;
  }
  if (sign == 0x4000)
    sql_strbuf_add(out, "-");
  /* integer part: groups 0..weight */
  if (weight < 0) {
    sql_strbuf_add(out, "0");
  } else {
    for (int g = 0; g <= weight; g++) {
      int d = g < ndig ? rd16(p + 8 + 2 * g) : 0;
      if (d > 9999)
        return false;
      sql_strbuf_addf(out, g == 0 ? "%d" : "%04d", d);
    }
  }
  if (dscale > 0) {
    sql_strbuf_add(out, ".");
    int written = 0;
    for (int g = weight + 1; written < dscale; g++) {
      int d = (g >= 0 && g < ndig) ? rd16(p + 8 + 2 * g) : 0;
      char four[5];
      snprintf(four, sizeof four, "%04d", d % 10000);
      for (int k = 0; k < 4 && written < dscale; k++, written++)
        sql_strbuf_addn(out, &four[k], 1);
    }
  }
  return true;
}

static void u128_digits(unsigned __int128 v, char *out) {
  char tmp[48];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v);
  for (int k = 0; k < n; k++)
    out[k] = tmp[n - 1 - k];
  out[n] = '\0';
}

static void encode_int128(sql_strbuf *b, __int128 v, int scale) {
  bool neg = v < 0;
  unsigned __int128 m = neg ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
  char digits[48];
  u128_digits(m, digits);
  pg_encode_numeric(b, digits, neg, scale);
}

/* ---- binary encoders ---------------------------------------------------- */

static int64_t ts_to_pg(int64_t us) {
  if (us == INT64_MAX || us == -INT64_MAX || us == INT64_MIN)
    return us == INT64_MAX ? INT64_MAX : INT64_MIN;
  return us - PG_EPOCH_MICROS;
}

void pg_encode_binary(sql_strbuf *b, const pg_coltype *ct, duckdb_vector vec, uint64_t row) {
  uint64_t *validity = duckdb_vector_get_validity(vec);
  if (validity && !duckdb_validity_row_is_valid(validity, row)) {
    sql_strbuf_add_be32(b, 0xFFFFFFFFu);
    return;
  }
  void *data = duckdb_vector_get_data(vec);
  if (ct->oid == PG_OID_TID) {
    int64_t rid = ((int64_t *)data)[row];
    sql_strbuf_add_be32(b, 6);
    sql_strbuf_add_be32(b, (uint32_t)(rid / PG_TID_PER_BLOCK));
    sql_strbuf_add_be16(b, (uint16_t)(rid % PG_TID_PER_BLOCK));
    return;
  }
  switch (ct->duck) {
  case DUCKDB_TYPE_BOOLEAN:
    sql_strbuf_add_be32(b, 1);
    sql_strbuf_add_u8(b, ((bool *)data)[row] ? 1 : 0);
    return;
  case DUCKDB_TYPE_TINYINT:
    sql_strbuf_add_be32(b, 2);
    sql_strbuf_add_be16(b, (uint16_t)(int16_t)((int8_t *)data)[row]);
    return;
  case DUCKDB_TYPE_SMALLINT:
    sql_strbuf_add_be32(b, 2);
    sql_strbuf_add_be16(b, (uint16_t)((int16_t *)data)[row]);
    return;
  case DUCKDB_TYPE_UTINYINT:
    sql_strbuf_add_be32(b, 2);
    sql_strbuf_add_be16(b, (uint16_t)((uint8_t *)data)[row]);
    return;
  case DUCKDB_TYPE_INTEGER:
    sql_strbuf_add_be32(b, 4);
    sql_strbuf_add_be32(b, (uint32_t)((int32_t *)data)[row]);
    return;
  case DUCKDB_TYPE_USMALLINT:
    sql_strbuf_add_be32(b, 4);
    sql_strbuf_add_be32(b, (uint32_t)((uint16_t *)data)[row]);
    return;
  case DUCKDB_TYPE_BIGINT:
    sql_strbuf_add_be32(b, 8);
    sql_strbuf_add_be64(b, (uint64_t)((int64_t *)data)[row]);
    return;
  case DUCKDB_TYPE_UINTEGER:
    sql_strbuf_add_be32(b, 8);
    sql_strbuf_add_be64(b, (uint64_t)((uint32_t *)data)[row]);
    return;
  case DUCKDB_TYPE_UBIGINT:
    encode_int128(b, (__int128)((uint64_t *)data)[row], 0);
    return;
  case DUCKDB_TYPE_HUGEINT: {
    duckdb_hugeint h = ((duckdb_hugeint *)data)[row];
    encode_int128(b, (__int128)(((unsigned __int128)(uint64_t)h.upper << 64) | h.lower), 0);
    return;
  }
  case DUCKDB_TYPE_UHUGEINT: {
    duckdb_uhugeint h = ((duckdb_uhugeint *)data)[row];
    char digits[48];
    u128_digits(((unsigned __int128)h.upper << 64) | h.lower, digits);
    pg_encode_numeric(b, digits, false, 0);
    return;
  }
  case DUCKDB_TYPE_DECIMAL: {
    __int128 v = 0;
    switch (ct->dec_internal) {
    case DUCKDB_TYPE_SMALLINT:
      v = ((int16_t *)data)[row];
      break;
    case DUCKDB_TYPE_INTEGER:
      v = ((int32_t *)data)[row];
      break;
    case DUCKDB_TYPE_BIGINT:
      v = ((int64_t *)data)[row];
      break;
    default: {
      duckdb_hugeint h = ((duckdb_hugeint *)data)[row];
      v = (__int128)(((unsigned __int128)(uint64_t)h.upper << 64) | h.lower);
    }
    }
    encode_int128(b, v, ct->dec_scale);
    return;
  }
  case DUCKDB_TYPE_FLOAT: {
    uint32_t bits;
    memcpy(&bits, &((float *)data)[row], 4);
    sql_strbuf_add_be32(b, 4);
    sql_strbuf_add_be32(b, bits);
    return;
  }
  case DUCKDB_TYPE_DOUBLE: {
    uint64_t bits;
    memcpy(&bits, &((double *)data)[row], 8);
    sql_strbuf_add_be32(b, 8);
    sql_strbuf_add_be64(b, bits);
    return;
  }
  case DUCKDB_TYPE_VARCHAR:
  case DUCKDB_TYPE_BLOB: {
    duckdb_string_t *s = &((duckdb_string_t *)data)[row];
    uint32_t n = duckdb_string_t_length(*s);
    const char *p = duckdb_string_t_data(s);
    sql_strbuf_add_be32(b, n);
    sql_strbuf_addn(b, p, n);
    return;
  }
  case DUCKDB_TYPE_DATE: {
    int32_t d = ((duckdb_date *)data)[row].days;
    /* +-infinity map to PostgreSQL's; finite days shift in 64 bits so the
     * epoch change cannot overflow near the low end of the range. */
    int64_t shifted = (int64_t)d - PG_EPOCH_DAYS;
    int32_t pg = d == INT32_MAX          ? INT32_MAX
                 : d <= -INT32_MAX       ? INT32_MIN
                 : shifted <= -INT32_MAX ? -INT32_MAX
                                         : (int32_t)shifted;
    sql_strbuf_add_be32(b, 4);
    sql_strbuf_add_be32(b, (uint32_t)pg);
    return;
  }
  case DUCKDB_TYPE_TIME:
    sql_strbuf_add_be32(b, 8);
    sql_strbuf_add_be64(b, (uint64_t)((duckdb_time *)data)[row].micros);
    return;
  case DUCKDB_TYPE_TIMESTAMP:
  case DUCKDB_TYPE_TIMESTAMP_TZ:
    sql_strbuf_add_be32(b, 8);
    sql_strbuf_add_be64(b, (uint64_t)ts_to_pg(((duckdb_timestamp *)data)[row].micros));
    return;
  case DUCKDB_TYPE_INTERVAL: {
    duckdb_interval iv = ((duckdb_interval *)data)[row];
    sql_strbuf_add_be32(b, 16);
    sql_strbuf_add_be64(b, (uint64_t)iv.micros);
    sql_strbuf_add_be32(b, (uint32_t)iv.days);
    sql_strbuf_add_be32(b, (uint32_t)iv.months);
    return;
  }
  case DUCKDB_TYPE_UUID: {
    duckdb_hugeint h = ((duckdb_hugeint *)data)[row];
    sql_strbuf_add_be32(b, 16);
    sql_strbuf_add_be64(b, (uint64_t)h.upper ^ UINT64_C(0x8000000000000000));
    sql_strbuf_add_be64(b, h.lower);
    return;
  }
  default:
    /* callers only pass binary_ok columns; keep the stream well-formed */
    sql_strbuf_add_be32(b, 0xFFFFFFFFu);
    return;
  }
}

/* ---- text --------------------------------------------------------------- */

void pg_bytea_encode_hex(sql_strbuf *out, const uint8_t *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  sql_strbuf_add(out, "\\x");
  for (size_t i = 0; i < n; i++) {
    char two[2] = {hex[p[i] >> 4], hex[p[i] & 15]};
    sql_strbuf_addn(out, two, 2);
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

bool pg_bytea_decode(const char *s, size_t n, sql_strbuf *out) {
  if (n >= 2 && s[0] == '\\' && (s[1] == 'x' || s[1] == 'X')) {
    for (size_t i = 2; i < n;) {
      if (isspace((unsigned char)s[i])) {
        i++;
        continue;
      }
      if (i + 1 >= n)
        return false;
      int hi = hexval(s[i]), lo = hexval(s[i + 1]);
      if (hi < 0 || lo < 0)
        return false;
      sql_strbuf_add_u8(out, (uint8_t)(hi << 4 | lo));
      i += 2;
    }
    return true;
  }
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\') {
      sql_strbuf_addn(out, &s[i], 1);
      continue;
    }
    if (i + 1 < n && s[i + 1] == '\\') {
      sql_strbuf_add_u8(out, '\\');
      i++;
    } else if (i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
               s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      sql_strbuf_add_u8(out,
                        (uint8_t)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      return false;
    }
  }
  return true;
}

/* DuckDB list text "[1, 2]" -> PostgreSQL array text "{1,2}" (shallow). */
static void list_text(sql_strbuf *out, const char *s) {
  size_t n = strlen(s);
  if (n < 2 || s[0] != '[' || s[n - 1] != ']') {
    sql_strbuf_add(out, s);
    return;
  }
  sql_strbuf_add(out, "{");
  for (size_t i = 1; i + 1 < n; i++) {
    if (s[i] == ',' && s[i + 1] == ' ') {
      sql_strbuf_add(out, ",");
      i++;
    } else if (s[i] == '[') {
      sql_strbuf_add(out, "{");
    } else if (s[i] == ']') {
      sql_strbuf_add(out, "}");
    } else {
      sql_strbuf_addn(out, &s[i], 1);
    }
  }
  sql_strbuf_add(out, "}");
}

void pg_format_text(sql_strbuf *out, const pg_coltype *ct, duckdb_result *r, uint64_t col,
                    uint64_t row) {
  if (ct->duck == DUCKDB_TYPE_BOOLEAN) {
    sql_strbuf_add(out, duckdb_value_boolean(r, col, row) ? "t" : "f");
    return;
  }
  if (ct->duck == DUCKDB_TYPE_BLOB) {
    duckdb_blob bl = duckdb_value_blob(r, col, row);
    pg_bytea_encode_hex(out, bl.data, bl.size);
    duckdb_free(bl.data);
    return;
  }
  if (ct->oid == PG_OID_TID) {
    int64_t rid = duckdb_value_int64(r, col, row);
    sql_strbuf_addf(out, "(%lld,%lld)", (long long)(rid / PG_TID_PER_BLOCK),
                    (long long)(rid % PG_TID_PER_BLOCK));
    return;
  }
  if (ct->duck == DUCKDB_TYPE_DOUBLE || ct->duck == DUCKDB_TYPE_FLOAT) {
    double d = duckdb_value_double(r, col, row);
    if (isnan(d)) {
      sql_strbuf_add(out, "NaN");
      return;
    }
    if (isinf(d)) {
      sql_strbuf_add(out, d > 0 ? "Infinity" : "-Infinity");
      return;
    }
  }
  char *v = duckdb_value_varchar(r, col, row);
  if (v == NULL)
    return;
  if (ct->duck == DUCKDB_TYPE_LIST || ct->duck == DUCKDB_TYPE_ARRAY)
    list_text(out, v);
  else
    sql_strbuf_add(out, v);
  duckdb_free(v);
}
