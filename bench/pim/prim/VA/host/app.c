/* VA host: C = A + B over -n int32 elements split across -d DPUs.
 *
 *   ./bin/host_code [-d DPUS] [-n ELEMENTS] [-w WARMUP] [-e REPS] [-s SEED] [-v]
 *
 * Tasklets and block size are the DPU binary's (make NR_TASKLETS=.. BL=..).
 * Exits 0 when every output element equals the host's sum, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dpu.h>
#include <dpu_log.h>

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
    bool verbose;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -d DPUS      DPUs to allocate (default 1)\n"
            "  -n ELEMENTS  int32 elements per vector, total (default 1M; K/M suffixes)\n"
            "  -w N         warm-up repetitions (default 0)\n"
            "  -e N         timed repetitions (default 1)\n"
            "  -s SEED      input seed (default 1)\n"
            "  -v           print the first DPU's log\n",
            prog);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .n = 1 << 20, .warmup = 0, .reps = 1, .seed = 1, .verbose = false};
    int opt;
    while ((opt = getopt(argc, argv, "hd:n:w:e:s:v")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'n': p.n = parse_size(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'v': p.verbose = true; break;
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

    /* Each DPU gets an equal slice, rounded to 8 bytes (2 elements). */
    const uint64_t per_dpu = roundup(divceil(p.n, nr_dpus), 8 / sizeof(T));
    const uint64_t padded = per_dpu * nr_dpus;
    if (per_dpu * sizeof(T) * 2 > (64u << 20) - 4096) {
        fprintf(stderr, "VA: %llu elements per DPU do not fit in MRAM\n", (unsigned long long)per_dpu);
        return 2;
    }
    T *A = calloc(padded, sizeof(T));
    T *B = calloc(padded, sizeof(T));
    T *C = calloc(padded, sizeof(T));
    dpu_arguments_t *args = calloc(nr_dpus, sizeof(*args));
    if (!A || !B || !C || !args) {
        fprintf(stderr, "VA: out of host memory\n");
        return 2;
    }
    rng_seed(p.seed);
    for (uint64_t k = 0; k < p.n; k++) {
        uint64_t r = rng_next();
        A[k] = (T)(int32_t)(r & 0x7FFFFFFF) - (1 << 30);
        B[k] = (T)(int32_t)((r >> 32) & 0x7FFFFFFF) - (1 << 30);
    }
    for (i = 0; i < nr_dpus; i++) {
        uint64_t first = (uint64_t)i * per_dpu;
        uint64_t count = first >= p.n ? 0 : (p.n - first < per_dpu ? p.n - first : per_dpu);
        args[i].size = (uint32_t)roundup(count * sizeof(T), 8);
        args[i].transfer_size = (uint32_t)(per_dpu * sizeof(T));
        args[i].verbose = p.verbose;
    }

    printf("VA: %u DPUs, %llu elements (%llu per DPU)", nr_dpus, (unsigned long long)p.n,
           (unsigned long long)per_dpu);
#ifdef NR_TASKLETS
    printf(", %u tasklets", NR_TASKLETS);
#endif
    printf("\n");

    Timer timer = {0};
    uint64_t max_cycles = 0;
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        bool timed = rep >= p.warmup;
        if (timed)
            start(&timer, 1, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, A + i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per_dpu * sizeof(T),
                                 DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, B + i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, per_dpu * sizeof(T),
                                 per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        if (timed) {
            stop(&timer, 1);
            start(&timer, 2, r);
        }
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        if (timed) {
            stop(&timer, 2);
            start(&timer, 3, r);
        }
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, C + i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, per_dpu * sizeof(T),
                                 per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        if (timed)
            stop(&timer, 3);
    }
    /* Per-DPU cycle counts, one DPU at a time. */
    DPU_FOREACH(set, dpu, i) {
        dpu_results_t res;
        DPU_ASSERT(dpu_copy_from(dpu, "DPU_RESULTS", 0, &res, sizeof(res)));
        if (res.cycles > max_cycles)
            max_cycles = res.cycles;
        if (p.verbose && i == 0)
            DPU_ASSERT(dpu_log_read(dpu, stdout));
    }

    uint64_t errors = 0;
    for (uint64_t k = 0; k < p.n; k++) {
        T expect = A[k] + B[k];
        if (C[k] != expect) {
            if (errors < 5)
                fprintf(stderr, "VA: C[%llu] = %d, expected %d\n", (unsigned long long)k, C[k], expect);
            errors++;
        }
    }

    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    printf("DPU cycles   %10llu (slowest DPU, last launch)\n", (unsigned long long)max_cycles);
    if (errors)
        printf("[ERROR] %llu wrong elements\n", (unsigned long long)errors);
    else
        printf("[OK] outputs are equal\n");

    free(A);
    free(B);
    free(C);
    free(args);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
