/* SpeedMalloc: the client fast paths (magazines, ready rings) and the exported
 * malloc/free/... interface.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* Malloc of class cls when the magazine is empty: pop the ready ring. */
static SM_SLOW void *ring_pop_slow(struct client *c, unsigned cls, bool borrow);
static __attribute__((noinline)) void *ring_pop(struct client *c, unsigned cls, bool borrow)
{
    struct mag_hdr *q = sm_mh(c, cls);
    if (SM_UNLIKELY(q->head == q->ctail)) return ring_pop_slow(c, cls, borrow);
    void *p = sm_unkey(c->ring[cls][q->head % RING]);
    q->head++;
    __builtin_prefetch(&c->ring[cls][(q->head + 8) % RING]);
    if (SM_UNLIKELY(q->head == q->low)) { /* low-water mark: ask for more ahead of demand */
        STORE_REL(&c->head_pub[cls], q->head);
        sm_ring_doorbell(c);
    }
    STORE_RLX(&c->c_ring, c->c_ring + 1);
    return p;
}
/* The ready ring in use after this class's magazine overflowed: blocks of the class went out to the
 * metadata owner and have to come back, i.e. the magazine is smaller than the thread's
 * working set of the class (glibc's bench-malloc-simple frees batches of 1600 blocks).
 * Double it (bounded per class and per thread), so the steady state stays in it. */
static SM_SLOW void mag_grow(struct client *c, unsigned cls)
{
    struct mag_hdr *h = sm_mh(c, cls);
    uint32_t cap = (uint32_t)(h->end - h->base), max = sm_g.cls_lcap_max[cls];
    if (cap >= max) return;
    uint32_t n = cap * 2 > max ? max : cap * 2;
    uint64_t add = (uint64_t)(n - cap) * sm_g.cls_size[cls];
    if (c->mag_bytes + add > MAG_THREAD_BYTES) return;
    c->mag_bytes += add;
    h->end = h->base + n;
}

static SM_SLOW void *ring_pop_slow(struct client *c, unsigned cls, bool borrow)
{
    struct mag_hdr *q = sm_mh(c, cls);
    if (q->flushed) { /* blocks went out and come back through the ring */
        mag_grow(c, cls);
        q->flushed = 0;
    }
    uint32_t t = LOAD_ACQ(&c->tail[cls]);
    if (t == q->head && !sm_server_prompt())
        return sm_self_refill(c, cls); /* nobody to wait for: serve itself, into the magazine */
    if (t == q->head) {
        /* Empty: post the miss (the paper's round trip, now the rare case)... */
        STORE_REL(&c->free_tail, c->my_free_tail); /* with any remote frees still unpublished */
        STORE_REL(&c->head_pub[cls], q->head);
        STORE_REL(&c->miss[cls], c->miss[cls] + 1);
        STORE_RLX(&c->c_miss, c->c_miss + 1);
        sm_ring_doorbell(c);
        /* ... and while an awake server answers it, take a block of a slightly bigger class
         * that this thread already holds (not for aligned requests: a bigger class may not
         * be aligned). free() finds the block's real class from its address. Without a
         * prompt server the client serves itself at once (sm_client_wait): no borrowing. */
        if (borrow && sm_server_prompt()) {
            for (unsigned k = cls + 1; k < sm_g.nclass && k <= cls + 4; k++) {
                struct mag_hdr *o = sm_mh(c, k);
                if (o->top != o->base) return sm_unkey(*--o->top);
                if (o->head != o->ctail) return ring_pop(c, k, false);
            }
        }
        sm_client_wait(c, sm_cond_tail_moved, cls);
        t = LOAD_ACQ(&c->tail[cls]);
        c->my_oom_seen = LOAD_ACQ(&c->oom_seq);
        if (t == q->head) return NULL; /* no memory from the OS: malloc returns NULL, ENOMEM */
    }
    q->ctail = t;
    q->low = q->head + (t - q->head + 1) / 2; /* publish the consumer index when half is used */
    return ring_pop(c, cls, borrow);
}

static inline void *client_malloc_cls(struct client *c, unsigned cls, bool borrow)
{
    struct mag_hdr *h = sm_mh(c, cls);
    if (SM_LIKELY(h->top != h->base)) {
        SM_COUNT(c->c_fast);
        return sm_unkey(*--h->top);
    }
    return ring_pop(c, cls, borrow);
}
/* Large objects are served under the metadata lock by the calling thread: mmap and munmap
 * cost more than any round trip, and a round trip would wait for a server that may not be
 * running. This thread's queued frees go first, so a large block it just freed is reused
 * at once instead of unmapping it and mapping another (each munmap costs a TLB-shootdown
 * interrupt to every CPU running the process). */
static SM_SLOW void *sm_large_malloc(size_t size, size_t align)
{
    int err = 0;
    void *p;
    if (sm_tls_state == 3) { /* the server thread itself (only libc internals could get here) */
        bool l = sm_meta_lock();
        p = sm_srv_large_malloc(size, align, &err);
        sm_meta_unlock(l);
        if (!p) errno = err;
        return p;
    }
    bool locked;
    struct client *c = sm_client_or_fallback(&locked);
    if (!c) return sm_boot_alloc(size, align);
    STORE_REL(&c->free_tail, c->my_free_tail);
    pthread_mutex_lock(&sm_g.srv_lock);
    sm_drain_frees(c, UINT32_MAX);
    p = sm_srv_large_malloc(size, align, &err);
    sm_g.st.sync_requests++;
    pthread_mutex_unlock(&sm_g.srv_lock);
    if (locked) pthread_mutex_unlock(&sm_g.fb_lock);
    if (!p) errno = err ? err : ENOMEM;
    return p;
}
static SM_SLOW void *malloc_cls_slow(unsigned cls, bool borrow)
{
    if (sm_tls_state == 3) {
        bool l = sm_meta_lock();
        void *p = sm_server_self_malloc(cls);
        sm_meta_unlock(l);
        return p;
    }
    bool locked;
    struct client *c = sm_client_or_fallback(&locked);
    if (!c) return sm_boot_alloc(sm_g.nclass ? sm_g.cls_size[cls] : 16, 16);
    void *p = client_malloc_cls(c, cls, borrow);
    if (locked) pthread_mutex_unlock(&sm_g.fb_lock);
    return p;
}

static SM_SLOW void *sm_malloc_slow(size_t size)
{
    if (SM_UNLIKELY(sm_tls_in_init)) return sm_boot_alloc(size ? size : 1, 16);
    if (SM_UNLIKELY(LOAD_ACQ(&sm_g.init) != INIT_DONE) && !sm_global_init()) return sm_boot_alloc(size ? size : 1, 16);
    int cls = sm_size_class(size);
    if (SM_UNLIKELY(cls < 0)) {
        if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
        return sm_large_malloc(size, 16);
    }
    struct client *c = sm_self();
    void *p = c ? client_malloc_cls(c, (unsigned)cls, true) : malloc_cls_slow((unsigned)cls, true);
    if (SM_UNLIKELY(!p)) errno = ENOMEM;
    return p;
}

static SM_SLOW void *malloc_miss(struct client *c, struct mag_hdr *h)
{
    void *p = ring_pop(c, (unsigned)(h - c->mh) - 1, true);
    if (SM_UNLIKELY(!p)) errno = ENOMEM;
    return p;
}

/* The fast path: a registered thread pops its own magazine; no server, no atomics, no
 * global state (the class header's offset comes from the thread's own table). */
static inline void *sm_malloc(size_t size)
{
    struct client *c = sm_fast_client(); /* sm_nil_client (empty magazines) when unregistered */
    if (SM_LIKELY(size <= 1024)) {
        struct mag_hdr *h = (struct mag_hdr *)((char *)c->mh + c->lut[(size + 15) >> 4]);
        void **t = h->top;
        if (SM_LIKELY(t != h->base)) {
            h->top = t - 1;
            SM_COUNT(c->c_fast);
            return sm_unkey(t[-1]);
        }
        if (h->base) return malloc_miss(c, h); /* a registered thread (the nil client's base is NULL) */
    }
    return sm_malloc_slow(size);
}

static SM_SLOW void free_small_slow(uintptr_t p, unsigned cls);
static SM_SLOW void free_other(uintptr_t p, unsigned kind);
static SM_SLOW void free_flush(struct client *c, unsigned cls);
static inline void free_remote(struct client *c, uintptr_t p);

/* Everything the fast path does not decide: NULL, an unregistered thread, a pointer
 * outside the segment window or not a block start (a large object, a segment outside
 * the window, an invalid pointer). */
static SM_SLOW void free_general(uintptr_t p)
{
    if (!p) return;
    unsigned kind = sm_reg_kind(p);
    if (kind != REG_KIND_SEG) { free_other(p, kind); return; }
    int cls = sm_block_class(p);
    free_small_slow(p, cls < 0 ? UINT32_MAX : (unsigned)cls);
}

static inline unsigned mh_cls(struct client *c, struct mag_hdr *h) { return (unsigned)(h - c->mh) - 1; }

static SM_SLOW void free_push_full(struct client *c, struct mag_hdr *h, void *ptr)
{
    free_flush(c, mh_cls(c, h));
    *h->top++ = ptr;
    ((uint64_t *)ptr)[SM_KEY_WORD] = c->key;
}

static SM_SLOW void free_keyed(struct client *c, struct mag_hdr *h, void *ptr);

/* The fast path: a registered thread pushes onto its own magazine; no server, no atomics.
 * The pointer is checked before it is dereferenced: one compare puts it in the segment
 * window, one load of the window's map gives its slice word (page start, owner, and the
 * offset of the class's header in this thread's client, 0 = not a page), and one multiply
 * and compare against the header's constants say whether it is one of the page's block
 * starts. Every exit that does more work is a tail call, so this stays a leaf without
 * saved registers. */
static inline void sm_free(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    struct client *c = sm_fast_client(); /* sm_nil_client (no window) when unregistered */
    uintptr_t idx = (p - c->win_base) >> SLICE_SHIFT; /* NULL is outside the window */
    if (SM_UNLIKELY(idx >= WIN_SLICES)) { free_general(p); return; }
    uint64_t w = LOAD_RLX(&c->win_map[idx]);
    struct mag_hdr *h = (struct mag_hdr *)((char *)c->mh + (w >> SI_K_SHIFT));
    uint32_t off = (uint32_t)p - (uint32_t)w;
    if (SM_UNLIKELY((uint64_t)off * h->chk_mul >= h->chk_lim)) { free_general(p); return; }
    if (SM_UNLIKELY((uint16_t)(w >> 32) != c->my_id)) { /* SI_OWNER(w) */
        /* another thread's page: back to its owner (through the free ring, batched), so
         * that two threads never write the same cache line, nor neighbouring lines (the
         * adjacent-line prefetcher pairs them): larson with 2 threads ran 1.5x slower when
         * blocks whose size is a multiple of 64 stayed with the freeing thread */
        free_remote(c, p);
        return;
    }
    uint64_t *kw = (uint64_t *)ptr + SM_KEY_WORD;
    uint64_t key = c->key;
    if (SM_UNLIKELY(*kw == key)) { free_keyed(c, h, ptr); return; } /* freed already? */
    void **t = h->top;
    if (SM_UNLIKELY(t == h->end)) { free_push_full(c, h, ptr); return; }
    *t = ptr;
    h->top = t + 1;
    *kw = key;
}

/* The block carries the free key: it is in this magazine (a double free, however many
 * frees came in between), or elsewhere (another thread's magazine, a ring, the server:
 * then the server's bitmap check catches a repeat), or the user's data matched the key by
 * chance (2^-64). Only the first case is decided here; the others proceed as a free. */
static SM_SLOW void free_keyed(struct client *c, struct mag_hdr *h, void *ptr)
{
    for (void **q = h->base; q < h->top; q++)
        if (*q == ptr) { free_small_slow((uintptr_t)ptr, UINT32_MAX - 1); return; }
    if (h->top == h->end) { free_push_full(c, h, ptr); return; }
    *h->top++ = ptr;
    ((uint64_t *)ptr)[SM_KEY_WORD] = c->key;
}

/* A block of a page that feeds another thread: into the free ring, published every
 * 16 entries (and whenever the magazines flush or the thread waits or exits). A leaf with
 * no call and no errno save on 15 of 16 frees (it was 30 instructions per block, with two
 * calls: callgrind, xmalloc-test 2t, where every free is remote); the publishing and the
 * full-ring wait, which may sleep or serve, are out of line. */
static SM_SLOW void free_remote_publish(struct client *c)
{
    int e = errno;
    STORE_REL(&c->free_tail, c->my_free_tail);
    sm_ring_doorbell(c);
    sm_notify(c, c->my_free_tail - c->my_free_head_cache);
    errno = e;
}
static inline void free_remote(struct client *c, uintptr_t p);
static SM_SLOW void free_remote_full(struct client *c, uintptr_t p)
{
    int e = errno;
    sm_fring_reserve(c, 1);
    errno = e;
    free_remote(c, p); /* room now */
}
static inline void free_remote(struct client *c, uintptr_t p)
{
    uint32_t t = c->my_free_tail;
    if (SM_UNLIKELY(t - c->my_free_head_cache >= FRING)) { free_remote_full(c, p); return; }
    c->fring[t % FRING] = (void *)p;
    c->my_free_tail = ++t;
    if (SM_UNLIKELY((t & 15) == 0)) free_remote_publish(c);
}

static SM_SLOW void free_flush(struct client *c, unsigned cls)
{
    int e = errno; /* free preserves errno */
    struct mag_hdr *h = sm_mh(c, cls);
    h->flushed = 1; /* a miss of this class before its next flush grows the magazine */
    /* without a prompt server, back to the pages now (if the lock is free); else queued */
    if (sm_server_prompt() || c == sm_g.fallback || !sm_self_flush(c, cls, sm_mag_n(h) / 2))
        sm_flush_magazine(c, cls, sm_mag_n(h) / 2);
    errno = e;
}

static SM_SLOW void free_small_slow(uintptr_t p, unsigned cls)
{
    int e = errno;
    if (cls == UINT32_MAX - 1) {
        __atomic_fetch_add(&sm_client_double_count, 1, __ATOMIC_RELAXED);
        sm_report(&sm_reported_client_double, "double free of", (void *)p);
        errno = e;
        return;
    }
    if (cls == UINT32_MAX) { /* sm_block_class said -1 */
        __atomic_fetch_add(&sm_client_invalid_count, 1, __ATOMIC_RELAXED);
        sm_report(&sm_g.reported_invalid, "free of a pointer that is not a block start", (void *)p);
        errno = e;
        return;
    }
    if (sm_tls_state == 3) {
        bool l = sm_meta_lock();
        sm_srv_free_small(p);
        sm_meta_unlock(l);
        errno = e;
        return;
    }
    bool locked;
    struct client *c = sm_client_or_fallback(&locked);
    if (c) {
        struct mag_hdr *h = sm_mh(c, cls);
        if (h->top >= h->end) sm_flush_magazine(c, cls, sm_mag_n(h) / 2);
        bool dup = false;
        if (((uint64_t *)p)[SM_KEY_WORD] == sm_g.free_key)
            for (void **q = h->base; q < h->top && !dup; q++) dup = *q == (void *)p;
        if (dup) {
            __atomic_fetch_add(&sm_client_double_count, 1, __ATOMIC_RELAXED);
            sm_report(&sm_reported_client_double, "double free of", (void *)p);
        } else {
            *h->top++ = (void *)p;
            ((uint64_t *)p)[SM_KEY_WORD] = sm_g.free_key;
        }
        if (locked) {
            sm_flush_magazine(c, cls, 0); /* the fallback keeps nothing: it is shared */
            pthread_mutex_unlock(&sm_g.fb_lock);
        }
    }
    errno = e;
}

static SM_SLOW void free_other(uintptr_t p, unsigned kind)
{
    int e = errno;
    if (sm_in_boot((void *)p)) { errno = e; return; } /* bootstrap blocks are never reused */
    if (kind >= 2 && (p & (PAGE_SIZE_OS - 1)) == 0) {
        /* under the metadata lock, here and now (see sm_large_malloc); the map check
         * inside catches an invalid or double free of a large object */
        bool l = sm_meta_lock();
        sm_srv_free_large(p);
        sm_meta_unlock(l);
        errno = e;
        return;
    }
    __atomic_fetch_add(&sm_client_invalid_count, 1, __ATOMIC_RELAXED);
    sm_report(&sm_g.reported_invalid, "free of a pointer not from this allocator", (void *)p);
    errno = e;
}

static SM_SLOW size_t usable_size_slow(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (!p) return 0;
    if (sm_in_boot(ptr)) return sm_boot_size(ptr);
    int cls = sm_block_class(p);
    if (cls >= 0) return sm_g.cls_size[cls];
    unsigned kind = sm_reg_kind(p);
    if (kind >= 2 && (p & (PAGE_SIZE_OS - 1)) == 0) {
        const struct large_hdr *h = (const struct large_hdr *)(p - PAGE_SIZE_OS);
        if (h->magic == LARGE_MAGIC) return h->base + h->maplen - p;
    }
    return 0;
}
/* The same checks as free's fast path (Redis calls malloc_usable_size on every allocation
 * and every free, for its memory accounting). */
static inline size_t usable_size(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    struct client *c = sm_fast_client();
    uintptr_t idx = (p - c->win_base) >> SLICE_SHIFT;
    if (SM_LIKELY(idx < WIN_SLICES)) {
        uint64_t w = LOAD_RLX(&c->win_map[idx]);
        const struct mag_hdr *h = (const struct mag_hdr *)((const char *)c->mh + (w >> SI_K_SHIFT));
        uint32_t off = (uint32_t)p - (uint32_t)w;
        if (SM_LIKELY((uint64_t)off * h->chk_mul < h->chk_lim)) return h->size;
    }
    return usable_size_slow(ptr);
}

static void *sm_aligned(size_t align, size_t size)
{
    if (align <= 16) return sm_malloc(size);
    if (SM_UNLIKELY(LOAD_ACQ(&sm_g.init) != INIT_DONE) && !sm_global_init()) return sm_boot_alloc(size, align);
    if (sm_tls_in_init) return sm_boot_alloc(size, align);
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    size_t need = size < align ? align : size;
    if (align <= SLICE_SIZE && need <= MAX_CLASS_SIZE) {
        /* A class whose size is a multiple of align: its blocks are aligned, since pages start on 64 KiB. */
        for (int cls = sm_size_class(need); cls >= 0 && (unsigned)cls < sm_g.nclass; cls++) {
            if (sm_g.cls_size[cls] % align == 0) {
                struct client *c = sm_self();
                void *p = c ? client_malloc_cls(c, (unsigned)cls, false) : malloc_cls_slow((unsigned)cls, false);
                if (!p) errno = ENOMEM;
                return p;
            }
        }
    }
    return sm_large_malloc(size, align);
}

static void *sm_realloc(void *ptr, size_t size)
{
    if (!ptr) return sm_malloc(size);
    if (size == 0) { sm_free(ptr); return NULL; } /* glibc's behaviour */
    uintptr_t p = (uintptr_t)ptr;
    size_t old = usable_size(ptr);
    if (old == 0) {
        __atomic_fetch_add(&sm_client_invalid_count, 1, __ATOMIC_RELAXED);
        sm_report(&sm_g.reported_invalid, "realloc of an invalid pointer", ptr);
        errno = EINVAL;
        return NULL;
    }
    if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
    unsigned kind = sm_in_boot(ptr) ? 0 : sm_reg_kind(p);
    if (kind == REG_KIND_SEG && size <= old && size > old / 2) return ptr;
    if (kind >= 2 && size > MAX_CLASS_SIZE && !sm_tls_in_init) { /* mremap, under the metadata lock */
        int err = 0;
        bool l = sm_meta_lock();
        void *r = sm_srv_large_realloc(p, size, &err);
        sm_g.st.sync_requests++;
        sm_meta_unlock(l);
        if (!r) errno = err ? err : ENOMEM;
        return r;
    }
    void *n = sm_malloc(size);
    if (!n) return NULL;
    memcpy(n, ptr, old < size ? old : size);
    sm_free(ptr);
    return n;
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
    if (total <= MAX_CLASS_SIZE || sm_in_boot(p) || ((const struct large_hdr *)((uintptr_t)p - PAGE_SIZE_OS))->recycled)
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
/* unshare and setns for calls that need a single-threaded process: the server thread steps
 * aside for the call (see sm_server_stop); the kernel's answer is returned as is. */
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
SM_PUBLIC int unshare(int flags)
{
    bool stopped = (flags & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)) && sm_server_stop();
    long r = syscall(SYS_unshare, flags);
    int e = errno;
    if (stopped) sm_server_restartable();
    errno = e;
    return (int)r;
}
SM_PUBLIC int setns(int fd, int nstype)
{
    /* nstype 0 (any) or a pidfd's set of namespaces may include one of these */
    bool stopped = (nstype == 0 || (nstype & (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWTIME))) && sm_server_stop();
    long r = syscall(SYS_setns, fd, nstype);
    int e = errno;
    if (stopped) sm_server_restartable();
    errno = e;
    return (int)r;
}

/* glibc's internal names, used by some programs and by libc itself. */
SM_PUBLIC void *__libc_malloc(size_t size) __attribute__((alias("malloc"), copy(malloc)));
SM_PUBLIC void __libc_free(void *p) __attribute__((alias("free"), copy(free)));
SM_PUBLIC void *__libc_calloc(size_t n, size_t size) __attribute__((alias("calloc"), copy(calloc)));
SM_PUBLIC void *__libc_realloc(void *p, size_t size) __attribute__((alias("realloc"), copy(realloc)));
SM_PUBLIC void *__libc_memalign(size_t align, size_t size) __attribute__((alias("memalign"), copy(memalign)));
SM_PUBLIC void *__libc_valloc(size_t size) __attribute__((alias("valloc"), copy(valloc)));
SM_PUBLIC void *__libc_pvalloc(size_t size) __attribute__((alias("pvalloc"), copy(pvalloc)));
#endif

