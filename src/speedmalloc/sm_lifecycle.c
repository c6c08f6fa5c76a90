/* SpeedMalloc: global state, initialization, thread registration and exit, the
 * post-exit fallback client, starting the server thread, fork.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* The metadata lock is held for short stretches (a refill, a drain of at most one ring):
 * an adaptive mutex spins briefly before it sleeps, instead of a futex round trip. */
struct sm_global sm_g = {.reg_lock = PTHREAD_MUTEX_INITIALIZER, .srv_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
                         .fb_lock = PTHREAD_MUTEX_INITIALIZER, .pin_cpu = -1, .win_base = WIN_OFF};
SM_TLS uintptr_t sm_tls_cdelta;
struct client sm_nil_client = {.win_base = WIN_OFF}; /* see sm_fast_client */
SM_TLS uint8_t sm_tls_state;
SM_TLS uint8_t sm_tls_in_init;
SM_TLS uint8_t sm_tls_owner; /* the server thread holds srv_lock (see sm_meta_lock) */

struct client *sm_client_alloc_slot(void)
{
    struct client *c = NULL;
    pthread_mutex_lock(&sm_g.reg_lock);
    uint32_t n = sm_g.nclients;
    for (uint32_t i = 0; i < n; i++) {
        if (LOAD_ACQ(&sm_g.clients[i]->state) == ST_FREE) { c = sm_g.clients[i]; break; }
    }
    if (!c && n < MAX_CLIENTS) {
        c = sm_os_map(SM_CLIENT_MAP_BYTES);
        if (c) {
            c->id = n + 1;
            sm_g.clients[n] = c;
            STORE_REL(&sm_g.nclients, n + 1);
        }
    }
    if (c) {
        /* Client-side fields; the server reset its own fields before marking the slot free. */
        memset(c->head_pub, 0, sizeof c->head_pub);
        memset(c->miss, 0, sizeof c->miss);
        /* The fast paths' view of the immutable globals, and the class headers. */
        c->win_base = LOAD_ACQ(&sm_g.win_base);
        c->win_map = sm_g.win_map;
        c->key = sm_g.free_key;
        c->my_id = (uint16_t)c->id;
        for (unsigned i = 0; i < sizeof c->lut / sizeof c->lut[0]; i++)
            c->lut[i] = (uint16_t)((sm_g.lut_small[i] + 1u) * MH_SIZE);
        memset(c->mh, 0, sizeof c->mh); /* entry 0: chk_lim 0 rejects every pointer */
        for (unsigned cls = 0; cls < sm_g.nclass; cls++) {
            struct mag_hdr *h = sm_mh(c, cls);
            h->base = h->top = sm_mag_slots(c, cls);
            h->end = h->base + sm_g.cls_lcap[cls];
            h->chk_mul = sm_g.cls_chk[cls + 1].mul;
            h->chk_lim = sm_g.cls_chk[cls + 1].lim;
            h->size = sm_g.cls_size[cls];
            h->refill = (uint16_t)((sm_g.cls_tmax[cls] + 1) / 2); /* as the ring's first target */
        }
        c->mag_bytes = 0;
        c->my_free_tail = c->my_free_head_cache = 0;
        c->my_oom_seen = LOAD_ACQ(&c->oom_seq);
        c->my_doorbell = 0;
        STORE_RLX(&c->doorbell, 0);
        STORE_RLX(&c->free_tail, 0);
        c->c_fast = c->c_ring = c->c_miss = c->c_inline = 0;
        STORE_RLX(&sm_g.clients_registered, sm_g.clients_registered + 1); /* under reg_lock */
        STORE_REL(&c->state, ST_ACTIVE);
    }
    pthread_mutex_unlock(&sm_g.reg_lock);
    return c;
}

/* Slow part of getting the calling thread's client. */
struct client *sm_client_get_slow(void)
{
    if (sm_tls_state == 2 || sm_tls_state == 3) return NULL; /* after the TLS destructor / the server itself */
    if (SM_UNLIKELY(LOAD_ACQ(&sm_g.init) != INIT_DONE) && !sm_global_init()) return NULL;
    struct client *c = sm_client_alloc_slot();
    if (!c) return NULL;
    sm_set_self(c);
    sm_tls_state = 1;
    pthread_setspecific(sm_g.key, c);
    return c;
}

/* TLS destructor: hand everything back and recycle the slot (under the metadata lock,
 * so it does not wait for a server that may be asleep or descheduled). */
void sm_client_exit(void *arg)
{
    struct client *c = arg;
    if (!c) return;
    int e = errno;
    for (unsigned cls = 0; cls < sm_g.nclass; cls++) {
        if (sm_mag_n(sm_mh(c, cls))) sm_flush_magazine(c, cls, 0);
        STORE_REL(&c->head_pub[cls], sm_mh(c, cls)->head);
    }
    STORE_REL(&c->free_tail, c->my_free_tail);
    sm_set_self(NULL);
    sm_tls_state = 2;
    STORE_REL(&c->state, ST_EXITING);
    pthread_mutex_lock(&sm_g.srv_lock);
    if (LOAD_ACQ(&c->state) == ST_EXITING) sm_reclaim_client(c); /* unless the server just did */
    pthread_mutex_unlock(&sm_g.srv_lock);
    /* the last client gone: the server looks whether the process has any thread left (see
     * sm_server_main), so that it does not keep a finished process alive */
    if (LOAD_ACQ(&sm_g.mode) == MODE_THREAD && !sm_active_clients() && LOAD_ACQ(&sm_g.srv_sleeping)) {
        STORE_REL(&sm_g.srv_sleeping, 0);
        sm_futex_wake(&sm_g.srv_sleeping);
    }
    errno = e;
}

/* Registered threads that have not exited (the fallback client is no thread). */
unsigned sm_active_clients(void)
{
    unsigned n = 0;
    uint32_t nc = LOAD_ACQ(&sm_g.nclients);
    for (uint32_t i = 0; i < nc; i++)
        if (sm_g.clients[i] != sm_g.fallback && LOAD_ACQ(&sm_g.clients[i]->state) == ST_ACTIVE) n++;
    return n;
}

/* Runs fn with the calling thread's client, or the shared fallback client under its lock. */
struct client *sm_client_or_fallback(bool *locked)
{
    *locked = false;
    struct client *c = sm_self();
    if (SM_LIKELY(c)) return c;
    c = sm_client_get_slow();
    if (c) return c;
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE || !sm_g.fallback) return NULL;
    pthread_mutex_lock(&sm_g.fb_lock);
    *locked = true;
    return sm_g.fallback;
}

/* ---- initialization, fork, exit --------------------------------------------- */
void sm_start_server_thread(void)
{
    if (LOAD_ACQ(&sm_g.mode) == MODE_THREAD || sm_tls_state == 3) return;
    uint32_t expect = 0;
    /* one starter at a time: a control-path compare-and-swap, not allocator metadata */
    if (!__atomic_compare_exchange_n(&sm_g.starting, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 << 10);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the server never runs signal handlers */
    int rc = pthread_create(&sm_g.server_thread, &a, sm_server_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    /* On success `starting` stays set: a second server must never start, even
     * before the first one has switched the mode to MODE_THREAD. */
    if (rc != 0) {
        STORE_RLX(&sm_g.thread_wanted, false); /* stay in inline mode */
        STORE_REL(&sm_g.starting, 0);
    }
}

/* Some system calls need a single-threaded process: unshare with CLONE_NEWUSER, CLONE_THREAD,
 * CLONE_SIGHAND or CLONE_VM, and setns into a user, mount or time namespace (EINVAL or EUSERS
 * otherwise). The server thread made every program that allocates two-threaded, so that
 * `unshare -U` failed under SpeedMalloc (found by trying util-linux under LD_PRELOAD). The
 * library's unshare and setns (sm_client.c) call this first: the server is asked to leave, the
 * caller waits until the kernel has let the thread go (its /proc/self/task entry is gone), makes
 * the call, and sm_server_restartable lets a client start a new server when one is next needed.
 * Returns whether a server was stopped. Held across the call: reg_lock (no fork, no second stop). */
bool sm_server_stop(void)
{
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE) return false;
    pthread_mutex_lock(&sm_g.reg_lock);
    if (!LOAD_ACQ(&sm_g.starting)) { pthread_mutex_unlock(&sm_g.reg_lock); return false; } /* no server thread */
    int e = errno;
    STORE_SC(&sm_g.quit_req, 1);
    STORE_REL(&sm_g.srv_sleeping, 0);
    sm_futex_wake(&sm_g.srv_sleeping);
    while (!LOAD_ACQ(&sm_g.srv_left)) sm_futex_wait(&sm_g.srv_left, 0, 1000000ull);
    sm_os_wait_thread_gone(LOAD_ACQ(&sm_g.srv_tid));
    errno = e;
    return true;
}
void sm_server_restartable(void)
{
    STORE_RLX(&sm_g.quit_req, 0);
    STORE_RLX(&sm_g.srv_left, 0);
    STORE_REL(&sm_g.starting, 0);
    pthread_mutex_unlock(&sm_g.reg_lock);
}

void sm_fork_prepare(void)
{
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE) return;
    pthread_mutex_lock(&sm_g.reg_lock);
    pthread_mutex_lock(&sm_g.fb_lock);
    /* Park the server first: it takes srv_lock for its passes, so it must not be
     * waiting for it while we hold it. It parks at the top of its loop, lock-free. */
    if (LOAD_ACQ(&sm_g.mode) == MODE_THREAD) {
        STORE_SC(&sm_g.pause_req, 1);
        STORE_RLX(&sm_g.srv_sleeping, 0);
        sm_futex_wake(&sm_g.srv_sleeping);
        while (!LOAD_ACQ(&sm_g.paused)) sched_yield();
    }
    pthread_mutex_lock(&sm_g.srv_lock);
}
void sm_fork_parent(void)
{
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE) return;
    pthread_mutex_unlock(&sm_g.srv_lock);
    if (LOAD_ACQ(&sm_g.pause_req)) {
        STORE_REL(&sm_g.pause_req, 0);
        sm_futex_wake(&sm_g.pause_req);
        while (LOAD_ACQ(&sm_g.paused)) sched_yield();
    }
    pthread_mutex_unlock(&sm_g.fb_lock);
    pthread_mutex_unlock(&sm_g.reg_lock);
}
void sm_fork_child(void)
{
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE) return;
    /* Only this thread survives: the others' queues go back to the server. */
    uint32_t nc = sm_g.nclients;
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = sm_g.clients[i];
        if (c == sm_self() || c == sm_g.fallback || c->state != ST_ACTIVE) continue;
        for (unsigned cls = 0; cls < sm_g.nclass; cls++) {
            struct mag_hdr *h = sm_mh(c, cls);
            c->head_pub[cls] = h->head;
            /* its private magazines are plain memory now: give them back too */
            for (void **q = h->base; q < h->top; q++) sm_srv_free_small((uintptr_t)*q);
            h->top = h->base;
        }
        c->state = ST_EXITING;
    }
    sm_g.pause_req = 0;
    sm_g.paused = 0;
    sm_g.srv_sleeping = 0;
    sm_g.srv_engaged = 0;
    sm_g.mode = MODE_INLINE;
    sm_g.starting = 0;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&sm_g.srv_lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_init(&sm_g.fb_lock, NULL);
    pthread_mutex_init(&sm_g.reg_lock, NULL);
    /* The server thread is restarted lazily, outside the fork handler, on the first wait. */
}

bool sm_global_init(void)
{
    uint32_t st = LOAD_ACQ(&sm_g.init);
    if (st == INIT_DONE) return true;
    if (st == INIT_FAILED) return false;
    uint32_t expect = INIT_NONE;
    if (!__atomic_compare_exchange_n(&sm_g.init, &expect, INIT_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (sm_tls_in_init) return false; /* recursion from inside init: the bootstrap arena serves it */
        while ((st = LOAD_ACQ(&sm_g.init)) == INIT_BUSY) sched_yield();
        return st == INIT_DONE;
    }
    sm_tls_in_init = 1;
    const void *rnd = (const void *)getauxval(AT_RANDOM); /* 16 bytes from the kernel, unaligned */
    uint64_t r[2] = {(uint64_t)(uintptr_t)&sm_g * 0x9E3779B97F4A7C15ull, 0};
    if (rnd) memcpy(r, rnd, sizeof r);
    sm_g.free_key = (r[0] ^ r[1]) | 1;
    bool ok = sm_classes_init();
    if (ok) {
        sm_g.registry = sm_os_map((size_t)1 << (ADDR_BITS - SEG_SHIFT));
        ok = sm_g.registry != NULL;
    }
    if (ok) sm_window_init(); /* before any client: they copy the window's base */
    if (ok) ok = pthread_key_create(&sm_g.key, sm_client_exit) == 0;
    if (ok) {
        cpu_set_t set;
        sm_g.ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 2;
        if (!sm_g.ncpu) sm_g.ncpu = 1;
    }
    if (ok) {
        const char *s = getenv("NEARMEM_SPEEDMALLOC_STATS");
        sm_g.print_stats = s && *s && *s != '0';
        s = getenv("NEARMEM_SPEEDMALLOC_CPU");
        if (s && *s >= '0' && *s <= '9') sm_g.pin_cpu = atoi(s);
        s = getenv("NEARMEM_SPEEDMALLOC_INLINE");
        sm_g.thread_wanted = !(s && *s && *s != '0');
        s = getenv("NEARMEM_SPEEDMALLOC_FAULT");
        sm_g.fault_stalled = s && strcmp(s, "stalled-server") == 0;
        s = getenv("NEARMEM_SPEEDMALLOC_WAKE");
        sm_g.wake_async = s && *s && *s != '0'; /* default off: measured, see docs/speedmalloc.md */
        sm_g.mode = MODE_INLINE;
        pthread_atfork(sm_fork_prepare, sm_fork_parent, sm_fork_child);
    }
    sm_tls_in_init = 0;
    STORE_REL(&sm_g.init, ok ? INIT_DONE : INIT_FAILED);
    if (!ok) return false;
    sm_g.fallback = sm_client_alloc_slot();
    if (sm_g.thread_wanted) sm_start_server_thread();
    return true;
}

