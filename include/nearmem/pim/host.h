/* Host side of nearmem's emulated UPMEM PIM machine.
 *
 * The names and semantics follow the UPMEM SDK's <dpu.h> so that a host
 * program ports with little or no change; everything nearmem adds is
 * prefixed nm_pim_. Differences from the SDK are listed in
 * docs/pim-machine.md ("Differences from the UPMEM SDK").
 *
 *   struct dpu_set_t set, dpu; uint32_t i;
 *   DPU_ASSERT(dpu_alloc(64, NULL, &set));
 *   DPU_ASSERT(dpu_load(set, "./task", NULL));          // a file built by nearmem-dpu-cc
 *   DPU_FOREACH(set, dpu, i) DPU_ASSERT(dpu_prepare_xfer(dpu, &in[i * n]));
 *   DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, n * 4, DPU_XFER_DEFAULT));
 *   DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
 *   DPU_ASSERT(dpu_free(set));
 *
 * Thread safety: one host thread drives a DPU set at a time (as with the
 * SDK). Different sets (different dpu_alloc calls) may be driven from
 * different host threads. */
#ifndef NEARMEM_PIM_HOST_H
#define NEARMEM_PIM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nearmem/pim/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: the SDK's names and order (dpu_error.h); nearmem adds
 * DPU_ERR_INVALID_ARGUMENT at the end. Comments say when nearmem returns each. */
typedef enum dpu_error_t {
    DPU_OK = 0,
    DPU_ERR_INTERNAL,
    DPU_ERR_SYSTEM,                  /* a host OS call failed (threads, memory, mapping a program) */
    DPU_ERR_DRIVER,                  /* (not returned: no driver) */
    DPU_ERR_ALLOCATION,              /* cannot allocate that many DPUs / host memory */
    DPU_ERR_INVALID_DPU_SET,         /* empty or freed set, wrong kind of set */
    DPU_ERR_INVALID_THREAD_ID,       /* tasklet index or count out of range; program built for another count */
    DPU_ERR_INVALID_NOTIFY_ID,       /* (not returned) */
    DPU_ERR_INVALID_WRAM_ACCESS,     /* WRAM symbol transfer not 4-byte granular, or a write to a constant */
    DPU_ERR_INVALID_IRAM_ACCESS,     /* (not returned: no IRAM is modeled) */
    DPU_ERR_INVALID_MRAM_ACCESS,     /* MRAM transfer outside 64 MiB or not 8-byte granular */
    DPU_ERR_INVALID_SYMBOL_ACCESS,   /* offset/length outside the symbol */
    DPU_ERR_MRAM_BUSY,               /* (not returned) */
    DPU_ERR_TRANSFER_ALREADY_SET,    /* dpu_prepare_xfer on a DPU set of more than one DPU */
    DPU_ERR_NO_PROGRAM_LOADED,       /* launch or symbol access before dpu_load */
    DPU_ERR_DIFFERENT_DPU_PROGRAMS,  /* symbol transfer over DPUs running different programs */
    DPU_ERR_CORRUPTED_MEMORY,        /* (not returned) */
    DPU_ERR_DPU_DISABLED,            /* (not returned) */
    DPU_ERR_DPU_ALREADY_RUNNING,
    DPU_ERR_INVALID_MEMORY_TRANSFER, /* NULL buffer, zero length, missing prepare_xfer */
    DPU_ERR_INVALID_LAUNCH_POLICY,
    DPU_ERR_DPU_FAULT,               /* a DPU stopped on a fault: see dpu_status / nm_pim_fault_info */
    DPU_ERR_ELF_INVALID_FILE,        /* dpu_load: the file is not a DPU program (or for another ABI) */
    DPU_ERR_ELF_NO_SUCH_FILE,        /* dpu_load: no such file (or registered program) */
    DPU_ERR_ELF_NO_SUCH_SECTION,     /* (not returned) */
    DPU_ERR_TIMEOUT,                 /* (not returned) */
    DPU_ERR_INVALID_PROFILE,         /* dpu_alloc: unknown or malformed profile key */
    DPU_ERR_UNKNOWN_SYMBOL,          /* no symbol of that name in the program */
    DPU_ERR_LOG_FORMAT,              /* (not returned) */
    DPU_ERR_LOG_CONTEXT_MISSING,     /* dpu_log_read before any launch of a program file */
    DPU_ERR_LOG_BUFFER_TOO_SMALL,    /* dpu_log_read: the DPU printed more than its log holds */
    DPU_ERR_VPD_INVALID_FILE,        /* (not returned) */
    DPU_ERR_VPD_NO_REPAIR,           /* (not returned) */
    DPU_ERR_NO_THREAD_PER_RANK,      /* (not returned) */
    DPU_ERR_INVALID_BUFFER_SIZE,     /* (not returned) */
    DPU_ERR_NONBLOCKING_SYNC_CALLBACK, /* dpu_callback: DPU_CALLBACK_NONBLOCKING without DPU_CALLBACK_ASYNC */
    DPU_ERR_INVALID_ARGUMENT,        /* nearmem: NULL out-pointer or similar */
    DPU_ERR_COUNT
} dpu_error_t;

const char *dpu_error_to_string(dpu_error_t status);

/* The SDK's values. */
typedef enum dpu_launch_policy_t { DPU_ASYNCHRONOUS = 0, DPU_SYNCHRONOUS = 1 } dpu_launch_policy_t;
typedef enum dpu_xfer_t { DPU_XFER_TO_DPU = 0, DPU_XFER_FROM_DPU = 1 } dpu_xfer_t;
typedef enum dpu_xfer_flags_t {
    DPU_XFER_DEFAULT = 0,   /* forget the prepared buffers after the push */
    DPU_XFER_NO_RESET = 1,  /* keep them for another push */
    DPU_XFER_ASYNC = 2      /* accepted; the emulator completes transfers synchronously */
} dpu_xfer_flags_t;

#define DPU_ALLOCATE_ALL UINT32_MAX /* UINT_MAX, as in the SDK */
/* Symbol naming the MRAM heap: offsets in host transfers are relative to
 * DPU_MRAM_HEAP_POINTER. */
#define DPU_MRAM_HEAP_POINTER_NAME "__sys_used_mram_end"

struct nm_pim_system;
struct dpu_program_t;
struct dpu_rank_t;
struct dpu_t;

/* A set of DPUs, passed by value as in the SDK: the whole allocation, one
 * rank (DPU_RANK_FOREACH) or one DPU (DPU_FOREACH). The first members are
 * the SDK's (host code may read set.kind, set.list.nr_ranks,
 * set.list.ranks[i] and set.dpu, or build a set of whole ranks from
 * set.list); the last ones are nearmem's: `begin` and `count` index DPUs of
 * the allocation. */
typedef enum dpu_set_kind_t { DPU_SET_RANKS = 0, DPU_SET_DPU = 1 } dpu_set_kind_t;
struct dpu_set_t {
    dpu_set_kind_t kind;
    union {
        struct {
            uint32_t nr_ranks;
            struct dpu_rank_t **ranks;
        } list;
        struct dpu_t *dpu;
    };
    struct nm_pim_system *sys;
    uint32_t begin;
    uint32_t count;
};

/* A program symbol (dpu_get_symbol): WRAM symbols have their WRAM byte
 * address, MRAM ones 0x08000000 + offset, as in the SDK. */
typedef uint32_t dpu_mem_max_addr_t;
typedef uint32_t dpu_mem_max_size_t;
struct dpu_symbol_t {
    dpu_mem_max_addr_t address;
    dpu_mem_max_size_t size;
};

/* A program embedded in the host binary (DPU_INCBIN). */
struct dpu_incbin_t {
    uint8_t *buffer;
    size_t size;      /* 0: use `end` (DPU_INCBIN) */
    const char *path;
    const uint8_t *end; /* nearmem: end of the embedded bytes */
};

/* Allocation. `profile`: NULL/"" or comma-separated key=value:
 *   frequency=<MHz> (default 350)   threads=<host threads> (default: env
 *   NEARMEM_PIM_THREADS, else online CPUs)   host_cap=<GB/s> (0 = none)
 *   tasklets=<n> (program files must be built with NR_TASKLETS=n; 0 = any)
 * Unknown keys are refused with DPU_ERR_INVALID_PROFILE. dpu_alloc refuses
 * more than NM_PIM_MAX_DPUS DPUs; DPU_ALLOCATE_ALL gives NM_PIM_MAX_DPUS. */
dpu_error_t dpu_alloc(uint32_t nr_dpus, const char *profile, struct dpu_set_t *dpu_set);
dpu_error_t dpu_alloc_ranks(uint32_t nr_ranks, const char *profile, struct dpu_set_t *dpu_set);
/* Only the set returned by dpu_alloc can be freed; waits for a running launch. */
dpu_error_t dpu_free(struct dpu_set_t dpu_set);
dpu_error_t dpu_get_nr_dpus(struct dpu_set_t dpu_set, uint32_t *nr_dpus);
dpu_error_t dpu_get_nr_ranks(struct dpu_set_t dpu_set, uint32_t *nr_ranks);

/* Load a program into every DPU of the set, as on UPMEM: `binary` is the
 * path of a program file built by nearmem-dpu-cc (dpu-upmem-dpurte-clang).
 * Deprecated alternatives: the name given to DPU_PROGRAM() (a program linked
 * into the binary), or "path/to/lib.so:name". WRAM globals get their initial
 * values, initialised __mram variables are written, statistics, faults and
 * hardware units are reset; other MRAM keeps its contents. `program` may be
 * NULL. Refused: no such file (DPU_ERR_ELF_NO_SUCH_FILE), a file that is not
 * a program or was built for another ABI (DPU_ERR_ELF_INVALID_FILE), a
 * program built for more than 24 tasklets or for another count than the
 * allocation's `tasklets=` profile key (DPU_ERR_INVALID_THREAD_ID); for
 * registered programs more than 56 mutexes (DPU_ERR_INVALID_WRAM_ACCESS) and
 * MRAM variables beyond 64 MiB (DPU_ERR_INVALID_MRAM_ACCESS). */
dpu_error_t dpu_load(struct dpu_set_t dpu_set, const char *binary, struct dpu_program_t **program);
/* The same from a program file's bytes in memory. */
dpu_error_t dpu_load_from_memory(struct dpu_set_t dpu_set, uint8_t *buffer, size_t buffer_size,
                                 struct dpu_program_t **program);
dpu_error_t dpu_load_from_incbin(struct dpu_set_t dpu_set, struct dpu_incbin_t *incbin,
                                 struct dpu_program_t **program);

/* Embeds the program file `file` (a string literal, absolute or relative to
 * the assembler's directory) into the host binary as `struct dpu_incbin_t
 * name`, for dpu_load_from_incbin. */
#define DPU_INCBIN(name, file)                                                                            \
    __asm__(".pushsection .rodata.dpu_incbin,\"a\"\n.balign 16\n.global dpu_incbin_" #name                  \
            "\n.type dpu_incbin_" #name ", @object\ndpu_incbin_" #name ":\n.incbin \"" file                  \
            "\"\n.size dpu_incbin_" #name ", .-dpu_incbin_" #name "\n.global dpu_incbin_" #name             \
            "_end\ndpu_incbin_" #name "_end:\n.popsection\n");                                                \
    extern const uint8_t dpu_incbin_##name[], dpu_incbin_##name##_end[];                                 \
    struct dpu_incbin_t name = {(uint8_t *)dpu_incbin_##name, 0, file, dpu_incbin_##name##_end}

/* nearmem: give a program embedded in the binary (DPU_INCBIN) a name, so that
 * dpu_load(set, name, ...) loads it, as the deprecated registered programs
 * are loaded by name. A library that ships its DPU program (PIM-CACHE) calls
 * it from a constructor. */
void nm_pim_register_image(const char *name, struct dpu_incbin_t *image);

/* Symbol of a loaded program by name (DPU_ERR_UNKNOWN_SYMBOL if none). */
dpu_error_t dpu_get_symbol(struct dpu_program_t *program, const char *symbol_name, struct dpu_symbol_t *symbol);

/* Boot every DPU of the set. Synchronous: returns when all are done,
 * DPU_ERR_DPU_FAULT if any faulted. Asynchronous: returns at once; dpu_sync
 * waits; transfers and launches on the same allocation wait for it first
 * (the SDK queues them, which has the same effect). */
dpu_error_t dpu_launch(struct dpu_set_t dpu_set, dpu_launch_policy_t policy);
dpu_error_t dpu_sync(struct dpu_set_t dpu_set);
/* done: every DPU of the set has stopped; fault: at least one faulted. */
dpu_error_t dpu_status(struct dpu_set_t dpu_set, bool *done, bool *fault);

/* Serial transfers: the same buffer to/from every DPU of the set, one DPU
 * after another (modeled at the serial bandwidth). WRAM symbols: offset and
 * length multiples of 4; MRAM: multiples of 8 (else DPU_ERR_INVALID_*_ACCESS). */
dpu_error_t dpu_copy_to(struct dpu_set_t dpu_set, const char *symbol_name, uint32_t symbol_offset,
                        const void *src, size_t length);
dpu_error_t dpu_copy_from(struct dpu_set_t dpu_set, const char *symbol_name, uint32_t symbol_offset,
                          void *dst, size_t length);
/* Parallel transfers: prepare one buffer per DPU (a set of exactly one DPU),
 * then push the same symbol, offset and length to/from every DPU of the set
 * that has a prepared buffer (modeled: ranks in parallel, DPUs of a rank at
 * the rank's aggregate bandwidth). */
dpu_error_t dpu_prepare_xfer(struct dpu_set_t dpu_set, void *buffer);
dpu_error_t dpu_push_xfer(struct dpu_set_t dpu_set, dpu_xfer_t xfer, const char *symbol_name,
                          uint32_t symbol_offset, size_t length, dpu_xfer_flags_t flags);
dpu_error_t dpu_broadcast_to(struct dpu_set_t dpu_set, const char *symbol_name, uint32_t symbol_offset,
                             const void *src, size_t length, dpu_xfer_flags_t flags);
/* The same four transfers with a symbol from dpu_get_symbol. */
dpu_error_t dpu_copy_to_symbol(struct dpu_set_t dpu_set, struct dpu_symbol_t symbol, uint32_t symbol_offset,
                               const void *src, size_t length);
dpu_error_t dpu_copy_from_symbol(struct dpu_set_t dpu_set, struct dpu_symbol_t symbol, uint32_t symbol_offset,
                                 void *dst, size_t length);
dpu_error_t dpu_push_xfer_symbol(struct dpu_set_t dpu_set, dpu_xfer_t xfer, struct dpu_symbol_t symbol,
                                 uint32_t symbol_offset, size_t length, dpu_xfer_flags_t flags);
dpu_error_t dpu_broadcast_to_symbol(struct dpu_set_t dpu_set, struct dpu_symbol_t symbol, uint32_t symbol_offset,
                                    const void *src, size_t length, dpu_xfer_flags_t flags);

/* Callbacks. nearmem runs them synchronously, after everything queued on
 * the set: once per rank (DEFAULT), or once with the whole set when
 * DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING | DPU_CALLBACK_SINGLE_CALL
 * are all given, as the SDK does. Returns the first error a call returns. */
typedef enum dpu_callback_flags_t {
    DPU_CALLBACK_DEFAULT = 0,
    DPU_CALLBACK_ASYNC = 1 << 0,
    DPU_CALLBACK_NONBLOCKING = 1 << 1,
    DPU_CALLBACK_SINGLE_CALL = 1 << 2,
} dpu_callback_flags_t;
dpu_error_t dpu_callback(struct dpu_set_t dpu_set, dpu_error_t (*callback)(struct dpu_set_t, uint32_t, void *),
                         void *args, dpu_callback_flags_t flags);

/* Prints what the DPU (a one-DPU set) printed with printf during its last
 * launch. DPU_ERR_LOG_BUFFER_TOO_SMALL after printing if it printed more
 * than its stdout buffer holds (the rest was dropped). */
dpu_error_t dpu_log_read(struct dpu_set_t set, FILE *stream);

/* Low-level DPU access (the SDK's dpu_management.h / dpu_memory.h). */
struct dpu_t *dpu_from_set(struct dpu_set_t dpu_set);
struct dpu_set_t dpu_set_from_dpu(struct dpu_t *dpu);
/* MRAM of one DPU by byte offset (0..64 MiB), modeled as a serial transfer.
 * Both SDK forms are accepted: with or without the trailing mram_number (0). */
dpu_error_t nm_pim_copy_to_mram(struct dpu_t *dpu, uint32_t mram_byte_offset, const uint8_t *source,
                                uint32_t nb_of_bytes, uint8_t mram_number);
dpu_error_t nm_pim_copy_from_mram(struct dpu_t *dpu, uint8_t *destination, uint32_t mram_byte_offset,
                                  uint32_t nb_of_bytes, uint8_t mram_number);
#define NM_PIM__PICK5(_1, _2, _3, _4, _5, NAME, ...) NAME
#define NM_PIM__CTM4(d, o, s, n) nm_pim_copy_to_mram((d), (o), (s), (n), 0)
#define NM_PIM__CFM4(d, s, o, n) nm_pim_copy_from_mram((d), (s), (o), (n), 0)
#define dpu_copy_to_mram(...) NM_PIM__PICK5(__VA_ARGS__, nm_pim_copy_to_mram, NM_PIM__CTM4, _)(__VA_ARGS__)
#define dpu_copy_from_mram(...) NM_PIM__PICK5(__VA_ARGS__, nm_pim_copy_from_mram, NM_PIM__CFM4, _)(__VA_ARGS__)

/* Iteration. DPU_FOREACH(set, dpu) or DPU_FOREACH(set, dpu, i) with
 * `struct dpu_set_t dpu; uint32_t i;` declared by the caller, as in the SDK. */
uint32_t nm_pim_set_size(struct dpu_set_t set);
struct dpu_set_t nm_pim_set_dpu(struct dpu_set_t set, uint32_t i);
uint32_t nm_pim_set_rank_count(struct dpu_set_t set);
struct dpu_set_t nm_pim_set_rank(struct dpu_set_t set, uint32_t r);

#define NM_PIM__FOREACH2(set, dpu)                                                              \
    for (uint32_t nm_pim__it = 0;                                                              \
         nm_pim__it < nm_pim_set_size(set) && (((dpu) = nm_pim_set_dpu((set), nm_pim__it)), 1); \
         nm_pim__it++)
#define NM_PIM__FOREACH3(set, dpu, i) \
    for ((i) = 0; (i) < nm_pim_set_size(set) && (((dpu) = nm_pim_set_dpu((set), (i))), 1); (i)++)
#define NM_PIM__RFOREACH2(set, rank)                                                                 \
    for (uint32_t nm_pim__rit = 0;                                                                  \
         nm_pim__rit < nm_pim_set_rank_count(set) && (((rank) = nm_pim_set_rank((set), nm_pim__rit)), 1); \
         nm_pim__rit++)
#define NM_PIM__RFOREACH3(set, rank, i) \
    for ((i) = 0; (i) < nm_pim_set_rank_count(set) && (((rank) = nm_pim_set_rank((set), (i))), 1); (i)++)
#define NM_PIM__PICK(_1, _2, _3, NAME, ...) NAME
#define DPU_FOREACH(...) NM_PIM__PICK(__VA_ARGS__, NM_PIM__FOREACH3, NM_PIM__FOREACH2, _)(__VA_ARGS__)
#define DPU_RANK_FOREACH(...) \
    NM_PIM__PICK(__VA_ARGS__, NM_PIM__RFOREACH3, NM_PIM__RFOREACH2, _)(__VA_ARGS__)

/* As in the SDK: print the error and exit the process. Use it in examples;
 * library code checks the returned dpu_error_t instead. */
#define DPU_ASSERT(expr)                                                                      \
    do {                                                                                      \
        dpu_error_t nm_pim__e = (expr);                                                       \
        if (nm_pim__e != DPU_OK) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                      \
                    dpu_error_to_string(nm_pim__e));                                          \
            exit(EXIT_FAILURE);                                                               \
        }                                                                                     \
    } while (0)

/* Probes (the SDK's dpu_probe_*). DPU_TIME measures the modeled kernel
 * time of all launches (any allocation of the process) between
 * dpu_probe_start and dpu_probe_stop. DPU_ENERGY is not modeled: asking for
 * it returns DPU_ERR_SYSTEM (nm_last_errmsg says why). */
typedef enum dpu_probe_option_t { DPU_ENERGY = 0, DPU_TIME = 1 } dpu_probe_option_t;
typedef enum dpu_probe_stats_t { DPU_AVERAGE = 0, DPU_ACCUMULATE = 1, DPU_MIN = 2, DPU_MAX = 3 } dpu_probe_stats_t;
struct dpu_probe_t {
    char name[32];
    bool running;
    uint64_t start_ps;   /* process-wide modeled kernel picoseconds at start */
    uint64_t count;      /* start/stop intervals */
    double sum_s, min_s, max_s;
};
dpu_error_t dpu_probe_init(const char *name, struct dpu_probe_t *probe);
dpu_error_t dpu_probe_deinit(struct dpu_probe_t *probe);
dpu_error_t dpu_probe_start(struct dpu_probe_t *probe);
dpu_error_t dpu_probe_stop(struct dpu_probe_t *probe);
dpu_error_t dpu_probe_get(struct dpu_probe_t *probe, dpu_probe_option_t option, dpu_probe_stats_t stat, double *value);

/* ---- nearmem extensions --------------------------------------------------- */

/* The program loaded in every DPU of the set (a program file or a registered
 * program: its symbols and MRAM layout), or NULL if none or they differ. */
const nm_pim_program_def *nm_pim_loaded_program(struct dpu_set_t dpu_set);

/* NR_TASKLETS of the program loaded in the set's DPUs. */
dpu_error_t nm_pim_get_nr_tasklets(struct dpu_set_t dpu_set, uint32_t *nr_tasklets);

/* Tasklets per DPU for the loaded program (1..NM_PIM_MAX_TASKLETS runs;
 * larger values are accepted here and fault at launch with
 * NM_PIM_FAULT_TASKLETS, as a >24-tasklet binary cannot run). Programs
 * compiled with a fixed NR_TASKLETS refuse another count
 * (DPU_ERR_INVALID_THREAD_ID). Default: the program's NR_TASKLETS. */
dpu_error_t nm_pim_set_tasklets(struct dpu_set_t dpu_set, uint32_t nr_tasklets);

/* Index of a one-DPU set within its allocation (UINT32_MAX otherwise). */
uint32_t nm_pim_dpu_index(struct dpu_set_t dpu);

/* Cost model of the allocation (frequency etc.). */
dpu_error_t nm_pim_get_cost(struct dpu_set_t dpu_set, nm_pim_cost *cost);
/* Host threads that emulate DPUs of this allocation. */
uint32_t nm_pim_host_threads(struct dpu_set_t dpu_set);

/* Accounting (see types.h). dpu must be a one-DPU set. */
dpu_error_t nm_pim_get_dpu_stats(struct dpu_set_t dpu, nm_pim_dpu_stats *out);
dpu_error_t nm_pim_get_tasklet_stats(struct dpu_set_t dpu, uint32_t tasklet, nm_pim_tasklet_stats *out);
dpu_error_t nm_pim_get_fault(struct dpu_set_t dpu, nm_pim_fault_info *out);
/* Last launch and last transfer of the allocation `set` belongs to. */
dpu_error_t nm_pim_last_launch(struct dpu_set_t dpu_set, nm_pim_launch_stats *out);
dpu_error_t nm_pim_last_xfer(struct dpu_set_t dpu_set, nm_pim_xfer_stats *out);
dpu_error_t nm_pim_get_totals(struct dpu_set_t dpu_set, nm_pim_totals *out);
dpu_error_t nm_pim_reset_totals(struct dpu_set_t dpu_set);
/* Host bytes currently backing the MRAM of the set's DPUs (lazy chunks). */
uint64_t nm_pim_mram_resident_bytes(struct dpu_set_t dpu_set);

/* Direct MRAM access for host-side tools and tests, by MRAM byte offset
 * (0..64 MiB), bypassing symbols and not modeled (no transfer time). */
dpu_error_t nm_pim_mram_peek(struct dpu_set_t dpu, uint32_t offset, void *dst, size_t length);

#ifdef __cplusplus
}
#endif
#endif
