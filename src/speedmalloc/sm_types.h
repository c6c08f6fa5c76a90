/* SpeedMalloc's data model (the paper: ../../../shared/papers/speedmalloc.md, Sec. 3-5).
 *
 * Who owns what. The paper puts every allocator data structure on a support core
 * reached through hardware message queues; here the support core is a server
 * thread, the queues are single-producer/single-consumer rings in ordinary memory,
 * and *allocator metadata has one owner at a time*: whoever holds the metadata
 * lock (sm_g.srv_lock) runs the server's code. No client ever performs an atomic
 * read-modify-write on metadata.
 *
 *   segment (4 MiB, aligned)      slice 0 = struct segment (header); slices 1..63 hold pages
 *     slice words (64)            client-READ: one 64-bit word per slice (page start, owner,
 *                                 class); written by the metadata owner with one store. They
 *                                 live in the window map (below), or in the header for a
 *                                 segment outside the window
 *     pages[64], free masks       metadata: page descriptors with free *bitmaps* (the blocks'
 *                                 bytes are never read or written by the server), decay state
 *   window                        one range of WIN_SIZE bytes of address space, fixed at
 *                                 initialization around the first segment; its map has one
 *                                 slice word per 64 KiB (zero: not a page of ours), so free()
 *                                 validates a pointer with one compare and one load
 *   page (1..32 slices)           blocks of one of 60 size classes (16 B .. 1 MiB)
 *   large object (> 1 MiB)        its own mapping with a header page (struct large_hdr) in front;
 *                                 recorded in the metadata's hash map
 *   registry                      one byte per 4 MiB of the 47-bit address space: not ours /
 *                                 segment / large objects (the slow paths read it before
 *                                 dereferencing a pointer outside the window)
 *   client (one per thread)       the thread's queues, grouped by writer on separate cache
 *                                 lines: ready rings (metadata side produces, client consumes),
 *                                 a free ring (client produces), a doorbell;
 *                                 then the client-private magazines (bounded LIFOs of blocks,
 *                                 per class, with a one-line header per class that holds
 *                                 everything free() needs); then fields only the metadata
 *                                 owner touches
 *   sm_g (struct sm_global)       immutable tables after init; published control state;
 *                                 the metadata (partial-page lists, segment list, large map,
 *                                 statistics) */
/* How requests flow.
 *
 * A naive port pays a cross-core round trip on every malloc, so the client's fast
 * path never involves the metadata owner:
 *
 *   - per (thread, size class) a private magazine of freed blocks that malloc reuses
 *     first (it grows when blocks of the class keep leaving and coming back); its
 *     overflow goes out in batches through the thread's free ring, fire and forget;
 *   - per (thread, size class) a ready ring of blocks refilled by the metadata owner,
 *     ahead of demand when the server is awake (the client publishes its consumer
 *     index at a low-water mark);
 *   - when a ready ring is empty the client posts a miss; an awake, engaged server
 *     answers within microseconds (the paper's "mallocstart ... end signal", Sec.
 *     4.1); otherwise the client takes the metadata lock and refills it itself.
 *
 * The metadata owner serves refills before frees and visits clients round-robin
 * (Sec. 5.2). Rings use plain release/acquire stores and loads. The metadata owner
 * never touches the bytes of a block (free lists are bitmaps), so block memory is
 * not pulled into its cache (Sec. 5.1.1). A block freed by another thread than its
 * page's owner goes back to that page; magazines and rings are bounded, so there
 * is no blowup (Sec. 5.1.2). The server thread spins only on a budget earned by
 * work, steps back when it finds itself waiting for a CPU, and sleeps when idle
 * (sm_server.c).
 *
 * Memory layout: 4 MiB segments, aligned, cut into 64 KiB slices; slice 0 is
 * the header (metadata). A page is 1..32 slices of one class. Objects above the
 * largest class are mmapped with a header page. free() validates a pointer before
 * it dereferences it: one compare puts it in the segment window, whose map gives
 * its slice word (zero: not ours); pointers outside the window take a slow path
 * through a byte per 4 MiB region of the address space (a lazily mapped registry). */
#ifndef SM_TYPES_H
#define SM_TYPES_H

/* ---- geometry ---------------------------------------------------------- */
#define SEG_SHIFT 22
#define SEG_SIZE ((uintptr_t)1 << SEG_SHIFT) /* 4 MiB */
#define SLICE_SHIFT 16
#define SLICE_SIZE ((uintptr_t)1 << SLICE_SHIFT) /* 64 KiB */
#define SLICES (SEG_SIZE / SLICE_SIZE)           /* 64; slice 0 is the header */
#define MAX_CLASS_SIZE ((size_t)1 << 20)         /* larger objects are mmapped */
#define NCLS_MAX 64
#define RING 64        /* ready-ring slots per (thread, class) */
#define FRING 512      /* free-ring slots per thread */
#define MAG_STRIDE 4096 /* magazine slots per (thread, class); virtual memory, only the slots
                         * a magazine has used are ever touched */
#define LCAP_MAX (MAG_STRIDE - 1) /* private magazine slots per (thread, class), at most */
/* The segment window (sm_registry.c): segments mapped inside it are validated by free() with
 * one compare and one load of its map (2^22 slice words, 32 MiB of MAP_NORESERVE virtual
 * memory, touched only where segments are). Segments outside it (a heap above 256 GiB, or
 * no map) still work, through the registry, on a slower path. */
#define WIN_SHIFT 38
#define WIN_SIZE ((uintptr_t)1 << WIN_SHIFT)
#define WIN_SLICES (WIN_SIZE >> SLICE_SHIFT)
#define WIN_OFF ((uintptr_t)1 << 63) /* window base while there is none: no pointer is inside */
#define MAG_GROW_MAX_SIZE 1024              /* magazines of classes up to this size grow, ... */
#define MAG_GROW_BYTES ((size_t)256 << 10)  /* ... each to at most this many bytes, ... */
#define MAG_THREAD_BYTES ((size_t)1 << 20)  /* ... a thread's by this many in all */
#define MAX_CLIENTS 4096
#define PAGE_SIZE_OS 4096
#define ADDR_BITS 47
#define REG_KIND_SEG 1  /* registry: 0 = not ours, 1 = segment, >= 2 = large objects + 1 */
#define LARGE_MAGIC 0x53504d4c41524745ull /* "SPMLARGE" */
#define SEG_MAGIC 0x53504d53u

#define LCACHE_N 16                 /* freed large mappings kept for reuse ... */
#define LCACHE_BYTES ((size_t)32 << 20) /* ... up to this many bytes, for LCACHE_DECAY_NS */
/* A cached mapping is resident memory: the data cube (big temporaries freed view after view)
 * peaked at 1.2-1.6x mimalloc's RSS with them kept for DECAY_NS; the reuse that matters
 * (a buffer freed and allocated again, malloc-large) happens within microseconds. */
#define LCACHE_DECAY_NS 100000000ull
/* Empty pages go back to the OS after this (madvise), slice by slice: the data cube, which
 * frees everything at the end of a round and builds again, kept its first round's memory
 * resident through the second with 0.5 s per segment (a segment with any recent release
 * kept all its free slices): 1.2-1.6x mimalloc's peak RSS. mimalloc purges after 10-25 ms. */
#define DECAY_NS 100000000ull
/* The server's spin budget (sm_server.c): it earns 1/SPIN_EARN_DIV of the time it spends
 * serving, starts each wake-up with SPIN_START_NS, never holds more than SPIN_MAX_NS. */
#define SPIN_EARN_DIV 8
#define SPIN_START_NS 50000ull
#define SPIN_MAX_NS 1000000ull
#define WINDOW_NS 2000000ull        /* the server checks whether it gets its CPU this often */
#define BACKOFF_MIN_NS 10000000ull  /* not paying: clients stop waking it for this long, ... */
#define BACKOFF_MAX_NS 1000000000ull /* ... doubling up to this */
/* With no registered client active, the server looks whether it is the process's last
 * thread after ALONE_MIN_NS, doubling up to ALONE_MAX_NS (see sm_server_main). */
#define ALONE_MIN_NS 1000000ull
#define ALONE_MAX_NS 1000000000ull
#define CLIENT_WAIT_NS 5000ull      /* a client waits this long for an awake server, then serves itself */
#define WAKE_PENDING (FRING / 2)    /* queued frees that justify waking a sleeping, engaged server */

/* ---- shared data structures --------------------------------------------- */
struct page {               /* server-private */
    struct page *next, *prev; /* in the class's partial list */
    uintptr_t start;          /* first block */
    uint32_t cls, nslices, capacity, nfree;
    struct page **list;       /* the partial list it is on (a client's or the global one), or NULL */
    uint32_t owner, owner_gen; /* the client whose ready rings it feeds (slot + 1), 0 = none */
    uint64_t free_bits[4096 / 64]; /* 1 = free in the server's hands */
};

/* The slice word (one per 64 KiB slice; free() reads it with one load and needs nothing else):
 *   bits  0-31  the low 32 bits of the page's first byte (bits 0-15 are 0: pages start on a
 *               slice; a segment never crosses a 4 GiB boundary, so (uint32_t)p - (uint32_t)w
 *               is p's offset in its page);
 *   bits 32-47  owner of the page (client slot + 1, 0 = none): frees of other threads'
 *               blocks go back to the owner's page, so threads do not share cache lines
 *               (no false sharing, cache-scratch);
 *   bits 48-63  (class + 1) * sizeof(struct mag_hdr): the offset of the class's magazine
 *               header in a client, which holds the class's block-start check; 0 = no class
 *               (header slice, free slice, not ours), whose header rejects every pointer.
 * Zero is "not a page": the window map starts out all zero. */
struct segment {
    /* read by clients' slow paths (segments outside the window) and the metadata owner */
    uint64_t *si;   /* its 64 slice words: in the window map, or slice_info below */
    uint32_t magic;
    uint64_t slice_info[SLICES]; /* the slice words of a segment outside the window */
    /* server-private from here on (own cache lines) */
    _Alignas(SM_CL) struct segment *next;
    uint64_t free_slices; /* bit i: slice i free */
    uint64_t dirty_slices; /* free but not yet returned to the OS */
    uint32_t dirty_ms[SLICES]; /* when each dirty slice was freed (sm_mono_ns / 2^20, ~1 ms) */
    struct page pages[SLICES]; /* indexed by the page's first slice */
};
_Static_assert(sizeof(struct segment) <= SLICE_SIZE, "segment header must fit slice 0");

struct large_hdr { /* the page before a large object's first byte */
    uint64_t magic;
    uintptr_t base;
    size_t maplen;
    size_t size;     /* requested size */
    size_t align;
    uint64_t recycled; /* 1: the mapping came from the cache, so calloc must clear it */
};

enum { ST_FREE = 0, ST_ACTIVE = 1, ST_EXITING = 2 };

/* A client's per-class header: client-private, one cache line, everything the malloc and
 * free fast paths touch besides the block and its magazine slot. Index cls + 1; entry 0
 * ("no class") has chk_lim 0, so a pointer whose slice word says "no page" is rejected by
 * the same compare that checks a block start. */
struct mag_hdr {
    _Alignas(SM_CL) void **top;         /* the magazine: blocks at base[0 .. top - base - 1], LIFO */
    void **end;          /* base + capacity (starts at sm_g.cls_lcap, grows) */
    void **base;         /* &c->mag[cls][0] */
    uint64_t chk_mul, chk_lim; /* block-start check, copied from sm_g.cls_chk (see there) */
    uint32_t head, ctail, low; /* ready-ring consumer index, cached producer index, low-water mark */
    uint32_t size;       /* the class's block size (malloc_usable_size) */
    uint16_t refill;     /* blocks a miss takes straight into the magazine (doubles per miss) */
    uint8_t flushed;     /* the magazine overflowed since this class's last miss */
};
#define MH_SIZE SM_CL
_Static_assert(sizeof(struct mag_hdr) == MH_SIZE, "one cache line per class: the slice word holds (class + 1) * MH_SIZE");
#define SI_K_SHIFT 48

struct client {
    /* client-written, server-read */
    _Alignas(SM_CL) uint64_t doorbell;
    uint32_t state;
    uint32_t id; /* slot index + 1, fixed */
    uint32_t free_tail;
    _Alignas(SM_CL) uint32_t head_pub[NCLS_MAX];
    _Alignas(SM_CL) uint32_t miss[NCLS_MAX];
    _Alignas(SM_CL) uint64_t c_fast, c_ring, c_miss, c_inline; /* client counters, read for stats */
    /* written by the metadata owner (server or this client under srv_lock), client-read */
    _Alignas(SM_CL) uint32_t tail[NCLS_MAX];
    _Alignas(SM_CL) uint32_t free_head;
    uint32_t oom_seq;   /* bumped when a miss could not be served: out of memory */
    _Alignas(SM_CL) void *ring[NCLS_MAX][RING];
    _Alignas(SM_CL) void *fring[FRING];
    /* client-private: what free() reads besides the slice word and the class header (one line;
     * copies of immutable globals, so the fast paths never touch sm_g) */
    _Alignas(SM_CL) uintptr_t win_base; /* sm_g.win_base */
    const uint64_t *win_map;            /* sm_g.win_map */
    uint64_t key;                       /* sm_g.free_key */
    uint16_t my_id;                     /* id (the owner field of this thread's pages) */
    uint32_t my_free_tail, my_free_head_cache, my_oom_seen;
    uint64_t my_doorbell;
    uint64_t mag_bytes;          /* magazine growth granted so far, in bytes: at most MAG_THREAD_BYTES */
    /* (size + 15) / 16 -> offset of the class's header in mh (malloc's size-class lookup) */
    uint16_t lut[1024 / 16 + 1];
    _Alignas(SM_CL) struct mag_hdr mh[NCLS_MAX + 1];
    /* the magazines' slots follow the struct in the client's mapping: NCLS_MAX * MAG_STRIDE
     * pointers (sm_mag_slots); nothing on the fast paths indexes them but the headers */
    /* metadata: touched only under srv_lock (sv_doorbell and sv_last_ns are also read
     * without it by the server's idle scan, hence relaxed atomic accesses) */
    _Alignas(SM_CL) uint64_t sv_doorbell;
    uint64_t sv_served;                /* classes with a ready ring to keep full */
    uint64_t sv_last_ns;               /* last doorbell seen: is this thread busy? */
    uint32_t sv_gen;                   /* bumped at reclaim: pages owned by the old thread go stale */
    struct page *sv_partial[NCLS_MAX]; /* pages this thread owns that have free blocks */
    uint32_t sv_target[NCLS_MAX];
    uint32_t sv_miss[NCLS_MAX];
};

/* ---- global state --------------------------------------------------------- */
enum { MODE_INLINE = 0, MODE_THREAD = 1 };
enum { INIT_NONE = 0, INIT_BUSY = 1, INIT_DONE = 2, INIT_FAILED = 3 };

struct sm_global {
    /* immutable after init, read by everybody */
    _Alignas(SM_CL) uint32_t nclass;
    uint32_t cls_size[NCLS_MAX];
    uint32_t cls_nslices[NCLS_MAX];
    uint32_t cls_lcap[NCLS_MAX];   /* private magazine capacity at first */
    uint32_t cls_lcap_max[NCLS_MAX]; /* ... and the most it grows to (MAG_GROW_BYTES) */
    uint32_t cls_tmax[NCLS_MAX];   /* ready-ring target cap */
    /* free()'s block-start check, indexed by class + 1 (entry 0: no class, lim 0 rejects
     * everything). A page offset off (< 2^32) is the start of one of the page's `cap` blocks
     * of size d iff off * mul < lim (64-bit wrapping multiply), with mul = ceil(2^64 / d) and
     * lim = (cap - 1) * e + 1, e = mul * d - 2^64: for off = k * d the product is k * e, for
     * any other off it is >= mul (Lemire, Kaser and Kurz, "Faster remainder by direct
     * computation", 2019), and mul > lim. One multiply and one compare check divisibility
     * and the slack after the last block at once. Copied into every client's class headers. */
    struct { uint64_t mul, lim; } cls_chk[NCLS_MAX + 1];
    uint8_t lut_small[1024 / 16 + 1];  /* (size + 15) / 16 -> class */
    uint8_t lut_big[MAX_CLASS_SIZE / 1024 + 1]; /* (size + 1023) / 1024 -> smallest class >= that, refined */
    uint8_t *registry; /* one byte per 4 MiB region */
    uintptr_t win_base;  /* the segment window [win_base, win_base + WIN_SIZE); WIN_OFF: none */
    uint64_t *win_map;   /* its slice words, one per 64 KiB */
    /* Written into word SM_KEY_WORD (0) of every block a client's magazine holds (glibc's tcache "key"
     * idea): a free that finds it there scans its magazine, so a double free is caught even
     * when other frees came in between. Random per process (AT_RANDOM), never 0. */
    uint64_t free_key;
    /* published control state */
    _Alignas(SM_CL) uint32_t init;
    uint32_t mode;
    uint32_t nclients;
    struct client *clients[MAX_CLIENTS];
    _Alignas(SM_CL) uint32_t srv_sleeping; /* futex; the server sets 1, a waker 0 */
    uint32_t srv_engaged; /* server -> clients: waking me for queued work pays (not oversubscribed) */
    uint32_t srv_beat;    /* the server's loop counter: a client sees whether it is running */
    /* the server thread's own counters (it writes them without the lock; relaxed atomics) */
    uint64_t srv_busy_ns, srv_sleeps, srv_wakeups, srv_oversub, clients_registered;
    _Alignas(SM_CL) uint32_t pause_req, paused; /* fork quiescence */
    uint32_t quit_req, srv_left; /* sm_server_stop: the server thread leaves, and has left */
    int srv_tid;                 /* the server thread's kernel id */
    pthread_mutex_t reg_lock;  /* client registration (a control path, not the fast path) */
    pthread_mutex_t srv_lock;  /* the metadata lock: held by whoever runs the server's code */
    pthread_mutex_t fb_lock;   /* the fallback client, for threads past their TLS destructor */
    struct client *fallback;
    pthread_key_t key;
    bool thread_wanted;
    uint32_t starting;
    int pin_cpu;
    bool print_stats;
    unsigned ncpu;
    bool wake_async;  /* NEARMEM_SPEEDMALLOC_WAKE=1: clients wake an engaged server for queued frees (default off) */
    bool fault_stalled; /* NEARMEM_SPEEDMALLOC_FAULT=stalled-server: the server looks awake but never runs (tests) */
    /* server-private */
    _Alignas(SM_CL) struct page *partial[NCLS_MAX];
    struct segment *segs;
    uint32_t rr;
    uint64_t now_ns; /* the server's clock, refreshed every few polls (relaxed atomic) */
    uint64_t dirty_pages;  /* segments with dirty slices (sweeps pending) */
    uint64_t last_sweep;   /* sm_mono_ns of the last decay sweep */
    struct { uintptr_t key; struct large_hdr *hdr; } *lmap; /* open addressing, key 0 = empty, 1 = tombstone */
    struct { uintptr_t base; size_t len; uint64_t since; } lcache[LCACHE_N]; /* freed large mappings */
    unsigned lcache_n;
    size_t lcache_bytes;
    size_t lmap_cap, lmap_used;
    nm_speedmalloc_stats st;
    uint32_t reported_invalid, reported_double, reported_oom;
    pthread_t server_thread;
};

#endif
