/* SpeedMalloc: the client side of the per-thread queues: doorbells, waiting for the
 * server (or serving itself in inline mode), flushing magazines, synchronous requests.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

void sm_inline_service(void)
{
    pthread_mutex_lock(&sm_g.srv_lock);
    if (LOAD_ACQ(&sm_g.mode) == MODE_INLINE) {
        while (sm_server_poll()) {}
        sm_decay_sweep(sm_mono_ns());
    }
    pthread_mutex_unlock(&sm_g.srv_lock);
}

/* Waits until cond(c, arg) holds: spin, then futex. In inline mode, serves itself. */
void sm_client_wait(struct client *c, bool (*cond)(struct client *, uintptr_t), uintptr_t arg)
{
    int e = errno;
    if (LOAD_RLX(&sm_g.thread_wanted) && LOAD_ACQ(&sm_g.mode) == MODE_INLINE && c != sm_g.fallback) sm_start_server_thread();
    for (unsigned i = 0;; i++) {
        if (cond(c, arg)) { errno = e; return; }
        if (LOAD_ACQ(&sm_g.mode) == MODE_INLINE) { sm_inline_service(); continue; }
        if (i < CLIENT_SPIN) {
            sm_cpu_relax();
            if ((i & 255) == 255 || (i > 64 && LOAD_RLX(&sm_g.oversub))) sched_yield(); /* let the server run */
            continue;
        }
        STORE_SC(&c->wait_word, 1);
        FENCE_SC();
        if (cond(c, arg)) { STORE_RLX(&c->wait_word, 0); errno = e; return; }
        STORE_RLX(&c->c_block, c->c_block + 1);
        sm_futex_wait(&c->wait_word, 1, 20000000ull); /* 20 ms: a safety net, the server wakes us */
        STORE_RLX(&c->wait_word, 0);
        i = CLIENT_SPIN / 2;
    }
}
bool sm_cond_tail_moved(struct client *c, uintptr_t cls)
{
    return LOAD_ACQ(&c->tail[cls]) != c->priv[cls].head || LOAD_ACQ(&c->oom_seq) != c->my_oom_seen;
}
bool sm_cond_resp(struct client *c, uintptr_t seq) { return LOAD_ACQ(&c->resp_seq) == (uint32_t)seq; }
bool sm_cond_free_space(struct client *c, uintptr_t need)
{
    return c->my_free_tail - LOAD_ACQ(&c->free_head) + (uint32_t)need <= FRING;
}

/* Sends magazine entries beyond `keep` to the server through the free ring. */
SM_SLOW void sm_flush_magazine(struct client *c, unsigned cls, unsigned keep)
{
    uint32_t n = c->mag_n[cls] - keep;
    if (c->my_free_tail - c->my_free_head_cache + n > FRING) {
        c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        if (c->my_free_tail - c->my_free_head_cache + n > FRING) {
            sm_ring_doorbell(c);
            sm_client_wait(c, sm_cond_free_space, n);
            c->my_free_head_cache = LOAD_ACQ(&c->free_head);
        }
    }
    for (uint32_t i = 0; i < n; i++) c->fring[(c->my_free_tail + i) % FRING] = c->mag[cls][keep + 1 + i];
    c->my_free_tail += n;
    c->mag_n[cls] = keep;
    STORE_REL(&c->free_tail, c->my_free_tail);
    sm_ring_doorbell(c);
}

void *sm_sync_request(struct client *c, unsigned kind, void *ptr, size_t size, size_t align, void *out, int *err)
{
    c->req_kind = kind;
    c->req_ptr = ptr;
    c->req_size = size;
    c->req_align = align;
    c->req_out = out;
    uint32_t seq = ++c->my_req_seq;
    STORE_REL(&c->req_seq, seq);
    sm_ring_doorbell(c);
    sm_client_wait(c, sm_cond_resp, seq);
    *err = c->resp_err;
    return c->resp_ptr;
}
