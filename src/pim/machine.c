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
#include <sys/mman.h>

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
    OP_SDK_BARRIER,  /* SDK barrier_t (program files) */
    OP_SDK_SEM_TAKE, /* SDK sem_t */
    OP_SDK_SEM_GIVE,
    OP_HS_NOTIFY,    /* handshake_notify */
    OP_HS_WAIT,      /* handshake_wait_for(op_bytes) */
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
    int op_int;         /* handshake_wait_for's result */
    uint64_t pending;   /* charged natively since the last post */
    double rem;         /* COMPUTE: instructions left */
    double issued;      /* instructions issued so far (fractional while computing) */
    double spin_issued; /* of which busy-wait */
    uint64_t instr;     /* exact charged instructions */
    uint64_t costed;    /* of which charged by the compiler's costing (program files) */
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
    bool readied; /* a tasklet may have become READY since run_ready last looked */
    uint32_t mask[T_DONE + 1]; /* bit i: tasklet i is in that state (t[i].st, kept by set_st) */
    tasklet *cur;
    /* This thread's addresses of the running program's globals, for DMA checks. */
    struct wram_range {
        uintptr_t lo, hi;
    } *ranges;
    uint32_t nr_ranges, cap_ranges;
    /* Program files: the instance the DPU runs on, its atomic bits and
     * handshakes (hardware state, reset at boot). */
    const nm_pim_instance *inst;
    /* The instance's cost counter (issue 15), or `no_counter` for
     * registered programs (not costed by a compiler). */
    uint64_t *counter;
    uint64_t no_counter;
    nm_pim_mutex atomic[256];
    uint8_t hs_waiter[NM_PIM_MAX_TASKLETS];     /* tasklet id + 1 waiting for notifier i */
    bool hs_notifying[NM_PIM_MAX_TASKLETS];     /* notifier i stopped in handshake_notify */
} worker;

static __thread worker *t_worker;

/* ------------------------------------------------------------------------ */
/* MRAM backing: one 64 MiB MAP_NORESERVE mapping per DPU, committed by the
 * kernel page by page as it is written. A bitmap of 64 KiB chunks records
 * what was ever written: reads of other chunks return zeros without
 * touching (and faulting in) the mapping, and it counts resident bytes.
 * Large host writes pre-fault their pages in one call (MADV_POPULATE_WRITE),
 * which is cheaper than one page fault per 4 KiB. Transparent huge pages are
 * not asked for: a DPU that uses 512 KiB of MRAM would commit 2 MiB, and
 * huge-page faults were slower than 4 KiB ones on the machines measured
 * (docs/pim-machine.md, "Memory"). */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static inline bool chunk_written(const nm_pim_dpu *d, uint32_t c) { return (d->written[c >> 6] >> (c & 63)) & 1u; }

int nm_pim__mram_init(nm_pim_dpu *d)
{
    void *m = mmap(NULL, NM_PIM_MRAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    d->mram = m;
    memset(d->written, 0, sizeof(d->written));
    d->mram_resident = 0;
    return 0;
}

void nm_pim__mram_read_host(const nm_pim_dpu *d, uint32_t off, void *dst, size_t n)
{
    uint8_t *out = dst;
    while (n) {
        uint32_t c = off >> NM_PIM_CHUNK_SHIFT, in = off & (NM_PIM_CHUNK_SIZE - 1);
        size_t k = NM_MIN(n, (size_t)(NM_PIM_CHUNK_SIZE - in));
        if (chunk_written(d, c))
            memcpy(out, d->mram + off, k);
        else
            memset(out, 0, k);
        out += k;
        off += (uint32_t)k;
        n -= k;
    }
}

int nm_pim__mram_write_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n)
{
    if (!n)
        return 0;
    uint32_t c0 = off >> NM_PIM_CHUNK_SHIFT, c1 = (uint32_t)((off + n - 1) >> NM_PIM_CHUNK_SHIFT);
    for (uint32_t c = c0; c <= c1; c++)
        if (!chunk_written(d, c)) {
            d->written[c >> 6] |= 1ull << (c & 63);
            d->mram_resident += NM_PIM_CHUNK_SIZE;
        }
    if (n >= NM_PIM_CHUNK_SIZE) {
        uintptr_t lo = NM_ALIGN_UP((uintptr_t)d->mram + off, 4096u), hi = ((uintptr_t)d->mram + off + n) & ~(uintptr_t)4095;
        if (hi > lo)
            (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* best effort: faults do the rest */
    }
    memcpy(d->mram + off, src, n);
    return 0;
}

void nm_pim__mram_free(nm_pim_dpu *d)
{
    if (d->mram)
        munmap(d->mram, NM_PIM_MRAM_SIZE);
    d->mram = NULL;
    memset(d->written, 0, sizeof(d->written));
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

/* Every live tasklet waits and nothing can wake one: both schedulers end here. */
static void fault_deadlock(worker *w, uint32_t live)
{
    uint32_t first = 0;
    while (first < w->n && w->t[first].st == T_DONE)
        first++;
    set_fault(w, NM_PIM_FAULT_DEADLOCK, first, 0, live,
              "%u tasklet(s) wait on mutexes, barriers or semaphores that nothing can release", live);
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

/* Every state change goes through here, so that the fast scheduler can visit
 * only the tasklets in the states it is looking for. */
static inline void set_st(worker *w, tasklet *t, tstate s)
{
    uint32_t b = 1u << t->id;
    w->mask[t->st] &= ~b;
    w->mask[s] |= b;
    t->st = s;
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
    set_st(w, t, T_DONE);
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
    if (w->inst)
        w->inst->info.main_fn();
    else
        w->d->prog->main_fn();
    post(w, OP_EXIT);
    __builtin_trap(); /* never resumed after OP_EXIT */
}

static void make_ready(worker *w, tasklet *t, uint64_t *wait_counter)
{
    w->readied = true;
    if (wait_counter)
        *wait_counter += (uint64_t)llround(w->T - t->wait_start);
    set_st(w, t, T_READY);
}

static uint32_t barrier_count(const worker *w, const barrier_t *b)
{
    return b->count == NM_PIM_BARRIER_ALL ? w->n : b->count;
}

/* Perform t's posted operation at time T (its compute phase is over). */
static void do_op(worker *w, tasklet *t)
{
    const nm_pim_cost *c = w->cost;
    w->readied = true; /* most operations complete at once: t is READY again */
    switch (t->op) {
    case OP_NONE:
        set_st(w, t, T_READY);
        break;
    case OP_EXIT:
        set_st(w, t, T_DONE);
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
        set_st(w, t, T_WAIT);
        t->wake_at = w->dma_free;
        t->wait_start = w->T;
        break;
    }
    case OP_DELAY:
        set_st(w, t, T_WAIT);
        t->wake_at = w->T + (double)t->op_cycles;
        t->wait_start = w->T;
        break;
    case OP_LOCK: {
        nm_pim_mutex *m = t->op_obj;
        if (m->owner == 0) {
            m->owner = t->id + 1;
            set_st(w, t, T_READY);
        } else {
            set_st(w, t, T_SPIN);
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
        set_st(w, t, T_READY);
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
        set_st(w, t, T_READY);
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
            set_st(w, t, T_READY);
        } else {
            set_st(w, t, T_BLOCKED);
            t->wait_start = w->T;
        }
        break;
    }
    case OP_SEM_TAKE: {
        sem_t *s = t->op_obj;
        if (s->count > 0) {
            s->count--;
            set_st(w, t, T_READY);
        } else {
            s->waiters++;
            set_st(w, t, T_BLOCKED);
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
        set_st(w, t, T_READY);
        break;
    }
    case OP_SDK_BARRIER: {
        /* The SDK's algorithm on its barrier_t {wait_queue, count,
         * initial_count, lock}: count down; the last arrival resets the count
         * and resumes the others. A count that never reaches 0 deadlocks. */
        uint8_t *b = t->op_obj;
        b[1] = (uint8_t)(b[1] - 1);
        if (b[1] == 0) {
            b[1] = b[2];
            for (uint32_t i = 0; i < w->n; i++) {
                tasklet *x = &w->t[i];
                if (x->st == T_BLOCKED && x->op == OP_SDK_BARRIER && x->op_obj == b)
                    make_ready(w, x, &x->out->sync_wait_cycles);
            }
            set_st(w, t, T_READY);
        } else {
            set_st(w, t, T_BLOCKED);
            t->wait_start = w->T;
        }
        break;
    }
    case OP_SDK_SEM_TAKE: {
        uint8_t *s = t->op_obj;
        int8_t c = (int8_t)(s[1] - 1);
        s[1] = (uint8_t)c;
        if (c < 0) {
            set_st(w, t, T_BLOCKED);
            t->seq = ++w->seq;
            t->wait_start = w->T;
        } else {
            set_st(w, t, T_READY);
        }
        break;
    }
    case OP_SDK_SEM_GIVE: {
        uint8_t *s = t->op_obj;
        int8_t old = (int8_t)s[1];
        s[1] = (uint8_t)(old + 1);
        if (old < 0) {
            tasklet *next = NULL;
            for (uint32_t i = 0; i < w->n; i++) {
                tasklet *x = &w->t[i];
                if (x->st == T_BLOCKED && x->op == OP_SDK_SEM_TAKE && x->op_obj == s && (!next || x->seq < next->seq))
                    next = x;
            }
            if (next)
                make_ready(w, next, &next->out->sync_wait_cycles);
        }
        set_st(w, t, T_READY);
        break;
    }
    case OP_HS_NOTIFY: {
        uint32_t me_id = t->id;
        if (w->hs_waiter[me_id]) {
            tasklet *x = &w->t[w->hs_waiter[me_id] - 1];
            w->hs_waiter[me_id] = 0;
            x->op_int = 0;
            make_ready(w, x, &x->out->sync_wait_cycles);
            set_st(w, t, T_READY);
        } else {
            w->hs_notifying[me_id] = true;
            set_st(w, t, T_BLOCKED);
            t->wait_start = w->T;
        }
        break;
    }
    case OP_HS_WAIT: {
        uint32_t n = t->op_bytes;
        if (n >= w->n) {
            set_fault(w, NM_PIM_FAULT_KERNEL, t->id, 0, n, "handshake_wait_for(%u): no tasklet %u (%u running)", n, n,
                      w->n);
            return;
        }
        t->op_int = 0;
        if (w->hs_waiter[n]) {
            t->op_int = 114; /* EALREADY: another tasklet already waits for n */
            set_st(w, t, T_READY);
        } else if (w->hs_notifying[n]) {
            w->hs_notifying[n] = false;
            make_ready(w, &w->t[n], &w->t[n].out->sync_wait_cycles);
            set_st(w, t, T_READY);
        } else {
            w->hs_waiter[n] = (uint8_t)(t->id + 1);
            set_st(w, t, T_BLOCKED);
            t->wait_start = w->T;
        }
        break;
    }
    }
}

/* Resume one READY tasklet until it posts its next operation, and account
 * for the compute it did on the way. */
static inline void resume(worker *w, tasklet *t)
{
    w->cur = t;
    nm_coro_resume(&w->host, &t->coro);
    w->cur = NULL;
    /* The compiler-costed instructions the tasklet executed since it
     * last handed control back: exactly an nm_pim_charge of them. */
    uint64_t costed = *w->counter;
    *w->counter = 0;
    t->costed += costed;
    t->pending += costed;
    if (w->faulted)
        return;
    t->instr += t->pending;
    t->rem = (double)t->pending;
    t->pending = 0;
    set_st(w, t, T_COMPUTE);
    if (t->rem == 0.0)
        do_op(w, t);
}

/* The reference scheduler (NEARMEM_PIM_SCHED=reference): the straightforward
 * loop, kept so that tests can show the fast one below gives the same modeled
 * cycles, bit for bit. Run every READY tasklet natively until it posts its
 * next operation, again while any did. */
static void run_ready_ref(worker *w)
{
    bool again = true;
    while (again && !w->faulted) {
        again = false;
        for (uint32_t i = 0; i < w->n && !w->faulted; i++) {
            tasklet *t = &w->t[i];
            if (t->st != T_READY)
                continue;
            again = true;
            resume(w, t);
        }
    }
}

static void scheduler_ref(worker *w)
{
    const double revolver = (double)w->cost->revolver_cycles;
    for (;;) {
        run_ready_ref(w);
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
            fault_deadlock(w, live);
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

/* The fast scheduler (the default). Host time matters here: every runtime
 * operation of every tasklet passes through it. It makes the same decisions
 * in the same order as the reference:
 * - run_ready passes over the tasklets again only when an operation since the
 *   pass began may have made one READY (make_ready and do_op are the only
 *   places a tasklet becomes READY, and both set `readied`); the reference's
 *   extra pass that finds nothing READY is skipped, and so is the whole call
 *   when nothing became READY since the last one;
 * - it visits only the tasklets in the states a loop looks for (the bit sets
 *   w->mask, kept by set_st): counts are popcounts, the earliest wake-up is a
 *   min over the WAIT set, the least remaining compute one over the COMPUTE
 *   set. min over tasklets of T + rem x period equals T + (min rem) x period
 *   in floating point too (x -> T + x * period is monotonic under rounding),
 *   so `next` is the reference's, bit for bit; each tasklet's own arithmetic
 *   (rem -= s, issued += s) is the reference's. Host cost per step follows
 *   the tasklets that compute, wait or spin, with no branch on each one's
 *   state: a scan with a switch on the state mispredicted about every other
 *   tasklet once compiler-costed kernels mixed COMPUTE and WAIT tasklets
 *   (BS: 3x the host time of the same kernel uncosted at equal steps). */
static void run_ready(worker *w)
{
    while (w->readied && !w->faulted) {
        w->readied = false;
        /* One pass in index order; a resume may ready any tasklet, so the
         * READY set is read again after each (as the reference's loop does). */
        for (uint32_t from = 0, m; !w->faulted && (m = w->mask[T_READY] & (~0u << from)) != 0;) {
            uint32_t i = (uint32_t)__builtin_ctz(m);
            resume(w, &w->t[i]);
            from = i + 1;
            if (from >= 32)
                break;
        }
    }
}

static void scheduler(worker *w)
{
    const double revolver = (double)w->cost->revolver_cycles;
    const uint32_t all = (uint32_t)((1ull << w->n) - 1u);
    for (;;) {
        run_ready(w);
        if (w->faulted)
            return;
        uint32_t compute = w->mask[T_COMPUTE], spin = w->mask[T_SPIN], wait = w->mask[T_WAIT];
        uint32_t live = (uint32_t)__builtin_popcount(all & ~w->mask[T_DONE]);
        if (live == 0)
            return;
        uint32_t issuing = (uint32_t)__builtin_popcount(compute | spin);
        double next = INFINITY, min_rem = INFINITY;
        for (uint32_t m = wait; m; m &= m - 1)
            next = NM_MIN(next, w->t[__builtin_ctz(m)].wake_at);
        for (uint32_t m = compute; m; m &= m - 1)
            min_rem = NM_MIN(min_rem, w->t[__builtin_ctz(m)].rem);
        double period = NM_MAX(revolver, (double)issuing);
        if (min_rem != INFINITY)
            next = NM_MIN(next, w->T + min_rem * period);
        if (next == INFINITY) {
            fault_deadlock(w, live);
            return;
        }
        double dt = next - w->T, step = dt / period;
        for (uint32_t m = compute; m; m &= m - 1) {
            tasklet *t = &w->t[__builtin_ctz(m)];
            double s = NM_MIN(step, t->rem);
            t->rem -= s;
            t->issued += s;
        }
        for (uint32_t m = spin; m; m &= m - 1) {
            tasklet *t = &w->t[__builtin_ctz(m)];
            t->issued += step;
            t->spin_issued += step;
        }
        w->T = next;
        /* (a completion may release a spinning tasklet: all advance first)
         * The reference completes and wakes in one pass in index order. An
         * operation changes other tasklets only from SPIN or BLOCKED to
         * READY, never into or out of COMPUTE or WAIT, and reads nothing a
         * wake-up writes (a WAIT tasklet's state and wait counter), so the
         * completions in index order (their order matters: the DMA queue),
         * then the wake-ups, give the same result; only the wake-ups before
         * a faulting operation happen, as in the reference. Two loops, so
         * that no branch asks which of the two states a tasklet is in. */
        uint32_t woken = wait;
        for (uint32_t m = compute; m; m &= m - 1) {
            uint32_t i = (uint32_t)__builtin_ctz(m);
            tasklet *t = &w->t[i];
            if (t->rem <= 1e-6) {
                t->rem = 0.0;
                do_op(w, t);
                if (w->faulted) {
                    woken &= (1u << i) - 1u;
                    break;
                }
            }
        }
        for (uint32_t m = woken; m; m &= m - 1) {
            tasklet *t = &w->t[__builtin_ctz(m)];
            if (t->wake_at <= w->T)
                make_ready(w, t, t->op == OP_DELAY ? NULL : &t->out->dma_wait_cycles);
        }
    }
}

static bool add_range(worker *w, const void *lo, size_t n)
{
    if (w->nr_ranges == w->cap_ranges) {
        uint32_t cap = w->cap_ranges ? 2 * w->cap_ranges : 16;
        struct wram_range *r = realloc(w->ranges, cap * sizeof(*r));
        if (!r)
            return false;
        w->ranges = r;
        w->cap_ranges = cap;
    }
    w->ranges[w->nr_ranges].lo = (uintptr_t)lo;
    w->ranges[w->nr_ranges].hi = (uintptr_t)lo + n;
    w->nr_ranges++;
    return true;
}

static bool swap_globals(worker *w, nm_pim_dpu *d, bool in, bool boot)
{
    if (in)
        w->nr_ranges = 0;
    if (w->inst) {
        /* A program file: its mutable WRAM globals are one block, swapped
         * whole; its constants are shared (nobody writes them). */
        const nm_dpu_info *i = &w->inst->info;
        if (in) {
            memcpy(i->wram_data, d->wram_image, i->wram_data_size);
            return add_range(w, i->wram_data, i->wram_data_size) && add_range(w, i->wram_rodata, i->wram_rodata_size);
        }
        memcpy(d->wram_image, i->wram_data, i->wram_data_size);
        return true;
    }
    for (const nm_pim_symbol *s = d->prog->symbols; s; s = s->next) {
        if (!s->tls_addr)
            continue;
        void *tls = s->tls_addr();
        if (in) {
            if (!add_range(w, tls, s->size))
                return false;
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
    uint64_t stat_wram = (uint64_t)p->wram_globals_bytes + p->wram_rodata_bytes +
                         (uint64_t)d->nr_tasklets * p->stack_size;
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
                 "globals %u B + constants %u B + %u stacks x %u B = %llu B exceed the %u B of WRAM",
                 p->wram_globals_bytes, p->wram_rodata_bytes, d->nr_tasklets, p->stack_size,
                 (unsigned long long)stat_wram, NM_PIM_WRAM_SIZE);
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
    w->readied = true; /* every tasklet starts READY */
    w->cur = NULL;
    w->inst = p->file ? &p->file->inst[d->index % d->sys->nr_threads] : NULL;
    w->counter = w->inst && w->inst->info.cost_counter ? w->inst->info.cost_counter : &w->no_counter;
    *w->counter = 0;
    memset(w->atomic, 0, sizeof(w->atomic));
    memset(w->hs_waiter, 0, sizeof(w->hs_waiter));
    memset(w->hs_notifying, 0, sizeof(w->hs_notifying));
    d->log_len = 0;
    d->log_dropped = 0;
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
    memset(w->mask, 0, sizeof(w->mask));
    w->mask[T_READY] = (uint32_t)((1ull << w->n) - 1u);
    if (!swap_globals(w, d, true, true)) {
        f->code = NM_PIM_FAULT_KERNEL;
        snprintf(f->message, sizeof(f->message), "host out of memory");
        w->d = NULL;
        w->inst = NULL;
        return;
    }
    if (d->sys->sched_reference)
        scheduler_ref(w);
    else
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
        ts->costed_instructions = t->costed;
        if (t->st != T_DONE && ts->cycles == 0)
            ts->cycles = (uint64_t)ceil(T);
        s->instructions += ts->instructions;
        s->costed_instructions += ts->costed_instructions;
        s->dma_reads += ts->dma_reads;
        s->dma_read_bytes += ts->dma_read_bytes;
        s->dma_writes += ts->dma_writes;
        s->dma_write_bytes += ts->dma_write_bytes;
        s->lock_wait_cycles += ts->lock_wait_cycles;
        s->sync_wait_cycles += ts->sync_wait_cycles;
        s->hw_unit_ops += ts->hw_unit_ops;
        s->warn_dma_unaligned += ts->warn_dma_unaligned;
        s->warn_dma_size += ts->warn_dma_size;
    }
    s->log_bytes = d->log_len + d->log_dropped;
    w->d = NULL;
    w->inst = NULL;
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

/* End of the WRAM object of the running DPU that holds address p (the
 * mem_alloc heap, the calling tasklet's stack, one of the program's globals
 * or its globals block), or 0 when p is not WRAM. Catches kernels that hand
 * a host buffer to mram_read/mram_write. */
static uintptr_t wram_end(worker *w, uintptr_t a)
{
    if (a >= (uintptr_t)w->heap && a < (uintptr_t)w->heap + NM_PIM_WRAM_SIZE)
        return (uintptr_t)w->heap + NM_PIM_WRAM_SIZE;
    const void *lo, *hi;
    nm_coro_stack_bounds(&w->cur->coro, &lo, &hi);
    if (a >= (uintptr_t)lo && a < (uintptr_t)hi)
        return (uintptr_t)hi;
    for (uint32_t i = 0; i < w->nr_ranges; i++)
        if (a >= w->ranges[i].lo && a < w->ranges[i].hi)
            return w->ranges[i].hi;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan may move stack locals to its fake stack. */
    void *beg = NULL, *end = NULL;
    if (__asan_addr_is_in_fake_stack(__asan_get_current_fake_stack(), (void *)a, &beg, &end))
        return (uintptr_t)end;
#endif
    return 0;
}

static bool in_wram(worker *w, const void *p, uint32_t n)
{
    uintptr_t e = wram_end(w, (uintptr_t)p);
    return e && (uintptr_t)p + n <= e;
}

static void mram_bounds(worker *w, uint64_t mram, uint64_t n, const char *fn)
{
    if (mram < NM_PIM_MRAM_BASE || mram + n > (uint64_t)NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE)
        TFAULT(w, NM_PIM_FAULT_MRAM_BOUNDS, mram, n, "%s: [0x%llx, +%llu) is outside MRAM [0x%x, 0x%x)", fn,
               (unsigned long long)mram, (unsigned long long)n, NM_PIM_MRAM_BASE, NM_PIM_MRAM_BASE + NM_PIM_MRAM_SIZE);
}

/* The DMA length the DPU actually uses for a request of n bytes: the
 * compiler encodes n/8 - 1 in an 8-bit field (docs: "Hardware semantics"),
 * so 0..7 bytes move 2048, 12 moves 8, 4096 moves 2048. */
static uint32_t dma_hw_size(uint32_t n) { return ((((n >> 3) - 1u) & 0xffu) + 1u) * 8u; }

/* One mram_read/mram_write as the DPU executes it: low 3 bits of both
 * addresses ignored, the length as the hardware decodes it; each deviation
 * from the SDK's rules counts as a warning. Reads that would write past the
 * bytes the kernel asked for stop the DPU instead (that WRAM may be the
 * host's stack here); writes that read past the WRAM object send zeros for
 * the bytes beyond it. */
static void dma(worker *w, bool rd, uint64_t mram, void *wram, uint32_t n, const char *fn)
{
    tasklet *t = w->cur;
    uint32_t eff = n;
    if (n < NM_PIM_DMA_MIN || n > NM_PIM_DMA_MAX || n % NM_PIM_DMA_ALIGN) {
        eff = dma_hw_size(n);
        t->out->warn_dma_size++;
        if (rd && eff > n)
            TFAULT(w, NM_PIM_FAULT_DMA_SIZE, mram, n,
                   "%s of %u bytes: the DMA length field (size/8 - 1, 8 bits) makes it %u bytes, "
                   "overwriting WRAM past the buffer",
                   fn, n, eff);
    }
    uint64_t ma = mram & ~(uint64_t)7;
    uintptr_t wa = (uintptr_t)wram & ~(uintptr_t)7;
    if (ma != mram || wa != (uintptr_t)wram)
        t->out->warn_dma_unaligned++;
    uintptr_t wend = wram_end(w, wa);
    if (!wend || (rd && wa + eff > wend))
        TFAULT(w, NM_PIM_FAULT_WRAM_BOUNDS, (uint64_t)(uintptr_t)wram, n,
               "%s: buffer %p (+%u) is not in WRAM (globals, tasklet stack or mem_alloc heap)", fn, wram, eff);
    mram_bounds(w, ma, eff, fn);
    t->pending += w->cost->instr_dma;
    t->op_bytes = eff;
    post(w, rd ? OP_DMA_READ : OP_DMA_WRITE);
    /* The data lands when the transfer completes, which is now. */
    uint32_t off = (uint32_t)(ma - NM_PIM_MRAM_BASE);
    if (rd) {
        nm_pim__mram_read_host(w->d, off, (void *)wa, eff);
        t->out->dma_reads++;
        t->out->dma_read_bytes += eff;
    } else {
        uint32_t in = (uint32_t)NM_MIN((uint64_t)eff, (uint64_t)(wend - wa));
        static const uint8_t zeros[NM_PIM_DMA_MAX];
        if (nm_pim__mram_write_host(w->d, off, (const void *)wa, in) != 0 ||
            (in < eff && nm_pim__mram_write_host(w->d, off + in, zeros, eff - in) != 0))
            TFAULT(w, NM_PIM_FAULT_KERNEL, ma, eff, "host out of memory backing MRAM");
        t->out->dma_writes++;
        t->out->dma_write_bytes += eff;
    }
}

void nm_pim_mram_read(uint64_t from, void *to, uint32_t n) { dma(cur_worker("mram_read"), true, from, to, n, "mram_read"); }

void nm_pim_mram_write(const void *from, uint64_t to, uint32_t n)
{
    dma(cur_worker("mram_write"), false, to, (void *)(uintptr_t)from, n, "mram_write");
}

/* ------------------------------------------------------------------------ */
/* MRAM accesses that are not mram_read/mram_write: direct __mram_ptr loads  */
/* and stores, memcpy/memset on MRAM, the SDK's unaligned helpers. They cost */
/* the aligned DMAs the DPU compiler emits for them: reads of the 8-byte-    */
/* aligned range, and for writes that do not cover whole 8-byte words a      */
/* read of those words first (read-modify-write), all in <= 2048-byte DMAs. */

static void dma_cost(worker *w, bool rd, uint64_t a, uint64_t n)
{
    tasklet *t = w->cur;
    while (n) {
        uint32_t k = (uint32_t)NM_MIN(n, (uint64_t)NM_PIM_DMA_MAX);
        t->pending += w->cost->instr_dma;
        t->op_bytes = k;
        post(w, rd ? OP_DMA_READ : OP_DMA_WRITE);
        if (rd) {
            t->out->dma_reads++;
            t->out->dma_read_bytes += k;
        } else {
            t->out->dma_writes++;
            t->out->dma_write_bytes += k;
        }
        a += k;
        n -= k;
    }
}

static void mram_span(uint64_t a, uint64_t n, uint64_t *lo, uint64_t *len)
{
    *lo = a & ~(uint64_t)7;
    *len = ((a + n + 7) & ~(uint64_t)7) - *lo;
}

static void rt_mram_load(uint32_t mram, void *dst, uint64_t n)
{
    worker *w = cur_worker("MRAM load");
    if (!n)
        return;
    uint64_t lo, len;
    mram_span(mram, n, &lo, &len);
    mram_bounds(w, mram, n, "MRAM read");
    dma_cost(w, true, lo, len);
    nm_pim__mram_read_host(w->d, mram - NM_PIM_MRAM_BASE, dst, n);
}

static void rt_mram_store(uint32_t mram, const void *src, uint64_t n)
{
    worker *w = cur_worker("MRAM store");
    if (!n)
        return;
    uint64_t lo, len;
    mram_span(mram, n, &lo, &len);
    mram_bounds(w, mram, n, "MRAM write");
    if (lo != mram || len != n) /* partial words: read them first */
        dma_cost(w, true, lo, len);
    dma_cost(w, false, lo, len);
    if (nm_pim__mram_write_host(w->d, mram - NM_PIM_MRAM_BASE, src, n) != 0)
        TFAULT(w, NM_PIM_FAULT_KERNEL, mram, n, "host out of memory backing MRAM");
}

static void rt_mram_copy(uint32_t dst, uint32_t src, uint64_t n)
{
    worker *w = cur_worker("MRAM copy");
    uint8_t buf[NM_PIM_DMA_MAX];
    mram_bounds(w, src, n, "memcpy from MRAM");
    mram_bounds(w, dst, n, "memcpy to MRAM");
    bool up = dst > src && dst < src + n; /* overlapping: copy from the end (memmove) */
    for (uint64_t done = 0; done < n;) {
        uint32_t k = (uint32_t)NM_MIN(n - done, (uint64_t)NM_PIM_DMA_MAX);
        uint64_t at = up ? n - done - k : done;
        rt_mram_load(src + (uint32_t)at, buf, k);
        rt_mram_store(dst + (uint32_t)at, buf, k);
        done += k;
    }
}

static void rt_mram_set(uint32_t dst, int v, uint64_t n)
{
    worker *w = cur_worker("MRAM memset");
    uint8_t buf[NM_PIM_DMA_MAX];
    memset(buf, v, sizeof(buf));
    mram_bounds(w, dst, n, "memset on MRAM");
    for (uint64_t done = 0; done < n;) {
        uint32_t k = (uint32_t)NM_MIN(n - done, (uint64_t)NM_PIM_DMA_MAX);
        rt_mram_store(dst + (uint32_t)done, buf, k);
        done += k;
    }
}

/* mram_read_unaligned (SDK mram_unaligned.h): reads the aligned range that
 * holds [mram, mram + n) into the buffer, through mram_read. */
static void rt_dma_read_unaligned(uint32_t mram, void *wram, uint32_t n)
{
    worker *w = cur_worker("mram_read_unaligned");
    uint32_t lo = mram & ~7u, len = ((mram + n + 7u) & ~7u) - lo;
    dma(w, true, lo, wram, len, "mram_read_unaligned");
}

/* mram_write_unaligned: the SDK reads the partial first and last words,
 * patches them and writes the aligned range. */
static void rt_dma_write_unaligned(const void *wram, uint32_t mram, uint32_t n)
{
    worker *w = cur_worker("mram_write_unaligned");
    if (n > NM_PIM_DMA_MAX)
        w->cur->out->warn_dma_size++;
    if (((uintptr_t)wram & 7u) != (mram & 7u))
        w->cur->out->warn_dma_unaligned++;
    if (!in_wram(w, wram, n))
        TFAULT(w, NM_PIM_FAULT_WRAM_BOUNDS, (uint64_t)(uintptr_t)wram, n,
               "mram_write_unaligned: buffer %p (+%u) is not in WRAM", wram, n);
    rt_mram_store(mram, wram, n);
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

/* ------------------------------------------------------------------------ */
/* The service table of program files (nm_dpu_rt, src/pim/dpurt)           */

static void *rt_mem_alloc(uint32_t size) { return nm_pim_mem_alloc(size); }

static void *rt_mem_reset(void)
{
    worker *w = cur_worker("mem_reset");
    nm_pim_mem_reset();
    return w->heap;
}

static nm_pim_mutex *atomic_bit(worker *w, uint32_t bit) { return &w->atomic[bit & 0xffu]; }
static void rt_mutex_lock(uint32_t bit)
{
    worker *w = cur_worker("mutex_lock");
    nm_pim_mutex_lock(atomic_bit(w, bit));
}
static bool rt_mutex_trylock(uint32_t bit)
{
    worker *w = cur_worker("mutex_trylock");
    return nm_pim_mutex_trylock(atomic_bit(w, bit));
}
static void rt_mutex_unlock(uint32_t bit)
{
    worker *w = cur_worker("mutex_unlock");
    nm_pim_mutex_unlock(atomic_bit(w, bit));
}
static void rt_barrier_wait(void *b) { sync_op("barrier_wait", offsetof(nm_pim_cost, instr_barrier), b, OP_SDK_BARRIER); }
static void rt_sem_take(void *s) { sync_op("sem_take", offsetof(nm_pim_cost, instr_sem), s, OP_SDK_SEM_TAKE); }
static void rt_sem_give(void *s) { sync_op("sem_give", offsetof(nm_pim_cost, instr_sem), s, OP_SDK_SEM_GIVE); }
static void rt_handshake_notify(void)
{
    sync_op("handshake_notify", offsetof(nm_pim_cost, instr_sem), NULL, OP_HS_NOTIFY);
}
static int rt_handshake_wait_for(uint32_t notifier)
{
    worker *w = cur_worker("handshake_wait_for");
    w->cur->op_bytes = notifier;
    return sync_op("handshake_wait_for", offsetof(nm_pim_cost, instr_sem), NULL, OP_HS_WAIT)->cur->op_int;
}
static uint64_t rt_perfcounter_config(uint32_t config, bool reset)
{
    return nm_pim_perfcounter_config((perfcounter_config_t)config, reset);
}

/* DPU printf: text appended to the running DPU's log, up to the program's
 * stdout buffer size; the rest is counted as dropped (dpu_log_read reports
 * it). Not costed: a debugging aid. */
static void log_append(nm_pim_dpu *d, const char *s, size_t n)
{
    uint32_t room = d->log_limit > d->log_len ? d->log_limit - d->log_len : 0;
    size_t k = NM_MIN(n, (size_t)room);
    if (d->log_len + k > d->log_cap) {
        uint32_t cap = d->log_cap ? d->log_cap : 4096;
        while (cap < d->log_len + k)
            cap *= 2;
        char *nl = realloc(d->log, cap);
        if (!nl)
            k = d->log_cap - d->log_len;
        else {
            d->log = nl;
            d->log_cap = cap;
        }
    }
    memcpy(d->log + d->log_len, s, k);
    d->log_len += (uint32_t)k;
    d->log_dropped += n - k;
}

static void rt_log_vprintf(const char *fmt, va_list ap)
{
    worker *w = cur_worker("printf");
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int len = vsnprintf(small, sizeof(small), fmt, ap);
    if (len < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)len < sizeof(small)) {
        log_append(w->d, small, (size_t)len);
    } else {
        char *big = malloc((size_t)len + 1);
        if (big) {
            vsnprintf(big, (size_t)len + 1, fmt, ap2);
            log_append(w->d, big, (size_t)len);
            free(big);
        } else {
            w->d->log_dropped += (uint64_t)len;
        }
    }
    va_end(ap2);
}

static void rt_log_write(const char *s, uint32_t n) { log_append(cur_worker("puts")->d, s, n); }

static uint32_t rt_me(void) { return nm_pim_me(); }
static void rt_dma_read(uint32_t mram, void *wram, uint32_t n) { nm_pim_mram_read(mram, wram, n); }
static void rt_dma_write(const void *wram, uint32_t mram, uint32_t n) { nm_pim_mram_write(wram, mram, n); }
static void *rt_hw_state(const void *u) { return nm_pim_hw_state(u); }
static void rt_hw_exec(const void *u, uint32_t extra) { nm_pim_hw_exec(u, extra); }
__attribute__((noreturn)) static void rt_hw_refuse(const void *u, const char *why) { nm_pim_hw_refuse(u, why); }

const nm_dpu_rt nm_pim__rt = {
    .version = NM_DPU_ABI_VERSION,
    .size = sizeof(nm_dpu_rt),
    .me = rt_me,
    .dma_read = rt_dma_read,
    .dma_write = rt_dma_write,
    .mram_load = rt_mram_load,
    .mram_store = rt_mram_store,
    .mram_copy = rt_mram_copy,
    .mram_set = rt_mram_set,
    .dma_read_unaligned = rt_dma_read_unaligned,
    .dma_write_unaligned = rt_dma_write_unaligned,
    .mem_alloc = rt_mem_alloc,
    .mem_reset = rt_mem_reset,
    .mutex_lock = rt_mutex_lock,
    .mutex_trylock = rt_mutex_trylock,
    .mutex_unlock = rt_mutex_unlock,
    .barrier_wait = rt_barrier_wait,
    .sem_take = rt_sem_take,
    .sem_give = rt_sem_give,
    .handshake_notify = rt_handshake_notify,
    .handshake_wait_for = rt_handshake_wait_for,
    .perfcounter_config = rt_perfcounter_config,
    .perfcounter_get = nm_pim_perfcounter_get,
    .log_vprintf = rt_log_vprintf,
    .log_write = rt_log_write,
    .fault = nm_pim_fault,
    .charge = nm_pim_charge,
    .cycle = nm_pim_cycle,
    .hw_state = rt_hw_state,
    .hw_exec = rt_hw_exec,
    .hw_refuse = rt_hw_refuse,
};

int nm_pim__mram_fill_host(nm_pim_dpu *d, uint32_t off, const void *src, size_t n)
{
    if (src)
        return nm_pim__mram_write_host(d, off, src, n);
    /* Zeros: chunks never written already read as zeros; whole written
     * chunks are given back to the kernel, partial ones cleared. */
    while (n) {
        uint32_t c = off >> NM_PIM_CHUNK_SHIFT, in = off & (NM_PIM_CHUNK_SIZE - 1);
        size_t k = NM_MIN(n, (size_t)(NM_PIM_CHUNK_SIZE - in));
        if (chunk_written(d, c)) {
            if (k == NM_PIM_CHUNK_SIZE && madvise(d->mram + off, k, MADV_DONTNEED) == 0) {
                d->written[c >> 6] &= ~(1ull << (c & 63));
                d->mram_resident -= NM_PIM_CHUNK_SIZE;
            } else {
                memset(d->mram + off, 0, k);
            }
        }
        off += (uint32_t)k;
        n -= k;
    }
    return 0;
}
