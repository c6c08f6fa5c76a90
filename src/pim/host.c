/* Host API of the emulated PIM machine (host.h): allocation, program
 * loading, launches on a pool of host threads, symbol transfers and their
 * bandwidth model, accounting. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"

static const char *const g_err_names[DPU_ERR_COUNT] = {
    [DPU_OK] = "DPU_OK: success",
    [DPU_ERR_INTERNAL] = "DPU_ERR_INTERNAL: internal error",
    [DPU_ERR_SYSTEM] = "DPU_ERR_SYSTEM: host system call failed",
    [DPU_ERR_ALLOCATION] = "DPU_ERR_ALLOCATION: cannot allocate DPUs or host memory",
    [DPU_ERR_INVALID_DPU_SET] = "DPU_ERR_INVALID_DPU_SET: invalid DPU set for this operation",
    [DPU_ERR_INVALID_THREAD_ID] = "DPU_ERR_INVALID_THREAD_ID: tasklet index or count out of range",
    [DPU_ERR_INVALID_WRAM_ACCESS] = "DPU_ERR_INVALID_WRAM_ACCESS: WRAM transfer not 4-byte granular or out of WRAM",
    [DPU_ERR_INVALID_MRAM_ACCESS] = "DPU_ERR_INVALID_MRAM_ACCESS: MRAM transfer not 8-byte granular or out of MRAM",
    [DPU_ERR_INVALID_SYMBOL_ACCESS] = "DPU_ERR_INVALID_SYMBOL_ACCESS: transfer outside the symbol",
    [DPU_ERR_TRANSFER_ALREADY_SET] = "DPU_ERR_TRANSFER_ALREADY_SET: prepare_xfer needs a single-DPU set",
    [DPU_ERR_DIFFERENT_DPU_PROGRAMS] = "DPU_ERR_DIFFERENT_DPU_PROGRAMS: DPUs of the set run different programs",
    [DPU_ERR_DPU_ALREADY_RUNNING] = "DPU_ERR_DPU_ALREADY_RUNNING: DPU is running",
    [DPU_ERR_INVALID_MEMORY_TRANSFER] = "DPU_ERR_INVALID_MEMORY_TRANSFER: invalid buffer or length",
    [DPU_ERR_INVALID_LAUNCH_POLICY] = "DPU_ERR_INVALID_LAUNCH_POLICY: invalid launch policy",
    [DPU_ERR_DPU_FAULT] = "DPU_ERR_DPU_FAULT: a DPU stopped on a fault",
    [DPU_ERR_ELF_NO_SUCH_FILE] = "DPU_ERR_ELF_NO_SUCH_FILE: no such DPU program",
    [DPU_ERR_INVALID_PROFILE] = "DPU_ERR_INVALID_PROFILE: invalid allocation profile",
    [DPU_ERR_UNKNOWN_SYMBOL] = "DPU_ERR_UNKNOWN_SYMBOL: no such symbol in the program",
    [DPU_ERR_NO_PROGRAM_LOADED] = "DPU_ERR_NO_PROGRAM_LOADED: no program loaded",
    [DPU_ERR_INVALID_ARGUMENT] = "DPU_ERR_INVALID_ARGUMENT: invalid argument",
};

const char *dpu_error_to_string(dpu_error_t status)
{
    if ((unsigned)status < DPU_ERR_COUNT && g_err_names[status])
        return g_err_names[status];
    return "unknown dpu_error_t";
}

/* ------------------------------------------------------------------------ */
/* Sets                                                                       */

uint32_t nm_pim_set_size(struct dpu_set_t set) { return set.sys ? set.count : 0; }

struct dpu_set_t nm_pim_set_dpu(struct dpu_set_t set, uint32_t i)
{
    struct dpu_set_t d = {set.sys, set.begin + i, 1, DPU_SET_DPU};
    return d;
}

uint32_t nm_pim_set_rank_count(struct dpu_set_t set)
{
    if (!set.sys || set.count == 0)
        return 0;
    uint32_t first = set.begin / NM_PIM_DPUS_PER_RANK, last = (set.begin + set.count - 1) / NM_PIM_DPUS_PER_RANK;
    return last - first + 1;
}

struct dpu_set_t nm_pim_set_rank(struct dpu_set_t set, uint32_t r)
{
    uint32_t first = set.begin / NM_PIM_DPUS_PER_RANK + r;
    uint32_t lo = NM_MAX(set.begin, first * NM_PIM_DPUS_PER_RANK);
    uint32_t hi = NM_MIN(set.begin + set.count, (first + 1) * NM_PIM_DPUS_PER_RANK);
    struct dpu_set_t s = {set.sys, lo, hi > lo ? hi - lo : 0, DPU_SET_RANKS};
    return s;
}

static bool set_ok(struct dpu_set_t s)
{
    return s.sys && s.count > 0 && s.begin + s.count <= s.sys->nr_dpus;
}

/* Common checks of the calls that fill an out-parameter for a set. */
static dpu_error_t check_out(struct dpu_set_t set, const void *out)
{
    if (!out)
        return DPU_ERR_INVALID_ARGUMENT;
    return set_ok(set) ? DPU_OK : DPU_ERR_INVALID_DPU_SET;
}

uint32_t nm_pim_dpu_index(struct dpu_set_t dpu)
{
    return set_ok(dpu) && dpu.count == 1 ? dpu.begin : UINT32_MAX;
}

/* ------------------------------------------------------------------------ */
/* Pool                                                                       */

static void finish_job_locked(nm_pim_system *sys)
{
    nm_pim_launch_stats *ls = &sys->last_launch;
    memset(ls, 0, sizeof(*ls));
    ls->nr_dpus = sys->job_count;
    for (uint32_t i = sys->job_begin; i < sys->job_begin + sys->job_count; i++) {
        nm_pim_dpu *d = &sys->dpus[i];
        ls->max_cycles = NM_MAX(ls->max_cycles, d->stats.cycles);
        ls->sum_cycles += d->stats.cycles;
        ls->instructions += d->stats.instructions;
        if (d->state == DPU_FAULTED)
            ls->faulted_dpus++;
    }
    ls->modeled_seconds = (double)ls->max_cycles / (sys->cost.freq_mhz * 1e6);
    ls->host_seconds = nm_ns_to_s(nm_now_ns() - sys->job_start_ns);
    sys->totals.launches++;
    sys->totals.modeled_kernel_seconds += ls->modeled_seconds;
    sys->totals.host_kernel_seconds += ls->host_seconds;
    sys->in_flight = false;
    pthread_cond_broadcast(&sys->done_cv);
}

/* Host thread k runs the DPUs whose index is k modulo the thread count,
 * always the same ones: the addresses of a DPU's WRAM globals (thread-local
 * storage of its host thread) then stay the same from launch to launch, as
 * WRAM addresses do on the hardware, so kernels may keep pointers to their
 * globals in globals or MRAM across launches. */
static void *pool_main(void *arg)
{
    struct nm_pim_pool_arg *pa = arg;
    nm_pim_system *sys = pa->sys;
    const uint32_t k = pa->k, nt = sys->nr_threads;
    uint64_t seen = 0;
    pthread_mutex_lock(&sys->lock);
    for (;;) {
        while (!sys->shutdown && sys->job_gen == seen)
            pthread_cond_wait(&sys->work_cv, &sys->lock);
        if (sys->shutdown)
            break;
        seen = sys->job_gen;
        const uint32_t begin = sys->job_begin, end = sys->job_begin + sys->job_count;
        uint32_t first = begin + (k + nt - begin % nt) % nt;
        for (uint32_t i = first; i < end; i += nt) {
            nm_pim_dpu *d = &sys->dpus[i];
            d->state = DPU_RUNNING;
            pthread_mutex_unlock(&sys->lock);
            nm_pim__run_dpu(d);
            pthread_mutex_lock(&sys->lock);
            d->state = d->fault.code != NM_PIM_FAULT_NONE ? DPU_FAULTED : DPU_DONE;
            if (--sys->job_remaining == 0)
                finish_job_locked(sys);
        }
    }
    pthread_mutex_unlock(&sys->lock);
    nm_pim__worker_release();
    return NULL;
}

static void wait_idle(nm_pim_system *sys)
{
    pthread_mutex_lock(&sys->lock);
    while (sys->in_flight)
        pthread_cond_wait(&sys->done_cv, &sys->lock);
    pthread_mutex_unlock(&sys->lock);
}

/* ------------------------------------------------------------------------ */
/* Allocation                                                                 */

static dpu_error_t parse_profile(const char *profile, nm_pim_cost *cost, uint32_t *threads)
{
    if (!profile || !*profile)
        return DPU_OK;
    char buf[256];
    if (strlen(profile) >= sizeof(buf))
        return DPU_ERR_INVALID_PROFILE;
    strcpy(buf, profile);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return DPU_ERR_INVALID_PROFILE;
        *eq = '\0';
        char *end = NULL;
        errno = 0;
        double v = strtod(eq + 1, &end);
        if (errno || end == eq + 1 || *end)
            return DPU_ERR_INVALID_PROFILE;
        if (strcmp(kv, "frequency") == 0 && v > 0 && v <= 10000)
            cost->freq_mhz = v;
        else if (strcmp(kv, "threads") == 0 && v >= 1 && v <= 1024 && v == (uint32_t)v)
            *threads = (uint32_t)v;
        else if (strcmp(kv, "host_cap") == 0 && v >= 0)
            cost->bw_host_cap = v;
        else
            return DPU_ERR_INVALID_PROFILE;
    }
    return DPU_OK;
}

static void destroy_system(nm_pim_system *sys)
{
    for (uint32_t i = 0; i < sys->nr_dpus; i++) {
        nm_pim_dpu *d = &sys->dpus[i];
        nm_pim__mram_free(d);
        free(d->mram);
        free(d->wram_image);
        nm_pim__hw_free(d);
    }
    free(sys->dpus);
    free(sys->threads);
    free(sys->pool_args);
    pthread_mutex_destroy(&sys->lock);
    pthread_cond_destroy(&sys->work_cv);
    pthread_cond_destroy(&sys->done_cv);
    free(sys);
}

dpu_error_t dpu_alloc(uint32_t nr_dpus, const char *profile, struct dpu_set_t *dpu_set)
{
    if (!dpu_set)
        return DPU_ERR_INVALID_ARGUMENT;
    if (nr_dpus == DPU_ALLOCATE_ALL)
        nr_dpus = NM_PIM_MAX_DPUS;
    if (nr_dpus == 0 || nr_dpus > NM_PIM_MAX_DPUS)
        return DPU_ERR_ALLOCATION;
    nm_pim_cost cost = nm_pim_cost_default();
    uint32_t threads = nm_nproc();
    const char *env = getenv("NEARMEM_PIM_THREADS");
    if (env && *env) {
        long t = strtol(env, NULL, 10);
        if (t >= 1 && t <= 1024)
            threads = (uint32_t)t;
    }
    dpu_error_t e = parse_profile(profile, &cost, &threads);
    if (e != DPU_OK)
        return e;
    if (threads == 0)
        threads = 1;
    threads = NM_MIN(threads, nr_dpus);

    nm_pim_system *sys = calloc(1, sizeof(*sys));
    if (!sys)
        return DPU_ERR_ALLOCATION;
    sys->nr_dpus = nr_dpus;
    sys->cost = cost;
    sys->dpus = calloc(nr_dpus, sizeof(*sys->dpus));
    sys->threads = calloc(threads, sizeof(pthread_t));
    sys->pool_args = calloc(threads, sizeof(*sys->pool_args));
    pthread_mutex_init(&sys->lock, NULL);
    pthread_cond_init(&sys->work_cv, NULL);
    pthread_cond_init(&sys->done_cv, NULL);
    if (!sys->dpus || !sys->threads || !sys->pool_args) {
        destroy_system(sys);
        return DPU_ERR_ALLOCATION;
    }
    for (uint32_t i = 0; i < nr_dpus; i++) {
        nm_pim_dpu *d = &sys->dpus[i];
        d->sys = sys;
        d->index = i;
        d->mram = calloc(NM_PIM_NR_CHUNKS, sizeof(uint8_t *));
        if (!d->mram) {
            destroy_system(sys);
            return DPU_ERR_ALLOCATION;
        }
    }
    /* nr_threads is read by the workers: set it before any starts. */
    sys->nr_threads = threads;
    for (uint32_t t = 0; t < threads; t++) {
        sys->pool_args[t].sys = sys;
        sys->pool_args[t].k = t;
        if (pthread_create(&sys->threads[t], NULL, pool_main, &sys->pool_args[t]) != 0) {
            pthread_mutex_lock(&sys->lock);
            sys->shutdown = true;
            pthread_cond_broadcast(&sys->work_cv);
            pthread_mutex_unlock(&sys->lock);
            for (uint32_t j = 0; j < t; j++)
                pthread_join(sys->threads[j], NULL);
            destroy_system(sys);
            return DPU_ERR_SYSTEM;
        }
    }
    struct dpu_set_t s = {sys, 0, nr_dpus, DPU_SET_RANKS};
    *dpu_set = s;
    return DPU_OK;
}

dpu_error_t dpu_alloc_ranks(uint32_t nr_ranks, const char *profile, struct dpu_set_t *dpu_set)
{
    uint32_t max_ranks = NM_PIM_MAX_DPUS / NM_PIM_DPUS_PER_RANK;
    if (nr_ranks == DPU_ALLOCATE_ALL)
        nr_ranks = max_ranks;
    if (nr_ranks == 0 || nr_ranks > max_ranks)
        return DPU_ERR_ALLOCATION;
    return dpu_alloc(nr_ranks * NM_PIM_DPUS_PER_RANK, profile, dpu_set);
}

dpu_error_t dpu_free(struct dpu_set_t set)
{
    if (!set.sys)
        return DPU_ERR_INVALID_DPU_SET;
    nm_pim_system *sys = set.sys;
    if (set.begin != 0 || set.count != sys->nr_dpus || set.kind != DPU_SET_RANKS)
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(sys);
    pthread_mutex_lock(&sys->lock);
    sys->shutdown = true;
    pthread_cond_broadcast(&sys->work_cv);
    pthread_mutex_unlock(&sys->lock);
    for (uint32_t t = 0; t < sys->nr_threads; t++)
        pthread_join(sys->threads[t], NULL);
    destroy_system(sys);
    return DPU_OK;
}

dpu_error_t dpu_get_nr_dpus(struct dpu_set_t set, uint32_t *nr)
{
    dpu_error_t ce = check_out(set, nr);
    if (ce != DPU_OK)
        return ce;
    *nr = set.count;
    return DPU_OK;
}

dpu_error_t dpu_get_nr_ranks(struct dpu_set_t set, uint32_t *nr)
{
    dpu_error_t ce = check_out(set, nr);
    if (ce != DPU_OK)
        return ce;
    *nr = nm_pim_set_rank_count(set);
    return DPU_OK;
}

uint32_t nm_pim_host_threads(struct dpu_set_t set) { return set.sys ? set.sys->nr_threads : 0; }

dpu_error_t nm_pim_get_cost(struct dpu_set_t set, nm_pim_cost *cost)
{
    dpu_error_t ce = check_out(set, cost);
    if (ce != DPU_OK)
        return ce;
    *cost = set.sys->cost;
    return DPU_OK;
}

/* ------------------------------------------------------------------------ */
/* Loading and launching                                                      */

dpu_error_t dpu_load(struct dpu_set_t set, const char *binary, struct dpu_program_t **program)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (!binary)
        return DPU_ERR_INVALID_ARGUMENT;
    const char *name = binary;
    const char *colon = strrchr(binary, ':');
    if (colon) {
        char path[4096];
        size_t len = (size_t)(colon - binary);
        if (len == 0 || len >= sizeof(path))
            return DPU_ERR_ELF_NO_SUCH_FILE;
        memcpy(path, binary, len);
        path[len] = '\0';
        /* Kept loaded for the life of the process: kernels' code must stay. */
        if (!dlopen(path, RTLD_NOW | RTLD_LOCAL))
            return DPU_ERR_ELF_NO_SUCH_FILE;
        name = colon + 1;
    }
    nm_pim_program_def *p = nm_pim__find_program_mut(name);
    if (!p)
        return DPU_ERR_ELF_NO_SUCH_FILE;
    if (nm_pim__seal_program(p) != 0)
        return DPU_ERR_ALLOCATION;
    if (p->mram_vars_bytes > NM_PIM_MRAM_SIZE)
        return DPU_ERR_INVALID_MRAM_ACCESS; /* the binary's MRAM variables do not fit */
    if (p->nr_mutexes > NM_PIM_MAX_MUTEXES)
        return DPU_ERR_INVALID_WRAM_ACCESS; /* more hardware mutexes than the DPU has */
    wait_idle(set.sys);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++) {
        nm_pim_dpu *d = &set.sys->dpus[i];
        uint8_t *img = calloc(1, p->wram_globals_bytes ? p->wram_globals_bytes : 8);
        if (!img)
            return DPU_ERR_ALLOCATION;
        for (const nm_pim_symbol *s = p->symbols; s; s = s->next)
            if (s->tls_addr && s->initial)
                memcpy(img + s->offset, s->initial, s->size);
        free(d->wram_image);
        d->wram_image = img;
        d->prog = p;
        d->nr_tasklets = p->default_tasklets & 0x7fffffffu;
        d->state = DPU_IDLE;
        d->xfer_buf = NULL;
        memset(&d->fault, 0, sizeof(d->fault));
        memset(&d->stats, 0, sizeof(d->stats));
        memset(d->tstats, 0, sizeof(d->tstats));
        nm_pim__hw_free(d);
    }
    if (program)
        *program = (struct dpu_program_t *)p;
    return DPU_OK;
}

dpu_error_t nm_pim_set_tasklets(struct dpu_set_t set, uint32_t nr_tasklets)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (nr_tasklets == 0 || nr_tasklets > 1024)
        return DPU_ERR_INVALID_THREAD_ID;
    wait_idle(set.sys);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++) {
        nm_pim_dpu *d = &set.sys->dpus[i];
        if (!d->prog)
            return DPU_ERR_NO_PROGRAM_LOADED;
        if ((d->prog->default_tasklets & 0x80000000u) && nr_tasklets != (d->prog->default_tasklets & 0x7fffffffu))
            return DPU_ERR_INVALID_THREAD_ID;
    }
    for (uint32_t i = set.begin; i < set.begin + set.count; i++)
        set.sys->dpus[i].nr_tasklets = nr_tasklets;
    return DPU_OK;
}

dpu_error_t dpu_launch(struct dpu_set_t set, dpu_launch_policy_t policy)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (policy != DPU_SYNCHRONOUS && policy != DPU_ASYNCHRONOUS)
        return DPU_ERR_INVALID_LAUNCH_POLICY;
    nm_pim_system *sys = set.sys;
    wait_idle(sys);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++)
        if (!sys->dpus[i].prog)
            return DPU_ERR_NO_PROGRAM_LOADED;
    pthread_mutex_lock(&sys->lock);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++)
        sys->dpus[i].state = DPU_QUEUED;
    sys->in_flight = true;
    sys->job_begin = set.begin;
    sys->job_count = set.count;
    sys->job_gen++;
    sys->job_remaining = set.count;
    sys->job_start_ns = nm_now_ns();
    pthread_cond_broadcast(&sys->work_cv);
    pthread_mutex_unlock(&sys->lock);
    if (policy == DPU_ASYNCHRONOUS)
        return DPU_OK;
    return dpu_sync(set);
}

dpu_error_t dpu_sync(struct dpu_set_t set)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(set.sys);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++)
        if (set.sys->dpus[i].state == DPU_FAULTED)
            return DPU_ERR_DPU_FAULT;
    return DPU_OK;
}

dpu_error_t dpu_status(struct dpu_set_t set, bool *done, bool *fault)
{
    if (!done || !fault)
        return DPU_ERR_INVALID_ARGUMENT;
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    bool all_done = true, any_fault = false;
    pthread_mutex_lock(&set.sys->lock);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++) {
        dpu_run_state s = set.sys->dpus[i].state;
        if (s == DPU_QUEUED || s == DPU_RUNNING)
            all_done = false;
        if (s == DPU_FAULTED)
            any_fault = true;
    }
    pthread_mutex_unlock(&set.sys->lock);
    *done = all_done;
    *fault = any_fault;
    return DPU_OK;
}

/* ------------------------------------------------------------------------ */
/* Transfers                                                                  */

typedef struct resolved {
    bool mram;
    uint32_t base; /* WRAM: offset in the image; MRAM: offset in the bank */
    uint32_t size;
} resolved;

static dpu_error_t resolve(const nm_pim_program_def *p, const char *name, uint32_t off, size_t len, resolved *r)
{
    if (!name)
        return DPU_ERR_UNKNOWN_SYMBOL;
    if (len == 0)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    if (strcmp(name, DPU_MRAM_HEAP_POINTER_NAME) == 0) {
        r->mram = true;
        r->base = p->mram_vars_bytes;
        r->size = NM_PIM_MRAM_SIZE - p->mram_vars_bytes;
    } else {
        const nm_pim_symbol *s = nm_pim__find_symbol(p, name);
        if (!s)
            return DPU_ERR_UNKNOWN_SYMBOL;
        r->mram = s->kind == NM_PIM_SYM_MRAM;
        r->base = s->offset;
        r->size = s->size;
    }
    if (r->mram ? (off % 8 || len % 8) : (off % 4 || len % 4))
        return r->mram ? DPU_ERR_INVALID_MRAM_ACCESS : DPU_ERR_INVALID_WRAM_ACCESS;
    if ((uint64_t)off + len > r->size) {
        if (r->mram && (uint64_t)r->base + off + len > NM_PIM_MRAM_SIZE)
            return DPU_ERR_INVALID_MRAM_ACCESS;
        return DPU_ERR_INVALID_SYMBOL_ACCESS;
    }
    return DPU_OK;
}

/* All DPUs of the set must run the same program (one symbol table). */
static dpu_error_t set_program(struct dpu_set_t set, const nm_pim_program_def **out)
{
    const nm_pim_program_def *p = set.sys->dpus[set.begin].prog;
    if (!p)
        return DPU_ERR_NO_PROGRAM_LOADED;
    for (uint32_t i = set.begin + 1; i < set.begin + set.count; i++)
        if (set.sys->dpus[i].prog != p)
            return set.sys->dpus[i].prog ? DPU_ERR_DIFFERENT_DPU_PROGRAMS : DPU_ERR_NO_PROGRAM_LOADED;
    *out = p;
    return DPU_OK;
}

static dpu_error_t move(nm_pim_dpu *d, const resolved *r, uint32_t off, void *buf, size_t len, bool to_dpu)
{
    if (r->mram) {
        if (to_dpu)
            return nm_pim__mram_write_host(d, r->base + off, buf, len) == 0 ? DPU_OK : DPU_ERR_ALLOCATION;
        nm_pim__mram_read_host(d, r->base + off, buf, len);
    } else if (to_dpu) {
        memcpy(d->wram_image + r->base + off, buf, len);
    } else {
        memcpy(buf, d->wram_image + r->base + off, len);
    }
    return DPU_OK;
}

static void record_xfer(nm_pim_system *sys, nm_pim_xfer_kind kind, bool to_dpu, uint32_t nr_dpus, uint32_t nr_ranks,
                        uint64_t bytes, double modeled, uint64_t t0)
{
    nm_pim_xfer_stats *x = &sys->last_xfer;
    x->kind = kind;
    x->to_dpu = to_dpu;
    x->nr_dpus = nr_dpus;
    x->nr_ranks = nr_ranks;
    x->bytes = bytes;
    x->modeled_seconds = modeled;
    x->host_seconds = nm_ns_to_s(nm_now_ns() - t0);
    sys->totals.xfers++;
    if (to_dpu)
        sys->totals.xfer_bytes_to_dpu += bytes;
    else
        sys->totals.xfer_bytes_from_dpu += bytes;
    sys->totals.modeled_xfer_seconds += modeled;
    sys->totals.host_xfer_seconds += x->host_seconds;
}

/* Ranks transfer in parallel: the slowest rank, optionally capped by the
 * host's aggregate bandwidth. per_rank_bytes[r] bytes at bw GB/s. */
static double ranks_time(const nm_pim_cost *c, const uint64_t *per_rank_bytes, uint32_t nr_ranks, double bw_gbs,
                         uint64_t total)
{
    double t = 0;
    for (uint32_t r = 0; r < nr_ranks; r++)
        t = NM_MAX(t, (double)per_rank_bytes[r] / (bw_gbs * 1e9));
    if (c->bw_host_cap > 0)
        t = NM_MAX(t, (double)total / (c->bw_host_cap * 1e9));
    return t;
}

/* One transfer over every DPU of the set: from/to the common buffer `buf`
 * (serial copies, broadcast) or each DPU's prepared buffer (parallel push,
 * buf == NULL; DPUs without one take no part). */
static dpu_error_t transfer(struct dpu_set_t set, nm_pim_xfer_kind kind, bool to_dpu, const char *sym, uint32_t off,
                            void *buf, size_t len)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (kind != NM_PIM_XFER_PARALLEL && !buf)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    wait_idle(set.sys);
    const nm_pim_program_def *p;
    dpu_error_t e = set_program(set, &p);
    if (e != DPU_OK)
        return e;
    resolved r;
    if ((e = resolve(p, sym, off, len, &r)) != DPU_OK)
        return e;
    uint32_t nr_ranks = nm_pim_set_rank_count(set), first_rank = set.begin / NM_PIM_DPUS_PER_RANK;
    uint64_t *per_rank = calloc(nr_ranks, sizeof(uint64_t));
    if (!per_rank)
        return DPU_ERR_ALLOCATION;
    uint64_t t0 = nm_now_ns(), total = 0;
    uint32_t used = 0, ranks_used = 0;
    for (uint32_t i = set.begin; i < set.begin + set.count && e == DPU_OK; i++) {
        nm_pim_dpu *d = &set.sys->dpus[i];
        void *b = kind == NM_PIM_XFER_PARALLEL ? d->xfer_buf : buf;
        if (!b)
            continue;
        e = move(d, &r, off, b, len, to_dpu);
        per_rank[i / NM_PIM_DPUS_PER_RANK - first_rank] += len;
        total += len;
        used++;
    }
    for (uint32_t k = 0; k < nr_ranks; k++)
        ranks_used += per_rank[k] != 0;
    if (e == DPU_OK) {
        const nm_pim_cost *c = &set.sys->cost;
        double modeled;
        if (kind == NM_PIM_XFER_SERIAL) /* one DPU after another */
            modeled = (double)total / ((to_dpu ? c->bw_serial_to_dpu : c->bw_serial_from_dpu) * 1e9);
        else if (kind == NM_PIM_XFER_PARALLEL)
            modeled = ranks_time(c, per_rank, nr_ranks, to_dpu ? c->bw_rank_to_dpu : c->bw_rank_from_dpu, total);
        else
            modeled = ranks_time(c, per_rank, nr_ranks, c->bw_rank_broadcast, total);
        record_xfer(set.sys, kind, to_dpu, used, ranks_used, total, modeled, t0);
    }
    free(per_rank);
    return e;
}

dpu_error_t dpu_copy_to(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, const void *src,
                        size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, true, symbol_name, symbol_offset, (void *)(uintptr_t)src, length);
}

dpu_error_t dpu_copy_from(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, void *dst,
                          size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, false, symbol_name, symbol_offset, dst, length);
}

dpu_error_t dpu_prepare_xfer(struct dpu_set_t set, void *buffer)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (set.count != 1)
        return DPU_ERR_TRANSFER_ALREADY_SET;
    set.sys->dpus[set.begin].xfer_buf = buffer;
    return DPU_OK;
}

dpu_error_t dpu_push_xfer(struct dpu_set_t set, dpu_xfer_t xfer, const char *symbol_name, uint32_t symbol_offset,
                          size_t length, dpu_xfer_flags_t flags)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    if (xfer != DPU_XFER_TO_DPU && xfer != DPU_XFER_FROM_DPU)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    dpu_error_t e = transfer(set, NM_PIM_XFER_PARALLEL, xfer == DPU_XFER_TO_DPU, symbol_name, symbol_offset, NULL,
                             length);
    if (!(flags & DPU_XFER_NO_RESET))
        for (uint32_t i = set.begin; i < set.begin + set.count; i++)
            set.sys->dpus[i].xfer_buf = NULL;
    return e;
}

dpu_error_t dpu_broadcast_to(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, const void *src,
                             size_t length, dpu_xfer_flags_t flags)
{
    (void)flags; /* DPU_XFER_ASYNC is accepted; transfers complete synchronously */
    return transfer(set, NM_PIM_XFER_BROADCAST, true, symbol_name, symbol_offset, (void *)(uintptr_t)src, length);
}

/* ------------------------------------------------------------------------ */
/* Accounting                                                                 */

static dpu_error_t one_dpu(struct dpu_set_t dpu, nm_pim_dpu **out)
{
    if (!set_ok(dpu) || dpu.count != 1)
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(dpu.sys);
    *out = &dpu.sys->dpus[dpu.begin];
    return DPU_OK;
}

dpu_error_t nm_pim_get_dpu_stats(struct dpu_set_t dpu, nm_pim_dpu_stats *out)
{
    nm_pim_dpu *d;
    if (!out)
        return DPU_ERR_INVALID_ARGUMENT;
    dpu_error_t e = one_dpu(dpu, &d);
    if (e == DPU_OK)
        *out = d->stats;
    return e;
}

dpu_error_t nm_pim_get_tasklet_stats(struct dpu_set_t dpu, uint32_t tasklet, nm_pim_tasklet_stats *out)
{
    nm_pim_dpu *d;
    if (!out)
        return DPU_ERR_INVALID_ARGUMENT;
    dpu_error_t e = one_dpu(dpu, &d);
    if (e != DPU_OK)
        return e;
    if (tasklet >= NM_PIM_MAX_TASKLETS || tasklet >= d->nr_tasklets)
        return DPU_ERR_INVALID_THREAD_ID;
    *out = d->tstats[tasklet];
    return DPU_OK;
}

dpu_error_t nm_pim_get_fault(struct dpu_set_t dpu, nm_pim_fault_info *out)
{
    nm_pim_dpu *d;
    if (!out)
        return DPU_ERR_INVALID_ARGUMENT;
    dpu_error_t e = one_dpu(dpu, &d);
    if (e == DPU_OK)
        *out = d->fault;
    return e;
}

dpu_error_t nm_pim_last_launch(struct dpu_set_t set, nm_pim_launch_stats *out)
{
    dpu_error_t ce = check_out(set, out);
    if (ce != DPU_OK)
        return ce;
    wait_idle(set.sys);
    *out = set.sys->last_launch;
    return DPU_OK;
}

dpu_error_t nm_pim_last_xfer(struct dpu_set_t set, nm_pim_xfer_stats *out)
{
    dpu_error_t ce = check_out(set, out);
    if (ce != DPU_OK)
        return ce;
    *out = set.sys->last_xfer;
    return DPU_OK;
}

dpu_error_t nm_pim_get_totals(struct dpu_set_t set, nm_pim_totals *out)
{
    dpu_error_t ce = check_out(set, out);
    if (ce != DPU_OK)
        return ce;
    wait_idle(set.sys);
    *out = set.sys->totals;
    return DPU_OK;
}

dpu_error_t nm_pim_reset_totals(struct dpu_set_t set)
{
    if (!set_ok(set))
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(set.sys);
    memset(&set.sys->totals, 0, sizeof(set.sys->totals));
    return DPU_OK;
}

uint64_t nm_pim_mram_resident_bytes(struct dpu_set_t set)
{
    if (!set_ok(set))
        return 0;
    wait_idle(set.sys);
    uint64_t sum = 0;
    for (uint32_t i = set.begin; i < set.begin + set.count; i++)
        sum += set.sys->dpus[i].mram_resident;
    return sum;
}

dpu_error_t nm_pim_mram_peek(struct dpu_set_t dpu, uint32_t offset, void *dst, size_t length)
{
    nm_pim_dpu *d;
    if (!dst)
        return DPU_ERR_INVALID_ARGUMENT;
    dpu_error_t e = one_dpu(dpu, &d);
    if (e != DPU_OK)
        return e;
    if ((uint64_t)offset + length > NM_PIM_MRAM_SIZE)
        return DPU_ERR_INVALID_MRAM_ACCESS;
    nm_pim__mram_read_host(d, offset, dst, length);
    return DPU_OK;
}
