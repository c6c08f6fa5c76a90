/* MRAM streaming microbenchmark (PrIM §3.2's shape) in plain UPMEM C: each
 * tasklet reads its own region of MRAM in fixed-size DMAs. */
#include <alloc.h>
#include <defs.h>
#include <mram.h>
#include <stdint.h>

__host uint32_t stream_block;
__host uint32_t stream_bytes; /* per tasklet */

int main(void)
{
    const uint32_t base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER + me() * stream_bytes;
    void *buf = mem_alloc(stream_block);
    for (uint32_t off = 0; off + stream_block <= stream_bytes; off += stream_block) {
        mram_read((__mram_ptr const void *)(base + off), buf, stream_block);
    }
    return 0;
}
