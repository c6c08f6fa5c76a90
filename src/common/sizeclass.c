#include "nearmem/common/sizeclass.h"

#include <string.h>
#include "nearmem/common/util.h"

/* Rebuild the small-size lookup table from size[]. */
static void build_lut(nm_sizeclasses *sc)
{
    unsigned cls = 0;
    sc->lut[0] = 0xff; /* size 0 has no class */
    for (size_t slot = 1; slot < NM_ARRAY_LEN(sc->lut); slot++) {
        size_t size = slot * 8; /* largest size mapping to this slot */
        while (cls < sc->count && sc->size[cls] < size) cls++;
        /* sizes (slot-1)*8+1 .. slot*8 share the class that holds slot*8, which is
         * exact only if no class boundary falls strictly inside the slot. Classes
         * are multiples of 8 whenever they are below the LUT limit (checked at init). */
        sc->lut[slot] = cls < sc->count ? (uint8_t)cls : 0xff;
    }
}

static nm_err finish(nm_sizeclasses *sc)
{
    for (unsigned i = 0; i < sc->count; i++) {
        if (sc->size[i] == 0 || (i > 0 && sc->size[i] <= sc->size[i - 1]))
            return nm_fail(NM_EINVAL, "size classes must be nonzero and strictly ascending");
        if (sc->size[i] < NM_SIZECLASS_LUT_MAX && (sc->size[i] & 7))
            return nm_fail(NM_EALIGN, "size class %zu below %d is not a multiple of 8", sc->size[i], NM_SIZECLASS_LUT_MAX);
    }
    build_lut(sc);
    return NM_OK;
}

nm_err nm_sizeclass_init_custom(nm_sizeclasses *sc, const size_t *sizes, unsigned n)
{
    if (!sc || !sizes || n == 0 || n > NM_SIZECLASS_MAX)
        return nm_fail(NM_EINVAL, "custom size classes: need 1..%d classes", NM_SIZECLASS_MAX);
    memset(sc, 0, sizeof *sc);
    sc->count = n;
    memcpy(sc->size, sizes, n * sizeof *sizes);
    nm_err e = finish(sc);
    if (e) memset(sc, 0, sizeof *sc);
    return e;
}

nm_err nm_sizeclass_init_pow2(nm_sizeclasses *sc, size_t min, size_t max)
{
    if (!sc || !nm_is_pow2(min) || !nm_is_pow2(max) || min > max || min < 8)
        return nm_fail(NM_EINVAL, "pow2 size classes: min and max must be powers of two, 8 <= min <= max");
    size_t sizes[NM_SIZECLASS_MAX];
    unsigned n = 0;
    for (size_t s = min; s <= max && n < NM_SIZECLASS_MAX; s *= 2) {
        sizes[n++] = s;
        if (s == max) break;
    }
    return nm_sizeclass_init_custom(sc, sizes, n);
}

nm_err nm_sizeclass_init_geometric(nm_sizeclasses *sc, size_t min, size_t max, unsigned steps, size_t quantum)
{
    if (!sc || !nm_is_pow2(min) || min < 8 || max < min || steps == 0 || !nm_is_pow2(quantum) || quantum < 8)
        return nm_fail(NM_EINVAL, "geometric size classes: bad parameters");
    size_t sizes[NM_SIZECLASS_MAX];
    unsigned n = 0;
    size_t base = min;
    sizes[n++] = min;
    while (sizes[n - 1] < max) {
        for (unsigned k = 1; k <= steps && sizes[n - 1] < max; k++) {
            size_t s = base + base * k / steps;
            s = NM_ALIGN_UP(s, quantum);
            if (s <= sizes[n - 1]) continue;
            if (n == NM_SIZECLASS_MAX) return nm_fail(NM_ERANGE, "geometric size classes: more than %d classes", NM_SIZECLASS_MAX);
            sizes[n++] = s;
        }
        base *= 2;
    }
    return nm_sizeclass_init_custom(sc, sizes, n);
}

int nm_sizeclass_lookup(const nm_sizeclasses *sc, size_t size)
{
    if (size == 0 || sc->count == 0 || size > sc->size[sc->count - 1]) return -1;
    if (size <= NM_SIZECLASS_LUT_MAX) {
        uint8_t c = sc->lut[(size + 7) >> 3];
        if (c != 0xff) return c;
    }
    unsigned lo = 0, hi = sc->count - 1; /* smallest class >= size */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (sc->size[mid] >= size) hi = mid;
        else lo = mid + 1;
    }
    return (int)lo;
}
