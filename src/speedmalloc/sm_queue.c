/* SpeedMalloc: the client side of the per-thread queues: doorbells, waiting for the
 * server or serving itself, flushing magazines.
 * (see sm_types.h for the data model, sm_internal.h for what the files share).
 *
 * Degrading gracefully (issue 18). The server thread is an ordinary thread: when other
 * programs keep the cores busy it is descheduled for whole time slices (milliseconds), and
 * a client that waits for it stalls. So no client ever waits long for the server:
 *
 *   - it waits (spinning) only while the server is awake and engaged, and at most
 *     CLIENT_WAIT_NS, less when the server's loop counter shows it is not running;
 *   - otherwise it runs the server's code for itself under the metadata lock
 *     (sm_serve_self). The lock makes it the metadata's one owner for that time, as the
 *     server thread is while it holds the lock for a pass: the paper's single owner
 *     (Sec. 5.1.2), with no atomic read-modify-write on metadata;
 *   - doorbells are plain release stores; a client wakes a sleeping server only for a
 *     large batch of queued frees, and only while the server says that pays
 *     (sm_g.srv_engaged, see sm_server.c). Work left in a ring for a sleeping server
 *     is safe: the client serves itself when the ring is full, at exit, or on a miss. */
#include "sm_internal.h"

/* Runs the server's code for this client under the metadata lock: its queued frees,
 * then its misses and ring top-ups. Without a server thread (inline mode) nobody else
 * will serve the other threads, so it serves everybody, and the decay. */
void sm_serve_self(struct client *c)
{
    pthread_mutex_lock(&sm_g.srv_lock);
    STORE_RLX(&c->c_inline, c->c_inline + 1);
    if (LOAD_ACQ(&sm_g.mode) == MODE_INLINE) {
        while (sm_server_poll()) {}
        sm_decay_sweep(sm_mono_ns());
    } else if (LOAD_ACQ(&c->state) != ST_FREE) {
        STORE_RLX(&c->sv_doorbell, LOAD_ACQ(&c->doorbell)); /* this client's doorbell is answered here */
        sm_drain_frees(c, UINT32_MAX);
        sm_serve_requests(c);
    }
    pthread_mutex_unlock(&sm_g.srv_lock);
}

/* A miss while the server is not prompt: the client takes the metadata lock and moves
 * blocks from its pages straight into its own magazine (the ready ring is for a server
 * thread handing blocks across cores; a thread serving itself needs no queue between it
 * and itself). Its queued frees go back first. Returns a block, or NULL when the OS
 * refuses memory. The refill doubles per miss, from half the ring's target to the ring's
 * target (64 KiB, then 128 KiB or 64 blocks of the class): what a server would have kept in
 * the ring, so a thread that allocates a lot of a class takes many blocks per lock, an idle
 * class few, and no more sits idle than before. */
void *sm_self_refill(struct client *c, unsigned cls)
{
    struct mag_hdr *h = sm_mh(c, cls);
    uint32_t cap = (uint32_t)(h->end - h->base), room = cap - sm_mag_n(h);
    uint32_t want = h->refill < room ? h->refill : room;
    if (!want) want = 1; /* cannot happen: a miss means an empty magazine */
    if (LOAD_RLX(&sm_g.thread_wanted) && LOAD_ACQ(&sm_g.mode) == MODE_INLINE && c != sm_g.fallback) sm_start_server_thread();
    STORE_REL(&c->free_tail, c->my_free_tail);
    pthread_mutex_lock(&sm_g.srv_lock);
    STORE_RLX(&c->c_inline, c->c_inline + 1);
    if (LOAD_ACQ(&sm_g.mode) == MODE_INLINE) { /* nobody else serves the other threads */
        while (sm_server_poll()) {}
        sm_decay_sweep(sm_mono_ns());
    } else {
        sm_drain_frees(c, UINT32_MAX);
        sm_maybe_sweep();
    }
    unsigned got = sm_take_blocks(c, cls, h->top, want);
    h->top += got;
    pthread_mutex_unlock(&sm_g.srv_lock);
    /* grows to a ring's worth, or for small blocks to what 32 KiB hold (within the
     * magazine): each refill is a metadata-lock round trip, and a thread whose blocks all
     * come back through other threads' frees (xmalloc-test) refills on every magazine */
    uint32_t most = sm_g.cls_tmax[cls], small = (uint32_t)((32u << 10) / sm_g.cls_size[cls]);
    if (small > most) most = small;
    if (most > cap) most = cap;
    if (h->refill < most) h->refill = (uint16_t)(h->refill * 2u < most ? h->refill * 2u : most);
    return got ? sm_unkey(*--h->top) : NULL;
}

/* A full magazine while the server is not prompt: if the metadata lock is free, this thread
 * returns the blocks beyond `keep` to their pages itself (its queued frees first), instead
 * of queueing them for a server that would not come. Returns false when the lock is busy
 * (the caller queues them). */
bool sm_self_flush(struct client *c, unsigned cls, unsigned keep)
{
    if (pthread_mutex_trylock(&sm_g.srv_lock) != 0) return false;
    struct mag_hdr *h = sm_mh(c, cls);
    STORE_REL(&c->free_tail, c->my_free_tail);
    sm_drain_frees(c, UINT32_MAX);
    uint32_t n = sm_mag_n(h) - keep;
    /* the older half goes (the bottom of the LIFO); the recently freed, cache-hot half stays */
    for (uint32_t i = 0; i < n; i++) sm_srv_free_small((uintptr_t)h->base[i]);
    sm_maybe_sweep();
    pthread_mutex_unlock(&sm_g.srv_lock);
    memmove(h->base, h->base + n, keep * sizeof(void *));
    h->top = h->base + keep;
    return true;
}

/* A sleeping server is woken only for queued work worth a wake-up (a futex wake costs the
 * client a system call and the server a context switch each way: microseconds, i.e. the
 * price of serving a few hundred blocks itself), and only while the server is engaged. */
void sm_notify(struct client *c, uint32_t pending)
{
    if (pending < WAKE_PENDING || !LOAD_RLX(&sm_g.wake_async) || !LOAD_RLX(&sm_g.srv_engaged)) return;
    (void)c;
    FENCE_SC(); /* Dekker with the server's sleep: doorbell stored; now read its flag */
    if (LOAD_RLX(&sm_g.srv_sleeping)) {
        STORE_RLX(&sm_g.srv_sleeping, 0);
        sm_futex_wake(&sm_g.srv_sleeping);
    }
}

/* Waits until cond(c, arg) holds: briefly for an awake server, then serves itself. */
void sm_client_wait(struct client *c, bool (*cond)(struct client *, uintptr_t), uintptr_t arg)
{
    int e = errno;
    if (LOAD_RLX(&sm_g.thread_wanted) && LOAD_ACQ(&sm_g.mode) == MODE_INLINE && c != sm_g.fallback) sm_start_server_thread();
    if (cond(c, arg)) { errno = e; return; }
    if (sm_server_prompt()) {
        uint32_t beat = LOAD_RLX(&sm_g.srv_beat);
        uint64_t t0 = sm_mono_ns(), tb = t0;
        for (unsigned i = 1;; i++) {
            sm_cpu_relax();
            if (cond(c, arg)) { errno = e; return; }
            if (i & 15) continue;
            uint64_t now = sm_mono_ns();
            if (now - t0 > CLIENT_WAIT_NS || LOAD_RLX(&sm_g.srv_sleeping)) break;
            if (now - tb > CLIENT_WAIT_NS / 4) { /* the server's loop did not move: it is not running */
                uint32_t b = LOAD_RLX(&sm_g.srv_beat);
                if (b == beat) break;
                beat = b;
                tb = now;
            }
        }
    }
    for (unsigned k = 0; !cond(c, arg); k++) {
        sm_serve_self(c);
        if (k) sched_yield(); /* cannot happen once the lock is ours; a safety net */
    }
    errno = e;
}
bool sm_cond_tail_moved(struct client *c, uintptr_t cls)
{
    return LOAD_ACQ(&c->tail[cls]) != sm_mh(c, cls)->head || LOAD_ACQ(&c->oom_seq) != c->my_oom_seen;
}
bool sm_cond_free_space(struct client *c, uintptr_t need)
{
    return c->my_free_tail - LOAD_ACQ(&c->free_head) + (uint32_t)need <= FRING;
}

/* Room for n more entries in the free ring (serving itself when it is full). */
void sm_fring_reserve(struct client *c, uint32_t n)
{
    if (c->my_free_tail - c->my_free_head_cache + n <= FRING) return;
    c->my_free_head_cache = LOAD_ACQ(&c->free_head);
    if (c->my_free_tail - c->my_free_head_cache + n <= FRING) return;
    STORE_REL(&c->free_tail, c->my_free_tail);
    sm_ring_doorbell(c);
    sm_client_wait(c, sm_cond_free_space, n);
    c->my_free_head_cache = LOAD_ACQ(&c->free_head);
}

/* Sends magazine entries beyond `keep` to the metadata owner through the free ring, in
 * chunks of what the ring holds (a grown magazine holds more than the ring). */
SM_SLOW void sm_flush_magazine(struct client *c, unsigned cls, unsigned keep)
{
    struct mag_hdr *h = sm_mh(c, cls);
    while (sm_mag_n(h) > keep) {
        uint32_t n = sm_mag_n(h) - keep;
        if (n > FRING / 2) n = FRING / 2;
        sm_fring_reserve(c, n);
        for (uint32_t i = 0; i < n; i++) c->fring[(c->my_free_tail + i) % FRING] = h->top[-1 - (ptrdiff_t)i];
        c->my_free_tail += n;
        h->top -= n;
        STORE_REL(&c->free_tail, c->my_free_tail);
        sm_ring_doorbell(c);
        sm_notify(c, c->my_free_tail - c->my_free_head_cache);
    }
}
