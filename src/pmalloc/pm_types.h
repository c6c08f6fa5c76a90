/* PMAlloc internals, the data every layer shares: persistent layout, volatile
 * structures, constants and the helpers that only read or write them (no calls
 * into any file). The functions are declared per layer, each header including
 * the one below: pm_api.h > pm_ops.h > pm_slabs.h > pm_extents.h > pm_media.h >
 * this. See docs/pmalloc.md for the layout, the persistence protocol and the
 * code layout. */
#ifndef PMALLOC_TYPES_H
#define PMALLOC_TYPES_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nearmem/common/sizeclass.h"
#include "nearmem/common/util.h"
#include "nearmem/pmalloc.h"

#include <xxhash.h>

/* The heap. Public calls take a pmalloc_heap handle (an opaque value, never
 * dereferenced) and resolve it to this through the handle table (handle.c), so
 * that a call on a closed handle is an error, not a use after free. */
typedef struct pm_heap pm_heap;

#define PM_PAGE 4096u
#define PM_LINE 64u
#define PM_MAGIC 0x50414548504d4e4eull /* "NNMPHEAP" little-endian */
#define PM_VERSION 3u /* 1, 2: before tagged pointers (refused) */
#define PM_MIN_HEAP (4u << 20)

#define PM_STATE_CLEAN 0x4e41454c43ull      /* "CLEAN" */
#define PM_STATE_RUNNING 0x4e4e4e5552ull    /* "RUNNN" */
#define PM_STATE_RECOVERING 0x5643455272ull /* "rRECV" */

/* Redo rings (redo.c): 32-byte records, 2 per line, in PM_NRINGS rings of
 * ring_recs records; a thread writes its records into a chain of rings taken
 * from a shared pool, one at a time, and a checkpoint returns the rings it
 * settled. */
#define PM_NRINGS 128u
#define PM_RING_MIN 64u   /* records per ring */
#define PM_RING_MAX 4096u
/* Default most records after the checkpoint bound (pmalloc_options.checkpoint_records). */
#define PM_CKPT_RECORDS PMALLOC_CHECKPOINT_RECORDS

/* Bookkeeping log (Sec. 5.3): 1 KiB chunks, line 0 = header, 15 lines of 8 entries. */
#define PM_CHUNK_BYTES 1024u
#define PM_CHUNK_ENTRY_LINES 15u
#define PM_CHUNK_ENTRIES (PM_CHUNK_ENTRY_LINES * 8u)
#define PM_CHUNK_NONE 0xffffffffu
#define PM_BK_LANES 8u
#define PM_CHUNK_MAGIC 0x4b4e4843u /* "CHNK" */

#define PM_SLAB_PAGES (PMALLOC_SLAB_SIZE / PM_PAGE)
#define PM_SLAB_MAGIC 0x42414c53u /* "SLAB" */
#define PM_SLAB_RESERVED_LINES 2u /* header room kept for slab morphing (issue 7) */

#define PM_NCLS_MAX 40u
#define PM_TC_PER_STRIPE 8u
#define PM_RBUF 64u /* remote frees buffered per thread cache */

/* ---- persistent layout ---- */

typedef struct pm_bkdesc { /* a copy of the bookkeeping-log descriptor (large.c) */
    uint64_t w;     /* head chunk (bits 0-31), generation (32-63) */
    uint64_t check;
} pm_bkdesc;

typedef struct pm_gw { /* a copy of the checkpoint bound (redo.c) */
    uint64_t gw;
    uint64_t check;
} pm_gw;

typedef struct pm_super {
    /* lines 0-1: written once at create, covered by `check` */
    uint64_t magic;
    uint32_t version;
    uint32_t model;
    uint64_t heap_size;
    uint32_t stripes; /* default for new slabs (each slab records its own) */
    uint32_t nrings;
    uint32_t nchunks;
    uint32_t nroots;
    uint64_t roots_off, redo_off, bk_off, data_off;
    uint64_t ptr_tag;   /* this heap's tag (pmalloc_ptr bits 44-62), nonzero */
    uint32_t ring_recs; /* records per redo ring (a power of two) */
    uint32_t pad_r;
    uint64_t check;     /* XXH64 of the fields above */
    uint8_t pad0[128 - 96];
    /* line 2: session state */
    uint64_t state;
    uint8_t pad1[56];
    /* line 3: copy A of the bookkeeping-log descriptor (Sec. 5.3): the list's
     * head and generation; copy B is line 17 (large.c) */
    pm_bkdesc bk_a;
    uint8_t pad2[48];
    /* line 4: copy A of the checkpoint bound (redo.c): every operation with a
     * sequence number <= it is settled in the heap; copy B is line 16 */
    pm_gw gw_a;
    uint8_t pad3[48];
} pm_super;
#define PM_GW_B_LINE 16u /* superblock line of the second copy */
/* Superblock lines 17-18: the last settle of the bookkeeping log (large.c):
 * the new counts of the chunks it settled, one commit point for the group. */
#define PM_BK_B_LINE 17u   /* bookkeeping-log descriptor, copy B */
#define PM_SETTLE_LINE 20u /* lines 20-22 */
#define PM_SETTLE_PAIRS 10u
typedef struct pm_settle_rec {
    uint64_t seq;   /* nonzero */
    uint64_t n;     /* pairs */
    uint64_t pair[PM_SETTLE_PAIRS][2]; /* chunk (bits 0-31) | generation (32-63); the chunk's new count word */
    uint64_t check; /* XXH64 of the fields above */
    uint64_t pad;
} pm_settle_rec;
NM_STATIC_ASSERT(sizeof(pm_settle_rec) == 3 * PM_LINE, "settle record is three lines");
NM_STATIC_ASSERT(offsetof(pm_super, state) == 2 * PM_LINE, "state on line 2");
NM_STATIC_ASSERT(offsetof(pm_super, bk_a) == 3 * PM_LINE, "log descriptor on line 3");
NM_STATIC_ASSERT(offsetof(pm_super, gw_a) == 4 * PM_LINE, "checkpoint bound on line 4");

typedef struct pm_chunk_hdr {
    uint32_t magic;
    uint32_t id;
    uint32_t gen;   /* bumped at every reuse: tombstones name (chunk, gen, slot) */
    uint32_t flags; /* PM_CHUNK_INTER: appends interleaved over the entry lines */
    uint64_t next;  /* next chunk of the list (PM_CHUNK_NONE at the tail), bits 0-31; check of it, 32-63 */
    uint64_t count; /* settled appends (recovery reads appends 0..count-1 only), bits 0-31; their digest, 32-63 */
    uint64_t check; /* XXH64 of magic, id, gen, flags */
    uint8_t pad[24];
} pm_chunk_hdr;
#define PM_CHUNK_INTER 1u

/* Bookkeeping-log entry (8 bytes): type in bits 62-63.
 * normal: page index bits 0-35, page count bits 36-61; tombstone: target position. */
#define PM_BK_EXTENT 1ull
#define PM_BK_SLAB 2ull
#define PM_BK_TOMB 3ull
#define PM_BK_TYPE(e) ((e) >> 62)
#define PM_BK_PAGE(e) ((e)&0xfffffffffull)
#define PM_BK_NPAGES(e) (((e) >> 36) & 0x3ffffffull)
/* tombstone target: slot bits 0-6, chunk bits 7-30, chunk generation bits 31-61 */
#define PM_BK_TSLOT(e) ((uint32_t)((e)&127u))
#define PM_BK_TCHUNK(e) ((uint32_t)(((e) >> 7) & 0xffffffu))
#define PM_BK_TGEN(e) ((uint32_t)(((e) >> 31) & 0x7fffffffu))
#define PM_BK_GEN_MASK 0x7fffffffu
#define PM_MAX_CHUNKS (1u << 24)

typedef struct pm_slab_hdr {
    uint32_t magic;
    uint16_t cls;
    uint8_t stripes;
    uint8_t morph_flag; /* 1: morphed once (set after the first morph word; not in `check`) */
    uint32_t block_size;
    uint32_t nblocks;
    uint32_t data_off;  /* from the slab start */
    uint32_t bm_lines;  /* bitmap lines, starting at line 1 */
    uint32_t hdr_lines; /* 1 + bm_lines + reserved */
    uint32_t arena;     /* arena that created it */
    uint32_t node;      /* NUMA node of that arena (issue 7) */
    uint32_t check;     /* low 32 bits of XXH64 of the fields above */
    uint8_t reserved[64 - 40];
} pm_slab_hdr;
NM_STATIC_ASSERT(sizeof(pm_slab_hdr) == PM_LINE, "slab header is one line");
NM_STATIC_ASSERT(sizeof(pm_chunk_hdr) == PM_LINE, "chunk header is one line");

/* Redo record (32 bytes): one per committed operation (redo.c). */
#define PM_OP_ALLOC_SMALL 1u
#define PM_OP_FREE_SMALL 2u
#define PM_OP_ALLOC_LARGE 3u
#define PM_OP_FREE_LARGE 4u
#define PM_OP_SET 5u /* pmalloc_set_root / pmalloc_set_ptr: a pointer store */
#define PM_OP_MASK 7u
#define PM_OP_REMOTE 8u /* flag: the free writes a deallocation-log entry after its commit (remote.c) */
/* loc bits 44-63: how many sequence numbers back the thread's previous record
 * is (0: none, or too far): recovery finds a damaged record that a later one
 * of its thread follows (a torn record is always its thread's last). */
#define PM_REC_LOC_BITS 44u
#define PM_REC_LOC(l) ((l) & ((1ull << PM_REC_LOC_BITS) - 1))
#define PM_REC_BACK(l) ((l) >> PM_REC_LOC_BITS)
#define PM_REC_BACK_MAX ((1ull << (64u - PM_REC_LOC_BITS)) - 1)
typedef struct pm_rec {
    uint64_t seq_op; /* seq << 8 | flags | op; 0 = empty */
    uint64_t block;  /* heap offset of the object (SET: the pointer value stored) */
    uint64_t loc;    /* heap offset of the user pointer (bits 0-43), back distance (44-63) */
    uint64_t aux;    /* size (small: block bytes; large: pages) << 32 | check32 */
} pm_rec;

/* What a committed operation changed in memory and a checkpoint must write
 * back: kept per ring slot in DRAM by the operation's thread. */
typedef struct pm_side {
    uint64_t seq;    /* atomic */
    uint64_t *bitw;  /* the bitmap word (small blocks), or NULL */
    uint64_t *loc;   /* the pointer word, or NULL */
    struct pm_vslab *s; /* the slab whose bit it toggled (its checksum changes by bh), or NULL */
    uint64_t bh;
} pm_side;

/* ---- volatile structures ---- */

struct pm_arena;

typedef struct pm_vslab {
    struct pm_veh *veh;
    pm_slab_hdr *hdr;
    uint64_t *pbm;  /* persistent bitmap (interleaved mapping) */
    char *data;     /* first block */
    uint64_t *vbm;  /* taken = allocated or cached in a tcache (sequential) */
    uint32_t block_size, nblocks, nfree_v, cls, stripes, hint;
    struct pm_arena *arena;
    struct pm_vslab *next, *prev;
    bool in_partial;
    struct pm_rslab *rs; /* NUMA: remote-free state (shadow bitmap), remote.c; NULL until used */
    /* a bit per 16 bytes of the slab (a block start under any geometry), held by
     * the free in progress (atomic): of two concurrent frees of one block exactly
     * one gets past it, before either changes anything (pmalloc.c); with NUMA,
     * a direct and a two-phase free of one block cannot both succeed */
    uint64_t *claim;
    uint32_t gone;        /* atomic: released (or being released); see pm_slab_enter */
    uint64_t digest;      /* atomic: XOR of pm_blk_hash over the blocks set in the bitmap(s) */
    struct pm_vslab *pool_next, *all_next; /* the heap's vslab pool (type-stable, small.c) */
    /* slab morphing (morph.c): old geometry and counters, NULL until the first
     * morph; handshake with lock-free readers; the arena's LRU list */
    struct pm_morph *mo;
    uint32_t busy, morphing; /* atomic */
    struct pm_vslab *lru_next, *lru_prev;
    bool in_lru;
    /* LOG: the clock when it last became empty (arena lock): every record of
     * its blocks is older. It goes back to the extents only once they are
     * settled (gw >= empty_at - 1); until then it waits for a checkpoint, on
     * its arena's partial list (release_wanted; pm_slab_sweep, slab.c) */
    uint64_t empty_at;
    bool release_wanted;
} pm_vslab;

#define PM_VEH_FREE 0
#define PM_VEH_ALLOC 1
#define PM_VEH_SLAB 2
#define PM_VEH_CACHED 3 /* free (tombstoned), held in an arena's extent store (xcache.c) */
#define PM_FBIN_EXACT 256u /* exact-size bins up to 1 MiB */
#define PM_FBIN_SUB 4u     /* larger extents: 4 geometric bins per doubling */
#define PM_FBINS (PM_FBIN_EXACT + 1u + 56u * PM_FBIN_SUB) /* bin 0 unused; up to 2^64 pages */
/* Bin of an extent of npages: exact up to PM_FBIN_EXACT pages, then
 * PM_FBIN_SUB bins per power of two (a bin's extents are within 25% of each
 * other in size). One list of every larger extent, walked for the best fit
 * under large_lock, was a third of a large allocation with a few dozen free
 * holes over 1 MiB. Shared by the extent allocator and the arenas' stores. */
static inline unsigned pm_fbin_of(uint64_t npages)
{
    if (npages <= PM_FBIN_EXACT) return (unsigned)npages;
    unsigned k = 63u - (unsigned)__builtin_clzll(npages); /* >= 8 */
    return PM_FBIN_EXACT + 1u + (k - 8u) * PM_FBIN_SUB + (unsigned)((npages >> (k - 2u)) & (PM_FBIN_SUB - 1u));
}

typedef struct pm_veh {
    uint64_t page, npages; /* page index within the data area */
    int state;
    int64_t bkpos;         /* position of its normal log entry, -1 if none */
    struct pm_veh *next, *prev; /* free list (state FREE) */
    pm_vslab *slab;
    bool mark;             /* GC mark for extents */
    bool freeing;          /* ALLOC, a free_from in progress (claimed with a CAS; atomic) */
    bool rec_pending;      /* its log entry is flushed but maybe not drained yet (atomic) */
    bool retained;         /* free and decayed: its pages were returned (hole punched) */
    bool mapped;           /* its inner pages are in the page map too (pm_extent_map; owner) */
    unsigned owner;        /* CACHED: the arena whose extent store holds it, else PM_XC_NOBODY (atomic) */
    uint64_t freed_ns;     /* when it became free */
} pm_veh;

/* Free extents binned by size (the extent allocator's free lists, large.c, and
 * each arena's store, xcache.c): bin n holds extents of exactly n pages
 * (1..PM_FBIN_EXACT), the bins after it larger ones by geometric class;
 * `map` has a bit per non-empty bin. Lists are linked by next/prev. */
typedef struct pm_fbins {
    pm_veh *bin[PM_FBINS];
    uint64_t map[(PM_FBINS + 63) / 64];
} pm_fbins;

static inline void pm_fbins_push(pm_fbins *f, pm_veh *v) /* at the head of its bin */
{
    unsigned b = pm_fbin_of(v->npages);
    v->prev = NULL;
    v->next = f->bin[b];
    if (f->bin[b]) f->bin[b]->prev = v;
    f->bin[b] = v;
    f->map[b / 64] |= 1ull << (b % 64);
}
static inline void pm_fbins_del(pm_fbins *f, pm_veh *v)
{
    unsigned b = pm_fbin_of(v->npages);
    if (v->prev) v->prev->next = v->next;
    else f->bin[b] = v->next;
    if (v->next) v->next->prev = v->prev;
    if (!f->bin[b]) f->map[b / 64] &= ~(1ull << (b % 64));
    v->next = v->prev = NULL;
}
/* First non-empty bin >= b, or 0 if none. */
static inline unsigned pm_fbins_next(const pm_fbins *f, unsigned b)
{
    for (unsigned w = b / 64; w < (PM_FBINS + 63) / 64; w++) {
        uint64_t m = f->map[w];
        if (w == b / 64) m &= ~0ull << (b % 64);
        if (m) return w * 64 + (unsigned)__builtin_ctzll(m);
    }
    return 0;
}
/* Last non-empty bin, or 0. */
static inline unsigned pm_fbins_last(const pm_fbins *f)
{
    for (unsigned w = (PM_FBINS + 63) / 64; w-- > 0;)
        if (f->map[w]) return w * 64 + 63u - (unsigned)__builtin_clzll(f->map[w]);
    return 0;
}
/* Best fit, in O(1) for the common sizes: the smallest non-empty exact bin
 * that fits gives its most recently freed extent (walking it for the lowest
 * address, under the heap-wide extent lock, cost a few dozen cache misses per
 * allocation; recently freed pages are also the ones most likely still in the
 * caches and mapped writable). A geometric bin gives the best fit among its
 * first 16 extents that fit, ties to the lowest address; the request's own
 * geometric bin may hold smaller extents only, then the next one. NULL: none. */
static inline pm_veh *pm_fbins_fit(const pm_fbins *f, uint64_t npages)
{
    pm_veh *best = NULL;
    unsigned b = pm_fbins_next(f, pm_fbin_of(npages));
    if (b && b <= PM_FBIN_EXACT) return f->bin[b];
    for (; b && !best; b = pm_fbins_next(f, b + 1)) {
        unsigned k = 0;
        for (pm_veh *v = f->bin[b]; v && !(best && k >= 16); v = v->next)
            if (v->npages >= npages) {
                k++;
                if (!best || v->npages < best->npages || (v->npages == best->npages && v->page < best->page)) best = v;
            }
    }
    return best;
}

/* A per-arena extent store (xcache.c): the free extents an arena keeps for
 * its own large allocations, served under the arena's own lock instead of the
 * heap-wide extent lock: frees of the arena's threads go in (coalesced with
 * the store's own neighbours), its large mallocs take the best fit out (size
 * bins with the extent allocator's classes, pm_fbin_of). Entries are free in
 * persistent terms (no live log entry), VEHs in state PM_VEH_CACHED with
 * `owner` = the arena; like free extents they map only their first and last
 * page. */
#define PM_XC_NOBODY (~0u)
typedef struct pm_xcache {
    pthread_mutex_t lock;
    pm_fbins bins;         /* its extents by size */
    unsigned n;            /* extents held */
    uint64_t pages;        /* pages held (atomic: read by stats) */
    pm_veh *pool;          /* spare VEHs for splits (state CACHED, owner nobody), linked by next */
    unsigned npool;
    uint64_t idle_check_ns; /* last look for extents idle past the decay time */
} pm_xcache;

typedef struct pm_arena {
    _Alignas(64) pthread_mutex_t lock; /* arenas share no cache line (they are an array) */
    pm_xcache xc;
    pm_vslab *partial[PM_NCLS_MAX];
    unsigned id, node;
    unsigned nthreads; /* thread caches attached (under tc_lock) */
    struct pm_vslab *lru_head, *lru_tail; /* slab morphing: least recently allocated from first */
    bool sweep; /* empty slabs wait for a checkpoint to be released (pm_slab_sweep) */
} pm_arena;

typedef struct pm_tcblk {
    pm_vslab *s;
    uint32_t idx;
} pm_tcblk;

typedef struct pm_tcbin {
    uint8_t n[PMALLOC_MAX_STRIPES];
    uint8_t cursor;
    pm_tcblk *slot; /* [stripes][PM_TC_PER_STRIPE] */
} pm_tcbin;

typedef struct pm_tcache {
    pm_heap *h;
    pm_arena *arena;
    /* its records (redo.c): record k goes to ring seg[(k / ring_recs) % PM_NRINGS] */
    uint64_t nseg;      /* rings taken so far: records < nseg * ring_recs have a slot */
    uint64_t head;      /* records written so far (the next is record head) */
    uint64_t pub;       /* records whose operation is complete (atomic: read by checkpoints) */
    uint64_t settled;   /* records covered by a checkpoint: their rings are given back (atomic) */
    uint8_t seg[PM_NRINGS];
    uint64_t inflight;  /* seq of the logged operation in progress, 1 while taking one, 0 idle */
    uint64_t last_seq;  /* its last record's sequence number (0: none yet) */
    unsigned bk_credit; /* bookkeeping-log appends reserved in advance (pm_bk_reserve) */
    pm_tcbin bins[PM_NCLS_MAX];
    /* Remote frees (blocks of another arena's slabs): their bits are already
     * cleared durably; they go back to their slabs in batches, one lock
     * acquisition per arena per batch, instead of one per free. */
    pm_tcblk rbuf[PM_RBUF];
    unsigned rn;
    struct pm_tcache *next;
    unsigned node;    /* NUMA: node the cache is bound to (numa.c) */
    unsigned nops;    /* NUMA: operations since the last migration check */
    bool pinned;      /* NUMA: bound by pmalloc_numa_set_node, no migration check */
    struct { unsigned log, seg; uint32_t slot; uint64_t gen; bool held; } dl; /* NUMA: a reserved deallocation-log slot (remote.c) */
} pm_tcache;

/* A lane of the bookkeeping log (large.c): the lock its appends take and its
 * share of the log's counts, changed under that lock (relaxed atomics: they
 * are summed under bk_lock), on a cache line of its own so that two threads'
 * appends share none. */
typedef struct pm_bklane {
    pthread_mutex_t lock;
    int64_t live, tombs; /* changes to bk_live_entries and bk_tombs since they were last set */
    int64_t spent;       /* reserved appends made (taken from bk_reserved) */
} __attribute__((aligned(64))) pm_bklane;

typedef struct pm_bkchunk { /* vchunk */
    uint32_t next;
    uint32_t gen;
    uint32_t appended; /* appends so far (stored, maybe not yet written back) */
    uint32_t settled;  /* appends durable and counted in the header */
    uint32_t digest;   /* of the appends so far (XOR of each append's hash) */
    bool in_list;
    bool inter;        /* slot order of its appends (PM_CHUNK_INTER) */
    bool dirty;        /* in the heap's bk_dirty set (large.c) */
} pm_bkchunk;

struct pm_heap {
    pmalloc_heap *handle; /* what the public calls and the simulation hook see */
    uint64_t tagbits;     /* sb->ptr_tag << PMALLOC_PTR_OFFSET_BITS: in every pmalloc_ptr of this heap */
    char *base;
    size_t size;
    pm_super *sb;
    char *data;
    uint64_t data_pages;
    pmalloc_model model;
    pmalloc_persist_mode persist;
    bool eadr;
    bool interleave;   /* runtime interleaving of tcache and WAL (off under eADR) */
    unsigned stripes;  /* for new slabs */
    nm_sizeclasses sc;
    unsigned ncls;
    uint32_t slab_nblocks[PM_NCLS_MAX], slab_bm_lines[PM_NCLS_MAX], slab_data_off[PM_NCLS_MAX];

    /* Two locks, taken in this order: large_lock guards the extent allocator
     * (free bins, carving and coalescing, the VEH pool, nslabs, used_top,
     * decay); bk_lock guards the bookkeeping log (chunks, lanes, counts,
     * reservations, settles, its GCs). A large malloc served by an arena's
     * extent cache and its free take bk_lock only, for the log append. */
    pthread_mutex_t large_lock;
    pthread_mutex_t bk_lock;
    pm_veh **pmap;     /* per data page (atomic access) */
    pm_fbins fbins;    /* free extents, binned by size for best fit without a list walk */
    uint64_t xc_max_pages;    /* per-arena extent store bound (pages) */
    uint64_t xc_max_extent;   /* larger extents bypass the stores (pages) */
    /* VEHs come from a per-heap pool and are only freed at close: a VEH read
     * without the lock (small_lookup, slab_at) is always a VEH, never freed memory */
    pm_veh *veh_pool;  /* free VEHs, linked by next */
    struct pm_vslab *vslab_pool, *vslab_all; /* type-stable vslabs (small.c) */
    void *veh_blocks;  /* allocated pool blocks, linked by their first word */
    /* nextents: the extent count but those taken from or put into the
     * arenas' caches (PMC_XC_EXT): only their sum is the count (atomic) */
    uint64_t free_pages, nextents, nslabs;
    uint64_t decay_ns, last_decay_ns, retained_pages;
    /* pages from here on were never handed out since the heap was created
     * (data_pages for a heap that was opened: unknown, so all may be dirty);
     * decay leaves them alone: nothing of ours is in them */
    uint64_t used_top;
    pm_bkchunk *chunks;
    uint32_t nchunks, bk_tail, bk_list_len, bk_free_count; /* bk_tail: the list's last chunk */
    uint32_t bk_head, bk_gen; /* the list's head and the descriptor's generation */
    /* Append lanes: each arena (id mod PM_BK_LANES) appends into a chunk of its
     * own, so two threads' entries never share a cache line (a flush of a line
     * the other core keeps writing cost ~3x a private one). PM_CHUNK_NONE: none open. */
    uint32_t bk_lane_chunk[PM_BK_LANES];
    pm_bklane bk_ln[PM_BK_LANES];
    /* live normal entries and valid tombstones: these plus the lanes' changes (pm_bk_live, pm_bk_tombs) */
    uint64_t bk_live_entries, bk_tombs;
    /* appends promised to operations that have not made them yet, and the
     * thread caches' unused credits (atomic; pm_bk_reserve): this less the
     * lanes' spent counts */
    uint64_t bk_reserved;
    uint64_t settle_seq;  /* last settle record written (bk_lock) */
    /* chunks that may hold appends not yet settled (bk_lock): a settle
     * visits these instead of the whole list; at most one per lane in use */
    uint32_t bk_dirty[2 * PM_BK_LANES + 2], bk_ndirty;
    uint32_t bk_free_hint; /* where the search for a free chunk starts */
    uint64_t *bk_counts;   /* pm_bk_settle's count words, by chunk (allocated at the first settle) */

    /* arenas and thread caches */
    pm_arena *arenas;
    unsigned narenas, next_arena;
    pthread_key_t tc_key;
    pthread_mutex_t tc_lock;
    pm_tcache *tcaches;
    uint32_t nrings, ring_recs; /* redo rings (redo.c) */
    pm_rec *rings;
    /* the pool of rings (redo.c): seg_lock guards ring_used and seg_free */
    pthread_mutex_t seg_lock;
    uint8_t ring_used[PM_NRINGS];
    unsigned seg_free;     /* rings in the pool (atomic reads) */
    uint64_t seg_pending;  /* rings full of records after the bound, not yet given back (atomic) */
    unsigned seg_cap;      /* a thread takes a ring only while fewer are pending */
    unsigned seg_trig;     /* a checkpoint starts when this many are pending, */
    unsigned seg_low;      /* or when the pool is down to this many and one is */
    unsigned ckpt_records; /* pmalloc_options.checkpoint_records (0: PM_CKPT_RECORDS) */
    pm_side *side;         /* [nrings * ring_recs]: what each record's checkpoint writes back */
    /* the sequence clock: one for the heap, on its own line. A global order of
     * operations (an atomic increment agrees with happens-before) lets
     * recovery pick each block's and each pointer word's last operation. */
    _Alignas(64) uint64_t clock;
    char clock_pad[56];
    pthread_mutex_t ckpt_lock;
    pthread_mutex_t old_lock; /* GC: one old-block free at a time (its checksum word, then its bit; morph.c) */
    struct pm_ckset *ckset;   /* a checkpoint's lines and slabs (hash sets kept between checkpoints; redo.c) */
    uint64_t gw;       /* the checkpoint bound: operations <= it are settled (written under ckpt_lock; atomic) */
    uint32_t sweep_due; /* an arena has empty slabs waiting for a checkpoint (atomic; slab.c) */
    uint64_t c_ckpts;  /* checkpoints (atomic) */

    /* counters: hot ones per thread (pm_ctr_*), rare ones shared atomics */
    uint64_t uid; /* unique per open, keys thread-local caches */
    pthread_mutex_t ctr_lock;
    struct pm_ctrblk *ctrs;
    struct pm_ctrblk *ctr_shared; /* for a thread that could not get its own block */
    uint64_t ctr_base[16]; /* >= PMC_N (asserted below) */
    uint64_t c_bkgc, c_bkfast;

    /* power-failure simulation */
    pthread_mutex_t sim_lock;
    char *shadow;                /* the persisted image: changed only by a thread's drain */
    uint64_t *shadow_stamp;      /* per line: the flush whose content the image holds */
    struct pm_simq *simqs;       /* every thread's flushed-but-undrained lines (persist.c) */
    uint64_t sim_stamp;          /* flush order (under sim_lock) */
    uint64_t sim_flush_no;
    pmalloc_sim_hook sim_hook;
    void *sim_arg;

    pmalloc_recovery_info ri;
    int lock_fd; /* holds an flock on the heap file while it is open */
    struct pm_files *files; /* one file per node (format version 2, files.c); NULL: one file */
    struct pm_numa *numa; /* NUMA topology, node regions, two-phase remote free (numa.c, remote.c) */

    /* slab morphing (morph.c) */
    unsigned morph_su;       /* occupancy threshold in percent; 0 = morphing off */
    uint64_t c_morphs, morph_slabs_in, morph_old_live; /* atomic */
    uint32_t morph_step;     /* step of the morph in progress (testing aid), atomic */

    /* the upcalls of the layers below into the operation layer (pm_upcalls) */
    const struct pm_upcalls *up;
};

/* ==== upcalls (docs/pmalloc.md, "Code layout") ====
 * The files of src/pmalloc call only downward, with three exceptions that the
 * paper's design needs, made through this table (set by pmalloc.c at open) so
 * that no lower file names a function above it:
 * - checkpoint (redo.c): an allocator that is about to reuse memory named by
 *   committed records (an empty slab's release, slab.c; a morph, morph.c) or
 *   whose bookkeeping log is full (pm_bk_reserve, large.c) first settles every
 *   committed operation (Sec. 5.3; docs/pmalloc.md, "Persistence protocol");
 * - sync_arena (remote.c): an arena that cannot fill a thread cache first
 *   applies the remote frees of its slabs (on-demand synchronisation, Sec. 6.2;
 *   small.c);
 * - xsync (remote.c): the same for a node's extents freed by other nodes
 *   before a node-local extent allocation fails (Sec. 6.3; numa.c). */
typedef struct pm_upcalls {
    nm_err (*checkpoint)(pm_heap *h, unsigned flags);
    unsigned (*sync_arena)(pm_heap *h, struct pm_arena *a, int why);
    unsigned (*xsync)(pm_heap *h, unsigned node, int why);
} pm_upcalls;
static inline nm_err pm_up_checkpoint(pm_heap *h, unsigned flags) { return h->up->checkpoint(h, flags); }
static inline unsigned pm_up_sync_arena(pm_heap *h, struct pm_arena *a, int why) { return h->up->sync_arena(h, a, why); }
static inline unsigned pm_up_xsync(pm_heap *h, unsigned node, int why) { return h->up->xsync(h, node, why); }

/* ==== slab morphing (paper Sec. 5.2; morph.c, docs/pmalloc.md "Slab morphing") ====
 *
 * A morphed slab keeps line 0 as written at creation; the 8-byte morph word in
 * its reserved bytes names the line of the active header image (pm_morph_img),
 * which holds the current geometry and the geometry of the old blocks. A morph
 * writes the new bitmap (zeroed) and the new image into free lines, then
 * switches the morph word with one atomic 8-byte store: the commit. */
#define PM_IDX_OLD 0x80000000u /* block index flag: an old block of a morphed slab */
#define PM_MORPH_MAGIC 0x50524f4du /* "MORP" */
#define PM_MORPH_WORD(hd) ((uint64_t *)(void *)(hd)->reserved) /* 0 = regular slab */
/* The slab's bitmap checksum as of its last write-back (issue 16): the XOR of
 * pm_blk_hash over the blocks allocated in its bitmaps. A function of the
 * blocks' offsets, not of the geometry, so a morph does not change it. */
#define PM_SLAB_DIGEST(hd) ((uint64_t *)(void *)((hd)->reserved + 8))
/* GC model, morphed slab: the XOR of pm_blk_hash over the old blocks freed
 * (written back before their bits): the old bits (exact under GC) are
 * checked after a crash against the image's odigest ^ this (morph.c). */
#define PM_SLAB_OLD_FREED(hd) ((uint64_t *)(void *)((hd)->reserved + 16))
/* qsort for arrays that may be empty and NULL (qsort's pointer must not be
 * NULL even for 0 elements: undefined behaviour, UBSan reports it) */
static inline void pm_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1) qsort(base, n, size, cmp);
}

static inline uint64_t pm_blk_hash(uint64_t off) /* heap offset of a block's start */
{
    uint64_t x = off * 0x9e3779b97f4a7c15ull + 0x5b1a5d16e57ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
#define PM_MORPH_DEFAULT_SU 20u
#define PM_MORPH_MAX_HDR 8192u /* a slab whose header would grow beyond this does not morph */

typedef struct pm_geo { /* a slab geometry; lines and offsets within the 64 KiB slab */
    uint16_t cls, stripes, nblocks, data_off, bm_line, bm_lines, img_line; /* img_line 0 = line 0 (regular) */
} pm_geo;

typedef struct pm_morph_img { /* one line */
    uint32_t magic, gen;
    pm_geo cur, old;
    uint8_t pad[4];
    uint64_t slab_off; /* heap offset of the slab: an image copied elsewhere is refused */
    uint64_t odigest;  /* the old blocks live at the morph (XOR of pm_blk_hash) ^ PM_SLAB_OLD_FREED then */
    uint64_t check;    /* XXH64 of the fields above */
} pm_morph_img;
NM_STATIC_ASSERT(sizeof(pm_morph_img) == PM_LINE, "morph image is one line");

typedef struct pm_morph {
    pm_geo cur, old;
    uint32_t obs;      /* old block size */
    char *odata;       /* first old block */
    uint64_t *opbm;    /* old bitmap (persistent, the old geometry's lines) */
    uint32_t nold;     /* live old blocks (the paper's cnt_slab); atomic reads */
    uint16_t *cnt;     /* per new block: live old blocks overlapping it (cnt_block); NULL when nold == 0 */
    uint32_t gen;
    uint64_t *gcold;   /* GC recovery: old bits before the mark */
} pm_morph;

static inline void pm_morph_old_bm(const pm_vslab *s, uint32_t *idx, uint64_t **pbm, uint32_t *st)
{
    *idx &= ~PM_IDX_OLD;
    *pbm = s->mo->opbm;
    *st = s->mo->old.stripes;
}
static inline uint32_t pm_blk_size(const pm_vslab *s, uint32_t idx) { return idx & PM_IDX_OLD ? s->mo->obs : s->block_size; }
/* Heap offset of block idx (an old block when PM_IDX_OLD is set). */
static inline uint64_t pm_blk_off(const pm_heap *h, const pm_vslab *s, uint32_t idx)
{
    const char *base = idx & PM_IDX_OLD ? s->mo->odata : s->data;
    return (uint64_t)(base - h->base) + (uint64_t)(idx & ~PM_IDX_OLD) * pm_blk_size(s, idx);
}
static inline uint32_t pm_bm_lines(const pm_vslab *s) { return s->mo ? s->mo->cur.bm_lines : s->hdr->bm_lines; }

/* Handshake with a morph and with the slab's release for code that reads a
 * slab's geometry without its arena lock (free_from, usable_size, destination
 * checks): a morph sets `morphing`, a release sets `gone`, and each proceeds
 * only if `busy` is 0 (seq_cst on both sides). false: the slab is being (or
 * was) released; busy is not held then. A release only takes an empty slab,
 * so every block of it is free. */
static inline bool pm_slab_enter(pm_heap *h, pm_vslab *s)
{
    NM_UNUSED(h);
    for (;;) {
        __atomic_fetch_add(&s->busy, 1, __ATOMIC_SEQ_CST);
        if (NM_UNLIKELY(__atomic_load_n(&s->gone, __ATOMIC_SEQ_CST))) {
            __atomic_fetch_sub(&s->busy, 1, __ATOMIC_SEQ_CST);
            return false;
        }
        if (NM_LIKELY(!__atomic_load_n(&s->morphing, __ATOMIC_SEQ_CST))) return true;
        __atomic_fetch_sub(&s->busy, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&s->morphing, __ATOMIC_ACQUIRE)) sched_yield();
    }
}
static inline void pm_slab_leave(pm_heap *h, pm_vslab *s)
{
    NM_UNUSED(h);
    __atomic_fetch_sub(&s->busy, 1, __ATOMIC_SEQ_CST);
}

/* ==== end of slab morphing ==== */

/* persist.c: counters. Each thread adds to its own block (plain loads and
 * stores, no shared cache line between threads); readers sum the blocks. */
/* PMC_XC_EXT: extents allocated from or freed into the extent caches (a
 * change of nextents made outside large_lock) */
enum { PMC_FLUSH, PMC_META, PMC_REFLUSH, PMC_FENCE, PMC_WAL, PMC_BK, PMC_LIVE_BYTES, PMC_LIVE_OBJS, PMC_XC_HIT, PMC_XC_MISS, PMC_XC_EXT, PMC_N };
NM_STATIC_ASSERT(PMC_N <= 16, "ctr_base holds every counter");
typedef struct pm_ctrblk {
    uint64_t v[PMC_N];
    struct pm_ctrblk *next;
    uint32_t lane; /* this thread's bookkeeping-log append lane in this heap (large.c) */
} pm_ctrblk;
/* Every counted flush and fence reads these: initial-exec avoids a
 * __tls_get_addr call per access in the PIC library (as SpeedMalloc and bmem do). */
#define PM_TLS __thread __attribute__((tls_model("initial-exec")))
#define PM_TL_CTRS 4
typedef struct pm_tlctr {
    uint64_t uid;
    pm_ctrblk *b;
} pm_tlctr;

/* persist.c */
#define PM_META 1
#define PM_USER 0

static inline pm_veh *pm_pmap_get(pm_heap *h, uint64_t page)
{
    return __atomic_load_n(&h->pmap[page], __ATOMIC_ACQUIRE);
}
static inline void pm_pmap_set(pm_heap *h, uint64_t page, pm_veh *v)
{
    __atomic_store_n(&h->pmap[page], v, __ATOMIC_RELEASE);
}

/* pm_checkpoint (redo.c): also collect the bookkeeping log; only if none is
 * running and one is due (the rings are filling up) */
enum { PM_CKPT_GC = 1, PM_CKPT_TRY = 2 };

static inline uint64_t *pm_pbm_word(const pm_vslab *s, uint32_t idx, uint64_t *mask)
{
    uint64_t *pbm = s->pbm;
    uint32_t st = s->stripes;
    if (NM_UNLIKELY(idx & PM_IDX_OLD)) pm_morph_old_bm(s, &idx, &pbm, &st); /* an old block of a morphed slab */
    uint32_t stripe = idx % st, j = idx / st;
    uint32_t line = stripe + st * (j / 512u), bit = j % 512u;
    *mask = 1ull << (bit % 64u);
    return pbm + line * 8u + bit / 64u;
}
static inline bool pm_pbit(const pm_vslab *s, uint32_t idx)
{
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    return (__atomic_load_n(w, __ATOMIC_RELAXED) & m) != 0;
}

/* ==== NUMA (paper Sec. 6): numa.c (topology, node regions, local-first
 * allocation, migration check, sync threads) and remote.c (two-phase remote
 * free of small blocks: shadow bitmaps, deallocation logs, synchronisation,
 * recovery replay). See docs/pmalloc.md, "NUMA". ==== */
#define PM_NUMA_MAX_NODES 64u
#define PM_NUMA_CHECK_EVERY 64u /* operations between two migration checks */
#define PM_NUMA_MAGIC 0x414d554e4d4e4e4eull /* "NNNMNUMA" */
#define PM_DLOG_MAGIC 0x474f4c44u           /* "DLOG" */
#define PM_NUMA_HDR_LINE 5u                 /* superblock line holding pm_numa_hdr */

/* Superblock line 5 (zero in heaps created with one node: no remote-free region). */
typedef struct pm_numa_hdr {
    uint64_t magic;
    uint32_t nlogs;       /* deallocation logs (one per node at create) */
    uint32_t seg_entries; /* entries per log segment (two segments per log) */
    uint64_t region_off;  /* log headers, then the slab timestamp table, then the segments */
    uint64_t region_bytes;
    uint64_t ts_off;      /* uint64 per data page: the slab's synchronisation timestamp */
    uint64_t seg_off;
    uint64_t check;       /* XXH64 of the fields above */
    uint64_t pad;
} pm_numa_hdr;
NM_STATIC_ASSERT(sizeof(pm_numa_hdr) == PM_LINE, "numa header is one line");

/* One line per log segment, in the region's first page(s). */
typedef struct pm_dlog_hdr {
    uint32_t magic;
    uint32_t log;  /* log index */
    uint32_t seg;  /* 0 or 1 */
    uint32_t pad0;
    uint64_t gen;  /* bumped when the segment is recycled: entries of older generations are dead;
                    * bits 0-47, a 16-bit check of it (and the segment) in 48-63 (remote.c) */
    uint64_t check;
    uint8_t pad[32];
} pm_dlog_hdr;
NM_STATIC_ASSERT(sizeof(pm_dlog_hdr) == PM_LINE, "log segment header is one line");

/* Deallocation-log entry (32 bytes, two per line). */
#define PM_DLOG_EXTENT 1ull /* low bit of `block`: the entry frees an extent (page-aligned offset) */
typedef struct pm_dlog_ent {
    uint64_t block; /* heap offset of the freed block or extent (| PM_DLOG_EXTENT) */
    uint64_t ts;    /* timestamp of the recording (compared with the slab's) */
    uint64_t gen;   /* segment generation when written */
    uint64_t check; /* XXH64 of the three fields and the segment's identity */
} pm_dlog_ent;

typedef struct pm_numa_layout {
    uint32_t nlogs, seg_entries;
    uint64_t region_bytes, ts_rel, seg_rel;
} pm_numa_layout;

/* Remote-free state of a slab (Sec. 6.2, Fig. 14): the shadow bitmap holds
 * blocks freed by threads of other nodes and not yet synchronised into the
 * regular (vbm) and persistent bitmaps. Such a block stays taken in vbm and
 * allocated in the persistent bitmap until its owner side synchronises. */
typedef struct pm_rslab {
    uint64_t *shadow;       /* atomic words; changed under `lock` */
    pthread_mutex_t lock;   /* the paper's per-slab mutex: recording vs synchronisation */
    uint32_t nshadow;       /* bits set in shadow (under lock) */
    bool queued;            /* on its arena's pending stack (under lock) */
    pm_vslab *slab;
    struct pm_rslab *qnext; /* pending stack link */
} pm_rslab;

/* Volatile state of one deallocation log (two segments, double-buffered:
 * the paper's "create a new log, recycle the old one after the epoch"). */
typedef struct pm_dlog {
    pthread_mutex_t lock;
    unsigned active;          /* segment appended to */
    uint32_t cursor;          /* next slot in it */
    uint64_t closed_epoch[2]; /* epoch at which a segment was closed (0 = reusable) */
    uint32_t writers[2];      /* appends in progress per segment (atomic) */
    bool late[2];             /* closed with appends in progress (dlog_switch) */
} pm_dlog;

typedef struct pm_pend {
    pm_rslab *head; /* Treiber stack: push by recorders, take-all by the owner side */
    char pad[56];
} pm_pend;

enum { PM_SYNC_DEMAND, PM_SYNC_EPOCH, PM_SYNC_OTHER, PM_NSYNC };
typedef struct pm_numa {
    /* topology */
    unsigned nnodes;
    bool virt;            /* virtual nodes (option/env), not libnuma's */
    unsigned ncpu;        /* size of cpu_node */
    int *cpu_node;        /* CPU number -> node (-1: unknown) */
    unsigned per_node;    /* arenas per node; arena i belongs to node i / per_node */
    /* persistent remote-free region (NULL hdr: none, remote frees go the direct way) */
    pm_numa_hdr *hdr;
    pm_dlog_hdr *seghdr;  /* [nlogs][2] */
    uint64_t *ts_table;   /* per data page */
    pm_dlog_ent *segs;    /* [nlogs][2][seg_entries] */
    unsigned nlogs;
    uint32_t seg_entries;
    pm_dlog *logs;
    _Alignas(64) uint64_t dts; /* timestamp clock (atomic; own line: recorders and synchronisers) */
    pm_pend *pend;        /* per arena */
    pthread_mutex_t xlock; /* remote-released extents, per node (Sec. 6.3) */
    pm_veh **xpend;        /* [nnodes]: ALLOC + freeing extents, linked through veh->next (unused while allocated) */
    /* epochs and synchronisation threads */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t epoch;       /* bumped when a log segment is closed (atomic) */
    uint64_t *done;       /* per node: epoch at the start of its last complete sync pass (atomic) */
    unsigned *kick;       /* per node: a sync pass was requested (under mu) */
    bool stop;            /* under mu */
    pthread_t *threads;
    unsigned nthreads;
    uint64_t sync_ns;     /* epoch-sync interval */
    /* counters (atomic; remote paths only): the freeing side's and the owner side's on separate lines */
    _Alignas(64) uint64_t c_remote_frees;
    _Alignas(64) uint64_t c_synced[PM_NSYNC];
    uint64_t c_remote_xfrees, c_xsynced;
    uint64_t c_passes, c_switches, c_migrations, c_remote_allocs, c_remote_extents, c_replayed;
} pm_numa;

static inline bool pm_numa_shadowed(const pm_vslab *s, uint32_t idx)
{
    pm_rslab *rs = __atomic_load_n(&((pm_vslab *)s)->rs, __ATOMIC_ACQUIRE);
    if (NM_LIKELY(rs == NULL)) return false;
    return (__atomic_load_n(&rs->shadow[idx / 64u], __ATOMIC_RELAXED) >> (idx % 64u)) & 1u;
}
/* The slab timestamp table: a 48-bit timestamp and a 16-bit check of it and
 * its page in each 8-byte word (timestamp 0 = never set, with its check too:
 * a word zeroed by damage is not "never set"); a damaged word is refused at open. */
#define PM_TS_MASK ((1ull << 48) - 1)
static inline uint64_t pm_ts_word(uint64_t page, uint64_t ts)
{
    uint64_t v[2] = {page, ts & PM_TS_MASK};
    return (ts & PM_TS_MASK) | (uint64_t)(uint16_t)XXH64(v, sizeof v, 0x54535453u) << 48;
}
static inline uint64_t pm_ts_get(const pm_numa *n, uint64_t page) { return __atomic_load_n(&n->ts_table[page], __ATOMIC_RELAXED) & PM_TS_MASK; }
/* ==== end NUMA ==== */

/* ==== one heap file per NUMA node (paper Sec. 6.1, 7; files.c, docs/pmalloc.md
 * "Node memory: one heap file per node") ====
 * A heap created with N >= 2 nodes (format version 2) is a main file holding
 * bytes [0, data_off) of the heap (superblock, roots, WAL, bookkeeping log,
 * NUMA region) and one file per node holding node k's data pages, followed by
 * a one-page trailer. All are mapped back to back into one reserved range, so
 * heap offsets (pmalloc_ptr) are those of a one-file heap. */
#define PM_VERSION_FILES 4u /* node files (3 = one file) */
#define PM_FILES_LINE 6u                       /* superblock line of pm_files_hdr */
#define PM_FILES_MAGIC 0x53454c49464d4e4eull   /* "NNMFILES" */
#define PM_NODE_MAGIC 0x45444f4e504d4e4eull    /* "NNMPNODE" */
#define PM_NODE_TRAILER PM_PAGE                /* bytes after the node's range in its file */

typedef struct pm_files_hdr { /* superblock line 6; lines 7-14: uint64 start page of each node's file */
    uint64_t magic;
    uint32_t nfiles;
    uint32_t pad0;
    uint64_t heap_id;    /* random at create: every node file carries it */
    uint64_t data_off;   /* written before the rest of the superblock: an interrupted */
    uint64_t data_pages; /* create's leftovers can be found from this line alone */
    uint64_t check;      /* XXH64 of the fields above and of the nfiles start pages */
    uint8_t pad[16];
} pm_files_hdr;
NM_STATIC_ASSERT(sizeof(pm_files_hdr) == PM_LINE, "files header is one line");

typedef struct pm_node_trailer { /* first line of a node file's last page */
    uint64_t magic;
    uint32_t version, node, nfiles, pad0;
    uint64_t heap_id;
    uint64_t range_off;   /* heap offset of the node's first byte */
    uint64_t range_bytes; /* the file holds exactly these, then this page */
    uint64_t dir_hash;    /* XXH64 of the heap directory's real path: the orphan of a heap
                           * whose main file was deleted may be replaced by a new heap there */
    uint64_t check;       /* XXH64 of the fields above */
} pm_node_trailer;

typedef struct pm_files {
    unsigned n;                             /* node files */
    uint64_t heap_id, dir_hash;
    uint64_t lo[PM_NUMA_MAX_NODES + 1];     /* data page where file k starts; lo[n] = data_pages */
    int fd[PM_NUMA_MAX_NODES];
    char *path[PM_NUMA_MAX_NODES];
    char *marker;                           /* the main file's name during create (renamed at commit) */
    char *main_path;
    char *map;                              /* reservation (munmap'ed whole) */
    size_t map_len;
    unsigned pmem;                          /* mappings found to be persistent memory (of n + 1) */
    unsigned pmem_nodes;                    /* ... of which node files */
    unsigned bound;                         /* node mappings given a memory policy (real nodes) */
    uint64_t created;                       /* node files this create made (bit k), removed if it fails */
    bool committed;                         /* create: the main file has its name */
    bool single;                            /* a one-file heap being created (no node files) */
} pm_files;

/* ==== end node files ==== */

static inline void pm_count(uint64_t *c, uint64_t n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

/* Persistent pointers (pmalloc.h): this heap's tag over an offset. */
#define PM_TAG_MASK (((1ull << 63) - 1) & ~((1ull << PMALLOC_PTR_OFFSET_BITS) - 1))
static inline uint64_t pm_ptr(const pm_heap *h, uint64_t off) { return off | h->tagbits; }
/* The offset a pointer of this heap names; false for another heap's (or a non-pointer). */
static inline bool pm_ptr_off(const pm_heap *h, uint64_t p, uint64_t *off)
{
    *off = PMALLOC_PTR_OFFSET(p);
    return (p & ~((1ull << PMALLOC_PTR_OFFSET_BITS) - 1)) == h->tagbits;
}
static inline uint64_t pm_off(const pm_heap *h, const void *p) { return (uint64_t)((const char *)p - h->base); }

#endif
