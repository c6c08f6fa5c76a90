/* UPMEM SDK <sem.h> (nearmem). sem_t has the SDK's fields; `count` is a
 * signed byte: take decrements it and blocks when it goes negative, give
 * increments it and resumes the first waiter when it was negative. */
#ifndef DPUSYSCORE_SEM_H
#define DPUSYSCORE_SEM_H

#include <attributes.h>
#include <atomic_bit.h>
#include <stdint.h>

typedef struct sem_t {
    uint8_t wait_queue;
    uint8_t count;
    uint8_t initial_count;
    uint8_t lock;
} sem_t;

#define SEMAPHORE_INIT(_name, _counter)                                                                        \
    _Static_assert(((_counter) < 128) && ((_counter) >= -127), "semaphore counter must be encoded on a byte"); \
    ATOMIC_BIT_INIT(__CONCAT(semaphore_, _name));                                                              \
    sem_t _name = {0xFF, (uint8_t)(_counter), (uint8_t)(_counter), 0}

static inline void sem_take(sem_t *sem) { __nm_sem_take(sem); }
static inline void sem_give(sem_t *sem) { __nm_sem_give(sem); }

#endif
