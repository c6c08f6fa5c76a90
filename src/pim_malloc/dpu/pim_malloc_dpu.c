/* PIM-malloc's binding to a DPU program in plain UPMEM C: the allocator's
 * environment over the SDK (mram_read/mram_write, a mutex, me()), its WRAM
 * arena, the buddy cache as a modeled hardware unit, and the paper's API.
 * Compiled as DPU code with the allocator's core (../pim_malloc.c). */
#include <alloc.h>
#include <defs.h>
#include <mram.h>
#include <mutex.h>
#include <nearmem_pim.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../pimm_internal.h"
#include "nearmem/pim_malloc_dpu.h"

MUTEX_INIT(nm_pimm_mutex);
/* The modeled budget (NM_PIMM_DPU_WRAM_BYTES: thread caches and metadata
 * store, checked at init) plus the allocator object and the buddy cache's
 * state (hardware, up to 64 entries). */
#define NM_PIMM_ARENA_BYTES (NM_PIMM_DPU_WRAM_BYTES + sizeof(struct nm_pimm) + 256 + 64 * sizeof(bc_entry))
static uint64_t nm_pimm_arena[(NM_PIMM_ARENA_BYTES + 7) / 8];
static uint32_t nm_pimm_arena_top;
static uint64_t nm_pimm_stats_area[(NM_PIMM_MAX_TASKLETS * sizeof(tstats) + 7) / 8];
static nm_pimm *nm_pimm_heap;
static char nm_pimm_msg[160];

/* The buddy cache (paper Sec. IV-B): its state is kept by the allocator; the
 * unit is declared so its instructions are issued and counted as
 * hardware-unit operations of 1 cycle (Sec. V: "a buddy cache access latency
 * of 1 PIM core cycle"). */
static const nm_pim_hw_unit nm_pimm_buddy_cache_unit = {"pim_malloc.buddy_cache", 8, NULL};

void *nm_pimm__wram_calloc(size_t n, size_t size, bool stats)
{
    size_t bytes = (n * size + 7) & ~(size_t)7;
    if (stats) {
        if (bytes > sizeof(nm_pimm_stats_area))
            return NULL;
        memset(nm_pimm_stats_area, 0, bytes);
        return nm_pimm_stats_area;
    }
    if (bytes > sizeof(nm_pimm_arena) - nm_pimm_arena_top)
        return NULL;
    void *p = (uint8_t *)nm_pimm_arena + nm_pimm_arena_top;
    nm_pimm_arena_top += (uint32_t)bytes;
    memset(p, 0, bytes);
    return p;
}

/* nearmem's error convention, without thread-local storage: one message per
 * DPU (a WRAM global), formatted by the host C library's vsnprintf (the DPU
 * runtime's <stdio.h> has only printf/puts/putchar, as the SDK's). */
int vsnprintf(char *restrict s, size_t n, const char *restrict fmt, va_list ap);
nm_err nm_fail(nm_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nm_pimm_msg, sizeof(nm_pimm_msg), fmt, ap);
    va_end(ap);
    return e;
}

const char *nm_last_errmsg(void) { return nm_pimm_msg; }

/* The allocator's environment on the DPU: the SDK, called directly
 * (pimm_internal.h, ENV_*). */
void nm_pimm__dpu_read(uint32_t addr, void *wram, uint32_t n)
{
    mram_read((__mram_ptr const void *)(uintptr_t)addr, wram, n);
}

void nm_pimm__dpu_write(const void *wram, uint32_t addr, uint32_t n)
{
    mram_write(wram, (__mram_ptr void *)(uintptr_t)addr, n);
}

void nm_pimm__dpu_lock(void) { mutex_lock(nm_pimm_mutex); }
void nm_pimm__dpu_unlock(void) { mutex_unlock(nm_pimm_mutex); }
unsigned nm_pimm__dpu_me(void) { return me(); }

/* n instructions of the buddy cache, issued on its unit (modeled hardware). */
void nm_pimm__dpu_hw(uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        nm_pim_hw_exec(&nm_pimm_buddy_cache_unit, 0);
}

/* The same operations for nm_pimm_env (nm_pimm_create checks it; the core
 * calls the functions above directly). */
static void d_read(void *ctx, uint32_t addr, void *wram, uint32_t n)
{
    (void)ctx;
    nm_pimm__dpu_read(addr, wram, n);
}
static void d_write(void *ctx, const void *wram, uint32_t addr, uint32_t n)
{
    (void)ctx;
    nm_pimm__dpu_write(wram, addr, n);
}
static void d_lock(void *ctx) { (void)ctx; nm_pimm__dpu_lock(); }
static void d_unlock(void *ctx) { (void)ctx; nm_pimm__dpu_unlock(); }
static unsigned d_me(void *ctx) { (void)ctx; return nm_pimm__dpu_me(); }
static void d_hw(void *ctx, uint32_t n) { (void)ctx; nm_pimm__dpu_hw(n); }

uint32_t nm_pimm_dpu_heap_base(void)
{
    return ((uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + NM_PIMM_BLOCK - 1) & ~(NM_PIMM_BLOCK - 1);
}

void nm_pimm_dpu_teardown(void)
{
    nm_pimm_destroy(nm_pimm_heap);
    nm_pimm_heap = NULL;
    nm_pimm_arena_top = 0;
}

nm_err nm_pimm_dpu_init(const nm_pimm_config *cfg)
{
    nm_pimm_config c = *cfg;
    if (!c.heap_base)
        c.heap_base = nm_pimm_dpu_heap_base();
    nm_pimm_env env = {NULL, d_read, d_write, d_lock, d_unlock, d_me, d_hw};
    nm_pimm_dpu_teardown();
    nm_err e = nm_pimm_create(&nm_pimm_heap, &c, &env);
    if (e) {
        nm_pimm_dpu_teardown();
        if (e == NM_ENOMEM)
            nm_fail(NM_ENOMEM, "pim_malloc: the configuration needs more than the %u bytes of WRAM reserved "
                    "(NM_PIMM_DPU_WRAM_BYTES)", NM_PIMM_DPU_WRAM_BYTES);
        return e;
    }
    nm_pimm_stats st;
    nm_pimm_get_stats(nm_pimm_heap, &st);
    if (st.wram_bytes > NM_PIMM_DPU_WRAM_BYTES) {
        nm_pimm_dpu_teardown();
        return nm_fail(NM_ENOMEM, "pim_malloc: needs %u bytes of WRAM, the kernel reserved %u (NM_PIMM_DPU_WRAM_BYTES)",
                       st.wram_bytes, NM_PIMM_DPU_WRAM_BYTES);
    }
    return NM_OK;
}

nm_pimm *nm_pimm_dpu_heap(void) { return nm_pimm_heap; }

void initAllocator(uint32_t heap_size, const uint32_t *size_classes)
{
    nm_pimm_config c;
    nm_pimm_config_default(&c, NM_PIMM_SW, 0);
    c.heap_size = heap_size;
    c.tasklets = NR_TASKLETS;
    for (unsigned i = 0; size_classes && i < NM_PIMM_MAX_CLASSES && size_classes[i]; i++)
        c.classes[c.nclasses++] = size_classes[i];
    if (nm_pimm_dpu_init(&c) != NM_OK)
        nm_pim_fault(nm_last_errmsg());
}

__mram_ptr void *pimMalloc(uint32_t size) { return (__mram_ptr void *)(uintptr_t)nm_pimm_malloc(nm_pimm_heap, size); }

void pimFree(__mram_ptr void *ptr) { (void)nm_pimm_free(nm_pimm_heap, (uint32_t)(uintptr_t)ptr); }
