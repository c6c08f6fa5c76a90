/* MRAM latency, after PrIM's microbenchmark (Sec. 3.2.1): one tasklet issues
 * `count` DMAs of one size (8..2048 bytes) between MRAM and WRAM, and times
 * them with the cycle counter; cycles per DMA is the latency, size / latency
 * the bandwidth. Written for nearmem in plain UPMEM C. */
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>
#include <stdint.h>

#include "validate.h"

__host vt_mram_args ARGS;
__host uint64_t RESULT_CYCLES;

static __dma_aligned uint8_t buffer[2048];

int main(void)
{
    if (me() != 0)
        return 0;
    perfcounter_config(COUNT_CYCLES, true);
    uint32_t size = ARGS.size, base = (uint32_t)DPU_MRAM_HEAP_POINTER;
    perfcounter_t t0 = perfcounter_get();
    for (uint32_t i = 0; i < ARGS.count; i++) {
        __mram_ptr void *p = (__mram_ptr void *)(base + i * size);
        if (ARGS.write)
            mram_write(buffer, p, size);
        else
            mram_read(p, buffer, size);
    }
    RESULT_CYCLES = perfcounter_get() - t0;
    return 0;
}
