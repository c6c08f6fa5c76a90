/* Vector addition, PrIM's shape: arguments in a __host struct, A and B at
 * DPU_MRAM_HEAP_POINTER, each tasklet streams BLOCK_SIZE-byte blocks. */
#include <alloc.h>
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <perfcounter.h>
#include <stdint.h>
#include <stdio.h>

#include "../support/common.h"

__host dpu_arguments_t DPU_INPUT_ARGUMENTS;
__host uint32_t nb_blocks;
uint32_t blocks_per_tasklet[NR_TASKLETS];
BARRIER_INIT(my_barrier, NR_TASKLETS);

int main(void)
{
    unsigned int tasklet_id = me();
    if (tasklet_id == 0)
        mem_reset();
    barrier_wait(&my_barrier);
    uint32_t input_size_dpu_bytes = DPU_INPUT_ARGUMENTS.size;
    uint32_t input_size_dpu_bytes_transfer = DPU_INPUT_ARGUMENTS.transfer_size;
    uint32_t base_tasklet = tasklet_id << 10;
    uint32_t mram_base_addr_A = (uint32_t)DPU_MRAM_HEAP_POINTER;
    uint32_t mram_base_addr_B = (uint32_t)(DPU_MRAM_HEAP_POINTER + input_size_dpu_bytes_transfer);
    T *cache_A = (T *)mem_alloc(BLOCK_SIZE);
    T *cache_B = (T *)mem_alloc(BLOCK_SIZE);
    for (uint32_t byte_index = base_tasklet; byte_index < input_size_dpu_bytes; byte_index += BLOCK_SIZE * NR_TASKLETS) {
        uint32_t l_size_bytes =
            (byte_index + BLOCK_SIZE >= input_size_dpu_bytes) ? (input_size_dpu_bytes - byte_index) : BLOCK_SIZE;
        mram_read((__mram_ptr void const *)(mram_base_addr_A + byte_index), cache_A, l_size_bytes);
        mram_read((__mram_ptr void const *)(mram_base_addr_B + byte_index), cache_B, l_size_bytes);
        for (unsigned int i = 0; i < l_size_bytes / sizeof(T); i++)
            cache_B[i] = cache_A[i] + cache_B[i];
        mram_write(cache_B, (__mram_ptr void *)(mram_base_addr_B + byte_index), l_size_bytes);
        blocks_per_tasklet[tasklet_id]++;
    }
    barrier_wait(&my_barrier);
    if (tasklet_id == 0) {
        uint32_t n = 0;
        for (unsigned int t = 0; t < NR_TASKLETS; t++)
            n += blocks_per_tasklet[t];
        nb_blocks = n;
        printf("blocks %u of %u, seed %d\n", n, divceil(input_size_dpu_bytes, BLOCK_SIZE), checksum_seed);
    }
    return 0;
}
