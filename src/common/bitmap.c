#include "nearmem/common/bitmap.h"

#include <assert.h>
#include <string.h>

/* Mask of bits [lo, hi) inside one word, 0 <= lo < hi <= 64. */
static inline uint64_t range_mask(unsigned lo, unsigned hi)
{
    uint64_t upper = hi == 64 ? ~(uint64_t)0 : (((uint64_t)1 << hi) - 1);
    return upper & ~(((uint64_t)1 << lo) - 1);
}

void nm_bitmap_zero(uint64_t *bm, size_t nbits) { memset(bm, 0, nm_bitmap_words(nbits) * sizeof *bm); }

void nm_bitmap_fill(uint64_t *bm, size_t nbits)
{
    size_t w = nm_bitmap_words(nbits);
    if (w == 0) return;
    memset(bm, 0xff, w * sizeof *bm);
    if (nbits & 63) bm[w - 1] = range_mask(0, nbits & 63);
}

/* Apply op to the words covering [start, start+len): whole words in the middle,
 * masked words at the ends. */
#define FOR_RANGE(bm, start, len, WORD_OP)                                  \
    do {                                                                    \
        size_t _i = (start), _end = (start) + (len);                        \
        while (_i < _end) {                                                 \
            size_t _w = _i >> 6;                                            \
            unsigned _lo = (unsigned)(_i & 63);                             \
            unsigned _hi = (_end - (_w << 6)) >= 64 ? 64u : (unsigned)(_end - (_w << 6)); \
            uint64_t _m = range_mask(_lo, _hi);                             \
            WORD_OP;                                                        \
            _i = (_w << 6) + _hi;                                           \
        }                                                                   \
    } while (0)

void nm_bitmap_set_range(uint64_t *bm, size_t start, size_t len) { FOR_RANGE(bm, start, len, bm[_w] |= _m); }
void nm_bitmap_clear_range(uint64_t *bm, size_t start, size_t len) { FOR_RANGE(bm, start, len, bm[_w] &= ~_m); }

bool nm_bitmap_range_is_set(const uint64_t *bm, size_t start, size_t len)
{
    FOR_RANGE(bm, start, len, if ((bm[_w] & _m) != _m) return false);
    return true;
}

bool nm_bitmap_range_is_clear(const uint64_t *bm, size_t start, size_t len)
{
    FOR_RANGE(bm, start, len, if (bm[_w] & _m) return false);
    return true;
}

size_t nm_bitmap_count_range(const uint64_t *bm, size_t start, size_t len)
{
    size_t n = 0;
    FOR_RANGE(bm, start, len, n += (size_t)__builtin_popcountll(bm[_w] & _m));
    return n;
}

/* Shared scan: first bit >= from whose value equals `want`. */
static size_t find_first(const uint64_t *bm, size_t nbits, size_t from, bool want)
{
    if (from >= nbits) return NM_BITMAP_NONE;
    size_t w = from >> 6, nw = nm_bitmap_words(nbits);
    uint64_t word = want ? bm[w] : ~bm[w];
    word &= ~(uint64_t)0 << (from & 63);
    for (;;) {
        if (word) {
            size_t i = (w << 6) + (size_t)__builtin_ctzll(word);
            return i < nbits ? i : NM_BITMAP_NONE;
        }
        if (++w >= nw) return NM_BITMAP_NONE;
        word = want ? bm[w] : ~bm[w];
    }
}

size_t nm_bitmap_find_first_set(const uint64_t *bm, size_t nbits, size_t from) { return find_first(bm, nbits, from, true); }
size_t nm_bitmap_find_first_clear(const uint64_t *bm, size_t nbits, size_t from) { return find_first(bm, nbits, from, false); }

/* Alternate between "first bit of the wanted value" and "first bit of the other
 * value": each candidate run is visited once, and each step skips whole words. */
static size_t find_run(const uint64_t *bm, size_t nbits, size_t len, size_t from, bool want)
{
    if (len == 0 || len > nbits) return NM_BITMAP_NONE;
    size_t i = from;
    while (i < nbits && nbits - i >= len) {
        size_t s = find_first(bm, nbits, i, want);
        if (s == NM_BITMAP_NONE || nbits - s < len) return NM_BITMAP_NONE;
        size_t e = find_first(bm, nbits, s, !want);
        if (e == NM_BITMAP_NONE) e = nbits;
        if (e - s >= len) return s;
        i = e;
    }
    return NM_BITMAP_NONE;
}

size_t nm_bitmap_find_clear_run(const uint64_t *bm, size_t nbits, size_t len, size_t from)
{
    return find_run(bm, nbits, len, from, false);
}

size_t nm_bitmap_find_set_run(const uint64_t *bm, size_t nbits, size_t len, size_t from)
{
    return find_run(bm, nbits, len, from, true);
}
