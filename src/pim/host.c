/* Host API of the emulated PIM machine (host.h): allocation, program
 * loading, launches on a pool of host threads, symbol transfers and their
 * bandwidth model, accounting. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "nearmem/common/error.h"
#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"

static const char *const g_err_names[DPU_ERR_COUNT] = {
    [DPU_OK] = "DPU_OK: success",
    [DPU_ERR_INTERNAL] = "DPU_ERR_INTERNAL: internal error",
    [DPU_ERR_SYSTEM] = "DPU_ERR_SYSTEM: host system call failed",
    [DPU_ERR_DRIVER] = "DPU_ERR_DRIVER: driver error",
    [DPU_ERR_ALLOCATION] = "DPU_ERR_ALLOCATION: cannot allocate DPUs or host memory",
    [DPU_ERR_INVALID_DPU_SET] = "DPU_ERR_INVALID_DPU_SET: invalid DPU set for this operation",
    [DPU_ERR_INVALID_THREAD_ID] = "DPU_ERR_INVALID_THREAD_ID: tasklet index or count out of range",
    [DPU_ERR_INVALID_NOTIFY_ID] = "DPU_ERR_INVALID_NOTIFY_ID: invalid notify id",
    [DPU_ERR_INVALID_WRAM_ACCESS] = "DPU_ERR_INVALID_WRAM_ACCESS: WRAM transfer not 4-byte granular or not writable",
    [DPU_ERR_INVALID_IRAM_ACCESS] = "DPU_ERR_INVALID_IRAM_ACCESS: invalid IRAM access",
    [DPU_ERR_INVALID_MRAM_ACCESS] = "DPU_ERR_INVALID_MRAM_ACCESS: MRAM transfer not 8-byte granular or out of MRAM",
    [DPU_ERR_INVALID_SYMBOL_ACCESS] = "DPU_ERR_INVALID_SYMBOL_ACCESS: transfer outside the symbol",
    [DPU_ERR_MRAM_BUSY] = "DPU_ERR_MRAM_BUSY: MRAM busy",
    [DPU_ERR_TRANSFER_ALREADY_SET] = "DPU_ERR_TRANSFER_ALREADY_SET: prepare_xfer needs a single-DPU set",
    [DPU_ERR_NO_PROGRAM_LOADED] = "DPU_ERR_NO_PROGRAM_LOADED: no program loaded",
    [DPU_ERR_DIFFERENT_DPU_PROGRAMS] = "DPU_ERR_DIFFERENT_DPU_PROGRAMS: DPUs of the set run different programs",
    [DPU_ERR_CORRUPTED_MEMORY] = "DPU_ERR_CORRUPTED_MEMORY: corrupted memory",
    [DPU_ERR_DPU_DISABLED] = "DPU_ERR_DPU_DISABLED: DPU disabled",
    [DPU_ERR_DPU_ALREADY_RUNNING] = "DPU_ERR_DPU_ALREADY_RUNNING: DPU is running",
    [DPU_ERR_INVALID_MEMORY_TRANSFER] = "DPU_ERR_INVALID_MEMORY_TRANSFER: invalid buffer or length",
    [DPU_ERR_INVALID_LAUNCH_POLICY] = "DPU_ERR_INVALID_LAUNCH_POLICY: invalid launch policy",
    [DPU_ERR_DPU_FAULT] = "DPU_ERR_DPU_FAULT: a DPU stopped on a fault",
    [DPU_ERR_ELF_INVALID_FILE] = "DPU_ERR_ELF_INVALID_FILE: not a DPU program",
    [DPU_ERR_ELF_NO_SUCH_FILE] = "DPU_ERR_ELF_NO_SUCH_FILE: no such DPU program",
    [DPU_ERR_ELF_NO_SUCH_SECTION] = "DPU_ERR_ELF_NO_SUCH_SECTION: no such ELF section",
    [DPU_ERR_TIMEOUT] = "DPU_ERR_TIMEOUT: timeout",
    [DPU_ERR_INVALID_PROFILE] = "DPU_ERR_INVALID_PROFILE: invalid allocation profile",
    [DPU_ERR_UNKNOWN_SYMBOL] = "DPU_ERR_UNKNOWN_SYMBOL: no such symbol in the program",
    [DPU_ERR_LOG_FORMAT] = "DPU_ERR_LOG_FORMAT: logging format error",
    [DPU_ERR_LOG_CONTEXT_MISSING] = "DPU_ERR_LOG_CONTEXT_MISSING: no DPU log",
    [DPU_ERR_LOG_BUFFER_TOO_SMALL] = "DPU_ERR_LOG_BUFFER_TOO_SMALL: the DPU printed more than its log holds",
    [DPU_ERR_VPD_INVALID_FILE] = "DPU_ERR_VPD_INVALID_FILE: invalid VPD file",
    [DPU_ERR_VPD_NO_REPAIR] = "DPU_ERR_VPD_NO_REPAIR: no repair",
    [DPU_ERR_NO_THREAD_PER_RANK] = "DPU_ERR_NO_THREAD_PER_RANK: no thread per rank",
    [DPU_ERR_INVALID_BUFFER_SIZE] = "DPU_ERR_INVALID_BUFFER_SIZE: invalid buffer size",
    [DPU_ERR_NONBLOCKING_SYNC_CALLBACK] = "DPU_ERR_NONBLOCKING_SYNC_CALLBACK: nonblocking callback must be asynchronous",
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

static struct dpu_set_t make_set(nm_pim_system *sys, uint32_t begin, uint32_t count, dpu_set_kind_t kind)
{
    struct dpu_set_t s;
    memset(&s, 0, sizeof(s));
    s.kind = kind;
    s.sys = sys;
    s.begin = begin;
    s.count = count;
    if (kind == DPU_SET_DPU) {
        s.dpu = &sys->dpus[begin];
    } else if (count) {
        uint32_t r0 = begin / NM_PIM_DPUS_PER_RANK;
        s.list.nr_ranks = (begin + count - 1) / NM_PIM_DPUS_PER_RANK - r0 + 1;
        s.list.ranks = sys->rank_ptrs + r0;
    }
    return s;
}

/* Fills nearmem's members of a set that host code built from the SDK's
 * members (whole, consecutive ranks of one allocation, or one DPU). */
static bool set_ok(struct dpu_set_t *s)
{
    if (!s->sys) {
        if (s->kind == DPU_SET_DPU && s->dpu) {
            nm_pim_dpu *d = s->dpu;
            *s = make_set(d->sys, d->index, 1, DPU_SET_DPU);
        } else if (s->kind == DPU_SET_RANKS && s->list.nr_ranks && s->list.ranks && s->list.ranks[0]) {
            struct dpu_rank_t *r0 = s->list.ranks[0];
            uint32_t count = 0;
            for (uint32_t i = 0; i < s->list.nr_ranks; i++) {
                struct dpu_rank_t *r = s->list.ranks[i];
                if (!r || r->sys != r0->sys || r->first != r0->first + count)
                    return false;
                count += r->count;
            }
            *s = make_set(r0->sys, r0->first, count, DPU_SET_RANKS);
        } else {
            return false;
        }
    }
    return s->count > 0 && s->begin + s->count <= s->sys->nr_dpus;
}

uint32_t nm_pim_set_size(struct dpu_set_t set) { return set_ok(&set) ? set.count : 0; }

struct dpu_set_t nm_pim_set_dpu(struct dpu_set_t set, uint32_t i)
{
    set_ok(&set);
    return make_set(set.sys, set.begin + i, 1, DPU_SET_DPU);
}

uint32_t nm_pim_set_rank_count(struct dpu_set_t set)
{
    if (!set_ok(&set))
        return 0;
    uint32_t first = set.begin / NM_PIM_DPUS_PER_RANK, last = (set.begin + set.count - 1) / NM_PIM_DPUS_PER_RANK;
    return last - first + 1;
}

struct dpu_set_t nm_pim_set_rank(struct dpu_set_t set, uint32_t r)
{
    set_ok(&set);
    uint32_t first = set.begin / NM_PIM_DPUS_PER_RANK + r;
    uint32_t lo = NM_MAX(set.begin, first * NM_PIM_DPUS_PER_RANK);
    uint32_t hi = NM_MIN(set.begin + set.count, (first + 1) * NM_PIM_DPUS_PER_RANK);
    return make_set(set.sys, lo, hi > lo ? hi - lo : 0, DPU_SET_RANKS);
}

struct dpu_t *dpu_from_set(struct dpu_set_t set)
{
    return set_ok(&set) && set.count == 1 ? &set.sys->dpus[set.begin] : NULL;
}

struct dpu_set_t dpu_set_from_dpu(struct dpu_t *dpu) { return make_set(dpu->sys, dpu->index, 1, DPU_SET_DPU); }

/* Common checks of the calls that fill an out-parameter for a set. */
static dpu_error_t check_out(struct dpu_set_t *set, const void *out)
{
    if (!out)
        return DPU_ERR_INVALID_ARGUMENT;
    return set_ok(set) ? DPU_OK : DPU_ERR_INVALID_DPU_SET;
}

uint32_t nm_pim_dpu_index(struct dpu_set_t dpu)
{
    return set_ok(&dpu) && dpu.count == 1 ? dpu.begin : UINT32_MAX;
}

/* ------------------------------------------------------------------------ */
/* Pool                                                                       */

/* Modeled kernel time of every launch of the process, for dpu_probe. */
static _Atomic uint64_t g_modeled_ps;

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
    atomic_fetch_add(&g_modeled_ps, (uint64_t)llround(ls->modeled_seconds * 1e12));
    sys->totals.host_kernel_seconds += ls->host_seconds;
    sys->in_flight = false;
    pthread_cond_broadcast(&sys->done_cv);
}

static void xfer_one(nm_pim_system *sys, nm_pim_dpu *d);

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
            if (sys->job_is_xfer) {
                pthread_mutex_unlock(&sys->lock);
                xfer_one(sys, d);
                pthread_mutex_lock(&sys->lock);
                if (--sys->job_remaining == 0) {
                    sys->in_flight = false;
                    pthread_cond_broadcast(&sys->done_cv);
                }
                continue;
            }
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

static dpu_error_t parse_profile(const char *profile, nm_pim_cost *cost, uint32_t *threads, uint32_t *tasklets)
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
        /* Per-system transfer constants (to model another host from its own
         * calibration points; docs/pim-machine.md "Transfer model"). */
        else if (strcmp(kv, "rank_growth") == 0 && v >= 0 && v <= 1)
            cost->bw_rank_growth = v;
        else if (strcmp(kv, "rank_to") == 0 && v > 0)
            cost->bw_rank_to_dpu = v;
        else if (strcmp(kv, "rank_from") == 0 && v > 0)
            cost->bw_rank_from_dpu = v;
        else if (strcmp(kv, "rank_bcast") == 0 && v > 0)
            cost->bw_rank_broadcast = v;
        else if (strcmp(kv, "serial_to") == 0 && v > 0)
            cost->bw_serial_to_dpu = v;
        else if (strcmp(kv, "serial_from") == 0 && v > 0)
            cost->bw_serial_from_dpu = v;
        else if (strcmp(kv, "tasklets") == 0 && v >= 0 && v <= NM_PIM_MAX_TASKLETS && v == (uint32_t)v)
            *tasklets = (uint32_t)v;
        else
            return DPU_ERR_INVALID_PROFILE;
    }
    return DPU_OK;
}

static void destroy_system(nm_pim_system *sys)
{
    for (uint32_t i = 0; sys->dpus && i < sys->nr_dpus; i++) {
        nm_pim_dpu *d = &sys->dpus[i];
        nm_pim__mram_free(d);
        free(d->wram_image);
        free(d->log);
        nm_pim__hw_free(d);
    }
    nm_pim__unload_all(sys);
    free(sys->rank_objs);
    free(sys->rank_ptrs);
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
    uint32_t want_tasklets = 0;
    dpu_error_t e = parse_profile(profile, &cost, &threads, &want_tasklets);
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
    sys->want_tasklets = want_tasklets;
    sys->dpus = calloc(nr_dpus, sizeof(*sys->dpus));
    sys->threads = calloc(threads, sizeof(pthread_t));
    sys->pool_args = calloc(threads, sizeof(*sys->pool_args));
    sys->nr_ranks = (nr_dpus + NM_PIM_DPUS_PER_RANK - 1) / NM_PIM_DPUS_PER_RANK;
    sys->rank_objs = calloc(sys->nr_ranks, sizeof(*sys->rank_objs));
    sys->rank_ptrs = calloc(sys->nr_ranks, sizeof(*sys->rank_ptrs));
    pthread_mutex_init(&sys->lock, NULL);
    pthread_cond_init(&sys->work_cv, NULL);
    pthread_cond_init(&sys->done_cv, NULL);
    if (!sys->dpus || !sys->threads || !sys->pool_args || !sys->rank_objs || !sys->rank_ptrs) {
        destroy_system(sys);
        return DPU_ERR_ALLOCATION;
    }
    for (uint32_t r = 0; r < sys->nr_ranks; r++) {
        sys->rank_objs[r].sys = sys;
        sys->rank_objs[r].first = r * NM_PIM_DPUS_PER_RANK;
        sys->rank_objs[r].count = NM_MIN(NM_PIM_DPUS_PER_RANK, nr_dpus - r * NM_PIM_DPUS_PER_RANK);
        sys->rank_ptrs[r] = &sys->rank_objs[r];
    }
    for (uint32_t i = 0; i < nr_dpus; i++) {
        nm_pim_dpu *d = &sys->dpus[i];
        d->sys = sys;
        d->index = i;
        if (nm_pim__mram_init(d) != 0) {
            destroy_system(sys);
            return DPU_ERR_ALLOCATION;
        }
    }
    /* nr_threads is read by the workers: set it before any starts. */
    sys->nr_threads = threads;
    const char *sched = getenv("NEARMEM_PIM_SCHED");
    sys->sched_reference = sched && strcmp(sched, "reference") == 0;
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
    *dpu_set = make_set(sys, 0, nr_dpus, DPU_SET_RANKS);
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
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    nm_pim_system *sys = set.sys;
    if (set.begin != 0 || set.count != sys->nr_dpus || set.kind != DPU_SET_RANKS)
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(sys);
    /* NEARMEM_PIM_TOTALS=<file>: append this allocation's totals, so a tool
     * can account for a program it runs unchanged (suite pim-prim). */
    const char *tf = getenv("NEARMEM_PIM_TOTALS");
    if (tf && *tf) {
        FILE *f = fopen(tf, "a");
        if (f) {
            const nm_pim_totals *t = &sys->totals;
            fprintf(f,
                    "dpus=%u launches=%llu modeled_kernel_s=%.17g modeled_xfer_s=%.17g xfer_bytes_to=%llu "
                    "xfer_bytes_from=%llu host_kernel_s=%.9g host_xfer_s=%.9g\n",
                    sys->nr_dpus, (unsigned long long)t->launches, t->modeled_kernel_seconds,
                    t->modeled_xfer_seconds, (unsigned long long)t->xfer_bytes_to_dpu,
                    (unsigned long long)t->xfer_bytes_from_dpu, t->host_kernel_seconds, t->host_xfer_seconds);
            fclose(f);
        }
    }
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
    dpu_error_t ce = check_out(&set, nr);
    if (ce != DPU_OK)
        return ce;
    *nr = set.count;
    return DPU_OK;
}

dpu_error_t dpu_get_nr_ranks(struct dpu_set_t set, uint32_t *nr)
{
    dpu_error_t ce = check_out(&set, nr);
    if (ce != DPU_OK)
        return ce;
    *nr = nm_pim_set_rank_count(set);
    return DPU_OK;
}

uint32_t nm_pim_host_threads(struct dpu_set_t set) { return set.sys ? set.sys->nr_threads : 0; }

dpu_error_t nm_pim_get_cost(struct dpu_set_t set, nm_pim_cost *cost)
{
    dpu_error_t ce = check_out(&set, cost);
    if (ce != DPU_OK)
        return ce;
    *cost = set.sys->cost;
    return DPU_OK;
}

/* ------------------------------------------------------------------------ */
/* Loading and launching                                                      */

/* Gives every DPU of the set program p: initial WRAM, initialised MRAM
 * variables, fresh statistics. */
static dpu_error_t install(struct dpu_set_t set, nm_pim_program_def *p)
{
    const nm_pim_loaded *l = p->file;
    if (l) {
        if (l->hdr.nr_tasklets == 0 || l->hdr.nr_tasklets > NM_PIM_MAX_TASKLETS)
            return nm_fail(NM_EINVAL, "%s: built for %u tasklets; the DPU runs 1 to %u", l->name,
                           l->hdr.nr_tasklets, NM_PIM_MAX_TASKLETS),
                   DPU_ERR_INVALID_THREAD_ID;
        if (set.sys->want_tasklets && l->hdr.nr_tasklets != set.sys->want_tasklets)
            return nm_fail(NM_EINVAL, "%s: built with NR_TASKLETS=%u, the allocation asks for %u", l->name,
                           l->hdr.nr_tasklets, set.sys->want_tasklets),
                   DPU_ERR_INVALID_THREAD_ID;
    }
    wait_idle(set.sys);
    for (uint32_t i = set.begin; i < set.begin + set.count; i++) {
        nm_pim_dpu *d = &set.sys->dpus[i];
        uint8_t *img = calloc(1, p->wram_globals_bytes ? p->wram_globals_bytes : 8);
        if (!img)
            return DPU_ERR_ALLOCATION;
        if (l) {
            const nm_pim_instance *in = &l->inst[i % set.sys->nr_threads];
            memcpy(img, in->pristine, p->wram_globals_bytes);
            const nm_dpu_info *info = &in->info;
            for (uint32_t k = 0; k < info->nr_mram_segs; k++) {
                const nm_dpu_mram_seg *sg = &info->mram_segs[k];
                if (nm_pim__mram_fill_host(d, sg->offset, sg->data, sg->size) != 0) {
                    free(img);
                    return DPU_ERR_ALLOCATION;
                }
            }
            d->log_limit = l->hdr.stdout_size;
        } else {
            for (const nm_pim_symbol *s = p->symbols; s; s = s->next)
                if (s->tls_addr && s->initial)
                    memcpy(img + s->offset, s->initial, s->size);
        }
        free(d->wram_image);
        d->wram_image = img;
        d->prog = p;
        d->nr_tasklets = p->default_tasklets & 0x7fffffffu;
        d->state = DPU_IDLE;
        d->xfer_buf = NULL;
        d->log_len = 0;
        d->log_dropped = 0;
        memset(&d->fault, 0, sizeof(d->fault));
        memset(&d->stats, 0, sizeof(d->stats));
        memset(d->tstats, 0, sizeof(d->tstats));
        nm_pim__hw_free(d);
    }
    return DPU_OK;
}

static dpu_error_t load_done(struct dpu_set_t set, nm_pim_program_def *p, struct dpu_program_t **program)
{
    dpu_error_t e = install(set, p);
    if (e == DPU_OK && program)
        *program = (struct dpu_program_t *)p;
    return e;
}

/* From a file (path) or from memory (bytes, named `name` in messages). */
static dpu_error_t load_file_locked(struct dpu_set_t set, const char *path, const char *name, const uint8_t *bytes,
                                    size_t size, struct dpu_program_t **program)
{
    wait_idle(set.sys);
    nm_pim_loaded *l;
    dpu_error_t e = path ? nm_pim__load_path(set.sys, path, &l)
                         : nm_pim__load_image(set.sys, name ? name : "<memory>", bytes, size, &l);
    if (e != DPU_OK)
        return e;
    return load_done(set, &l->def, program);
}

/* Named embedded programs (nm_pim_register_image). */
static pthread_mutex_t g_images_lock = PTHREAD_MUTEX_INITIALIZER;
static struct named_image {
    const char *name;
    struct dpu_incbin_t *image;
    struct named_image *next;
} *g_images;

void nm_pim_register_image(const char *name, struct dpu_incbin_t *image)
{
    struct named_image *n = malloc(sizeof(*n));
    if (!n || !name || !image) {
        free(n);
        return;
    }
    n->name = name;
    n->image = image;
    pthread_mutex_lock(&g_images_lock);
    n->next = g_images;
    g_images = n;
    pthread_mutex_unlock(&g_images_lock);
}

static struct dpu_incbin_t *find_image(const char *name)
{
    pthread_mutex_lock(&g_images_lock);
    struct named_image *n = g_images;
    while (n && strcmp(n->name, name) != 0)
        n = n->next;
    pthread_mutex_unlock(&g_images_lock);
    return n ? n->image : NULL;
}

dpu_error_t dpu_load(struct dpu_set_t set, const char *binary, struct dpu_program_t **program)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (!binary)
        return DPU_ERR_INVALID_ARGUMENT;
    /* Deprecated: a program linked into the binary, by its DPU_PROGRAM name. */
    if (!strchr(binary, '/') && !strchr(binary, ':')) {
        nm_pim_program_def *p = nm_pim__find_program_mut(binary);
        if (p) {
            if (nm_pim__seal_program(p) != 0)
                return DPU_ERR_ALLOCATION;
            if (p->mram_vars_bytes > NM_PIM_MRAM_SIZE)
                return DPU_ERR_INVALID_MRAM_ACCESS; /* the binary's MRAM variables do not fit */
            if (p->nr_mutexes > NM_PIM_MAX_MUTEXES)
                return DPU_ERR_INVALID_WRAM_ACCESS; /* more hardware mutexes than the DPU has */
            return load_done(set, p, program);
        }
        struct dpu_incbin_t *img = find_image(binary);
        if (img)
            return dpu_load_from_incbin(set, img, program);
    }
    /* Deprecated: "path/lib.so:name", a registered program in a shared object. */
    const char *colon = strrchr(binary, ':');
    if (colon && access(binary, F_OK) != 0) {
        char path[4096];
        size_t len = (size_t)(colon - binary);
        if (len == 0 || len >= sizeof(path))
            return DPU_ERR_ELF_NO_SUCH_FILE;
        memcpy(path, binary, len);
        path[len] = '\0';
        /* Kept loaded for the life of the process: kernels' code must stay. */
        if (!dlopen(path, RTLD_NOW | RTLD_LOCAL))
            return DPU_ERR_ELF_NO_SUCH_FILE;
        nm_pim_program_def *p = nm_pim__find_program_mut(colon + 1);
        if (!p)
            return DPU_ERR_ELF_NO_SUCH_FILE;
        if (nm_pim__seal_program(p) != 0)
            return DPU_ERR_ALLOCATION;
        if (p->mram_vars_bytes > NM_PIM_MRAM_SIZE)
            return DPU_ERR_INVALID_MRAM_ACCESS;
        if (p->nr_mutexes > NM_PIM_MAX_MUTEXES)
            return DPU_ERR_INVALID_WRAM_ACCESS;
        return load_done(set, p, program);
    }
    return load_file_locked(set, binary, NULL, NULL, 0, program);
}

dpu_error_t dpu_load_from_memory(struct dpu_set_t set, uint8_t *buffer, size_t buffer_size,
                                 struct dpu_program_t **program)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (!buffer || !buffer_size)
        return DPU_ERR_INVALID_ARGUMENT;
    return load_file_locked(set, NULL, NULL, buffer, buffer_size, program);
}

dpu_error_t dpu_load_from_incbin(struct dpu_set_t set, struct dpu_incbin_t *incbin, struct dpu_program_t **program)
{
    if (!incbin || !incbin->buffer)
        return DPU_ERR_INVALID_ARGUMENT;
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    size_t n = incbin->size ? incbin->size : (incbin->end ? (size_t)(incbin->end - incbin->buffer) : 0);
    if (!n)
        return DPU_ERR_INVALID_ARGUMENT;
    return load_file_locked(set, NULL, incbin->path, incbin->buffer, n, program);
}

dpu_error_t dpu_get_symbol(struct dpu_program_t *program, const char *symbol_name, struct dpu_symbol_t *symbol)
{
    const nm_pim_program_def *p = (const nm_pim_program_def *)program;
    if (!p || !symbol_name || !symbol)
        return DPU_ERR_INVALID_ARGUMENT;
    if (strcmp(symbol_name, DPU_MRAM_HEAP_POINTER_NAME) == 0) {
        symbol->address = NM_PIM_MRAM_BASE + p->mram_vars_bytes;
        symbol->size = NM_PIM_MRAM_SIZE - p->mram_vars_bytes;
        return DPU_OK;
    }
    const nm_pim_symbol *s = nm_pim__find_symbol(p, symbol_name);
    if (!s)
        return DPU_ERR_UNKNOWN_SYMBOL;
    symbol->address = s->kind == NM_PIM_SYM_MRAM     ? NM_PIM_MRAM_BASE + s->offset
                      : s->kind == NM_PIM_SYM_RODATA ? p->wram_globals_bytes + s->offset
                                                     : s->offset;
    symbol->size = s->size;
    return DPU_OK;
}

dpu_error_t nm_pim_set_tasklets(struct dpu_set_t set, uint32_t nr_tasklets)
{
    if (!set_ok(&set))
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
    if (!set_ok(&set))
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
    sys->job_is_xfer = false;
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
    if (!set_ok(&set))
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
    if (!set_ok(&set))
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

typedef enum space { SP_WRAM, SP_MRAM, SP_RODATA } space;
typedef struct resolved {
    space sp;
    uint32_t base; /* WRAM: offset in the image; MRAM: offset in the bank; RODATA: offset in the constants */
    uint32_t size;
} resolved;

/* A transfer's target, from a symbol name or (sym != NULL) a symbol. */
static dpu_error_t resolve(const nm_pim_program_def *p, const char *name, const struct dpu_symbol_t *sym,
                           uint32_t off, size_t len, bool to_dpu, resolved *r)
{
    if (!name && !sym)
        return DPU_ERR_UNKNOWN_SYMBOL;
    if (len == 0)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    if (sym) {
        uint32_t a = sym->address, data = p->wram_globals_bytes;
        if (a >= NM_PIM_MRAM_BASE) {
            r->sp = SP_MRAM;
            r->base = a - NM_PIM_MRAM_BASE;
            if (r->base > NM_PIM_MRAM_SIZE)
                return DPU_ERR_INVALID_MRAM_ACCESS;
        } else if (a < data) {
            r->sp = SP_WRAM;
            r->base = a;
            if ((uint64_t)a + sym->size > data)
                return DPU_ERR_INVALID_SYMBOL_ACCESS;
        } else if (a < data + p->wram_rodata_bytes) {
            r->sp = SP_RODATA;
            r->base = a - data;
            if ((uint64_t)r->base + sym->size > p->wram_rodata_bytes)
                return DPU_ERR_INVALID_SYMBOL_ACCESS;
        } else {
            return DPU_ERR_INVALID_SYMBOL_ACCESS;
        }
        r->size = sym->size;
    } else if (strcmp(name, DPU_MRAM_HEAP_POINTER_NAME) == 0) {
        r->sp = SP_MRAM;
        r->base = p->mram_vars_bytes;
        r->size = NM_PIM_MRAM_SIZE - p->mram_vars_bytes;
    } else {
        const nm_pim_symbol *s = nm_pim__find_symbol(p, name);
        if (!s)
            return DPU_ERR_UNKNOWN_SYMBOL;
        r->sp = s->kind == NM_PIM_SYM_MRAM ? SP_MRAM : s->kind == NM_PIM_SYM_RODATA ? SP_RODATA : SP_WRAM;
        r->base = s->offset;
        r->size = s->size;
    }
    bool mram = r->sp == SP_MRAM;
    if (mram ? (off % 8 || len % 8) : (off % 4 || len % 4))
        return mram ? DPU_ERR_INVALID_MRAM_ACCESS : DPU_ERR_INVALID_WRAM_ACCESS;
    if ((uint64_t)off + len > r->size) {
        if (mram && (uint64_t)r->base + off + len > NM_PIM_MRAM_SIZE)
            return DPU_ERR_INVALID_MRAM_ACCESS;
        return DPU_ERR_INVALID_SYMBOL_ACCESS;
    }
    if (r->sp == SP_RODATA && to_dpu)
        return nm_fail(NM_EINVAL, "constants of a DPU program are read-only for the host"),
               DPU_ERR_INVALID_WRAM_ACCESS;
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
    if (r->sp == SP_MRAM) {
        if (to_dpu)
            return nm_pim__mram_write_host(d, r->base + off, buf, len) == 0 ? DPU_OK : DPU_ERR_ALLOCATION;
        nm_pim__mram_read_host(d, r->base + off, buf, len);
    } else if (r->sp == SP_RODATA) {
        memcpy(buf, (const uint8_t *)d->prog->file->inst[0].info.wram_rodata + r->base + off, len);
    } else if (to_dpu) {
        memcpy(d->wram_image + r->base + off, buf, len);
    } else {
        memcpy(buf, d->wram_image + r->base + off, len);
    }
    return DPU_OK;
}

static void xfer_one(nm_pim_system *sys, nm_pim_dpu *d)
{
    const struct nm_pim_xfer_job *j = &sys->xjob;
    void *b = j->buf ? j->buf : d->xfer_buf;
    if (b)
        (void)move(d, j->target, j->off, b, j->len, j->to_dpu); /* cannot fail: MRAM is mapped */
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

/* Parallel pushes and broadcasts (docs/pim-machine.md, "Transfer model").
 * Within a rank, k DPUs move their bytes at min(k x the one-DPU bandwidth,
 * the rank's bandwidth): one DPU gets what a serial copy gets, a whole rank
 * PrIM's 64-DPU figure. Ranks run in parallel, but the host side bounds
 * their aggregate: n active ranks move at most bw_rank x (1 + growth x
 * (n - 1)) GB/s in all (the a + b*n shape of Friesel et al.'s multi-rank
 * push). An optional absolute cap applies on top. */
static double ranks_time(const nm_pim_cost *c, const uint64_t *per_rank_bytes, const uint32_t *per_rank_dpus,
                         uint32_t nr_ranks, double bw_one_dpu, double bw_rank, uint64_t total)
{
    double t = 0;
    uint32_t active = 0;
    for (uint32_t r = 0; r < nr_ranks; r++) {
        if (!per_rank_bytes[r])
            continue;
        active++;
        double bw = NM_MIN((double)per_rank_dpus[r] * bw_one_dpu, bw_rank);
        t = NM_MAX(t, (double)per_rank_bytes[r] / (bw * 1e9));
    }
    if (active > 1)
        t = NM_MAX(t, (double)total / (bw_rank * (1.0 + c->bw_rank_growth * (active - 1)) * 1e9));
    if (c->bw_host_cap > 0)
        t = NM_MAX(t, (double)total / (c->bw_host_cap * 1e9));
    return t;
}

/* One transfer over every DPU of the set: from/to the common buffer `buf`
 * (serial copies, broadcast) or each DPU's prepared buffer (parallel push,
 * buf == NULL; DPUs without one take no part). */
static dpu_error_t transfer(struct dpu_set_t set, nm_pim_xfer_kind kind, bool to_dpu, const char *sym,
                            const struct dpu_symbol_t *symbol, uint32_t off, void *buf, size_t len)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (kind != NM_PIM_XFER_PARALLEL && !buf)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    wait_idle(set.sys);
    const nm_pim_program_def *p;
    dpu_error_t e = set_program(set, &p);
    if (e != DPU_OK)
        return e;
    resolved r;
    if ((e = resolve(p, sym, symbol, off, len, to_dpu, &r)) != DPU_OK)
        return e;
    uint32_t nr_ranks = nm_pim_set_rank_count(set), first_rank = set.begin / NM_PIM_DPUS_PER_RANK;
    uint64_t *per_rank = calloc(nr_ranks, sizeof(uint64_t));
    uint32_t *per_rank_dpus = calloc(nr_ranks, sizeof(uint32_t));
    if (!per_rank || !per_rank_dpus) {
        free(per_rank);
        free(per_rank_dpus);
        return DPU_ERR_ALLOCATION;
    }
    uint64_t t0 = nm_now_ns(), total = 0;
    uint32_t used = 0, ranks_used = 0;
    for (uint32_t i = set.begin; i < set.begin + set.count; i++) {
        nm_pim_dpu *d = &set.sys->dpus[i];
        void *b = kind == NM_PIM_XFER_PARALLEL ? d->xfer_buf : buf;
        if (!b)
            continue;
        per_rank[i / NM_PIM_DPUS_PER_RANK - first_rank] += len;
        per_rank_dpus[i / NM_PIM_DPUS_PER_RANK - first_rank]++;
        total += len;
        used++;
    }
    nm_pim_system *sys = set.sys;
    if (used > 1 && sys->nr_threads > 1 && total >= (256u << 10)) {
        /* Large: the pool copies, each thread its DPUs (their MRAM pages are
         * committed by the thread that also runs them). */
        pthread_mutex_lock(&sys->lock);
        sys->xjob.target = &r;
        sys->xjob.off = off;
        sys->xjob.len = len;
        sys->xjob.to_dpu = to_dpu;
        sys->xjob.buf = kind == NM_PIM_XFER_PARALLEL ? NULL : buf;
        sys->job_is_xfer = true;
        sys->in_flight = true;
        sys->job_begin = set.begin;
        sys->job_count = set.count;
        sys->job_remaining = set.count;
        sys->job_gen++;
        pthread_cond_broadcast(&sys->work_cv);
        pthread_mutex_unlock(&sys->lock);
        wait_idle(sys);
    } else {
        for (uint32_t i = set.begin; i < set.begin + set.count && e == DPU_OK; i++) {
            nm_pim_dpu *d = &sys->dpus[i];
            void *b = kind == NM_PIM_XFER_PARALLEL ? d->xfer_buf : buf;
            if (b)
                e = move(d, &r, off, b, len, to_dpu);
        }
    }
    for (uint32_t k = 0; k < nr_ranks; k++)
        ranks_used += per_rank[k] != 0;
    if (e == DPU_OK) {
        const nm_pim_cost *c = &set.sys->cost;
        double modeled;
        if (kind == NM_PIM_XFER_SERIAL) /* one DPU after another */
            modeled = (double)total / ((to_dpu ? c->bw_serial_to_dpu : c->bw_serial_from_dpu) * 1e9);
        else if (kind == NM_PIM_XFER_PARALLEL)
            modeled = ranks_time(c, per_rank, per_rank_dpus, nr_ranks,
                                 to_dpu ? c->bw_serial_to_dpu : c->bw_serial_from_dpu,
                                 to_dpu ? c->bw_rank_to_dpu : c->bw_rank_from_dpu, total);
        else
            modeled = ranks_time(c, per_rank, per_rank_dpus, nr_ranks, c->bw_serial_to_dpu, c->bw_rank_broadcast,
                                 total);
        record_xfer(set.sys, kind, to_dpu, used, ranks_used, total, modeled, t0);
    }
    free(per_rank);
    free(per_rank_dpus);
    return e;
}

dpu_error_t dpu_copy_to(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, const void *src,
                        size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, true, symbol_name, NULL, symbol_offset, (void *)(uintptr_t)src, length);
}

dpu_error_t dpu_copy_from(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, void *dst,
                          size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, false, symbol_name, NULL, symbol_offset, dst, length);
}

dpu_error_t dpu_prepare_xfer(struct dpu_set_t set, void *buffer)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (set.count != 1)
        return DPU_ERR_TRANSFER_ALREADY_SET;
    set.sys->dpus[set.begin].xfer_buf = buffer;
    return DPU_OK;
}

dpu_error_t dpu_push_xfer(struct dpu_set_t set, dpu_xfer_t xfer, const char *symbol_name, uint32_t symbol_offset,
                          size_t length, dpu_xfer_flags_t flags)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (xfer != DPU_XFER_TO_DPU && xfer != DPU_XFER_FROM_DPU)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    dpu_error_t e = transfer(set, NM_PIM_XFER_PARALLEL, xfer == DPU_XFER_TO_DPU, symbol_name, NULL, symbol_offset,
                             NULL, length);
    if (!(flags & DPU_XFER_NO_RESET))
        for (uint32_t i = set.begin; i < set.begin + set.count; i++)
            set.sys->dpus[i].xfer_buf = NULL;
    return e;
}

dpu_error_t dpu_broadcast_to(struct dpu_set_t set, const char *symbol_name, uint32_t symbol_offset, const void *src,
                             size_t length, dpu_xfer_flags_t flags)
{
    (void)flags; /* DPU_XFER_ASYNC is accepted; transfers complete synchronously */
    return transfer(set, NM_PIM_XFER_BROADCAST, true, symbol_name, NULL, symbol_offset, (void *)(uintptr_t)src,
                    length);
}

dpu_error_t dpu_copy_to_symbol(struct dpu_set_t set, struct dpu_symbol_t symbol, uint32_t symbol_offset,
                               const void *src, size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, true, NULL, &symbol, symbol_offset, (void *)(uintptr_t)src, length);
}

dpu_error_t dpu_copy_from_symbol(struct dpu_set_t set, struct dpu_symbol_t symbol, uint32_t symbol_offset, void *dst,
                                 size_t length)
{
    return transfer(set, NM_PIM_XFER_SERIAL, false, NULL, &symbol, symbol_offset, dst, length);
}

dpu_error_t dpu_push_xfer_symbol(struct dpu_set_t set, dpu_xfer_t xfer, struct dpu_symbol_t symbol,
                                 uint32_t symbol_offset, size_t length, dpu_xfer_flags_t flags)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (xfer != DPU_XFER_TO_DPU && xfer != DPU_XFER_FROM_DPU)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    dpu_error_t e =
        transfer(set, NM_PIM_XFER_PARALLEL, xfer == DPU_XFER_TO_DPU, NULL, &symbol, symbol_offset, NULL, length);
    if (!(flags & DPU_XFER_NO_RESET))
        for (uint32_t i = set.begin; i < set.begin + set.count; i++)
            set.sys->dpus[i].xfer_buf = NULL;
    return e;
}

dpu_error_t dpu_broadcast_to_symbol(struct dpu_set_t set, struct dpu_symbol_t symbol, uint32_t symbol_offset,
                                    const void *src, size_t length, dpu_xfer_flags_t flags)
{
    (void)flags;
    return transfer(set, NM_PIM_XFER_BROADCAST, true, NULL, &symbol, symbol_offset, (void *)(uintptr_t)src, length);
}

/* Raw MRAM of one DPU (dpu_copy_to_mram / dpu_copy_from_mram). */
static dpu_error_t raw_mram(struct dpu_t *d, uint32_t off, void *buf, uint32_t n, uint8_t mram_number, bool to_dpu)
{
    if (!d || !d->sys)
        return DPU_ERR_INVALID_DPU_SET;
    if (mram_number != 0)
        return DPU_ERR_INVALID_MRAM_ACCESS; /* one MRAM bank per DPU */
    if (n == 0)
        return DPU_OK; /* as the SDK */
    if (!buf)
        return DPU_ERR_INVALID_MEMORY_TRANSFER;
    if ((uint64_t)off + n > NM_PIM_MRAM_SIZE)
        return DPU_ERR_INVALID_MRAM_ACCESS;
    nm_pim_system *sys = d->sys;
    wait_idle(sys);
    uint64_t t0 = nm_now_ns();
    if (to_dpu) {
        if (nm_pim__mram_write_host(d, off, buf, n) != 0)
            return DPU_ERR_ALLOCATION;
    } else {
        nm_pim__mram_read_host(d, off, buf, n);
    }
    const nm_pim_cost *c = &sys->cost;
    record_xfer(sys, NM_PIM_XFER_SERIAL, to_dpu, 1, 1, n,
                (double)n / ((to_dpu ? c->bw_serial_to_dpu : c->bw_serial_from_dpu) * 1e9), t0);
    return DPU_OK;
}

dpu_error_t nm_pim_copy_to_mram(struct dpu_t *dpu, uint32_t mram_byte_offset, const uint8_t *source,
                                uint32_t nb_of_bytes, uint8_t mram_number)
{
    return raw_mram(dpu, mram_byte_offset, (void *)(uintptr_t)source, nb_of_bytes, mram_number, true);
}

dpu_error_t nm_pim_copy_from_mram(struct dpu_t *dpu, uint8_t *destination, uint32_t mram_byte_offset,
                                  uint32_t nb_of_bytes, uint8_t mram_number)
{
    return raw_mram(dpu, mram_byte_offset, destination, nb_of_bytes, mram_number, false);
}

dpu_error_t dpu_callback(struct dpu_set_t set, dpu_error_t (*callback)(struct dpu_set_t, uint32_t, void *), void *args,
                         dpu_callback_flags_t flags)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    if (!callback)
        return DPU_ERR_INVALID_ARGUMENT;
    if ((flags & DPU_CALLBACK_NONBLOCKING) && !(flags & DPU_CALLBACK_ASYNC))
        return DPU_ERR_NONBLOCKING_SYNC_CALLBACK;
    wait_idle(set.sys);
    const dpu_callback_flags_t single = DPU_CALLBACK_ASYNC | DPU_CALLBACK_NONBLOCKING | DPU_CALLBACK_SINGLE_CALL;
    if ((flags & single) == single)
        return callback(set, 0, args);
    uint32_t n = nm_pim_set_rank_count(set);
    for (uint32_t r = 0; r < n; r++) {
        dpu_error_t e = callback(nm_pim_set_rank(set, r), r, args);
        if (e != DPU_OK)
            return e;
    }
    return DPU_OK;
}

dpu_error_t dpu_log_read(struct dpu_set_t set, FILE *stream)
{
    if (!set_ok(&set) || set.count != 1)
        return DPU_ERR_INVALID_DPU_SET;
    if (!stream)
        return DPU_ERR_INVALID_ARGUMENT;
    wait_idle(set.sys);
    nm_pim_dpu *d = &set.sys->dpus[set.begin];
    if (!d->prog)
        return DPU_ERR_NO_PROGRAM_LOADED;
    if (!d->prog->file)
        return DPU_ERR_LOG_CONTEXT_MISSING; /* registered programs have no printf */
    if (d->log_len && fwrite(d->log, 1, d->log_len, stream) != d->log_len)
        return DPU_ERR_SYSTEM;
    if (d->log_dropped) {
        fprintf(stream, "\n[nearmem: the DPU printed %llu more bytes than its %u-byte log holds]\n",
                (unsigned long long)d->log_dropped, d->log_limit);
        return DPU_ERR_LOG_BUFFER_TOO_SMALL;
    }
    return DPU_OK;
}

const nm_pim_program_def *nm_pim_loaded_program(struct dpu_set_t set)
{
    const nm_pim_program_def *p;
    if (!set_ok(&set))
        return NULL;
    wait_idle(set.sys);
    return set_program(set, &p) == DPU_OK ? p : NULL;
}

dpu_error_t nm_pim_get_nr_tasklets(struct dpu_set_t set, uint32_t *nr_tasklets)
{
    dpu_error_t ce = check_out(&set, nr_tasklets);
    if (ce != DPU_OK)
        return ce;
    wait_idle(set.sys);
    const nm_pim_dpu *d = &set.sys->dpus[set.begin];
    if (!d->prog)
        return DPU_ERR_NO_PROGRAM_LOADED;
    *nr_tasklets = d->nr_tasklets;
    return DPU_OK;
}

/* ------------------------------------------------------------------------ */
/* Accounting                                                                 */

static dpu_error_t one_dpu(struct dpu_set_t dpu, nm_pim_dpu **out)
{
    if (!set_ok(&dpu) || dpu.count != 1)
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
    dpu_error_t ce = check_out(&set, out);
    if (ce != DPU_OK)
        return ce;
    wait_idle(set.sys);
    *out = set.sys->last_launch;
    return DPU_OK;
}

dpu_error_t nm_pim_last_xfer(struct dpu_set_t set, nm_pim_xfer_stats *out)
{
    dpu_error_t ce = check_out(&set, out);
    if (ce != DPU_OK)
        return ce;
    *out = set.sys->last_xfer;
    return DPU_OK;
}

dpu_error_t nm_pim_get_totals(struct dpu_set_t set, nm_pim_totals *out)
{
    dpu_error_t ce = check_out(&set, out);
    if (ce != DPU_OK)
        return ce;
    wait_idle(set.sys);
    *out = set.sys->totals;
    return DPU_OK;
}

dpu_error_t nm_pim_reset_totals(struct dpu_set_t set)
{
    if (!set_ok(&set))
        return DPU_ERR_INVALID_DPU_SET;
    wait_idle(set.sys);
    memset(&set.sys->totals, 0, sizeof(set.sys->totals));
    return DPU_OK;
}

uint64_t nm_pim_mram_resident_bytes(struct dpu_set_t set)
{
    if (!set_ok(&set))
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

/* ------------------------------------------------------------------------ */
/* Probes                                                                     */

dpu_error_t dpu_probe_init(const char *name, struct dpu_probe_t *probe)
{
    if (!probe)
        return DPU_ERR_INVALID_ARGUMENT;
    memset(probe, 0, sizeof(*probe));
    snprintf(probe->name, sizeof(probe->name), "%s", name ? name : "");
    return DPU_OK;
}

dpu_error_t dpu_probe_deinit(struct dpu_probe_t *probe) { return probe ? DPU_OK : DPU_ERR_INVALID_ARGUMENT; }

dpu_error_t dpu_probe_start(struct dpu_probe_t *probe)
{
    if (!probe)
        return DPU_ERR_INVALID_ARGUMENT;
    probe->running = true;
    probe->start_ps = atomic_load(&g_modeled_ps);
    return DPU_OK;
}

dpu_error_t dpu_probe_stop(struct dpu_probe_t *probe)
{
    if (!probe || !probe->running)
        return DPU_ERR_INVALID_ARGUMENT;
    double s = (double)(atomic_load(&g_modeled_ps) - probe->start_ps) * 1e-12;
    probe->running = false;
    probe->min_s = probe->count ? NM_MIN(probe->min_s, s) : s;
    probe->max_s = probe->count ? NM_MAX(probe->max_s, s) : s;
    probe->sum_s += s;
    probe->count++;
    return DPU_OK;
}

dpu_error_t dpu_probe_get(struct dpu_probe_t *probe, dpu_probe_option_t option, dpu_probe_stats_t stat, double *value)
{
    if (!probe || !value)
        return DPU_ERR_INVALID_ARGUMENT;
    if (option == DPU_ENERGY) {
        nm_fail(NM_ENOTSUP, "dpu_probe_get: DPU energy is not modeled by nearmem's PIM machine");
        return DPU_ERR_SYSTEM;
    }
    if (option != DPU_TIME)
        return DPU_ERR_INVALID_ARGUMENT;
    switch (stat) {
    case DPU_AVERAGE: *value = probe->count ? probe->sum_s / (double)probe->count : 0; break;
    case DPU_ACCUMULATE: *value = probe->sum_s; break;
    case DPU_MIN: *value = probe->min_s; break;
    case DPU_MAX: *value = probe->max_s; break;
    default: return DPU_ERR_INVALID_ARGUMENT;
    }
    return DPU_OK;
}
