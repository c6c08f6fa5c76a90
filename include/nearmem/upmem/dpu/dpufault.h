/* UPMEM SDK <dpufault.h> (nearmem): stop the DPU. */
#ifndef DPUSYSCORE_DPUFAULT_H
#define DPUSYSCORE_DPUFAULT_H

#include "_nearmem_rt.h"

/* The DPU's `fault` instruction: the DPU stops, the host sees a fault. */
#define __asm_fault() __nm_fault("fault")

#endif
