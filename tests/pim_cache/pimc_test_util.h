/* Helpers shared by the PIM-CACHE tests: random buffers and two independent ways to read a
 * slot back (through the transport, and with the DPU-side reader on the MRAM itself). */
#ifndef PIMC_TEST_UTIL_H
#define PIMC_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/util.h"

#include "nearmem/common/prng.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_dpu.h"
#include "nm_test.h"

typedef struct test_io {
    nm_pimc_memdev *m;
    unsigned dpu;
    int violations;
} test_io;

static void tio_read(void *ctx, uint32_t off, void *wram, uint32_t n)
{
    test_io *t = ctx;
    if ((off & 7u) || (n & 7u) || n == 0 || n > NM_PIMC_DMA_MAX || ((uintptr_t)wram & 7u)) {
        t->violations++;
        return;
    }
    memcpy(wram, nm_pimc_memdev_mram(t->m, t->dpu) + off, n);
}

static void tio_write(void *ctx, const void *wram, uint32_t off, uint32_t n)
{
    test_io *t = ctx;
    if ((off & 7u) || (n & 7u) || n == 0 || n > NM_PIMC_DMA_MAX || ((uintptr_t)wram & 7u)) {
        t->violations++;
        return;
    }
    memcpy(nm_pimc_memdev_mram(t->m, t->dpu) + off, wram, n);
}

/* Read slot `slot` of `dpu` with the DPU-side reader, tasklet by tasklet (stride), and
 * compare with want[0..len). */
static inline void check_dpu_reader(nm_pimc *c, nm_pimc_memdev *m, unsigned slot, unsigned dpu, const uint8_t *want,
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
            size_t at = (size_t)idx * r.d.block_size;
            assert_true(at + n <= len);
            assert_memory_equal(blk, want + at, n);
            covered += n;
        }
    }
    assert_int_equal(covered, len);
    assert_int_equal(t.violations, 0);
}

static inline void check_read_back(nm_pimc *c, unsigned slot, unsigned dpu, const uint8_t *want, size_t len)
{
    uint8_t *got = malloc(len ? len : 1);
    assert_non_null(got);
    nm_err rbe = nm_pimc_read_back(c, slot, dpu, got, len);
    if (rbe) fprintf(stderr, "read back: %s\n", nm_last_errmsg());
    assert_int_equal(rbe, NM_OK);
    if (len) assert_memory_equal(got, want, len);
    free(got);
}

/* Random bytes; with probability `rep`, a block is a copy of one of a few pool blocks. */
static inline void fill_blocks(nm_rng *r, uint8_t *p, size_t len, size_t bs, double rep, const uint8_t *pool,
                               unsigned npool)
{
    for (size_t at = 0; at < len; at += bs) {
        size_t n = len - at < bs ? len - at : bs;
        if (pool && npool && nm_rng_double(r) < rep) {
            memcpy(p + at, pool + nm_rng_below(r, npool) * bs, n);
        } else {
            for (size_t i = 0; i < n; i++) p[at + i] = (uint8_t)nm_rng_u64(r);
        }
    }
}

#endif
