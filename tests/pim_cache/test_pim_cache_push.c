/* PIM-CACHE issue 17 features against the host-memory DPU set: the parallel engine (sampled
 * decision, per-rank pipeline), content-defined chunking, write tracking of registered
 * buffers (repeats, writes between copies, unmapped and remapped buffers, handler chaining,
 * system-call writes). Every copy is read back through the transport and with the DPU-side
 * reader and compared with the source bytes. */
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pimc_test_util.h"

#define KiB 1024u

static nm_pimc_memdev *mkdev(unsigned nd, uint64_t mram)
{
    nm_pimc_memdev *m;
    assert_int_equal(nm_pimc_memdev_create(nd, mram, &m), NM_OK);
    return m;
}

static nm_pimc *mkcache(nm_pimc_memdev *m, const nm_pimc_options *o)
{
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc *c;
    nm_err e = nm_pimc_create(&t, o, &c);
    if (e) fprintf(stderr, "create: %s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    return c;
}

static void copy_ok(nm_pimc *c, unsigned slot, const void *const *bufs, const size_t *lens)
{
    nm_err e = nm_pimc_copy(c, slot, bufs, lens);
    if (e) fprintf(stderr, "copy: %s\n", nm_last_errmsg());
    assert_int_equal(e, NM_OK);
}

/* The DPU-side reader in CDC mode returns chunks at r.pos; check_dpu_reader (test util)
 * works for every mode since it places blocks by index * block size, so read CDC slots
 * with this one. */
static void check_reader_any(nm_pimc *c, nm_pimc_memdev *m, unsigned slot, unsigned dpu, const uint8_t *want,
                             size_t len, unsigned tasklets)
{
    test_io t = {m, dpu, 0};
    nm_pimc_mram_io io = {&t, tio_read, tio_write};
    size_t covered = 0;
    uint64_t blk[4096 / 8];
    for (unsigned tid = 0; tid < tasklets; tid++) {
        nm_pimc_reader r;
        assert_int_equal(nm_pimc_reader_open(&r, &io, (uint32_t)nm_pimc_slot_desc(c, slot), tid, tasklets), 0);
        assert_int_equal(r.d.length, len);
        uint32_t idx, n;
        while ((n = nm_pimc_reader_next(&r, blk, &idx)) != 0) {
            assert_int_equal(idx % tasklets, tid);
            assert_true(r.pos + n <= len);
            assert_memory_equal(blk, want + r.pos, n);
            covered += n;
        }
    }
    assert_int_equal(covered, len);
    assert_int_equal(t.violations, 0);
}

static void check_all(nm_pimc *c, nm_pimc_memdev *m, unsigned slot, unsigned nd, const void *const *bufs,
                      const size_t *lens)
{
    for (unsigned d = 0; d < nd; d++) {
        assert_true(nm_pimc_slot_valid(c, slot, d));
        check_read_back(c, slot, d, bufs[d], lens[d]);
        check_reader_any(c, m, slot, d, bufs[d], lens[d], 1 + d % 3);
    }
}

/* ------------------------------------------------------------------ parallel engine */

/* Randomized sequences in parallel mode, fixed blocks and CDC, fallback on and off, two
 * slots, uneven and equal sizes, ranks of 4 DPUs (10 DPUs: 3 ranks, the last partial). */
static void run_parallel(nm_pimc_chunking ch, double thr, unsigned threads, uint64_t seed)
{
    const unsigned nd = 10;
    nm_pimc_memdev *m = mkdev(nd, 512 * KiB);
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    t.dpus_per_rank = 4;
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.parallel = true;
    o.chunking = ch;
    o.block_size = ch == NM_PIMC_CDC ? 256 : 1024;
    o.fallback_threshold = thr;
    o.threads = threads;
    o.sample_stride = 4;
    nm_pimc *c;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_OK);
    nm_rng r;
    nm_rng_seed(&r, seed);
    uint8_t *pool = malloc(8 * KiB);
    fill_blocks(&r, pool, 8 * KiB, 1024, 0, NULL, 0);
    uint8_t *prev[10] = {0};
    size_t prev_len[10] = {0};
    unsigned cac = 0, plain = 0;
    for (int round = 0; round < 12; round++) {
        uint8_t *bufs[10];
        size_t lens[10];
        bool equal = round % 2;
        size_t el = 1 + nm_rng_below(&r, 40 * KiB);
        double rep = round % 3 == 0 ? 0.0 : 0.9;
        for (unsigned d = 0; d < nd; d++) {
            lens[d] = equal ? el : nm_rng_below(&r, 40 * KiB);
            bufs[d] = malloc(lens[d] + 64);
            if (round % 4 == 3 && prev[d]) {
                /* shifted repeat: the previous buffer with bytes inserted near the start */
                size_t ins = 1 + nm_rng_below(&r, 40);
                memcpy(bufs[d], pool, ins);
                size_t rest = lens[d] > ins ? lens[d] - ins : 0;
                memcpy(bufs[d] + ins, prev[d], NM_MIN(rest, prev_len[d]));
                if (rest > prev_len[d]) fill_blocks(&r, bufs[d] + ins + prev_len[d], rest - prev_len[d], 1024, 0, NULL, 0);
            } else {
                fill_blocks(&r, bufs[d], lens[d], 1024, rep, pool, 8);
            }
        }
        unsigned slot = round % 2;
        copy_ok(c, slot, (const void *const *)bufs, lens);
        check_all(c, m, slot, nd, (const void *const *)bufs, lens);
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        cac += st.last_mode == NM_PIMC_MODE_CAC;
        plain += st.last_mode == NM_PIMC_MODE_PLAIN;
        assert_true(isnan(st.last_total_ns) || st.last_total_ns >= 0);
        for (unsigned d = 0; d < nd; d++) {
            free(prev[d]);
            prev[d] = bufs[d];
            prev_len[d] = lens[d];
        }
    }
    if (thr == 0) assert_int_equal(plain, 0);
    if (thr > 0) {
        assert_true(cac > 0);
        assert_true(plain > 0); /* the fresh rounds went plain */
    }
    for (unsigned d = 0; d < nd; d++) free(prev[d]);
    free(pool);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

static void test_parallel_engine(void **state)
{
    (void)state;
    uint64_t seed = nm_test_seed(40);
    for (int ch = 0; ch < 2; ch++)
        for (unsigned th = 1; th <= 3; th += 2) {
            run_parallel((nm_pimc_chunking)ch, 0.0, th, seed++);
            run_parallel((nm_pimc_chunking)ch, 0.3, th, seed++);
        }
}

/* The sampled decision: fresh data goes plain (one push of data, one of descriptors),
 * repeated data goes CAC; a transport with a bandwidth uses the cost model. */
static void test_parallel_decision(void **state)
{
    (void)state;
    const unsigned nd = 8;
    nm_pimc_memdev *m = mkdev(nd, 2048 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.parallel = true;
    nm_pimc *c = mkcache(m, &o);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(41));
    uint8_t *bufs[8];
    size_t lens[8];
    for (unsigned d = 0; d < nd; d++) {
        lens[d] = 256 * KiB;
        bufs[d] = malloc(lens[d]);
        fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
    }
    nm_pimc_memdev_stats m0 = nm_pimc_memdev_get_stats(m);
    copy_ok(c, 0, (const void *const *)bufs, lens);
    nm_pimc_memdev_stats m1 = nm_pimc_memdev_get_stats(m);
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.last_mode, NM_PIMC_MODE_PLAIN);
    assert_true(st.last_sample_pct < 10);
    assert_int_equal(m1.push_calls - m0.push_calls, 2);
    assert_int_equal(m1.serial_calls, m0.serial_calls);
    check_all(c, m, 0, nd, (const void *const *)bufs, lens);
    /* one block repeated everywhere: CAC, almost nothing sent */
    for (unsigned d = 0; d < nd; d++)
        for (size_t i = 0; i < lens[d]; i += 1024) memset(bufs[d] + i, 0x33 + d, 1024);
    copy_ok(c, 1, (const void *const *)bufs, lens);
    nm_pimc_get_stats(c, &st);
    assert_int_equal(st.last_mode, NM_PIMC_MODE_CAC);
    assert_true(st.last_sample_pct > 90);
    assert_true(st.last_sent_bytes <= nd * 1024);
    check_all(c, m, 1, nd, (const void *const *)bufs, lens);
    nm_pimc_destroy(c);
    /* with a cost model: a slow link makes CAC worth it at 50% redundancy, a fast one not
     * (enough samples per DPU to see the 50%) */
    o.sample_stride = 8;
    for (int fast = 0; fast < 2; fast++) {
        nm_pimc_transport t = nm_pimc_memdev_transport(m);
        t.push_gbps = fast ? 1e6 : 1e-3; /* GB/s */
        nm_pimc *c2;
        assert_int_equal(nm_pimc_create(&t, &o, &c2), NM_OK);
        for (unsigned d = 0; d < nd; d++) fill_blocks(&r, bufs[d], lens[d], 1024, 0, NULL, 0);
        for (unsigned d = 0; d < nd; d++)
            for (size_t i = 0; i < lens[d] / 2; i += 1024) memset(bufs[d] + i, 0x44, 1024);
        copy_ok(c2, 0, (const void *const *)bufs, lens);
        nm_pimc_get_stats(c2, &st);
        assert_int_equal(st.last_mode, fast ? NM_PIMC_MODE_PLAIN : NM_PIMC_MODE_CAC);
        check_all(c2, m, 0, nd, (const void *const *)bufs, lens);
        nm_pimc_destroy(c2);
    }
    for (unsigned d = 0; d < nd; d++) free(bufs[d]);
    nm_pimc_memdev_destroy(m);
}

/* ------------------------------------------------------------------ CDC */

/* Shifted content deduplicates with CDC and not with fixed blocks. */
static void test_cdc_shift(void **state)
{
    (void)state;
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(42));
    size_t len = 200 * KiB;
    uint8_t *a = malloc(len), *b = malloc(len + 100);
    fill_blocks(&r, a, len, 1024, 0, NULL, 0);
    memcpy(b, a, 5000);
    for (int i = 0; i < 37; i++) b[5000 + i] = (uint8_t)nm_rng_u64(&r); /* insertion */
    memcpy(b + 5037, a + 5000, len - 5000);
    size_t lb = len + 37;
    for (int ch = 0; ch < 2; ch++)
        for (int par = 0; par < 2; par++) {
            nm_pimc_memdev *m = mkdev(1, 4096 * KiB);
            nm_pimc_options o;
            nm_pimc_options_default(&o);
            o.chunking = (nm_pimc_chunking)ch;
            o.parallel = par;
            o.fallback_threshold = 0;
            nm_pimc *c = mkcache(m, &o);
            const void *pa[1] = {a}, *pb[1] = {b};
            copy_ok(c, 0, pa, &len);
            check_all(c, m, 0, 1, pa, &len);
            copy_ok(c, 1, pb, &lb);
            check_all(c, m, 1, 1, pb, &lb);
            check_all(c, m, 0, 1, pa, &len); /* the first slot is still right */
            nm_pimc_stats st;
            nm_pimc_get_stats(c, &st);
            if (ch == NM_PIMC_CDC)
                assert_true(st.last_dedup_pct > 90.0);
            else
                assert_true(st.last_dedup_pct < 5.0);
            nm_pimc_destroy(c);
            nm_pimc_memdev_destroy(m);
        }
    free(a);
    free(b);
}

static void test_cdc_options(void **state)
{
    (void)state;
    nm_pimc_memdev *m = mkdev(1, 1024 * KiB);
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc_options o;
    nm_pimc *c = NULL;
    nm_pimc_options_default(&o);
    o.chunking = NM_PIMC_CDC;
    o.cdc_avg = 1000; /* not a power of two */
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    o.cdc_avg = 1024;
    o.cdc_max = 8192; /* beyond the DPU reader's 4096 */
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    o.cdc_max = 512; /* below avg */
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    o.cdc_min = 4;
    o.cdc_max = 0;
    assert_int_equal(nm_pimc_create(&t, &o, &c), NM_EINVAL);
    assert_null(c);
    nm_pimc_memdev_destroy(m);
}

/* ------------------------------------------------------------------ write tracking */

static void *map_pages(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

/* Repeated copies of a registered buffer: unchanged ones read nothing and send nothing; a
 * write between two copies is caught and the changed bytes arrive; serial, parallel, CDC. */
static void run_tracking(bool parallel, nm_pimc_chunking ch, int mode, uint64_t seed)
{
    const unsigned nd = 4;
    /* DPU buffers start and end inside pages (at block multiples from the registration, as
     * fixed blocks need; CDC takes any offset) */
    const size_t per = 96 * KiB + (ch == NM_PIMC_CDC ? 520 : 1024);
    nm_pimc_memdev *m = mkdev(nd, 2048 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.parallel = parallel;
    o.chunking = ch;
    o.track_granule = 8 * KiB;
    o.track_mode = mode;
    nm_pimc *c = mkcache(m, &o);
    size_t total = per * nd + 4096;
    uint8_t *area = map_pages(total);
    uint8_t *data = area + 512; /* registration not page aligned either */
    nm_rng r;
    nm_rng_seed(&r, seed);
    fill_blocks(&r, data, per * nd, 1024, 0, NULL, 0);
    nm_pimc_reg *reg;
    nm_err re = nm_pimc_register(c, data, per * nd, &reg);
    if (re == NM_ENOTSUP && mode == NM_PIMC_TRACK_UFFD) { /* kernel without it: nothing to test */
        munmap(area, total);
        nm_pimc_destroy(c);
        nm_pimc_memdev_destroy(m);
        return;
    }
    assert_int_equal(re, NM_OK);
    const void *bufs[4];
    size_t lens[4];
    for (unsigned d = 0; d < nd; d++) {
        bufs[d] = data + d * per;
        lens[d] = per;
    }
    nm_pimc_stats st, st0;
    nm_pimc_get_stats(c, &st0);
    for (int round = 0; round < 8; round++) {
        if (round == 3 || round == 5) {
            /* writes between copies: a byte in DPU 1's buffer, a run in DPU 2's */
            data[per + 5000 + round] ^= 0x5a;
            memset(data + 2 * per + 20000, round, 3000);
        }
        if (round == 6) {
            /* a write through a system call, declared first (the mprotect backend needs it;
             * the uffd backend catches it: declared only every other time) */
            if (mode != NM_PIMC_TRACK_UFFD || (seed & 1)) assert_int_equal(nm_pimc_reg_touch(reg, 3 * per + 100, 64), NM_OK);
            int fd[2];
            assert_int_equal(pipe(fd), 0);
            uint8_t msg[64];
            memset(msg, 0xee, sizeof msg);
            assert_int_equal(write(fd[1], msg, 64), 64);
            assert_int_equal(read(fd[0], data + 3 * per + 100, 64), 64);
            close(fd[0]);
            close(fd[1]);
        }
        nm_pimc_memdev_stats m0 = nm_pimc_memdev_get_stats(m);
        copy_ok(c, 0, bufs, lens);
        nm_pimc_memdev_stats m1 = nm_pimc_memdev_get_stats(m);
        check_all(c, m, 0, nd, bufs, lens);
        nm_pimc_get_stats(c, &st);
        if (round >= 2 && round != 3 && round != 5 && round != 6) {
            /* nothing written: everything but the partial pages at the edges is known */
            assert_true(st.last_clean_bytes + 3 * 4096 >= per * nd);
            assert_int_equal(st.last_sent_bytes, 0);
        }
        if (round == 3 || round == 5 || round == 6) {
            /* only the written granules were read; a CDC buffer that went plain has no
             * chunk list to reuse (its chunks are not 8-byte aligned in the BRB): the
             * sample sees that and it goes plain again */
            assert_true(st.last_clean_bytes > per || (ch == NM_PIMC_CDC && st.last_mode == NM_PIMC_MODE_PLAIN));
            assert_true(st.last_sent_bytes > 0 || st.last_mode == NM_PIMC_MODE_PLAIN);
        }
        (void)m0;
        (void)m1;
    }
    assert_true(st.write_faults > st0.write_faults);
    assert_int_equal(nm_pimc_unregister(c, reg), NM_OK);
    assert_int_equal(nm_pimc_unregister(c, reg), NM_EINVAL); /* not twice */
    data[7] = 1; /* writable again */
    munmap(area, total);
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
}

static void test_tracking_repeats(void **state)
{
    (void)state;
    uint64_t seed = nm_test_seed(43);
    for (int mode = 0; mode < 3; mode++)
        for (int par = 0; par < 2; par++)
            for (int ch = 0; ch < 2; ch++) run_tracking(par, (nm_pimc_chunking)ch, mode, seed++);
}

/* A registered buffer unmapped, or freed back to the system, gives NM_ESTATE and no crash;
 * one mapped again at the same address is read again, never served stale. */
static void test_tracking_unmapped(void **state)
{
    (void)state;
    nm_pimc_memdev *m = mkdev(2, 2048 * KiB);
    for (int par = 0; par < 4; par++) {
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.parallel = par & 1;
        o.track_mode = par & 2 ? NM_PIMC_TRACK_MPROTECT : NM_PIMC_TRACK_AUTO;
        nm_pimc *c = mkcache(m, &o);
        size_t len = 256 * KiB;
        uint8_t *p = map_pages(2 * len);
        memset(p, 1, 2 * len);
        nm_pimc_reg *reg;
        assert_int_equal(nm_pimc_register(c, p, 2 * len, &reg), NM_OK);
        const void *bufs[2] = {p, p + len};
        size_t lens[2] = {len, len};
        copy_ok(c, 0, bufs, lens);
        copy_ok(c, 0, bufs, lens);
        /* remapped at the same address with other bytes: read again */
        assert_true(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
        memset(p, 9, len);
        copy_ok(c, 0, bufs, lens);
        check_all(c, m, 0, 2, bufs, lens);
        /* unmapped: an error, nothing read */
        munmap(p + len, len);
        assert_int_equal(nm_pimc_copy(c, 0, bufs, lens), NM_ESTATE);
        assert_non_null(strstr(nm_last_errmsg(), "no longer mapped"));
        assert_int_equal(nm_pimc_unregister(c, reg), NM_OK);
        munmap(p, len);
#ifndef __SANITIZE_ADDRESS__ /* ASan keeps freed blocks (quarantine): reading one is its error to report */
        /* malloc'd and freed: a block above the mmap threshold goes back to the system
         * (the threshold is pinned: glibc raises it after the first such free) */
        mallopt(M_MMAP_THRESHOLD, 1024 * KiB);
        uint8_t *q = malloc(4 * 1024 * KiB);
        memset(q, 3, 4 * 1024 * KiB);
        assert_int_equal(nm_pimc_register(c, q, 4 * 1024 * KiB, &reg), NM_OK);
        const void *qb[2] = {q, q + 512 * KiB};
        size_t ql[2] = {512 * KiB, 512 * KiB};
        copy_ok(c, 1, qb, ql);
        free(q);
        /* unmapped: NM_ESTATE; or, if an allocation took the address again meanwhile (the
         * copy itself allocates), read again as remapped memory: never a crash */
        nm_err fe = nm_pimc_copy(c, 1, qb, ql);
        assert_true(fe == NM_ESTATE || fe == NM_OK);
#endif
        nm_pimc_destroy(c); /* unregisters what is left */
    }
    nm_pimc_memdev_destroy(m);
}

static void test_tracking_errors(void **state)
{
    (void)state;
    nm_pimc_memdev *m = mkdev(2, 1024 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    nm_pimc *c = mkcache(m, &o), *c2 = mkcache(m, &o);
    uint8_t *p = map_pages(64 * KiB);
    nm_pimc_reg *reg, *reg2;
    assert_int_equal(nm_pimc_register(c, NULL, 10, &reg), NM_EINVAL);
    assert_int_equal(nm_pimc_register(c, p, 0, &reg), NM_EINVAL);
    assert_int_equal(nm_pimc_register(c, p, 32 * KiB, &reg), NM_OK);
    assert_int_equal(nm_pimc_register(c, p + 4096, 100, &reg2), NM_EEXIST);  /* same cache */
    assert_int_equal(nm_pimc_register(c2, p + 4096, 8192, &reg2), NM_EEXIST); /* another cache */
    assert_int_equal(nm_pimc_reg_touch(reg, 32 * KiB, 1), NM_ERANGE);
    assert_int_equal(nm_pimc_unregister(c2, reg), NM_EINVAL); /* not c2's */
    uint8_t *hole = map_pages(8192);
    munmap(hole, 8192);
    assert_int_equal(nm_pimc_register(c2, hole, 8192, &reg2), NM_EINVAL); /* not mapped */
    nm_pimc_destroy(c);
    nm_pimc_destroy(c2);
    munmap(p, 64 * KiB);
    nm_pimc_memdev_destroy(m);
}

/* A fault that is not a write to a tracked page reaches the handler installed before (in
 * a child process, so that handler is there before the first registration). */
static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_caught;
static void old_handler(int sig)
{
    (void)sig;
    g_caught++;
    siglongjmp(g_jmp, 1);
}

static int chain_child(int mode)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = old_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    if (sigaction(SIGSEGV, &sa, NULL)) return 1;
    nm_pimc_memdev *m;
    if (nm_pimc_memdev_create(1, 512 * KiB, &m)) return 2;
    nm_pimc_transport t = nm_pimc_memdev_transport(m);
    nm_pimc *c;
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.track_mode = mode;
    if (nm_pimc_create(&t, &o, &c)) return 3;
    uint8_t *p = mmap(NULL, 64 * KiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    nm_pimc_reg *reg;
    if (p == MAP_FAILED || nm_pimc_register(c, p, 64 * KiB, &reg)) return 4;
    const void *b[1] = {p};
    size_t l = 64 * KiB;
    if (nm_pimc_copy(c, 0, b, &l)) return 5;
    p[100] = 7; /* a tracked write: handled here, not chained */
    if (g_caught) return 6;
    uint8_t *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(g_jmp, 1) == 0) {
        *(volatile uint8_t *)none = 1; /* not ours */
        return 7;
    }
    if (g_caught != 1) return 8;
    if (nm_pimc_copy(c, 0, b, &l)) return 9;
    uint8_t got[64 * 1024];
    if (nm_pimc_read_back(c, 0, 0, got, l) || memcmp(got, p, l)) return 10;
    nm_pimc_destroy(c);
    nm_pimc_memdev_destroy(m);
    return 0;
}

static void test_tracking_chains(void **state)
{
    (void)state;
    for (int mode = NM_PIMC_TRACK_AUTO; mode <= NM_PIMC_TRACK_MPROTECT; mode += 2) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) _exit(chain_child(mode));
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* A buffer rewritten completely between copies stops being protected after one interval
 * (no fault per page for nothing): later intervals fault at most on the sample runs that
 * measure the write rate now and then; its copies stay right. Both backends. */
static void test_tracking_adaptive(void **state)
{
    (void)state;
    for (int mode = NM_PIMC_TRACK_UFFD; mode <= NM_PIMC_TRACK_MPROTECT; mode++) {
        nm_pimc_memdev *m = mkdev(1, 4096 * KiB);
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.track_granule = 4096;
        o.track_mode = mode;
        nm_pimc *c = mkcache(m, &o);
        size_t len = 1024 * KiB, pages = len / 4096;
        uint8_t *p = map_pages(len);
        nm_pimc_reg *reg;
        nm_err re = nm_pimc_register(c, p, len, &reg);
        if (re == NM_ENOTSUP) {
            nm_pimc_destroy(c);
            munmap(p, len);
            nm_pimc_memdev_destroy(m);
            continue;
        }
        assert_int_equal(re, NM_OK);
        const void *b[1] = {p};
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(44));
        uint64_t faults[8], last[8];
        for (int i = 0; i < 8; i++) {
            fill_blocks(&r, p, len, 1024, 0, NULL, 0);
            copy_ok(c, 0, b, &len);
            check_read_back(c, 0, 0, p, len);
            nm_pimc_stats st;
            nm_pimc_get_stats(c, &st);
            faults[i] = st.write_faults;
            last[i] = st.last_write_faults;
            assert_true(st.fault_ns > 0);
            if (i == 1) assert_true(st.last_fault_cost_ns > 0);
        }
        /* the first interval faults once per page; later ones only on the sample (one 64 KiB
         * run: this buffer has fewer than 64) */
        assert_true(faults[1] - faults[0] >= pages - 1);
        assert_true(last[1] >= pages - 1);
        for (int i = 3; i < 8; i++) {
            assert_true(faults[i] - faults[i - 1] <= 16);
            assert_true(last[i] <= 16);
        }
        nm_pimc_destroy(c);
        munmap(p, len);
        nm_pimc_memdev_destroy(m);
    }
}

/* A buffer written a little between copies stays tracked: only the written pages are
 * read; with a sparse write pattern tracking goes off and comes back when writes stop. */
static void test_tracking_comes_back(void **state)
{
    (void)state;
    for (int mode = NM_PIMC_TRACK_UFFD; mode <= NM_PIMC_TRACK_MPROTECT; mode++) {
        nm_pimc_memdev *m = mkdev(1, 8192 * KiB);
        nm_pimc_options o;
        nm_pimc_options_default(&o);
        o.track_granule = 4096;
        o.track_mode = mode;
        nm_pimc *c = mkcache(m, &o);
        size_t len = 4096 * KiB, pages = len / 4096;
        uint8_t *p = map_pages(len);
        nm_rng r;
        nm_rng_seed(&r, nm_test_seed(45));
        fill_blocks(&r, p, len, 1024, 0, NULL, 0);
        nm_pimc_reg *reg;
        nm_err re = nm_pimc_register(c, p, len, &reg);
        if (re == NM_ENOTSUP) {
            nm_pimc_destroy(c);
            munmap(p, len);
            nm_pimc_memdev_destroy(m);
            continue;
        }
        assert_int_equal(re, NM_OK);
        const void *b[1] = {p};
        nm_pimc_stats st;
        for (int i = 0; i < 12; i++) {
            /* rounds 2-4: every page written; then nothing, or a few pages */
            if (i >= 2 && i <= 4)
                for (size_t g = 0; g < pages; g++) p[g * 4096 + (size_t)i] ^= 1;
            else if (i >= 8)
                for (size_t g = 0; g < pages; g += 97) p[g * 4096 + 7] ^= 1;
            copy_ok(c, 0, b, &len);
            check_read_back(c, 0, 0, p, len);
            nm_pimc_get_stats(c, &st);
            if (i == 1) assert_true(st.last_clean_bytes + 8192 >= len); /* tracked */
            if (i >= 3 && i <= 5) assert_int_equal(st.last_clean_bytes, 0); /* sampled only */
            if (i >= 6) assert_true(st.last_clean_bytes >= len / 2); /* tracked again */
        }
        nm_pimc_destroy(c);
        munmap(p, len);
        nm_pimc_memdev_destroy(m);
    }
}

/* A fork child copying from a registration it inherited uses its own tracking (the parent's
 * descriptors address the parent's memory), and the parent's tracking goes on unharmed. */
static int fork_child(nm_pimc *c, nm_pimc_memdev *m, uint8_t *p, size_t len)
{
    p[12345] ^= 0x77; /* written in the child only */
    const void *b[1] = {p};
    for (int i = 0; i < 3; i++) {
        if (i == 2) p[len - 5000] ^= 1;
        if (nm_pimc_copy(c, 0, b, &len)) return 1;
        uint8_t *got = malloc(len);
        if (!got || nm_pimc_read_back(c, 0, 0, got, len) || memcmp(got, p, len)) return 2;
        free(got);
    }
    (void)m;
    return 0;
}

static void test_tracking_fork(void **state)
{
    (void)state;
    nm_pimc_memdev *m = mkdev(1, 4096 * KiB);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    nm_pimc *c = mkcache(m, &o);
    size_t len = 1024 * KiB;
    uint8_t *p = map_pages(len);
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(46));
    fill_blocks(&r, p, len, 1024, 0, NULL, 0);
    nm_pimc_reg *reg;
    assert_int_equal(nm_pimc_register(c, p, len, &reg), NM_OK);
    const void *b[1] = {p};
    copy_ok(c, 0, b, &len);
    copy_ok(c, 0, b, &len);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(fork_child(c, m, p, len));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the parent: its buffer unchanged by the child, its tracking intact */
    copy_ok(c, 0, b, &len);
    check_read_back(c, 0, 0, p, len);
    nm_pimc_stats st;
    nm_pimc_get_stats(c, &st);
    assert_true(st.last_clean_bytes + 8192 >= len);
    p[777] ^= 0x42;
    copy_ok(c, 0, b, &len);
    check_read_back(c, 0, 0, p, len);
    nm_pimc_destroy(c);
    munmap(p, len);
    nm_pimc_memdev_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_engine),   cmocka_unit_test(test_parallel_decision),
        cmocka_unit_test(test_cdc_shift),         cmocka_unit_test(test_cdc_options),
        cmocka_unit_test(test_tracking_repeats),  cmocka_unit_test(test_tracking_unmapped),
        cmocka_unit_test(test_tracking_errors),   cmocka_unit_test(test_tracking_chains),
        cmocka_unit_test(test_tracking_adaptive), cmocka_unit_test(test_tracking_comes_back),
        cmocka_unit_test(test_tracking_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
