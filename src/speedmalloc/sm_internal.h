/* What SpeedMalloc's source files share: configuration macros, the atomics used
 * on queue indices (release/acquire loads and stores only), inline helpers of the
 * fast paths, and the internal functions (all named sm_*; hidden in libspeedmalloc.so).
 *
 * Built twice: with SM_EXPORT_LIBC the functions are malloc, free, ...; without
 * it they are nm_sm_malloc, ... (see include/nearmem/speedmalloc.h). */
#ifndef SM_INTERNAL_H
#define SM_INTERNAL_H

#include <errno.h>
#include <fcntl.h>
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
/* A statistics counter that only its thread writes and others read with relaxed loads: one
 * add instruction on the fast path (an atomic store would be a load, an add and a store;
 * TSan builds use it, since TSan does not see inside asm). */
#if defined(__x86_64__) && !defined(NEARMEM_TSAN)
#define SM_COUNT(field) __asm__("addq $1, %0" : "+m"(field))
#else
#define SM_COUNT(field) __atomic_store_n(&(field), (field) + 1, __ATOMIC_RELAXED)
#endif

#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define STORE_SC(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#ifdef NEARMEM_TSAN
/* TSan does not model standalone fences. A seq_cst read-modify-write on one
 * shared word orders the Dekker-style doorbell (store flag; fence; load the
 * other side's flag) just as well, and TSan understands it. TSan builds only. */
extern unsigned long sm_tsan_fence_word;
#define FENCE_SC() ((void)__atomic_fetch_add(&sm_tsan_fence_word, 0, __ATOMIC_SEQ_CST))
#else
#define FENCE_SC() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

#include "sm_types.h"

extern struct sm_global sm_g;
/* The calling thread's client. The thread-local word holds its distance from sm_nil_client,
 * a static client that accepts nothing (empty magazines, no window), so that an unregistered
 * thread (0) needs no test on the fast paths: they fall through to the slow paths, which
 * use sm_self() (NULL for none). */
extern SM_TLS uintptr_t sm_tls_cdelta;
extern struct client sm_nil_client __attribute__((visibility("hidden")));
static inline struct client *sm_fast_client(void)
{
    return (struct client *)((uintptr_t)&sm_nil_client + sm_tls_cdelta);
}
static inline struct client *sm_self(void) { return sm_tls_cdelta ? sm_fast_client() : NULL; }
static inline void sm_set_self(struct client *c)
{
    sm_tls_cdelta = c ? (uintptr_t)c - (uintptr_t)&sm_nil_client : 0;
}
extern SM_TLS uint8_t sm_tls_state; /* 0 new, 1 registered, 2 exited (use the fallback), 3 server thread */
extern SM_TLS uint8_t sm_tls_in_init;

static inline void sm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int sm_size_class(size_t size)
{
    if (SM_LIKELY(size <= 1024)) return sm_g.lut_small[(size + 15) >> 4];
    if (size > MAX_CLASS_SIZE) return -1;
    unsigned c = sm_g.lut_big[(size + 1023) >> 10];
    while (sm_g.cls_size[c] < size) c++;
    return (int)c;
}

static inline unsigned sm_reg_kind(uintptr_t p)
{
    if (SM_UNLIKELY((p >> ADDR_BITS) || !sm_g.registry)) return 0;
    return LOAD_RLX(&sm_g.registry[p >> SEG_SHIFT]);
}

/* The slice word (layout in sm_types.h). */
#define SI_K(w) ((unsigned)((w) >> SI_K_SHIFT) / MH_SIZE) /* class + 1; 0 = no class */
#define SI_OWNER(w) ((unsigned)((w) >> 32) & 0xffffu)
#define SI_PSTART(w) (((uint32_t)(w) >> SLICE_SHIFT) & (SLICES - 1))
#define SI_MAKE(cls, page_start, owner) \
    ((uint64_t)(((cls) + 1) * MH_SIZE) << SI_K_SHIFT | (uint64_t)(owner) << 32 | (uint32_t)(page_start))
#define SI_WITH_OWNER(w, owner) (((w) & ~((uint64_t)0xffff << 32)) | (uint64_t)(owner) << 32)
_Static_assert(SLICE_SHIFT == 16 && SLICES == 64 && MAX_CLIENTS < 0xffff && (NCLS_MAX + 1) * MH_SIZE < 0x10000,
               "slice word layout");
/* Is p in the segment window? Then *w is its slice word (0: not a page of ours). */
static inline bool sm_win_word(uintptr_t p, uint64_t *w)
{
    uintptr_t q = p - LOAD_RLX(&sm_g.win_base);
    if (q >= WIN_SIZE) return false;
    *w = LOAD_RLX(&sm_g.win_map[q >> SLICE_SHIFT]);
    return true;
}
/* The slice word of p, which the registry says is in one of our segments. */
static inline uint64_t sm_slice_word(uintptr_t p)
{
    const struct segment *s = (const struct segment *)(p & ~(SEG_SIZE - 1));
    return LOAD_RLX(&s->si[(p >> SLICE_SHIFT) & (SLICES - 1)]);
}
/* Is p the start of a block of the page that slice word w describes? */
static inline bool sm_block_start_ok(uintptr_t p, uint64_t w)
{
    uint32_t off = (uint32_t)p - (uint32_t)w;
    unsigned k = SI_K(w);
    return k <= NCLS_MAX && (uint64_t)off * sm_g.cls_chk[k].mul < sm_g.cls_chk[k].lim;
}
/* Class of a small block, or -1 when p is not the start of a block we handed out. Any
 * pointer: the window, else the registry, is checked before anything is dereferenced. */
static inline int sm_block_class(uintptr_t p)
{
    uint64_t w;
    if (!sm_win_word(p, &w)) {
        if (sm_reg_kind(p) != REG_KIND_SEG) return -1;
        w = sm_slice_word(p);
    }
    return sm_block_start_ok(p, w) ? (int)SI_K(w) - 1 : -1;
}
/* The class header of a client (cls + 1 = k). */
static inline struct mag_hdr *sm_mh(struct client *c, unsigned cls) { return &c->mh[cls + 1]; }
static inline uint32_t sm_mag_n(const struct mag_hdr *h) { return (uint32_t)(h->top - h->base); }
/* The slots of a client's magazine of class cls (after the struct, in the client's mapping). */
static inline void **sm_mag_slots(struct client *c, unsigned cls) { return (void **)(c + 1) + (size_t)cls * MAG_STRIDE; }
#define SM_CLIENT_MAP_BYTES \
    ((sizeof(struct client) + (size_t)NCLS_MAX * MAG_STRIDE * sizeof(void *) + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1))

/* The free key lives in a freed block's first word (SM_KEY_WORD). A block leaving a
 * magazine or ring for the user loses it, so that freeing it later does not look like a
 * double free (it would only cost a scan, never a wrong verdict: the verdict needs the
 * block to be in the magazine). Why word 0 and not glibc's word 1 (glibc's word 0 is its
 * list link; ours are outside the blocks): the clearing store then covers the bytes a
 * program writes first. Measured on this machine (AMD family 26): a loop that increments
 * a byte of a fresh block runs ~10% faster when that byte was stored just before it than
 * when it was last written a whole free/malloc earlier (likely store-to-load forwarding or
 * memory renaming; no counters here to tell); mimalloc's list link gives it that for free,
 * and cache-thrash's writing loop ran 1.07x mimalloc's CPU with the key in word 1 (the loop
 * alone, no allocator call, cost as much). Same one store either way. */
#define SM_KEY_WORD 0
static inline void *sm_unkey(void *p)
{
    ((uint64_t *)p)[SM_KEY_WORD] = 0;
    return p;
}

/* ---- sm_os.c ---------------------------------------------------------------- */
long sm_futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts);
void sm_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void sm_futex_wake(uint32_t *addr);
uint64_t sm_mono_ns(void);
uint64_t sm_thread_cpu_ns(void);
int sm_os_other_threads(void);
void sm_os_wait_thread_gone(int tid);
void *sm_os_map(size_t len);
size_t sm_fmt_u64(char *out, uint64_t v);
void sm_write_all(int fd, const char *s, size_t n);
void sm_write_str(int fd, const char *s);
void sm_write_hex(int fd, uintptr_t v);
bool sm_in_boot(const void *p);
void *sm_boot_alloc(size_t size, size_t align);
size_t sm_boot_size(const void *p);
void sm_report(uint32_t *once, const char *what, const void *p);

/* ---- sm_registry.c ---------------------------------------------------------- */
bool sm_classes_init(void);
void sm_reg_set(uintptr_t p, unsigned v);
void sm_reg_large_add(uintptr_t p);
void sm_reg_large_del(uintptr_t p);
void sm_window_init(void);
uint64_t *sm_window_place(uintptr_t a, uint64_t *own);

/* ---- sm_segment.c (metadata owner only) ------------------------------------- */
struct segment *sm_seg_new(void);
void sm_list_push(struct page **head, struct page *pg);
void sm_list_remove(struct page *pg);
void sm_page_set_owner(struct page *pg, struct client *c);
struct client *sm_page_owner(const struct page *pg);
struct page *sm_page_new(unsigned cls);
void sm_page_release(struct segment *s, struct page *pg);
void sm_decay_sweep(uint64_t now);
void sm_lcache_sweep(uint64_t now);
/* Under the metadata lock, on a path that does work anyway (a client serving itself): the
 * decay sweep when one is due, so memory goes back to the OS on time even while the server
 * thread sleeps. */
static inline void sm_maybe_sweep(void)
{
    if (!sm_g.dirty_pages && !sm_g.lcache_n) return;
    uint64_t now = sm_mono_ns();
    if (now - sm_g.last_sweep >= DECAY_NS / 2) sm_decay_sweep(now);
}
void sm_srv_free_small(uintptr_t p);
void sm_srv_free_ring(void *const *ring, uint32_t h, uint32_t t);
void *sm_server_self_malloc(unsigned cls);

/* ---- sm_large.c (metadata owner only) --------------------------------------- */
void *sm_srv_large_malloc(size_t size, size_t align, int *err);
void sm_srv_free_large(uintptr_t p);
void *sm_srv_large_realloc(uintptr_t p, size_t size, int *err);
void sm_srv_free_any(uintptr_t p);

/* ---- sm_server.c ------------------------------------------------------------ */
unsigned sm_drain_frees(struct client *c, unsigned budget);
unsigned sm_drain_all_frees(void);
unsigned sm_take_blocks(struct client *c, unsigned cls, void **out, unsigned want);
unsigned sm_refill(struct client *c, unsigned cls, unsigned want);
bool sm_serve_requests(struct client *c);
void sm_reclaim_client(struct client *c);
bool sm_server_poll(void);
bool sm_any_doorbell(void);
void *sm_server_main(void *arg);

/* ---- sm_queue.c ------------------------------------------------------------- */
void sm_serve_self(struct client *c);
void *sm_self_refill(struct client *c, unsigned cls);
bool sm_self_flush(struct client *c, unsigned cls, unsigned keep);
void sm_notify(struct client *c, uint32_t pending);
void sm_client_wait(struct client *c, bool (*cond)(struct client *, uintptr_t), uintptr_t arg);
bool sm_cond_tail_moved(struct client *c, uintptr_t cls);
bool sm_cond_free_space(struct client *c, uintptr_t need);
void sm_fring_reserve(struct client *c, uint32_t n);
SM_SLOW void sm_flush_magazine(struct client *c, unsigned cls, unsigned keep);

/* Tells an awake server that this client has something for it (a plain release store: an
 * awake server polls doorbells; a sleeping one is woken only by sm_notify). */
static inline void sm_ring_doorbell(struct client *c) { STORE_REL(&c->doorbell, ++c->my_doorbell); }

/* Is the server thread awake and engaged, i.e. likely to answer within microseconds? */
static inline bool sm_server_prompt(void)
{
    return LOAD_ACQ(&sm_g.mode) == MODE_THREAD && !LOAD_RLX(&sm_g.srv_sleeping) && LOAD_RLX(&sm_g.srv_engaged);
}

/* The metadata lock from a thread that may already hold it: only the server thread can
 * (libc inside a pass); everybody else takes it. Returns whether it was taken here. */
extern SM_TLS uint8_t sm_tls_owner;
static inline bool sm_meta_lock(void)
{
    if (sm_tls_state == 3 && sm_tls_owner) return false;
    pthread_mutex_lock(&sm_g.srv_lock);
    if (sm_tls_state == 3) sm_tls_owner = 1;
    return true;
}
static inline void sm_meta_unlock(bool taken)
{
    if (!taken) return;
    if (sm_tls_state == 3) sm_tls_owner = 0;
    pthread_mutex_unlock(&sm_g.srv_lock);
}

/* ---- sm_lifecycle.c --------------------------------------------------------- */
struct client *sm_client_alloc_slot(void);
struct client *sm_client_get_slow(void);
void sm_client_exit(void *arg);
bool sm_server_stop(void);
void sm_server_restartable(void);
unsigned sm_active_clients(void);
struct client *sm_client_or_fallback(bool *locked);
void sm_start_server_thread(void);
bool sm_global_init(void);

/* ---- sm_stats.c ------------------------------------------------------------- */
void sm_fill_stats(nm_speedmalloc_stats *o);
extern uint32_t sm_reported_client_double;
extern uint64_t sm_client_double_count, sm_client_invalid_count;

#endif
