/* MRAM streaming microbenchmark (PrIM §3.2's shape): each tasklet reads
 * its own region of MRAM in fixed-size DMAs; the modeled bandwidth is the
 * bytes read divided by the modeled kernel time. */
#include "nearmem/pim/dpu.h"
#include "nearmem/pim/examples.h"

DPU_PROGRAM(nm_mram_stream);

DPU_HOST(uint32_t, stream_block);
DPU_HOST(uint32_t, stream_bytes); /* per tasklet */

int DPU_MAIN(void)
{
    const uint32_t base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + me() * stream_bytes;
    void *buf = mem_alloc(stream_block);
    for (uint32_t off = 0; off + stream_block <= stream_bytes; off += stream_block) {
        nm_pim_charge(3); /* address add, compare, branch */
        mram_read(base + off, buf, stream_block);
    }
    return 0;
}

dpu_error_t nm_pim_mram_stream_run(struct dpu_set_t set, uint32_t tasklets, uint32_t block,
                                   uint32_t bytes_per_tasklet, double *mbps)
{
    dpu_error_t e;
    if ((e = dpu_load(set, "nm_mram_stream", NULL)) != DPU_OK || (e = nm_pim_set_tasklets(set, tasklets)) != DPU_OK)
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
