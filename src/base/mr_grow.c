/* mr_grow.c — doubling growth for buffers (mr_grow.h). */
#include "mr_grow.h"

#include <stdint.h>
#include <stdlib.h>

mr_status mr_grow(void **data, size_t *cap, size_t need, size_t first) {
  if (need <= *cap)
    return MR_OK;
  size_t size = *cap ? *cap : (first ? first : 64);
  while (size < need) {
    if (size > SIZE_MAX / 2)
      return MR_ERR_NOMEM;
    size *= 2;
  }
  void *d = realloc(*data, size);
  if (d == NULL)
    return MR_ERR_NOMEM;
  *data = d;
  *cap = size;
  return MR_OK;
}
