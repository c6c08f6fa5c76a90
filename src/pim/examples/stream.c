/* MRAM streaming microbenchmark (PrIM §3.2's shape), host driver: the
 * kernel (dpu/stream.c, plain UPMEM C) reads each tasklet's region of MRAM in
 * fixed-size DMAs; the modeled bandwidth is the bytes read divided by the
 * modeled kernel time. */
#include "nearmem/pim/examples.h"
#include "programs.h"

dpu_error_t nm_pim_mram_stream_run(struct dpu_set_t set, uint32_t tasklets, uint32_t block,
                                   uint32_t bytes_per_tasklet, double *mbps)
{
    dpu_error_t e;
    if ((e = nm_pim__load_example(set, NM_PIM_EX_STREAM, tasklets)) != DPU_OK)
        return e;
    if ((e = dpu_broadcast_to(set, "stream_block", 0, &block, 4, DPU_XFER_DEFAULT)) != DPU_OK ||
        (e = dpu_broadcast_to(set, "stream_bytes", 0, &bytes_per_tasklet, 4, DPU_XFER_DEFAULT)) != DPU_OK)
        return e;
    if ((e = dpu_launch(set, DPU_SYNCHRONOUS)) != DPU_OK)
        return e;
    nm_pim_launch_stats ls;
    nm_pim_cost cost;
    nm_pim_last_launch(set, &ls);
    nm_pim_get_cost(set, &cost);
    uint64_t bytes = (uint64_t)(bytes_per_tasklet / block) * block * tasklets;
    *mbps = ls.max_cycles ? (double)bytes / ((double)ls.max_cycles / (cost.freq_mhz * 1e6)) / 1e6 : 0.0;
    return DPU_OK;
}
