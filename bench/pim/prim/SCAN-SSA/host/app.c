/* SCAN-SSA host: inclusive prefix sum of -n int64 elements on -d DPUs
 * (scan on the DPUs, scan of the DPUs' totals on the host, add on the DPUs).
 *
 *   ./bin/host_code [-d DPUS] [-n ELEMENTS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when every output equals the host's scan, 1 otherwise. */
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
    uint64_t n;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-d DPUS] [-n ELEMENTS (int64, total; default 1M)] [-w WARMUP] [-e REPS] [-s SEED]\n",
            prog);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .n = 1 << 20, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:n:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'n': p.n = parse_size(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || p.n == 0 || p.reps == 0) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

static void push_args(struct dpu_set_t set, dpu_arguments_t *args)
{
    struct dpu_set_t dpu;
    uint32_t i;
    DPU_FOREACH(set, dpu, i) {
        DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
    }
    DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]), DPU_XFER_DEFAULT));
}

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint64_t per_dpu = divceil(p.n, nr_dpus);
    if (per_dpu * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "SCAN-SSA: %llu elements per DPU do not fit in MRAM\n", (unsigned long long)per_dpu);
        return 2;
    }
    T *A = calloc(per_dpu * nr_dpus, sizeof(T));
    T *C = calloc(per_dpu * nr_dpus, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    dpu_results_t *results = calloc(nr_dpus, sizeof(*results));
    if (!A || !C || !args || !results) {
        fprintf(stderr, "SCAN-SSA: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    for (uint64_t k = 0; k < p.n; k++)
        A[k] = (T)(rng_next() >> 36) - ((T)1 << 27);
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * per_dpu;
        args[i].count = (uint32_t)(first >= p.n ? 0 : (p.n - first < per_dpu ? p.n - first : per_dpu));
    }
    printf("SCAN-SSA: %u DPUs, %llu elements\n", nr_dpus, (unsigned long long)p.n);

    Timer timer = {0};
    uint64_t max_cycles = 0;
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        start(&timer, 1, r);
        for (i = 0; i < nr_dpus; i++)
            args[i].kernel = KERNEL_SCAN;
        push_args(set, args);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, A + (uint64_t)i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per_dpu * sizeof(T),
                                 DPU_XFER_DEFAULT));
        stop(&timer, 1);

        start(&timer, 2, r);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);

        /* Inter-DPU step: the DPUs' totals, scanned on the host. */
        start(&timer, 4, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, &results[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, "DPU_RESULTS", 0, sizeof(results[0]), DPU_XFER_DEFAULT));
        T running = 0;
        max_cycles = 0;
        for (i = 0; i < nr_dpus; i++) {
            args[i].kernel = KERNEL_ADD;
            args[i].base = running;
            running += results[i].total;
            max_cycles = results[i].cycles > max_cycles ? results[i].cycles : max_cycles;
        }
        push_args(set, args);
        stop(&timer, 4);

        start(&timer, 2, 1);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);

        start(&timer, 3, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, C + (uint64_t)i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per_dpu * sizeof(T),
                                 DPU_XFER_DEFAULT));
        stop(&timer, 3);
    }

    uint64_t errors = 0;
    T acc = 0;
    for (uint64_t k = 0; k < p.n; k++) {
        acc += A[k];
        if (C[k] != acc) {
            if (errors < 5)
                fprintf(stderr, "SCAN-SSA: out[%llu] = %lld, expected %lld\n", (unsigned long long)k,
                        (long long)C[k], (long long)acc);
            errors++;
        }
    }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 4, "Inter-DPU", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    printf("DPU cycles   %10llu (slowest DPU, scan kernel)\n", (unsigned long long)max_cycles);
    if (errors)
        printf("[ERROR] %llu wrong elements\n", (unsigned long long)errors);
    else
        printf("[OK] outputs are equal\n");

    free(A);
    free(C);
    free(args);
    free(results);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
