/* SpeedMalloc in software: all allocator metadata on one server thread.
 *
 * The paper (SpeedMalloc, Sec. 3-5) puts every allocator data structure on a
 * lightweight support core reached through hardware message queues. Here the
 * support core is a server thread and the queues are SPSC rings in ordinary
 * memory. A naive port pays a cross-core round trip on every malloc, so the
 * client's fast path never waits for the server:
 *
 *   - per (thread, size class) a ready ring that the server keeps filled ahead
 *     of demand (prefetched magazines); the client pops locally and publishes
 *     its consumer index only at a low-water mark, with a doorbell;
 *   - per (thread, size class) a small private magazine of freed blocks that
 *     malloc reuses first; its overflow goes to the server in batches through
 *     the thread's free ring, fire and forget;
 *   - only when a ready ring is empty does malloc post a request and wait
 *     (spin, then futex) -- the paper's "mallocstart ... end signal" (Sec. 4.1).
 *
 * The server serves refills and synchronous requests before frees and visits
 * clients round-robin (Sec. 5.2), and blocks on a futex when idle. Its metadata
 * (page descriptors and free bitmaps, segment slice maps, the large-object map,
 * statistics) is never written by a client, and no client performs an atomic
 * read-modify-write on it: rings use plain release/acquire stores and loads,
 * wake-ups use a store-fence-load (Dekker) handshake. The server never touches
 * the bytes of a block (its free lists are bitmaps), so block memory is not
 * pulled into the server's cache (Sec. 5.1.1). Blocks are not owned by threads:
 * a block freed anywhere can be reused anywhere, and every magazine is bounded,
 * so there is no blowup (Sec. 5.1.2).
 *
 * Memory layout: 4 MiB segments, aligned, cut into 64 KiB slices; slice 0 is
 * the header (an immutable-while-live slice->class table that clients read on
 * free, then server-private page descriptors on other cache lines). A page is
 * 1..32 slices of one class. Objects above the largest class are mmapped with
 * a header page. A byte per 4 MiB region of the address space (a lazily mapped
 * registry) tells free() whether a pointer is ours before it is dereferenced.
 *
 * Built twice: with SM_EXPORT_LIBC the functions are malloc, free, ...; without
 * it they are nm_sm_malloc, ... (see include/nearmem/speedmalloc.h). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nearmem/common/sizeclass.h"
#include "nearmem/speedmalloc.h"

#ifdef SM_EXPORT_LIBC
#define SM_FN(name) name
#define SM_PUBLIC __attribute__((visibility("default")))
#else
#define SM_FN(name) nm_sm_##name
#define SM_PUBLIC
#endif

#define SM_LIKELY(x) __builtin_expect(!!(x), 1)
#define SM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SM_TLS __thread __attribute__((tls_model("initial-exec")))
#define SM_CL 64
#define SM_SLOW __attribute__((noinline, cold))

#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define STORE_SC(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#ifdef NEARMEM_TSAN
/* TSan does not model standalone fences. A seq_cst read-modify-write on one
 * shared word orders the Dekker-style doorbell (store flag; fence; load the
 * other side's flag) just as well, and TSan understands it. TSan builds only. */
static unsigned long sm_tsan_fence_word;
#define FENCE_SC() ((void)__atomic_fetch_add(&sm_tsan_fence_word, 0, __ATOMIC_SEQ_CST))
#else
#define FENCE_SC() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

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
#define MAG_STRIDE 256 /* magazine array stride per (thread, class): slot 0 unused */
#define LCAP_MAX (MAG_STRIDE - 1) /* private magazine slots per (thread, class) */
#define MAX_CLIENTS 4096
#define PAGE_SIZE_OS 4096
#define ADDR_BITS 47
#define REG_KIND_SEG 1  /* registry: 0 = not ours, 1 = segment, >= 2 = large objects + 1 */
#define LARGE_MAGIC 0x53504d4c41524745ull /* "SPMLARGE" */
#define SEG_MAGIC 0x53504d53u

#define LCACHE_N 16                 /* freed large mappings kept for reuse ... */
#define LCACHE_BYTES ((size_t)32 << 20) /* ... up to this many bytes, for DECAY_NS */
#define SPIN_SERVER_NS 2000000ull   /* server polls this long after its last work before sleeping */
#define DECAY_NS 500000000ull       /* empty pages go back to the OS after this (madvise) */
#define CLIENT_SPIN 20000           /* polls before a waiting client blocks */

/* ---- helpers without libc allocation ----------------------------------- */
static long sm_futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}
static void futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    sm_futex(addr, FUTEX_WAIT_PRIVATE, val, timeout_ns ? &ts : NULL);
}
static void futex_wake(uint32_t *addr) { sm_futex(addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL); }
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static void *os_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
/* Small text output for reports and statistics: write(2), never stdio. */
static size_t fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}
static void write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) { if (w < 0 && errno == EINTR) continue; return; }
        s += w; n -= (size_t)w;
    }
}
static void write_str(int fd, const char *s) { write_all(fd, s, strlen(s)); }
static void write_hex(int fd, uintptr_t v)
{
    char b[20] = "0x";
    int n = 2;
    for (int sh = 60; sh >= 0; sh -= 4) {
        unsigned d = (unsigned)(v >> sh) & 15u;
        if (n == 2 && d == 0 && sh) continue;
        b[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    write_all(fd, b, (size_t)n);
}

/* ---- shared data structures --------------------------------------------- */
struct page {               /* server-private */
    struct page *next, *prev; /* in the class's partial list */
    uintptr_t start;          /* first block */
    uint32_t cls, nslices, capacity, nfree;
    struct page **list;       /* the partial list it is on (a client's or the global one), or NULL */
    uint32_t owner, owner_gen; /* the client whose ready rings it feeds (slot + 1), 0 = none */
    uint64_t free_bits[4096 / 64]; /* 1 = free in the server's hands */
};

struct segment {
    /* client-read; the server writes a slice's word with one store */
    /* One word per slice (first in the header, so its address is one mask and one shift), so free() reads everything it needs with one load:
     *   bits 0-15  owner of the page (client slot + 1, 0 = none): frees of other
     *              threads' blocks go back to the server, so threads do not share
     *              cache lines (no false sharing, cache-scratch);
     *   bits 16-21 first slice of the page holding this slice (so w & 0x3f0000 is
     *              the page's offset in the segment);
     *   bits 24-31 class (SI_NOCLS = header or free slice). */
    uint32_t slice_info[SLICES];
    uint32_t magic;
    /* server-private from here on (own cache lines) */
    _Alignas(SM_CL) struct segment *next;
    uint64_t free_slices; /* bit i: slice i free */
    uint64_t dirty_slices; /* free but not yet returned to the OS */
    uint64_t dirty_since;
    struct page pages[SLICES]; /* indexed by the page's first slice */
};
_Static_assert(sizeof(struct segment) <= SLICE_SIZE, "segment header must fit slice 0");
_Static_assert(offsetof(struct segment, slice_info) == 0, "free() indexes slice words from the segment base");

struct large_hdr { /* the page before a large object's first byte */
    uint64_t magic;
    uintptr_t base;
    size_t maplen;
    size_t size;     /* requested size */
    size_t align;
    uint64_t recycled; /* 1: the mapping came from the cache, so calloc must clear it */
};

enum { ST_FREE = 0, ST_ACTIVE = 1, ST_EXITING = 2 };
enum { REQ_NONE = 0, REQ_LARGE_MALLOC, REQ_LARGE_REALLOC, REQ_STATS };

struct cls_priv { /* client-private per class */
    uint32_t head, ctail, low; /* ready-ring consumer index, cached producer index, low-water mark */
};

struct client {
    /* client-written, server-read */
    _Alignas(SM_CL) uint64_t doorbell;
    uint32_t state;
    uint32_t id; /* slot index + 1, fixed */
    uint32_t free_tail;
    uint32_t req_seq, req_kind;
    size_t req_size, req_align;
    void *req_ptr;
    void *req_out;
    _Alignas(SM_CL) uint32_t head_pub[NCLS_MAX];
    _Alignas(SM_CL) uint32_t miss[NCLS_MAX];
    _Alignas(SM_CL) uint64_t c_fast, c_ring, c_miss, c_block; /* client counters, read by the server for stats */
    /* written by both, never read-modify-written: the client sets 1, the server 0 */
    _Alignas(SM_CL) uint32_t wait_word;
    /* server-written, client-read */
    _Alignas(SM_CL) uint32_t tail[NCLS_MAX];
    _Alignas(SM_CL) uint32_t free_head;
    uint32_t oom_seq;   /* bumped when a miss could not be served: out of memory */
    uint32_t resp_seq;
    void *resp_ptr;
    int resp_err;
    _Alignas(SM_CL) void *ring[NCLS_MAX][RING];
    _Alignas(SM_CL) void *fring[FRING];
    /* client-private */
    _Alignas(SM_CL) uint32_t my_free_tail, my_free_head_cache, my_req_seq, my_oom_seen;
    uint64_t my_doorbell;
    struct cls_priv priv[NCLS_MAX];
    uint32_t mag_n[NCLS_MAX];    /* blocks in each class's magazine, at mag[cls][1..n] */
    uint32_t mag_lcap[NCLS_MAX]; /* copy of g.cls_lcap, next to mag_n */
    /* entries at mag[cls][1..n]; slot 0 stays NULL (free_keyed scans down to 1) */
    _Alignas(SM_CL) void *mag[NCLS_MAX][MAG_STRIDE];
    /* server-private */
    _Alignas(SM_CL) uint64_t sv_doorbell;
    uint64_t sv_served;                /* classes with a ready ring to keep full */
    uint32_t sv_req_seq;
    uint64_t sv_last_ns;               /* last doorbell seen: is this thread busy? */
    uint32_t sv_gen;                   /* bumped at reclaim: pages owned by the old thread go stale */
    struct page *sv_partial[NCLS_MAX]; /* pages this thread owns that have free blocks */
    uint32_t sv_target[NCLS_MAX];
    uint32_t sv_miss[NCLS_MAX];
};

/* ---- global state --------------------------------------------------------- */
enum { MODE_INLINE = 0, MODE_THREAD = 1 };
enum { INIT_NONE = 0, INIT_BUSY = 1, INIT_DONE = 2, INIT_FAILED = 3 };

static struct {
    /* immutable after init, read by everybody */
    _Alignas(SM_CL) uint32_t nclass;
    uint32_t cls_size[NCLS_MAX];
    uint32_t cls_nslices[NCLS_MAX];
    uint32_t cls_lcap[NCLS_MAX];   /* private magazine capacity */
    uint32_t cls_tmax[NCLS_MAX];   /* ready-ring target cap */
    uint64_t cls_recip[NCLS_MAX];  /* ceil(2^40 / size): exact division of page offsets */
    uint8_t cls_shares_lines[NCLS_MAX]; /* size not a multiple of 64: blocks share cache lines */
    /* free()'s block-start check, indexed by the slice word's class byte (256 entries, so
     * SI_NOCLS and stray bytes fail without a separate range test): off is a block start
     * iff off < lim and off * div <= div - 1 (divisibility by one multiply: Lemire, Kaser
     * and Kurz, "Faster remainder by direct computation", 2019). lim = 0: no such class. */
    struct { uint64_t div; uint64_t lim; } cls_chk[256];
    uint8_t lut_small[1024 / 16 + 1];  /* (size + 15) / 16 -> class */
    uint8_t lut_big[MAX_CLASS_SIZE / 1024 + 1]; /* (size + 1023) / 1024 -> smallest class >= that, refined */
    uint8_t *registry; /* one byte per 4 MiB region */
    /* Written into word 1 of every block a client's magazine holds (glibc's tcache "key"
     * idea): a free that finds it there scans its magazine, so a double free is caught even
     * when other frees came in between. Random per process (AT_RANDOM), never 0. */
    uint64_t free_key;
    /* published control state */
    _Alignas(SM_CL) uint32_t init;
    uint32_t mode;
    uint32_t nclients;
    struct client *clients[MAX_CLIENTS];
    _Alignas(SM_CL) uint32_t srv_sleeping; /* futex; the server sets 1, a waker 0 */
    _Alignas(SM_CL) uint32_t pause_req, paused; /* fork quiescence */
    pthread_mutex_t reg_lock;  /* client registration (a control path, not the fast path) */
    pthread_mutex_t srv_lock;  /* held by whoever runs server code in inline mode */
    pthread_mutex_t fb_lock;   /* the fallback client, for threads past their TLS destructor */
    struct client *fallback;
    pthread_key_t key;
    bool thread_wanted;
    uint32_t starting;
    int pin_cpu;
    bool print_stats;
    unsigned ncpu;
    uint32_t oversub; /* server -> clients hint: more busy threads than CPUs, so yield instead of spinning */
    /* server-private */
    _Alignas(SM_CL) struct page *partial[NCLS_MAX];
    struct segment *segs;
    uint32_t rr;
    uint64_t now_ns; /* the server's clock, refreshed every few polls */
    uint64_t last_work_ns;
    uint64_t dirty_pages;
    struct { uintptr_t key; struct large_hdr *hdr; } *lmap; /* open addressing, key 0 = empty, 1 = tombstone */
    struct { uintptr_t base; size_t len; uint64_t since; } lcache[LCACHE_N]; /* freed large mappings */
    unsigned lcache_n;
    size_t lcache_bytes;
    size_t lmap_cap, lmap_used;
    nm_speedmalloc_stats st;
    uint64_t blocks_out[NCLS_MAX];
    uint32_t reported_invalid, reported_double, reported_oom;
    pthread_t server_thread;
} g = {.reg_lock = PTHREAD_MUTEX_INITIALIZER, .srv_lock = PTHREAD_MUTEX_INITIALIZER,
       .fb_lock = PTHREAD_MUTEX_INITIALIZER, .pin_cpu = -1};

static SM_TLS struct client *tls_client;
static SM_TLS uint8_t tls_state; /* 0 new, 1 registered, 2 exited (use the fallback), 3 server thread */
static SM_TLS uint8_t tls_in_init;

/* ---- bootstrap arena: allocations made while this thread is initializing --- */
static _Alignas(64) unsigned char boot_arena[256 << 10];
static size_t boot_used;
static bool in_boot(const void *p)
{
    return (const unsigned char *)p >= boot_arena && (const unsigned char *)p < boot_arena + sizeof boot_arena;
}
static void *boot_alloc(size_t size, size_t align)
{
    if (align < 16) align = 16;
    size_t used = LOAD_RLX(&boot_used), at;
    do { /* a compare-and-swap on the bootstrap arena only, never on allocator metadata */
        at = (used + 16 + align - 1) & ~(align - 1);
        if (size > sizeof boot_arena || at + size > sizeof boot_arena) { errno = ENOMEM; return NULL; }
    } while (!__atomic_compare_exchange_n(&boot_used, &used, at + size, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    ((size_t *)(boot_arena + at))[-1] = size;
    return boot_arena + at;
}
static size_t boot_size(const void *p) { return ((const size_t *)p)[-1]; }

/* ---- error reports: once per kind, never corrupt, never abort ------------- */
static void report(uint32_t *once, const char *what, const void *p)
{
    if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED)) return;
    int e = errno;
    write_str(2, "speedmalloc: ");
    write_str(2, what);
    write_str(2, " ");
    write_hex(2, (uintptr_t)p);
    write_str(2, " ignored (reported once; see nm_speedmalloc_get_stats)\n");
    errno = e;
}

/* ---- size classes -------------------------------------------------------- */
static inline int size_class(size_t size)
{
    if (SM_LIKELY(size <= 1024)) return g.lut_small[(size + 15) >> 4];
    if (size > MAX_CLASS_SIZE) return -1;
    unsigned c = g.lut_big[(size + 1023) >> 10];
    while (g.cls_size[c] < size) c++;
    return (int)c;
}

static bool classes_init(void)
{
    nm_sizeclasses sc;
    if (nm_sizeclass_init_geometric(&sc, 16, MAX_CLASS_SIZE, 4, 16) != 0 || sc.count > NCLS_MAX) return false;
    g.nclass = sc.count;
    for (unsigned c = 0; c < sc.count; c++) {
        size_t s = sc.size[c];
        g.cls_size[c] = (uint32_t)s;
        size_t ns = s <= 8192 ? 1 : (s * 8 + SLICE_SIZE - 1) / SLICE_SIZE;
        if (ns > 32) ns = 32;
        g.cls_nslices[c] = (uint32_t)ns;
        /* a magazine holds up to 128 KiB: at least 8 small blocks, 2 big ones */
        size_t lcap = (128u << 10) / s, lmin = s <= (16u << 10) ? 8 : 2;
        g.cls_lcap[c] = (uint32_t)(lcap < lmin ? lmin : lcap > LCAP_MAX ? LCAP_MAX : lcap);
        size_t tmax = (128u << 10) / s;
        g.cls_tmax[c] = (uint32_t)(tmax < 2 ? 2 : tmax > RING ? RING : tmax);
        g.cls_recip[c] = ((1ull << 40) + s - 1) / s;
        g.cls_shares_lines[c] = (s % 64) != 0;
        g.cls_chk[c].div = UINT64_MAX / s + 1;
        g.cls_chk[c].lim = (uint32_t)((ns * SLICE_SIZE) / s * s); /* capacity * size */
    }
    for (size_t i = 0; i < sizeof g.lut_small; i++) {
        size_t s = i ? i * 16 : 1;
        g.lut_small[i] = (uint8_t)nm_sizeclass_lookup(&sc, s);
    }
    for (size_t i = 0; i < sizeof g.lut_big; i++) {
        size_t s = i ? (i - 1) * 1024 + 1 : 1; /* the smallest size mapping to bucket i */
        g.lut_big[i] = (uint8_t)nm_sizeclass_lookup(&sc, s);
    }
    return true;
}

/* ---- the registry ---------------------------------------------------------- */
static inline unsigned reg_kind(uintptr_t p)
{
    if (SM_UNLIKELY((p >> ADDR_BITS) || !g.registry)) return 0;
    return LOAD_RLX(&g.registry[p >> SEG_SHIFT]);
}
static void reg_set(uintptr_t p, unsigned v) { STORE_REL(&g.registry[p >> SEG_SHIFT], (uint8_t)v); }

/* Class of a small block, or -1 when p is not the start of a block we handed out
 * (a client-side check that costs a few loads and a multiply). */
#define SI_NOCLS 0xffu
#define SI_CLS(w) ((w) >> 24)
#define SI_PSTART(w) (((w) >> 16) & (SLICES - 1))
#define SI_PAGE_OFF(w) ((w) & ((SLICES - 1) << SLICE_SHIFT))
#define SI_OWNER(w) ((w) & 0xffffu)
#define SI_MAKE(cls, pstart, owner) ((uint32_t)(cls) << 24 | (uint32_t)(pstart) << 16 | (uint32_t)(owner))
_Static_assert(SLICE_SHIFT == 16 && SLICES == 64 && MAX_CLIENTS < 0xffff, "slice word layout");
static inline uint32_t slice_word(uintptr_t p)
{
    const struct segment *s = (const struct segment *)(p & ~(SEG_SIZE - 1));
    return LOAD_RLX(&s->slice_info[(p >> SLICE_SHIFT) & (SLICES - 1)]);
}
/* Is p (in a registered segment, with slice word w) the start of a block of class SI_CLS(w)? */
static inline bool block_start_ok(uintptr_t p, uint32_t w)
{
    uint32_t off = (uint32_t)(p & (SEG_SIZE - 1)) - SI_PAGE_OFF(w);
    unsigned cls = SI_CLS(w);
    return off < g.cls_chk[cls].lim && (uint64_t)off * g.cls_chk[cls].div <= g.cls_chk[cls].div - 1;
}
static inline int block_class(uintptr_t p)
{
    uint32_t w = slice_word(p);
    return block_start_ok(p, w) ? (int)SI_CLS(w) : -1;
}

/* =========================================================================
 * The server: everything below until "client side" runs only on the server
 * thread (or, in inline mode, under srv_lock).
 * ========================================================================= */
static struct segment *seg_new(void)
{
    uintptr_t raw = (uintptr_t)os_map(2 * SEG_SIZE);
    if (!raw) return NULL;
    uintptr_t a = (raw + SEG_SIZE - 1) & ~(SEG_SIZE - 1);
    if (a > raw) munmap((void *)raw, a - raw);
    if (raw + 2 * SEG_SIZE > a + SEG_SIZE) munmap((void *)(a + SEG_SIZE), raw + 2 * SEG_SIZE - (a + SEG_SIZE));
    struct segment *s = (struct segment *)a;
    s->magic = SEG_MAGIC;
    for (unsigned i = 0; i < SLICES; i++) s->slice_info[i] = SI_MAKE(SI_NOCLS, 0, 0);
    s->free_slices = ~1ull;
    s->next = g.segs;
    g.segs = s;
    g.st.segments++;
    g.st.mapped_bytes += SEG_SIZE;
    reg_set(a, REG_KIND_SEG);
    return s;
}

static void list_push(struct page **head, struct page *pg)
{
    pg->prev = NULL;
    pg->next = *head;
    if (pg->next) pg->next->prev = pg;
    *head = pg;
    pg->list = head;
}
static void list_remove(struct page *pg)
{
    if (pg->prev) pg->prev->next = pg->next;
    else *pg->list = pg->next;
    if (pg->next) pg->next->prev = pg->prev;
    pg->list = NULL;
}
static void page_set_owner(struct page *pg, struct client *c)
{
    struct segment *s = (struct segment *)(pg->start & ~(SEG_SIZE - 1));
    unsigned i = (unsigned)((pg->start - (uintptr_t)s) >> SLICE_SHIFT);
    pg->owner = c ? c->id : 0;
    pg->owner_gen = c ? c->sv_gen : 0;
    for (unsigned k = 0; k < pg->nslices; k++) { /* only the server writes slice words */
        uint32_t w = s->slice_info[i + k];
        STORE_REL(&s->slice_info[i + k], SI_MAKE(SI_CLS(w), SI_PSTART(w), pg->owner));
    }
}
/* The page's owner if it is still the same live thread. */
static struct client *page_owner(const struct page *pg)
{
    if (!pg->owner) return NULL;
    struct client *c = g.clients[pg->owner - 1];
    return c->sv_gen == pg->owner_gen && LOAD_ACQ(&c->state) == ST_ACTIVE ? c : NULL;
}

static struct page *page_new(unsigned cls)
{
    unsigned ns = g.cls_nslices[cls];
    uint64_t run = ns == 64 ? ~0ull : ((1ull << ns) - 1);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (struct segment *s = g.segs; s; s = s->next) {
            uint64_t fs = s->free_slices;
            if (!fs) continue;
            for (unsigned i = 1; i + ns <= SLICES; i++) {
                if (((fs >> i) & run) != run) continue;
                s->free_slices &= ~(run << i);
                s->dirty_slices &= ~(run << i);
                struct page *pg = &s->pages[i];
                pg->start = (uintptr_t)s + ((uintptr_t)i << SLICE_SHIFT);
                pg->cls = cls;
                pg->nslices = ns;
                pg->capacity = (uint32_t)((ns * SLICE_SIZE) / g.cls_size[cls]);
                pg->nfree = pg->capacity;
                memset(pg->free_bits, 0, sizeof pg->free_bits);
                memset(pg->free_bits, 0xff, (pg->capacity / 64) * sizeof(uint64_t));
                if (pg->capacity % 64) pg->free_bits[pg->capacity / 64] = (1ull << (pg->capacity % 64)) - 1;
                for (unsigned k = 0; k < ns; k++) STORE_REL(&s->slice_info[i + k], SI_MAKE(cls, i, 0));
                g.st.pages_in_use++;
                page_set_owner(pg, NULL);
                list_push(&g.partial[cls], pg);
                return pg;
            }
        }
        if (attempt == 0 && !seg_new()) return NULL;
    }
    return NULL;
}

static void page_release(struct segment *s, struct page *pg)
{
    unsigned i = (unsigned)((pg->start - (uintptr_t)s) >> SLICE_SHIFT);
    uint64_t run = ((pg->nslices == 64) ? ~0ull : ((1ull << pg->nslices) - 1)) << i;
    for (unsigned k = 0; k < pg->nslices; k++) {
        uint32_t w = s->slice_info[i + k];
        STORE_REL(&s->slice_info[i + k], SI_MAKE(SI_NOCLS, SI_PSTART(w), SI_OWNER(w)));
    }
    s->free_slices |= run;
    s->dirty_slices |= run;
    s->dirty_since = mono_ns();
    g.dirty_pages++;
    g.st.pages_in_use--;
}

/* Return the slices of pages that stayed empty for DECAY_NS to the OS. */
static void decay_sweep(uint64_t now)
{
    for (unsigned i = 0; i < g.lcache_n;) {
        if (now - g.lcache[i].since < DECAY_NS) { i++; continue; }
        munmap((void *)g.lcache[i].base, g.lcache[i].len);
        g.st.mapped_bytes -= g.lcache[i].len;
        g.st.madvised_bytes += g.lcache[i].len;
        g.lcache_bytes -= g.lcache[i].len;
        g.lcache[i] = g.lcache[--g.lcache_n];
    }
    if (!g.dirty_pages) return;
    uint64_t left = 0;
    for (struct segment *s = g.segs; s; s = s->next) {
        if (!s->dirty_slices) continue;
        if (now - s->dirty_since < DECAY_NS) { left++; continue; }
        uint64_t d = s->dirty_slices;
        while (d) {
            unsigned i = (unsigned)__builtin_ctzll(d);
            unsigned j = i;
            while (j < SLICES && (d >> j) & 1) j++;
            madvise((char *)s + ((uintptr_t)i << SLICE_SHIFT), (uintptr_t)(j - i) << SLICE_SHIFT, MADV_DONTNEED);
            g.st.madvised_bytes += (uint64_t)(j - i) << SLICE_SHIFT;
            d &= (j == 64) ? 0 : ~0ull << j;
        }
        s->dirty_slices = 0;
    }
    g.dirty_pages = left;
}

/* Takes back one small block. Validates against the free bitmap (double free). */
static void srv_free_small(uintptr_t p)
{
    struct segment *s = (struct segment *)(p & ~(SEG_SIZE - 1));
    unsigned sl = (unsigned)((p >> SLICE_SHIFT) & (SLICES - 1));
    uint32_t w = s->slice_info[sl];
    unsigned cls = SI_CLS(w);
    if (s->magic != SEG_MAGIC || cls >= g.nclass) { g.st.invalid_frees++; report(&g.reported_invalid, "free of a pointer outside any page (server)", (void *)p); return; }
    struct page *pg = &s->pages[SI_PSTART(w)];
    uint64_t off = p - pg->start;
    uint64_t idx = (off * g.cls_recip[cls]) >> 40;
    if (idx * g.cls_size[cls] != off || idx >= pg->capacity) { g.st.invalid_frees++; report(&g.reported_invalid, "free of a pointer that is not a block start (server)", (void *)p); return; }
    uint64_t bit = 1ull << (idx & 63);
    if (pg->free_bits[idx >> 6] & bit) { g.st.double_frees++; report(&g.reported_double, "double free of", (void *)p); return; }
    pg->free_bits[idx >> 6] |= bit;
    pg->nfree++;
    g.blocks_out[cls]--;
    g.st.bytes_out -= g.cls_size[cls];
    if (pg->nfree == pg->capacity) {
        /* Empty: back to the segment (keep it if it is its list's only page, to avoid thrash). */
        if (!pg->list || *pg->list != pg || pg->next) {
            if (pg->list) list_remove(pg);
            page_set_owner(pg, NULL);
            page_release(s, pg);
        }
    } else if (!pg->list) {
        struct client *o = page_owner(pg);
        if (!o && pg->owner) page_set_owner(pg, NULL);
        list_push(o ? &o->sv_partial[cls] : &g.partial[cls], pg);
    }
}

/* ---- large objects ------------------------------------------------------------ */
static size_t lmap_hash(uintptr_t k) { return (size_t)((k >> 12) * 0x9E3779B97F4A7C15ull); }
static bool lmap_grow(void)
{
    size_t ncap = g.lmap_cap ? g.lmap_cap * 2 : 1024;
    void *nm = os_map(ncap * sizeof *g.lmap);
    if (!nm) return false;
    __typeof__(g.lmap) old = g.lmap;
    size_t ocap = g.lmap_cap;
    g.lmap = nm;
    g.lmap_cap = ncap;
    g.lmap_used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].key <= 1) continue;
        size_t h = lmap_hash(old[i].key) & (ncap - 1);
        while (g.lmap[h].key) h = (h + 1) & (ncap - 1);
        g.lmap[h] = old[i];
        g.lmap_used++;
    }
    if (old) munmap(old, ocap * sizeof *old);
    return true;
}
static bool lmap_put(uintptr_t k, struct large_hdr *h)
{
    if ((g.lmap_used + 1) * 2 > g.lmap_cap && !lmap_grow()) return false;
    size_t i = lmap_hash(k) & (g.lmap_cap - 1);
    while (g.lmap[i].key > 1) i = (i + 1) & (g.lmap_cap - 1);
    if (g.lmap[i].key == 0) g.lmap_used++;
    g.lmap[i].key = k;
    g.lmap[i].hdr = h;
    return true;
}
static struct large_hdr *lmap_take(uintptr_t k)
{
    if (!g.lmap_cap) return NULL;
    size_t i = lmap_hash(k) & (g.lmap_cap - 1);
    while (g.lmap[i].key) {
        if (g.lmap[i].key == k) { g.lmap[i].key = 1; return g.lmap[i].hdr; }
        i = (i + 1) & (g.lmap_cap - 1);
    }
    return NULL;
}
static void reg_large_add(uintptr_t p)
{
    unsigned k = g.registry[p >> SEG_SHIFT];
    if (k == 0) k = 2;
    else if (k < 255) k++;
    reg_set(p, k);
}
static void reg_large_del(uintptr_t p)
{
    unsigned k = g.registry[p >> SEG_SHIFT];
    if (k == 255) return; /* saturated: stays marked (only weakens invalid-free detection) */
    reg_set(p, k <= 2 ? 0 : k - 1);
}

/* Mapping lengths in geometric steps (4 per doubling), so freed mappings fit later
 * requests of similar size; the unused tail is never touched, so it costs no RSS. */
static size_t large_round(size_t len)
{
    if (len < ((size_t)1 << 20) || len > ((size_t)1 << 40)) return len;
    unsigned lg = 63u - (unsigned)__builtin_clzll(len);
    size_t step = (size_t)1 << (lg - 2);
    return (len + step - 1) & ~(step - 1);
}

static void *srv_large_malloc(size_t size, size_t align, int *err)
{
    if (align < PAGE_SIZE_OS) align = PAGE_SIZE_OS;
    size_t len;
    if (size > PTRDIFF_MAX - align - 2 * PAGE_SIZE_OS) { *err = ENOMEM; return NULL; }
    len = large_round((size + PAGE_SIZE_OS + (align - PAGE_SIZE_OS) + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1));
    uintptr_t base = 0;
    uint64_t recycled = 0;
    for (unsigned i = 0; i < g.lcache_n; i++) { /* a cached mapping that fits without much waste */
        if (g.lcache[i].len < len || g.lcache[i].len > 2 * len) continue;
        base = g.lcache[i].base;
        len = g.lcache[i].len;
        g.lcache_bytes -= len;
        g.lcache[i] = g.lcache[--g.lcache_n];
        recycled = 1;
        break;
    }
    if (!base) {
        base = (uintptr_t)os_map(len);
        if (!base) { *err = ENOMEM; return NULL; }
        g.st.mapped_bytes += len;
    }
    uintptr_t user = (base + PAGE_SIZE_OS + align - 1) & ~(uintptr_t)(align - 1);
    struct large_hdr *h = (struct large_hdr *)(user - PAGE_SIZE_OS);
    h->recycled = recycled;
    h->magic = LARGE_MAGIC;
    h->base = base;
    h->maplen = len;
    h->size = size;
    h->align = align;
    if (!lmap_put(user, h)) { munmap((void *)base, len); *err = ENOMEM; return NULL; }
    reg_large_add(user);
    g.st.large_live++;
    g.st.large_allocs++;
    g.st.large_live_bytes += size;
    return (void *)user;
}

static void srv_free_large(uintptr_t p)
{
    struct large_hdr *h = lmap_take(p);
    if (!h) {
        if (g.registry[p >> SEG_SHIFT] == REG_KIND_SEG) { srv_free_small(p); return; }
        g.st.invalid_frees++;
        report(&g.reported_invalid, "free of a pointer that is not a live large object (server)", (void *)p);
        return;
    }
    reg_large_del(p);
    g.st.large_live--;
    g.st.large_live_bytes -= h->size;
    uintptr_t base = h->base;
    size_t len = h->maplen;
    while (g.lcache_n && (g.lcache_n == LCACHE_N || g.lcache_bytes + len > LCACHE_BYTES)) {
        unsigned old = 0; /* evict the oldest: recent sizes are the likely next requests */
        for (unsigned i = 1; i < g.lcache_n; i++)
            if (g.lcache[i].since < g.lcache[old].since) old = i;
        munmap((void *)g.lcache[old].base, g.lcache[old].len);
        g.st.mapped_bytes -= g.lcache[old].len;
        g.lcache_bytes -= g.lcache[old].len;
        g.lcache[old] = g.lcache[--g.lcache_n];
    }
    if (len <= LCACHE_BYTES / 4) {
        /* keep it for a while: programs often free and re-allocate large buffers */
        g.lcache[g.lcache_n].base = base;
        g.lcache[g.lcache_n].len = len;
        g.lcache[g.lcache_n].since = mono_ns();
        g.lcache_n++;
        g.lcache_bytes += len;
        return;
    }
    g.st.mapped_bytes -= len;
    munmap((void *)base, len);
}

static void *srv_large_realloc(uintptr_t p, size_t size, int *err)
{
    struct large_hdr *h = lmap_take(p);
    if (!h) { g.st.invalid_frees++; report(&g.reported_invalid, "realloc of an invalid pointer", (void *)p); *err = EINVAL; return NULL; }
    size_t need = (size + PAGE_SIZE_OS + (h->align - PAGE_SIZE_OS) + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1);
    if (size > PTRDIFF_MAX - h->align - 2 * PAGE_SIZE_OS) { lmap_put(p, h); *err = ENOMEM; return NULL; }
    uintptr_t user = p;
    if (need > h->maplen || (need < h->maplen / 2)) {
        size_t off = p - h->base, oldlen = h->maplen;
        void *nb = mremap((void *)h->base, oldlen, need, MREMAP_MAYMOVE);
        if (nb == MAP_FAILED) {
            lmap_put(p, h);
            if (need < h->maplen) return (void *)p; /* shrinking in place is always possible */
            *err = ENOMEM;
            return NULL;
        }
        g.st.mapped_bytes += need;
        g.st.mapped_bytes -= oldlen; /* h may have moved with the mapping */
        user = (uintptr_t)nb + off;
        h = (struct large_hdr *)(user - PAGE_SIZE_OS);
        h->base = (uintptr_t)nb;
        h->maplen = need;
        if (user != p) { reg_large_del(p); reg_large_add(user); }
    }
    g.st.large_live_bytes += size;
    g.st.large_live_bytes -= h->size;
    h->size = size;
    if (!lmap_put(user, h)) { *err = ENOMEM; return NULL; } /* cannot happen: a slot was just freed */
    return (void *)user;
}

static void srv_free_any(uintptr_t p)
{
    unsigned k = (p >> ADDR_BITS) ? 0 : g.registry[p >> SEG_SHIFT];
    if (k == REG_KIND_SEG) srv_free_small(p);
    else if (k >= 2) srv_free_large(p);
    else { g.st.invalid_frees++; report(&g.reported_invalid, "free of a pointer not from this allocator (server)", (void *)p); }
}

/* ---- serving clients ------------------------------------------------------- */
static void wake_client(struct client *c)
{
    FENCE_SC();
    if (LOAD_RLX(&c->wait_word)) {
        STORE_RLX(&c->wait_word, 0);
        futex_wake(&c->wait_word);
    }
}

static unsigned drain_frees(struct client *c, unsigned budget)
{
    uint32_t t = LOAD_ACQ(&c->free_tail);
    uint32_t h = c->free_head;
    unsigned n = 0;
    while (h != t && n < budget) {
        srv_free_any((uintptr_t)c->fring[h % FRING]);
        h++;
        n++;
    }
    if (n) {
        STORE_REL(&c->free_head, h);
        g.st.frees_received += n;
    }
    return n;
}
static unsigned drain_all_frees(void)
{
    unsigned n = 0;
    uint32_t nc = LOAD_ACQ(&g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = g.clients[i];
        if (LOAD_ACQ(&c->state) == ST_FREE) continue;
        unsigned k = drain_frees(c, FRING);
        if (k) { n += k; wake_client(c); }
    }
    return n;
}

/* Pushes up to `want` blocks of class cls into ring slots [tail, tail + want). */
static unsigned refill(struct client *c, unsigned cls, unsigned want)
{
    uint32_t t = c->tail[cls];
    unsigned got = 0;
    bool drained = false;
    while (got < want) {
        /* this thread's own pages first, then an unowned one, which it then owns */
        struct page *pg = c->sv_partial[cls];
        if (!pg) {
            pg = g.partial[cls];
            if (!pg) {
                if (!drained) { drained = true; if (drain_all_frees()) continue; }
                pg = page_new(cls);
                if (!pg) break;
            }
            list_remove(pg);
            page_set_owner(pg, c);
            list_push(&c->sv_partial[cls], pg);
        }
        for (unsigned w = 0; w < 64 && got < want && pg->nfree; w++) {
            uint64_t bits = pg->free_bits[w];
            while (bits && got < want) {
                unsigned b = (unsigned)__builtin_ctzll(bits);
                bits &= bits - 1;
                c->ring[cls][(t + got) % RING] = (void *)(pg->start + ((uintptr_t)(w * 64 + b)) * g.cls_size[cls]);
                got++;
                pg->nfree--;
            }
            pg->free_bits[w] = bits;
        }
        if (!pg->nfree) list_remove(pg);
    }
    if (got) {
        g.blocks_out[cls] += got;
        g.st.bytes_out += (uint64_t)got * g.cls_size[cls];
        g.st.refill_blocks += got;
        g.st.refill_rounds++;
        STORE_REL(&c->tail[cls], t + got);
    }
    return got;
}

static void fill_stats(nm_speedmalloc_stats *o);

static bool serve_requests(struct client *c)
{
    bool work = false;
    uint32_t rs = LOAD_ACQ(&c->req_seq);
    if (rs != c->sv_req_seq) {
        int err = 0;
        void *r = NULL;
        /* This thread's queued frees first: a large block it just freed can then be
         * reused at once instead of mapping a new one (and unmapping the old one,
         * which costs a TLB-shootdown interrupt to every CPU running the process). */
        if (drain_frees(c, FRING)) work = true;
        switch (c->req_kind) {
        case REQ_LARGE_MALLOC: r = srv_large_malloc(c->req_size, c->req_align, &err); break;
        case REQ_LARGE_REALLOC: r = srv_large_realloc((uintptr_t)c->req_ptr, c->req_size, &err); break;
        case REQ_STATS: drain_all_frees(); fill_stats((nm_speedmalloc_stats *)c->req_out); break;
        default: err = EINVAL;
        }
        g.st.sync_requests++;
        c->sv_req_seq = rs;
        c->resp_ptr = r;
        c->resp_err = err;
        STORE_REL(&c->resp_seq, rs);
        work = true;
    }
    /* Refills: new classes and growth on misses, then top every ring up to its target. */
    bool filled = false;
    for (unsigned cls = 0; cls < g.nclass; cls++) {
        uint32_t m = LOAD_RLX(&c->miss[cls]);
        if (m != c->sv_miss[cls]) {
            c->sv_miss[cls] = m;
            if (!(c->sv_served & (1ull << cls))) {
                c->sv_served |= 1ull << cls;
                c->sv_target[cls] = (g.cls_tmax[cls] + 1) / 2;
            } else if (c->sv_target[cls] < g.cls_tmax[cls]) {
                c->sv_target[cls] = c->sv_target[cls] * 2 > g.cls_tmax[cls] ? g.cls_tmax[cls] : c->sv_target[cls] * 2;
            }
        }
    }
    uint64_t served = c->sv_served;
    bool oom = false;
    while (served) {
        unsigned cls = (unsigned)__builtin_ctzll(served);
        served &= served - 1;
        uint32_t fill = c->tail[cls] - LOAD_ACQ(&c->head_pub[cls]);
        if (fill < c->sv_target[cls] && refill(c, cls, c->sv_target[cls] - fill)) filled = true;
        else if (fill == 0) oom = true; /* nothing to give: the OS refused memory */
    }
    if (oom) {
        STORE_REL(&c->oom_seq, c->oom_seq + 1);
        work = true;
    }
    if (filled || work) wake_client(c);
    return filled || work;
}

/* An exited thread: take back what its rings still hold, then recycle the slot. */
static void reclaim_client(struct client *c)
{
    drain_frees(c, UINT32_MAX);
    for (unsigned cls = 0; cls < g.nclass; cls++) {
        uint32_t h = LOAD_ACQ(&c->head_pub[cls]);
        for (uint32_t t = c->tail[cls]; h != t; h++) srv_free_small((uintptr_t)c->ring[cls][h % RING]);
        c->tail[cls] = 0;
        c->sv_miss[cls] = 0;
        c->sv_target[cls] = 0;
    }
    for (unsigned cls = 0; cls < g.nclass; cls++) { /* its pages become unowned */
        while (c->sv_partial[cls]) {
            struct page *pg = c->sv_partial[cls];
            list_remove(pg);
            page_set_owner(pg, NULL);
            list_push(&g.partial[cls], pg);
        }
    }
    c->sv_gen++;
    c->sv_served = 0;
    c->sv_doorbell = 0;
    c->sv_req_seq = 0;
    c->free_head = 0;
    c->resp_seq = 0;
    g.st.clients_reclaimed++;
    STORE_REL(&c->state, ST_FREE);
}

/* One pass over all clients: refills and requests first (round-robin), then frees. */
static bool server_poll(void)
{
    bool work = false;
    uint32_t nc = LOAD_ACQ(&g.nclients);
    if (!nc) return false;
    uint32_t start = g.rr++ % nc;
    for (uint32_t k = 0; k < nc; k++) {
        struct client *c = g.clients[(start + k) % nc];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        uint64_t db = LOAD_ACQ(&c->doorbell);
        if (db != c->sv_doorbell || st == ST_EXITING) {
            c->sv_doorbell = db;
            c->sv_last_ns = g.now_ns;
            if (serve_requests(c)) work = true;
        }
    }
    for (uint32_t k = 0; k < nc; k++) {
        struct client *c = g.clients[(start + k) % nc];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        if (drain_frees(c, 256)) { work = true; wake_client(c); }
        if (st == ST_EXITING) { reclaim_client(c); work = true; }
    }
    return work;
}

static bool any_doorbell(void)
{
    uint32_t nc = LOAD_ACQ(&g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = g.clients[i];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        if (st == ST_EXITING || LOAD_ACQ(&c->doorbell) != c->sv_doorbell || LOAD_ACQ(&c->free_tail) != c->free_head)
            return true;
    }
    return false;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fill_stats(nm_speedmalloc_stats *o)
{
    *o = g.st;
    o->server_running = LOAD_ACQ(&g.mode) == MODE_THREAD;
    o->size_classes = g.nclass;
    if (tls_state == 3) o->server_cpu_ns = thread_cpu_ns();
    uint64_t act = 0;
    o->fast_mallocs = o->ring_mallocs = o->client_misses = o->client_blocks = 0;
    uint32_t nc = LOAD_ACQ(&g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = g.clients[i];
        if (LOAD_ACQ(&c->state) == ST_ACTIVE) act++;
        o->fast_mallocs += LOAD_RLX(&c->c_fast);
        o->ring_mallocs += LOAD_RLX(&c->c_ring);
        o->client_misses += LOAD_RLX(&c->c_miss);
        o->client_blocks += LOAD_RLX(&c->c_block);
    }
    o->clients_active = act;
}

static void *server_main(void *arg)
{
    (void)arg;
    tls_state = 3;
    if (g.pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(g.pin_cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    pthread_mutex_lock(&g.srv_lock);
    STORE_REL(&g.mode, MODE_THREAD);
    pthread_mutex_unlock(&g.srv_lock);
    g.last_work_ns = g.now_ns = mono_ns();
    unsigned idle_polls = 0, work_polls = 0;
    for (;;) {
        if (SM_UNLIKELY(LOAD_ACQ(&g.pause_req))) { /* fork: park at a safe point */
            STORE_REL(&g.paused, 1);
            while (LOAD_ACQ(&g.pause_req)) futex_wait(&g.pause_req, 1, 0);
            STORE_REL(&g.paused, 0);
        }
        if (server_poll()) {
            idle_polls = 0;
            g.last_work_ns = 0;
            if ((++work_polls & 63) == 0) g.now_ns = mono_ns();
            continue;
        }
        idle_polls++;
        cpu_relax();
        if ((idle_polls & 63) != 0) continue;
        uint64_t now = mono_ns();
        g.now_ns = now;
        if (!g.last_work_ns) g.last_work_ns = now;
        /* With a spare CPU the server spins like a dedicated support core; when the
         * application's busy threads already fill every CPU, it yields and sleeps
         * sooner, so it does not steal their time (this machine has 2 cores). */
        unsigned busy = 0;
        uint32_t nc = LOAD_ACQ(&g.nclients);
        for (uint32_t i = 0; i < nc; i++)
            if (LOAD_RLX(&g.clients[i]->state) == ST_ACTIVE && now - g.clients[i]->sv_last_ns < 5000000ull) busy++;
        bool over = busy + 1 > g.ncpu;
        if (over != (bool)LOAD_RLX(&g.oversub)) STORE_RLX(&g.oversub, over);
        if (over || (idle_polls & 1023) == 0) sched_yield();
        if (now - g.last_work_ns < (over ? SPIN_SERVER_NS / 10 : SPIN_SERVER_NS)) continue;
        decay_sweep(now);
        /* Sleep: announce, re-check (Dekker with ring_doorbell), then block. */
        STORE_SC(&g.srv_sleeping, 1);
        FENCE_SC();
        if (any_doorbell() || LOAD_ACQ(&g.pause_req)) { STORE_RLX(&g.srv_sleeping, 0); continue; }
        g.st.server_sleeps++;
        futex_wait(&g.srv_sleeping, 1, (g.dirty_pages || g.lcache_n) ? DECAY_NS : 0);
        STORE_RLX(&g.srv_sleeping, 0);
        g.st.server_wakeups++;
        g.last_work_ns = mono_ns();
        idle_polls = 0;
    }
    return NULL;
}

/* =========================================================================
 * Client side
 * ========================================================================= */
static void inline_service(void)
{
    pthread_mutex_lock(&g.srv_lock);
    if (LOAD_ACQ(&g.mode) == MODE_INLINE) {
        while (server_poll()) {}
        decay_sweep(mono_ns());
    }
    pthread_mutex_unlock(&g.srv_lock);
}

static inline void ring_doorbell(struct client *c)
{
    STORE_REL(&c->doorbell, ++c->my_doorbell);
    FENCE_SC();
    if (SM_UNLIKELY(LOAD_RLX(&g.srv_sleeping))) {
        STORE_RLX(&g.srv_sleeping, 0);
        futex_wake(&g.srv_sleeping);
    }
}

static void start_server_thread(void);

/* Waits until cond(c, arg) holds: spin, then futex. In inline mode, serves itself. */
static void client_wait(struct client *c, bool (*cond)(struct client *, uintptr_t), uintptr_t arg)
{
    int e = errno;
    if (LOAD_RLX(&g.thread_wanted) && LOAD_ACQ(&g.mode) == MODE_INLINE && c != g.fallback) start_server_thread();
    for (unsigned i = 0;; i++) {
        if (cond(c, arg)) { errno = e; return; }
        if (LOAD_ACQ(&g.mode) == MODE_INLINE) { inline_service(); continue; }
        if (i < CLIENT_SPIN) {
            cpu_relax();
            if ((i & 255) == 255 || (i > 64 && LOAD_RLX(&g.oversub))) sched_yield(); /* let the server run */
            continue;
        }
        STORE_SC(&c->wait_word, 1);
        FENCE_SC();
        if (cond(c, arg)) { STORE_RLX(&c->wait_word, 0); errno = e; return; }
        STORE_RLX(&c->c_block, c->c_block + 1);
        futex_wait(&c->wait_word, 1, 20000000ull); /* 20 ms: a safety net, the server wakes us */
        STORE_RLX(&c->wait_word, 0);
        i = CLIENT_SPIN / 2;
    }
}
static bool cond_tail_moved(struct client *c, uintptr_t cls)
{
    return LOAD_ACQ(&c->tail[cls]) != c->priv[cls].head || LOAD_ACQ(&c->oom_seq) != c->my_oom_seen;
}
static bool cond_resp(struct client *c, uintptr_t seq) { return LOAD_ACQ(&c->resp_seq) == (uint32_t)seq; }
static bool cond_free_space(struct client *c, uintptr_t need)
{
    return c->my_free_tail - LOAD_ACQ(&c->free_head) + (uint32_t)need <= FRING;
}

static struct client *client_alloc_slot(void)
{
    struct client *c = NULL;
    pthread_mutex_lock(&g.reg_lock);
    uint32_t n = g.nclients;
    for (uint32_t i = 0; i < n; i++) {
        if (LOAD_ACQ(&g.clients[i]->state) == ST_FREE) { c = g.clients[i]; break; }
    }
    if (!c && n < MAX_CLIENTS) {
        size_t len = (sizeof(struct client) + 4095) & ~(size_t)4095;
        c = os_map(len);
        if (c) {
            c->id = n + 1;
            g.clients[n] = c;
            STORE_REL(&g.nclients, n + 1);
        }
    }
    if (c) {
        /* Client-side fields; the server reset its own fields before marking the slot free. */
        memset(c->head_pub, 0, sizeof c->head_pub);
        memset(c->miss, 0, sizeof c->miss);
        memset(c->priv, 0, sizeof c->priv);
        memset(c->mag_n, 0, sizeof c->mag_n);
        memcpy(c->mag_lcap, g.cls_lcap, sizeof c->mag_lcap);
        c->my_free_tail = c->my_free_head_cache = c->my_req_seq = 0;
        c->my_oom_seen = LOAD_ACQ(&c->oom_seq);
        c->my_doorbell = c->doorbell = 0;
        c->free_tail = 0;
        c->req_seq = 0;
        c->c_fast = c->c_ring = c->c_miss = c->c_block = 0;
        c->wait_word = 0;
        g.st.clients_registered++;
        STORE_REL(&c->state, ST_ACTIVE);
    }
    pthread_mutex_unlock(&g.reg_lock);
    return c;
}

static bool global_init(void);

/* Slow part of getting the calling thread's client. */
static struct client *client_get_slow(void)
{
    if (tls_state == 2 || tls_state == 3) return NULL; /* after the TLS destructor / the server itself */
    if (SM_UNLIKELY(LOAD_ACQ(&g.init) != INIT_DONE) && !global_init()) return NULL;
    struct client *c = client_alloc_slot();
    if (!c) return NULL;
    tls_client = c;
    tls_state = 1;
    pthread_setspecific(g.key, c);
    return c;
}

static SM_SLOW void flush_magazine(struct client *c, unsigned cls, unsigned keep);

/* TLS destructor: hand everything back, mark the slot for the server to reclaim. */
static void client_exit(void *arg)
{
    struct client *c = arg;
    if (!c) return;
    int e = errno;
    for (unsigned cls = 0; cls < g.nclass; cls++) {
        if (c->mag_n[cls]) flush_magazine(c, cls, 0);
        STORE_REL(&c->head_pub[cls], c->priv[cls].head);
    }
    STORE_REL(&c->free_tail, c->my_free_tail);
    tls_client = NULL;
    tls_state = 2;
    STORE_REL(&c->state, ST_EXITING);
    ring_doorbell(c);
    if (LOAD_ACQ(&g.mode) == MODE_INLINE) inline_service();
    errno = e;
}

/* Sends magazine entries beyond `keep` to the server through the free ring. */
static SM_SLOW void flush_magazine(struct client *c, unsigned cls, unsigned keep)
{
    uint32_t n = c->mag_n[cls] - keep;
    if (c->my_free_tail - c->my_free_head_cache + n > FRING) {
        c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        if (c->my_free_tail - c->my_free_head_cache + n > FRING) {
            ring_doorbell(c);
            client_wait(c, cond_free_space, n);
            c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        }
    }
    for (uint32_t i = 0; i < n; i++) c->fring[(c->my_free_tail + i) % FRING] = c->mag[cls][keep + 1 + i];
    c->my_free_tail += n;
    c->mag_n[cls] = keep;
    STORE_REL(&c->free_tail, c->my_free_tail);
    ring_doorbell(c);
}

static void *sync_request(struct client *c, unsigned kind, void *ptr, size_t size, size_t align, void *out, int *err)
{
    c->req_kind = kind;
    c->req_ptr = ptr;
    c->req_size = size;
    c->req_align = align;
    c->req_out = out;
    uint32_t seq = ++c->my_req_seq;
    STORE_REL(&c->req_seq, seq);
    ring_doorbell(c);
    client_wait(c, cond_resp, seq);
    *err = c->resp_err;
    return c->resp_ptr;
}

/* A block leaving a magazine or ring for the user loses its free key, so that freeing it
 * later does not look like a double free (it would only cost a scan, never a wrong verdict:
 * the verdict needs the block to be in the magazine). Blocks are >= 16 B. */
static inline void *unkey(void *p)
{
    ((uint64_t *)p)[1] = 0;
    return p;
}

/* Malloc of class cls when the magazine is empty: pop the ready ring. */
static SM_SLOW void *ring_pop_slow(struct client *c, unsigned cls, bool borrow);
static __attribute__((noinline)) void *ring_pop(struct client *c, unsigned cls, bool borrow)
{
    struct cls_priv *q = &c->priv[cls];
    if (SM_UNLIKELY(q->head == q->ctail)) return ring_pop_slow(c, cls, borrow);
    void *p = unkey(c->ring[cls][q->head % RING]);
    q->head++;
    __builtin_prefetch(&c->ring[cls][(q->head + 8) % RING]);
    if (SM_UNLIKELY(q->head == q->low)) { /* low-water mark: ask for more ahead of demand */
        STORE_REL(&c->head_pub[cls], q->head);
        ring_doorbell(c);
    }
    STORE_RLX(&c->c_ring, c->c_ring + 1);
    return p;
}
static SM_SLOW void *ring_pop_slow(struct client *c, unsigned cls, bool borrow)
{
    struct cls_priv *q = &c->priv[cls];
    uint32_t t = LOAD_ACQ(&c->tail[cls]);
    if (t == q->head) {
        /* Empty: post the request (the paper's round trip, now the rare case)... */
        STORE_REL(&c->free_tail, c->my_free_tail); /* with any remote frees still unpublished */
        STORE_REL(&c->head_pub[cls], q->head);
        STORE_REL(&c->miss[cls], c->miss[cls] + 1);
        STORE_RLX(&c->c_miss, c->c_miss + 1);
        ring_doorbell(c);
        if (LOAD_ACQ(&g.mode) == MODE_INLINE) { /* nobody else will serve the miss */
            client_wait(c, cond_tail_moved, cls);
            t = LOAD_ACQ(&c->tail[cls]);
            borrow = false;
            if (t == q->head) { c->my_oom_seen = LOAD_ACQ(&c->oom_seq); return NULL; }
        }
        /* ... but rather than wait, take a block of a slightly bigger class that this
         * thread already holds (not for aligned requests: a bigger class may not be
         * aligned). free() finds the block's real class from its address. */
        for (unsigned k = cls + 1; borrow && k < g.nclass && k <= cls + 4; k++) {
            struct cls_priv *o = &c->priv[k];
            if (c->mag_n[k]) return unkey(c->mag[k][c->mag_n[k]--]);
            if (o->head != o->ctail) return ring_pop(c, k, false);
        }
        if (t == q->head) client_wait(c, cond_tail_moved, cls);
        t = LOAD_ACQ(&c->tail[cls]);
        c->my_oom_seen = LOAD_ACQ(&c->oom_seq);
        if (t == q->head) return NULL; /* the server had no memory: malloc returns NULL, ENOMEM */
    }
    q->ctail = t;
    q->low = q->head + (t - q->head + 1) / 2; /* publish the consumer index when half is used */
    return ring_pop(c, cls, borrow);
}

static inline void *client_malloc_cls(struct client *c, unsigned cls, bool borrow)
{
    uint32_t n = c->mag_n[cls];
    if (SM_LIKELY(n)) {
        c->mag_n[cls] = n - 1;
        STORE_RLX(&c->c_fast, c->c_fast + 1);
        return unkey(c->mag[cls][n]);
    }
    return ring_pop(c, cls, borrow);
}

/* Runs fn with the calling thread's client, or the shared fallback client under its lock. */
static struct client *client_or_fallback(bool *locked)
{
    *locked = false;
    struct client *c = tls_client;
    if (SM_LIKELY(c)) return c;
    c = client_get_slow();
    if (c) return c;
    if (LOAD_ACQ(&g.init) != INIT_DONE || !g.fallback) return NULL;
    pthread_mutex_lock(&g.fb_lock);
    *locked = true;
    return g.fallback;
}

static SM_SLOW void *large_malloc(size_t size, size_t align)
{
    bool locked;
    if (tls_state == 3) { /* the server thread itself (only libc internals could get here) */
        int err = 0;
        void *p = srv_large_malloc(size, align, &err);
        if (!p) errno = err;
        return p;
    }
    struct client *c = client_or_fallback(&locked);
    if (!c) return boot_alloc(size, align);
    int err = 0;
    void *p = sync_request(c, REQ_LARGE_MALLOC, NULL, size, align, NULL, &err);
    if (locked) pthread_mutex_unlock(&g.fb_lock);
    if (!p) errno = err ? err : ENOMEM;
    return p;
}

/* The server thread should never allocate; if libc makes it, serve it directly. */
static void *server_self_malloc(unsigned cls)
{
    struct page *pg = g.partial[cls];
    if (!pg && !(pg = page_new(cls))) return NULL;
    for (unsigned w = 0; w < 64; w++) {
        if (!pg->free_bits[w]) continue;
        unsigned b = (unsigned)__builtin_ctzll(pg->free_bits[w]);
        pg->free_bits[w] &= pg->free_bits[w] - 1;
        if (!--pg->nfree) list_remove(pg);
        g.blocks_out[cls]++;
        g.st.bytes_out += g.cls_size[cls];
        return (void *)(pg->start + (uintptr_t)(w * 64 + b) * g.cls_size[cls]);
    }
    return NULL;
}

static SM_SLOW void *malloc_cls_slow(unsigned cls, bool borrow)
{
    if (tls_state == 3) return server_self_malloc(cls);
    bool locked;
    struct client *c = client_or_fallback(&locked);
    if (!c) return boot_alloc(g.nclass ? g.cls_size[cls] : 16, 16);
    void *p = client_malloc_cls(c, cls, borrow);
    if (locked) pthread_mutex_unlock(&g.fb_lock);
    return p;
}

static SM_SLOW void *sm_malloc_slow(size_t size)
{
    if (SM_UNLIKELY(tls_in_init)) return boot_alloc(size ? size : 1, 16);
    if (SM_UNLIKELY(LOAD_ACQ(&g.init) != INIT_DONE) && !global_init()) return boot_alloc(size ? size : 1, 16);
    int cls = size_class(size);
    if (SM_UNLIKELY(cls < 0)) {
        if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
        return large_malloc(size, 16);
    }
    struct client *c = tls_client;
    void *p = c ? client_malloc_cls(c, (unsigned)cls, true) : malloc_cls_slow((unsigned)cls, true);
    if (SM_UNLIKELY(!p)) errno = ENOMEM;
    return p;
}

/* The fast path: a registered thread pops its own magazine; no server, no atomics. */
static inline void *sm_malloc(size_t size)
{
    struct client *c = tls_client; /* set only after initialization */
    if (SM_LIKELY(c != NULL && size <= 1024)) {
        unsigned cls = g.lut_small[(size + 15) >> 4];
        uint32_t n = c->mag_n[cls];
        if (SM_LIKELY(n)) {
            c->mag_n[cls] = n - 1;
            STORE_RLX(&c->c_fast, c->c_fast + 1);
            return unkey(c->mag[cls][n]);
        }
    }
    return sm_malloc_slow(size);
}

static SM_SLOW void free_small_slow(uintptr_t p, unsigned cls);
static SM_SLOW void free_other(uintptr_t p, unsigned kind);
static SM_SLOW void free_flush(struct client *c, unsigned cls);
static SM_SLOW void free_remote(struct client *c, uintptr_t p);

static SM_SLOW void free_general(uintptr_t p)
{
    if (!p) return;
    unsigned kind = reg_kind(p);
    if (kind != REG_KIND_SEG) { free_other(p, kind); return; }
    int cls = block_class(p);
    free_small_slow(p, cls < 0 ? UINT32_MAX : (unsigned)cls);
}

static SM_SLOW void free_push_full(struct client *c, unsigned cls, void *ptr)
{
    free_flush(c, cls);
    c->mag[cls][++c->mag_n[cls]] = ptr;
    ((uint64_t *)ptr)[1] = g.free_key;
}

static SM_SLOW void free_keyed(struct client *c, unsigned cls, void *ptr);

/* The fast path: a registered thread pushes onto its own magazine; no server, no atomics.
 * Every exit that does more work is a tail call, so this stays a leaf without saved registers. */
static inline void sm_free(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    struct client *c = tls_client; /* set only after initialization, so the registry is mapped */
    /* one test rejects NULL (p - 1 wraps) and addresses beyond the registry */
    if (SM_UNLIKELY(!c || ((p - 1) >> ADDR_BITS))) { free_general(p); return; }
    unsigned kind = LOAD_RLX(&g.registry[p >> SEG_SHIFT]);
    if (SM_UNLIKELY(kind != REG_KIND_SEG)) { free_other(p, kind); return; }
    /* One load of the slice word gives class, page start and owner; the block-start
     * check is then a compare and a multiply against a per-class table. */
    uint32_t w = slice_word(p);
    if (SM_UNLIKELY(!block_start_ok(p, w))) { free_small_slow(p, UINT32_MAX); return; }
    unsigned cls = SI_CLS(w);
    if (SM_UNLIKELY(SI_OWNER(w) != c->id) && g.cls_shares_lines[cls]) {
        /* another thread's page, and its blocks share cache lines: back to the server
         * (batched), so that two threads never write the same line. Blocks of a size that
         * is a multiple of 64 own their lines (pages start on 64 KiB) and stay here. */
        free_remote(c, p);
        return;
    }
    uint64_t *kw = (uint64_t *)ptr + 1;
    uint64_t key = g.free_key;
    if (SM_UNLIKELY(*kw == key)) { free_keyed(c, cls, ptr); return; } /* freed already? */
    uint32_t n = c->mag_n[cls];
    if (SM_UNLIKELY(n == c->mag_lcap[cls])) { free_push_full(c, cls, ptr); return; }
    c->mag[cls][n + 1] = ptr;
    c->mag_n[cls] = n + 1;
    *kw = key;
}

/* The block carries the free key: it is in this magazine (a double free, however many
 * frees came in between), or elsewhere (another thread's magazine, a ring, the server:
 * then the server's bitmap check catches a repeat), or the user's data matched the key by
 * chance (2^-64). Only the first case is decided here; the others proceed as a free. */
static SM_SLOW void free_keyed(struct client *c, unsigned cls, void *ptr)
{
    for (uint32_t k = c->mag_n[cls]; k >= 1; k--)
        if (c->mag[cls][k] == ptr) { free_small_slow((uintptr_t)ptr, UINT32_MAX - 1); return; }
    if (c->mag_n[cls] == c->mag_lcap[cls]) { free_push_full(c, cls, ptr); return; }
    c->mag[cls][++c->mag_n[cls]] = ptr;
    ((uint64_t *)ptr)[1] = g.free_key;
}

/* A block of a page that feeds another thread: into the free ring, published every
 * 16 entries (and whenever the magazines flush or the thread waits or exits). */
static SM_SLOW void free_remote(struct client *c, uintptr_t p)
{
    int e = errno;
    if (c->my_free_tail - c->my_free_head_cache + 1 > FRING) {
        c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        if (c->my_free_tail - c->my_free_head_cache + 1 > FRING) {
            STORE_REL(&c->free_tail, c->my_free_tail);
            ring_doorbell(c);
            client_wait(c, cond_free_space, 1);
            c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        }
    }
    c->fring[c->my_free_tail % FRING] = (void *)p;
    c->my_free_tail++;
    if ((c->my_free_tail & 15) == 0) {
        STORE_REL(&c->free_tail, c->my_free_tail);
        ring_doorbell(c);
    }
    errno = e;
}

static SM_SLOW void free_flush(struct client *c, unsigned cls)
{
    int e = errno; /* free preserves errno */
    flush_magazine(c, cls, c->mag_n[cls] / 2);
    errno = e;
}

static uint32_t reported_client_double;
static uint64_t client_double_count, client_invalid_count;

static SM_SLOW void free_small_slow(uintptr_t p, unsigned cls)
{
    int e = errno;
    if (cls == UINT32_MAX - 1) {
        __atomic_fetch_add(&client_double_count, 1, __ATOMIC_RELAXED);
        report(&reported_client_double, "double free of", (void *)p);
        errno = e;
        return;
    }
    if (cls == UINT32_MAX) { /* block_class said -1 */
        __atomic_fetch_add(&client_invalid_count, 1, __ATOMIC_RELAXED);
        report(&g.reported_invalid, "free of a pointer that is not a block start", (void *)p);
        errno = e;
        return;
    }
    if (tls_state == 3) { srv_free_small(p); errno = e; return; }
    bool locked;
    struct client *c = client_or_fallback(&locked);
    if (c) {
        if (c->mag_n[cls] == g.cls_lcap[cls]) flush_magazine(c, cls, c->mag_n[cls] / 2);
        bool dup = false;
        if (((uint64_t *)p)[1] == g.free_key)
            for (uint32_t k = 1; k <= c->mag_n[cls] && !dup; k++) dup = c->mag[cls][k] == (void *)p;
        if (dup) {
            __atomic_fetch_add(&client_double_count, 1, __ATOMIC_RELAXED);
            report(&reported_client_double, "double free of", (void *)p);
        } else {
            c->mag[cls][++c->mag_n[cls]] = (void *)p;
            ((uint64_t *)p)[1] = g.free_key;
        }
        if (locked) {
            flush_magazine(c, cls, 0); /* the fallback keeps nothing: it is shared */
            pthread_mutex_unlock(&g.fb_lock);
        }
    }
    errno = e;
}

static SM_SLOW void free_other(uintptr_t p, unsigned kind)
{
    int e = errno;
    if (in_boot((void *)p)) { errno = e; return; } /* bootstrap blocks are never reused */
    if (kind >= 2 && (p & (PAGE_SIZE_OS - 1)) == 0) {
        if (tls_state == 3) { srv_free_large(p); errno = e; return; }
        bool locked;
        struct client *c = client_or_fallback(&locked);
        if (c) {
            if (c->my_free_tail - c->my_free_head_cache + 1 > FRING) {
                c->my_free_head_cache = LOAD_ACQ(&c->free_head);
                if (c->my_free_tail - c->my_free_head_cache + 1 > FRING) {
                    ring_doorbell(c);
                    client_wait(c, cond_free_space, 1);
                    c->my_free_head_cache = LOAD_ACQ(&c->free_head);
                }
            }
            c->fring[c->my_free_tail % FRING] = (void *)p;
            c->my_free_tail++;
            STORE_REL(&c->free_tail, c->my_free_tail);
            ring_doorbell(c);
            if (locked) pthread_mutex_unlock(&g.fb_lock);
        }
        errno = e;
        return;
    }
    __atomic_fetch_add(&client_invalid_count, 1, __ATOMIC_RELAXED);
    report(&g.reported_invalid, "free of a pointer not from this allocator", (void *)p);
    errno = e;
}

static size_t usable_size(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (!p) return 0;
    if (in_boot(ptr)) return boot_size(ptr);
    unsigned kind = reg_kind(p);
    if (kind == REG_KIND_SEG) {
        int cls = block_class(p);
        return cls < 0 ? 0 : g.cls_size[cls];
    }
    if (kind >= 2 && (p & (PAGE_SIZE_OS - 1)) == 0) {
        const struct large_hdr *h = (const struct large_hdr *)(p - PAGE_SIZE_OS);
        if (h->magic == LARGE_MAGIC) return h->base + h->maplen - p;
    }
    return 0;
}

static void *sm_aligned(size_t align, size_t size)
{
    if (align <= 16) return sm_malloc(size);
    if (SM_UNLIKELY(LOAD_ACQ(&g.init) != INIT_DONE) && !global_init()) return boot_alloc(size, align);
    if (tls_in_init) return boot_alloc(size, align);
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    size_t need = size < align ? align : size;
    if (align <= SLICE_SIZE && need <= MAX_CLASS_SIZE) {
        /* A class whose size is a multiple of align: its blocks are aligned, since pages start on 64 KiB. */
        for (int cls = size_class(need); cls >= 0 && (unsigned)cls < g.nclass; cls++) {
            if (g.cls_size[cls] % align == 0) {
                struct client *c = tls_client;
                void *p = c ? client_malloc_cls(c, (unsigned)cls, false) : malloc_cls_slow((unsigned)cls, false);
                if (!p) errno = ENOMEM;
                return p;
            }
        }
    }
    return large_malloc(size, align);
}

static void *sm_realloc(void *ptr, size_t size)
{
    if (!ptr) return sm_malloc(size);
    if (size == 0) { sm_free(ptr); return NULL; } /* glibc's behaviour */
    uintptr_t p = (uintptr_t)ptr;
    size_t old = usable_size(ptr);
    if (old == 0) {
        __atomic_fetch_add(&client_invalid_count, 1, __ATOMIC_RELAXED);
        report(&g.reported_invalid, "realloc of an invalid pointer", ptr);
        errno = EINVAL;
        return NULL;
    }
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    unsigned kind = in_boot(ptr) ? 0 : reg_kind(p);
    if (kind == REG_KIND_SEG && size <= old && size > old / 2) return ptr;
    if (kind >= 2 && size > MAX_CLASS_SIZE && tls_state != 3 && !tls_in_init) {
        bool locked;
        struct client *c = client_or_fallback(&locked);
        if (c) {
            int err = 0;
            void *r = sync_request(c, REQ_LARGE_REALLOC, ptr, size, 0, NULL, &err);
            if (locked) pthread_mutex_unlock(&g.fb_lock);
            if (!r) errno = err ? err : ENOMEM;
            return r;
        }
    }
    void *n = sm_malloc(size);
    if (!n) return NULL;
    memcpy(n, ptr, old < size ? old : size);
    sm_free(ptr);
    return n;
}

/* ---- initialization, fork, exit --------------------------------------------- */
static void start_server_thread(void)
{
    if (LOAD_ACQ(&g.mode) == MODE_THREAD || tls_state == 3) return;
    uint32_t expect = 0;
    /* one starter at a time: a control-path compare-and-swap, not allocator metadata */
    if (!__atomic_compare_exchange_n(&g.starting, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 << 10);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the server never runs signal handlers */
    int rc = pthread_create(&g.server_thread, &a, server_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    /* On success `starting` stays set: a second server must never start, even
     * before the first one has switched the mode to MODE_THREAD. */
    if (rc != 0) {
        STORE_RLX(&g.thread_wanted, false); /* stay in inline mode */
        STORE_REL(&g.starting, 0);
    }
}

static void fork_prepare(void)
{
    if (LOAD_ACQ(&g.init) != INIT_DONE) return;
    pthread_mutex_lock(&g.reg_lock);
    pthread_mutex_lock(&g.fb_lock);
    pthread_mutex_lock(&g.srv_lock);
    if (LOAD_ACQ(&g.mode) == MODE_THREAD) {
        STORE_SC(&g.pause_req, 1);
        STORE_RLX(&g.srv_sleeping, 0);
        futex_wake(&g.srv_sleeping);
        while (!LOAD_ACQ(&g.paused)) sched_yield();
    }
}
static void fork_parent(void)
{
    if (LOAD_ACQ(&g.init) != INIT_DONE) return;
    if (LOAD_ACQ(&g.pause_req)) {
        STORE_REL(&g.pause_req, 0);
        futex_wake(&g.pause_req);
        while (LOAD_ACQ(&g.paused)) sched_yield();
    }
    pthread_mutex_unlock(&g.srv_lock);
    pthread_mutex_unlock(&g.fb_lock);
    pthread_mutex_unlock(&g.reg_lock);
}
static void fork_child(void)
{
    if (LOAD_ACQ(&g.init) != INIT_DONE) return;
    /* Only this thread survives: the others' queues go back to the server. */
    uint32_t nc = g.nclients;
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = g.clients[i];
        if (c == tls_client || c == g.fallback || c->state != ST_ACTIVE) continue;
        for (unsigned cls = 0; cls < g.nclass; cls++) {
            struct cls_priv *q = &c->priv[cls];
            c->head_pub[cls] = q->head;
            /* its private magazines are plain memory now: give them back too */
            for (uint32_t k = 1; k <= c->mag_n[cls]; k++) srv_free_small((uintptr_t)c->mag[cls][k]);
            c->mag_n[cls] = 0;
        }
        c->state = ST_EXITING;
    }
    g.pause_req = 0;
    g.paused = 0;
    g.srv_sleeping = 0;
    g.mode = MODE_INLINE;
    g.starting = 0;
    pthread_mutex_init(&g.srv_lock, NULL);
    pthread_mutex_init(&g.fb_lock, NULL);
    pthread_mutex_init(&g.reg_lock, NULL);
    /* The server thread is restarted lazily, outside the fork handler, on the first wait. */
}

static bool global_init(void)
{
    uint32_t st = LOAD_ACQ(&g.init);
    if (st == INIT_DONE) return true;
    if (st == INIT_FAILED) return false;
    uint32_t expect = INIT_NONE;
    if (!__atomic_compare_exchange_n(&g.init, &expect, INIT_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (tls_in_init) return false; /* recursion from inside init: the bootstrap arena serves it */
        while ((st = LOAD_ACQ(&g.init)) == INIT_BUSY) sched_yield();
        return st == INIT_DONE;
    }
    tls_in_init = 1;
    const void *rnd = (const void *)getauxval(AT_RANDOM); /* 16 bytes from the kernel, unaligned */
    uint64_t r[2] = {(uint64_t)(uintptr_t)&g * 0x9E3779B97F4A7C15ull, 0};
    if (rnd) memcpy(r, rnd, sizeof r);
    g.free_key = (r[0] ^ r[1]) | 1;
    bool ok = classes_init();
    if (ok) {
        /* one spare page: free()'s fast path bounds p - 1, so p == 1 << ADDR_BITS indexes it */
        g.registry = os_map(((size_t)1 << (ADDR_BITS - SEG_SHIFT)) + PAGE_SIZE_OS);
        ok = g.registry != NULL;
    }
    if (ok) ok = pthread_key_create(&g.key, client_exit) == 0;
    if (ok) {
        cpu_set_t set;
        g.ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 2;
        if (!g.ncpu) g.ncpu = 1;
    }
    if (ok) {
        const char *s = getenv("NEARMEM_SPEEDMALLOC_STATS");
        g.print_stats = s && *s && *s != '0';
        s = getenv("NEARMEM_SPEEDMALLOC_CPU");
        if (s && *s >= '0' && *s <= '9') g.pin_cpu = atoi(s);
        s = getenv("NEARMEM_SPEEDMALLOC_INLINE");
        g.thread_wanted = !(s && *s && *s != '0');
        g.mode = MODE_INLINE;
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    }
    tls_in_init = 0;
    STORE_REL(&g.init, ok ? INIT_DONE : INIT_FAILED);
    if (!ok) return false;
    g.fallback = client_alloc_slot();
    if (g.thread_wanted) start_server_thread();
    return true;
}

/* ---- statistics ----------------------------------------------------------------- */
SM_PUBLIC int nm_speedmalloc_get_stats(nm_speedmalloc_stats *out)
{
    if (!out) return EINVAL;
    if (LOAD_ACQ(&g.init) != INIT_DONE && !global_init()) return ENOMEM;
    memset(out, 0, sizeof *out);
    bool locked;
    struct client *c = tls_state == 3 ? NULL : client_or_fallback(&locked);
    if (!c) { fill_stats(out); return 0; }
    int err = 0;
    sync_request(c, REQ_STATS, NULL, 0, 0, out, &err);
    if (locked) pthread_mutex_unlock(&g.fb_lock);
    out->double_frees += LOAD_RLX(&client_double_count);
    out->invalid_frees += LOAD_RLX(&client_invalid_count);
    return err;
}

SM_PUBLIC void nm_speedmalloc_stats_print(int fd)
{
    nm_speedmalloc_stats s;
    if (nm_speedmalloc_get_stats(&s) != 0) return;
    const struct { const char *k; uint64_t v; } kv[] = {
        {"server_running", s.server_running}, {"clients_active", s.clients_active},
        {"clients_registered", s.clients_registered}, {"clients_reclaimed", s.clients_reclaimed},
        {"size_classes", s.size_classes}, {"fast_mallocs", s.fast_mallocs}, {"ring_mallocs", s.ring_mallocs},
        {"client_misses", s.client_misses}, {"client_blocks", s.client_blocks},
        {"refill_blocks", s.refill_blocks}, {"refill_rounds", s.refill_rounds},
        {"frees_received", s.frees_received}, {"sync_requests", s.sync_requests},
        {"large_allocs", s.large_allocs}, {"large_live", s.large_live}, {"large_live_bytes", s.large_live_bytes},
        {"segments", s.segments}, {"pages_in_use", s.pages_in_use}, {"bytes_out", s.bytes_out},
        {"mapped_bytes", s.mapped_bytes}, {"madvised_bytes", s.madvised_bytes},
        {"server_sleeps", s.server_sleeps}, {"server_wakeups", s.server_wakeups},
        {"server_cpu_ns", s.server_cpu_ns}, {"invalid_frees", s.invalid_frees}, {"double_frees", s.double_frees},
    };
    char line[96];
    write_str(fd, "speedmalloc statistics:\n");
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        size_t n = 0, kl = strlen(kv[i].k);
        line[n++] = ' ';
        line[n++] = ' ';
        memcpy(line + n, kv[i].k, kl);
        n += kl;
        while (n < 24) line[n++] = ' ';
        n += fmt_u64(line + n, kv[i].v);
        line[n++] = '\n';
        write_all(fd, line, n);
    }
}

__attribute__((destructor)) static void sm_at_exit(void)
{
    if (LOAD_ACQ(&g.init) == INIT_DONE && g.print_stats) nm_speedmalloc_stats_print(2);
}

/* =========================================================================
 * The exported interface
 * ========================================================================= */
SM_PUBLIC void *SM_FN(malloc)(size_t size) { return sm_malloc(size); }
SM_PUBLIC void SM_FN(free)(void *p) { sm_free(p); }
SM_PUBLIC void *SM_FN(calloc)(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
    void *p = sm_malloc(total);
    if (!p) return NULL;
    /* fresh large mappings are zero already; everything else may be recycled */
    if (total <= MAX_CLASS_SIZE || in_boot(p) || ((const struct large_hdr *)((uintptr_t)p - PAGE_SIZE_OS))->recycled)
        memset(p, 0, total);
    return p;
}
SM_PUBLIC void *SM_FN(realloc)(void *p, size_t size) { return sm_realloc(p, size); }
SM_PUBLIC void *SM_FN(reallocarray)(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
    return sm_realloc(p, total);
}
SM_PUBLIC void *SM_FN(aligned_alloc)(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1))) { errno = EINVAL; return NULL; }
    return sm_aligned(align, size);
}
SM_PUBLIC int SM_FN(posix_memalign)(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    int e = errno;
    void *p = sm_aligned(align, size);
    if (!p) { errno = e; return ENOMEM; }
    *out = p;
    return 0;
}
SM_PUBLIC void *SM_FN(memalign)(size_t align, size_t size)
{
    if (align & (align - 1)) { /* glibc rounds a non-power-of-two alignment up */
        size_t a = 1;
        while (a < align && a) a <<= 1;
        if (!a) { errno = EINVAL; return NULL; }
        align = a;
    }
    return sm_aligned(align ? align : 1, size);
}
SM_PUBLIC void *SM_FN(valloc)(size_t size) { return sm_aligned(PAGE_SIZE_OS, size); }
SM_PUBLIC void *SM_FN(pvalloc)(size_t size)
{
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    size_t r = (size + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1);
    return sm_aligned(PAGE_SIZE_OS, r ? r : PAGE_SIZE_OS);
}
SM_PUBLIC size_t SM_FN(malloc_usable_size)(void *p) { return usable_size(p); }

#ifdef SM_EXPORT_LIBC
/* glibc's internal names, used by some programs and by libc itself. */
SM_PUBLIC void *__libc_malloc(size_t size) __attribute__((alias("malloc"), copy(malloc)));
SM_PUBLIC void __libc_free(void *p) __attribute__((alias("free"), copy(free)));
SM_PUBLIC void *__libc_calloc(size_t n, size_t size) __attribute__((alias("calloc"), copy(calloc)));
SM_PUBLIC void *__libc_realloc(void *p, size_t size) __attribute__((alias("realloc"), copy(realloc)));
SM_PUBLIC void *__libc_memalign(size_t align, size_t size) __attribute__((alias("memalign"), copy(memalign)));
SM_PUBLIC void *__libc_valloc(size_t size) __attribute__((alias("valloc"), copy(valloc)));
SM_PUBLIC void *__libc_pvalloc(size_t size) __attribute__((alias("pvalloc"), copy(pvalloc)));
#endif
