/* PIM-malloc stress kernel, plain UPMEM C (see test_machine.c): random
 * pimMalloc/pimFree per tasklet with stamped blocks, cross-tasklet frees, the
 * paper's API. Built with NR_TASKLETS=TASKLETS and PIM-malloc's DPU sources. */
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <stdint.h>

#include "../stress_common.h"
#include "nearmem/common/prng.h"
#include "nearmem/pim_malloc_dpu.h"

__host uint32_t k_mode; /* 0 init, 1 random ops, 2 free all + release + check, 3 teardown, 4 paper API */
__host nm_pimm_config k_cfg;
__host uint64_t k_seed;
__host uint32_t k_ops;
__host uint32_t k_addr[NR_TASKLETS * SLOTS];
__host uint32_t k_size[NR_TASKLETS * SLOTS];
__host uint32_t k_bad[NR_TASKLETS]; /* reference-model violations seen on the DPU */
__host uint32_t k_oom[NR_TASKLETS];
__host uint32_t k_err;
__host uint64_t k_free_bytes;
__host uint32_t k_heap_base;
__host uint32_t k_check;
__host nm_pimm_stats k_stats;
nm_rng k_rng[NR_TASKLETS];
/* Cross-tasklet frees: tasklet t publishes a block in k_hand[t] (addr, size);
 * tasklet t+1 takes and frees it. On the emulator tasklets switch only at
 * runtime calls (DMA, mutex, barrier), so the read-and-clear below is atomic
 * (on hardware it would need a mutex). */
__host uint32_t k_hand[NR_TASKLETS * 2];
__host uint32_t k_nt;
BARRIER_INIT(k_bar, NR_TASKLETS);

static uint64_t stamp(uint32_t a, uint32_t size) { return ((uint64_t)a << 32) ^ size ^ 0x5a5a5a5a00000000ull; }

#define MRAM(a) ((__mram_ptr void *)(uintptr_t)(a))
#define ADDR(p) ((uint32_t)(uintptr_t)(p))

static void put(uint32_t a, uint32_t size)
{
    uint64_t v __dma_aligned = stamp(a, size);
    mram_write(&v, MRAM(a), 8);
    mram_write(&v, MRAM(a + ((size + 7) & ~7u) - 8), 8);
}

static int ok(uint32_t a, uint32_t size)
{
    uint64_t v __dma_aligned, w __dma_aligned;
    mram_read(MRAM(a), &v, 8);
    mram_read(MRAM(a + ((size + 7) & ~7u) - 8), &w, 8);
    return v == stamp(a, size) && w == stamp(a, size);
}

int main(void)
{
    unsigned t = me();
    if (k_mode == 0) {
        if (t == 0) {
            k_err = nm_pimm_dpu_init(&k_cfg);
            if (!k_err) k_heap_base = nm_pimm_get_config(nm_pimm_dpu_heap())->heap_base;
        }
        nm_rng_seed_stream(&k_rng[t], k_seed, t);
        return 0;
    }
    if (k_mode == 4) { /* the paper's API (Table II) with custom size classes */
        static const uint32_t classes[] = {24, 200, 0};
        if (t == 0) {
            initAllocator(1u << 20, classes);
            __mram_ptr uint8_t *a = pimMalloc(20), *b = pimMalloc(20), *c = pimMalloc(150), *big = pimMalloc(5000);
            if (!a || b != a + 24 || !c || ADDR(c) % 8 || !big || ADDR(big) % 4096) k_bad[0]++;
            if (pimMalloc(0) || pimMalloc(2u << 20)) k_bad[0]++;
            a[3] = 7; /* the blocks are MRAM: direct access works */
            if (a[3] != 7) k_bad[0]++;
            pimFree(a);
            pimFree(a); /* double free: counted, not fatal */
            pimFree(b + 4);
            pimFree(b);
            pimFree(c);
            pimFree(big);
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &k_stats);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    if (k_mode == 3) {
        if (t == 0) {
            nm_pimm_get_stats(nm_pimm_dpu_heap(), &k_stats);
            k_check = nm_pimm_check(nm_pimm_dpu_heap(), &k_free_bytes);
            nm_pimm_dpu_teardown();
        }
        return 0;
    }
    uint32_t *addr = &k_addr[t * SLOTS], *size = &k_size[t * SLOTS];
    if (k_mode == 2) {
        unsigned from = (t + 1) % k_nt;
        if (k_hand[2 * from]) { /* the last handoffs (published in mode 1) */
            if (!ok(k_hand[2 * from], k_hand[2 * from + 1])) k_bad[t]++;
            if (nm_pimm_free(nm_pimm_dpu_heap(), k_hand[2 * from]) != NM_OK) k_bad[t]++;
            k_hand[2 * from] = 0;
        }
        barrier_wait(&k_bar); /* every cross-tasklet free is queued before caches are released */
        for (int i = 0; i < SLOTS; i++)
            if (addr[i]) {
                if (!ok(addr[i], size[i])) k_bad[t]++;
                if (nm_pimm_free(nm_pimm_dpu_heap(), addr[i]) != NM_OK) k_bad[t]++;
                addr[i] = 0;
            }
        nm_pimm_release_cache(nm_pimm_dpu_heap());
        return 0;
    }
    nm_rng *r = &k_rng[t];
    unsigned from = (t + 1) % k_nt;
    for (uint32_t op = 0; op < k_ops; op++) {
        if (op % 8 == 0 && k_hand[2 * from]) {
            uint32_t a = k_hand[2 * from], sz = k_hand[2 * from + 1];
            k_hand[2 * from] = 0;
            if (!ok(a, sz)) k_bad[t]++;
            if (nm_pimm_free(nm_pimm_dpu_heap(), a) != NM_OK) k_bad[t]++;
        }
        if (op % 8 == 4 && !k_hand[2 * t]) {
            uint32_t sz = (uint32_t)nm_rng_range(r, 1, 600), a = ADDR(pimMalloc(sz));
            if (a) {
                put(a, sz);
                k_hand[2 * t + 1] = sz;
                k_hand[2 * t] = a;
            }
        }
        unsigned i = (unsigned)nm_rng_below(r, SLOTS);
        if (addr[i]) {
            if (!ok(addr[i], size[i])) k_bad[t]++;
            pimFree(MRAM(addr[i]));
            addr[i] = 0;
        } else {
            uint64_t k = nm_rng_below(r, 100);
            uint32_t sz = (uint32_t)(k < 75 ? nm_rng_range(r, 1, 300) : k < 95 ? nm_rng_range(r, 301, 2048)
                                                                               : nm_rng_range(r, 2049, 20000));
            uint32_t a = ADDR(pimMalloc(sz));
            if (!a) {
                k_oom[t]++;
                continue;
            }
            addr[i] = a;
            size[i] = sz;
            put(a, sz);
        }
    }
    return 0;
}

