/*
 * mr_format.h — integers as decimal text without printf: catalog rows and
 * result cells format millions of them (a million-file catalog's load, a
 * 13,000-row pg_attribute answer), where snprintf's format parsing costs
 * more than the digits.
 */
#ifndef MR_FORMAT_H
#define MR_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* Room for any int64 / uint64 and the terminating NUL. */
#define MR_INT_CHARS 21

/* Writes v in decimal into buf (NUL-terminated; MR_INT_CHARS bytes are
 * always enough); returns its length. */
size_t mr_format_i64(int64_t v, char *buf);
size_t mr_format_u64(uint64_t v, char *buf);

#endif
