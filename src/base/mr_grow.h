/*
 * mr_grow.h — the one growth rule for moraine's growable buffers (pgwire's
 * message buffer, the sql layer's string buffer): double from a first size
 * until `need` bytes fit, refusing sizes that would overflow.
 *
 * Ownership: *data is a malloc'd block (or NULL) owned by the caller's
 * buffer; on success it may have moved and *cap is its new size; on failure
 * both are unchanged and the old block is still valid.
 */
#ifndef MR_GROW_H
#define MR_GROW_H

#include <stddef.h>

#include "base/mr_error.h"

/* Ensures *cap >= need. MR_ERR_NOMEM when memory or size_t runs out. */
mr_status mr_grow(void **data, size_t *cap, size_t need, size_t first) MR_MUST_CHECK;

#endif
