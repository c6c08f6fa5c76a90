/* SpeedMalloc: the support core as a thread: serving requests and refills first,
 * round-robin, then draining free rings, reclaiming exited threads, sleeping when idle.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* ---- serving clients ------------------------------------------------------- */
void sm_wake_client(struct client *c)
{
    FENCE_SC();
    if (LOAD_RLX(&c->wait_word)) {
        STORE_RLX(&c->wait_word, 0);
        sm_futex_wake(&c->wait_word);
    }
}

unsigned sm_drain_frees(struct client *c, unsigned budget)
{
    uint32_t t = LOAD_ACQ(&c->free_tail);
    uint32_t h = c->free_head;
    unsigned n = 0;
    while (h != t && n < budget) {
        sm_srv_free_any((uintptr_t)c->fring[h % FRING]);
        h++;
        n++;
    }
    if (n) {
        STORE_REL(&c->free_head, h);
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
        unsigned k = sm_drain_frees(c, FRING);
        if (k) { n += k; sm_wake_client(c); }
    }
    return n;
}

/* Pushes up to `want` blocks of class cls into ring slots [tail, tail + want). */
unsigned sm_refill(struct client *c, unsigned cls, unsigned want)
{
    uint32_t t = c->tail[cls];
    unsigned got = 0;
    bool drained = false;
    while (got < want) {
        /* this thread's own pages first, then an unowned one, which it then owns */
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
            while (bits && got < want) {
                unsigned b = (unsigned)__builtin_ctzll(bits);
                bits &= bits - 1;
                c->ring[cls][(t + got) % RING] = (void *)(pg->start + ((uintptr_t)(w * 64 + b)) * sm_g.cls_size[cls]);
                got++;
                pg->nfree--;
            }
            pg->free_bits[w] = bits;
        }
        if (!pg->nfree) sm_list_remove(pg);
    }
    if (got) {
        sm_g.blocks_out[cls] += got;
        sm_g.st.bytes_out += (uint64_t)got * sm_g.cls_size[cls];
        sm_g.st.refill_blocks += got;
        sm_g.st.refill_rounds++;
        STORE_REL(&c->tail[cls], t + got);
    }
    return got;
}

bool sm_serve_requests(struct client *c)
{
    bool work = false;
    uint32_t rs = LOAD_ACQ(&c->req_seq);
    if (rs != c->sv_req_seq) {
        int err = 0;
        void *r = NULL;
        /* This thread's queued frees first: a large block it just freed can then be
         * reused at once instead of mapping a new one (and unmapping the old one,
         * which costs a TLB-shootdown interrupt to every CPU running the process). */
        if (sm_drain_frees(c, FRING)) work = true;
        switch (c->req_kind) {
        case REQ_LARGE_MALLOC: r = sm_srv_large_malloc(c->req_size, c->req_align, &err); break;
        case REQ_LARGE_REALLOC: r = sm_srv_large_realloc((uintptr_t)c->req_ptr, c->req_size, &err); break;
        case REQ_STATS: sm_drain_all_frees(); sm_fill_stats((nm_speedmalloc_stats *)c->req_out); break;
        default: err = EINVAL;
        }
        sm_g.st.sync_requests++;
        c->sv_req_seq = rs;
        c->resp_ptr = r;
        c->resp_err = err;
        STORE_REL(&c->resp_seq, rs);
        work = true;
    }
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
    if (filled || work) sm_wake_client(c);
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
    c->sv_doorbell = 0;
    c->sv_req_seq = 0;
    c->free_head = 0;
    c->resp_seq = 0;
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
        if (db != c->sv_doorbell || st == ST_EXITING) {
            c->sv_doorbell = db;
            c->sv_last_ns = sm_g.now_ns;
            if (sm_serve_requests(c)) work = true;
        }
    }
    for (uint32_t k = 0; k < nc; k++) {
        struct client *c = sm_g.clients[(start + k) % nc];
        uint32_t st = LOAD_ACQ(&c->state);
        if (st == ST_FREE) continue;
        if (sm_drain_frees(c, 256)) { work = true; sm_wake_client(c); }
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
        if (st == ST_EXITING || LOAD_ACQ(&c->doorbell) != c->sv_doorbell || LOAD_ACQ(&c->free_tail) != c->free_head)
            return true;
    }
    return false;
}

void *sm_server_main(void *arg)
{
    (void)arg;
    sm_tls_state = 3;
    if (sm_g.pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(sm_g.pin_cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    pthread_mutex_lock(&sm_g.srv_lock);
    STORE_REL(&sm_g.mode, MODE_THREAD);
    pthread_mutex_unlock(&sm_g.srv_lock);
    sm_g.last_work_ns = sm_g.now_ns = sm_mono_ns();
    unsigned idle_polls = 0, work_polls = 0;
    for (;;) {
        if (SM_UNLIKELY(LOAD_ACQ(&sm_g.pause_req))) { /* fork: park at a safe point */
            STORE_REL(&sm_g.paused, 1);
            while (LOAD_ACQ(&sm_g.pause_req)) sm_futex_wait(&sm_g.pause_req, 1, 0);
            STORE_REL(&sm_g.paused, 0);
        }
        if (sm_server_poll()) {
            idle_polls = 0;
            sm_g.last_work_ns = 0;
            if ((++work_polls & 63) == 0) sm_g.now_ns = sm_mono_ns();
            continue;
        }
        idle_polls++;
        sm_cpu_relax();
        if ((idle_polls & 63) != 0) continue;
        uint64_t now = sm_mono_ns();
        sm_g.now_ns = now;
        if (!sm_g.last_work_ns) sm_g.last_work_ns = now;
        /* With a spare CPU the server spins like a dedicated support core; when the
         * application's busy threads already fill every CPU, it yields and sleeps
         * sooner, so it does not steal their time (this machine has 2 cores). */
        unsigned busy = 0;
        uint32_t nc = LOAD_ACQ(&sm_g.nclients);
        for (uint32_t i = 0; i < nc; i++)
            if (LOAD_RLX(&sm_g.clients[i]->state) == ST_ACTIVE && now - sm_g.clients[i]->sv_last_ns < 5000000ull) busy++;
        bool over = busy + 1 > sm_g.ncpu;
        if (over != (bool)LOAD_RLX(&sm_g.oversub)) STORE_RLX(&sm_g.oversub, over);
        if (over || (idle_polls & 1023) == 0) sched_yield();
        if (now - sm_g.last_work_ns < (over ? SPIN_SERVER_NS / 10 : SPIN_SERVER_NS)) continue;
        sm_decay_sweep(now);
        /* Sleep: announce, re-check (Dekker with sm_ring_doorbell), then block. */
        STORE_SC(&sm_g.srv_sleeping, 1);
        FENCE_SC();
        if (sm_any_doorbell() || LOAD_ACQ(&sm_g.pause_req)) { STORE_RLX(&sm_g.srv_sleeping, 0); continue; }
        sm_g.st.server_sleeps++;
        sm_futex_wait(&sm_g.srv_sleeping, 1, (sm_g.dirty_pages || sm_g.lcache_n) ? DECAY_NS : 0);
        STORE_RLX(&sm_g.srv_sleeping, 0);
        sm_g.st.server_wakeups++;
        sm_g.last_work_ns = sm_mono_ns();
        idle_polls = 0;
    }
    return NULL;
}

