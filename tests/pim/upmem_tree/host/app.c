/* Host side of the vector addition: UPMEM SDK calls only. */
#include <dpu.h>
#include <dpu_log.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/common.h"

#ifndef DPU_BINARY
#define DPU_BINARY "./bin/dpu_code"
#endif

int main(int argc, char **argv)
{
    uint32_t nr_dpus = argc > 1 ? (uint32_t)atoi(argv[1]) : NR_DPUS;
    uint32_t per_dpu = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096; /* elements */
    struct dpu_set_t dpu_set, dpu;
    uint32_t i;
    DPU_ASSERT(dpu_alloc(nr_dpus, NULL, &dpu_set));
    DPU_ASSERT(dpu_load(dpu_set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(dpu_set, &nr_dpus));
    uint64_t n = (uint64_t)nr_dpus * per_dpu;
    T *A = malloc(n * sizeof(T)), *B = malloc(n * sizeof(T)), *C = malloc(n * sizeof(T));
    for (uint64_t k = 0; k < n; k++) {
        A[k] = (T)(k * 3 + checksum_seed);
        B[k] = (T)(k * 5);
    }
    uint32_t bytes = per_dpu * sizeof(T);
    dpu_arguments_t args = {bytes, bytes};
    DPU_FOREACH(dpu_set, dpu, i) DPU_ASSERT(dpu_prepare_xfer(dpu, &args));
    DPU_ASSERT(dpu_push_xfer(dpu_set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args), DPU_XFER_DEFAULT));
    DPU_FOREACH(dpu_set, dpu, i) DPU_ASSERT(dpu_prepare_xfer(dpu, &A[(uint64_t)i * per_dpu]));
    DPU_ASSERT(dpu_push_xfer(dpu_set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, bytes, DPU_XFER_DEFAULT));
    DPU_FOREACH(dpu_set, dpu, i) DPU_ASSERT(dpu_prepare_xfer(dpu, &B[(uint64_t)i * per_dpu]));
    DPU_ASSERT(dpu_push_xfer(dpu_set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, bytes, bytes, DPU_XFER_DEFAULT));
    DPU_ASSERT(dpu_launch(dpu_set, DPU_SYNCHRONOUS));
    DPU_FOREACH(dpu_set, dpu, i) DPU_ASSERT(dpu_prepare_xfer(dpu, &C[(uint64_t)i * per_dpu]));
    DPU_ASSERT(dpu_push_xfer(dpu_set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, bytes, bytes, DPU_XFER_DEFAULT));
    DPU_FOREACH(dpu_set, dpu, i)
    {
        if (i == 0)
            DPU_ASSERT(dpu_log_read(dpu, stdout));
    }
    int ok = 1;
    for (uint64_t k = 0; k < n; k++)
        ok &= C[k] == A[k] + B[k];
    printf("[%s] vector addition of %llu elements on %u DPUs (host and DPU share support/common.h; divceil %u)\n",
           ok ? "OK" : "ERROR", (unsigned long long)n, nr_dpus, divceil(bytes, BLOCK_SIZE));
    DPU_ASSERT(dpu_free(dpu_set));
    free(A);
    free(B);
    free(C);
    return ok ? 0 : 1;
}
