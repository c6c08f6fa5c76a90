/* bmem: bit-contiguous 2-D allocation for Micron In-Memory Intelligence DRAM
 * (Leidel, MCHPC'17; papers/bmem-imi.md).
 *
 * Device model (paper Sec. 3.1, 4.2): `banks` banks, each of `subarrays`
 * subarrays side by side; a subarray has `rows` rows of `columns` bits. The
 * allocation unit is one row of one subarray (a "cell", C bits). An allocation
 * is a rectangle of cells inside one bank: `nsubs` adjacent subarrays x `nrows`
 * adjacent rows. docs/bmem.md defines how a byte size becomes a rectangle.
 *
 * Placement contract (both algorithms): inside a bank, the lowest first row
 * that fits, then the lowest first subarray (first fit, row-major). Banks are
 * tried starting at the calling thread's home bank (threads are spread over
 * banks in order of first use; the first thread that allocates gets bank 0),
 * then in increasing order, wrapping. So the paper's baseline and the fast
 * default return identical rectangles for the same sequence of calls.
 *
 * Handles: a bmem_ptr is an opaque non-zero 64-bit value, not a host address
 * (IMI rows are not host-addressable through the allocator). It encodes the
 * bank, first row, first subarray and a generation, so bmem_free finds the
 * allocation in O(1) and detects stale and forged handles.
 *
 * Thread safety: every bmem_dev_* call is thread-safe (one lock per bank);
 * create/destroy and the paper-style global bmem_init/bmem_dtor are not. */
#ifndef NEARMEM_BMEM_H
#define NEARMEM_BMEM_H

#include <stddef.h>
#include <stdint.h>

#include "nearmem/common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t bmem_ptr;
#define BMEM_NULL ((bmem_ptr)0)

/* Major dimension of an allocation (the paper's BMEM_DIM). */
typedef enum bmem_dim {
    BMEM_HORIZ = 1, /* element bits run along a row */
    BMEM_VERT = 2,  /* element bits run down a column, one row per bit */
    BMEM_RAW = 3    /* given directly as subarrays x rows (bmem_malloc_raw) */
} bmem_dim;

typedef enum bmem_algo {
    BMEM_ALGO_FAST = 0, /* default: per-row bitboards, word-level run search */
    BMEM_ALGO_PAPER = 1 /* baseline: Sec. 4.2 bit matrix + contig vectors */
} bmem_algo;

/* Limits on the geometry ("absurd" beyond these is NM_ERANGE). */
#define BMEM_MAX_ROWS 65536u
#define BMEM_MAX_SUBARRAYS 1024u
#define BMEM_MAX_BANKS 256u
#define BMEM_MAX_COLUMNS (1u << 24)
#define BMEM_MAX_CELLS (1u << 24) /* rows * subarrays * banks */

typedef struct bmem_config {
    uint32_t rows;      /* rows per subarray */
    uint32_t columns;   /* bits per row of one subarray */
    uint32_t subarrays; /* subarrays per bank */
    uint32_t banks;
    bmem_algo algo;
} bmem_config;

/* Where an allocation lives. */
typedef struct bmem_geom {
    unsigned bank;
    unsigned sub, nsubs; /* first subarray, subarray count */
    unsigned row, nrows; /* first row, row count */
    bmem_dim dim;
} bmem_geom;

typedef struct bmem_bank_stats {
    uint64_t cells_allocated, cells_free; /* cells = (row, subarray) pairs */
    unsigned allocations;
    /* Largest free rectangle (by area; ties: more rows). 0 x 0 when full. */
    unsigned largest_free_rows, largest_free_subs;
} bmem_bank_stats;

typedef struct bmem_stats {
    uint64_t cells_total, cells_allocated, cells_free;
    uint64_t allocations;
    uint64_t bytes_total; /* rows * subarrays * banks * columns / 8 */
} bmem_stats;

typedef struct bmem_dev bmem_dev;

/* Device lifecycle. NM_ERANGE for a zero or absurd geometry, NM_EINVAL for a
 * NULL argument or unknown algorithm. */
nm_err bmem_dev_create(const bmem_config *cfg, bmem_dev **out);
void bmem_dev_destroy(bmem_dev *dev);
const bmem_config *bmem_dev_config(const bmem_dev *dev);

/* Byte size -> rectangle (docs/bmem.md "Size mapping"). NM_ERANGE for size 0
 * or more than one bank holds; NM_EINVAL for dim not HORIZ/VERT. */
nm_err bmem_size_to_shape(const bmem_config *cfg, size_t size, bmem_dim dim, unsigned *nsubs, unsigned *nrows);

/* Allocation. On failure *out is BMEM_NULL and the device is unchanged:
 * NM_ERANGE (size 0 / beyond a bank), NM_EINVAL, NM_ENOMEM (no free rectangle
 * of that shape in any bank). */
nm_err bmem_dev_malloc(bmem_dev *dev, size_t size, bmem_dim dim, bmem_ptr *out);
nm_err bmem_dev_malloc_raw(bmem_dev *dev, unsigned nsubs, unsigned nrows, bmem_ptr *out);

/* Co-location (paper Sec. 4.1, "Co-Location of Similar Variables"): place the
 * new allocation in `near`'s bank, starting on `near`'s first row, in the
 * nearest subarrays (right neighbour first, then left, then farther). If that
 * is impossible: with BMEM_NEAR_STRICT fail with NM_ENOMEM, otherwise fall back
 * to first fit in near's bank, then the other banks. dim HORIZ/VERT take a byte
 * size; for BMEM_RAW, size is ignored and nsubs x nrows is used. */
#define BMEM_NEAR_STRICT 1u
nm_err bmem_dev_malloc_near(bmem_dev *dev, size_t size, bmem_dim dim, unsigned nsubs, unsigned nrows,
                            bmem_ptr near, unsigned flags, bmem_ptr *out);

/* NM_EBADFREE: BMEM_NULL, a forged handle, or not the first cell of an
 * allocation. NM_EDOUBLEFREE: this allocation was already freed. The device is
 * unchanged on error. */
nm_err bmem_dev_free(bmem_dev *dev, bmem_ptr p);
nm_err bmem_dev_geom(bmem_dev *dev, bmem_ptr p, bmem_geom *out);

/* Statistics. per_bank may be NULL, else it has cfg->banks entries. The
 * largest free rectangle costs O(rows * subarrays) per bank. */
nm_err bmem_dev_stats(bmem_dev *dev, bmem_stats *out, bmem_bank_stats *per_bank);

/* Snapshot of one bank: out[row * subarrays + sub] = 0 when free, else 1 +
 * (allocation index mod 255) so that neighbours differ (for maps). */
nm_err bmem_dev_snapshot(bmem_dev *dev, unsigned bank, uint8_t *out, size_t out_len);

/* Compact text map of one bank: `row_groups` lines (rows are grouped), one
 * character per subarray: ' ' free, '.' <1/3 allocated, '+' <2/3, '#' more.
 * Writes at most len bytes including the NUL; returns NM_ERANGE if too small. */
nm_err bmem_dev_text_map(bmem_dev *dev, unsigned bank, unsigned row_groups, char *buf, size_t len);

/* The paper's interface (Sec. 4.3) on one process-wide device. bmem_init and
 * bmem_dtor are not thread-safe; the others are. Failures return BMEM_NULL or
 * an nm_err; nm_last_errmsg() says why. */
nm_err bmem_init(uint32_t rows, uint32_t columns, uint32_t subarrays, uint32_t banks);
bmem_ptr bmem_malloc(size_t size, bmem_dim dim);
bmem_ptr bmem_malloc_raw(unsigned subarrays, unsigned rows);
nm_err bmem_free(bmem_ptr p);
void bmem_dtor(void);
bmem_dev *bmem_global(void);

#ifdef __cplusplus
}
#endif
#endif
