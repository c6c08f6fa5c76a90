/* SpeedMalloc: the support core as a thread: serving requests and refills first,
 * round-robin, then draining free rings, reclaiming exited threads, sleeping when idle.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* ---- serving clients (the metadata owner: the server, or a client under srv_lock) ---- */
unsigned sm_drain_frees(struct client *c, unsigned budget)
{
    uint32_t t = LOAD_ACQ(&c->free_tail);
    uint32_t h = c->free_head;
    unsigned n = t - h < budget ? t - h : budget;
    if (n) {
        sm_srv_free_ring(c->fring, h, h + n);
        STORE_REL(&c->free_head, h + n);
        sm_g.st.frees_received += n;
    }
    return n;
}
unsigned sm_drain_all_frees(void)
{
    unsigned n = 0;
    uint32_t nc = LOAD_ACQ(&sm_g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = sm_g.clients[i];
        if (LOAD_ACQ(&c->state) == ST_FREE) continue;
        n += sm_drain_frees(c, FRING);
    }
    return n;
}

/* Takes up to `want` free blocks of class cls for client c from its pages (then from an
 * unowned page, which it then owns; then a new page, after every free ring was drained:
 * Sec. 5.1.2, a single owner of all free memory bounds blowup) and writes them to out[]. */
unsigned sm_take_blocks(struct client *c, unsigned cls, void **out, unsigned want)
{
    unsigned got = 0;
    bool drained = false;
    const uintptr_t size = sm_g.cls_size[cls];
    while (got < want) {
        struct page *pg = c->sv_partial[cls];
        if (!pg) {
            pg = sm_g.partial[cls];
            if (!pg) {
                if (!drained) { drained = true; if (sm_drain_all_frees()) continue; }
                pg = sm_page_new(cls);
                if (!pg) break;
            }
            sm_list_remove(pg);
            sm_page_set_owner(pg, c);
            sm_list_push(&c->sv_partial[cls], pg);
        }
        for (unsigned w = 0; w < 64 && got < want && pg->nfree; w++) {
            uint64_t bits = pg->free_bits[w];
            if (!bits) continue;
            uintptr_t base = pg->start + (uintptr_t)w * 64 * size;
            while (bits && got < want) {
                unsigned b = (unsigned)__builtin_ctzll(bits);
                bits &= bits - 1;
                out[got++] = (void *)(base + b * size);
                pg->nfree--;
            }
            pg->free_bits[w] = bits;
        }
        if (!pg->nfree) sm_list_remove(pg);
    }
    if (got) {
        sm_g.st.bytes_out += (uint64_t)got * size;
        sm_g.st.refill_blocks += got;
        sm_g.st.refill_rounds++;
    }
    return got;
}

/* Pushes up to `want` blocks of class cls into ring slots [tail, tail + want). */
unsigned sm_refill(struct client *c, unsigned cls, unsigned want)
{
    uint32_t t = c->tail[cls];
    void *tmp[RING];
    unsigned got = sm_take_blocks(c, cls, tmp, want < RING ? want : RING);
    for (unsigned i = 0; i < got; i++) c->ring[cls][(t + i) % RING] = tmp[i];
    if (got) STORE_REL(&c->tail[cls], t + got);
    return got;
}

bool sm_serve_requests(struct client *c)
{
    bool work = false;
    /* Refills: new classes and growth on misses, then top every ring up to its target. */
    bool filled = false;
    for (unsigned cls = 0; cls < sm_g.nclass; cls++) {
        uint32_t m = LOAD_RLX(&c->miss[cls]);
        if (m != c->sv_miss[cls]) {
            c->sv_miss[cls] = m;
            if (!(c->sv_served & (1ull << cls))) {
                c->sv_served |= 1ull << cls;
                c->sv_target[cls] = (sm_g.cls_tmax[cls] + 1) / 2;
            } else if (c->sv_target[cls] < sm_g.cls_tmax[cls]) {
                c->sv_target[cls] = c->sv_target[cls] * 2 > sm_g.cls_tmax[cls] ? sm_g.cls_tmax[cls] : c->sv_target[cls] * 2;
            }
        }
    }
    uint64_t served = c->sv_served;
    bool oom = false;
    while (served) {
        unsigned cls = (unsigned)__builtin_ctzll(served);
        served &= served - 1;
        uint32_t fill = c->tail[cls] - LOAD_ACQ(&c->head_pub[cls]);
        if (fill < c->sv_target[cls] && sm_refill(c, cls, c->sv_target[cls] - fill)) filled = true;
        else if (fill == 0) oom = true; /* nothing to give: the OS refused memory */
    }
    if (oom) {
        STORE_REL(&c->oom_seq, c->oom_seq + 1);
        work = true;
    }
    return filled || work;
}

/* An exited thread: take back what its rings still hold, then recycle the slot. */
void sm_reclaim_client(struct client *c)
{
    sm_drain_frees(c, UINT32_MAX);
    for (unsigned cls = 0; cls < sm_g.nclass; cls++) {
        uint32_t h = LOAD_ACQ(&c->head_pub[cls]);
        for (uint32_t t = c->tail[cls]; h != t; h++) sm_srv_free_small((uintptr_t)c->ring[cls][h % RING]);
        c->tail[cls] = 0;
        c->sv_miss[cls] = 0;
        c->sv_target[cls] = 0;
    }
    for (unsigned cls = 0; cls < sm_g.nclass; cls++) { /* its pages become unowned */
        while (c->sv_partial[cls]) {
            struct page *pg = c->sv_partial[cls];
            sm_list_remove(pg);
            sm_page_set_owner(pg, NULL);
            sm_list_push(&sm_g.partial[cls], pg);
        }
    }
    c->sv_gen++;
    c->sv_served = 0;
    STORE_RLX(&c->sv_doorbell, 0);
    STORE_RLX(&c->free_head, 0);
    sm_g.st.clients_reclaimed++;
    STORE_REL(&c->state, ST_FREE);
}

/* One pass over all clients: refills and requests first (round-robin), then frees. */
bool sm_server_poll(void)
{
    bool work = false;
    uint32_t nc = LOAD_ACQ(&sm_g.nclients);
    if (!nc) return false;
    uint32_t start = sm_g.rr++ % nc;
    for (uint32_t k = 0; k < nc; k++) {
        struct client *c = sm_g.clients[(start + k) % nc];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        uint64_t db = LOAD_ACQ(&c->doorbell);
        if (db != LOAD_RLX(&c->sv_doorbell) || st == ST_EXITING) {
            STORE_RLX(&c->sv_doorbell, db);
            STORE_RLX(&c->sv_last_ns, LOAD_RLX(&sm_g.now_ns));
            if (sm_serve_requests(c)) work = true;
        }
    }
    for (uint32_t k = 0; k < nc; k++) {
        struct client *c = sm_g.clients[(start + k) % nc];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        if (sm_drain_frees(c, 256)) work = true;
        if (st == ST_EXITING) { sm_reclaim_client(c); work = true; }
    }
    return work;
}

bool sm_any_doorbell(void)
{
    uint32_t nc = LOAD_ACQ(&sm_g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = sm_g.clients[i];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        if (st == ST_EXITING || LOAD_ACQ(&c->doorbell) != LOAD_RLX(&c->sv_doorbell) ||
            LOAD_ACQ(&c->free_tail) != LOAD_RLX(&c->free_head))
            return true;
    }
    return false;
}

/* ---- the server thread: when it runs, and when it steps back ------------------------------
 *
 * A software support core is an ordinary thread. It pays for itself only when it gets a
 * CPU promptly and finds work when it looks; otherwise its spinning is CPU the program
 * pays for, and a client that waits for it stalls (issue 18: 4-18x slowdowns when other
 * programs kept the cores busy). So:
 *
 *   - it takes the metadata lock only for passes that have work, with trylock (if a client
 *     holds the lock, that client is doing the work), so it never blocks while awake;
 *   - idle, it spins only on a budget earned by work done (1/SPIN_EARN_DIV of its busy
 *     time, at most SPIN_MAX_NS): its spinning costs at most ~1/8 of its useful CPU;
 *   - every WINDOW_NS awake it compares its CPU time with the wall time: a spinning thread
 *     that got less than 90% of the wall time was waiting for a CPU (the cores are
 *     oversubscribed). It then disengages (clients stop waiting for it and stop waking it;
 *     they serve themselves) and sleeps for a back-off (10 ms doubling to 1 s), after
 *     which it tries again;
 *   - when the application's busy threads already fill every CPU it does not spin at all. */
static bool server_pass(void)
{
    if (pthread_mutex_trylock(&sm_g.srv_lock) != 0) return false; /* a client is serving */
    sm_tls_owner = 1;
    bool any = false;
    for (int k = 0; k < 8 && sm_server_poll(); k++) any = true;
    sm_tls_owner = 0;
    pthread_mutex_unlock(&sm_g.srv_lock);
    return any;
}

static void server_sleep(uint64_t timeout_ns)
{
    /* deferred work first (decay, exited threads) */
    bool pending = true; /* unknown (a client holds the lock): assume deferred work */
    if (pthread_mutex_trylock(&sm_g.srv_lock) == 0) {
        sm_tls_owner = 1;
        uint64_t now = sm_mono_ns();
        STORE_RLX(&sm_g.now_ns, now);
        while (sm_server_poll()) {}
        sm_decay_sweep(now);
        pending = sm_g.dirty_pages || sm_g.lcache_n; /* read under the lock */
        if (sm_g.lcache_n && (!timeout_ns || timeout_ns > LCACHE_DECAY_NS)) timeout_ns = LCACHE_DECAY_NS;
        sm_tls_owner = 0;
        pthread_mutex_unlock(&sm_g.srv_lock);
    }
    if (pending && (!timeout_ns || timeout_ns > DECAY_NS)) timeout_ns = DECAY_NS;
    /* Announce, re-check, block (Dekker with sm_notify; a doorbell that is not followed by
     * a wake may wait for the next wake-up: the client serves itself if it needs it). */
    STORE_SC(&sm_g.srv_sleeping, 1);
    FENCE_SC();
    if (LOAD_ACQ(&sm_g.pause_req) || LOAD_ACQ(&sm_g.quit_req)) { STORE_RLX(&sm_g.srv_sleeping, 0); return; }
    STORE_RLX(&sm_g.srv_sleeps, sm_g.srv_sleeps + 1);
    sm_futex_wait(&sm_g.srv_sleeping, 1, timeout_ns);
    STORE_RLX(&sm_g.srv_sleeping, 0);
    STORE_RLX(&sm_g.srv_wakeups, sm_g.srv_wakeups + 1);
}

/* The process ends when its last thread exits: glibc calls exit(0) when the last thread it
 * started returns or calls pthread_exit (a main() that ends with pthread_exit, a Python
 * thread that forked and finished in the child). The server thread is one of glibc's
 * threads, so it must not outlive the application's: while no registered client is active
 * it looks, with a back-off, whether any other thread still runs (threads that never
 * allocated are not clients, so only /proc/self/task can tell), and when none does it
 * returns, which makes it the last thread and lets glibc exit (the check sits before the
 * server's sleep in sm_server_main; server_leave below). Each exiting client wakes it
 * (sm_client_exit), so the usual case ends within about a millisecond. Before, such a
 * process hung forever with its leader a zombie (python's test_threading, found by running
 * CPython's regression tests under LD_PRELOAD). */
static void server_leave(void)
{
    pthread_mutex_lock(&sm_g.srv_lock);
    STORE_RLX(&sm_g.srv_engaged, 0);
    STORE_REL(&sm_g.mode, MODE_INLINE); /* whatever runs at exit serves itself */
    pthread_mutex_unlock(&sm_g.srv_lock);
}

void *sm_server_main(void *arg)
{
    (void)arg;
    sm_tls_state = 3;
    STORE_REL(&sm_g.srv_tid, (int)syscall(SYS_gettid));
    if (sm_g.pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(sm_g.pin_cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    pthread_mutex_lock(&sm_g.srv_lock);
    STORE_REL(&sm_g.mode, MODE_THREAD);
    pthread_mutex_unlock(&sm_g.srv_lock);
    STORE_RLX(&sm_g.srv_engaged, 1);
    uint64_t now = sm_mono_ns(), last = now, budget = SPIN_START_NS, backoff = BACKOFF_MIN_NS;
    uint64_t win_wall = now, win_cpu = sm_thread_cpu_ns();
    uint32_t beat = 0;
    unsigned idle = 0;
    uint64_t alone_wait = ALONE_MIN_NS; /* back-off of the last-thread check */
    for (;;) {
        if (SM_UNLIKELY(LOAD_ACQ(&sm_g.quit_req))) break; /* sm_server_stop */
        if (SM_UNLIKELY(LOAD_ACQ(&sm_g.pause_req))) { /* fork: park at a safe point */
            STORE_REL(&sm_g.paused, 1);
            while (LOAD_ACQ(&sm_g.pause_req)) sm_futex_wait(&sm_g.pause_req, 1, 0);
            STORE_REL(&sm_g.paused, 0);
            now = last = win_wall = sm_mono_ns();
            win_cpu = sm_thread_cpu_ns();
        }
        if (SM_UNLIKELY(sm_g.fault_stalled)) {
            /* Fault injection (tests): the worst case for a client, a server that looks awake
             * and engaged but never runs (descheduled). Clients must notice and serve
             * themselves. It still parks for fork. */
            sm_futex_wait(&sm_g.pause_req, 0, 1000000ull);
            continue;
        }
        STORE_RLX(&sm_g.srv_beat, ++beat);
        if (sm_any_doorbell() && server_pass()) {
            uint64_t t = sm_mono_ns();
            STORE_RLX(&sm_g.srv_busy_ns, sm_g.srv_busy_ns + (t - last));
            budget += (t - last) / SPIN_EARN_DIV;
            if (budget > SPIN_MAX_NS) budget = SPIN_MAX_NS;
            last = t;
            STORE_RLX(&sm_g.now_ns, t);
            idle = 0;
            continue;
        }
        sm_cpu_relax();
        if ((++idle & 63) != 0) continue;
        now = sm_mono_ns();
        STORE_RLX(&sm_g.now_ns, now);
        budget = now - last >= budget ? 0 : budget - (now - last);
        last = now;
        bool step_back = false;
        if (now - win_wall >= WINDOW_NS) {
            uint64_t cpu = sm_thread_cpu_ns();
            bool oversub = (cpu - win_cpu) * 10 < (now - win_wall) * 9;
            /* the application's threads that rang a doorbell recently: do they fill every CPU? */
            unsigned busy = 0;
            uint32_t nc = LOAD_ACQ(&sm_g.nclients);
            for (uint32_t i = 0; i < nc; i++)
                if (LOAD_RLX(&sm_g.clients[i]->state) == ST_ACTIVE && now - LOAD_RLX(&sm_g.clients[i]->sv_last_ns) < 5000000ull) busy++;
            if (busy + 1 > sm_g.ncpu) budget = 0;
            if (oversub) { step_back = true; STORE_RLX(&sm_g.srv_oversub, sm_g.srv_oversub + 1); }
            else backoff = BACKOFF_MIN_NS; /* a good window: the next step back starts short */
            win_wall = now;
            win_cpu = cpu;
        }
        if (!step_back && budget) continue;
        uint64_t timeout = 0;
        if (step_back) { /* clients serve themselves and do not wake it until the back-off ends */
            STORE_RLX(&sm_g.srv_engaged, 0);
            timeout = backoff;
            backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
        }
        if (sm_active_clients()) {
            alone_wait = ALONE_MIN_NS;
        } else {
            if (sm_os_other_threads() == 0) break; /* the last thread (-1, no /proc: keep running) */
            if (!timeout || timeout > alone_wait) timeout = alone_wait;
            alone_wait = alone_wait * 2 > ALONE_MAX_NS ? ALONE_MAX_NS : alone_wait * 2;
        }
        server_sleep(timeout);
        now = last = win_wall = sm_mono_ns();
        win_cpu = sm_thread_cpu_ns();
        budget = SPIN_START_NS;
        idle = 0;
        STORE_RLX(&sm_g.srv_engaged, 1); /* a probe after a back-off: the next window tells */
    }
    server_leave();
    STORE_REL(&sm_g.srv_left, 1);
    sm_futex_wake(&sm_g.srv_left);
    return NULL; /* the last thread: glibc exits the process with status 0 (or sm_server_stop asked) */
}
