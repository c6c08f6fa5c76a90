/* DPU side of nearmem's emulated UPMEM PIM machine: what a kernel includes
 * instead of the SDK's <mram.h> <defs.h> <mutex.h> <barrier.h> <sem.h>
 * <alloc.h> <perfcounter.h>.
 *
 * A kernel is ordinary C compiled into the host process. Porting a UPMEM
 * kernel (docs/pim-machine.md, "Porting a kernel"):
 *
 *   UPMEM C                                  nearmem
 *   -------------------------------------    -----------------------------------------
 *   (the binary's file name)                 DPU_PROGRAM(vector_add);   (first, once per file)
 *   int main(void) { ... }                   int DPU_MAIN(void) { ... }
 *   __host uint32_t n;                       DPU_HOST(uint32_t, n);
 *   uint32_t part[NR_TASKLETS] = {0};        DPU_WRAM(uint32_t, part, [NM_PIM_MAX_TASKLETS]) = {0};
 *   __mram_noinit uint64_t buf[1 << 20];     DPU_MRAM_NOINIT(uint64_t, buf, [1 << 20]);
 *   mram_read(&buf[i], w, 2048)              mram_read(&buf[i], w, 2048)   (unchanged)
 *   __mram_noinit uint64_t x;  ... &x        DPU_MRAM_NOINIT(uint64_t, x); ... x   (x is already the address)
 *   MUTEX_INIT(m); BARRIER_INIT(b, NR_TASKLETS); SEMAPHORE_INIT(s, 1);   unchanged
 *   (compute: implicit)                      nm_pim_charge(instructions)  (explicit)
 *
 * Why the macros: every DPU has its own WRAM, but native globals exist once
 * per process. DPU_WRAM/DPU_HOST globals are thread-local; the host thread
 * that emulates a DPU swaps that DPU's values in before it runs and out after
 * (the tasklets of a DPU all run as coroutines on that one thread), so the
 * kernel uses them by name, exactly as on the DPU, and they never alias
 * between DPUs. DPU_MRAM_NOINIT variables are 32-bit MRAM addresses (the same
 * on every DPU, as on the hardware), resolved per DPU by mram_read/write.
 *
 * Every mutable global of a kernel must use these macros: a plain global is
 * shared by all DPUs. One DPU_PROGRAM per file; DPU-side libraries are
 * headers (static functions + DPU_WRAM globals) included after it.
 *
 * Every call below must be made from a tasklet (a kernel running under
 * dpu_launch); called from a host thread they abort with a message, since
 * that is a programming error with no DPU to report it. */
#ifndef NEARMEM_PIM_DPU_H
#define NEARMEM_PIM_DPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nearmem/pim/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Address spaces -------------------------------------------------------- */
/* An MRAM address: NM_PIM_MRAM_BASE + offset, 32 bits as on the DPU. Use it
 * for MRAM pointers stored inside data structures (4 bytes, as on the DPU). */
typedef uint32_t mram_addr_t;
/* `__mram_ptr T *p` still compiles: p is a host-typed pointer whose value is
 * an MRAM address. Arithmetic works; dereferencing it is a bug (on the DPU it
 * would be a slow implicit DMA; here it crashes), so use mram_read/write. */
#define __mram_ptr
#define __dma_aligned __attribute__((aligned(8)))
typedef uint32_t sysname_t;

/* ---- Programs -------------------------------------------------------------- */
#ifndef STACK_SIZE_DEFAULT
#define STACK_SIZE_DEFAULT NM_PIM_STACK_SIZE_DEFAULT
#endif
#ifdef NR_TASKLETS
/* Compiled with a fixed NR_TASKLETS (as with -DNR_TASKLETS=16 on UPMEM). */
#define NM_PIM__DEFAULT_TASKLETS (NR_TASKLETS)
#define NM_PIM__FIXED_TASKLETS 1
#else
/* Chosen at run time by the host (nm_pim_set_tasklets; default 1 as in the
 * SDK). File-scope arrays use NM_PIM_MAX_TASKLETS instead. */
#define NR_TASKLETS (nm_pim_nr_tasklets())
#define NM_PIM__DEFAULT_TASKLETS 1u
#define NM_PIM__FIXED_TASKLETS 0
#endif

#define NM_PIM__CONCAT2(a, b) a##b
#define NM_PIM__CONCAT(a, b) NM_PIM__CONCAT2(a, b)

/* Names this file's program (what dpu_load finds) and registers it. Must come
 * before any DPU_WRAM/DPU_HOST/DPU_MRAM_NOINIT/MUTEX_INIT/... in the file. */
#define DPU_PROGRAM(pname)                                                                  \
    static int nm_pim__main(void);                                                          \
    static nm_pim_program_def nm_pim__this_program = {                                      \
        .name = #pname, .main_fn = nm_pim__main,                                            \
        .default_tasklets = NM_PIM__DEFAULT_TASKLETS | (NM_PIM__FIXED_TASKLETS ? 0x80000000u : 0u), \
        .stack_size = STACK_SIZE_DEFAULT};                                                  \
    __attribute__((constructor)) static void nm_pim__register_this_program(void)            \
    {                                                                                       \
        nm_pim__register_program(&nm_pim__this_program);                                    \
    }                                                                                       \
    struct nm_pim__program_semicolon_##pname
/* The kernel's entry point, run by every tasklet: `int DPU_MAIN(void) { ... }`. */
#define DPU_MAIN nm_pim__main

#define NM_PIM__REGISTER_TLS(nm_v_, kind_)                                                    \
    static void *nm_pim__addr_##nm_v_(void) { return (void *)&nm_v_; }                         \
    static nm_pim_symbol nm_pim__sym_##nm_v_ = {.name = #nm_v_, .kind = kind_,                \
                                               .size = (uint32_t)sizeof(nm_v_),              \
                                               .tls_addr = nm_pim__addr_##nm_v_};            \
    __attribute__((constructor)) static void nm_pim__reg_##nm_v_(void)                        \
    {                                                                                       \
        nm_pim__register_symbol(&nm_pim__this_program, &nm_pim__sym_##nm_v_);                 \
    }

/* A WRAM global, private to each DPU, shared by its tasklets, readable and
 * writable by the host by name. Optional dimensions and initializer:
 *   DPU_WRAM(uint32_t, counts, [NM_PIM_MAX_TASKLETS]);   DPU_WRAM(int, x) = 3; */
#define DPU_WRAM(type, nm_v_, ...)                                \
    static __thread type nm_v_ __VA_ARGS__ __dma_aligned;         \
    NM_PIM__REGISTER_TLS(nm_v_, NM_PIM_SYM_WRAM)                  \
    static __thread type nm_v_ __VA_ARGS__ __dma_aligned
/* UPMEM's __host: same as DPU_WRAM here (every global is host-visible). */
#define DPU_HOST(type, nm_v_, ...) DPU_WRAM(type, nm_v_, __VA_ARGS__)

/* An MRAM variable: `name` is a `type *` whose value is its MRAM address.
 *   DPU_MRAM_NOINIT(uint64_t, table, [4096]);  mram_read(&table[i], w, 8);   */
#define DPU_MRAM_NOINIT(type, nm_v_, ...)                                                     \
    static type *nm_v_;                                                                      \
    static nm_pim_symbol nm_pim__sym_##nm_v_ = {.name = #nm_v_, .kind = NM_PIM_SYM_MRAM,      \
                                               .size = (uint32_t)sizeof(type __VA_ARGS__), \
                                               .mram_ptr = (void **)&nm_v_};                 \
    __attribute__((constructor)) static void nm_pim__reg_##nm_v_(void)                        \
    {                                                                                       \
        nm_pim__register_symbol(&nm_pim__this_program, &nm_pim__sym_##nm_v_);                 \
    }                                                                                       \
    struct nm_pim__mram_semicolon_##nm_v_

/* First MRAM address after the program's MRAM variables (8-byte aligned). */
#define DPU_MRAM_HEAP_POINTER ((__mram_ptr void *)(uintptr_t)nm_pim_mram_heap_pointer())
mram_addr_t nm_pim_mram_heap_pointer(void);

/* ---- Tasklets --------------------------------------------------------------- */
sysname_t nm_pim_me(void);
uint32_t nm_pim_nr_tasklets(void);
#define me() nm_pim_me()

/* Charge `instructions` DPU instructions of compute to the calling tasklet.
 * The kernel charges its own compute (docs: "Charging compute"); the API
 * below charges its own instructions. Cheap: no context switch. */
void nm_pim_charge(uint32_t instructions);
/* Stop the DPU with NM_PIM_FAULT_KERNEL (UPMEM's `fault` instruction). */
__attribute__((noreturn)) void nm_pim_fault(const char *why);
/* Current modeled cycle of this DPU (flushes the caller's pending compute). */
uint64_t nm_pim_cycle(void);

/* ---- MRAM <-> WRAM DMA --------------------------------------------------------
 * UPMEM's rules: 8 <= size <= 2048, size % 8 == 0, both addresses 8-byte
 * aligned, MRAM range inside the 64 MiB bank, WRAM buffer inside WRAM (a
 * global, the tasklet's stack or the mem_alloc heap). A violation stops the
 * DPU. The tasklet blocks for alpha + beta*size cycles on the DPU's one DMA
 * engine (after the transfers queued before it). */
void nm_pim_mram_read(uint64_t mram_from, void *wram_to, uint32_t nb_of_bytes);
void nm_pim_mram_write(const void *wram_from, uint64_t mram_to, uint32_t nb_of_bytes);
#define mram_read(from, to, nb) nm_pim_mram_read((uint64_t)(uintptr_t)(from), (to), (nb))
#define mram_write(from, to, nb) nm_pim_mram_write((from), (uint64_t)(uintptr_t)(to), (nb))

/* ---- WRAM heap ---------------------------------------------------------------
 * Bump allocator over the WRAM left after globals and tasklet stacks; 8-byte
 * aligned; overflow stops the DPU (NM_PIM_FAULT_WRAM_OVERFLOW). Reset at
 * every launch. */
void *nm_pim_mem_alloc(size_t size);
void nm_pim_mem_reset(void);
#define mem_alloc(size) nm_pim_mem_alloc(size)
#define mem_reset() nm_pim_mem_reset()

/* ---- Synchronisation -----------------------------------------------------------
 * State lives in WRAM (per DPU), is reset at every launch, and is declared
 * with the SDK's macros. mutex_lock busy-waits: the waiter keeps issuing
 * instructions (its share of the pipeline) and its cycles count as lock wait.
 * Barriers and semaphores stop the waiting tasklet (no issue slots). */
typedef struct nm_pim_mutex {
    uint32_t owner; /* tasklet id + 1, 0 = free */
} nm_pim_mutex;
typedef nm_pim_mutex *mutex_id_t;
#define MUTEX_INIT(nm_v_)                                \
    static __thread nm_pim_mutex nm_v_[1];               \
    NM_PIM__REGISTER_TLS(nm_v_, NM_PIM_SYM_MUTEX)        \
    struct nm_pim__mutex_semicolon_##nm_v_
void nm_pim_mutex_lock(mutex_id_t m);
bool nm_pim_mutex_trylock(mutex_id_t m);
void nm_pim_mutex_unlock(mutex_id_t m);
#define mutex_lock(m) nm_pim_mutex_lock(m)
#define mutex_trylock(m) nm_pim_mutex_trylock(m)
#define mutex_unlock(m) nm_pim_mutex_unlock(m)

typedef struct barrier_t {
    uint32_t count;      /* tasklets that must arrive */
    uint32_t arrived;
    uint32_t generation;
} barrier_t;
/* The count must be a constant or NR_TASKLETS (a non-constant count means
 * "all tasklets of the launch", which is what NR_TASKLETS is). */
#define BARRIER_INIT(nm_v_, cnt)                                                         \
    static __thread barrier_t nm_v_ = {                                                  \
        .count = __builtin_constant_p(cnt) ? (uint32_t)(cnt) : UINT32_MAX};             \
    NM_PIM__REGISTER_TLS(nm_v_, NM_PIM_SYM_SYNC)                      \
    struct nm_pim__barrier_semicolon_##nm_v_
void nm_pim_barrier_wait(barrier_t *b);
#define barrier_wait(b) nm_pim_barrier_wait(b)

typedef struct sem_t {
    int32_t count;
    uint32_t waiters;
} sem_t;
#define SEMAPHORE_INIT(nm_v_, value)                                 \
    static __thread sem_t nm_v_ = {.count = (int32_t)(value)};       \
    NM_PIM__REGISTER_TLS(nm_v_, NM_PIM_SYM_SYNC)                     \
    struct nm_pim__sem_semicolon_##nm_v_
void nm_pim_sem_take(sem_t *s);
void nm_pim_sem_give(sem_t *s);
#define sem_take(s) nm_pim_sem_take(s)
#define sem_give(s) nm_pim_sem_give(s)

/* ---- Performance counter (per DPU, as on the hardware) ---------------------- */
typedef uint64_t perfcounter_t;
typedef enum perfcounter_config_t {
    COUNT_SAME = 0,
    COUNT_CYCLES = 1,
    COUNT_INSTRUCTIONS = 2,
    COUNT_NOTHING = 3
} perfcounter_config_t;
perfcounter_t nm_pim_perfcounter_config(perfcounter_config_t config, bool reset_value);
perfcounter_t nm_pim_perfcounter_get(void);
#define perfcounter_config(c, r) nm_pim_perfcounter_config((c), (r))
#define perfcounter_get() nm_pim_perfcounter_get()

/* ---- Modeled hardware units (types.h: nm_pim_hw_unit) ------------------------ */
/* This DPU's state of `unit` (zeroed/reset on first use after dpu_load). */
void *nm_pim_hw_state(const nm_pim_hw_unit *unit);
/* Execute one instruction of `unit`: one issued instruction plus
 * `extra_cycles` of latency for the calling tasklet; counts in hw_unit_ops. */
void nm_pim_hw_exec(const nm_pim_hw_unit *unit, uint32_t extra_cycles);
/* The unit refuses an operation: stop the DPU with NM_PIM_FAULT_HW_UNIT. */
__attribute__((noreturn)) void nm_pim_hw_refuse(const nm_pim_hw_unit *unit, const char *why);

#ifdef __cplusplus
}
#endif
#endif
