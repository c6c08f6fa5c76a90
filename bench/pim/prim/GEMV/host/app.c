/* GEMV host: y = A x, A of -m x -n uint32 (modulo 2^32), rows split across
 * -d DPUs, x broadcast.
 *
 *   ./bin/host_code [-d DPUS] [-m ROWS] [-n COLS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when y equals the host's product, 1 otherwise. */
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
    uint32_t m, n;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-d DPUS] [-m ROWS (default 8192)] [-n COLS (default 1024)] [-w WARMUP] [-e REPS]"
                    " [-s SEED]\n",
            prog);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .m = 8192, .n = 1024, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:m:n:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'm': p.m = (uint32_t)parse_size(optarg); break;
        case 'n': p.n = (uint32_t)parse_size(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || p.m == 0 || p.n == 0 || p.reps == 0) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

/* The matrix, the vector and the DPUs' result. */
T *A, *x, *y;

/* The reference product of the host. */
void gemv(T *out, const T *mat, const T *vec, uint32_t rows, uint32_t cols, uint32_t stride)
{
    for (uint32_t r = 0; r < rows; r++) {
        T acc = 0;
        for (uint32_t c = 0; c < cols; c++)
            acc += mat[(uint64_t)r * stride + c] * vec[c];
        out[r] = acc;
    }
}

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint32_t cols = (uint32_t)roundup(p.n, 2);
    const uint32_t rows_per_dpu = rows_per_dpu_for(p.m, nr_dpus);
    if (((uint64_t)rows_per_dpu * cols + cols + rows_per_dpu) * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "GEMV: %u rows of %u per DPU do not fit in MRAM\n", rows_per_dpu, cols);
        return 2;
    }
    A = calloc((uint64_t)rows_per_dpu * nr_dpus * cols, sizeof(T));
    x = calloc(cols, sizeof(T));
    y = calloc((uint64_t)rows_per_dpu * nr_dpus, sizeof(T));
    T *expect = calloc(p.m, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    if (!A || !x || !y || !expect || !args) {
        fprintf(stderr, "GEMV: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    for (uint64_t r = 0; r < p.m; r++)
        for (uint32_t c = 0; c < p.n; c++)
            A[r * cols + c] = (T)(rng_next() & 0xFFFF);
    for (uint32_t c = 0; c < p.n; c++)
        x[c] = (T)(rng_next() & 0xFFFF);
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * rows_per_dpu;
        args[i].rows = (uint32_t)(first >= p.m ? 0 : (p.m - first < rows_per_dpu ? p.m - first : rows_per_dpu));
        args[i].rows_per_dpu = rows_per_dpu;
        args[i].cols = cols;
    }
    printf("GEMV: %u DPUs, %u x %u\n", nr_dpus, p.m, p.n);

    Timer timer = {0};
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        const uint64_t a_bytes = (uint64_t)rows_per_dpu * cols * sizeof(T);
        start(&timer, 1, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, A + (uint64_t)i * rows_per_dpu * cols));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, a_bytes, DPU_XFER_DEFAULT));
        DPU_ASSERT(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, (uint32_t)a_bytes, x, cols * sizeof(T),
                                    DPU_XFER_DEFAULT));
        stop(&timer, 1);
        start(&timer, 2, r);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);
        start(&timer, 3, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, y + (uint64_t)i * rows_per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                 (uint32_t)(a_bytes + cols * sizeof(T)), rows_per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        stop(&timer, 3);
    }

    gemv(expect, A, x, p.m, p.n, cols);
    uint32_t errors = 0;
    for (uint32_t r = 0; r < p.m; r++)
        if (y[r] != expect[r]) {
            if (errors < 5)
                fprintf(stderr, "GEMV: y[%u] = %u, expected %u\n", r, y[r], expect[r]);
            errors++;
        }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %u wrong rows\n", errors);
    else
        printf("[OK] outputs are equal\n");
    free(A);
    free(x);
    free(y);
    free(expect);
    free(args);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
