/* Word-level bitmaps over arrays of uint64_t.
 *
 * Bit i lives in word i/64 at position i%64. Searches scan whole words and use
 * count-trailing-zeros, so a scan costs O(words), not O(bits). Searches return
 * NM_BITMAP_NONE when nothing is found. All ranges are [start, start+len) and
 * must lie inside the bitmap (callers check; the functions assert in debug). */
#ifndef NEARMEM_COMMON_BITMAP_H
#define NEARMEM_COMMON_BITMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define NM_BITMAP_NONE ((size_t)-1)

static inline size_t nm_bitmap_words(size_t nbits) { return (nbits + 63) / 64; }

static inline bool nm_bitmap_test(const uint64_t *bm, size_t i) { return (bm[i >> 6] >> (i & 63)) & 1u; }
static inline void nm_bitmap_set(uint64_t *bm, size_t i) { bm[i >> 6] |= (uint64_t)1 << (i & 63); }
static inline void nm_bitmap_clear(uint64_t *bm, size_t i) { bm[i >> 6] &= ~((uint64_t)1 << (i & 63)); }

/* Whole-bitmap fill; bits past nbits in the last word are left clear. */
void nm_bitmap_zero(uint64_t *bm, size_t nbits);
void nm_bitmap_fill(uint64_t *bm, size_t nbits);

void nm_bitmap_set_range(uint64_t *bm, size_t start, size_t len);
void nm_bitmap_clear_range(uint64_t *bm, size_t start, size_t len);
/* True when every bit of the range is set / clear (an empty range is both). */
bool nm_bitmap_range_is_set(const uint64_t *bm, size_t start, size_t len);
bool nm_bitmap_range_is_clear(const uint64_t *bm, size_t start, size_t len);
/* Number of set bits in the range. */
size_t nm_bitmap_count_range(const uint64_t *bm, size_t start, size_t len);

/* First set / clear bit at index >= from and < nbits. */
size_t nm_bitmap_find_first_set(const uint64_t *bm, size_t nbits, size_t from);
size_t nm_bitmap_find_first_clear(const uint64_t *bm, size_t nbits, size_t from);

/* Start of the first run of `len` consecutive clear / set bits that begins at
 * index >= from and ends <= nbits. len == 0 finds nothing (a zero-size request
 * is an error for every allocator built on this). */
size_t nm_bitmap_find_clear_run(const uint64_t *bm, size_t nbits, size_t len, size_t from);
size_t nm_bitmap_find_set_run(const uint64_t *bm, size_t nbits, size_t len, size_t from);

#endif
