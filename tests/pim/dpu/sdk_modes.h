/* Shared by dpu/sdk.c and test_upmem_sdk.c (as support/common.h is in an
 * UPMEM project). */
#ifndef SDK_MODES_H
#define SDK_MODES_H
#define SDK_AREA 8192
enum sdk_mode {
    SDK_NOTHING = 0,
    SDK_SEQREAD,
    SDK_UNALIGNED,
    SDK_DMA_HW,
    SDK_DIRECT,
    SDK_HANDSHAKE,
    SDK_SEM,
    SDK_GROUPS,
    SDK_ALLOC,
    SDK_PERF,
    SDK_PRINT,
    SDK_ASSERT,
    SDK_OUT_OF_MRAM,
    SDK_HALT,
};
#endif
