/* Internal state of one PIM-malloc instance (one DPU). Everything in this
 * struct stands for WRAM; MRAM is reached only through env.mram_read/write. */
#ifndef NEARMEM_PIMM_INTERNAL_H
#define NEARMEM_PIMM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "nearmem/common/sizeclass.h"
#include "nearmem/pim_malloc.h"

/* Buddy-tree node states, 2 bits each (Sec. VI-A: "each tree node uses 2 bits").
 * The paper names three states; the fourth marks the node where an allocated
 * block starts, which lets pimFree find the block size and reject interior
 * pointers and double frees without any per-block header. */
enum { ND_FREE = 0, ND_PART = 1, ND_FULL = 2, ND_ALLOC = 3 };

enum { META_SWBUF = 0, META_BCACHE, META_PINNED };

/* Where the allocator's own state lives: host memory for the host stand-in,
 * WRAM on the DPU (a kernel built with nearmem-dpu-cc: dpu/pim_malloc_dpu.c
 * reserves an arena of NM_PIMM_DPU_WRAM_BYTES among its globals, counted in
 * the DPU's 64 KiB; the per-tasklet statistics, which a production build
 * would not keep, sit in a separate array). */
#ifdef __NEARMEM_DPU__
#include <stdbool.h>
#include <stddef.h>
void *nm_pimm__wram_calloc(size_t n, size_t size, bool stats);
#define PIMM_CALLOC(n, sz) nm_pimm__wram_calloc((n), (sz), false)
#define PIMM_CALLOC_STATS(n, sz) nm_pimm__wram_calloc((n), (sz), true)
#define PIMM_FREE(p) ((void)(p)) /* the arena is reset as a whole */
#else
#define PIMM_CALLOC(n, sz) calloc((n), (sz))
#define PIMM_CALLOC_STATS(n, sz) calloc((n), (sz))
#define PIMM_FREE(p) free(p)
#endif

/* The environment. On the DPU (a kernel built with nearmem-dpu-cc) it is the
 * SDK itself, called directly as a DPU-only allocator would (an indirect call
 * per DMA would be costed as DPU code); dpu/pim_malloc_dpu.c defines these.
 * Elsewhere (the host stand-in) through nm_pimm_env. */
#ifdef __NEARMEM_DPU__
#include <nearmem_pim.h>
void nm_pimm__dpu_read(uint32_t addr, void *wram, uint32_t n);
void nm_pimm__dpu_write(const void *wram, uint32_t addr, uint32_t n);
void nm_pimm__dpu_lock(void);
void nm_pimm__dpu_unlock(void);
unsigned nm_pimm__dpu_me(void);
void nm_pimm__dpu_hw(uint32_t n);
#define ENV_READ(h, a, d, n) ((void)(h), nm_pimm__dpu_read((a), (d), (n)))
#define ENV_WRITE(h, s, a, n) ((void)(h), nm_pimm__dpu_write((s), (a), (n)))
#define ENV_LOCK(h) ((void)(h), nm_pimm__dpu_lock())
#define ENV_UNLOCK(h) ((void)(h), nm_pimm__dpu_unlock())
#define ENV_ME(h) ((void)(h), nm_pimm__dpu_me())
#define ENV_HW(h, n) ((void)(h), nm_pimm__dpu_hw(n))
/* Modeled hardware (the buddy cache's instructions): not costed as code. */
#define NM_PIMM_HW NM_PIM_HW_MODEL
/* Statistics are the emulator's instrumentation, which a production build
 * would not keep: not costed (NM_PIM_UNCOSTED). */
NM_PIM_UNCOSTED __attribute__((unused)) static void nm_pimm__stat(uint64_t *c, uint64_t n) { *c += n; }
#define STAT(lv, n) nm_pimm__stat(&(lv), (uint64_t)(n))
#else
#define ENV_READ(h, a, d, n) (h)->env.mram_read((h)->env.ctx, (a), (d), (n))
#define ENV_WRITE(h, s, a, n) (h)->env.mram_write((h)->env.ctx, (s), (a), (n))
#define ENV_LOCK(h) (h)->env.lock((h)->env.ctx)
#define ENV_UNLOCK(h) (h)->env.unlock((h)->env.ctx)
#define ENV_ME(h) (h)->env.me((h)->env.ctx)
#define ENV_HW(h, n) ((h)->env.hw_op ? (h)->env.hw_op((h)->env.ctx, (n)) : (void)0)
#define NM_PIMM_HW
#define NM_PIM_UNCOSTED
#define STAT(lv, n) ((lv) += (uint64_t)(n))
#endif

/* Block-table record in MRAM, one per 4 KiB heap block (thread-cache state of
 * blocks that are not some tasklet's active block), 8-aligned. The first 48
 * bytes belong to the owner tasklet (lock-free). The rest is touched only
 * under the allocator mutex: rbits, one bit per 8-byte unit of the block,
 * marks frees by other tasklets waiting for the owner, and rnext links the
 * blocks that have such frees into the owner's inbox. */
#define BLK_TC 1u    /* block belongs to a thread cache */
#define BLK_SPARE 2u /* ADAPTIVE: untyped spare of a tasklet */
typedef struct blkrec {
    uint8_t flags, owner, cls, pad0;
    uint32_t pad1;
    uint16_t nfree, prev, next, pad2; /* prev/next: block index + 1, 0 = none */
    uint64_t bits[4];                 /* 1 = free slot (paper, Sec. IV-A) */
    uint16_t rnext, queued, pad3[2];  /* next block in the owner's inbox (index + 1); on it */
    uint64_t rbits[8];                /* frees by other tasklets pending, by 8-byte unit */
} blkrec;
_Static_assert(sizeof(blkrec) == 120, "block record is 120 bytes");
#define REC_REMOTE 48u /* offset of rnext..rbits (72 bytes) */
#define REC_RBITS 56u

typedef struct tclass {
    uint32_t active;  /* block index + 1 of the active block, 0 = none */
    uint16_t nfree;   /* free slots of the active block */
    uint16_t partial; /* head of the list of owned blocks with free slots */
    uint64_t bits[4];
} tclass;

typedef struct tcache {
    tclass c[NM_PIMM_MAX_CLASSES];
    uint32_t spare; /* ADAPTIVE: block index + 1 */
    uint32_t inbox; /* blocks with frees by other tasklets: first block index + 1, linked by rnext; mutex */
} tcache;

typedef struct bc_entry {
    uint32_t tag; /* word index in the tree */
    uint32_t val;
    uint32_t lru; /* larger = more recently used */
    uint8_t valid, dirty;
} bc_entry;

typedef struct tstats { /* per tasklet, written only by its tasklet */
    uint64_t mallocs, frees, fail_size, fail_oom, tc_hits, tc_misses, tc_spare, bypass;
    uint64_t bad_free, misaligned_free, double_free, remote_free, blk_dma;
    char pad[64];
} tstats;

struct nm_pimm {
    nm_pimm_config cfg;
    nm_pimm_env env;
    int meta_kind;
    bool tcaches; /* false for the straw-man */
    bool prepopulate, spare;
    nm_sizeclasses sc;
    uint32_t slots[NM_PIMM_MAX_CLASSES];
    unsigned maxdepth;    /* leaves are at this depth */
    uint32_t grain;       /* leaf block size */
    uint32_t tree_base;   /* MRAM */
    uint32_t tree_words;  /* 32-bit words of 16 nodes */
    uint32_t tree_bytes;  /* MRAM bytes reserved for the tree */
    uint32_t blk_base;    /* MRAM */
    uint32_t nblocks;
    /* coarse software buffer */
    uint32_t *sb;
    uint32_t sb_words, sb_w0;
    bool sb_valid, sb_dirty;
    /* buddy cache (modeled hardware) */
    bc_entry *bc;
    unsigned bc_n;
    uint32_t bc_clock;
    /* pinned top of the tree */
    uint32_t *pin;
    uint32_t pin_words;
    /* thread caches */
    tcache *tc;
    tstats *ts;
    /* backend counters, updated under the mutex */
    uint64_t backend_ops, meta_accesses, meta_hits, meta_rd, meta_wr, reserved, reserved_peak;
};

/* Bytes taken from / given back to the buddy backend (statistics, and what
 * nm_pimm_check compares the tree with). */
NM_PIM_UNCOSTED __attribute__((unused)) static inline void stat_reserve(struct nm_pimm *h, uint32_t bs)
{
    h->reserved += bs;
    if (h->reserved > h->reserved_peak) h->reserved_peak = h->reserved;
}
NM_PIM_UNCOSTED __attribute__((unused)) static inline void stat_release(struct nm_pimm *h, uint32_t bs) { h->reserved -= bs; }

#endif
