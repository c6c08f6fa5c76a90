/* PIM-malloc: dynamic MRAM allocation for UPMEM-style DPUs (Lee et al., "PIM-malloc").
 *
 * One allocator instance manages one DPU's MRAM heap. It is written against a
 * small "DPU environment" (nm_pimm_env): MRAM DMA with the UPMEM rules (8-byte
 * aligned, 8..2048 bytes), the allocator mutex and the tasklet id (its
 * compute is costed from its compiled code on the emulated DPU). The same code therefore runs on host memory in the
 * unit tests and on the emulated PIM machine (src/pim) in the benchmarks.
 *
 * Variants (selected at init, Sec. III-B, IV-A, IV-B, VI-D of the paper):
 *   STRAWMAN  buddy_alloc_PIM_DRAM: one buddy tree over the heap, 32 B grain
 *             (20 levels for 32 MiB), one mutex, coarse WRAM metadata buffer.
 *   SW        PIM-malloc-SW: per-tasklet thread caches (size classes 16 B..2 KiB
 *             carved from 4 KiB blocks, a bitmap per class, lock-free for the
 *             owner) over a depth-13 buddy backend with the coarse buffer;
 *             thread caches pre-populated at init.
 *   HWSW      PIM-malloc-HW/SW: SW with the buddy cache (fully associative LRU
 *             CAM of 4-byte metadata entries) modeled as a hardware unit.
 *   LAZY      SW without pre-population.
 *   PINNED    beyond the paper: SW whose buddy-tree top levels live in WRAM
 *             under a byte budget (the whole depth-13 tree is 4 KiB); deeper
 *             nodes are read/written with single 8-byte DMAs.
 *   ADAPTIVE  beyond the paper: PINNED metadata, no per-class pre-population,
 *             but one untyped spare 4 KiB block per tasklet taken by whichever
 *             class misses first (lazy's fragmentation, sw's first allocation).
 *
 * Addresses are 32-bit MRAM addresses; 0 is never a heap address (the heap
 * base must be > 0), so 0 means "no memory" as in the paper's pimMalloc. */
#ifndef NEARMEM_PIM_MALLOC_H
#define NEARMEM_PIM_MALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "nearmem/common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nm_pimm_variant {
    NM_PIMM_STRAWMAN = 0,
    NM_PIMM_SW,
    NM_PIMM_HWSW,
    NM_PIMM_LAZY,
    NM_PIMM_PINNED,
    NM_PIMM_ADAPTIVE,
    NM_PIMM_VARIANT_COUNT
} nm_pimm_variant;

const char *nm_pimm_variant_name(nm_pimm_variant v);
/* Parse "strawman", "sw", "hwsw", "lazy", "pinned", "adaptive"; -1 if unknown. */
int nm_pimm_variant_parse(const char *name);

#define NM_PIMM_MAX_CLASSES 8
#define NM_PIMM_MAX_TASKLETS 24
#define NM_PIMM_BLOCK 4096u /* thread-cache block and buddy-backend grain (Sec. IV-A) */

/* The DPU environment the allocator runs in. All calls come from the tasklet
 * that runs the allocator code. mram_read/mram_write follow the UPMEM DMA
 * rules; the allocator never breaks them (tests check). */
typedef struct nm_pimm_env {
    void *ctx;
    void (*mram_read)(void *ctx, uint32_t mram_addr, void *wram, uint32_t nbytes);
    void (*mram_write)(void *ctx, const void *wram, uint32_t mram_addr, uint32_t nbytes);
    void (*lock)(void *ctx);   /* the allocator's backend mutex */
    void (*unlock)(void *ctx);
    unsigned (*me)(void *ctx); /* tasklet id, 0..tasklets-1 */
    /* Optional: execute `n` buddy-cache instructions (init_bc/lookup_bc/
     * read_bc/write_bc, paper Sec. IV-B) on a modeled hardware unit (NULL:
     * not counted). On the DPU the core calls the SDK directly instead
     * (src/pim_malloc/pimm_internal.h). */
    void (*hw_op)(void *ctx, uint32_t n);
} nm_pimm_env;

typedef struct nm_pimm_config {
    nm_pimm_variant variant;
    uint32_t heap_base;  /* MRAM address of the heap, > 0, multiple of 4 KiB */
    uint32_t heap_size;  /* power of two, >= 8 KiB (default 32 MiB) */
    uint32_t meta_base;  /* MRAM address of the allocator's MRAM metadata (8-aligned); 0 = right after the heap */
    unsigned tasklets;   /* thread caches to create, 1..24 */
    unsigned nclasses;   /* 0 = the paper's 8 pow2 classes 16 B..2 KiB */
    uint32_t classes[NM_PIMM_MAX_CLASSES]; /* ascending multiples of 8, 16..2048 */
    uint32_t strawman_grain; /* minimum block of the straw-man tree (default 32 B) */
    uint32_t swbuf_bytes;    /* coarse WRAM metadata buffer (default 256 B; see docs) */
    unsigned bc_entries;     /* buddy-cache entries of 4 B (default 16 = 64 B) */
    uint32_t pin_budget;     /* WRAM bytes of pinned tree for PINNED/ADAPTIVE (default 4096) */
    uint32_t prepopulate;    /* NM_PIMM_PREPOP_*: pre-populate the thread caches at init */
    /* Coarse buffer (strawman, sw, lazy): false (default) = the paper's flush,
     * every miss writes the whole buffer back (Fig. 13a: "Flush all the metadata
     * from SW buff."); true = write it back only when modified (an optimization
     * the paper does not describe). */
    bool swbuf_dirty_only;
} nm_pimm_config;

enum {
    NM_PIMM_PREPOP_VARIANT = 0, /* as the variant says (sw, hwsw, pinned: yes; lazy, adaptive: no) */
    NM_PIMM_PREPOP_ON = 1,
    NM_PIMM_PREPOP_OFF = 2
};

/* Defaults of the paper's evaluation (Sec. V): 32 MiB heap, 8 classes, 16 tasklets. */
void nm_pimm_config_default(nm_pimm_config *c, nm_pimm_variant v, uint32_t heap_base);

/* Per-allocator (per-DPU) statistics. Counters are summed over tasklets. */
typedef struct nm_pimm_stats {
    uint64_t mallocs, frees;
    uint64_t fail_size; /* pimMalloc(0) or larger than the heap */
    uint64_t fail_oom;  /* no block left */
    uint64_t tc_hits;      /* served by the thread cache (no backend) */
    uint64_t tc_misses;    /* thread-cache misses: a new 4 KiB block from the backend */
    uint64_t tc_spare;     /* ADAPTIVE: misses served by the tasklet's spare block */
    uint64_t bypass;       /* large requests served by the buddy backend directly */
    uint64_t backend_ops;  /* buddy allocations + frees */
    uint64_t bad_free;     /* not an allocated block start / outside the heap */
    uint64_t misaligned_free;
    uint64_t double_free;
    uint64_t remote_free;  /* frees of another tasklet's cached block: queued, applied at the owner's next pimMalloc */
    uint64_t meta_accesses, meta_hits; /* buddy-tree node accesses; those served from WRAM/buddy cache */
    uint64_t meta_dma_read, meta_dma_written; /* buddy-tree metadata bytes moved MRAM<->WRAM */
    uint64_t blk_dma;       /* thread-cache block-table bytes moved */
    uint64_t reserved, reserved_peak; /* bytes taken from the buddy backend ("A" of A/U) */
    uint32_t wram_bytes;     /* WRAM the allocator keeps (thread caches, buffer, pinned tree) */
    uint32_t mram_meta_bytes;
} nm_pimm_stats;

typedef struct nm_pimm nm_pimm;

/* Create an allocator (host memory holds the WRAM state) and initialize its
 * MRAM metadata through `env` (run by one tasklet, like the paper's
 * initAllocator). Pre-populates thread caches for SW/HWSW/PINNED. */
nm_err nm_pimm_create(nm_pimm **out, const nm_pimm_config *cfg, const nm_pimm_env *env);
void nm_pimm_destroy(nm_pimm *h);

/* MRAM address of a block of >= size bytes, 8-aligned; 0 for size 0, sizes
 * beyond the heap, or out of memory (the allocator stays usable). */
uint32_t nm_pimm_malloc(nm_pimm *h, uint32_t size);
/* Free a block, from any tasklet. Errors (nothing changes): NM_EALIGN
 * misaligned, NM_EBADFREE not a block this allocator returned, NM_EDOUBLEFREE
 * already free. ptr 0 is a no-op. Each error is also counted. A small block of
 * another tasklet's cache is queued for its owner (lock-free caches) and
 * applied at the owner's next pimMalloc; an invalid or double free found
 * then is counted in the statistics (it cannot be returned to the caller). */
nm_err nm_pimm_free(nm_pimm *h, uint32_t ptr);

/* Return the calling tasklet's completely free thread-cache blocks to the
 * backend (the heap is then empty again once everything is freed). */
void nm_pimm_release_cache(nm_pimm *h);

void nm_pimm_get_stats(const nm_pimm *h, nm_pimm_stats *out);
void nm_pimm_reset_counters(nm_pimm *h); /* zero event counters, keep reserved/peak */
const nm_pimm_config *nm_pimm_get_config(const nm_pimm *h);
/* MRAM bytes the allocator needs after meta_base for this configuration. */
uint32_t nm_pimm_mram_meta_bytes(const nm_pimm_config *cfg);

/* Consistency check of the buddy tree and block table (reads MRAM through env,
 * charges nothing to statistics). NM_OK or NM_ECORRUPT with a message. Sets
 * *free_bytes to the free bytes the tree holds when non-NULL. Not concurrent. */
nm_err nm_pimm_check(nm_pimm *h, uint64_t *free_bytes);


#ifdef __cplusplus
}
#endif
#endif
