/* UPMEM SDK <barrier.h> (nearmem). barrier_t has the SDK's fields, which
 * kernels may set themselves (PrIM's HST-L does): barrier_wait decrements
 * `count`; the tasklet that brings it to 0 resets it to `initial_count` and
 * resumes the others. `wait_queue` and `lock` are kept for layout. */
#ifndef DPUSYSCORE_BARRIER_H
#define DPUSYSCORE_BARRIER_H

#include <attributes.h>
#include <atomic_bit.h>
#include <stdint.h>

typedef struct barrier_t {
    uint8_t wait_queue;
    uint8_t count;
    uint8_t initial_count;
    uint8_t lock;
} barrier_t;

#define BARRIER_INIT(_name, _counter)                                                                        \
    _Static_assert(((_counter) < 128) && ((_counter) >= -127), "barrier counter must be encoded on a byte"); \
    ATOMIC_BIT_INIT(__CONCAT(barrier_, _name));                                                              \
    barrier_t _name = {0xFF, (uint8_t)(_counter), (uint8_t)(_counter), 0}

static inline void barrier_wait(barrier_t *barrier) { __nm_barrier_wait(barrier); }

#endif
