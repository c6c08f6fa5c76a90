/* Small helpers every component uses: alignment, powers of two, bit tricks. */
#ifndef NEARMEM_COMMON_UTIL_H
#define NEARMEM_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define NM_CACHELINE 64
#define NM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NM_LIKELY(x) __builtin_expect(!!(x), 1)
#define NM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NM_UNUSED(x) ((void)(x))
#define NM_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)

/* Align up/down to a power-of-two alignment `a`. */
#define NM_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define NM_ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a)-1))

static inline bool nm_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }
static inline bool nm_is_aligned(uint64_t x, uint64_t a) { return (x & (a - 1)) == 0; }

/* Index of the lowest / highest set bit; undefined for x == 0 (callers check). */
static inline unsigned nm_ctz64(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
static inline unsigned nm_clz64(uint64_t x) { return (unsigned)__builtin_clzll(x); }
static inline unsigned nm_popcount64(uint64_t x) { return (unsigned)__builtin_popcountll(x); }

/* floor(log2(x)) for x > 0; 0 for x == 0. */
static inline unsigned nm_log2_floor(uint64_t x) { return x ? 63u - nm_clz64(x) : 0u; }
/* ceil(log2(x)) for x > 0; 0 for x <= 1. */
static inline unsigned nm_log2_ceil(uint64_t x) { return x <= 1 ? 0u : 64u - nm_clz64(x - 1); }
/* Smallest power of two >= x; 1 for x == 0; 0 if it does not fit in 64 bits. */
static inline uint64_t nm_next_pow2(uint64_t x)
{
    if (x <= 1) return 1;
    unsigned l = nm_log2_ceil(x);
    return l >= 64 ? 0 : (uint64_t)1 << l;
}

/* Overflow-checked multiply: returns false on overflow. */
static inline bool nm_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

#endif
