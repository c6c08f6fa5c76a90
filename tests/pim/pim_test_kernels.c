#include "pim_test_kernels.h"

#include <stdlib.h>
#include <string.h>

#include "nearmem/pim/dpu.h"

DPU_PROGRAM(pim_test);

DPU_HOST(uint32_t, mode);
DPU_HOST(uint64_t, arg0);
DPU_HOST(uint64_t, arg1);
DPU_HOST(uint64_t, arg2);
DPU_HOST(uint64_t, res, [NM_PIM_MAX_TASKLETS]);
DPU_HOST(uint64_t, res2);
DPU_HOST(uint64_t, res3);
DPU_HOST(uint64_t, g_tag);
DPU_WRAM(uint64_t, g_counter) = 0;
DPU_WRAM(uint64_t, slot, [NM_PIM_MAX_TASKLETS]);
DPU_WRAM(uint64_t *, g_ptr);
DPU_MRAM_NOINIT(uint64_t, mvar, [64]);
MUTEX_INIT(mtx);
MUTEX_INIT(mtx2);
BARRIER_INIT(bar, NR_TASKLETS);
BARRIER_INIT(bar30, 30);
SEMAPHORE_INIT(sem, 0);

void *g_hostbuf;

typedef struct hw_counter_state {
    uint64_t execs;
} hw_counter_state;
static void hw_reset(void *s) { ((hw_counter_state *)s)->execs = 0; }
static const nm_pim_hw_unit g_unit = {"test-counter", sizeof(hw_counter_state), hw_reset};

static void do_fault(uint32_t kind)
{
    uint64_t *buf = mem_alloc(64);
    uint32_t heap = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
    switch (kind) {
    case F_DMA_SIZE_SMALL: mram_read(heap, buf, 4); break;
    case F_DMA_SIZE_ODD: mram_read(heap, buf, 12); break;
    case F_DMA_SIZE_BIG: mram_read(heap, buf, 4096); break;
    case F_DMA_MRAM_ALIGN: mram_read(heap + 4, buf, 8); break;
    case F_DMA_WRAM_ALIGN: mram_read(heap, (char *)buf + 4, 8); break;
    case F_MRAM_BELOW: mram_read(NM_PIM_MRAM_BASE - 8, buf, 8); break;
    case F_MRAM_ABOVE: mram_read(NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE - 8, buf, 16); break;
    case F_MRAM_HOSTPTR: mram_read(buf, buf, 8); break;
    case F_WRITE_ABOVE: mram_write(buf, NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE, 8); break;
    case F_HEAP_OVERFLOW: (void)mem_alloc(NM_PIM_WRAM_SIZE); break;
    case F_DEADLOCK: mutex_lock(mtx); mutex_lock(mtx); break;
    case F_BAD_UNLOCK: mutex_unlock(mtx2); break;
    case F_BARRIER_COUNT: barrier_wait(&bar30); break;
    case F_KERNEL: nm_pim_fault("test fault"); break;
    case F_HW_REFUSE: nm_pim_hw_refuse(&g_unit, "test refusal"); break;
    case F_WRAM_HOSTPTR: {
        uint64_t *h = malloc(64);
        g_hostbuf = h; /* freed by the host test */
        mram_read(heap, h, 8);
        break;
    }
    case F_STACK_DMA: {
        uint64_t local[4] __dma_aligned;
        mram_read(heap, local, sizeof(local));
        mram_read(heap, slot, 16);
        mram_write(&res2, heap + 64, 8);
        break;
    }
    default: break;
    }
}

/* Small deterministic generator for M_MIX. */
static uint64_t mix_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int DPU_MAIN(void)
{
    const uint32_t tid = me();
    switch (mode) {
    case M_COPY: {
        uint64_t *b = mem_alloc(PIM_TEST_BLOCK);
        uint32_t addr = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + tid * PIM_TEST_BLOCK;
        mram_read(addr, b, PIM_TEST_BLOCK);
        for (uint32_t i = 0; i < PIM_TEST_BLOCK / 8; i++)
            b[i] += arg0;
        nm_pim_charge(PIM_TEST_BLOCK / 8 * 4);
        mram_write(b, addr, PIM_TEST_BLOCK);
        break;
    }
    case M_CHARGE:
        nm_pim_charge((uint32_t)arg0);
        res[tid] = nm_pim_cycle();
        break;
    case M_CHARGE2:
        nm_pim_charge((uint32_t)(arg0 + tid * arg1));
        res[tid] = nm_pim_cycle();
        break;
    case M_PTR:
        if (tid == 0) {
            if (arg0 == 0) {
                g_ptr = &slot[3];
                slot[3] = g_tag;
            } else {
                res[0] = *g_ptr;
            }
        }
        break;
    case M_DMA_TIMING:
        if (tid == 0) {
            uint64_t *b = mem_alloc(PIM_TEST_BLOCK);
            uint64_t c0 = nm_pim_cycle();
            mram_read(DPU_MRAM_HEAP_POINTER, b, (uint32_t)arg0);
            uint64_t c1 = nm_pim_cycle();
            mram_write(b, DPU_MRAM_HEAP_POINTER, (uint32_t)arg0);
            uint64_t c2 = nm_pim_cycle();
            res[0] = c1 - c0;
            res[1] = c2 - c1;
        }
        break;
    case M_FAULT:
        if (tid == arg2)
            do_fault((uint32_t)arg0);
        nm_pim_charge(100);
        break;
    case M_FAULT_DMA:
        if (tid == arg2) {
            nm_pim_charge((uint32_t)arg0);
            mutex_unlock(mtx2);
        } else {
            uint64_t *b = mem_alloc(PIM_TEST_BLOCK);
            uint32_t addr = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + tid * PIM_TEST_BLOCK;
            for (int k = 0; k < 8; k++) {
                mram_read(addr, b, (uint32_t)arg1);
                nm_pim_charge(tid * 3 + 1);
            }
        }
        break;
    case M_MUTEX:
        for (uint64_t i = 0; i < arg0; i++) {
            if (!arg1)
                mutex_lock(mtx);
            uint64_t v = g_counter;
            nm_pim_charge(5);
            (void)nm_pim_cycle(); /* lets other tasklets run between the read and the write */
            g_counter = v + 1;
            if (!arg1)
                mutex_unlock(mtx);
        }
        barrier_wait(&bar);
        if (tid == 0)
            res[0] = g_counter;
        break;
    case M_TRYLOCK:
        res[tid] = mutex_trylock(mtx);
        if (res[tid]) {
            nm_pim_charge((uint32_t)arg0);
            mutex_unlock(mtx);
        }
        break;
    case M_BARRIER: {
        uint64_t errors = 0;
        for (uint64_t p = 0; p < arg0; p++) {
            slot[tid] = p * 100 + tid;
            nm_pim_charge(tid * 7 + 1); /* unequal arrival times */
            barrier_wait(&bar);
            for (uint32_t j = 0; j < NR_TASKLETS; j++)
                errors += slot[j] != p * 100 + j;
            barrier_wait(&bar);
        }
        mutex_lock(mtx);
        res[0] += errors;
        mutex_unlock(mtx);
        break;
    }
    case M_SEM:
        if (tid == 0) {
            nm_pim_charge(500); /* takers are stopped by then */
            for (uint32_t i = 1; i < NR_TASKLETS; i++)
                sem_give(&sem);
        } else {
            sem_take(&sem);
            mutex_lock(mtx);
            res[0]++;
            mutex_unlock(mtx);
        }
        break;
    case M_GLOBALS: {
        for (uint64_t i = 0; i < arg0; i++) {
            mutex_lock(mtx);
            g_counter += g_tag;
            mutex_unlock(mtx);
        }
        barrier_wait(&bar);
        if (tid == 0) {
            uint64_t *b = mem_alloc(8);
            *b = g_counter;
            mram_write(b, &mvar[0], 8);
        }
        break;
    }
    case M_HEAP: {
        uint8_t *p = mem_alloc((size_t)arg0);
        res[tid] = (uint64_t)(uintptr_t)p;
        memset(p, (int)tid, (size_t)arg0);
        barrier_wait(&bar);
        if (tid == 0) {
            mem_reset();
            uint8_t *q = mem_alloc(8);
            res2 = (uint64_t)(uintptr_t)q;
        }
        break;
    }
    case M_PERF:
        if (tid == 0) {
            perfcounter_config(COUNT_CYCLES, true);
            nm_pim_charge(100);
            res[0] = perfcounter_get();
            perfcounter_config(COUNT_INSTRUCTIONS, true);
            nm_pim_charge(100);
            res[1] = perfcounter_get();
            res[2] = perfcounter_config(COUNT_NOTHING, false);
            res[3] = perfcounter_get();
        }
        break;
    case M_HW: {
        hw_counter_state *s = nm_pim_hw_state(&g_unit);
        uint64_t c0 = nm_pim_cycle();
        for (uint64_t i = 0; i < arg0; i++) {
            nm_pim_hw_exec(&g_unit, (uint32_t)arg1);
            s->execs++;
        }
        uint64_t c1 = nm_pim_cycle();
        if (tid == 0) {
            res[0] = c1 - c0;
            res[1] = s->execs;
        }
        break;
    }
    case M_ME:
        res[tid] = me();
        res2 = NR_TASKLETS;
        res3 = (uint64_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
        break;
    case M_MIX: {
        uint64_t s = arg0 * 0x9E3779B97F4A7C15ull + tid + 1;
        uint64_t *b = mem_alloc(256);
        uint32_t base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + tid * 4096;
        for (int round = 0; round < 20; round++) {
            uint64_t r = mix_next(&s);
            nm_pim_charge((uint32_t)(r % 300));
            uint32_t sz = (uint32_t)(8 + (r >> 20) % 32 * 8);
            if (r & 1)
                mram_read(base + (uint32_t)((r >> 40) % 8) * 256, b, sz);
            else
                mram_write(b, base + (uint32_t)((r >> 40) % 8) * 256, sz);
            if (r & 2) {
                mutex_lock(mtx);
                g_counter += r & 0xff;
                nm_pim_charge((uint32_t)((r >> 8) % 40));
                mutex_unlock(mtx);
            }
            if (round % 5 == 4)
                barrier_wait(&bar);
        }
        res[tid] = s;
        break;
    }
    default:
        break;
    }
    return 0;
}

void pim_test_set_args(struct dpu_set_t set, uint32_t m, uint64_t a0, uint64_t a1, uint64_t a2)
{
    uint64_t zero[NM_PIM_MAX_TASKLETS] = {0};
    DPU_ASSERT(dpu_copy_to(set, "mode", 0, &m, sizeof(m)));
    DPU_ASSERT(dpu_copy_to(set, "arg0", 0, &a0, 8));
    DPU_ASSERT(dpu_copy_to(set, "arg1", 0, &a1, 8));
    DPU_ASSERT(dpu_copy_to(set, "arg2", 0, &a2, 8));
    DPU_ASSERT(dpu_copy_to(set, "res", 0, zero, sizeof(zero)));
}

uint64_t pim_test_res(struct dpu_set_t dpu, uint32_t i)
{
    uint64_t v = 0;
    DPU_ASSERT(dpu_copy_from(dpu, "res", i * 8, &v, 8));
    return v;
}
