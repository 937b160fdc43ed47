/*
 * sqltool.c — moraine-sqltool, a test-only view of the SQL front's planner:
 * `moraine-sqltool plan` reads one query string on stdin, plans it as a
 * session would (sql_plan_query), and prints one line per statement:
 * `lookup <schemas|*> <relname|*>` for the postgres extension's table
 * lookup answered from the relation directory, `empty` for a statement
 * answered with no rows (sql_pginfo.h), `other` for anything else. The end-to-end tests hand it what a real client sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_plan.h"
#include "sql/sql_util.h"

int main(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[1], "plan") != 0) {
    fprintf(stderr, "usage: moraine-sqltool plan < query\n");
    return 2;
  }
  sql_strbuf in = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
    sql_strbuf_addn(&in, buf, n);
  char *query = sql_strbuf_take(&in);
  sql_plans plans;
  sql_error err;
  if (query == NULL || sql_plan_query(query, NULL, &plans, &err) != MR_OK) {
    fprintf(stderr, "moraine-sqltool: %s\n", query ? err.base.msg : "out of memory");
    free(query);
    return 1;
  }
  for (size_t i = 0; i < plans.n; i++) {
    const sql_known_query *l = &plans.v[i].known;
    if (l->kind != SQL_KNOWN_TABLE_LOOKUP) {
      printf("%s\n", l->kind == SQL_KNOWN_EMPTY ? "empty" : "other");
      continue;
    }
    printf("lookup ");
    for (size_t j = 0; j < l->nschemas; j++)
      printf("%s%s", j ? "," : "", l->schemas[j]);
    printf("%s %s\n", l->schemas ? "" : "*", l->relname ? l->relname : "*");
  }
  sql_plans_free(&plans);
  free(query);
  return 0;
}
