/* nearmem's DPU runtime: the program side of every DPU program built by
 * nearmem-dpu-cc (compiled to bitcode and linked into each program).
 *
 * Two kinds of code live here:
 *   - thin forwards to the machine (nm_dpu_rt, filled by the loader) for what
 *     the DPU does in hardware: DMA, atomic bits, thread scheduling,
 *     performance counter, the fault instruction;
 *   - the SDK's DPU-side libraries written as DPU code, as on the hardware
 *     (seqread, buddy_alloc, fsb_allocator, printf's front end), so that they
 *     cost what DPU code costs (issue 15 costs every basic block).
 *
 * Everything here is internal to the program after linking, except
 * __nm_dpu_query, which the loader calls once per loaded instance. */
#include <alloc.h>
#include <defs.h>
#include <errno.h>
#include <mram.h>
#include <mutex.h>
#include <nearmem_pim.h>
#include <perfcounter.h>
#include <seqread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nm_dpu_abi.h"

/* Set by the loader (through nm_dpu_info.rt_slot) before any tasklet runs;
 * the same table for every instance. Not part of the swapped WRAM block. */
const nm_dpu_rt *__nm_rt;

/* The modeled DPU instructions executed by this instance since the machine
 * last took them (issue 15): nearmem-dpu-cc's costing step adds to it at
 * every basic block. Not part of the swapped WRAM block: only one tasklet of
 * one DPU runs on an instance at a time, and the machine empties it into
 * that tasklet each time the tasklet hands control back. */
uint64_t __nm_cost_counter;

/* Defined by the pass plugin (src/pim/dpucc). */
extern char __nm_wram_data[];
extern const uint32_t __nm_wram_data_size;
extern const char __nm_wram_rodata[];
extern const uint32_t __nm_wram_rodata_size;
extern const uint32_t __nm_mram_vars_size;
extern const nm_dpu_mram_seg __nm_mram_segs[];
extern const uint32_t __nm_mram_nsegs;
extern const nm_dpu_symbol __nm_symtab[];
extern const uint32_t __nm_nsyms;
extern const uint32_t __nm_nr_tasklets, __nm_stack_size, __nm_atomic_bits, __nm_stdout_size;
int __nm_user_main(void); /* the program's main, renamed */

__attribute__((visibility("default"))) void __nm_dpu_query(nm_dpu_info *out)
{
    out->abi_version = NM_DPU_ABI_VERSION;
    out->nr_tasklets = __nm_nr_tasklets;
    out->stack_size = __nm_stack_size;
    out->atomic_bits = __nm_atomic_bits;
    out->stdout_size = __nm_stdout_size;
    out->main_fn = __nm_user_main;
    out->wram_data = __nm_wram_data;
    out->wram_data_size = __nm_wram_data_size;
    out->wram_rodata = __nm_wram_rodata;
    out->wram_rodata_size = __nm_wram_rodata_size;
    out->mram_vars_size = __nm_mram_vars_size;
    out->mram_segs = __nm_mram_segs;
    out->nr_mram_segs = __nm_mram_nsegs;
    out->symbols = __nm_symtab;
    out->nr_symbols = __nm_nsyms;
    out->rt_slot = &__nm_rt;
    out->cost_counter = &__nm_cost_counter;
}

/* ---- hardware: forwards --------------------------------------------------- */
unsigned int __nm_me(void) { return __nm_rt->me(); }
void __nm_dma_read(uint32_t mram, void *wram, uint32_t n) { __nm_rt->dma_read(mram, wram, n); }
void __nm_dma_write(const void *wram, uint32_t mram, uint32_t n) { __nm_rt->dma_write(wram, mram, n); }
void __nm_dma_read_unaligned(uint32_t mram, void *wram, uint32_t n) { __nm_rt->dma_read_unaligned(mram, wram, n); }
void __nm_dma_write_unaligned(const void *wram, uint32_t mram, uint32_t n)
{
    __nm_rt->dma_write_unaligned(wram, mram, n);
}
void *__nm_mem_alloc(size_t size) { return __nm_rt->mem_alloc(size > 0xffffffffu ? 0xffffffffu : (uint32_t)size); }
void *__nm_mem_reset(void) { return __nm_rt->mem_reset(); }
void __nm_mutex_lock(uint32_t bit) { __nm_rt->mutex_lock(bit); }
bool __nm_mutex_trylock(uint32_t bit) { return __nm_rt->mutex_trylock(bit); }
void __nm_mutex_unlock(uint32_t bit) { __nm_rt->mutex_unlock(bit); }
void __nm_barrier_wait(void *b) { __nm_rt->barrier_wait(b); }
void __nm_sem_take(void *s) { __nm_rt->sem_take(s); }
void __nm_sem_give(void *s) { __nm_rt->sem_give(s); }
void __nm_handshake_notify(void) { __nm_rt->handshake_notify(); }
int __nm_handshake_wait_for(unsigned int notifier)
{
    int r = __nm_rt->handshake_wait_for(notifier);
    if (r)
        errno = r;
    return r;
}
uint64_t __nm_perfcounter_config(uint32_t config, bool reset) { return __nm_rt->perfcounter_config(config, reset); }
uint64_t __nm_perfcounter_get(void) { return __nm_rt->perfcounter_get(); }
void __nm_fault(const char *why) { __nm_rt->fault(why); }
/* A division by zero: the DPU's __udiv32 executes `fault 2`. The costing
 * step guards every division with a call to this (it would kill the host). */
__attribute__((used, noreturn, cold)) void __nm_div_fault(void) { __nm_rt->fault("division by zero"); }

const volatile uint32_t CLOCKS_PER_SEC = 350000000u;

/* nearmem_pim.h */
void nm_pim_charge(uint32_t instructions) { __nm_rt->charge(instructions); }
uint64_t nm_pim_cycle(void) { return __nm_rt->cycle(); }
void nm_pim_fault(const char *why) { __nm_rt->fault(why); }
void *nm_pim_hw_state(const nm_pim_hw_unit *unit) { return __nm_rt->hw_state(unit); }
void nm_pim_hw_exec(const nm_pim_hw_unit *unit, uint32_t extra_cycles) { __nm_rt->hw_exec(unit, extra_cycles); }
void nm_pim_hw_refuse(const nm_pim_hw_unit *unit, const char *why) { __nm_rt->hw_refuse(unit, why); }

int check_stack(void) { return (int)(__nm_stack_size / 4); }

/* Helpers the pass plugin calls for direct __mram_ptr accesses and for
 * memcpy/memmove/memset on MRAM. */
uint64_t __nm_mram_ld64(uint32_t addr, uint32_t n)
{
    uint64_t v = 0;
    __nm_rt->mram_load(addr, &v, n);
    return v;
}
void __nm_mram_st64(uint32_t addr, uint64_t v, uint32_t n) { __nm_rt->mram_store(addr, &v, n); }
void __nm_mram_ld(uint32_t addr, void *dst, uint64_t n) { __nm_rt->mram_load(addr, dst, n); }
void __nm_mram_st(uint32_t addr, const void *src, uint64_t n) { __nm_rt->mram_store(addr, src, n); }
void __nm_mram_to_wram(void *dst, uint32_t src, uint64_t n) { __nm_rt->mram_load(src, dst, n); }
void __nm_wram_to_mram(uint32_t dst, const void *src, uint64_t n) { __nm_rt->mram_store(dst, src, n); }
void __nm_mram_to_mram(uint32_t dst, uint32_t src, uint64_t n) { __nm_rt->mram_copy(dst, src, n); }
void __nm_mram_set(uint32_t dst, int v, uint64_t n) { __nm_rt->mram_set(dst, v, n); }

/* ---- stdio: the DPU log --------------------------------------------------- */
void printf(const char *restrict format, ...)
{
    va_list ap;
    va_start(ap, format);
    __nm_rt->log_vprintf(format, ap);
    va_end(ap);
}

void puts(const char *str)
{
    __nm_rt->log_write(str, (uint32_t)strlen(str));
    __nm_rt->log_write("\n", 1);
}

void putchar(int c)
{
    char ch = (char)c;
    __nm_rt->log_write(&ch, 1);
}

/* assert() (glibc's <assert.h> expands to __assert_fail) and abort(): the
 * DPU stops with a fault that names the failed assertion. */
__attribute__((noreturn)) void __assert_fail(const char *assertion, const char *file, unsigned int line,
                                             const char *function)
{
    (void)file;
    (void)line;
    (void)function;
    __nm_rt->fault(assertion);
}

__attribute__((noreturn)) void abort(void) { __nm_rt->fault("abort()"); }

/* ---- seqread ---------------------------------------------------------------
 * The cache holds 2 x size bytes mapping MRAM [base, base + 2 size); when the
 * pointer passes `size`, the window moves by `size`: the upper half moves
 * down (WRAM copy) and the next `size` bytes are read into the upper half
 * with one DMA. */
seqreader_buffer_t __nm_seqread_alloc(uint32_t size) { return (seqreader_buffer_t)mem_alloc(2 * size); }

void *__nm_seqread_init(uint32_t size, seqreader_buffer_t cache, __mram_ptr void *mram_addr, seqreader_t *reader)
{
    uintptr_t a = (uintptr_t)mram_addr, base = a & ~(uintptr_t)7;
    reader->wram_cache = cache;
    reader->mram_addr = base;
    mram_read((__mram_ptr void *)base, (void *)cache, 2 * size);
    return (uint8_t *)cache + (a - base);
}

void *__nm_seqread_get(uint32_t size, void *ptr, uint32_t inc, seqreader_t *reader)
{
    uint8_t *p = (uint8_t *)ptr + inc, *cache = (uint8_t *)reader->wram_cache;
    while (p >= cache + size) {
        reader->mram_addr += size;
        memcpy(cache, cache + size, size);
        mram_read((__mram_ptr void *)(reader->mram_addr + size), cache + size, size);
        p -= size;
    }
    return p;
}

void *__nm_seqread_seek(uint32_t size, __mram_ptr void *mram_addr, seqreader_t *reader)
{
    uintptr_t a = (uintptr_t)mram_addr;
    if (a >= reader->mram_addr && a < reader->mram_addr + size)
        return (uint8_t *)reader->wram_cache + (a - reader->mram_addr);
    return __nm_seqread_init(size, reader->wram_cache, mram_addr, reader);
}

__mram_ptr void *__nm_seqread_tell(uint32_t size, void *ptr, seqreader_t *reader)
{
    (void)size;
    return (__mram_ptr void *)(reader->mram_addr + ((uintptr_t)ptr - reader->wram_cache));
}

/* ---- fsb_allocator ---------------------------------------------------------- */
MUTEX_INIT(__nm_fsb_lock);

fsb_allocator_t fsb_alloc(unsigned int block_size, unsigned int nb_of_blocks)
{
    unsigned bs = block_size < 8 ? 8 : (block_size + 7) & ~7u;
    fsb_allocator_t a = mem_alloc(sizeof(void *));
    uint8_t *blocks = mem_alloc((size_t)bs * nb_of_blocks);
    *a = nb_of_blocks ? blocks : NULL;
    for (unsigned i = 0; i < nb_of_blocks; i++)
        *(void **)(blocks + (size_t)i * bs) = i + 1 < nb_of_blocks ? blocks + (size_t)(i + 1) * bs : NULL;
    return a;
}

void *fsb_get(fsb_allocator_t allocator)
{
    mutex_lock(__nm_fsb_lock);
    void *b = *allocator;
    if (b)
        *allocator = *(void **)b;
    mutex_unlock(__nm_fsb_lock);
    return b;
}

void fsb_free(fsb_allocator_t allocator, void *ptr)
{
    mutex_lock(__nm_fsb_lock);
    *(void **)ptr = *allocator;
    *allocator = ptr;
    mutex_unlock(__nm_fsb_lock);
}

/* ---- buddy_alloc -------------------------------------------------------------
 * Blocks of 2^k bytes, k from 4 (16 B) to log2(heap). A byte per block of the
 * smallest size records the order of the allocated block starting there
 * (0 = none), so buddy_free needs no header, as the SDK's does not. Free
 * blocks sit on one list per order, linked through their first 8 bytes. */
#define NM_BUDDY_MIN_ORDER 4u
#define NM_BUDDY_MAX_ORDER 15u /* 32 KiB */
MUTEX_INIT(__nm_buddy_lock);
static uint8_t *__nm_buddy_heap;
static uint32_t __nm_buddy_size;
static uint32_t __nm_buddy_order;
static void *__nm_buddy_free_list[NM_BUDDY_MAX_ORDER + 1];
static uint8_t __nm_buddy_alloc_order[(1u << NM_BUDDY_MAX_ORDER) >> NM_BUDDY_MIN_ORDER];

static void buddy_push(unsigned k, void *b)
{
    *(void **)b = __nm_buddy_free_list[k];
    __nm_buddy_free_list[k] = b;
}

static bool buddy_remove(unsigned k, void *b)
{
    for (void **pp = &__nm_buddy_free_list[k]; *pp; pp = (void **)*pp)
        if (*pp == b) {
            *pp = *(void **)b;
            return true;
        }
    return false;
}

void buddy_reset(void)
{
    memset(__nm_buddy_free_list, 0, sizeof(__nm_buddy_free_list));
    memset(__nm_buddy_alloc_order, 0, sizeof(__nm_buddy_alloc_order));
    if (__nm_buddy_heap)
        buddy_push(__nm_buddy_order, __nm_buddy_heap);
}

void buddy_init(size_t size_of_heap)
{
    unsigned k = NM_BUDDY_MIN_ORDER + 7; /* 2 KiB at least */
    while (k < NM_BUDDY_MAX_ORDER && (1u << k) < size_of_heap)
        k++;
    __nm_buddy_order = k;
    __nm_buddy_size = 1u << k;
    __nm_buddy_heap = mem_alloc(__nm_buddy_size);
    buddy_reset();
}

void *buddy_alloc(size_t size)
{
    if (size == 0 || !__nm_buddy_heap || size > __nm_buddy_size) {
        errno = EINVAL;
        return NULL;
    }
    unsigned want = NM_BUDDY_MIN_ORDER;
    while ((1u << want) < size)
        want++;
    mutex_lock(__nm_buddy_lock);
    unsigned k = want;
    while (k <= __nm_buddy_order && !__nm_buddy_free_list[k])
        k++;
    void *b = NULL;
    if (k <= __nm_buddy_order) {
        b = __nm_buddy_free_list[k];
        __nm_buddy_free_list[k] = *(void **)b;
        while (k > want) { /* split, keep the lower half */
            k--;
            buddy_push(k, (uint8_t *)b + (1u << k));
        }
        __nm_buddy_alloc_order[((uint8_t *)b - __nm_buddy_heap) >> NM_BUDDY_MIN_ORDER] = (uint8_t)want;
    } else {
        errno = ENOMEM;
    }
    mutex_unlock(__nm_buddy_lock);
    return b;
}

void buddy_free(void *pointer)
{
    if (!pointer)
        return;
    uint8_t *p = pointer;
    if (!__nm_buddy_heap || p < __nm_buddy_heap || p >= __nm_buddy_heap + __nm_buddy_size ||
        ((uintptr_t)p & 7u)) {
        errno = EINVAL;
        return;
    }
    mutex_lock(__nm_buddy_lock);
    /* As the SDK's: a pointer anywhere inside an allocated block frees it. */
    uint32_t off = (uint32_t)(p - __nm_buddy_heap);
    unsigned k = 0;
    for (unsigned o = NM_BUDDY_MIN_ORDER; o <= __nm_buddy_order && !k; o++) {
        uint32_t start = off & ~((1u << o) - 1u);
        if (__nm_buddy_alloc_order[start >> NM_BUDDY_MIN_ORDER] == o) {
            k = o;
            off = start;
        }
    }
    if (!k) {
        errno = EINVAL;
        mutex_unlock(__nm_buddy_lock);
        return;
    }
    __nm_buddy_alloc_order[off >> NM_BUDDY_MIN_ORDER] = 0;
    while (k < __nm_buddy_order) { /* merge with free buddies */
        uint32_t buddy = off ^ (1u << k);
        if (!buddy_remove(k, __nm_buddy_heap + buddy))
            break;
        off &= ~(1u << k);
        k++;
    }
    buddy_push(k, __nm_buddy_heap + off);
    mutex_unlock(__nm_buddy_lock);
}

void *buddy_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return buddy_alloc(size);
    if (size == 0) {
        buddy_free(ptr);
        return ptr;
    }
    uint32_t off = (uint32_t)((uint8_t *)ptr - __nm_buddy_heap);
    size_t old = 0;
    for (unsigned o = NM_BUDDY_MIN_ORDER; o <= __nm_buddy_order; o++)
        if ((off & ((1u << o) - 1u)) == 0 && __nm_buddy_alloc_order[off >> NM_BUDDY_MIN_ORDER] == o)
            old = 1u << o;
    void *n = buddy_alloc(size);
    if (n && old) {
        memcpy(n, ptr, old < size ? old : size);
        buddy_free(ptr);
    }
    return n;
}
