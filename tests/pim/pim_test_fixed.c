/* A program compiled with a fixed NR_TASKLETS (as with -DNR_TASKLETS=4),
 * and one whose globals almost fill WRAM. */
#define NR_TASKLETS 4
#include "nearmem/pim/dpu.h"

DPU_PROGRAM(pim_test_fixed);
DPU_HOST(uint32_t, fixed_out, [NR_TASKLETS]);

int DPU_MAIN(void)
{
    fixed_out[me()] = NR_TASKLETS * 10 + me();
    return 0;
}
