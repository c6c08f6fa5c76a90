/* The contract between a DPU program file built by nearmem-dpu-cc and the
 * machine that loads it (src/pim/loader.c). Private to nearmem: the program
 * side is src/pim/dpurt/rt.c (linked into every program as bitcode) plus the
 * globals the pass plugin (src/pim/dpucc) creates; the host side is the
 * loader. Both are built from this one header, so they cannot disagree.
 *
 * A program file is an x86-64 ELF shared object with:
 *   - section ".nearmem_dpu": one nm_dpu_header (read by the loader before
 *     anything is mapped, to refuse files that are not programs);
 *   - one exported function, __nm_dpu_query, that fills an nm_dpu_info;
 *   - everything else internal (no symbol of the program can clash with the
 *     host program or with another DPU program in the same process).
 *
 * Change NM_DPU_ABI_VERSION with any change below: old files are refused
 * with DPU_ERR_ELF_INVALID_FILE and a message, never misread. */
#ifndef NM_DPU_ABI_H
#define NM_DPU_ABI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define NM_DPU_ABI_VERSION 2u /* 2: cost_counter (issue 15) */
#define NM_DPU_MAGIC "NMDPUPRG" /* 8 bytes, no terminator in the header */
#define NM_DPU_SECTION ".nearmem_dpu"

/* Laid out by the pass as { [8 x i8], i32 x 9 }. */
typedef struct nm_dpu_header {
    char magic[8];
    uint32_t abi_version;
    uint32_t nr_tasklets;      /* NR_TASKLETS the program was built for */
    uint32_t stack_size;       /* modeled WRAM stack bytes per tasklet */
    uint32_t wram_data_size;   /* mutable WRAM globals (the swapped block) */
    uint32_t wram_rodata_size; /* constant WRAM data */
    uint32_t mram_vars_size;   /* MRAM variables; the MRAM heap starts after */
    uint32_t atomic_bits;      /* atomic bits used (MUTEX_INIT, BARRIER_INIT, ...) */
    uint32_t stdout_size;      /* printf log capacity in bytes */
    uint32_t flags;            /* reserved, 0 */
} nm_dpu_header;

enum nm_dpu_sym_kind {
    NM_DPU_SYM_WRAM = 0,   /* address = offset in the WRAM data block */
    NM_DPU_SYM_MRAM = 1,   /* address = 0x08000000 + offset */
    NM_DPU_SYM_RODATA = 2, /* address = wram_data_size + offset in rodata */
};

/* Laid out by the pass as { ptr, i32, i32, i32, i32 }. */
typedef struct nm_dpu_symbol {
    const char *name;
    uint32_t kind;
    uint32_t address;
    uint32_t size;
    uint32_t reserved;
} nm_dpu_symbol;

/* An initialised MRAM variable: written into every DPU's MRAM at load.
 * data == NULL means zeros. Laid out as { i32, i32, ptr }. */
typedef struct nm_dpu_mram_seg {
    uint32_t offset; /* from the MRAM base */
    uint32_t size;
    const uint8_t *data;
} nm_dpu_mram_seg;

/* The machine's services, called by the program's runtime (rt.c). Every
 * call is made from a tasklet; MRAM addresses are the DPU's 32-bit ones. */
typedef struct nm_dpu_rt {
    uint32_t version; /* NM_DPU_ABI_VERSION */
    uint32_t size;    /* sizeof(nm_dpu_rt) */
    uint32_t (*me)(void);
    /* mram_read / mram_write with the hardware's semantics (item 4). */
    void (*dma_read)(uint32_t mram, void *wram, uint32_t n);
    void (*dma_write)(const void *wram, uint32_t mram, uint32_t n);
    /* Direct __mram_ptr access and memcpy/memset on MRAM: any address, any
     * size; costed as the DMA the DPU compiler would emit. */
    void (*mram_load)(uint32_t mram, void *dst, uint64_t n);
    void (*mram_store)(uint32_t mram, const void *src, uint64_t n);
    void (*mram_copy)(uint32_t dst, uint32_t src, uint64_t n);
    void (*mram_set)(uint32_t dst, int value, uint64_t n);
    /* mram_read_unaligned / mram_write_unaligned (mram_unaligned.h). */
    void (*dma_read_unaligned)(uint32_t mram, void *wram, uint32_t n);
    void (*dma_write_unaligned)(const void *wram, uint32_t mram, uint32_t n);
    void *(*mem_alloc)(uint32_t size);
    void *(*mem_reset)(void);
    void (*mutex_lock)(uint32_t bit);
    bool (*mutex_trylock)(uint32_t bit);
    void (*mutex_unlock)(uint32_t bit);
    void (*barrier_wait)(void *sdk_barrier);
    void (*sem_take)(void *sdk_sem);
    void (*sem_give)(void *sdk_sem);
    void (*handshake_notify)(void);
    int (*handshake_wait_for)(uint32_t notifier);
    uint64_t (*perfcounter_config)(uint32_t config, bool reset);
    uint64_t (*perfcounter_get)(void);
    void (*log_vprintf)(const char *fmt, va_list ap);
    void (*log_write)(const char *s, uint32_t n);
    void (*fault)(const char *why) __attribute__((noreturn));
    void (*charge)(uint32_t instructions);
    uint64_t (*cycle)(void);
    void *(*hw_state)(const void *unit);
    void (*hw_exec)(const void *unit, uint32_t extra_cycles);
    void (*hw_refuse)(const void *unit, const char *why) __attribute__((noreturn));
} nm_dpu_rt;

typedef struct nm_dpu_info {
    uint32_t abi_version;
    uint32_t nr_tasklets, stack_size;
    uint32_t atomic_bits, stdout_size;
    int (*main_fn)(void);
    void *wram_data;
    uint32_t wram_data_size;
    const void *wram_rodata;
    uint32_t wram_rodata_size;
    uint32_t mram_vars_size;
    const nm_dpu_mram_seg *mram_segs;
    uint32_t nr_mram_segs;
    const nm_dpu_symbol *symbols;
    uint32_t nr_symbols;
    const nm_dpu_rt **rt_slot; /* the loader stores the service table here */
    /* The instance's cost counter: the modeled DPU instructions its code
     * executed since the machine last took them (nearmem-dpu-cc's costing
     * step adds to it at every basic block; the machine moves it into the
     * running tasklet whenever a tasklet hands control back). */
    uint64_t *cost_counter;
} nm_dpu_info;

/* Exported by every program. */
typedef void (*nm_dpu_query_fn)(nm_dpu_info *out);
#define NM_DPU_QUERY_SYMBOL "__nm_dpu_query"

#endif
