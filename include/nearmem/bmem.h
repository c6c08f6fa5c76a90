/* bmem: bit-contiguous 2-D allocation for Micron In-Memory Intelligence DRAM
 * (Leidel, MCHPC'17; papers/bmem-imi.md).
 *
 * Device model (paper Sec. 3.1, 4.2): `banks` banks, each of `subarrays`
 * subarrays side by side; a subarray has `rows` rows of `columns` bits. The
 * allocation unit is one row of one subarray (a "cell", C bits). An allocation
 * is a rectangle of cells inside one bank: `nsubs` adjacent subarrays x `nrows`
 * adjacent rows. docs/bmem.md defines how a byte size becomes a rectangle.
 *
 * Placement contract (both algorithms, thread cache off): inside a bank, the
 * lowest first subarray that fits, then the lowest first row (column-major
 * first fit). With the cache on, a request first takes back the caller's most
 * recently freed rectangle of the same shape, if any. Banks are
 * tried starting at the calling thread's home bank (threads are spread over
 * banks in order of first use; the first thread that allocates gets bank 0),
 * then in increasing order, wrapping. So the paper's baseline and the fast
 * structure with the cache off return identical rectangles for the same
 * sequence of calls.
 *
 * Handles: a bmem_ptr is an opaque non-zero 64-bit value, not a host address
 * (IMI rows are not host-addressable through the allocator). It encodes the
 * bank, first row, first subarray and a generation, so bmem_free finds the
 * allocation in O(1) and detects stale and forged handles.
 *
 * Thread safety: every bmem_dev_* call is thread-safe (one lock per bank);
 * create/destroy and the paper-style global bmem_init/bmem_dtor are not.
 *
 * Thread cache (default for BMEM_ALGO_FAST; docs/bmem.md "Thread cache"): a
 * free by a thread parks the rectangle in that thread's small cache for the
 * device, still claimed in its bank, and the thread's next request of the same
 * shape takes it back without the bank lock. The caller's cache is flushed on
 * bmem_dev_flush_thread_cache, before a request would fail with NM_ENOMEM,
 * at thread exit and at device destroy. Other threads' caches are never
 * flushed by a thread (they hold at most 1/16 of one bank's cells each). */
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

/* Thread cache setting (bmem_config.cache). */
#define BMEM_CACHE_DEFAULT 8 /* entries per shape bin when cache == 0 (fast) */
#define BMEM_CACHE_MAX 16
#define BMEM_CACHE_OFF (-1)

typedef struct bmem_config {
    uint32_t rows;      /* rows per subarray */
    uint32_t columns;   /* bits per row of one subarray */
    uint32_t subarrays; /* subarrays per bank */
    uint32_t banks;
    bmem_algo algo;
    /* Per-thread cache of freed rectangles, in entries per shape bin:
     * 0 = the default (BMEM_CACHE_DEFAULT for BMEM_ALGO_FAST, off for
     * BMEM_ALGO_PAPER, which is the paper's algorithm as published);
     * BMEM_CACHE_OFF = off (every call takes its bank lock; placement is the
     * exact first fit of the contract above); 1..BMEM_CACHE_MAX. */
    int cache;
} bmem_config;

/* Where an allocation lives. */
typedef struct bmem_geom {
    unsigned bank;
    unsigned sub, nsubs; /* first subarray, subarray count */
    unsigned row, nrows; /* first row, row count */
    bmem_dim dim;
} bmem_geom;

/* Cells are (row, subarray) pairs. cells_allocated + cells_cached + cells_free
 * = all cells: cached cells belong to freed allocations parked in threads'
 * caches (claimed in the bank, not live). Exact when no other thread is
 * allocating or freeing on the device; a momentary estimate otherwise. */
typedef struct bmem_bank_stats {
    uint64_t cells_allocated, cells_free, cells_cached;
    unsigned allocations, cached; /* live allocations; freed rectangles in caches */
    /* Largest free rectangle (by area; ties: more rows). 0 x 0 when full. */
    unsigned largest_free_rows, largest_free_subs;
} bmem_bank_stats;

typedef struct bmem_stats {
    uint64_t cells_total, cells_allocated, cells_free, cells_cached;
    uint64_t allocations, cached;
    /* cached entries found claimed by someone else when reused or flushed
     * (only a caller's data race, two concurrent frees of one handle, does
     * that; the entry is dropped, never handed out) */
    uint64_t cache_conflicts;
    uint64_t bytes_total; /* rows * subarrays * banks * columns / 8 */
} bmem_stats;

typedef struct bmem_dev bmem_dev;

/* Device lifecycle. NM_ERANGE for a zero or absurd geometry or a cache
 * setting outside BMEM_CACHE_OFF..BMEM_CACHE_MAX, NM_EINVAL for a NULL
 * argument or unknown algorithm. Destroy discards every thread's cache for the
 * device; threads that used it may still be running or exiting. */
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
 * allocation. NM_EDOUBLEFREE: this allocation was already freed (also while
 * it sits in a thread cache, and after its cells were reused). The device is
 * unchanged on error. With the thread cache on, two frees of one handle that
 * race each other (a data race in the caller, like two concurrent free()s of
 * one pointer) are not guaranteed to be told apart; with BMEM_CACHE_OFF
 * exactly one of them succeeds. */
nm_err bmem_dev_free(bmem_dev *dev, bmem_ptr p);

/* Return the calling thread's cached rectangles for this device to their
 * banks (the cache is emptied, the cells become free). NM_OK when there is
 * nothing to flush or the cache is off; NM_EINVAL for a NULL device. */
nm_err bmem_dev_flush_thread_cache(bmem_dev *dev);
nm_err bmem_dev_geom(bmem_dev *dev, bmem_ptr p, bmem_geom *out);

/* Statistics. per_bank may be NULL, else it has cfg->banks entries. The
 * largest free rectangle costs O(rows * subarrays) per bank and counts
 * cached cells as taken. */
nm_err bmem_dev_stats(bmem_dev *dev, bmem_stats *out, bmem_bank_stats *per_bank);

/* Snapshot of one bank: out[row * subarrays + sub] = 0 when free,
 * BMEM_SNAP_CACHED for a rectangle parked in a thread cache, else 1 +
 * (allocation index mod 254) so that neighbours differ (for maps). */
#define BMEM_SNAP_CACHED 255
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
