/* Host threads of a cache, created once (creating threads for every copy cost tens of
 * microseconds per copy, a visible share of a small push). The caller takes part as
 * thread 0; the others wait on a condition variable between runs. */
#include <stdlib.h>

#include "nearmem/common/timer.h"
#include "internal.h"

static void atomic_max_u64(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

static void nothing(void *arg, unsigned tid, unsigned nt)
{
    (void)arg;
    (void)tid;
    (void)nt;
}

typedef struct worker_arg {
    pool *p;
    unsigned tid;
} worker_arg;

static void *worker(void *a)
{
    worker_arg *wa = a;
    pool *p = wa->p;
    unsigned tid = wa->tid;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->epoch == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->epoch;
        pool_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        uint64_t w0 = nm_now_ns(), c0 = nm_thread_cpu_ns();
        fn(arg, tid, p->n + 1);
        uint64_t mine = nm_thread_cpu_ns() - c0;
        atomic_max_u64(&p->last_start, w0);
        atomic_max_u64(&p->last_end, nm_now_ns());
        atomic_fetch_add_explicit(&p->cpu_ns, mine, memory_order_relaxed);
        atomic_max_u64(&p->max_ns, mine);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pool_init(pool *p, unsigned threads)
{
    p->n = 0;
    p->th = NULL;
    p->epoch = 0;
    p->pending = 0;
    p->stop = false;
    atomic_init(&p->cpu_ns, 0);
    atomic_init(&p->max_ns, 0);
    atomic_init(&p->last_start, 0);
    atomic_init(&p->last_end, 0);
    p->extra_cpu_ns = p->extra_crit_ns = 0;
    if (pthread_mutex_init(&p->mu, NULL)) return -1;
    if (pthread_cond_init(&p->go, NULL) || pthread_cond_init(&p->done, NULL)) return -1;
    if (threads <= 1) return 0;
    p->th = calloc(threads - 1, sizeof *p->th);
    if (!p->th) return -1;
    /* A thread that cannot be started leaves the pool smaller; the work still gets done. */
    for (unsigned i = 0; i < threads - 1; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        *wa = (worker_arg){p, p->n + 1};
        if (pthread_create(&p->th[p->n], NULL, worker, wa)) {
            free(wa);
            break;
        }
        p->n++;
    }
    /* What a run costs the caller beyond CPU time, at best (a dedicated machine): wall time
     * from waking the workers to the last one starting, and from the last one ending to
     * the caller running again. The least of 16 empty runs. */
    p->sync_ns = 0;
    if (p->n) {
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < 16; i++) {
            atomic_store(&p->last_start, 0);
            atomic_store(&p->last_end, 0);
            uint64_t t0 = nm_now_ns();
            pool_run(p, nothing, NULL);
            uint64_t t1 = nm_now_ns(), s = atomic_load(&p->last_start), e = atomic_load(&p->last_end);
            if (s >= t0 && t1 >= e && e >= s) best = NM_MIN(best, (s - t0) + (t1 - e));
        }
        p->extra_cpu_ns = p->extra_crit_ns = 0;
        p->sync_ns = best == UINT64_MAX ? 0 : best;
    }
    return 0;
}

void pool_destroy(pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++) pthread_join(p->th[i], NULL);
    free(p->th);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
}

uint64_t pool_run_work(pool *p, pool_fn fn, void *arg, uint64_t work_bytes)
{
    /* Waking a thread costs tens of microseconds here; below about a megabyte per thread
     * the caller alone is faster. */
    if (work_bytes < ((uint64_t)1 << 20) * 2) {
        fn(arg, 0, 1); /* the caller's own CPU clock covers it */
        return 0;
    }
    return pool_run(p, fn, arg);
}

uint64_t pool_run(pool *p, pool_fn fn, void *arg)
{
    atomic_store_explicit(&p->cpu_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->max_ns, 0, memory_order_relaxed);
    if (p->n) {
        pthread_mutex_lock(&p->mu);
        p->fn = fn;
        p->arg = arg;
        p->pending = p->n;
        p->epoch++;
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
    uint64_t c0 = nm_thread_cpu_ns();
    fn(arg, 0, p->n + 1);
    uint64_t mine = nm_thread_cpu_ns() - c0;
    if (p->n) {
        pthread_mutex_lock(&p->mu);
        while (p->pending) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    /* The caller's own share shows in its thread CPU clock; the others' CPU and the part of
     * the longest thread beyond the caller's are added to the pool's clocks (hclk_now). */
    uint64_t others = atomic_load_explicit(&p->cpu_ns, memory_order_relaxed);
    uint64_t mx = atomic_load_explicit(&p->max_ns, memory_order_relaxed);
    p->extra_cpu_ns += others;
    /* the caller waits for the longest worker, woken and waking it back as fast as on a
     * dedicated machine */
    if (p->n && mx + p->sync_ns > mine) p->extra_crit_ns += mx + p->sync_ns - mine;
    return mine + others;
}
