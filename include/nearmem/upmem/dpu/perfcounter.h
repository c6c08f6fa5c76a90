/* UPMEM SDK <perfcounter.h> (nearmem): the DPU's performance counter, in
 * modeled cycles or issued instructions. */
#ifndef DPUSYSCORE_PERFCOUNTER_H
#define DPUSYSCORE_PERFCOUNTER_H

#include <stdint.h>
#include <stdbool.h>
#include "_nearmem_rt.h"

typedef uint64_t perfcounter_t;

typedef enum _perfcounter_config_t {
    COUNT_SAME = 0,
    COUNT_CYCLES = 1,
    COUNT_INSTRUCTIONS = 2,
    COUNT_NOTHING = 3,
    COUNT_DISABLE_BOTH = 6,
    COUNT_ENABLE_BOTH = 7,
} perfcounter_config_t;

/* Clock frequency of the DPU in Hz (350 MHz, the v1A clock of the default
 * cost model). <time.h> defines a macro of this name; the SDK's variable
 * wins only when <time.h> is not included. */
#ifndef CLOCKS_PER_SEC
extern const volatile uint32_t CLOCKS_PER_SEC;
#endif

static inline perfcounter_t perfcounter_get(void) { return __nm_perfcounter_get(); }
static inline perfcounter_t perfcounter_config(perfcounter_config_t config, bool reset_value)
{
    return __nm_perfcounter_config((uint32_t)config, reset_value);
}

#endif
