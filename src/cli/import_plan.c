/*
 * import_plan.c — snapshot ids to commit groups (import_plan.h).
 */
#include "cli/import_plan.h"

size_t import_group_of(const int64_t *ids, size_t n, int64_t s) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ids[mid] < s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n ? lo : IMPORT_NO_GROUP;
}

bool import_row_groups(const int64_t *ids, size_t n, int64_t begin, bool has_end, int64_t end,
                       size_t *ins, size_t *del, bool *bad) {
  *ins = import_group_of(ids, n, begin);
  *del = has_end ? import_group_of(ids, n, end) : IMPORT_NO_GROUP;
  *bad = *ins == IMPORT_NO_GROUP || (has_end && (*del == IMPORT_NO_GROUP || end < begin));
  if (*bad) {
    *ins = *del = IMPORT_NO_GROUP;
    return false;
  }
  if (has_end && *del == *ins) /* at no retained snapshot: only its ended form */
    *ins = IMPORT_NO_GROUP;
  return true;
}
