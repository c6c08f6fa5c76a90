/* Types shared by the host side (host.h) and the DPU side (dpu.h) of
 * nearmem's emulated UPMEM PIM machine: hardware limits, the cost model's
 * constants, fault codes, accounting records and the program registry.
 *
 * See docs/pim-machine.md for the contract and the source of every number. */
#ifndef NEARMEM_PIM_TYPES_H
#define NEARMEM_PIM_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Hardware limits (UPMEM v1A; REFERENCE.md "Hardware") ---------------- */
#define NM_PIM_DPUS_PER_RANK 64u
#define NM_PIM_MAX_DPUS 2560u                  /* 40 ranks: a full server */
#define NM_PIM_MAX_TASKLETS 24u                /* hardware threads per DPU */
#define NM_PIM_WRAM_SIZE (64u * 1024u)         /* bytes of WRAM per DPU */
#define NM_PIM_MRAM_SIZE (64u * 1024u * 1024u) /* bytes of MRAM per DPU */
#define NM_PIM_MAX_MUTEXES 56u                 /* hardware mutexes per DPU */
#define NM_PIM_DMA_MIN 8u                      /* mram_read/write size bounds */
#define NM_PIM_DMA_MAX 2048u
#define NM_PIM_DMA_ALIGN 8u
/* MRAM addresses are 32-bit and start here in the DPU address space, as in
 * the UPMEM toolchain's memory map; 0 is therefore never an MRAM address. */
#define NM_PIM_MRAM_BASE 0x08000000u
#define NM_PIM_STACK_SIZE_DEFAULT 1024u /* modeled WRAM bytes per tasklet stack */

/* ---- Cost model ----------------------------------------------------------
 * Every constant is a published measurement or a documented hardware fact;
 * docs/pim-machine.md gives the source of each. They are parameters of the
 * machine (nm_pim_config), never tuned to reach a result. */
typedef struct nm_pim_cost {
    double freq_mhz;          /* DPU clock: 350 (v1A, UPMEM/PrIM) */
    uint32_t revolver_cycles; /* min cycles between two issues of one tasklet: 11 */
    double dma_read_alpha;    /* mram_read latency = alpha + beta*bytes cycles: 77 */
    double dma_read_beta;     /* 0.5 cycles/byte (PrIM §3.2.1) */
    double dma_write_alpha;   /* mram_write: 61 */
    double dma_write_beta;    /* 0.5 */
    /* Host<->DPU bandwidths in GB/s (1e9 B/s), PrIM §3.4 (one rank). */
    double bw_serial_to_dpu;    /* dpu_copy_to, one DPU at a time: 0.33 */
    double bw_serial_from_dpu;  /* dpu_copy_from: 0.12 */
    double bw_rank_to_dpu;      /* dpu_push_xfer TO, aggregate of one rank: 6.68 */
    double bw_rank_from_dpu;    /* dpu_push_xfer FROM, one rank: 4.74 */
    double bw_rank_broadcast;   /* dpu_broadcast_to, bytes delivered, one rank: 16.88 */
    /* The host-side limit as ranks are added: n active ranks move at most
     * bw_rank x (1 + bw_rank_growth x (n - 1)) in all (Friesel et al.'s
     * multi-rank push, calibration points at 1 and 40 ranks: 0.0382). 1 gives
     * ranks fully in parallel (the model before issue 15). */
    double bw_rank_growth;
    /* An optional absolute cap on the aggregate (0 = none). */
    double bw_host_cap;
    /* Instructions the API itself charges (derived from the SDK's inline
     * code; docs list them). */
    uint32_t instr_dma;        /* ldma/sdma + address setup */
    uint32_t instr_mutex;      /* one acquire attempt or one release */
    uint32_t instr_barrier;    /* barrier_wait bookkeeping */
    uint32_t instr_sem;        /* sem_take / sem_give bookkeeping */
    uint32_t instr_mem_alloc;  /* mem_alloc bump */
    uint32_t instr_perfcounter;
} nm_pim_cost;

/* The default cost model (350 MHz v1A, PrIM's measurements). */
nm_pim_cost nm_pim_cost_default(void);

/* ---- Faults: a violated hardware rule stops the DPU ---------------------- */
typedef enum nm_pim_fault_code {
    NM_PIM_FAULT_NONE = 0,
    NM_PIM_FAULT_DMA_SIZE,      /* mram_read/write size not 8..2048 or not a multiple of 8 */
    NM_PIM_FAULT_DMA_ALIGN,     /* MRAM or WRAM address of a DMA not 8-byte aligned */
    NM_PIM_FAULT_MRAM_BOUNDS,   /* DMA outside [MRAM_BASE, MRAM_BASE + 64 MiB) */
    NM_PIM_FAULT_WRAM_OVERFLOW, /* globals + stacks + mem_alloc heap > 64 KiB */
    NM_PIM_FAULT_TASKLETS,      /* more than 24 tasklets */
    NM_PIM_FAULT_DEADLOCK,      /* every live tasklet waits for an event that cannot come */
    NM_PIM_FAULT_MUTEX,         /* unlock of a mutex the tasklet does not hold */
    NM_PIM_FAULT_BARRIER,       /* barrier count larger than the tasklet count, or 0 */
    NM_PIM_FAULT_HW_UNIT,       /* a modeled hardware unit refused an operation */
    NM_PIM_FAULT_KERNEL,        /* the kernel called nm_pim_fault() (the `fault` instruction) */
    NM_PIM_FAULT_WRAM_BOUNDS,   /* DMA buffer outside WRAM (globals, tasklet stack, mem_alloc heap) */
    NM_PIM_FAULT_COUNT
} nm_pim_fault_code;

const char *nm_pim_fault_name(nm_pim_fault_code c);

typedef struct nm_pim_fault_info {
    nm_pim_fault_code code;
    uint32_t tasklet;   /* tasklet that faulted */
    uint64_t cycle;     /* modeled cycle of the fault */
    uint64_t address;   /* offending address where relevant (MRAM address or WRAM pointer) */
    uint64_t size;      /* offending size where relevant */
    char message[160];  /* human-readable detail */
} nm_pim_fault_info;

/* ---- Accounting -----------------------------------------------------------
 * Modeled quantities (cycles, modeled seconds) and host wall time are kept
 * in separate, clearly named fields and never added together. */
typedef struct nm_pim_tasklet_stats {
    uint64_t cycles;            /* modeled cycle at which the tasklet finished */
    uint64_t instructions;      /* charged + API + spin instructions */
    uint64_t costed_instructions; /* of which charged by the compiler's per-block costing (program files) */
    uint64_t dma_reads, dma_read_bytes;   /* MRAM -> WRAM */
    uint64_t dma_writes, dma_write_bytes; /* WRAM -> MRAM */
    uint64_t dma_wait_cycles;   /* blocked on the DMA engine (queueing + transfer) */
    uint64_t lock_wait_cycles;  /* busy-waiting on a mutex */
    uint64_t sync_wait_cycles;  /* stopped at a barrier or semaphore */
    uint64_t wram_alloc_bytes;  /* bytes this tasklet obtained from mem_alloc */
    uint64_t hw_unit_ops;       /* operations on modeled hardware units */
    /* Warnings: DMA the hardware accepts but the SDK's rules forbid, done
     * the way the hardware does it (docs: "Hardware semantics"). */
    uint64_t warn_dma_unaligned; /* MRAM or WRAM address not 8-byte aligned: low 3 bits ignored */
    uint64_t warn_dma_size;      /* size not 8..2048 or not a multiple of 8: length field n/8 - 1 used */
} nm_pim_tasklet_stats;

typedef struct nm_pim_dpu_stats {
    uint64_t cycles;            /* modeled cycles of the last launch (last tasklet done) */
    uint64_t instructions;      /* sum over tasklets */
    uint64_t costed_instructions; /* of which charged by the compiler's costing */
    uint64_t dma_reads, dma_read_bytes;
    uint64_t dma_writes, dma_write_bytes;
    uint64_t dma_busy_cycles;   /* cycles the DMA engine was busy */
    uint64_t lock_wait_cycles;
    uint64_t sync_wait_cycles;
    uint32_t wram_static_bytes; /* globals + nr_tasklets * stack size */
    uint32_t wram_high_water;   /* static + highest mem_alloc heap top */
    uint32_t nr_tasklets;
    uint64_t hw_unit_ops;
    uint64_t launches;          /* launches since dpu_load */
    uint64_t warn_dma_unaligned; /* sums of the tasklets' warnings (see nm_pim_tasklet_stats) */
    uint64_t warn_dma_size;
    uint64_t log_bytes;          /* bytes of DPU printf output in this launch (kept or dropped) */
} nm_pim_dpu_stats;

typedef enum nm_pim_xfer_kind {
    NM_PIM_XFER_SERIAL = 0, /* dpu_copy_to / dpu_copy_from */
    NM_PIM_XFER_PARALLEL,   /* dpu_push_xfer */
    NM_PIM_XFER_BROADCAST   /* dpu_broadcast_to */
} nm_pim_xfer_kind;

typedef struct nm_pim_xfer_stats {
    nm_pim_xfer_kind kind;
    bool to_dpu;
    uint32_t nr_dpus;        /* DPUs that took part */
    uint32_t nr_ranks;
    uint64_t bytes;          /* total bytes moved (sum over DPUs) */
    double modeled_seconds;  /* by the bandwidth model */
    double host_seconds;     /* wall time the emulator spent (memcpy): not modeled */
} nm_pim_xfer_stats;

/* Totals of a DPU set's system since dpu_alloc (or nm_pim_reset_totals). */
typedef struct nm_pim_totals {
    uint64_t launches;
    double modeled_kernel_seconds;   /* sum over launches of the slowest DPU's cycles / f */
    double host_kernel_seconds;      /* wall time spent emulating launches */
    uint64_t xfers;
    uint64_t xfer_bytes_to_dpu, xfer_bytes_from_dpu;
    double modeled_xfer_seconds;     /* sum of nm_pim_xfer_stats.modeled_seconds */
    double host_xfer_seconds;
} nm_pim_totals;

typedef struct nm_pim_launch_stats {
    uint32_t nr_dpus;
    uint64_t max_cycles;             /* slowest DPU */
    uint64_t sum_cycles;
    uint64_t instructions;
    double modeled_seconds;          /* max_cycles / f */
    double host_seconds;             /* wall time of the emulation */
    uint32_t faulted_dpus;
} nm_pim_launch_stats;

/* ---- Programs (the "DPU binaries") ----------------------------------------
 * A program is a kernel compiled natively into the process (or a shared
 * object loaded with dpu_load("path.so:name")). dpu.h's DPU_PROGRAM() and
 * the DPU_WRAM/DPU_HOST/DPU_MRAM_NOINIT/MUTEX_INIT/... macros fill these
 * records from constructors; users never build them by hand. */
typedef enum nm_pim_sym_kind {
    NM_PIM_SYM_WRAM = 0, /* a WRAM global (host transfers: 4-byte granularity) */
    NM_PIM_SYM_MRAM,     /* an MRAM variable (host transfers: 8-byte granularity) */
    NM_PIM_SYM_MUTEX,    /* MUTEX_INIT: WRAM, not host-visible by design */
    NM_PIM_SYM_SYNC,     /* BARRIER_INIT / SEMAPHORE_INIT state */
    NM_PIM_SYM_RODATA    /* a constant WRAM global of a program file (host reads only) */
} nm_pim_sym_kind;

typedef struct nm_pim_symbol {
    const char *name;
    nm_pim_sym_kind kind;
    uint32_t size;                 /* bytes */
    void *(*tls_addr)(void);       /* WRAM kinds: address of the per-thread copy */
    void **mram_ptr;               /* MRAM kind: where the MRAM address is stored */
    /* Filled at registration: */
    uint32_t offset;               /* WRAM: offset in the DPU's globals image; MRAM: address - MRAM_BASE */
    void *initial;                 /* WRAM: initial value captured at registration */
    struct nm_pim_symbol *next;
} nm_pim_symbol;

typedef struct nm_pim_program_def {
    const char *name;
    int (*main_fn)(void);
    uint32_t default_tasklets;     /* NR_TASKLETS when the host does not choose */
    uint32_t stack_size;           /* modeled WRAM bytes per tasklet stack */
    /* Filled at registration: */
    nm_pim_symbol *symbols;        /* in registration order */
    uint32_t nr_symbols;
    uint32_t wram_globals_bytes;   /* size of the globals image */
    uint32_t mram_vars_bytes;      /* MRAM used by variables (heap starts after) */
    uint32_t nr_mutexes;
    bool sealed;                   /* layout fixed (first load) */
    struct nm_pim_program_def *next;
    /* Program files (dpu_load of a path): */
    const struct nm_pim_loaded *file; /* NULL for registered programs */
    uint32_t wram_rodata_bytes;       /* constant WRAM data (not swapped) */
} nm_pim_program_def;

void nm_pim__register_program(nm_pim_program_def *p);
void nm_pim__register_symbol(nm_pim_program_def *p, nm_pim_symbol *s);
/* Find a registered program by name (NULL when none). */
const nm_pim_program_def *nm_pim_find_program(const char *name);

/* ---- Modeled hardware units (ISA extensions) ------------------------------
 * A unit is a piece of per-DPU hardware added to the modeled machine (e.g.
 * PIM-malloc's buddy cache, paper §IV-C: init_bc/lookup_bc/read_bc/write_bc).
 * Its state lives per DPU, is created zeroed on the DPU's first use after
 * dpu_load and reset by `reset`. DPU code executes a unit instruction with
 * nm_pim_hw_exec(): it costs one issued instruction plus `extra_cycles` of
 * latency beyond the pipeline, and counts in hw_unit_ops. */
typedef struct nm_pim_hw_unit {
    const char *name;
    size_t state_size;
    void (*reset)(void *state);  /* may be NULL (state zeroed) */
} nm_pim_hw_unit;

#ifdef __cplusplus
}
#endif
#endif
