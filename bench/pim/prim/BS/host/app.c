/* BS host: -q int64 queries searched in a sorted array of -n int64 elements.
 * The array is broadcast to -d DPUs, the queries split across them.
 *
 *   ./bin/host_code [-d DPUS] [-n ARRAY] [-q QUERIES] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when every answer equals the host's, 1 otherwise. */
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
    uint64_t n, q;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-d DPUS] [-n ARRAY (default 64K)] [-q QUERIES (total, default 1M)] [-w WARMUP] [-e REPS]"
            " [-s SEED]\n",
            prog);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .n = 1 << 16, .q = 1 << 20, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:n:q:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'n': p.n = parse_size(optarg); break;
        case 'q': p.q = parse_size(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || p.n == 0 || p.q == 0 || p.reps == 0) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

/* The reference: index of key in the sorted array, or NOT_FOUND. */
static T host_search(const T *a, uint64_t n, T key)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == key ? (T)lo : NOT_FOUND;
}

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    const uint64_t q_per_dpu = divceil(p.q, nr_dpus);
    if ((p.n + q_per_dpu) * sizeof(T) > (60u << 20)) {
        fprintf(stderr, "BS: the array and %llu queries per DPU do not fit in MRAM\n",
                (unsigned long long)q_per_dpu);
        return 2;
    }
    T *array = malloc(p.n * sizeof(T));
    T *queries = calloc(q_per_dpu * nr_dpus, sizeof(T));
    T *answers = calloc(q_per_dpu * nr_dpus, sizeof(T));
    if (!array || !queries || !answers) {
        fprintf(stderr, "BS: out of host memory\n");
        return 2;
    }
    /* Distinct increasing values with gaps; half the queries hit. */
    rng_seed(p.seed);
    T v = -(T)(p.n * 2);
    for (uint64_t k = 0; k < p.n; k++) {
        v += 1 + (T)(rng_next() % 4);
        array[k] = v;
    }
    for (uint64_t k = 0; k < p.q; k++) {
        uint64_t r = rng_next();
        queries[k] = (r & 1) ? array[(r >> 1) % p.n] : array[0] - 8 + (T)((r >> 1) % (uint64_t)(v - array[0] + 16));
    }
    printf("BS: %u DPUs, array of %llu, %llu queries\n", nr_dpus, (unsigned long long)p.n,
           (unsigned long long)p.q);

    Timer timer = {0};
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        start(&timer, 1, r);
        /* Arguments one DPU at a time; the array to all at once. */
        DPU_FOREACH(set, dpu, i) {
            uint64_t first = (uint64_t)i * q_per_dpu;
            dpu_arguments_t args = {
                .array_size = (uint32_t)p.n,
                .queries = (uint32_t)(first >= p.q ? 0 : (p.q - first < q_per_dpu ? p.q - first : q_per_dpu)),
            };
            DPU_ASSERT(dpu_copy_to(dpu, "DPU_INPUT_ARGUMENTS", 0, &args, sizeof(args)));
        }
        DPU_ASSERT(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, 0, array, p.n * sizeof(T), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, queries + (uint64_t)i * q_per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, p.n * sizeof(T),
                                 q_per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        stop(&timer, 1);
        start(&timer, 2, r);
        DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
        stop(&timer, 2);
        start(&timer, 3, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, answers + (uint64_t)i * q_per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, p.n * sizeof(T),
                                 q_per_dpu * sizeof(T), DPU_XFER_DEFAULT));
        stop(&timer, 3);
    }

    uint64_t errors = 0, hits = 0;
    for (uint64_t k = 0; k < p.q; k++) {
        T expect = host_search(array, p.n, queries[k]);
        hits += expect != NOT_FOUND;
        if (answers[k] != expect) {
            if (errors < 5)
                fprintf(stderr, "BS: query %llu (%lld) -> %lld, expected %lld\n", (unsigned long long)k,
                        (long long)queries[k], (long long)answers[k], (long long)expect);
            errors++;
        }
    }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %llu wrong answers\n", (unsigned long long)errors);
    else
        printf("[OK] %llu answers equal (%llu found)\n", (unsigned long long)p.q, (unsigned long long)hits);
    free(array);
    free(queries);
    free(answers);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
