/* PrIM's vector addition (VA) in plain UPMEM C: arguments in a __host
 * struct, A and B at DPU_MRAM_HEAP_POINTER, each tasklet streams
 * EXAMPLE_BLOCK-byte blocks, adds, and writes the result over B.
 * Nothing nearmem-specific: nearmem-dpu-cc costs its compute from the code. */
#include <alloc.h>
#include <defs.h>
#include <mram.h>
#include <stdint.h>

#include "../common.h"

__host va_args DPU_INPUT_ARGUMENTS;

int main(void)
{
    const uint32_t tid = me();
    const uint32_t size = DPU_INPUT_ARGUMENTS.size;
    const uint32_t a_base = (uint32_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
    const uint32_t b_base = a_base + DPU_INPUT_ARGUMENTS.transfer_size;
    int32_t *cache_a = mem_alloc(EXAMPLE_BLOCK);
    int32_t *cache_b = mem_alloc(EXAMPLE_BLOCK);
    for (uint32_t off = tid * EXAMPLE_BLOCK; off < size; off += EXAMPLE_BLOCK * NR_TASKLETS) {
        uint32_t len = size - off < EXAMPLE_BLOCK ? size - off : EXAMPLE_BLOCK;
        mram_read((__mram_ptr const void *)(a_base + off), cache_a, len);
        mram_read((__mram_ptr const void *)(b_base + off), cache_b, len);
        for (uint32_t i = 0; i < len / 4; i++)
            cache_b[i] += cache_a[i];
        mram_write(cache_b, (__mram_ptr void *)(b_base + off), len);
    }
    return 0;
}
