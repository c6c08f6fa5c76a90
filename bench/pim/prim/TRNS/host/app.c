/* TRNS host: transposes an int64 matrix of (M m) x (N n) on -d DPUs. Column
 * strip J (n columns wide) goes to DPU J mod DPUS; step 1 of the in-place
 * algorithm is done by the transfers themselves (common.h).
 *
 *   ./bin/host_code [-d DPUS] [-M ROW_TILES] [-m TILE_ROWS] [-N COL_TILES] [-n TILE_COLS]
 *                   [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when the result equals the transpose, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <dpu.h>

#include "../support/common.h"
#include "../support/utils.h"

#ifndef DPU_BINARY
#define DPU_BINARY "./bin/dpu_code"
#endif

typedef struct {
    uint32_t nr_dpus;
    uint32_t M, m, N, n;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-d DPUS] [-M ROW_TILES (64)] [-m TILE_ROWS (16)] [-N COL_TILES (256)] [-n TILE_COLS (8)]\n"
            "          [-w WARMUP] [-e REPS] [-s SEED]      (m x n x 8 <= %d bytes)\n",
            prog, MAX_TILE_BYTES);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .M = 64, .m = 16, .N = 256, .n = 8, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:M:m:N:n:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'M': p.M = (uint32_t)atoi(optarg); break;
        case 'm': p.m = (uint32_t)atoi(optarg); break;
        case 'N': p.N = (uint32_t)atoi(optarg); break;
        case 'n': p.n = (uint32_t)atoi(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || !p.M || !p.m || !p.N || !p.n || p.reps == 0 ||
        (uint64_t)p.m * p.n * sizeof(T) > MAX_TILE_BYTES) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint64_t rows = (uint64_t)p.M * p.m, cols = (uint64_t)p.N * p.n;
    const uint32_t max_strips = divceil(p.N, nr_dpus);
    const uint64_t strip_elems = rows * p.n;
    if (max_strips * strip_elems * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "TRNS: %u strips of %llu elements per DPU do not fit in MRAM\n", max_strips,
                (unsigned long long)strip_elems);
        return 2;
    }
    T *A = malloc(rows * cols * sizeof(T));
    T *At = calloc(rows * cols, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    if (!A || !At || !args) {
        fprintf(stderr, "TRNS: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    for (uint64_t k = 0; k < rows * cols; k++)
        A[k] = (T)rng_next();
    for (i = 0; i < nr_dpus; i++) {
        args[i].M = p.M;
        args[i].m = p.m;
        args[i].n = p.n;
        args[i].strips = p.N > i ? divceil(p.N - i, nr_dpus) : 0;
    }
    printf("TRNS: %u DPUs, %llu x %llu (tiles %u x %u)\n", nr_dpus, (unsigned long long)rows,
           (unsigned long long)cols, p.m, p.n);

    Timer timer = {0};
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        /* Step 1: strip k of DPU d (column tile J = k DPUS + d) arrives row by
         * row; a DPU without a k-th strip gets no buffer and is skipped. */
        start(&timer, 1, r);
        for (uint32_t k = 0; k < max_strips; k++)
            for (uint64_t row = 0; row < rows; row++) {
                DPU_FOREACH(set, dpu, i) {
                    uint64_t J = (uint64_t)k * nr_dpus + i;
                    if (J < p.N)
                        DPU_ASSERT(dpu_prepare_xfer(dpu, A + row * cols + J * p.n));
                }
                DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                         (uint32_t)((k * strip_elems + row * p.n) * sizeof(T)), p.n * sizeof(T),
                                         DPU_XFER_DEFAULT));
            }
        stop(&timer, 1);
        start(&timer, 2, r);
        for (uint32_t kernel = KERNEL_TILES; kernel < NR_KERNELS; kernel++) {
            for (i = 0; i < nr_dpus; i++)
                args[i].kernel = kernel;
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]),
                                     DPU_XFER_DEFAULT));
            DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        }
        stop(&timer, 2);
        /* Strip J of the result is At rows J n .. J n + n - 1: contiguous. */
        start(&timer, 3, r);
        for (uint32_t k = 0; k < max_strips; k++) {
            DPU_FOREACH(set, dpu, i) {
                uint64_t J = (uint64_t)k * nr_dpus + i;
                if (J < p.N)
                    DPU_ASSERT(dpu_prepare_xfer(dpu, At + J * strip_elems));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                     (uint32_t)(k * strip_elems * sizeof(T)), strip_elems * sizeof(T),
                                     DPU_XFER_DEFAULT));
        }
        stop(&timer, 3);
    }

    uint64_t errors = 0;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            if (At[c * rows + r] != A[r * cols + c]) {
                if (errors < 5)
                    fprintf(stderr, "TRNS: At[%llu][%llu] differs\n", (unsigned long long)c, (unsigned long long)r);
                errors++;
            }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %llu wrong elements\n", (unsigned long long)errors);
    else
        printf("[OK] outputs are equal\n");
    free(A);
    free(At);
    free(args);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
