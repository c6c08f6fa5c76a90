/* PMAlloc NUMA (paper Sec. 6) with virtual nodes on this one-node machine:
 * topology options, node-local placement and the remote fallback, the
 * two-phase remote free (recording, on-demand and epoch synchronisation,
 * recovery replay), the migration check, damaged deallocation logs. */
#include "nm_test.h"

#include <sched.h>
#include <xxhash.h>
#include "../../src/pmalloc/pm_internal.h"
#include "nearmem/common/prng.h"
#include "pm_testutil.h"

static pmalloc_options numa_opts(size_t size, pmalloc_model m, unsigned vnodes)
{
    pmalloc_options o = pmt_opts(size, m, PMALLOC_PERSIST_CPU);
    o.numa_vnodes = vnodes;
    o.numa_sync_ms = PMALLOC_NUMA_SYNC_NEVER; /* deterministic: on-demand sync only */
    return o;
}

static pmalloc_numa_stats nstats(pmalloc_heap *h)
{
    pmalloc_numa_stats st;
    assert_int_equal(pmalloc_numa_stats_get(h, &st), NM_OK);
    return st;
}

static void test_topology(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "topo");
    pmalloc_options o = numa_opts(16u << 20, PMALLOC_LOG, 4);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_numa_stats ns = nstats(h);
    assert_int_equal(ns.nodes, 4);
    assert_true(ns.virtual_nodes);
    assert_true(ns.remote_free_logs);
    assert_int_equal(ns.arenas_per_node, 1); /* 2 arenas asked, rounded up to 4 */
    assert_int_equal(pmalloc_numa_set_node(h, 4), NM_EINVAL);
    assert_int_equal(pmalloc_numa_set_node(h, -2), NM_EINVAL);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(pmalloc_numa_set_node(h, k), NM_OK);
        assert_int_equal(pmalloc_numa_current_node(h), k);
        /* small blocks and extents come from the node's own range */
        pmalloc_ptr *r = pmalloc_root_slot(h, (unsigned)k * 2);
        assert_int_equal(pmalloc_malloc_to(h, 100, r), NM_OK);
        assert_int_equal(pmalloc_numa_node_of(h, *r), k);
        assert_int_equal(pmalloc_malloc_to(h, 40000, r + 1), NM_OK);
        assert_int_equal(pmalloc_numa_node_of(h, r[1]), k);
    }
    assert_int_equal(pmalloc_numa_node_of(h, 8), -1);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* reopened with one node: no NUMA logic, the heap (with its logs) still opens */
    o.create = false;
    o.numa_vnodes = 1;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    ns = nstats(h);
    assert_int_equal(ns.nodes, 1);
    assert_true(ns.remote_free_logs);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* the environment variable, and a bad value of it */
    o.numa_vnodes = 0;
    setenv("NEARMEM_PMALLOC_VNODES", "3", 1);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(nstats(h).nodes, 3);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    setenv("NEARMEM_PMALLOC_VNODES", "many", 1);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EINVAL);
    unsetenv("NEARMEM_PMALLOC_VNODES");
    pmt_rmdir(dir);
}

/* Node 0's range full: allocations of node 0 fall back to other nodes. */
static void test_local_first_fallback(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "fallback");
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    unsigned n = 0, local = 0, remote = 0;
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    for (; n < PMALLOC_NROOTS; n++) {
        nm_err e = pmalloc_malloc_to(h, 1000, &roots[n]);
        if (e == NM_ENOMEM) break;
        assert_int_equal(e, NM_OK);
        if (pmalloc_numa_node_of(h, roots[n]) == 0) {
            assert_int_equal(remote, 0); /* local first: no local block after a remote one */
            local++;
        } else remote++;
    }
    /* the heap's data area is about 7.5 MiB: 1024 x 1 KiB fit in node 0's half */
    assert_int_equal(remote, 0);
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    /* now exhaust node 0 with extents, then ask for more small blocks */
    unsigned ne = 0;
    while (ne < 64 && pmalloc_numa_node_of(h, 0) != 1) {
        assert_int_equal(pmalloc_malloc_to(h, 128u << 10, &roots[ne]), NM_OK);
        if (pmalloc_numa_node_of(h, roots[ne++]) != 0) break;
    }
    pmalloc_numa_stats ns = nstats(h);
    assert_true(ns.remote_extents >= 1); /* the last extent went to node 1 */
    unsigned got_remote = 0;
    for (unsigned i = ne; i < ne + 200; i++) {
        assert_int_equal(pmalloc_malloc_to(h, 3000, &roots[i]), NM_OK);
        got_remote += pmalloc_numa_node_of(h, roots[i]) == 1;
    }
    assert_true(got_remote > 0);
    assert_true(nstats(h).remote_allocs > 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Node 0 allocates, node 1 frees: two-phase frees, then on-demand sync. */
static void remote_round(pmalloc_model m)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "twophase");
    pmalloc_options o = numa_opts(16u << 20, m, 2);
    o.numa_log_entries = 1024; /* no segment switch (and its synchronisation) in this test */
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    enum { N = 600 }; /* 64 B: one slab holds ~1000; the second round needs the synced ones */
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &roots[i]), NM_OK);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    uint64_t slabs_before = st.slabs, wal_before = st.wal_appends;
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    pmalloc_ptr saved = roots[0];
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    pmalloc_numa_stats ns = nstats(h);
    assert_int_equal(ns.remote_frees, N);
    assert_int_equal(ns.pending, N);
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, 0);
    if (m == PMALLOC_LOG) assert_int_equal(st.wal_appends - wal_before, N);
    /* a recorded block is free for every purpose: double free, usable size, walk */
    roots[0] = saved;
    assert_int_equal(pmalloc_free_from(h, &roots[0]), NM_EDOUBLEFREE);
    assert_int_equal(roots[0], saved);
    assert_int_equal(pmalloc_usable_size(h, saved), 0);
    roots[0] = 0;
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* node 1 allocating does not see node 0's pending blocks */
    assert_int_equal(pmalloc_malloc_to(h, 64, &roots[0]), NM_OK);
    assert_int_equal(pmalloc_numa_node_of(h, roots[0]), 1);
    assert_int_equal(nstats(h).pending, N);
    assert_int_equal(pmalloc_free_from(h, &roots[0]), NM_OK);
    /* node 0 allocating again: its arena has no partial slab left, so it
     * synchronises the pending frees instead of taking a new slab */
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &roots[i]), NM_OK);
    ns = nstats(h);
    assert_true(ns.synced_on_demand > 0);
    pmalloc_stats_get(h, &st);
    assert_true(st.slabs <= slabs_before + 1); /* reused, not grown (one slab of node 1's) */
    assert_int_equal(pmalloc_check(h), NM_OK);
    /* free them remotely once more and close: close applies everything */
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    ns = nstats(h);
    assert_int_equal(ns.replayed, 0);
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}
static void test_remote_free_log(void **st) { (void)st; remote_round(PMALLOC_LOG); }
static void test_remote_free_gc(void **st) { (void)st; remote_round(PMALLOC_GC); }

/* A crash between the two phases: recovery replays the deallocation logs. */
static void test_replay(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "replay");
    pmalloc_options o = numa_opts(16u << 20, PMALLOC_LOG, 2);
    o.numa_log_entries = 64; /* several segment switches below */
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    enum { N = 1000, KEEP = 100 };
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 48, &roots[i]), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    for (unsigned i = KEEP; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    pmalloc_numa_stats ns = nstats(h);
    assert_true(ns.log_switches >= 10);
    assert_true(ns.synced_other > 0); /* the log needed its other segment back */
    assert_true(ns.pending > 0 && ns.pending <= 2 * 64);
    uint64_t pending = ns.pending;
    assert_int_equal(pmalloc_check(h), NM_OK);
    pmalloc_abandon(h); /* crash: everything persisted is in the file */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    ns = nstats(h);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_false(ri.was_clean);
    assert_int_equal(ns.replayed, pending);
    pmalloc_stats hs;
    pmalloc_stats_get(h, &hs);
    assert_int_equal(hs.objects_live, KEEP);
    assert_int_equal(pmalloc_check(h), NM_OK);
    pmalloc_abandon(h); /* again: nothing left to replay, the logs were retired */
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(nstats(h).replayed, 0);
    pmalloc_stats_get(h, &hs);
    assert_int_equal(hs.objects_live, KEEP);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Crash at every flush of a recovery that replays the logs, then recover that. */
typedef struct rep_ctx { const char *snap; uint64_t at; bool fired; } rep_ctx;
static void rep_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    rep_ctx *c = arg;
    if (c->fired || no != c->at) return;
    c->fired = true;
    assert_int_equal(pmalloc_sim_snapshot(h, c->snap, no * 7919, 0), NM_OK);
}

static void test_replay_crash(void **st)
{
    (void)st;
    char dir[256], snap[256];
    pmt_tmpdir(dir, sizeof dir, "repcrash");
    pmt_tmpdir(snap, sizeof snap, "repsnap");
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
    o.numa_log_entries = 32;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    enum { N = 200, KEEP = 150 };
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 32, &roots[i]), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    for (unsigned i = KEEP; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    assert_true(nstats(h).pending > 0);
    pmalloc_abandon(h);
    unsigned crashed = 0;
    for (uint64_t at = 1; at < 160; at++) { /* the replay comes first in the recovery */
        /* copy the crashed heap, recover the copy under simulation, crash it at flush `at` */
        char cmd[1400];
        char wdir[300];
        snprintf(wdir, sizeof wdir, "%s/w", snap);
        /* the main file and the node files */
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/pmalloc.heap %s/pmalloc.node*.heap %s/", wdir, dir, dir, wdir);
        assert_int_equal(system(cmd), 0);
        rep_ctx c = {snap, at, false};
        pmalloc_options so = o;
        so.create = false;
        so.persist = PMALLOC_PERSIST_SIM;
        so.sim_hook = rep_hook;
        so.sim_arg = &c;
        assert_int_equal(pmalloc_open(wdir, &so, &h), NM_OK);
        pmalloc_abandon(h);
        pmt_rmheap(wdir);
        rmdir(wdir);
        if (!c.fired) break; /* the recovery has fewer flushes: done */
        crashed++;
        pmalloc_options vo = o;
        vo.create = false;
        assert_int_equal(pmalloc_open(snap, &vo, &h), NM_OK);
        assert_int_equal(pmalloc_check(h), NM_OK);
        pmalloc_stats s2;
        pmalloc_stats_get(h, &s2);
        assert_int_equal(s2.objects_live, KEEP);
        assert_int_equal(pmalloc_close(h), NM_OK);
        pmt_rmheap(snap);
    }
    assert_true(crashed >= 10);
    print_message("replay crashed at %u flush points\n", crashed);
    pmt_rmdir(snap);
    pmt_rmdir(dir);
}

/* A crash at every flush of an owner-side synchronisation whose remote frees
 * were recorded before the last checkpoint (so recovery has no redo record to
 * replay): the bits may be durably clear while the slab checksum's toggle and
 * the timestamp are not. Recovery must leave checksums that match the bits,
 * for the clean close and reopen after it, and for a second crash right
 * after it (this failed 1 run in ~100 of the process-kill campaign). */
typedef struct sync_ctx { const char *snap; unsigned at, seen; uint64_t seed; bool fired; } sync_ctx;
static void sync_hook(void *arg, pmalloc_heap *h, uint64_t no)
{
    sync_ctx *c = arg;
    (void)no;
    if (c->fired || ++c->seen != c->at) return;
    c->fired = true;
    assert_int_equal(pmalloc_sim_snapshot(h, c->snap, c->seed, 0), NM_OK);
}

static void sync_crash(bool crash_again)
{
    char dir[256], snap[256];
    pmt_tmpdir(dir, sizeof dir, "synccrash");
    pmt_tmpdir(snap, sizeof snap, "syncsnap");
    enum { N = 300, KEEP = 100 };
    unsigned crashed = 0;
    for (unsigned at = 1; at < 400; at++)
        for (unsigned seed = 0; seed < 3; seed++) {
            pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
            o.persist = PMALLOC_PERSIST_SIM;
            pmalloc_heap *h;
            assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
            pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
            assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
            for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 32 + 16 * (i % 5), &roots[i]), NM_OK);
            assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
            for (unsigned i = KEEP; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
            assert_true(nstats(h).pending > 0);
            assert_int_equal(pmalloc_sync(h), NM_OK); /* the frees' records are settled: only the logs name them */
            sync_ctx c = {snap, at, 0, at * 131u + seed, false};
            assert_int_equal(pmalloc_sim_set_hook(h, sync_hook, &c), NM_OK);
            assert_int_equal(pmalloc_numa_sync(h), NM_OK);
            pmalloc_abandon(h);
            pmt_rmheap(dir);
            if (!c.fired) goto out; /* the synchronisation has fewer flushes: done */
            crashed++;
            pmalloc_options vo = numa_opts(8u << 20, PMALLOC_LOG, 2);
            vo.create = false;
            for (int round = 0; round < 2; round++) {
                nm_err e = pmalloc_open(snap, &vo, &h);
                if (e) print_message("flush %u seed %u, open %d: %s\n", at, seed, round + 1, nm_last_errmsg());
                assert_int_equal(e, NM_OK);
                assert_int_equal(pmalloc_check(h), NM_OK);
                pmalloc_stats s2;
                pmalloc_stats_get(h, &s2);
                assert_int_equal(s2.objects_live, KEEP);
                if (crash_again && round == 0) pmalloc_abandon(h);
                else assert_int_equal(pmalloc_close(h), NM_OK);
            }
            pmt_rmheap(snap);
        }
out:
    assert_true(crashed >= 6);
    print_message("synchronisation crashed at %u flush points\n", crashed);
    pmt_rmdir(snap);
    pmt_rmdir(dir);
}
static void test_sync_crash(void **st) { (void)st; sync_crash(false); }
static void test_sync_crash_twice(void **st) { (void)st; sync_crash(true); }

/* The heap file, opened for update, and its NUMA header (checked). */
static FILE *open_numa_hdr(const char *path, pm_numa_hdr *nh)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, PM_NUMA_HDR_LINE * PM_LINE, SEEK_SET), 0);
    assert_int_equal(fread(nh, sizeof *nh, 1, f), 1);
    assert_int_equal(nh->magic, PM_NUMA_MAGIC);
    return f;
}

static void test_corrupt_log(void **st)
{
    (void)st;
    char dir[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "corrupt");
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    pm_numa_hdr nh;
    FILE *f = open_numa_hdr(path, &nh);
    /* 1. a damaged segment header */
    pm_dlog_hdr d;
    long segoff = (long)nh.region_off + (long)PM_LINE; /* log 0, segment 1 */
    fseek(f, segoff, SEEK_SET);
    assert_int_equal(fread(&d, sizeof d, 1, f), 1);
    pm_dlog_hdr bad = d;
    bad.log ^= 1;
    fseek(f, segoff, SEEK_SET);
    fwrite(&bad, sizeof bad, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    fseek(f, segoff, SEEK_SET);
    fwrite(&d, sizeof d, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    fseek(f, segoff, SEEK_SET);
    assert_int_equal(fread(&d, sizeof d, 1, f), 1);
    /* 2. a well-formed entry (valid checksum, live generation) naming no block */
    pm_dlog_ent e = {.block = 8u << 20, .ts = 5, .gen = d.gen & ((1ull << 48) - 1)}; /* the generation word: gen | check << 48 */
    uint64_t v[4] = {e.block, e.ts, e.gen, (uint64_t)0 << 1 | 1};
    e.check = XXH64(v, sizeof v, 0x454e5452);
    long eoff = (long)nh.seg_off + (long)(nh.seg_entries * sizeof(pm_dlog_ent)); /* log 0, segment 1, slot 0 */
    fseek(f, eoff, SEEK_SET);
    fwrite(&e, sizeof e, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    /* a damaged entry (checksum does not match) is refused when no free after
     * the checkpoint bound could have torn it (a clean heap: none) */
    e.check ^= 1;
    fseek(f, eoff, SEEK_SET);
    fwrite(&e, sizeof e, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    memset(&e, 0, sizeof e);
    fseek(f, eoff, SEEK_SET);
    fwrite(&e, sizeof e, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* 3. a damaged NUMA header */
    nh.nlogs = 3;
    fseek(f, PM_NUMA_HDR_LINE * PM_LINE, SEEK_SET);
    fwrite(&nh, sizeof nh, 1, f);
    fflush(f);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    fclose(f);
    pmt_rmdir(dir);
}

/* A torn entry of a block freed remotely twice: node 1 frees node 0's extent
 * (entry 1, valid), the free is applied, node 0 gets the same extent again,
 * node 1 frees it again and the process dies while writing entry 2. Entry 2
 * must be tolerated whether or not a checkpoint settled the first free's
 * record (it was refused as damage when entries were matched to records by
 * block: entry 1 "matched" the second free). */
static void torn_refree(bool ckpt)
{
    char dir[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "refree");
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r = pmalloc_root_slot(h, 0);
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 40000, r), NM_OK);
    uint64_t first = *r;
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r), NM_OK);
    assert_int_equal(pmalloc_numa_sync(h), NM_OK); /* applied: the extent is free again */
    if (ckpt) assert_int_equal(pmalloc_sync(h), NM_OK); /* the first free's record is settled, its entry stays valid */
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    unsigned k = 0;
    pmalloc_ptr *again = NULL;
    for (; k < 32 && !again; k++) { /* node 0 allocates until it gets the same extent (the others stay live) */
        pmalloc_ptr *slot = pmalloc_root_slot(h, 1 + k);
        assert_int_equal(pmalloc_malloc_to(h, 40000, slot), NM_OK);
        if (*slot == first) again = slot;
    }
    assert_non_null(again);
    k--; /* live besides it */
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    assert_int_equal(pmalloc_free_from(h, again), NM_OK);
    assert_int_equal(nstats(h).remote_frees + nstats(h).remote_extent_frees >= 2, 1);
    pmalloc_abandon(h); /* a process death: no checkpoint since the two frees */
    /* tear the newer of the two entries that name the extent */
    pm_numa_hdr nh;
    FILE *f = open_numa_hdr(path, &nh);
    size_t nent = (size_t)nh.nlogs * 2 * nh.seg_entries, found = 0, newest = 0;
    pm_dlog_ent *ents = calloc(nent, sizeof *ents);
    assert_non_null(ents);
    assert_int_equal(fseek(f, (long)nh.seg_off, SEEK_SET), 0);
    assert_int_equal(fread(ents, sizeof *ents, nent, f), nent);
    for (size_t i = 0; i < nent; i++)
        if ((ents[i].block & PM_DLOG_EXTENT) && (uint32_t)(ents[i].block & ~PM_DLOG_EXTENT) == (uint32_t)first) {
            if (!found++ || ents[i].ts > ents[newest].ts) newest = i;
        }
    assert_int_equal(found, 2);
    ents[newest].check ^= 0x100; /* the last store of the entry did not happen */
    assert_int_equal(fseek(f, (long)(nh.seg_off + newest * sizeof *ents), SEEK_SET), 0);
    assert_int_equal(fwrite(&ents[newest], sizeof *ents, 1, f), 1);
    fclose(f);
    free(ents);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    assert_int_equal(s.objects_live, k); /* the twice-freed extent is free; the kept ones live */
    assert_int_equal(pmalloc_get_root(h, 0), 0);
    assert_int_equal(pmalloc_get_root(h, 1 + k), 0);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}
static void test_torn_refree(void **st) { (void)st; torn_refree(false); }
static void test_torn_refree_settled(void **st) { (void)st; torn_refree(true); }

/* Thread migration: the cache follows the CPU's (virtual) node. */
static void test_migration(void **st)
{
    (void)st;
    cpu_set_t orig, one;
    sched_getaffinity(0, sizeof orig, &orig);
    int cpus[2], nc = 0;
    for (int c = 0; c < CPU_SETSIZE && nc < 2; c++)
        if (CPU_ISSET(c, &orig)) cpus[nc++] = c;
    if (nc < 2) { print_message("one CPU: migration test skipped\n"); skip(); }
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "migrate");
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(pmalloc_numa_current_node(h), 0); /* the first CPU is node 0's */
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    for (unsigned i = 0; i < 10; i++) assert_int_equal(pmalloc_malloc_to(h, 80, &roots[i]), NM_OK);
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(pmalloc_numa_migrate_check(h), NM_OK);
    assert_int_equal(pmalloc_numa_current_node(h), 1);
    assert_int_equal(nstats(h).migrations, 1);
    /* node 1 now: its allocations are node 1's, its frees of node 0's blocks remote */
    assert_int_equal(pmalloc_malloc_to(h, 80, &roots[10]), NM_OK);
    assert_int_equal(pmalloc_numa_node_of(h, roots[10]), 1);
    for (unsigned i = 0; i < 10; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    assert_int_equal(nstats(h).remote_frees, 10);
    /* back on CPU 0: the periodic check (every 64 operations) notices */
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    for (unsigned i = 0; i < 70; i++) {
        assert_int_equal(pmalloc_malloc_to(h, 80, &roots[20]), NM_OK);
        assert_int_equal(pmalloc_free_from(h, &roots[20]), NM_OK);
    }
    assert_int_equal(pmalloc_numa_current_node(h), 0);
    assert_int_equal(nstats(h).migrations, 2);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    sched_setaffinity(0, sizeof orig, &orig);
    pmt_rmdir(dir);
}

/* A heap created with one node has no logs: remote frees take the direct path. */
static void test_no_logs(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "nologs");
    pmalloc_options o = numa_opts(8u << 20, PMALLOC_LOG, 1);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    o.numa_vnodes = 2;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_false(nstats(h).remote_free_logs);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    for (unsigned i = 0; i < 100; i++) assert_int_equal(pmalloc_malloc_to(h, 64, &roots[i]), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    for (unsigned i = 0; i < 100; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    assert_int_equal(nstats(h).remote_frees, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Created with 2 nodes (2 logs), reopened with 4: nodes share logs; eADR mode too. */
static void test_more_nodes_than_logs(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "morenodes");
    pmalloc_options o = numa_opts(16u << 20, PMALLOC_LOG, 2);
    o.numa_log_entries = 32;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    for (int eadr = 0; eadr < 2; eadr++) {
        o.create = false;
        o.numa_vnodes = 4;
        o.eadr = eadr ? PMALLOC_EADR_ON : PMALLOC_EADR_OFF;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        assert_int_equal(nstats(h).nodes, 4);
        pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
        enum { N = 400 };
        assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
        for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_malloc_to(h, 24 + 8 * (i % 50), &roots[i]), NM_OK);
        for (unsigned i = 0; i < N; i++) {
            if (i % 50 == 0) assert_int_equal(pmalloc_numa_set_node(h, 1 + (int)(i / 50) % 3), NM_OK);
            assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
        }
        pmalloc_numa_stats ns = nstats(h);
        assert_int_equal(ns.remote_frees, N);
        assert_true(ns.pending > 0);
        assert_int_equal(pmalloc_check(h), NM_OK);
        uint64_t pending = ns.pending;
        pmalloc_abandon(h);
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        assert_int_equal(nstats(h).replayed, pending);
        pmalloc_stats hs;
        pmalloc_stats_get(h, &hs);
        assert_int_equal(hs.objects_live, 0);
        assert_int_equal(pmalloc_check(h), NM_OK);
        assert_int_equal(pmalloc_close(h), NM_OK);
    }
    pmt_rmdir(dir);
}

/* Extents (Sec. 6.3): node 0 allocates, node 1 frees: the owner side appends
 * the tombstones (on demand here), a crash in between is replayed. */
static void remote_extents(pmalloc_model m)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "rext");
    pmalloc_options o = numa_opts(16u << 20, m, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    enum { N = 20 };
    for (int round = 0; round < 2; round++) {
        assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
        for (unsigned i = 0; i < N; i++) {
            assert_int_equal(pmalloc_malloc_to(h, 40000, &roots[i]), NM_OK);
            assert_int_equal(pmalloc_numa_node_of(h, roots[i]), 0);
        }
        assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
        pmalloc_ptr saved = roots[0];
        for (unsigned i = 0; i < N; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
        pmalloc_numa_stats ns = nstats(h);
        assert_int_equal(ns.remote_extent_frees, (uint64_t)N * (round + 1));
        assert_int_equal(ns.pending_extents, N);
        assert_int_equal(pmalloc_usable_size(h, saved), 0);
        roots[0] = saved;
        assert_int_equal(pmalloc_free_from(h, &roots[0]), NM_EDOUBLEFREE);
        assert_int_equal(roots[0], saved);
        roots[0] = 0;
        pmalloc_stats st;
        pmalloc_stats_get(h, &st);
        assert_int_equal(st.objects_live, 0);
        assert_int_equal(pmalloc_check(h), NM_OK);
        if (round == 0) {
            /* node 0 needs (nearly) its whole range: it applies the pending frees first */
            assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
            assert_int_equal(pmalloc_malloc_to(h, st.data_bytes / 2 - (256u << 10), &roots[0]), NM_OK);
            assert_int_equal(pmalloc_numa_node_of(h, roots[0]), 0);
            ns = nstats(h);
            assert_int_equal(ns.pending_extents, 0);
            assert_int_equal(ns.remote_extents, 0);
            assert_int_equal(pmalloc_free_from(h, &roots[0]), NM_OK);
            assert_int_equal(pmalloc_check(h), NM_OK);
        }
    }
    pmalloc_abandon(h); /* crash with N remote extent frees pending */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_numa_stats ns = nstats(h);
    /* GC settles extent operations before they return: the deallocation log
     * replays the pending frees. LOG: the allocations of the last round may
     * still be unsettled too (their records and the frees' records replay) */
    if (m == PMALLOC_GC) assert_int_equal(ns.replayed, N);
    else assert_true(ns.replayed <= N);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.extents, 0);
    assert_int_equal(st.objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}
static void test_remote_extents_log(void **st) { (void)st; remote_extents(PMALLOC_LOG); }
static void test_remote_extents_gc(void **st) { (void)st; remote_extents(PMALLOC_GC); }

/* Node ranges smaller than a slab (4 MiB heap, 64 virtual nodes): still usable. */
static void test_tiny_ranges(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "tiny");
    pmalloc_options o = numa_opts(4u << 20, PMALLOC_LOG, 64);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(nstats(h).nodes, 64);
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    unsigned n = 0;
    for (int k = 0; k < 64; k += 7) {
        assert_int_equal(pmalloc_numa_set_node(h, k), NM_OK);
        for (unsigned i = 0; i < 20; i++, n++) assert_int_equal(pmalloc_malloc_to(h, 500, &roots[n]), NM_OK);
    }
    assert_int_equal(pmalloc_numa_set_node(h, 63), NM_OK);
    for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_free_from(h, &roots[i]), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_local_first_fallback),
        cmocka_unit_test(test_remote_free_log),
        cmocka_unit_test(test_remote_free_gc),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_replay_crash),
        cmocka_unit_test(test_sync_crash),
        cmocka_unit_test(test_sync_crash_twice),
        cmocka_unit_test(test_corrupt_log),
        cmocka_unit_test(test_torn_refree),
        cmocka_unit_test(test_torn_refree_settled),
        cmocka_unit_test(test_migration),
        cmocka_unit_test(test_no_logs),
        cmocka_unit_test(test_more_nodes_than_logs),
        cmocka_unit_test(test_tiny_ranges),
        cmocka_unit_test(test_remote_extents_log),
        cmocka_unit_test(test_remote_extents_gc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
