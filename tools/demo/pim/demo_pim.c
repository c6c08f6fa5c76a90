/* Demo step: the emulated UPMEM machine. 64 DPUs (one rank), PrIM's vector
 * addition with 16 tasklets, its kernel in plain UPMEM C (built by
 * nearmem-dpu-cc like dpu-upmem-dpurte-clang builds it): copy in, launch,
 * copy back, check, and print the modeled times beside the host's wall time. */
#include <stdlib.h>

#include "nearmem/common.h"
#include "nearmem/demo.h"
#include "nearmem/pim/examples.h"

int nm_demo_pim(nm_demo *d)
{
    enum { DPUS = 64, TASKLETS = 16, PER_DPU = 65536 };
    const uint64_t n = (uint64_t)DPUS * PER_DPU;
    int32_t *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return nm_fail(NM_ENOMEM, "demo buffers");
    }
    nm_rng r;
    nm_rng_seed(&r, nm_demo_seed(d));
    for (uint64_t i = 0; i < n; i++) {
        a[i] = (int32_t)(nm_rng_u64(&r) >> 36);
        b[i] = (int32_t)(nm_rng_u64(&r) >> 36);
    }
    struct dpu_set_t set;
    dpu_error_t e = dpu_alloc(DPUS, NULL, &set);
    nm_err rc = NM_OK;
    if (e != DPU_OK) {
        rc = nm_fail(NM_ENOMEM, "dpu_alloc: %s", dpu_error_to_string(e));
        goto out;
    }
    uint32_t ranks = 0;
    dpu_get_nr_ranks(set, &ranks);
    nm_pim_cost cost;
    nm_pim_get_cost(set, &cost);
    nm_demo_say(d, "allocated %u DPUs in %u rank(s) at %.0f MHz (emulated on %u host threads)", DPUS, ranks,
                cost.freq_mhz, nm_pim_host_threads(set));
    nm_pim_run_report rep;
    e = nm_pim_va_run(set, TASKLETS, a, b, c, n, &rep);
    if (e != DPU_OK) {
        rc = nm_fail(NM_EFAULT, "vector add: %s", dpu_error_to_string(e));
        goto out_free;
    }
    for (uint64_t i = 0; i < n; i++)
        if (c[i] != a[i] + b[i]) {
            rc = nm_fail(NM_ECORRUPT, "c[%llu] = %d, expected %d", (unsigned long long)i, c[i], a[i] + b[i]);
            goto out_free;
        }
    nm_demo_say(d, "kernel: src/pim/examples/dpu/va.c, plain UPMEM C (int main, __host args, mram_read/write),");
    nm_demo_say(d, "        built by nearmem-dpu-cc -O2 -DNR_TASKLETS=%u into a program file, loaded with dpu_load_from_incbin",
                TASKLETS);
    nm_demo_say(d, "vector add of %llu int32 (%u per DPU, %u tasklets): all results correct",
                (unsigned long long)n, PER_DPU, TASKLETS);
    nm_demo_say(d, "modeled: copy in %.3f ms, kernel %.3f ms (%llu cycles, %.2f instr/cycle), copy back %.3f ms",
                rep.modeled_xfer_to_s * 1e3, rep.modeled_kernel_s * 1e3, (unsigned long long)rep.max_cycles,
                (double)rep.instructions / DPUS / (double)rep.max_cycles, rep.modeled_xfer_from_s * 1e3);
    nm_demo_say(d, "host wall time to emulate it all: %.3f s (not comparable with modeled time)", rep.host_s);
out_free:
    dpu_free(set);
out:
    free(a);
    free(b);
    free(c);
    return rc;
}
