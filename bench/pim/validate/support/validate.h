/* Shared by the pim-validate suite (host) and its microbenchmark kernels (DPU,
 * plain UPMEM C): the arguments each kernel takes and what it reports. */
#ifndef NM_VALIDATE_H
#define NM_VALIDATE_H

#include <stdint.h>

/* Block moved per DMA by the arithmetic and STREAM kernels: 1 KiB, as PrIM's
 * run scripts use (BL=10). */
#define VT_BLOCK_LOG2 10
#define VT_BLOCK (1u << VT_BLOCK_LOG2)

/* Arithmetic throughput (PrIM Sec. 3.1.1): op x type, chosen at run time
 * from one table of update loops (each a separate function, so the loop the
 * DPU runs is the one a compile-time choice would give). */
enum { VT_ADD, VT_SUB, VT_MUL, VT_DIV, VT_NR_OPS };
enum { VT_INT32, VT_UINT32, VT_INT64, VT_UINT64, VT_FLOAT, VT_DOUBLE, VT_NR_TYPES };

typedef struct {
    uint32_t kernel; /* op * VT_NR_TYPES + type */
    uint32_t bytes;  /* bytes of the input array A in MRAM (a multiple of VT_BLOCK * NR_TASKLETS) */
    uint32_t elems;  /* elements of A: the scalar operand, as in PrIM */
    uint32_t pad;
} vt_arith_args;

/* STREAM (PrIM Sec. 3.2.2 / 3.3): MRAM (DMA in and out of WRAM) and WRAM-only. */
enum { VT_S_COPY_DMA, VT_S_COPYW, VT_S_ADD, VT_S_SCALE, VT_S_TRIAD, VT_S_NR };
typedef struct {
    uint32_t kernel; /* VT_S_* */
    uint32_t wram;   /* 1: operate on WRAM arrays only (no DMA in the timed part) */
    uint32_t bytes;  /* MRAM: bytes per array; WRAM: bytes per array per tasklet */
    uint32_t reps;   /* WRAM: passes over the arrays */
} vt_stream_args;

/* MRAM latency (PrIM Sec. 3.2.1): one tasklet, `count` DMAs of `size` bytes. */
typedef struct {
    uint32_t write; /* 0: mram_read, 1: mram_write */
    uint32_t size;  /* 8..2048, a multiple of 8 */
    uint32_t count;
    uint32_t pad;
} vt_mram_args;

#endif
