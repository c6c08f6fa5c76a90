/* Internal state of a bmem device: banks, per-bank locks, allocation anchors,
 * and the two search structures (fast column bitboards, paper's bit matrix). */
#ifndef NEARMEM_BMEM_INTERNAL_H
#define NEARMEM_BMEM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nearmem/bmem.h"
#include "nearmem/common.h"

/* Anchor record, one per cell (row, subarray) of a bank, meaningful at the
 * first cell of an allocation: live bit, dimension, shape, generation. The
 * generation survives the free, so a stale handle is recognised. */
#define ANC_LIVE ((uint64_t)1 << 63)
#define ANC_DIM_SHIFT 61
#define ANC_Q_SHIFT 45 /* rows - 1, 16 bits */
#define ANC_P_SHIFT 35 /* subarrays - 1, 10 bits */
#define ANC_GEN_MASK (((uint64_t)1 << 30) - 1)
/* Cached state (parked in a thread cache; not live, still claimed): the
 * cached bit plus the owning cache's 4-bit tag (1..15), in bits 30..34 which
 * live anchors leave zero. */
#define ANC_CACHED ((uint64_t)1 << 34)
#define ANC_TAG_SHIFT 30
#define ANC_TAG_MASK ((uint64_t)0xf << ANC_TAG_SHIFT)
/* dim | rows-1 | subarrays-1 (bits 35..62): the shape key of a cache bin */
#define ANC_SHAPE_SHIFT 35

/* Handle: bank 8 bits | first row 16 | first subarray 10 | generation 30. */
#define H_BANK_SHIFT 56
#define H_ROW_SHIFT 40
#define H_SUB_SHIFT 30

/* Fast structure: one bitboard per subarray over its rows (1 = free), so a
 * tall allocation updates nrows/64 words per subarray, and a search ANDs the
 * columns of a subarray window and runs a word-level run search down it. */
typedef struct bmem_fast {
    uint64_t *col;      /* subarrays * rw words; column s at col + s * rw */
    uint32_t *colfree;  /* free cells per subarray (a cheap filter) */
} bmem_fast;

/* Paper baseline (Sec. 4.2): one bit per (row, subarray), 1 = allocated,
 * row-major; the subarray contig vector (longest free subarray run per row)
 * and the row contig vector (longest free row run per subarray). */
typedef struct bmem_paper {
    uint64_t *bits; /* rows * subarrays bits */
    uint32_t *sc;   /* [rows] */
    uint32_t *rc;   /* [subarrays] */
} bmem_paper;

typedef struct bmem_bank {
    _Atomic unsigned lock;
    _Atomic uint64_t free_cells; /* written under the lock; read as a hint */
    unsigned live;               /* allocations in this bank, cached ones included */
    /* rows * subarrays records. Written under the bank lock, except that the
     * thread holding an allocation moves its anchor live -> cached (free) and
     * the thread holding a cached entry moves it cached -> live (malloc):
     * atomics (relaxed) so that the lock holders' reads are race-free. */
    _Atomic uint64_t *anchor;
    union {
        bmem_fast fast;
        bmem_paper paper;
    } u;
} __attribute__((aligned(NM_CACHELINE))) bmem_bank;

/* Per-thread cache of one thread for one device (bmem_cache.c). Bins are
 * direct-mapped by shape; a bin holds up to `cap` handles of one shape, used
 * LIFO. The owner thread alone changes bins and entries; statistics read them
 * from other threads, hence relaxed atomics (plain moves on x86). */
#define BMEM_TC_BINS 16
typedef struct bmem_tc_ent {
    _Atomic bmem_ptr h;     /* the handle as freed (read by statistics) */
    _Atomic uint64_t *a;    /* its anchor (owner only) */
} bmem_tc_ent;

typedef struct bmem_tc_bin {
    _Atomic uint32_t key; /* anchor bits 35..62 of the shape; 0 = never used */
    _Atomic uint32_t n;
    /* owner only, set with key: */
    uint32_t lim;         /* entries this bin may hold (its share of the budget) */
    uint64_t parked;      /* anchor of a parked entry minus its generation */
    uint64_t live;        /* anchor of a live allocation minus its generation */
    uint64_t cells;       /* cells per entry */
    bmem_tc_ent e[BMEM_CACHE_MAX]; /* the first cap are used */
} bmem_tc_bin;

typedef struct bmem_tcache {
    uint64_t dev_id;  /* the device's serial number: never reused, unlike its address */
    uint64_t tag;     /* ANC_TAG bits written into anchors parked here */
    unsigned cap;     /* entries per bin */
    uint64_t budget;   /* cells this cache may hold */
    uint64_t reserved; /* sum over keyed bins of lim * cells <= budget (owner only) */
    bmem_dev *dev;    /* NULL once the device is destroyed; under g_tc_mu */
    struct bmem_tcache *tnext;        /* the owner thread's caches */
    struct bmem_tcache *dnext, *dprev; /* the device's caches; under g_tc_mu */
    bmem_tc_bin *last; /* the bin used last (checked before hashing) */
    /* the handle the last cache hit returned, its anchor and bin: a free of
     * that handle (malloc-then-free, the commonest pattern) skips decoding */
    bmem_ptr last_h;          /* starts as 0 (BMEM_NULL) with last_a = &none */
    _Atomic uint64_t *last_a;
    _Atomic uint64_t none;    /* always 0: matches no live anchor */
    bmem_tc_bin bin[BMEM_TC_BINS];
} bmem_tcache;

struct bmem_dev {
    /* hot fields first (one cache line with cfg) */
    uint64_t id;           /* serial number (thread caches key on it) */
    unsigned cache;        /* entries per cache bin; 0 = cache off */
    bmem_bank *banks;
    bmem_config cfg;
    uint64_t tc_budget;    /* cells one thread's cache may hold */
    unsigned tc_serial;    /* caches created so far (tags); under g_tc_mu */
    bmem_tcache *tcs;      /* threads' caches for this device; under g_tc_mu */
    _Atomic uint64_t tc_conflicts;
    unsigned rw; /* words per column bitboard = ceil(rows / 64) */
    /* size-mapping shortcuts: requests of at most this many bytes are one
     * cell (horizontal) or one subarray x 8*size rows (vertical) */
    size_t h_cell_bytes, v_col_bytes;
};

/* Search-structure operations; the bank lock is held by the caller. */
nm_err bmem_fast_init(const bmem_dev *d, bmem_bank *b);
void bmem_fast_fini(bmem_bank *b);
/* bmem_fast_find/fits/mark/cell_free: static inline in bmem_fast.h */

nm_err bmem_paper_init(const bmem_dev *d, bmem_bank *b);
void bmem_paper_fini(bmem_bank *b);
bool bmem_paper_find(const bmem_dev *d, const bmem_bank *b, unsigned p, unsigned q, unsigned *row, unsigned *sub);
bool bmem_paper_fits(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q);
void bmem_paper_mark(const bmem_dev *d, bmem_bank *b, unsigned row, unsigned sub, unsigned p, unsigned q, bool alloc);
bool bmem_paper_cell_free(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub);

#include "bmem_fast.h"

static inline bool bmem_cell_free(const bmem_dev *d, const bmem_bank *b, unsigned row, unsigned sub)
{
    return d->cfg.algo == BMEM_ALGO_PAPER ? bmem_paper_cell_free(d, b, row, sub) : bmem_fast_cell_free(d, b, row, sub);
}

/* ---- thread cache (bmem_cache.c) ---- */
extern _Thread_local bmem_tcache *bmem_t_tc __attribute__((tls_model("initial-exec")));
/* The calling thread's cache for d, created on first use; NULL when it cannot
 * be created (no host memory). Only for devices with the cache on. */
bmem_tcache *bmem_tc_get_slow(bmem_dev *d);
static inline bmem_tcache *bmem_tc_get(bmem_dev *d)
{
    bmem_tcache *tc = bmem_t_tc;
    if (NM_LIKELY(tc && tc->dev_id == d->id)) return tc;
    return bmem_tc_get_slow(d);
}
/* The calling thread's cache for d if it exists (never creates one). */
bmem_tcache *bmem_tc_find(const bmem_dev *d);
/* Return every entry of tc (the caller's own cache) to its bank. */
void bmem_tc_flush(bmem_dev *d, bmem_tcache *tc);
/* Does tc hold a rectangle (in bank bi)? */
bool bmem_tc_holds_bank(const bmem_tcache *tc, unsigned bi);
bool bmem_tc_nonempty(const bmem_tcache *tc);
/* Device creation / destruction hooks. */
void bmem_tc_dev_init(bmem_dev *d);
void bmem_tc_dev_fini(bmem_dev *d);
/* Cached allocations and cells per bank, summed over every thread's cache
 * (allocs/cells have banks entries, zeroed by the caller). */
void bmem_tc_count(bmem_dev *d, uint64_t *allocs, uint64_t *cells);

static inline uint32_t bmem_tc_key(bmem_dim dim, unsigned p, unsigned q)
{
    return (uint32_t)(((uint64_t)dim << (ANC_DIM_SHIFT - ANC_SHAPE_SHIFT)) |
                      ((uint64_t)(q - 1) << (ANC_Q_SHIFT - ANC_SHAPE_SHIFT)) | (uint64_t)(p - 1));
}
static inline unsigned bmem_tc_bin_of(uint32_t key) { return (unsigned)((key * 0x9E3779B1u) >> 28); }
static inline uint64_t bmem_key_cells(uint32_t key)
{
    return (uint64_t)(((key >> (ANC_Q_SHIFT - ANC_SHAPE_SHIFT)) & 0xffff) + 1) * ((key & 0x3ff) + 1);
}

static inline void bmem_s_mark(const bmem_dev *d, bmem_bank *b, unsigned r, unsigned s, unsigned p, unsigned q, bool a)
{
    if (d->cfg.algo == BMEM_ALGO_PAPER)
        bmem_paper_mark(d, b, r, s, p, q, a);
    else
        bmem_fast_mark(d, b, r, s, p, q, a);
}

void bmem_bank_lock_slow(bmem_bank *b);
static inline void bmem_bank_lock(bmem_bank *b)
{
    if (NM_LIKELY(!atomic_exchange_explicit(&b->lock, 1, memory_order_acquire))) return;
    bmem_bank_lock_slow(b);
}
static inline void bmem_bank_unlock(bmem_bank *b) { atomic_store_explicit(&b->lock, 0, memory_order_release); }

#endif
