/* UPMEM SDK <atomic_bit.h> (nearmem). An atomic bit's address is its index
 * in the DPU's atomic register (0..255, laid out by nearmem-dpu-cc). */
#ifndef DPUSYSCORE_ATOMIC_BIT_H
#define DPUSYSCORE_ATOMIC_BIT_H

#include <stdint.h>
#include <macro_utils.h>
#include <attributes.h>

#define ATOMIC_BIT_GET(_name) __CONCAT(__atomic_bit_, _name)
#define ATOMIC_BIT_INIT(_name) uint8_t __atomic_bit ATOMIC_BIT_GET(_name)
#define ATOMIC_BIT_EXTERN(_name) extern ATOMIC_BIT_INIT(_name)

extern uint8_t __atomic_start_addr;
#define ATOMIC_BIT_INDEX(_name) (&ATOMIC_BIT_GET(_name) - &__atomic_start_addr)

#define __ATOMIC_BIT_ACQUIRE(_reg, _bit) __nm_mutex_lock((uint32_t)(uintptr_t)(_reg) + (uint32_t)(_bit))
#define __ATOMIC_BIT_RELEASE(_reg, _bit) __nm_mutex_unlock((uint32_t)(uintptr_t)(_reg) + (uint32_t)(_bit))
#define ATOMIC_BIT_ACQUIRE(_name) __nm_mutex_lock((uint32_t)(uintptr_t)&ATOMIC_BIT_GET(_name))
#define ATOMIC_BIT_RELEASE(_name) __nm_mutex_unlock((uint32_t)(uintptr_t)&ATOMIC_BIT_GET(_name))

#endif
