/* nearmem-pmalloc-apprun: runs one application measurement (pm_apps.h) in this
 * process and prints its result line; suite pmalloc-apps starts one per run.
 *
 * Counting flushed lines the same way for every allocator: this executable
 * defines libpmem's exported persistence functions, so every call to them (from
 * PMAlloc, which persists through pmem_flush/pmem_drain, and from libpmemobj,
 * which imports pmem_flush, pmem_drain, pmem_persist, pmem_memcpy/memmove/memset
 * and pmem_deep_flush and calls them through its GOT) lands here first: the
 * lines of each range are counted per thread, then the real libpmem function
 * runs. Flushed lines: the cache lines spanned by each pmem_flush, pmem_persist
 * or pmem_deep_flush range. Streamed lines: the destination lines of
 * pmem_memcpy/memmove/memset (unless PMEM_F_MEM_NOFLUSH); libpmemobj copies its
 * log entries this way with PMEM_F_MEM_WC, i.e. non-temporal stores, which
 * write lines to memory without a flush instruction (so suite pmalloc-fences,
 * which counts flush instructions, does not see them). Fences: pmem_drain and
 * pmem_persist calls (libpmem's memcpy orders its streamed stores itself; the
 * fence counts of pmalloc-fences match this definition: PMDK 4.0 per
 * threadtest operation both ways). Kept out of nearmem-bench so no other
 * suite is affected.
 * Usage: nearmem-pmalloc-apprun app=NAME kind=0..3 threads=N n=N ops=N iters=N seed=N
 *        [pool=BYTES] [prefault=0|1] [eadr=0|1] dir=PATH
 * (eadr=1: PMAlloc without flushes; run PMDK with PMEM_NO_FLUSH=1 in the environment for the same) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pm_apps.h"

static __thread uint64_t c_lines, c_nt, c_fences;

void pa_count_read(uint64_t *lines, uint64_t *nt, uint64_t *fences)
{
    *lines = c_lines;
    *nt = c_nt;
    *fences = c_fences;
}

static inline uint64_t nlines(const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    return len ? ((a + len - 1) >> 6) - (a >> 6) + 1 : 0;
}

static inline void count(const void *addr, size_t len) { c_lines += nlines(addr, len); }

typedef void (*fn_range)(const void *, size_t);
typedef void (*fn_void)(void);
typedef int (*fn_irange)(const void *, size_t);
typedef void *(*fn_mem)(void *, const void *, size_t, unsigned);
typedef void *(*fn_set)(void *, int, size_t, unsigned);

static struct {
    fn_range flush, persist, deep_flush;
    fn_void drain;
    fn_irange msync;
    fn_mem memmove_, memcpy_;
    fn_set memset_;
} real;

static void *next_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "apprun: %s not found in libpmem\n", name);
        _exit(4);
    }
    return p;
}

__attribute__((constructor)) static void resolve(void)
{
    real.flush = (fn_range)next_sym("pmem_flush");
    real.persist = (fn_range)next_sym("pmem_persist");
    real.deep_flush = (fn_range)next_sym("pmem_deep_flush");
    real.drain = (fn_void)next_sym("pmem_drain");
    real.msync = (fn_irange)next_sym("pmem_msync");
    real.memmove_ = (fn_mem)next_sym("pmem_memmove");
    real.memcpy_ = (fn_mem)next_sym("pmem_memcpy");
    real.memset_ = (fn_set)next_sym("pmem_memset");
}

void pmem_flush(const void *addr, size_t len)
{
    count(addr, len);
    real.flush(addr, len);
}

void pmem_deep_flush(const void *addr, size_t len)
{
    count(addr, len);
    real.deep_flush(addr, len);
}

void pmem_drain(void)
{
    c_fences++;
    real.drain();
}

void pmem_persist(const void *addr, size_t len)
{
    count(addr, len);
    c_fences++;
    real.persist(addr, len);
}

int pmem_msync(const void *addr, size_t len)
{
    count(addr, len);
    c_fences++;
    return real.msync(addr, len);
}

static void count_mem(void *dst, size_t len, unsigned flags)
{
    if (!(flags & PMEM_F_MEM_NOFLUSH)) c_nt += nlines(dst, len);
}

void *pmem_memmove(void *dst, const void *src, size_t len, unsigned flags)
{
    count_mem(dst, len, flags);
    return real.memmove_(dst, src, len, flags);
}

void *pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
    count_mem(dst, len, flags);
    return real.memcpy_(dst, src, len, flags);
}

void *pmem_memset(void *dst, int c, size_t len, unsigned flags)
{
    count_mem(dst, len, flags);
    return real.memset_(dst, c, len, flags);
}

int main(int argc, char **argv)
{
    pa_run_opts o;
    memset(&o, 0, sizeof o);
    o.cfg.threads = 1;
    const char *dir = NULL, *app = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!eq) goto usage;
        size_t kl = (size_t)(eq - a);
        const char *v = eq + 1;
        unsigned long long u = strtoull(v, NULL, 10);
#define KEY(k) (kl == sizeof(k) - 1 && strncmp(a, k, kl) == 0)
        if (KEY("app")) app = v;
        else if (KEY("kind")) o.kind = (pa_kind)u;
        else if (KEY("threads")) o.cfg.threads = (unsigned)u;
        else if (KEY("n")) o.cfg.n = u;
        else if (KEY("ops")) o.cfg.ops = u;
        else if (KEY("iters")) o.cfg.iters = u;
        else if (KEY("seed")) o.cfg.seed = u;
        else if (KEY("pool")) o.pool = (size_t)u;
        else if (KEY("prefault")) o.prefault = u != 0;
        else if (KEY("eadr")) o.eadr = u != 0;
        else if (KEY("dir")) dir = v;
        else goto usage;
#undef KEY
    }
    if (!app || !dir || o.kind >= PA_NKINDS || !(o.app = pa_app_find(app))) goto usage;
    o.dir = dir;
    pa_force_pmem();
    pa_result r;
    pa_run_inproc(&o, &r);
    pa_result_print(&r);
    _exit(0);
usage:
    fprintf(stderr, "usage: %s app=NAME kind=0..3 threads=N n=N ops=N iters=N seed=N [pool=BYTES] [prefault=0|1] dir=PATH\n",
            argv[0]);
    return 2;
}
