/* TRNS: in-place transposition of an int64 matrix of (M x m) rows and
 * (N x n) columns, in three steps (after Sung et al.'s tiled in-place
 * transposition, as PrIM's TRNS):
 *   1. host: each DPU receives whole column strips of width n (one strip per
 *      column tile J), row by row, through parallel transfers: an (M m) x n
 *      matrix per strip;
 *   2. DPU: every m x n tile of a strip is transposed in place (n x m);
 *   3. DPU: the strip, now an M x n matrix of m-element pieces, is
 *      transposed in place by following the permutation's cycles.
 * Strip J of the transposed matrix is then rows J n .. J n + n - 1 of the
 * result, contiguous. Shared by the host and the DPU code. */
#ifndef TRNS_COMMON_H
#define TRNS_COMMON_H

#include <stdint.h>

typedef int64_t T;

enum kernels { KERNEL_TILES = 0, KERNEL_CYCLES = 1, NR_KERNELS = 2 };

typedef struct {
    uint32_t M, m, n;  /* row tiles, rows per tile, columns per tile (the strip width) */
    uint32_t strips;   /* strips on this DPU */
    uint32_t kernel;   /* enum kernels */
    uint32_t reserved;
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

/* Largest tile: m x n elements in one tasklet's WRAM buffer. */
#define MAX_TILE_BYTES 2048

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
