/* PMAlloc NUMA under threads: producer-consumer across 2 and 4 virtual nodes,
 * so that (nearly) every free is a two-phase remote free, with the epoch
 * synchronisation threads running. A reference model checks every object's
 * contents before it is freed (an overlap would corrupt them), the heap is
 * walked for overlaps at the end, returns to empty after synchronisation, and
 * its free space can be allocated again. */
#include "nm_test.h"

#include <pthread.h>
#include <sched.h>
#include "nearmem/common/prng.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define T 4         /* threads: T/2 producers, T/2 consumers */
#define RANGE 200   /* root slots per producer */
#define OPS 20000   /* allocations per producer */

typedef struct slot {
    int state; /* 0 empty, 1 full (atomic) */
    size_t size;
    uint64_t pat;
} slot;

typedef struct shared {
    pmalloc_heap *h;
    unsigned vnodes;
    slot s[T / 2][RANGE];
    int producers_left; /* atomic */
    int errors;         /* atomic */
    uint64_t seed;
} shared;

typedef struct targ { shared *sh; unsigned id; } targ;

static void fill(uint8_t *p, size_t n, uint64_t pat)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = pat ^ (i * 0x9e3779b97f4a7c15ull);
        memcpy(p + i, &v, NM_MIN((size_t)8, n - i));
    }
}

static bool same(const uint8_t *p, size_t n, uint64_t pat)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = pat ^ (i * 0x9e3779b97f4a7c15ull);
        if (memcmp(p + i, &v, NM_MIN((size_t)8, n - i))) return false;
    }
    return true;
}

static void err(shared *sh) { __atomic_add_fetch(&sh->errors, 1, __ATOMIC_RELAXED); }

static unsigned node_of_thread(const shared *sh, unsigned id)
{
    unsigned p = id % (T / 2);
    unsigned pn = p % sh->vnodes;
    return id < T / 2 ? pn : (pn + NM_MAX(1u, sh->vnodes / 2)) % sh->vnodes; /* consumers on another node */
}

/* Local traffic too: a thread allocates and frees a few objects of its own. */
static void local_churn(shared *sh, nm_rng *r, unsigned root)
{
    pmalloc_ptr *p = pmalloc_root_slot(sh->h, root);
    size_t sz = nm_rng_range(r, 8, 3000);
    nm_err e = pmalloc_malloc_to(sh->h, sz, p);
    if (e == NM_ENOMEM) return;
    if (e) { err(sh); return; }
    memset(pmalloc_direct(sh->h, *p), 0x5a, sz);
    if (pmalloc_free_from(sh->h, p)) err(sh);
}

static void *producer(void *a)
{
    targ *t = a;
    shared *sh = t->sh;
    if (pmalloc_numa_set_node(sh->h, (int)node_of_thread(sh, t->id))) err(sh);
    nm_rng r;
    nm_rng_seed_stream(&r, sh->seed, t->id);
    slot *ss = sh->s[t->id];
    unsigned cur = 0;
    for (unsigned op = 0; op < OPS;) {
        slot *s = &ss[cur];
        unsigned root = t->id * RANGE + cur;
        cur = (cur + 1) % RANGE;
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) { sched_yield(); continue; }
        size_t sz = nm_rng_below(&r, 25) == 0 ? nm_rng_range(&r, 14337, 60000) : nm_rng_range(&r, 1, 2000);
        pmalloc_ptr *p = pmalloc_root_slot(sh->h, root);
        nm_err e = pmalloc_malloc_to(sh->h, sz, p);
        if (e == NM_ENOMEM) { sched_yield(); continue; } /* the consumers' frees are not synced yet */
        if (e) { err(sh); break; }
        s->size = sz;
        s->pat = nm_rng_u64(&r);
        fill(pmalloc_direct(sh->h, *p), sz, s->pat);
        __atomic_store_n(&s->state, 1, __ATOMIC_RELEASE);
        op++;
        if (op % 16 == 0) local_churn(sh, &r, 1000 + t->id);
    }
    __atomic_sub_fetch(&sh->producers_left, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *consumer(void *a)
{
    targ *t = a;
    shared *sh = t->sh;
    if (pmalloc_numa_set_node(sh->h, (int)node_of_thread(sh, t->id))) err(sh);
    nm_rng r;
    nm_rng_seed_stream(&r, sh->seed, t->id);
    unsigned p = t->id % (T / 2);
    slot *ss = sh->s[p];
    for (unsigned cur = 0, idle = 0;; cur = (cur + 1) % RANGE) {
        slot *s = &ss[cur];
        if (!__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) {
            if (++idle > 4 * RANGE) {
                if (!__atomic_load_n(&sh->producers_left, __ATOMIC_ACQUIRE)) break;
                sched_yield();
                idle = 0;
            }
            continue;
        }
        idle = 0;
        pmalloc_ptr *slotp = pmalloc_root_slot(sh->h, p * RANGE + cur);
        if (!same(pmalloc_direct(sh->h, *slotp), s->size, s->pat)) err(sh);
        if (pmalloc_free_from(sh->h, slotp)) err(sh);
        __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
        if (nm_rng_below(&r, 32) == 0) local_churn(sh, &r, 1000 + t->id);
    }
    return NULL;
}

typedef struct iv { uint64_t lo, hi; } iv;
typedef struct walk_ctx { iv *v; size_t n, cap; } walk_ctx;
static int collect(void *arg, pmalloc_ptr p, size_t usable)
{
    walk_ctx *w = arg;
    if (w->n < w->cap) w->v[w->n++] = (iv){p, p + usable};
    return 0;
}

static void run(pmalloc_model m, unsigned vnodes)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "numathr");
    pmalloc_options o = pmt_opts(32u << 20, m, PMALLOC_PERSIST_CPU);
    o.numa_vnodes = vnodes;
    o.numa_sync_ms = 2;
    o.numa_log_entries = 256; /* segment switches (epoch synchronisation) during the run */
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.vnodes = vnodes;
    sh.producers_left = T / 2;
    sh.seed = nm_test_seed(77) * 10 + vnodes + m;
    assert_int_equal(pmalloc_open(dir, &o, &sh.h), NM_OK);
    pthread_t th[T];
    targ a[T];
    for (unsigned i = 0; i < T; i++) {
        a[i] = (targ){&sh, i};
        pthread_create(&th[i], NULL, i < T / 2 ? producer : consumer, &a[i]);
    }
    for (unsigned i = 0; i < T; i++) pthread_join(th[i], NULL);
    assert_int_equal(sh.errors, 0);
    pmalloc_numa_stats ns;
    pmalloc_numa_stats_get(sh.h, &ns);
    print_message("%s, %u nodes: %llu remote frees; synced %llu on demand, %llu by epoch threads (%llu passes), %llu other; %llu log switches\n",
                  m == PMALLOC_LOG ? "LOG" : "GC", vnodes, (unsigned long long)ns.remote_frees, (unsigned long long)ns.synced_on_demand,
                  (unsigned long long)ns.synced_epoch, (unsigned long long)ns.sync_passes, (unsigned long long)ns.synced_other,
                  (unsigned long long)ns.log_switches);
    /* most frees were remote (large ones and the local churn are not) */
    assert_true(ns.remote_frees >= (uint64_t)(T / 2) * OPS * 8 / 10);
    assert_true(ns.synced_epoch > 0);
    assert_int_equal(pmalloc_check(sh.h), NM_OK);
    /* no two live objects overlap */
    walk_ctx w = {calloc(4096, sizeof(iv)), 0, 4096};
    assert_int_equal(pmalloc_walk(sh.h, collect, &w), NM_OK);
    for (size_t i = 1; i < w.n; i++) assert_true(w.v[i - 1].hi <= w.v[i].lo);
    free(w.v);
    /* free what is left, from node 0 (remote for node 1's blocks), sync: empty */
    assert_int_equal(pmalloc_numa_set_node(sh.h, 0), NM_OK);
    for (unsigned p = 0; p < T / 2; p++)
        for (unsigned c = 0; c < RANGE; c++)
            if (sh.s[p][c].state) {
                pmalloc_ptr *sp = pmalloc_root_slot(sh.h, p * RANGE + c);
                assert_true(same(pmalloc_direct(sh.h, *sp), sh.s[p][c].size, sh.s[p][c].pat));
                assert_int_equal(pmalloc_free_from(sh.h, sp), NM_OK);
            }
    assert_int_equal(pmalloc_numa_sync(sh.h), NM_OK);
    pmalloc_numa_stats_get(sh.h, &ns);
    assert_int_equal(ns.pending, 0);
    pmalloc_stats st;
    pmalloc_stats_get(sh.h, &st);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(st.extents, 0);
    assert_int_equal(st.free_bytes + st.slabs * PMALLOC_SLAB_SIZE, st.data_bytes);
    assert_int_equal(pmalloc_check(sh.h), NM_OK);
    /* the freed space is reusable: 2000-byte blocks until the heap is full */
    uint64_t free_before = st.free_bytes, n = 0;
    for (unsigned i = 0; i < PMALLOC_NROOTS; i++) {
        pmalloc_ptr *p = pmalloc_root_slot(sh.h, i);
        for (;;) {
            nm_err e = pmalloc_malloc_to(sh.h, 2000, p);
            if (e == NM_ENOMEM) { print_message("full: %s\n", nm_last_errmsg()); goto full; }
            assert_int_equal(e, NM_OK);
            n++;
            if (i + 1 < PMALLOC_NROOTS) break;
            /* the last root: chain the rest through each object's first word */
            p = pmalloc_direct(sh.h, *p);
            *p = 0;
        }
    }
full:
    print_message("refilled %llu x 2000 B into %llu free bytes\n", (unsigned long long)n, (unsigned long long)free_before);
    assert_true(n * 2048 >= free_before * 9 / 10);
    assert_int_equal(pmalloc_check(sh.h), NM_OK);
    assert_int_equal(pmalloc_close(sh.h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &sh.h), NM_OK);
    assert_int_equal(pmalloc_check(sh.h), NM_OK);
    pmalloc_stats_get(sh.h, &st);
    assert_int_equal(st.objects_live, n);
    assert_int_equal(pmalloc_close(sh.h), NM_OK);
    pmt_rmdir(dir);
}

/* Mixed: 4 threads on shared slots (random allocate / check+free), each thread
 * now and then moves to another CPU (the migration check rebinds its cache),
 * pins itself to a random node, or unpins; 3 virtual nodes, epoch threads on. */
#define MSLOTS 256
typedef struct mixed {
    pmalloc_heap *h;
    pthread_mutex_t lock[MSLOTS];
    size_t size[MSLOTS];
    uint64_t pat[MSLOTS];
    int errors;
    uint64_t seed;
    int ncpu, cpus[8];
} mixed;
typedef struct marg { mixed *m; unsigned id; } marg;

static void *mixed_worker(void *p)
{
    marg *a = p;
    mixed *m = a->m;
    nm_rng r;
    nm_rng_seed_stream(&r, m->seed, a->id);
    for (int it = 0; it < 8000; it++) {
        unsigned what = (unsigned)nm_rng_below(&r, 1000);
        if (what < 3 && m->ncpu > 1) { /* move to another CPU: the periodic check notices */
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(m->cpus[nm_rng_below(&r, (uint64_t)m->ncpu)], &one);
            sched_setaffinity(0, sizeof one, &one);
            continue;
        }
        if (what < 6) { /* pin to a node (2/3) or follow the CPU again (1/3) */
            int node = (int)nm_rng_below(&r, 3) - (nm_rng_below(&r, 3) == 0 ? 3 : 0);
            if (pmalloc_numa_set_node(m->h, node < 0 ? -1 : node)) __atomic_add_fetch(&m->errors, 1, __ATOMIC_RELAXED);
            continue;
        }
        unsigned i = (unsigned)nm_rng_below(&r, MSLOTS);
        pthread_mutex_lock(&m->lock[i]);
        pmalloc_ptr *slot = pmalloc_root_slot(m->h, i);
        if (m->size[i]) {
            if (!same(pmalloc_direct(m->h, *slot), m->size[i], m->pat[i])) __atomic_add_fetch(&m->errors, 1, __ATOMIC_RELAXED);
            if (pmalloc_free_from(m->h, slot) != NM_OK) __atomic_add_fetch(&m->errors, 1, __ATOMIC_RELAXED);
            m->size[i] = 0;
        } else {
            size_t sz = nm_rng_below(&r, 30) == 0 ? nm_rng_range(&r, 14337, 50000) : nm_rng_range(&r, 1, 3000);
            nm_err e = pmalloc_malloc_to(m->h, sz, slot);
            if (e == NM_OK) {
                m->size[i] = sz;
                m->pat[i] = nm_rng_u64(&r);
                fill(pmalloc_direct(m->h, *slot), sz, m->pat[i]);
            } else if (e != NM_ENOMEM) {
                __atomic_add_fetch(&m->errors, 1, __ATOMIC_RELAXED);
            }
        }
        pthread_mutex_unlock(&m->lock[i]);
    }
    return NULL;
}

static void test_mixed_migrations(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "numamix");
    static mixed m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < MSLOTS; i++) pthread_mutex_init(&m.lock[i], NULL);
    m.seed = nm_test_seed(78);
    cpu_set_t orig;
    sched_getaffinity(0, sizeof orig, &orig);
    for (int c = 0; c < CPU_SETSIZE && m.ncpu < 8; c++)
        if (CPU_ISSET(c, &orig)) m.cpus[m.ncpu++] = c;
    pmalloc_options o = pmt_opts(32u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.numa_vnodes = 3;
    o.numa_sync_ms = 1;
    o.numa_log_entries = 64;
    assert_int_equal(pmalloc_open(dir, &o, &m.h), NM_OK);
    pthread_t th[4];
    marg a[4];
    for (unsigned i = 0; i < 4; i++) {
        a[i] = (marg){&m, i};
        pthread_create(&th[i], NULL, mixed_worker, &a[i]);
    }
    for (unsigned i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(m.errors, 0);
    pmalloc_numa_stats ns;
    pmalloc_numa_stats_get(m.h, &ns);
    print_message("mixed, 3 nodes: %llu remote frees, %llu migrations, %llu blocks from other nodes\n", (unsigned long long)ns.remote_frees,
                  (unsigned long long)ns.migrations, (unsigned long long)ns.remote_allocs);
    assert_true(ns.remote_frees > 1000);
    if (m.ncpu > 1) assert_true(ns.migrations > 0);
    assert_int_equal(pmalloc_check(m.h), NM_OK);
    assert_int_equal(pmalloc_close(m.h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &m.h), NM_OK);
    assert_int_equal(pmalloc_check(m.h), NM_OK);
    for (int i = 0; i < MSLOTS; i++)
        if (m.size[i]) {
            pmalloc_ptr *slot = pmalloc_root_slot(m.h, (unsigned)i);
            assert_true(same(pmalloc_direct(m.h, *slot), m.size[i], m.pat[i]));
            assert_int_equal(pmalloc_free_from(m.h, slot), NM_OK);
        }
    assert_int_equal(pmalloc_close(m.h), NM_OK);
    pmt_rmdir(dir);
}

/* Two threads on different nodes free the same object through two roots at
 * once: one takes the direct path (owner node), the other the two-phase one.
 * Exactly one succeeds, the other gets NM_EDOUBLEFREE, for blocks and extents
 * (the per-block claim of NUMA heaps; without it both could succeed). */
typedef struct ndf_arg {
    pmalloc_heap *h;
    unsigned root, node, rounds;
    pthread_barrier_t *bar;
    nm_err *err; /* [rounds] */
} ndf_arg;

static void *ndf_worker(void *p)
{
    ndf_arg *a = p;
    if (pmalloc_numa_set_node(a->h, (int)a->node) != NM_OK) return NULL;
    for (unsigned r = 0; r < a->rounds; r++) {
        pthread_barrier_wait(a->bar); /* the object is ready */
        a->err[r] = pmalloc_free_from(a->h, pmalloc_root_slot(a->h, a->root));
        pthread_barrier_wait(a->bar); /* both done */
    }
    return NULL;
}

static void test_concurrent_double_free_nodes(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "numadf");
    pmalloc_options o = pmt_opts(16u << 20, PMALLOC_LOG, PMALLOC_PERSIST_MSYNC); /* slow steps: the frees overlap */
    o.numa_vnodes = 2;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK); /* objects of node 0 */
    enum { ROUNDS = 300 };
    static nm_err ea[ROUNDS], eb[ROUNDS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    ndf_arg a = {h, 0, 0, ROUNDS, &bar, ea}, b = {h, 1, 1, ROUNDS, &bar, eb};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, ndf_worker, &a);
    pthread_create(&tb, NULL, ndf_worker, &b);
    unsigned remote_ok = 0;
    for (unsigned r = 0; r < ROUNDS; r++) {
        size_t size = r % 3 == 2 ? 40000 : 100; /* blocks and extents */
        assert_int_equal(pmalloc_malloc_to(h, size, pmalloc_root_slot(h, 0)), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 1, pmalloc_get_root(h, 0)), NM_OK);
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
        assert_true((ea[r] == NM_OK && eb[r] == NM_EDOUBLEFREE) || (ea[r] == NM_EDOUBLEFREE && eb[r] == NM_OK));
        remote_ok += eb[r] == NM_OK;
        assert_int_equal(pmalloc_set_root(h, 0, 0), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 1, 0), NM_OK);
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&bar);
    print_message("double frees across nodes: the remote one won %u of %u\n", remote_ok, (unsigned)ROUNDS);
    assert_int_equal(pmalloc_check(h), NM_OK);
    pmalloc_stats s;
    assert_int_equal(pmalloc_stats_get(h, &s), NM_OK);
    assert_int_equal(s.objects_live, 0);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_prodcon_log_2(void **s) { (void)s; run(PMALLOC_LOG, 2); }
static void test_prodcon_log_4(void **s) { (void)s; run(PMALLOC_LOG, 4); }
static void test_prodcon_gc_2(void **s) { (void)s; run(PMALLOC_GC, 2); }
static void test_prodcon_gc_4(void **s) { (void)s; run(PMALLOC_GC, 4); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prodcon_log_2),
        cmocka_unit_test(test_prodcon_log_4),
        cmocka_unit_test(test_prodcon_gc_2),
        cmocka_unit_test(test_prodcon_gc_4),
        cmocka_unit_test(test_mixed_migrations),
        cmocka_unit_test(test_concurrent_double_free_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
