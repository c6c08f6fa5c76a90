/* Coroutine context switch for tasklets (see coro.h). */
#include "coro.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define NM_CORO_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define NM_CORO_TSAN 1
#endif

static __thread nm_coro_host *t_host; /* host of the coroutine being entered */

#if defined(__x86_64__)
void nm_pim__ctx_switch(void **save_sp, void *new_sp);
/* Save callee-saved registers + MXCSR/x87 CW on the current stack, store the
 * stack pointer, load the other one and restore the same set from it. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl nm_pim__ctx_switch\n"
        ".hidden nm_pim__ctx_switch\n"
        ".type nm_pim__ctx_switch,@function\n"
        "nm_pim__ctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size nm_pim__ctx_switch, .-nm_pim__ctx_switch\n");
#endif

static void coro_entry(void)
{
    nm_coro_host *h = t_host;
    nm_coro *c = h->current;
#ifdef NM_CORO_ASAN
    __sanitizer_finish_switch_fiber(NULL, &h->asan_bottom, &h->asan_size);
#endif
    c->fn(c->arg);
    /* fn never returns: it yields for good. */
    __builtin_trap();
}

#if !defined(__x86_64__)
static void coro_entry_uc(void) { coro_entry(); }
#endif

int nm_coro_host_init(nm_coro_host *h)
{
    memset(h, 0, sizeof(*h));
#ifdef NM_CORO_TSAN
    h->tsan_fiber = __tsan_get_current_fiber();
#endif
    return 0;
}

void nm_coro_host_fini(nm_coro_host *h) { (void)h; }

int nm_coro_create(nm_coro *c, size_t stack_size)
{
    memset(c, 0, sizeof(*c));
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_size = (stack_size + page - 1) & ~(page - 1);
    void *m = mmap(NULL, stack_size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        return -1;
    if (mprotect(m, page, PROT_NONE) != 0) { /* guard page below the stack */
        munmap(m, stack_size + page);
        return -1;
    }
    c->stack = m;
    c->stack_size = stack_size;
#ifdef NM_CORO_TSAN
    c->tsan_fiber = __tsan_create_fiber(0);
#endif
    return 0;
}

void nm_coro_destroy(nm_coro *c)
{
    if (!c->stack)
        return;
#ifdef NM_CORO_TSAN
    if (c->tsan_fiber)
        __tsan_destroy_fiber(c->tsan_fiber);
#endif
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(c->stack, c->stack_size + page);
    c->stack = NULL;
}

static char *stack_lo(const nm_coro *c) { return (char *)c->stack + (size_t)sysconf(_SC_PAGESIZE); }

void nm_coro_stack_bounds(const nm_coro *c, const void **lo, const void **hi)
{
    *lo = stack_lo(c);
    *hi = stack_lo(c) + c->stack_size;
}

void nm_coro_reset(nm_coro *c, void (*fn)(void *), void *arg)
{
    c->fn = fn;
    c->arg = arg;
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)stack_lo(c) + c->stack_size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 72);
    /* [0] MXCSR | x87 CW, [1..6] r15 r14 r13 r12 rbx rbp, [7] return address, [8] pad */
    sp[0] = 0x1F80u | ((uint64_t)0x037Fu << 32);
    for (int i = 1; i <= 6; i++)
        sp[i] = 0;
    sp[7] = (uint64_t)(uintptr_t)coro_entry;
    sp[8] = 0;
    c->sp = sp;
#else
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack_lo(c);
    c->uc.uc_stack.ss_size = c->stack_size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, coro_entry_uc, 0);
#endif
}

void nm_coro_resume(nm_coro_host *h, nm_coro *c)
{
    h->current = c;
    t_host = h;
#ifdef NM_CORO_ASAN
    __sanitizer_start_switch_fiber(&h->asan_fake_stack, stack_lo(c), c->stack_size);
#endif
#ifdef NM_CORO_TSAN
    __tsan_switch_to_fiber(c->tsan_fiber, 0);
#endif
#if defined(__x86_64__)
    nm_pim__ctx_switch(&h->sp, c->sp);
#else
    swapcontext(&h->uc, &c->uc);
#endif
#ifdef NM_CORO_ASAN
    __sanitizer_finish_switch_fiber(h->asan_fake_stack, NULL, NULL);
#endif
    h->current = NULL;
}

void nm_coro_yield(nm_coro_host *h, int dying)
{
    nm_coro *c = h->current;
#ifdef NM_CORO_ASAN
    __sanitizer_start_switch_fiber(dying ? NULL : &c->asan_fake_stack, h->asan_bottom, h->asan_size);
#else
    (void)dying;
#endif
#ifdef NM_CORO_TSAN
    __tsan_switch_to_fiber(h->tsan_fiber, 0);
#endif
#if defined(__x86_64__)
    nm_pim__ctx_switch(&c->sp, h->sp);
#else
    swapcontext(&c->uc, &h->uc);
#endif
#ifdef NM_CORO_ASAN
    __sanitizer_finish_switch_fiber(c->asan_fake_stack, &h->asan_bottom, &h->asan_size);
#endif
}
