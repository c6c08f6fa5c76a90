/* Stackful coroutines for tasklets: a hand-written x86-64 context switch
 * (callee-saved registers, MXCSR and x87 control word), ucontext elsewhere.
 * Stack switches are annotated for AddressSanitizer
 * (__sanitizer_start/finish_switch_fiber) and ThreadSanitizer
 * (__tsan_create_fiber/__tsan_switch_to_fiber), so the sanitizer builds run
 * the same code path as the release build. */
#ifndef NM_PIM_CORO_H
#define NM_PIM_CORO_H

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

typedef struct nm_coro {
    void *stack;       /* mapping, including the guard page */
    size_t stack_size; /* usable bytes */
    void (*fn)(void *);
    void *arg;
#if defined(__x86_64__)
    void *sp;          /* saved stack pointer while suspended */
#else
    ucontext_t uc;
#endif
    void *tsan_fiber;
    void *asan_fake_stack;
} nm_coro;

/* The thread that runs coroutines ("scheduler" side). */
typedef struct nm_coro_host {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    void *tsan_fiber;
    const void *asan_bottom;
    size_t asan_size;
    void *asan_fake_stack;
    nm_coro *current;
} nm_coro_host;

int nm_coro_host_init(nm_coro_host *h);
void nm_coro_host_fini(nm_coro_host *h);
/* Allocate a stack (mmap + guard page). 0 on success. */
int nm_coro_create(nm_coro *c, size_t stack_size);
void nm_coro_destroy(nm_coro *c);
/* Usable stack range [lo, hi). */
void nm_coro_stack_bounds(const nm_coro *c, const void **lo, const void **hi);
/* Prepare c to run fn(arg) from the start at its next resume. */
void nm_coro_reset(nm_coro *c, void (*fn)(void *), void *arg);
/* Host side: run c until it yields (or finishes: fn must not return; it
 * yields for good instead). */
void nm_coro_resume(nm_coro_host *h, nm_coro *c);
/* Coroutine side: back to the host. `dying` = this coroutine will never be
 * resumed again without a reset (lets ASan drop its fake stack). */
void nm_coro_yield(nm_coro_host *h, int dying);

#endif
