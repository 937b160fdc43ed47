/*
 * fuzz_sql_plan.c — libFuzzer target for the statement planner
 * (sql_plan.h): random and mutated statements (seeds in
 * tests/fuzz/seeds/fuzz_sql_plan/) must never crash it, leak, or be
 * admitted outside the allow-list.
 *
 * The allow-list oracle is independent of the planner's own walk: each
 * admitted statement is parsed again to libpg_query's JSON form and every
 * function call ("funcname") and every relation ("RangeVar") found in that
 * text is checked against sql_admit.h directly. A violation aborts, which
 * libFuzzer reports as a crash.
 */
#include <pg_query.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_admit.h"
#include "sql/sql_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool scratch(void *ctx, const char *name) { return strcmp(name, "scratch") == 0; }

static void violation(const char *what, const char *sql) {
  fprintf(stderr, "planner admitted %s in:\n%s\n", what, sql);
  abort();
}

/* The end of the JSON string starting at p (p at the opening quote). */
static const char *string_end(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1])
      p++;
  return p;
}

/* The matching close of the bracket at p ('{' or '['), strings skipped. */
static const char *match(const char *p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '"')
      p = string_end(p);
    else if (*p == '{' || *p == '[')
      depth++;
    else if ((*p == '}' || *p == ']') && --depth == 0)
      return p;
  }
  return p;
}

/* The value of "key":"..." inside [from, to) at this object's own level
 * (nested objects are skipped), copied into out; false when absent. */
static bool field(const char *from, const char *to, const char *key, char *out, size_t cap) {
  size_t klen = strlen(key);
  for (const char *p = from + 1; p < to; p++) {
    if (*p == '{' || *p == '[') {
      p = match(p);
      continue;
    }
    if (*p != '"')
      continue;
    const char *e = string_end(p);
    if ((size_t)(e - p - 1) == klen && strncmp(p + 1, key, klen) == 0 && e[1] == ':' &&
        e[2] == '"') {
      const char *v = e + 2, *ve = string_end(v);
      snprintf(out, cap, "%.*s", (int)(ve - v - 1), v + 1);
      return true;
    }
    p = e;
  }
  return false;
}

static bool is_cte(const char *json, const char *name) {
  char pat[320];
  snprintf(pat, sizeof pat, "\"ctename\":\"%s\"", name);
  return strstr(json, pat) != NULL;
}

static void check_functions(const char *json, const char *sql) {
  for (const char *p = json; (p = strstr(p, "\"funcname\":[")) != NULL;) {
    const char *list = p + strlen("\"funcname\":"), *end = match(list);
    char names[4][256];
    size_t n = 0;
    for (const char *q = list; q < end && (q = strstr(q, "\"sval\":\"")) != NULL && q < end;) {
      const char *v = q + strlen("\"sval\":"), *ve = string_end(v);
      if (n < 4)
        snprintf(names[n], sizeof names[n], "%.*s", (int)(ve - v - 1), v + 1);
      n++;
      q = ve;
    }
    bool ok = (n == 1 || (n == 2 && strcmp(names[0], "pg_catalog") == 0)) &&
              sql_admit_function(names[n - 1], NULL);
    if (!ok)
      violation("a function outside the allow-list", sql);
    p = end;
  }
}

static void check_relations(const char *json, const char *sql) {
  for (const char *p = json; (p = strstr(p, "\"RangeVar\":{")) != NULL;) {
    const char *obj = p + strlen("\"RangeVar\":"), *end = match(obj);
    char catalog[256], schema[256], rel[256] = "", persistence[8] = "";
    field(obj, end, "relname", rel, sizeof rel);
    field(obj, end, "relpersistence", persistence, sizeof persistence);
    bool has_schema = field(obj, end, "schemaname", schema, sizeof schema);
    if (field(obj, end, "catalogname", catalog, sizeof catalog))
      violation("a three-part relation name", sql);
    bool ok = strcmp(persistence, "t") == 0 || strcmp(rel, "scratch") == 0 ||
              (!has_schema && is_cte(json, rel)) ||
              sql_admit_relation(has_schema ? schema : NULL, rel) != SQL_REL_REFUSED;
    if (!ok)
      violation("a relation outside the allow-list", sql);
    p = end;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *sql = malloc(size + 1);
  if (sql == NULL)
    return 0;
  memcpy(sql, data, size);
  sql[size] = '\0';
  sql_plan_env env = {NULL, scratch};
  sql_plans plans;
  sql_error err;
  if (sql_plan_query(sql, &env, &plans, &err) == MR_OK) {
    for (size_t i = 0; i < plans.n; i++) {
      if (plans.v[i].shape == NULL || plans.v[i].text == NULL)
        violation("a plan without a shape", sql);
      PgQueryParseResult r = pg_query_parse(plans.v[i].text);
      if (r.error)
        violation("a statement that does not parse alone", plans.v[i].text);
      check_functions(r.parse_tree, plans.v[i].text);
      check_relations(r.parse_tree, plans.v[i].text);
      pg_query_free_parse_result(r);
    }
    sql_plans_free(&plans);
  }
  free(sql);
  return 0;
}
