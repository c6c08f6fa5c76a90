/* UNI host: drop the repeats from -n int64 elements (runs of equal values)
 * on -d DPUs; the host concatenates the DPUs' outputs, dropping a DPU's first
 * element when it repeats the previous DPU's last.
 *
 *   ./bin/host_code [-d DPUS] [-n ELEMENTS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when the output equals the host's, 1 otherwise. */
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

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint64_t per_dpu = divceil(p.n, nr_dpus);
    if (2 * per_dpu * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "UNI: %llu elements per DPU do not fit in MRAM\n", (unsigned long long)per_dpu);
        return 2;
    }
    T *A = calloc(per_dpu * nr_dpus, sizeof(T));
    T *from_dpus = calloc(per_dpu * nr_dpus, sizeof(T));
    T *C = calloc(p.n, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    dpu_results_t *results = calloc(nr_dpus, sizeof(*results));
    if (!A || !from_dpus || !C || !args || !results) {
        fprintf(stderr, "UNI: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    /* Sorted runs of 1..8 equal values. */
    T v = -(T)p.n;
    for (uint64_t k = 0; k < p.n; k++) {
        if (rng_next() % 4 == 0)
            v += 1 + (T)(rng_next() % 3);
        A[k] = v;
    }
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * per_dpu;
        args[i].count = (uint32_t)(first >= p.n ? 0 : (p.n - first < per_dpu ? p.n - first : per_dpu));
        args[i].transfer_size = (uint32_t)(per_dpu * sizeof(T));
    }
    printf("UNI: %u DPUs, %llu elements\n", nr_dpus, (unsigned long long)p.n);

    Timer timer = {0};
    uint64_t total = 0;
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
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per_dpu * sizeof(T),
                                 DPU_XFER_DEFAULT));
        stop(&timer, 1);
        start(&timer, 2, r);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);
        start(&timer, 3, r);
        /* How many each DPU kept (one DPU at a time), then the outputs, as
         * long as the longest, all at once. */
        uint32_t most = 0;
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_copy_from(dpu, "DPU_RESULTS", 0, &results[i], sizeof(results[i])));
            most = results[i].kept > most ? results[i].kept : most;
        }
        if (most) {
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, from_dpus + (uint64_t)i * per_dpu));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                     (uint32_t)(per_dpu * sizeof(T)), most * sizeof(T), DPU_XFER_DEFAULT));
        }
        total = 0;
        for (i = 0; i < nr_dpus; i++)
            for (uint32_t k = 0; k < results[i].kept; k++) {
                T e = from_dpus[(uint64_t)i * per_dpu + k];
                if (k == 0 && total > 0 && C[total - 1] == e)
                    continue;
                C[total++] = e;
            }
        stop(&timer, 3);
    }

    uint64_t errors = 0, expect = 0;
    for (uint64_t k = 0; k < p.n; k++)
        if (k == 0 || A[k] != A[k - 1]) {
            if (expect >= total || C[expect] != A[k]) {
                if (errors < 5)
                    fprintf(stderr, "UNI: output %llu differs\n", (unsigned long long)expect);
                errors++;
            }
            expect++;
        }
    if (expect != total) {
        fprintf(stderr, "UNI: %llu elements kept, expected %llu\n", (unsigned long long)total,
                (unsigned long long)expect);
        errors++;
    }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %llu differences\n", (unsigned long long)errors);
    else
        printf("[OK] %llu unique of %llu elements\n", (unsigned long long)total, (unsigned long long)p.n);
    free(A);
    free(from_dpus);
    free(C);
    free(args);
    free(results);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
