/* A DPU program built as a shared object and loaded with
 * dpu_load(set, "path/to/lib.so:pim_so_kernel", NULL). */
#include "nearmem/pim/dpu.h"

DPU_PROGRAM(pim_so_kernel);
DPU_HOST(uint32_t, so_in);
DPU_HOST(uint32_t, so_out, [NM_PIM_MAX_TASKLETS]);
DPU_MRAM_NOINIT(uint64_t, so_m, [8]);

int DPU_MAIN(void)
{
    so_out[me()] = so_in * 2 + me();
    if (me() == 0) {
        uint64_t *w = mem_alloc(8);
        *w = so_in;
        mram_write(w, so_m, 8);
    }
    nm_pim_charge(10);
    return 0;
}
