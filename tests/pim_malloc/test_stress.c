/* Randomized multi-tasklet stress of every PIM-malloc variant on several host
 * DPUs against a reference model: blocks never overlap, are 8-byte aligned and
 * inside the heap, keep their contents, freed memory is reused, and the heap
 * is empty again at the end. Tasklets are host threads (run under TSan). */
#include <pthread.h>
#include <string.h>

#include "nearmem/common/prng.h"
#include "nm_test.h"
#include "pimm_test_util.h"

#define DPUS 3
#define TASKLETS 6
#define SLOTS 96
#define PHASES 6
#define OPS 700

typedef struct live {
    uint32_t addr, size;
    uint8_t tag;
} live;

typedef struct ctx {
    tdpu *d;
    unsigned dpu, tasklet;
    nm_rng rng;
    live slot[SLOTS];
    pthread_barrier_t *bar;
    unsigned fails; /* reference-model violations seen by this tasklet */
    uint64_t reused;
} ctx;

static live *all_live[DPUS];
/* Cross-tasklet frees: tasklet t publishes a block in handoff[d][t], tasklet
 * t+1 takes it and frees it (the allocator queues it to t). addr | size << 32. */
static uint64_t handoff[DPUS][TASKLETS];
static unsigned all_n[DPUS];

static uint32_t pick_size(nm_rng *r)
{
    uint64_t k = nm_rng_below(r, 100);
    if (k < 70) return (uint32_t)nm_rng_range(r, 1, 256);
    if (k < 92) return (uint32_t)nm_rng_range(r, 257, 2048);
    return (uint32_t)nm_rng_range(r, 2049, 24000);
}

/* Contents: every byte of small blocks, 64 bytes at both ends of large ones. */
static void fill(uint8_t *m, const live *l)
{
    if (l->size <= 2048) {
        memset(m + l->addr, l->tag, l->size);
    } else {
        memset(m + l->addr, l->tag, 64);
        memset(m + l->addr + l->size - 64, l->tag, 64);
    }
}

static int intact(const uint8_t *m, const live *l)
{
    uint32_t n = l->size <= 2048 ? l->size : 64;
    for (uint32_t i = 0; i < n; i++)
        if (m[l->addr + i] != l->tag || m[l->addr + l->size - 1 - i] != l->tag) return 0;
    return 1;
}

static int cmp_live(const void *a, const void *b)
{
    const live *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void take_handoff(ctx *c, uint8_t *m)
{
    unsigned from = (c->tasklet + 1) % TASKLETS;
    uint64_t v = __atomic_exchange_n(&handoff[c->dpu][from], 0, __ATOMIC_ACQ_REL);
    if (!v) return;
    live l = {(uint32_t)v, (uint32_t)(v >> 32), (uint8_t)(0x80 | from)};
    if (!intact(m, &l)) c->fails++;
    if (nm_pimm_free(c->d->h, l.addr) != NM_OK) c->fails++;
}

static void *worker(void *arg)
{
    ctx *c = arg;
    tdpu *d = c->d;
    uint8_t *m = nm_pimm_host_mram(d->host);
    nm_pimm_host_set_tasklet(c->tasklet);
    for (int ph = 0; ph < PHASES; ph++) {
        for (int op = 0; op < OPS; op++) {
            if (op % 8 == 0) take_handoff(c, m);
            if (op % 8 == 4 && !__atomic_load_n(&handoff[c->dpu][c->tasklet], __ATOMIC_ACQUIRE)) {
                live l = {0, (uint32_t)nm_rng_range(&c->rng, 1, 2048), (uint8_t)(0x80 | c->tasklet)};
                l.addr = nm_pimm_malloc(d->h, l.size);
                if (l.addr) {
                    fill(m, &l);
                    __atomic_store_n(&handoff[c->dpu][c->tasklet], l.addr | (uint64_t)l.size << 32, __ATOMIC_RELEASE);
                }
            }
            live *l = &c->slot[nm_rng_below(&c->rng, SLOTS)];
            if (l->addr) {
                if (!intact(m, l)) c->fails++;
                if (nm_pimm_free(d->h, l->addr) != NM_OK) c->fails++;
                l->addr = 0;
            } else {
                uint32_t sz = pick_size(&c->rng);
                uint32_t a = nm_pimm_malloc(d->h, sz);
                if (!a) continue; /* out of memory is legal; the model checks the rest */
                if (a % 8 || a < d->heap_base || a + sz > d->heap_base + d->heap_size) c->fails++;
                l->addr = a;
                l->size = sz;
                l->tag = (uint8_t)nm_rng_range(&c->rng, 1, 255);
                fill(m, l);
            }
        }
        /* the reference check: all live blocks of this DPU, sorted, disjoint */
        pthread_barrier_wait(c->bar);
        if (c->tasklet == 0) {
            unsigned n = 0;
            for (int t = 0; t < TASKLETS; t++) {
                ctx *o = c - c->tasklet + t;
                for (int i = 0; i < SLOTS; i++)
                    if (o->slot[i].addr) all_live[c->dpu][n++] = o->slot[i];
                uint64_t v = __atomic_load_n(&handoff[c->dpu][t], __ATOMIC_ACQUIRE);
                if (v) all_live[c->dpu][n++] = (live){(uint32_t)v, (uint32_t)(v >> 32), 0};
            }
            qsort(all_live[c->dpu], n, sizeof(live), cmp_live);
            for (unsigned i = 1; i < n; i++)
                if (all_live[c->dpu][i - 1].addr + all_live[c->dpu][i - 1].size > all_live[c->dpu][i].addr) c->fails++;
            all_n[c->dpu] = n;
            if (nm_pimm_check(d->h, NULL) != NM_OK) c->fails++;
        }
        pthread_barrier_wait(c->bar);
    }
    for (int i = 0; i < SLOTS; i++) {
        live *l = &c->slot[i];
        if (!l->addr) continue;
        if (!intact(m, l)) c->fails++;
        if (nm_pimm_free(d->h, l->addr) != NM_OK) c->fails++;
        l->addr = 0;
    }
    pthread_barrier_wait(c->bar); /* no more handoffs are published */
    take_handoff(c, m);
    pthread_barrier_wait(c->bar); /* no more frees by other tasklets */
    nm_pimm_release_cache(d->h);
    return NULL;
}

static void run_variant(nm_pimm_variant v, uint64_t seed)
{
    tdpu d[DPUS];
    ctx cx[DPUS][TASKLETS];
    pthread_t th[DPUS][TASKLETS];
    pthread_barrier_t bar[DPUS];
    memset(cx, 0, sizeof cx);
    for (int k = 0; k < DPUS; k++) {
        /* small heaps (512 KiB, 1 MiB) so that the workload also meets out-of-memory */
        nm_pimm_config cfg;
        nm_pimm_config_default(&cfg, v, 4096);
        cfg.heap_size = k == 0 ? 512u << 10 : 1u << 20;
        cfg.tasklets = TASKLETS;
        assert_int_equal(tdpu_open_cfg(&d[k], &cfg), 0);
        pthread_barrier_init(&bar[k], NULL, TASKLETS);
        all_live[k] = calloc(TASKLETS * (SLOTS + 1), sizeof(live));
        memset(handoff[k], 0, sizeof handoff[k]);
        for (int t = 0; t < TASKLETS; t++) {
            cx[k][t].d = &d[k];
            cx[k][t].dpu = (unsigned)k;
            cx[k][t].tasklet = (unsigned)t;
            cx[k][t].bar = &bar[k];
            nm_rng_seed_stream(&cx[k][t].rng, seed, (uint64_t)(k * 100 + t));
        }
    }
    for (int k = 0; k < DPUS; k++)
        for (int t = 0; t < TASKLETS; t++) pthread_create(&th[k][t], NULL, worker, &cx[k][t]);
    for (int k = 0; k < DPUS; k++)
        for (int t = 0; t < TASKLETS; t++) pthread_join(th[k][t], NULL);
    for (int k = 0; k < DPUS; k++) {
        unsigned fails = 0;
        for (int t = 0; t < TASKLETS; t++) fails += cx[k][t].fails;
        assert_int_equal(fails, 0);
        nm_pimm_stats s;
        nm_pimm_get_stats(d[k].h, &s);
        assert_true(s.mallocs > 1000);
        assert_int_equal(s.bad_free + s.double_free + s.misaligned_free, 0);
        /* cross-tasklet frees happened (how many depends on thread scheduling) */
        if (v != NM_PIMM_STRAWMAN) assert_true(s.remote_free > 0);
        /* everything went back: the heap is empty and the tree is whole */
        assert_int_equal(s.reserved, 0);
        uint64_t fr = 0;
        assert_int_equal(nm_pimm_check(d[k].h, &fr), NM_OK);
        assert_int_equal(fr, d[k].heap_size);
        assert_int_equal(tdpu_violations(&d[k]), 0);
        pthread_barrier_destroy(&bar[k]);
        free(all_live[k]);
        tdpu_close(&d[k]);
    }
}

static void test_stress_all_variants(void **st)
{
    (void)st;
    uint64_t seed = nm_test_seed(2024);
    for (int v = 0; v < NM_PIMM_VARIANT_COUNT; v++) run_variant((nm_pimm_variant)v, seed + (uint64_t)v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress_all_variants)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
