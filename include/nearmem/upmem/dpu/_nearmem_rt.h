/* nearmem's DPU runtime entry points, used by the SDK-named headers in this
 * directory (defs.h, mram.h, mutex.h, ...). Not part of the UPMEM API: a
 * kernel never calls them directly. They are implemented in
 * src/pim/dpurt/rt.c, which nearmem-dpu-cc links into every program, and
 * forward to the emulated machine (docs/pim-machine.md). */
#ifndef NEARMEM_UPMEM_DPU_RT_H
#define NEARMEM_UPMEM_DPU_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef __NEARMEM_DPU__
#error "this header is for DPU programs built with nearmem-dpu-cc (dpu-upmem-dpurte-clang)"
#endif

/* The program's build-time constants, left for the pass plugin to read. */
#ifdef NR_TASKLETS
static const unsigned __nm_nr_tasklets_val __attribute__((used)) = (NR_TASKLETS);
#endif
#ifdef STACK_SIZE_DEFAULT
static const unsigned __nm_stack_size_val __attribute__((used)) = (STACK_SIZE_DEFAULT);
#endif

unsigned int __nm_me(void);
void __nm_dma_read(uint32_t mram, void *wram, uint32_t n);
void __nm_dma_write(const void *wram, uint32_t mram, uint32_t n);
void __nm_dma_read_unaligned(uint32_t mram, void *wram, uint32_t n);
void __nm_dma_write_unaligned(const void *wram, uint32_t mram, uint32_t n);
void *__nm_mem_alloc(size_t size);
void *__nm_mem_reset(void);
void __nm_mutex_lock(uint32_t bit);
bool __nm_mutex_trylock(uint32_t bit);
void __nm_mutex_unlock(uint32_t bit);
void __nm_barrier_wait(void *barrier);
void __nm_sem_take(void *sem);
void __nm_sem_give(void *sem);
void __nm_handshake_notify(void);
int __nm_handshake_wait_for(unsigned int notifier);
uint64_t __nm_perfcounter_config(uint32_t config, bool reset);
uint64_t __nm_perfcounter_get(void);
__attribute__((noreturn)) void __nm_fault(const char *why);

/* mram_read/mram_write with a constant size that is not a multiple of 8 do
 * not compile with UPMEM's compiler either (see docs/pim-machine.md,
 * "Hardware semantics"). */
__attribute__((error("mram_read/mram_write: a constant transfer size must be a multiple of 8"))) void
__nm_dma_constant_size_not_multiple_of_8(void);
#define __NM_DMA_CONSTANT_CHECK(n)                                                 \
    do {                                                                           \
        if (__builtin_constant_p(n) && ((n) % 8u) != 0)                            \
            __nm_dma_constant_size_not_multiple_of_8();                            \
    } while (0)

#endif
