/* HST-S host: histogram of -n 12-bit samples into -b bins on -d DPUs; the
 * host adds the DPUs' histograms.
 *
 *   ./bin/host_code [-d DPUS] [-n SAMPLES] [-b BINS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when the histogram equals the host's, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    uint32_t bins;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-d DPUS] [-n SAMPLES (total, default 1M)] [-b BINS (even, <= %d, default 256)]\n"
            "          [-w WARMUP] [-e REPS] [-s SEED]\n",
            prog, MAX_BINS);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .n = 1 << 20, .bins = 256, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:n:b:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'n': p.n = parse_size(optarg); break;
        case 'b': p.bins = (uint32_t)atoi(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || p.n == 0 || p.reps == 0 || p.bins == 0 || p.bins % 2 || p.bins > MAX_BINS) {
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

    /* Slices of an even number of samples (8-byte transfers). */
    const uint64_t per_dpu = roundup(divceil(p.n, nr_dpus), 2);
    if (per_dpu * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "HST-S: %llu samples per DPU do not fit in MRAM\n", (unsigned long long)per_dpu);
        return 2;
    }
    T *A = calloc(per_dpu * nr_dpus, sizeof(T));
    uint32_t *histo_dpus = calloc((size_t)nr_dpus * p.bins, sizeof(uint32_t));
    uint32_t *histo = calloc(p.bins, sizeof(uint32_t));
    uint32_t *expect = calloc(p.bins, sizeof(uint32_t));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    if (!A || !histo_dpus || !histo || !expect || !args) {
        fprintf(stderr, "HST-S: out of host memory\n");
        return 2;
    }
    /* An image-like input: a smooth ramp plus noise, 12-bit samples. */
    rng_seed(p.seed);
    for (uint64_t k = 0; k < p.n; k++) {
        uint64_t r = rng_next();
        A[k] = (T)(((k * 7) / 3 + (r & 511)) & ((1u << DEPTH) - 1));
        expect[BIN_OF(A[k], p.bins)]++;
    }
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * per_dpu;
        uint64_t count = first >= p.n ? 0 : (p.n - first < per_dpu ? p.n - first : per_dpu);
        args[i].size = (uint32_t)(count * sizeof(T)); /* exact: the reader needs no 8-byte multiple */
        args[i].transfer_size = (uint32_t)(per_dpu * sizeof(T));
        args[i].bins = p.bins;
    }
    printf("HST-S: %u DPUs, %llu samples, %u bins\n", nr_dpus, (unsigned long long)p.n, p.bins);

    Timer timer = {0};
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
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, histo_dpus + (uint64_t)i * p.bins));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, per_dpu * sizeof(T),
                                 p.bins * sizeof(uint32_t), DPU_XFER_DEFAULT));
        stop(&timer, 3);
        start(&timer, 4, r);
        memset(histo, 0, p.bins * sizeof(uint32_t));
        for (i = 0; i < nr_dpus; i++)
            for (uint32_t b = 0; b < p.bins; b++)
                histo[b] += histo_dpus[(uint64_t)i * p.bins + b];
        stop(&timer, 4);
    }

    uint32_t errors = 0;
    for (uint32_t b = 0; b < p.bins; b++)
        if (histo[b] != expect[b]) {
            if (errors < 5)
                fprintf(stderr, "HST-S: bin %u = %u, expected %u\n", b, histo[b], expect[b]);
            errors++;
        }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    print_timer(&timer, 4, "Merge", p.reps);
    if (errors)
        printf("[ERROR] %u wrong bins\n", errors);
    else
        printf("[OK] histograms are equal\n");
    free(A);
    free(histo_dpus);
    free(histo);
    free(expect);
    free(args);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
