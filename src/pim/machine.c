/* The DPU: tasklets as coroutines under a deterministic discrete-event
 * scheduler, the cost model, and the kernel-side API of dpu.h.
 *
 * Timing model (docs/pim-machine.md, "Cost model"). All tasklets of a DPU
 * share one modeled clock T (cycles). A tasklet is in one of these states:
 *   READY     about to run native code (takes no modeled time);
 *   COMPUTE   issuing `rem` charged instructions;
 *   SPIN      busy-waiting on a mutex (issues instructions, no progress);
 *   WAIT      blocked until `wake_at` (DMA transfer, hardware-unit latency);
 *   BLOCKED   stopped at a barrier or semaphore;
 *   DONE.
 * The revolver pipeline is modeled as processor sharing: with k tasklets
 * issuing (COMPUTE or SPIN), each issues one instruction every max(11, k)
 * cycles, so one tasklet gets 1/11 instruction per cycle and the DPU never
 * exceeds one instruction per cycle. The DMA engine serves one transfer at a
 * time, each taking alpha + beta*bytes cycles (PrIM §3.2.1). Charged compute
 * is accumulated natively and turned into a COMPUTE phase when the tasklet
 * next interacts with the machine (DMA, synchronisation, counters, exit), so
 * a charge costs no context switch. Everything is a function of the DPU's own
 * inputs: the same run gives the same cycles on any number of host threads. */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nearmem/common/util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NM_PIM_CORO_STACK (1024u * 1024u) /* sanitizers need larger frames */
#else
#define NM_PIM_CORO_STACK (256u * 1024u)
#endif
#define NM_PIM_BARRIER_ALL UINT32_MAX

typedef enum tstate { T_READY, T_COMPUTE, T_SPIN, T_WAIT, T_BLOCKED, T_DONE } tstate;
typedef enum opkind {
    OP_NONE,
    OP_DMA_READ,
    OP_DMA_WRITE,
    OP_DELAY,
    OP_LOCK,
    OP_TRYLOCK,
    OP_UNLOCK,
    OP_BARRIER,
    OP_SEM_TAKE,
    OP_SEM_GIVE,
    OP_EXIT
} opkind;

typedef struct tasklet {
    nm_coro coro;
    uint32_t id;
    tstate st;
    opkind op;
    void *op_obj;
    uint32_t op_bytes;
    uint64_t op_cycles;
    bool op_result;
    uint64_t pending;   /* charged natively since the last post */
    double rem;         /* COMPUTE: instructions left */
    double issued;      /* instructions issued so far (fractional while computing) */
    double spin_issued; /* of which busy-wait */
    uint64_t instr;     /* exact charged instructions */
    double wake_at;
    double wait_start;
    uint64_t seq;
    nm_pim_tasklet_stats *out;
} tasklet;

typedef struct worker {
    nm_coro_host host;
    tasklet t[NM_PIM_MAX_TASKLETS];
    uint32_t nr_stacks;
    uint8_t *heap; /* WRAM heap (mem_alloc) */
    /* the DPU being run */
    nm_pim_dpu *d;
    const nm_pim_cost *cost;
    uint32_t n;
    double T;
    double dma_free;
    uint64_t seq;
    uint32_t heap_top, heap_limit, heap_hw;
    bool faulted;
    tasklet *cur;
    /* This thread's addresses of the running program's globals, for DMA checks. */
    struct wram_range {
        uintptr_t lo, hi;
    } *ranges;
    uint32_t nr_ranges, cap_ranges;
} worker;

static __thread worker *t_worker;

/* ------------------------------------------------------------------------ */
/* MRAM backing: 64 KiB chunks allocated on first write; absent chunks read 0 */

void nm_pim__mram_read_host(const nm_pim_dpu *d, uint32_t off, void *dst, size_t n)
{
    uint8_t *out = dst;
    while (n) {
        uint32_t c = off >> NM_PIM_CHUNK_SHIFT, in = off & (NM_PIM_CHUNK_SIZE - 1);
        size_t k = NM_MIN(n, (size_t)(NM_PIM_CHUNK_SIZE - in));
        if (d->mram[c])
            memcpy(out, d->mram[c] + in, k);
        else
            memset(out, 0, k);
        out += k;
        off += (uint32_t)k;
        n -= k;
    }
}

int nm_pim__mram_write_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n)
{
    const uint8_t *in_p = src;
    while (n) {
        uint32_t c = off >> NM_PIM_CHUNK_SHIFT, in = off & (NM_PIM_CHUNK_SIZE - 1);
        size_t k = NM_MIN(n, (size_t)(NM_PIM_CHUNK_SIZE - in));
        if (!d->mram[c]) {
            d->mram[c] = calloc(1, NM_PIM_CHUNK_SIZE);
            if (!d->mram[c])
                return -1;
            d->mram_resident += NM_PIM_CHUNK_SIZE;
        }
        memcpy(d->mram[c] + in, in_p, k);
        in_p += k;
        off += (uint32_t)k;
        n -= k;
    }
    return 0;
}

void nm_pim__mram_free(nm_pim_dpu *d)
{
    if (!d->mram)
        return;
    for (uint32_t c = 0; c < NM_PIM_NR_CHUNKS; c++) {
        free(d->mram[c]);
        d->mram[c] = NULL;
    }
    d->mram_resident = 0;
}

void nm_pim__hw_free(nm_pim_dpu *d)
{
    for (uint32_t i = 0; i < NM_PIM_MAX_HW_UNITS; i++) {
        free(d->hw[i].state);
        d->hw[i].state = NULL;
        d->hw[i].unit = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Workers: per host thread coroutine stacks and WRAM heap                    */

static worker *get_worker(void)
{
    worker *w = t_worker;
    if (w)
        return w;
    w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->heap = aligned_alloc(64, NM_PIM_WRAM_SIZE);
    if (!w->heap) {
        free(w);
        return NULL;
    }
    memset(w->heap, 0, NM_PIM_WRAM_SIZE);
    nm_coro_host_init(&w->host);
    t_worker = w;
    return w;
}

void nm_pim__worker_release(void)
{
    worker *w = t_worker;
    if (!w)
        return;
    for (uint32_t i = 0; i < w->nr_stacks; i++)
        nm_coro_destroy(&w->t[i].coro);
    nm_coro_host_fini(&w->host);
    free(w->ranges);
    free(w->heap);
    free(w);
    t_worker = NULL;
}

static bool ensure_stacks(worker *w, uint32_t n)
{
    while (w->nr_stacks < n) {
        if (nm_coro_create(&w->t[w->nr_stacks].coro, NM_PIM_CORO_STACK) != 0)
            return false;
        w->nr_stacks++;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Faults                                                                     */

__attribute__((format(printf, 6, 7))) static void set_fault(worker *w, nm_pim_fault_code code, uint32_t tasklet_id,
                                                          uint64_t addr, uint64_t size, const char *fmt, ...)
{
    if (w->faulted)
        return;
    w->faulted = true;
    nm_pim_fault_info *f = &w->d->fault;
    f->code = code;
    f->tasklet = tasklet_id;
    f->cycle = (uint64_t)ceil(w->T);
    f->address = addr;
    f->size = size;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof(f->message), fmt, ap);
    va_end(ap);
}

static __attribute__((noreturn)) void outside_tasklet(const char *fn)
{
    fprintf(stderr, "nearmem pim: %s() called outside a DPU tasklet (host code cannot use the DPU API)\n", fn);
    abort();
}

static inline worker *cur_worker(const char *fn)
{
    worker *w = t_worker;
    if (NM_UNLIKELY(!w || !w->cur))
        outside_tasklet(fn);
    return w;
}

/* Tasklet side: hand an operation to the scheduler; returns once it is done. */
static void post(worker *w, opkind op)
{
    tasklet *t = w->cur;
    t->op = op;
    nm_coro_yield(&w->host, op == OP_EXIT);
}

/* Tasklet side: stop the DPU; never returns. */
static __attribute__((noreturn)) void tasklet_die(worker *w)
{
    tasklet *t = w->cur;
    t->st = T_DONE;
    nm_coro_yield(&w->host, 1);
    __builtin_trap(); /* never resumed */
}

#define TFAULT(w, code, addr, size, ...)                                     \
    do {                                                                     \
        set_fault((w), (code), (w)->cur->id, (addr), (size), __VA_ARGS__);   \
        tasklet_die(w);                                                      \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Scheduler                                                                  */

static void tasklet_entry(void *arg)
{
    (void)arg;
    worker *w = t_worker;
    w->d->prog->main_fn();
    post(w, OP_EXIT);
    __builtin_trap(); /* never resumed after OP_EXIT */
}

static void make_ready(worker *w, tasklet *t, uint64_t *wait_counter)
{
    if (wait_counter)
        *wait_counter += (uint64_t)llround(w->T - t->wait_start);
    t->st = T_READY;
}

static uint32_t barrier_count(const worker *w, const barrier_t *b)
{
    return b->count == NM_PIM_BARRIER_ALL ? w->n : b->count;
}

/* Perform t's posted operation at time T (its compute phase is over). */
static void do_op(worker *w, tasklet *t)
{
    const nm_pim_cost *c = w->cost;
    switch (t->op) {
    case OP_NONE:
        t->st = T_READY;
        break;
    case OP_EXIT:
        t->st = T_DONE;
        t->out->cycles = (uint64_t)ceil(w->T);
        break;
    case OP_DMA_READ:
    case OP_DMA_WRITE: {
        bool rd = t->op == OP_DMA_READ;
        double lat = rd ? c->dma_read_alpha + c->dma_read_beta * t->op_bytes
                        : c->dma_write_alpha + c->dma_write_beta * t->op_bytes;
        double start = NM_MAX(w->T, w->dma_free);
        w->dma_free = start + lat;
        w->d->stats.dma_busy_cycles += (uint64_t)llround(lat);
        t->st = T_WAIT;
        t->wake_at = w->dma_free;
        t->wait_start = w->T;
        break;
    }
    case OP_DELAY:
        t->st = T_WAIT;
        t->wake_at = w->T + (double)t->op_cycles;
        t->wait_start = w->T;
        break;
    case OP_LOCK: {
        nm_pim_mutex *m = t->op_obj;
        if (m->owner == 0) {
            m->owner = t->id + 1;
            t->st = T_READY;
        } else {
            t->st = T_SPIN;
            t->seq = ++w->seq;
            t->wait_start = w->T;
        }
        break;
    }
    case OP_TRYLOCK: {
        nm_pim_mutex *m = t->op_obj;
        t->op_result = m->owner == 0;
        if (t->op_result)
            m->owner = t->id + 1;
        t->st = T_READY;
        break;
    }
    case OP_UNLOCK: {
        nm_pim_mutex *m = t->op_obj;
        if (m->owner != t->id + 1) {
            set_fault(w, NM_PIM_FAULT_MUTEX, t->id, 0, 0, "tasklet %u unlocked a mutex held by %s%u", t->id,
                      m->owner ? "tasklet " : "nobody", m->owner ? m->owner - 1 : 0);
            return;
        }
        m->owner = 0;
        /* The spinner that started waiting first takes it (ties cannot happen: seq is unique). */
        tasklet *next = NULL;
        for (uint32_t i = 0; i < w->n; i++) {
            tasklet *s = &w->t[i];
            if (s->st == T_SPIN && s->op_obj == m && (!next || s->seq < next->seq))
                next = s;
        }
        if (next) {
            m->owner = next->id + 1;
            make_ready(w, next, &next->out->lock_wait_cycles);
        }
        t->st = T_READY;
        break;
    }
    case OP_BARRIER: {
        barrier_t *b = t->op_obj;
        uint32_t cnt = barrier_count(w, b);
        if (cnt == 0 || cnt > w->n) {
            set_fault(w, NM_PIM_FAULT_BARRIER, t->id, 0, cnt,
                      "barrier for %u tasklets with %u tasklets running: it can never open", cnt, w->n);
            return;
        }
        if (++b->arrived >= cnt) {
            b->arrived = 0;
            b->generation++;
            for (uint32_t i = 0; i < w->n; i++) {
                tasklet *s = &w->t[i];
                if (s->st == T_BLOCKED && s->op == OP_BARRIER && s->op_obj == b)
                    make_ready(w, s, &s->out->sync_wait_cycles);
            }
            t->st = T_READY;
        } else {
            t->st = T_BLOCKED;
            t->wait_start = w->T;
        }
        break;
    }
    case OP_SEM_TAKE: {
        sem_t *s = t->op_obj;
        if (s->count > 0) {
            s->count--;
            t->st = T_READY;
        } else {
            s->waiters++;
            t->st = T_BLOCKED;
            t->seq = ++w->seq;
            t->wait_start = w->T;
        }
        break;
    }
    case OP_SEM_GIVE: {
        sem_t *s = t->op_obj;
        tasklet *next = NULL;
        for (uint32_t i = 0; i < w->n; i++) {
            tasklet *x = &w->t[i];
            if (x->st == T_BLOCKED && x->op == OP_SEM_TAKE && x->op_obj == s && (!next || x->seq < next->seq))
                next = x;
        }
        if (next) {
            s->waiters--;
            make_ready(w, next, &next->out->sync_wait_cycles);
        } else {
            s->count++;
        }
        t->st = T_READY;
        break;
    }
    }
}

/* Run every READY tasklet natively until it posts its next operation. */
static void run_ready(worker *w)
{
    bool again = true;
    while (again && !w->faulted) {
        again = false;
        for (uint32_t i = 0; i < w->n && !w->faulted; i++) {
            tasklet *t = &w->t[i];
            if (t->st != T_READY)
                continue;
            again = true;
            w->cur = t;
            nm_coro_resume(&w->host, &t->coro);
            w->cur = NULL;
            if (w->faulted)
                return;
            t->instr += t->pending;
            t->rem = (double)t->pending;
            t->pending = 0;
            t->st = T_COMPUTE;
            if (t->rem == 0.0)
                do_op(w, t);
        }
    }
}

static void scheduler(worker *w)
{
    const double revolver = (double)w->cost->revolver_cycles;
    for (;;) {
        run_ready(w);
        if (w->faulted)
            return;
        uint32_t issuing = 0, live = 0;
        double next = INFINITY;
        for (uint32_t i = 0; i < w->n; i++) {
            tasklet *t = &w->t[i];
            if (t->st != T_DONE)
                live++;
            if (t->st == T_COMPUTE || t->st == T_SPIN)
                issuing++;
            else if (t->st == T_WAIT)
                next = NM_MIN(next, t->wake_at);
        }
        if (live == 0)
            return;
        double period = NM_MAX(revolver, (double)issuing);
        for (uint32_t i = 0; i < w->n; i++)
            if (w->t[i].st == T_COMPUTE)
                next = NM_MIN(next, w->T + w->t[i].rem * period);
        if (next == INFINITY) {
            uint32_t first = 0;
            while (first < w->n && w->t[first].st == T_DONE)
                first++;
            set_fault(w, NM_PIM_FAULT_DEADLOCK, first, 0, live,
                      "%u tasklet(s) wait on mutexes, barriers or semaphores that nothing can release", live);
            return;
        }
        double dt = next - w->T, step = dt / period;
        for (uint32_t i = 0; i < w->n; i++) {
            tasklet *t = &w->t[i];
            if (t->st == T_COMPUTE) {
                double s = NM_MIN(step, t->rem);
                t->rem -= s;
                t->issued += s;
            } else if (t->st == T_SPIN) {
                t->issued += step;
                t->spin_issued += step;
            }
        }
        w->T = next;
        for (uint32_t i = 0; i < w->n && !w->faulted; i++) {
            tasklet *t = &w->t[i];
            if (t->st == T_COMPUTE && t->rem <= 1e-6) {
                t->rem = 0.0;
                do_op(w, t);
            } else if (t->st == T_WAIT && t->wake_at <= w->T) {
                make_ready(w, t, t->op == OP_DELAY ? NULL : &t->out->dma_wait_cycles);
            }
        }
    }
}

static bool swap_globals(worker *w, nm_pim_dpu *d, bool in, bool boot)
{
    if (in)
        w->nr_ranges = 0;
    for (const nm_pim_symbol *s = d->prog->symbols; s; s = s->next) {
        if (!s->tls_addr)
            continue;
        void *tls = s->tls_addr();
        if (in) {
            if (w->nr_ranges == w->cap_ranges) {
                uint32_t cap = w->cap_ranges ? 2 * w->cap_ranges : 16;
                struct wram_range *r = realloc(w->ranges, cap * sizeof(*r));
                if (!r)
                    return false;
                w->ranges = r;
                w->cap_ranges = cap;
            }
            w->ranges[w->nr_ranges].lo = (uintptr_t)tls;
            w->ranges[w->nr_ranges].hi = (uintptr_t)tls + s->size;
            w->nr_ranges++;
            /* Synchronisation state is reset at boot; WRAM data persists. */
            const void *src = (boot && s->kind != NM_PIM_SYM_WRAM) ? s->initial : d->wram_image + s->offset;
            memcpy(tls, src, s->size);
        } else {
            memcpy(d->wram_image + s->offset, tls, s->size);
        }
    }
    return true;
}

void nm_pim__run_dpu(nm_pim_dpu *d)
{
    nm_pim_program_def *p = d->prog;
    memset(&d->fault, 0, sizeof(d->fault));
    memset(d->tstats, 0, sizeof(d->tstats));
    uint64_t launches = d->stats.launches + 1;
    memset(&d->stats, 0, sizeof(d->stats));
    d->stats.launches = launches;
    d->stats.nr_tasklets = d->nr_tasklets;
    uint64_t stat_wram = (uint64_t)p->wram_globals_bytes + (uint64_t)d->nr_tasklets * p->stack_size;
    d->stats.wram_static_bytes = (uint32_t)NM_MIN(stat_wram, (uint64_t)UINT32_MAX);
    d->stats.wram_high_water = d->stats.wram_static_bytes;

    worker *w = get_worker();
    nm_pim_fault_info *f = &d->fault;
    if (d->nr_tasklets == 0 || d->nr_tasklets > NM_PIM_MAX_TASKLETS) {
        f->code = NM_PIM_FAULT_TASKLETS;
        f->size = d->nr_tasklets;
        snprintf(f->message, sizeof(f->message), "%u tasklets: the DPU runs 1 to %u", d->nr_tasklets,
                 NM_PIM_MAX_TASKLETS);
        return;
    }
    if (stat_wram > NM_PIM_WRAM_SIZE) {
        f->code = NM_PIM_FAULT_WRAM_OVERFLOW;
        f->size = stat_wram;
        snprintf(f->message, sizeof(f->message),
                 "globals %u B + %u stacks x %u B = %llu B exceed the %u B of WRAM", p->wram_globals_bytes,
                 d->nr_tasklets, p->stack_size, (unsigned long long)stat_wram, NM_PIM_WRAM_SIZE);
        return;
    }
    if (!w || !ensure_stacks(w, d->nr_tasklets)) {
        f->code = NM_PIM_FAULT_KERNEL;
        snprintf(f->message, sizeof(f->message), "host out of memory for tasklet stacks");
        return;
    }
    w->d = d;
    w->cost = &d->sys->cost;
    w->n = d->nr_tasklets;
    w->T = 0.0;
    w->dma_free = 0.0;
    w->seq = 0;
    w->heap_top = 0;
    w->heap_hw = 0;
    w->heap_limit = NM_PIM_WRAM_SIZE - (uint32_t)stat_wram;
    w->faulted = false;
    w->cur = NULL;
    d->pc_mode = COUNT_CYCLES;
    d->pc_base = 0.0;
    for (uint32_t i = 0; i < w->n; i++) {
        tasklet *t = &w->t[i];
        nm_coro *c = &t->coro;
        memset((char *)t + sizeof(nm_coro), 0, sizeof(*t) - sizeof(nm_coro));
        t->id = i;
        t->st = T_READY;
        t->out = &d->tstats[i];
        nm_coro_reset(c, tasklet_entry, t);
    }
    if (!swap_globals(w, d, true, true)) {
        f->code = NM_PIM_FAULT_KERNEL;
        snprintf(f->message, sizeof(f->message), "host out of memory");
        w->d = NULL;
        return;
    }
    scheduler(w);
    swap_globals(w, d, false, false);

    /* Leave no data of this DPU in the shared heap buffer (isolation and
     * determinism even for kernels that read memory they did not write). */
    memset(w->heap, 0, w->heap_hw);
    double T = w->T;
    nm_pim_dpu_stats *s = &d->stats;
    s->cycles = (uint64_t)ceil(T);
    s->wram_high_water = d->stats.wram_static_bytes + w->heap_hw;
    for (uint32_t i = 0; i < w->n; i++) {
        tasklet *t = &w->t[i];
        nm_pim_tasklet_stats *ts = t->out;
        ts->instructions = t->instr + (uint64_t)floor(t->spin_issued);
        if (t->st != T_DONE && ts->cycles == 0)
            ts->cycles = (uint64_t)ceil(T);
        s->instructions += ts->instructions;
        s->dma_reads += ts->dma_reads;
        s->dma_read_bytes += ts->dma_read_bytes;
        s->dma_writes += ts->dma_writes;
        s->dma_write_bytes += ts->dma_write_bytes;
        s->lock_wait_cycles += ts->lock_wait_cycles;
        s->sync_wait_cycles += ts->sync_wait_cycles;
        s->hw_unit_ops += ts->hw_unit_ops;
    }
    w->d = NULL;
}

/* ------------------------------------------------------------------------ */
/* Kernel-side API                                                            */

sysname_t nm_pim_me(void) { return cur_worker("me")->cur->id; }
uint32_t nm_pim_nr_tasklets(void) { return cur_worker("NR_TASKLETS")->n; }

void nm_pim_charge(uint32_t instructions) { cur_worker("nm_pim_charge")->cur->pending += instructions; }

void nm_pim_fault(const char *why)
{
    worker *w = cur_worker("nm_pim_fault");
    TFAULT(w, NM_PIM_FAULT_KERNEL, 0, 0, "kernel fault: %s", why ? why : "(no reason)");
}

uint64_t nm_pim_cycle(void)
{
    worker *w = cur_worker("nm_pim_cycle");
    post(w, OP_NONE);
    return (uint64_t)ceil(w->T);
}

mram_addr_t nm_pim_mram_heap_pointer(void)
{
    worker *w = cur_worker("DPU_MRAM_HEAP_POINTER");
    return NM_PIM_MRAM_BASE + w->d->prog->mram_vars_bytes;
}

/* Is [p, p + n) WRAM of the running DPU: the mem_alloc heap, the calling
 * tasklet's stack, or one of the program's globals? Catches kernels that
 * hand a host buffer to mram_read/mram_write. */
static bool in_wram(worker *w, const void *p, uint32_t n)
{
    uintptr_t a = (uintptr_t)p, e = a + n;
    if (a >= (uintptr_t)w->heap && e <= (uintptr_t)w->heap + NM_PIM_WRAM_SIZE)
        return true;
    const void *lo, *hi;
    nm_coro_stack_bounds(&w->cur->coro, &lo, &hi);
    if (a >= (uintptr_t)lo && e <= (uintptr_t)hi)
        return true;
    for (uint32_t i = 0; i < w->nr_ranges; i++)
        if (a >= w->ranges[i].lo && e <= w->ranges[i].hi)
            return true;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan may move stack locals to its fake stack. */
    if (__asan_addr_is_in_fake_stack(__asan_get_current_fake_stack(), (void *)p, NULL, NULL))
        return true;
#endif
    return false;
}

static void dma_check(worker *w, uint64_t mram, const void *wram, uint32_t n, const char *fn)
{
    if (n < NM_PIM_DMA_MIN || n > NM_PIM_DMA_MAX || n % NM_PIM_DMA_ALIGN)
        TFAULT(w, NM_PIM_FAULT_DMA_SIZE, mram, n, "%s of %u bytes: size must be 8..2048 and a multiple of 8", fn,
               n);
    if (mram % NM_PIM_DMA_ALIGN)
        TFAULT(w, NM_PIM_FAULT_DMA_ALIGN, mram, n, "%s: MRAM address 0x%llx is not 8-byte aligned", fn,
               (unsigned long long)mram);
    if ((uintptr_t)wram % NM_PIM_DMA_ALIGN)
        TFAULT(w, NM_PIM_FAULT_DMA_ALIGN, (uint64_t)(uintptr_t)wram, n,
               "%s: WRAM buffer %p is not 8-byte aligned", fn, wram);
    if (!in_wram(w, wram, n))
        TFAULT(w, NM_PIM_FAULT_WRAM_BOUNDS, (uint64_t)(uintptr_t)wram, n,
               "%s: buffer %p (+%u) is not in WRAM (globals, tasklet stack or mem_alloc heap)", fn, wram, n);
    if (mram < NM_PIM_MRAM_BASE || mram + n > (uint64_t)NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE)
        TFAULT(w, NM_PIM_FAULT_MRAM_BOUNDS, mram, n,
               "%s: [0x%llx, +%u) is outside MRAM [0x%x, 0x%x)", fn, (unsigned long long)mram, n,
               NM_PIM_MRAM_BASE, NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE);
}

void nm_pim_mram_read(uint64_t from, void *to, uint32_t n)
{
    worker *w = cur_worker("mram_read");
    dma_check(w, from, to, n, "mram_read");
    tasklet *t = w->cur;
    t->pending += w->cost->instr_dma;
    t->op_bytes = n;
    post(w, OP_DMA_READ);
    /* The data lands when the transfer completes, which is now. */
    nm_pim__mram_read_host(w->d, (uint32_t)(from - NM_PIM_MRAM_BASE), to, n);
    t->out->dma_reads++;
    t->out->dma_read_bytes += n;
}

void nm_pim_mram_write(const void *from, uint64_t to, uint32_t n)
{
    worker *w = cur_worker("mram_write");
    dma_check(w, to, from, n, "mram_write");
    tasklet *t = w->cur;
    t->pending += w->cost->instr_dma;
    t->op_bytes = n;
    post(w, OP_DMA_WRITE);
    if (nm_pim__mram_write_host(w->d, (uint32_t)(to - NM_PIM_MRAM_BASE), from, n) != 0)
        TFAULT(w, NM_PIM_FAULT_KERNEL, to, n, "host out of memory backing MRAM");
    t->out->dma_writes++;
    t->out->dma_write_bytes += n;
}

void *nm_pim_mem_alloc(size_t size)
{
    worker *w = cur_worker("mem_alloc");
    tasklet *t = w->cur;
    t->pending += w->cost->instr_mem_alloc;
    uint64_t sz = NM_ALIGN_UP((uint64_t)size, 8);
    if ((uint64_t)w->heap_top + sz > w->heap_limit)
        TFAULT(w, NM_PIM_FAULT_WRAM_OVERFLOW, w->heap_top, size,
               "mem_alloc(%zu): %u of %u heap bytes already used", size, w->heap_top, w->heap_limit);
    void *p = w->heap + w->heap_top;
    w->heap_top += (uint32_t)sz;
    if (w->heap_top > w->heap_hw)
        w->heap_hw = w->heap_top;
    t->out->wram_alloc_bytes += sz;
    return p;
}

void nm_pim_mem_reset(void)
{
    worker *w = cur_worker("mem_reset");
    w->cur->pending += w->cost->instr_mem_alloc;
    w->heap_top = 0;
}

/* Synchronisation calls: charge the API's instructions, then let the
 * scheduler perform the operation at the tasklet's modeled time. */
static worker *sync_op(const char *fn, size_t cost_field, void *obj, opkind op)
{
    worker *w = cur_worker(fn);
    w->cur->pending += *(const uint32_t *)((const char *)w->cost + cost_field);
    w->cur->op_obj = obj;
    post(w, op);
    return w;
}

void nm_pim_mutex_lock(mutex_id_t m) { sync_op("mutex_lock", offsetof(nm_pim_cost, instr_mutex), m, OP_LOCK); }
bool nm_pim_mutex_trylock(mutex_id_t m)
{
    return sync_op("mutex_trylock", offsetof(nm_pim_cost, instr_mutex), m, OP_TRYLOCK)->cur->op_result;
}
void nm_pim_mutex_unlock(mutex_id_t m) { sync_op("mutex_unlock", offsetof(nm_pim_cost, instr_mutex), m, OP_UNLOCK); }
void nm_pim_barrier_wait(barrier_t *b) { sync_op("barrier_wait", offsetof(nm_pim_cost, instr_barrier), b, OP_BARRIER); }
void nm_pim_sem_take(sem_t *s) { sync_op("sem_take", offsetof(nm_pim_cost, instr_sem), s, OP_SEM_TAKE); }
void nm_pim_sem_give(sem_t *s) { sync_op("sem_give", offsetof(nm_pim_cost, instr_sem), s, OP_SEM_GIVE); }

static double counter_now(worker *w)
{
    if (w->d->pc_mode == COUNT_INSTRUCTIONS) {
        double sum = 0;
        for (uint32_t i = 0; i < w->n; i++)
            sum += w->t[i].issued;
        return floor(sum + 1e-6);
    }
    return ceil(w->T);
}

perfcounter_t nm_pim_perfcounter_config(perfcounter_config_t config, bool reset_value)
{
    worker *w = cur_worker("perfcounter_config");
    w->cur->pending += w->cost->instr_perfcounter;
    post(w, OP_NONE);
    nm_pim_dpu *d = w->d;
    if (config == COUNT_CYCLES || config == COUNT_INSTRUCTIONS || config == COUNT_NOTHING)
        d->pc_mode = config;
    double now = counter_now(w);
    if (reset_value)
        d->pc_base = now;
    return d->pc_mode == COUNT_NOTHING ? 0 : (perfcounter_t)(now - d->pc_base);
}

perfcounter_t nm_pim_perfcounter_get(void)
{
    worker *w = cur_worker("perfcounter_get");
    w->cur->pending += w->cost->instr_perfcounter;
    post(w, OP_NONE);
    nm_pim_dpu *d = w->d;
    if (d->pc_mode == COUNT_NOTHING)
        return 0;
    return (perfcounter_t)(counter_now(w) - d->pc_base);
}

void *nm_pim_hw_state(const nm_pim_hw_unit *unit)
{
    worker *w = cur_worker("nm_pim_hw_state");
    nm_pim_dpu *d = w->d;
    for (uint32_t i = 0; i < NM_PIM_MAX_HW_UNITS; i++) {
        if (d->hw[i].unit == unit)
            return d->hw[i].state;
        if (!d->hw[i].unit) {
            void *st = calloc(1, unit->state_size ? unit->state_size : 1);
            if (!st)
                TFAULT(w, NM_PIM_FAULT_HW_UNIT, 0, unit->state_size, "host out of memory for unit %s", unit->name);
            if (unit->reset)
                unit->reset(st);
            d->hw[i].unit = unit;
            d->hw[i].state = st;
            return st;
        }
    }
    TFAULT(w, NM_PIM_FAULT_HW_UNIT, 0, 0, "more than %u hardware units on one DPU", NM_PIM_MAX_HW_UNITS);
}

void nm_pim_hw_exec(const nm_pim_hw_unit *unit, uint32_t extra_cycles)
{
    (void)unit;
    worker *w = cur_worker("nm_pim_hw_exec");
    tasklet *t = w->cur;
    t->pending += 1;
    t->out->hw_unit_ops++;
    if (extra_cycles) {
        t->op_cycles = extra_cycles;
        post(w, OP_DELAY);
    }
}

void nm_pim_hw_refuse(const nm_pim_hw_unit *unit, const char *why)
{
    worker *w = cur_worker("nm_pim_hw_refuse");
    TFAULT(w, NM_PIM_FAULT_HW_UNIT, 0, 0, "%s: %s", unit && unit->name ? unit->name : "unit", why ? why : "refused");
}
