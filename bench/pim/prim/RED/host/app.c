/* RED host: the sum of -n int64 elements split across -d DPUs; each DPU sums
 * its slice, the host adds the DPUs' sums.
 *
 *   ./bin/host_code [-d DPUS] [-n ELEMENTS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when the sum equals the host's, 1 otherwise. */
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
    fprintf(stderr,
            "usage: %s [-d DPUS] [-n ELEMENTS] [-w WARMUP] [-e REPS] [-s SEED]\n"
            "  -n  int64 elements in total (default 1M; K/M suffixes), at most %u per DPU\n",
            prog, MAX_ELEMS_PER_DPU);
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

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint64_t per_dpu = divceil(p.n, nr_dpus);
    if (per_dpu > MAX_ELEMS_PER_DPU) {
        fprintf(stderr, "RED: %llu elements per DPU, the DPU program holds %u\n", (unsigned long long)per_dpu,
                MAX_ELEMS_PER_DPU);
        return 2;
    }
    T *A = calloc(per_dpu * nr_dpus, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    dpu_results_t *results = calloc(nr_dpus, sizeof(*results));
    if (!A || !args || !results) {
        fprintf(stderr, "RED: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    T expect = 0;
    for (uint64_t k = 0; k < p.n; k++) {
        A[k] = (T)(rng_next() >> 34) - ((T)1 << 29);
        expect += A[k];
    }
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * per_dpu;
        args[i].count = (uint32_t)(first >= p.n ? 0 : (p.n - first < per_dpu ? p.n - first : per_dpu));
    }
    printf("RED: %u DPUs, %llu elements\n", nr_dpus, (unsigned long long)p.n);

    Timer timer = {0};
    T sum = 0;
    uint64_t max_cycles = 0;
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        start(&timer, 1, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, A + (uint64_t)i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "input", 0, per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        stop(&timer, 1);
        start(&timer, 2, r);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);
        start(&timer, 3, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, &results[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, "DPU_RESULTS", 0, sizeof(results[0]), DPU_XFER_DEFAULT));
        sum = 0;
        max_cycles = 0;
        for (i = 0; i < nr_dpus; i++) {
            sum += results[i].sum;
            if (results[i].cycles > max_cycles)
                max_cycles = results[i].cycles;
        }
        stop(&timer, 3);
    }

    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    printf("DPU cycles   %10llu (slowest DPU)\n", (unsigned long long)max_cycles);
    bool ok = sum == expect;
    if (ok)
        printf("[OK] sum %lld\n", (long long)sum);
    else
        printf("[ERROR] sum %lld, expected %lld\n", (long long)sum, (long long)expect);

    free(A);
    free(args);
    free(results);
    DPU_ASSERT(dpu_free(set));
    return ok ? 0 : 1;
}
