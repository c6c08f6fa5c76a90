/* Demo step: SpeedMalloc's server thread at work, in-process (static build). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/common.h"
#include "nearmem/demo.h"
#include "nearmem/speedmalloc.h"

#define N 4096
static void *g_pass[2][N]; /* blocks handed from one thread to the other */

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    nm_rng r;
    nm_rng_seed(&r, 77 + id);
    unsigned char *slot[N] = {0};
    size_t len[N] = {0};
    uintptr_t bad = 0;
    for (int it = 0; it < 300000; it++) {
        unsigned i = (unsigned)nm_rng_below(&r, N);
        if (slot[i]) {
            if (slot[i][0] != (unsigned char)i || slot[i][len[i] - 1] != (unsigned char)i) bad++;
            if (it & 1) nm_sm_free(slot[i]);
            else g_pass[id][i] = slot[i]; /* freed later by the other thread */
        }
        len[i] = 1 + (size_t)nm_rng_below(&r, nm_rng_below(&r, 8) ? 256 : 8192);
        slot[i] = nm_sm_malloc(len[i]);
        if (!slot[i]) return (void *)1;
        memset(slot[i], (int)i, len[i]);
        if ((it & 1023) == 0) {
            for (unsigned k = 0; k < N; k++) {
                void *p = __atomic_exchange_n(&g_pass[!id][k], NULL, __ATOMIC_ACQ_REL);
                if (p) nm_sm_free(p);
            }
        }
    }
    for (unsigned i = 0; i < N; i++) nm_sm_free(slot[i]);
    return (void *)bad;
}

int nm_demo_speedmalloc(nm_demo *d)
{
    pthread_t t[2];
    uint64_t t0 = nm_now_ns();
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    uintptr_t bad = 0;
    for (int i = 0; i < 2; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        bad += (uintptr_t)rv;
    }
    for (int a = 0; a < 2; a++)
        for (unsigned k = 0; k < N; k++) nm_sm_free(g_pass[a][k]);
    double ms = (double)(nm_now_ns() - t0) / 1e6;
    nm_speedmalloc_stats s;
    int e = nm_speedmalloc_get_stats(&s);
    if (e) return nm_fail(NM_EIO, "statistics request failed (%d)", e);
    uint64_t mallocs = s.fast_mallocs + s.ring_mallocs;
    nm_demo_say(d, "2 threads, 600k malloc/free with cross-thread frees in %.0f ms, every block's contents intact: %s",
                ms, bad ? "NO" : "yes");
    nm_demo_say(d, "support-core server thread: %s; the metadata (%llu pages in %llu segments) has one owner at a time",
                s.server_running ? "running" : "inline fallback", (unsigned long long)s.pages_in_use,
                (unsigned long long)s.segments);
    nm_demo_say(d, "mallocs from the thread's own magazine %.1f%%, from the ready ring %.1f%%; ring empty %llu times, "
                   "a thread ran the server's code itself %llu times (it never waits for a server that is not running)",
                100.0 * (double)s.fast_mallocs / (double)(mallocs ? mallocs : 1),
                100.0 * (double)s.ring_mallocs / (double)(mallocs ? mallocs : 1), (unsigned long long)s.client_misses,
                (unsigned long long)s.inline_serves);
    nm_demo_say(d, "metadata owner: %llu blocks refilled into ready rings, %llu frees taken back in batches, %llu refills",
                (unsigned long long)s.refill_blocks, (unsigned long long)s.frees_received,
                (unsigned long long)s.refill_rounds);
    uint64_t c0 = s.server_cpu_ns, w0 = nm_now_ns();
    usleep(300000);
    nm_speedmalloc_get_stats(&s);
    double idle_pct = 100.0 * (double)(s.server_cpu_ns - c0) / (double)(nm_now_ns() - w0);
    nm_demo_say(d, "idle for 300 ms: the server used %.2f%% of a CPU (it sleeps on a futex, %llu sleeps so far)", idle_pct,
                (unsigned long long)s.server_sleeps);
    if (bad) return nm_fail(NM_ECORRUPT, "%llu blocks lost their contents", (unsigned long long)bad);
    return 0;
}
