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
    unsigned live;               /* allocations in this bank */
    uint64_t *anchor;            /* rows * subarrays records */
    union {
        bmem_fast fast;
        bmem_paper paper;
    } u;
} __attribute__((aligned(NM_CACHELINE))) bmem_bank;

struct bmem_dev {
    bmem_config cfg;
    unsigned rw; /* words per column bitboard = ceil(rows / 64) */
    /* size-mapping shortcuts: requests of at most this many bytes are one
     * cell (horizontal) or one subarray x 8*size rows (vertical) */
    size_t h_cell_bytes, v_col_bytes;
    bmem_bank *banks;
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

void bmem_bank_lock_slow(bmem_bank *b);
static inline void bmem_bank_lock(bmem_bank *b)
{
    if (NM_LIKELY(!atomic_exchange_explicit(&b->lock, 1, memory_order_acquire))) return;
    bmem_bank_lock_slow(b);
}
static inline void bmem_bank_unlock(bmem_bank *b) { atomic_store_explicit(&b->lock, 0, memory_order_release); }

#endif
