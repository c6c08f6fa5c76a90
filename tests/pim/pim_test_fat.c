/* Globals of 60000 bytes: with 4 KiB of stacks this no longer fits WRAM. */
#include "nearmem/pim/dpu.h"

DPU_PROGRAM(pim_test_fat);
DPU_WRAM(uint8_t, fat, [60000]);

int DPU_MAIN(void)
{
    fat[me()] = 1;
    return 0;
}
