/* MLP host: -l layers of -n neurons (int32, quantised, common.h) on -d DPUs.
 * The weights stay on the DPUs; per layer the host broadcasts the input,
 * launches, and gathers the output rows.
 *
 *   ./bin/host_code [-d DPUS] [-l LAYERS] [-n NEURONS] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when the last layer's output equals the host's, 1 otherwise. */
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
    uint32_t layers, n;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-d DPUS] [-l LAYERS (<= %d, default 3)] [-n NEURONS (default 1024)] [-w WARMUP]"
                    " [-e REPS] [-s SEED]\n",
            prog, MAX_LAYERS);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .layers = 3, .n = 1024, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:l:n:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'l': p.layers = (uint32_t)atoi(optarg); break;
        case 'n': p.n = (uint32_t)parse_size(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || p.layers == 0 || p.layers > MAX_LAYERS || p.n == 0 || p.reps == 0) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

/* The layer being computed. */
uint32_t current_layer;

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;
    static const uint32_t shifts[MAX_LAYERS] = LAYER_SHIFTS;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint32_t cols = (uint32_t)roundup(p.n, 2);
    uint32_t rows_per_dpu = (uint32_t)divceil(p.n, nr_dpus);
    rows_per_dpu += rows_per_dpu & 1;
    const uint64_t layer_elems = (uint64_t)rows_per_dpu * nr_dpus * cols; /* host copy of one layer */
    const uint64_t dpu_layer_elems = (uint64_t)rows_per_dpu * cols;
    if ((p.layers * dpu_layer_elems + cols + rows_per_dpu) * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "MLP: %u layers of %u x %u per DPU do not fit in MRAM\n", p.layers, rows_per_dpu, cols);
        return 2;
    }
    T *W = calloc(p.layers * layer_elems, sizeof(T));
    T *x0 = calloc(cols, sizeof(T));
    T *x = calloc(cols, sizeof(T));
    T *y = calloc((uint64_t)rows_per_dpu * nr_dpus, sizeof(T));
    T *ref = calloc(cols, sizeof(T));
    T *ref_next = calloc(cols, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    if (!W || !x0 || !x || !y || !ref || !ref_next || !args) {
        fprintf(stderr, "MLP: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    for (uint32_t l = 0; l < p.layers; l++)
        for (uint64_t r = 0; r < p.n; r++)
            for (uint32_t c = 0; c < p.n; c++)
                W[l * layer_elems + r * cols + c] = (T)(rng_next() % 17) - 8;
    for (uint32_t c = 0; c < p.n; c++)
        x0[c] = (T)(rng_next() % 256);
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * rows_per_dpu;
        args[i].rows = (uint32_t)(first >= p.n ? 0 : (p.n - first < rows_per_dpu ? p.n - first : rows_per_dpu));
        args[i].rows_per_dpu = rows_per_dpu;
        args[i].cols = cols;
    }
    printf("MLP: %u DPUs, %u layers of %u neurons\n", nr_dpus, p.layers, p.n);

    Timer timer = {0};
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        start(&timer, 1, r);
        DPU_ASSERT(dpu_broadcast_to(set, "nr_layers", 0, &p.layers, sizeof(p.layers), DPU_XFER_DEFAULT));
        for (uint32_t l = 0; l < p.layers; l++) {
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, W + l * layer_elems + (uint64_t)i * dpu_layer_elems));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                     (uint32_t)(l * dpu_layer_elems * sizeof(T)), dpu_layer_elems * sizeof(T),
                                     DPU_XFER_DEFAULT));
        }
        stop(&timer, 1);
        memcpy(x, x0, cols * sizeof(T));
        for (current_layer = 0; current_layer < p.layers; current_layer++) {
            start(&timer, 4, r || current_layer);
            for (i = 0; i < nr_dpus; i++)
                args[i].layer = current_layer;
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]),
                                     DPU_XFER_DEFAULT));
            DPU_ASSERT(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME,
                                        (uint32_t)(p.layers * dpu_layer_elems * sizeof(T)), x, cols * sizeof(T),
                                        DPU_XFER_DEFAULT));
            stop(&timer, 4);
            start(&timer, 2, r || current_layer);
            DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
            stop(&timer, 2);
            start(&timer, 3, r || current_layer);
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, y + (uint64_t)i * rows_per_dpu));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME,
                                     (uint32_t)((p.layers * dpu_layer_elems + cols) * sizeof(T)),
                                     rows_per_dpu * sizeof(T), DPU_XFER_DEFAULT));
            memcpy(x, y, p.n * sizeof(T)); /* the padding column stays 0 */
            stop(&timer, 3);
        }
    }

    /* The reference, layer by layer. */
    memcpy(ref, x0, cols * sizeof(T));
    for (uint32_t l = 0; l < p.layers; l++) {
        for (uint64_t r = 0; r < p.n; r++) {
            uint32_t acc = 0;
            for (uint32_t c = 0; c < p.n; c++)
                acc += (uint32_t)W[l * layer_elems + r * cols + c] * (uint32_t)ref[c];
            ref_next[r] = activate(acc, shifts[l]);
        }
        memcpy(ref, ref_next, p.n * sizeof(T));
    }
    uint32_t errors = 0, nonzero = 0;
    for (uint32_t c = 0; c < p.n; c++) {
        nonzero += ref[c] != 0;
        if (x[c] != ref[c]) {
            if (errors < 5)
                fprintf(stderr, "MLP: out[%u] = %d, expected %d\n", c, x[c], ref[c]);
            errors++;
        }
    }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 4, "Inter-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %u wrong outputs\n", errors);
    else
        printf("[OK] outputs are equal (%u of %u non-zero)\n", nonzero, p.n);
    free(W);
    free(x0);
    free(x);
    free(y);
    free(ref);
    free(ref_next);
    free(args);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
