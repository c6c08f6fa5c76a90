/* PMAlloc: a crash-consistent persistent-memory heap (Dang et al., TOCS 2024).
 *
 * A heap lives in one file, <dir>/pmalloc.heap, mapped with libpmem; a heap
 * created with several NUMA nodes keeps each node's memory in its own file,
 * <node dir>/pmalloc.node<k>.heap (paper Sec. 6.1), mapped back to back with
 * the main file into one address range (docs/pmalloc.md, "Node memory"). Objects
 * are named by offset-based persistent pointers (pmalloc_ptr: byte offset from
 * the heap base, 0 = NULL), so a heap may be mapped at another address after a
 * restart (paper Sec. 4.1). Persistent pointers that the allocator must keep
 * consistent with its metadata (the destination of pmalloc_malloc_to, the
 * source of pmalloc_free_from, the roots) live inside the heap.
 *
 * Consistency models (Sec. 2.3, 4.1):
 *  - PMALLOC_LOG: every malloc_to/free_from commits with one redo record in a
 *    per-thread ring: one flushed cache line and one fence. After any crash,
 *    recovery replays every committed operation, so allocated == reachable
 *    (nothing leaks) and every pointer the operations wrote is as they left it.
 *  - PMALLOC_GC: small blocks write no allocator metadata at run time; after a
 *    crash, recovery marks conservatively from the roots and frees the rest.
 *    Large allocations take the LOG path in both models (as in the paper).
 *
 * When a pointer word is durable (LOG; the exact contract). malloc_to,
 * free_from, set_root and set_ptr return once the operation is committed (its
 * record is durable). The word they write (*dst = the object, *src = 0, the
 * slot) and the allocator's metadata are stored in memory at once and written
 * back to the heap file later, by a checkpoint (every few hundred operations
 * of a thread, pmalloc_sync, pmalloc_close). So:
 *  - a running program (any thread) reads the new value at once, as any store;
 *  - after a crash, pmalloc_open replays the committed operations: the word
 *    holds what the last of them wrote, the objects are allocated or free as
 *    they left them. Before that replay the file may hold the old value: read
 *    a heap only through pmalloc_open;
 *  - a word written by one of these calls belongs to the allocator until the
 *    next checkpoint: change it through them (free_from, malloc_to_ex with
 *    PMALLOC_OVERWRITE, set_ptr), which are ordered after it, or call
 *    pmalloc_sync first. A plain store of your own (even persisted) to such a
 *    word may be replaced by recovery with the value of the last operation.
 *    Words inside an object that a later free_from released are never written
 *    by recovery. Your own data (object contents) is yours: pmalloc_persist it.
 * GC model: the pointer word is persisted before these calls return (no replay). 
 *
 * Every persistence operation (ours and, through pmalloc_persist, the user's)
 * goes through one counted flush primitive that also detects cache-line
 * reflushes (a line flushed again within 4 distinct lines, Sec. 3.2).
 *
 * Threads: every call may be made from any thread concurrently, except
 * pmalloc_open/pmalloc_close. Errors are nm_err codes with a message in
 * nm_last_errmsg(); a failed call changes nothing. */
#ifndef NEARMEM_PMALLOC_H
#define NEARMEM_PMALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "nearmem/common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pmalloc_heap pmalloc_heap;

/* A persistent pointer: the heap's identity and a byte offset from the heap
 * base; 0 is NULL. Bits 0-43 hold the offset (heaps up to 16 TiB), bits 44-62
 * the heap's tag, a random number drawn when the heap is created (bit 63 is 0).
 * A pointer of another heap is refused (NM_EINVAL; pmalloc_direct gives NULL),
 * as PMDK's PMEMoid carries its pool's id. Treat the value as opaque: convert
 * with pmalloc_direct / pmalloc_ptr_of; adding a byte count within an object
 * gives the pointer to that byte (the tag is not touched). Heaps of format
 * versions 1 and 2 (before tags) are refused with NM_EFORMAT. */
typedef uint64_t pmalloc_ptr;
#define PMALLOC_PTR_OFFSET_BITS 44
#define PMALLOC_PTR_OFFSET(p) ((uint64_t)(p) & ((1ull << PMALLOC_PTR_OFFSET_BITS) - 1)) /* byte offset in the heap file(s) */
#define PMALLOC_PTR_TAG(p) ((uint64_t)(p) >> PMALLOC_PTR_OFFSET_BITS)

#define PMALLOC_NROOTS 1024u            /* root slots per heap (paper: >= 512) */
#define PMALLOC_SMALL_MAX 14336u        /* largest small (slab) request; above: extents */
#define PMALLOC_SLAB_SIZE (64u * 1024u) /* slab size (paper Sec. 2.1) */
#define PMALLOC_DEFAULT_STRIPES 6u      /* bit stripes of the interleaved mapping (Sec. 5.1, 8.1) */
#define PMALLOC_MAX_STRIPES 16u
#define PMALLOC_FILE_NAME "pmalloc.heap"
#define PMALLOC_NODE_FILE_FMT "pmalloc.node%u.heap" /* node k's file (heaps created with >= 2 nodes) */
#define PMALLOC_DECAY_NEVER 0xffffffffu
#define PMALLOC_MORPH_OFF 0xffffffffu   /* pmalloc_options.morph_su: no slab morphing */

typedef enum pmalloc_model {
    PMALLOC_LOG = 0, /* write-ahead log with the user pointer */
    PMALLOC_GC = 1,  /* no small-block metadata flushes; post-crash conservative mark */
} pmalloc_model;

typedef enum pmalloc_persist_mode {
    /* CPU cache flushes when the mapping is real pmem (pmem_is_pmem, or the
     * environment sets PMEM_IS_PMEM_FORCE=1), msync otherwise. */
    PMALLOC_PERSIST_AUTO = 0,
    /* CPU cache flushes (clwb/clflushopt + sfence) even on a non-DAX file: our
     * own equivalent of PMEM_IS_PMEM_FORCE=1 for this heap only. The kernel's
     * page cache then decides when data reaches the disk: pmem *semantics* for
     * ordering and counting, not durability across a power cut. */
    PMALLOC_PERSIST_CPU = 1,
    /* msync of the dirty range at every flush (durable on any file system, slow). */
    PMALLOC_PERSIST_MSYNC = 2,
    /* Power-failure simulation (testing): a shadow "persisted image" is updated
     * only by flush + drain; pmalloc_sim_snapshot writes a crash image from it. */
    PMALLOC_PERSIST_SIM = 3,
} pmalloc_persist_mode;

typedef enum pmalloc_eadr {
    PMALLOC_EADR_AUTO = 0, /* pmem_has_auto_flush() decides */
    PMALLOC_EADR_OFF = 1,
    PMALLOC_EADR_ON = 2, /* caches are persistent: no flushes, fences only, interleaving off */
} pmalloc_eadr;

typedef struct pmalloc_options {
    size_t size;                  /* heap file size when creating (>= 4 MiB); 0 = open only */
    pmalloc_model model;          /* when creating; an existing heap keeps its model */
    unsigned stripes;             /* bit stripes, 1 = sequential (no interleaving); 0 = default 6 */
    pmalloc_eadr eadr;
    pmalloc_persist_mode persist;
    unsigned narenas;             /* 0 = one per online CPU (paper Sec. 4.2) */
    unsigned decay_ms;            /* free extents unused this long give their pages back to
                                   * the file system (hole punch; the paper's retained list);
                                   * 0 = 10 s (jemalloc's default), PMALLOC_DECAY_NEVER = off */
    unsigned log_chunks;          /* bookkeeping-log size in 1 KiB chunks when creating
                                   * (>= 4); 0 = one 8-byte entry per data page + 16 chunks */
    unsigned redo_records;        /* records per redo ring when creating (a power of two,
                                   * 64..4096; 0 = about 1/32 of the heap over 128 rings). The
                                   * rings are a pool: a thread writes into one ring at a time;
                                   * a checkpoint gives back the full ones it settled */
    unsigned checkpoint_records;  /* LOG (and extents): most records a checkpoint lets pile up
                                   * after its bound, i.e. the replay after a crash (plus up to
                                   * two rings per thread); 0 = 65536, at most all the rings. A
                                   * checkpoint runs at 7/8 of it or when the free rings run
                                   * low. Smaller: faster recovery, more lines written back
                                   * per operation. Per open, not stored in the heap. */
#define PMALLOC_CHECKPOINT_RECORDS 65536u /* checkpoint_records = 0 */
    bool create;                  /* create the heap when the file does not exist */
    unsigned morph_su;            /* slab morphing (Sec. 5.2): a slab whose occupancy is below
                                   * this percentage may change size class when its arena needs
                                   * a new slab; 0 = 20 (the paper's SU), 1..100, or
                                   * PMALLOC_MORPH_OFF. Below 100 the slab a class allocates
                                   * from next is spared; 100 morphs as often as possible
                                   * (for tests). Per open, not stored in the heap. */
    /* PMALLOC_PERSIST_SIM only: flush hook installed before recovery runs, so a
     * test can crash the recovery itself (see pmalloc_sim_set_hook). */
    void (*sim_hook)(void *arg, struct pmalloc_heap *h, uint64_t flush_no);
    void *sim_arg;
    /* NUMA (paper Sec. 6; docs/pmalloc.md "NUMA"). */
    unsigned numa_vnodes;      /* 0 = environment NEARMEM_PMALLOC_VNODES if set, else libnuma's
                                * nodes; N >= 1 = split the online CPUs into N virtual nodes */
    unsigned numa_sync_ms;     /* epoch-synchronisation threads wake this often (0 = 50 ms);
                                * PMALLOC_NUMA_SYNC_NEVER = no threads (on-demand sync only) */
    unsigned numa_log_entries; /* entries per deallocation-log segment when creating (0 = auto) */
    /* Node files (Sec. 6.1): a heap created with N >= 2 nodes puts node k's data pages in
     * <node_dirs[k]>/pmalloc.node<k>.heap (e.g. /mnt/pmem<k>, a DAX file system on node k);
     * entries beyond node_dirs_count, NULL entries and node_dirs == NULL mean `dir`. Give the
     * same directories at every open (they are not stored in the heap). Two heaps must not
     * share a node directory (creation refuses to overwrite another heap's node file). */
    const char *const *node_dirs;
    unsigned node_dirs_count;
    bool single_file;          /* create one file even with several nodes (per-node page ranges
                                * of that file, the part-2 layout; no node files) */
} pmalloc_options;

#define PMALLOC_NUMA_SYNC_NEVER 0xffffffffu

/* Defaults: LOG, 6 stripes, eADR auto, persistence auto, create with 64 MiB. */
void pmalloc_options_default(pmalloc_options *o);

/* Open the heap in directory `dir` (which must exist), creating it when
 * o->create and the file is absent. After an unclean shutdown this runs the
 * post-crash recovery (Sec. 7). A foreign or corrupt file is refused with
 * NM_EFORMAT (not a PMAlloc heap, other version) or NM_ECORRUPT (checksum,
 * metadata out of range; for a heap with node files also a node file that is
 * missing, another heap's, another node's, of the wrong size or with a damaged
 * trailer). A create with several nodes (and not o->single_file) makes one
 * file per node; it refuses to overwrite another heap's node file (NM_EEXIST).
 * `o` may be NULL (defaults, no create). */
nm_err pmalloc_open(const char *dir, const pmalloc_options *o, pmalloc_heap **out);
/* Clean shutdown: persist what the model left volatile, mark the heap clean, unmap. */
nm_err pmalloc_close(pmalloc_heap *h);
/* Delete the heap in `dir`: its main file, its node files (looked up in o->node_dirs, as
 * pmalloc_open does; `o` may be NULL) and what an interrupted create left. A node file is
 * removed only if its trailer names this heap (or it is an unfinished one of its create).
 * NM_OK when there is no heap; NM_EBUSY if it is open; NM_EIO if a file cannot be removed. */
nm_err pmalloc_remove(const char *dir, const pmalloc_options *o);

/* Allocate `size` bytes and store the new object's pointer in *dst, atomically
 * with respect to crashes: after a crash either *dst holds the object and it is
 * allocated, or *dst is unchanged and nothing is allocated. dst must be an
 * 8-byte aligned location inside the heap: a root slot or a field of an
 * allocated object (NM_EINVAL otherwise; recovery reads it). Sizes up to PMALLOC_SMALL_MAX come from slabs, larger from extents.
 * *dst must be 0: a destination that holds a pointer (or anything else) is
 * NM_EEXIST and nothing changes, since overwriting it would lose the object it
 * names (use pmalloc_malloc_to_ex with PMALLOC_OVERWRITE to allow it). */
nm_err pmalloc_malloc_to(pmalloc_heap *h, size_t size, pmalloc_ptr *dst);
/* Flags of pmalloc_malloc_to_ex. */
#define PMALLOC_OVERWRITE 1u /* *dst may be non-zero: its old value is overwritten; an object it
                              * named stays allocated (the caller holds another reference to it) */
/* pmalloc_malloc_to with flags (0 = pmalloc_malloc_to); unknown flags are NM_EINVAL. */
nm_err pmalloc_malloc_to_ex(pmalloc_heap *h, size_t size, pmalloc_ptr *dst, unsigned flags);
/* Free the object *src points to and set *src to 0, atomically w.r.t. crashes.
 * src obeys the same rule as dst above.
 * NM_EBADFREE: *src is outside the heap's data or not the start of an object;
 * NM_EDOUBLEFREE: the object is already free. Nothing changes on error. */
nm_err pmalloc_free_from(pmalloc_heap *h, pmalloc_ptr *src);

/* Store pointer p into the pointer word *loc (a root slot or a word inside an
 * allocated object, as for malloc_to), ordered after the operations that wrote
 * that word before (LOG: one redo record, one flushed line and one fence; GC:
 * the word is persisted). Use it to move pointers between words, instead of a
 * plain store. p must be 0 or a pointer of this heap (NM_EINVAL otherwise). */
nm_err pmalloc_set_ptr(pmalloc_heap *h, pmalloc_ptr *loc, pmalloc_ptr p);
/* A checkpoint now: every operation committed so far is written back to the
 * heap (pointer words, bitmaps, log); afterwards the heap file holds what the
 * program sees, and words written by earlier calls may be stored to directly. */
nm_err pmalloc_sync(pmalloc_heap *h);

/* Persistent pointer <-> address in this mapping. */
void *pmalloc_direct(const pmalloc_heap *h, pmalloc_ptr p); /* NULL for 0 or out of range */
pmalloc_ptr pmalloc_ptr_of(const pmalloc_heap *h, const void *addr); /* 0 if outside */
/* Usable size of an allocated object, 0 if p is not an allocated object start. */
size_t pmalloc_usable_size(pmalloc_heap *h, pmalloc_ptr p);

/* Roots: PMALLOC_NROOTS persistent pointer slots. set_root is set_ptr on a slot. */
nm_err pmalloc_set_root(pmalloc_heap *h, unsigned idx, pmalloc_ptr p);
pmalloc_ptr pmalloc_get_root(const pmalloc_heap *h, unsigned idx);
/* The slot itself, to pass to malloc_to/free_from; NULL if idx is out of range. */
pmalloc_ptr *pmalloc_root_slot(pmalloc_heap *h, unsigned idx);

/* The counted persistence primitive, for the application's own data. */
void pmalloc_flush(pmalloc_heap *h, const void *addr, size_t len);
void pmalloc_drain(pmalloc_heap *h);
void pmalloc_persist(pmalloc_heap *h, const void *addr, size_t len); /* flush + drain */

typedef struct pmalloc_stats {
    uint64_t bytes_live;     /* usable bytes of allocated objects */
    uint64_t objects_live;
    uint64_t slabs;          /* slabs in use */
    uint64_t extents;        /* allocated large extents */
    uint64_t free_bytes;     /* bytes in free extents (not counting free slab blocks), cached ones included */
    uint64_t cached_bytes;   /* of which held in the arenas' stores of freed extents */
    uint64_t retained_bytes; /* of free_bytes, decayed: returned to the file system */
    uint64_t data_bytes;     /* size of the data area */
    uint64_t flushes;        /* cache lines flushed (all kinds) */
    uint64_t meta_flushes;   /* ... of allocator metadata (WAL, bitmaps, log, headers) */
    uint64_t reflushes;      /* metadata lines flushed again within 4 distinct lines */
    uint64_t fences;         /* drains (sfence) */
    uint64_t wal_appends;    /* redo records written (one per committed LOG operation, extents in both models) */
    uint64_t checkpoints;    /* checkpoints since open (write-backs of committed operations) */
    uint64_t bklog_appends;
    uint64_t extent_cache_hits;   /* large allocations served by an arena's store of freed extents */
    uint64_t extent_cache_misses; /* ... that went to the heap's extent allocator */
    uint64_t bklog_gcs;      /* slow GCs (compactions) of the bookkeeping log */
    uint64_t bklog_fast_gcs; /* fast GCs: chunks with nothing live unlinked in place */
    uint64_t morphs;         /* slab morphs since open (Sec. 5.2) */
    uint64_t morph_slabs_in; /* morphed slabs that still hold old blocks (the paper's slab_in) */
    uint64_t morph_old_live; /* old blocks still allocated in them */
    unsigned stripes;        /* effective stripes (1 under eADR) */
    bool eadr;
    pmalloc_model model;
    pmalloc_persist_mode persist; /* effective mode (AUTO resolved) */
} pmalloc_stats;
nm_err pmalloc_stats_get(pmalloc_heap *h, pmalloc_stats *st);
void pmalloc_stats_reset_counters(pmalloc_heap *h); /* zero flush/fence/reflush counters */

/* What the last open found and did. */
typedef struct pmalloc_recovery_info {
    bool created;          /* the heap was created by this open */
    bool was_clean;        /* the previous session ended with pmalloc_close */
    bool was_recovering;   /* ... or crashed during a recovery */
    unsigned wal_entries;  /* pending WAL entries examined */
    unsigned wal_redone;   /* operations completed from the WAL */
    unsigned wal_undone;   /* operations rolled back (nothing to do: metadata untouched) */
    uint64_t gc_marked;    /* GC: small blocks found reachable */
    uint64_t gc_freed;     /* GC: small blocks allocated in the image but unreachable */
    uint64_t bklog_live;   /* live bookkeeping-log entries replayed */
} pmalloc_recovery_info;
void pmalloc_recovery_info_get(const pmalloc_heap *h, pmalloc_recovery_info *ri);

/* Visit every allocated object (small blocks and extents), in address order.
 * The callback returns nonzero to stop. For checkers and tools; not concurrent
 * with allocation. */
typedef int (*pmalloc_walk_fn)(void *arg, pmalloc_ptr p, size_t usable);
nm_err pmalloc_walk(pmalloc_heap *h, pmalloc_walk_fn fn, void *arg);
/* Cross-check volatile and persistent metadata (extents tile the data area,
 * bitmaps match, log replays to the same state). NM_ECORRUPT with a message. */
nm_err pmalloc_check(pmalloc_heap *h);

/* ---- NUMA (paper Sec. 6) ----
 * Arenas belong to nodes; a thread cache binds to an arena of the node of the
 * CPU it runs on and re-checks that node every 64 operations (thread
 * migration). Small blocks freed by a thread of another node are freed in two
 * phases: recorded in the freeing node's persistent deallocation log and the
 * slab's shadow bitmap, then applied by the owner side (allocating threads on
 * demand, epoch-synchronisation threads, close). */
typedef struct pmalloc_numa_stats {
    unsigned nodes;            /* 1 = NUMA logic off */
    bool virtual_nodes;        /* from numa_vnodes / NEARMEM_PMALLOC_VNODES */
    bool remote_free_logs;     /* the heap has deallocation logs (created with >= 2 nodes) */
    unsigned arenas_per_node;
    uint64_t remote_frees;     /* two-phase frees recorded */
    uint64_t pending;          /* ... not yet synchronised */
    uint64_t synced_on_demand; /* blocks applied by allocating threads */
    uint64_t synced_epoch;     /* ... by the synchronisation threads */
    uint64_t synced_other;     /* ... at close, log recycling, pmalloc_numa_sync */
    uint64_t sync_passes;      /* complete epoch passes */
    uint64_t log_switches;     /* deallocation-log segments closed */
    uint64_t migrations;       /* thread caches rebound to another node */
    uint64_t remote_allocs;    /* small blocks served from another node's arena */
    uint64_t remote_extents;   /* slabs/extents placed outside the requesting node's region */
    uint64_t replayed;         /* log entries applied by the last open's recovery */
    uint64_t remote_extent_frees; /* two-phase extent frees recorded (Sec. 6.3) */
    uint64_t pending_extents;     /* ... whose tombstone the owner side has not appended yet */
    unsigned node_files;          /* heap files holding node memory (0: one file, see "Node memory") */
    unsigned node_files_pmem;     /* ... mapped as persistent memory (MAP_SYNC or PMEM_IS_PMEM_FORCE) */
    unsigned node_files_bound;    /* ... given a preferred-node memory policy (real nodes, not DAX) */
} pmalloc_numa_stats;
nm_err pmalloc_numa_stats_get(pmalloc_heap *h, pmalloc_numa_stats *st);
/* Bind the calling thread to `node` (its cache moves to an arena of that node
 * and the migration check is off); node -1 = follow the CPU again. */
nm_err pmalloc_numa_set_node(pmalloc_heap *h, int node);
/* The calling thread's node (binds a cache if it has none). */
int pmalloc_numa_current_node(pmalloc_heap *h);
/* The node an allocated object's memory belongs to; -1 if p is not in the data area. */
int pmalloc_numa_node_of(pmalloc_heap *h, pmalloc_ptr p);
/* The paper's pmalloc_numa_migrate_check(): re-read the CPU now and rebind if
 * the thread moved to another node (also done every 64 operations). */
nm_err pmalloc_numa_migrate_check(pmalloc_heap *h);
/* Apply every pending remote free now (all nodes; what close does). */
nm_err pmalloc_numa_sync(pmalloc_heap *h);

/* Power-failure simulation (PMALLOC_PERSIST_SIM only).
 * The hook runs before each cache-line flush is recorded, with the running
 * count of flushes; a test takes a crash image there with pmalloc_sim_snapshot:
 * the persisted image plus a random subset of the lines flushed but not yet
 * drained (a fence may be torn). Stores never flushed are lost. */
typedef void (*pmalloc_sim_hook)(void *arg, pmalloc_heap *h, uint64_t flush_no);
nm_err pmalloc_sim_set_hook(pmalloc_heap *h, pmalloc_sim_hook fn, void *arg);
/* Write the crash image as <dir>/pmalloc.heap (and <dir>/pmalloc.node<k>.heap for a heap
 * with node files, whatever its node_dirs); `seed` picks the torn subset.
 * With evict_pct > 0, each line stored but never flushed also reaches the
 * image with that probability (a cache eviction wrote it back early). */
nm_err pmalloc_sim_snapshot(pmalloc_heap *h, const char *dir, uint64_t seed, unsigned evict_pct);
/* Testing aid: the step (1-3) of a slab morph in progress, 0 outside a morph
 * (read from a simulation hook, which runs in the thread that flushes). */
unsigned pmalloc_morph_step(const pmalloc_heap *h);
/* Drop the heap without a clean shutdown (a crash): unmap, free, write nothing. */
void pmalloc_abandon(pmalloc_heap *h);

/* ---- Inspection without opening (`nearmem pmalloc info|dump`) ----
 * Both read the heap's main file only (read-only mapping, no lock taken, no
 * recovery, nothing written); they work on a crashed heap and on one another
 * process has open (a snapshot of a moving target, then). */
typedef struct pmalloc_file_info {
    unsigned version;       /* heap format (3: one file, 4: node files) */
    pmalloc_model model;
    uint64_t heap_size;     /* bytes, metadata included */
    uint64_t data_bytes;    /* the data area */
    uint64_t ptr_tag;       /* this heap's pointer tag (PMALLOC_PTR_TAG of its pointers) */
    unsigned node_files;    /* 0: one file */
    unsigned redo_rings, ring_records;
    unsigned log_chunks;
    uint64_t checkpoint_bound;   /* operations up to this sequence number are written back */
    uint64_t records_pending;    /* valid redo records after it (a crashed heap's replay work) */
    unsigned log_chunks_listed;  /* bookkeeping-log chunks in use */
    bool clean;             /* the last session ended with pmalloc_close */
    bool recovering;        /* ... crashed inside a recovery */
    bool in_use;            /* a process has it open now */
    bool numa_logs;         /* created with deallocation logs (>= 2 nodes) */
} pmalloc_file_info;
/* NM_ENOENT: no heap in dir; NM_EFORMAT: not a PMAlloc heap or an older
 * format; NM_ECORRUPT: the superblock fails its checksum. */
nm_err pmalloc_inspect(const char *dir, const pmalloc_options *o, pmalloc_file_info *info);
/* Print every persistent metadata structure of the main file with the result
 * of its checks (superblock, checkpoint bound, redo rings, bookkeeping log,
 * NUMA logs), marking what pmalloc_open would refuse or repair DAMAGED;
 * NM_ECORRUPT if something open would refuse. Slabs and objects need the log
 * replayed: open the heap (pmalloc_walk, pmalloc_check). */
nm_err pmalloc_dump(const char *dir, const pmalloc_options *o, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
