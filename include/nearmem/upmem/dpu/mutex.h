/* UPMEM SDK <mutex.h> (nearmem). A mutex is an atomic bit; mutex_id_t is its
 * address, so 0 is a valid id (a zero-initialised mutex_id_t names bit 0, as
 * on the hardware). Waiting spins, costing issue slots (docs: cost model). */
#ifndef DPUSYSCORE_MUTEX_H
#define DPUSYSCORE_MUTEX_H

#include <stdint.h>
#include <sysdef.h>
#include <stdbool.h>
#include <atomic_bit.h>

typedef uint8_t *mutex_id_t;

#define MUTEX_GET(_name) _name
#define MUTEX_INIT(_name)                                                                                    \
    ATOMIC_BIT_INIT(__CONCAT(mutex_, _name));                                                                \
    const mutex_id_t MUTEX_GET(_name) = &ATOMIC_BIT_GET(__CONCAT(mutex_, _name))

static inline void mutex_lock(mutex_id_t mutex) { __nm_mutex_lock((uint32_t)(uintptr_t)mutex); }
static inline bool mutex_trylock(mutex_id_t mutex) { return __nm_mutex_trylock((uint32_t)(uintptr_t)mutex); }
static inline void mutex_unlock(mutex_id_t mutex) { __nm_mutex_unlock((uint32_t)(uintptr_t)mutex); }

#endif
