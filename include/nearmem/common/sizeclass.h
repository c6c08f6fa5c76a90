/* Size-class tables: map a request size to the smallest class that holds it.
 *
 * Three constructors cover the allocators in nearmem: powers of two
 * (PIM-malloc's 16 B..2 KiB thread-cache classes, buddy levels), geometric
 * classes with k steps per doubling (jemalloc-style, used by PMAlloc and
 * SpeedMalloc), and an explicit table. Lookup is O(1) for sizes up to
 * NM_SIZECLASS_LUT_MAX through a table indexed by size/8, and a binary search
 * above that. */
#ifndef NEARMEM_COMMON_SIZECLASS_H
#define NEARMEM_COMMON_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>
#include "nearmem/common/error.h"

#define NM_SIZECLASS_MAX 128
#define NM_SIZECLASS_LUT_MAX 1024

typedef struct nm_sizeclasses {
    unsigned count;
    size_t size[NM_SIZECLASS_MAX];                    /* strictly ascending */
    uint8_t lut[NM_SIZECLASS_LUT_MAX / 8 + 1];        /* (size+7)/8 -> class, 0xff = none */
} nm_sizeclasses;

/* Classes min, 2*min, ..., max; both powers of two, 0 < min <= max. */
nm_err nm_sizeclass_init_pow2(nm_sizeclasses *sc, size_t min, size_t max);
/* Powers of two from min (a power of two), then `steps` evenly spaced classes per
 * doubling, each rounded up to `quantum` (a power of two), until max is covered. */
nm_err nm_sizeclass_init_geometric(nm_sizeclasses *sc, size_t min, size_t max, unsigned steps, size_t quantum);
/* An explicit table: n classes, strictly ascending, none zero. */
nm_err nm_sizeclass_init_custom(nm_sizeclasses *sc, const size_t *sizes, unsigned n);

/* Class index for `size`, or -1 when size is 0 or larger than the largest class. */
int nm_sizeclass_lookup(const nm_sizeclasses *sc, size_t size);
static inline size_t nm_sizeclass_size(const nm_sizeclasses *sc, unsigned cls) { return sc->size[cls]; }
static inline size_t nm_sizeclass_max(const nm_sizeclasses *sc) { return sc->count ? sc->size[sc->count - 1] : 0; }

#endif
