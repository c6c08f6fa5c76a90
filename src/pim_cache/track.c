/* Write tracking of registered source buffers (beyond the paper; issue 17 item 3).
 *
 * Applications copy the same buffers again and again (training epochs, iterative solvers).
 * After a copy the whole pages of a registered buffer are write-protected; the first write
 * to a page afterwards is noted, and the next copy fingerprints only what was written: the
 * blocks of unwritten pages keep the BRB addresses they had, without being read.
 *
 * Two backends (docs/pim-cache.md, "Write tracking"):
 *  - uffd (Linux >= 6.7): userfaultfd write-protection in asynchronous mode
 *    (UFFD_FEATURE_WP_ASYNC). A write to a protected page is resolved by the kernel itself
 *    (about 1 us here, no signal, no handler thread; system calls writing into the buffer
 *    work), and one PAGEMAP_SCAN ioctl per copy returns the pages written since the last
 *    one and protects them again, atomically per page. Page granular.
 *  - mprotect (any kernel): the pages are made read-only; the first write to a granule (64
 *    KiB by default) raises SIGSEGV and our handler marks it written and opens it (4-7 us
 *    per fault here, and each open granule splits a mapping). A system call writing into a
 *    protected page fails with EFAULT: callers declare such writes (nm_pimc_reg_touch).
 * Soft-dirty bits were not used: they can only be cleared for the whole process (every page
 * of it faults again), and other users (CRIU) would clear ours.
 *
 * Faults cost the application time: tracking pays only where the faults of an interval cost
 * less than what the next copy saves. After each copy's scan the cost of the interval's
 * faults (counted, times the cost of one fault measured when the backend was first used) is
 * compared with that saving; where tracking loses, the buffer is unprotected and only a
 * sample of it (one 64 KiB run in 64) stays protected, to measure the write rate until
 * tracking pays again.
 *
 * Whether the buffer is still mapped is checked against /proc/self/maps at every copy: an
 * unmapped buffer is an error (NM_ESTATE); shared or file-backed pieces count as written
 * (another process may change them), and so do pieces remapped since (uffd: the scan finds
 * pages without write protection; mprotect: writable mappings over tracked pages), so a
 * buffer freed and allocated again at the same address is read again, never served stale. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nearmem/common/error.h"
#include "nearmem/common/timer.h"
#include "internal.h"

#if defined(__linux__) && defined(SYS_userfaultfd)
#include <linux/userfaultfd.h>
#define HAVE_UFFD 1
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1u << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1u << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
/* PAGEMAP_SCAN (Linux 6.7, include/uapi/linux/fs.h); Debian 12's headers predate it. */
struct nm_page_region {
    uint64_t start, end, categories;
};
struct nm_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
        category_anyof_mask, return_mask;
};
#define NM_PAGEMAP_SCAN _IOWR('f', 16, struct nm_pm_scan_arg)
#define NM_PAGE_IS_WRITTEN (1u << 1)
#define NM_PAGE_IS_HUGE (1u << 6)
#define NM_PM_SCAN_WP_MATCHING (1u << 0)
#define NM_PM_SCAN_CHECK_WPASYNC (1u << 1)
#endif

#define TRK_MAX 256
#define PROBE_RUN (64u << 10) /* the probe sample: one run of this many bytes ... */
#define PROBE_STRIDE 64u      /* ... in every PROBE_STRIDE runs ... */
#define PROBE_MAX_RUNS 8u     /* ... and no more runs than this (longer runs instead) */
#define PAY_MARGIN 0.9        /* tracking must save its faults with this margin ... */
#define REARM_MARGIN 0.5      /* ... and twice that to come back (a wrong guess costs an interval of faults) */

enum { BE_UFFD = 1, BE_MPROT = 2 };

/* ------------------------------------------------------------------ bitmaps */

static inline bool bget(const uint64_t *m, size_t i) { return m[i / 64] >> (i % 64) & 1; }
static inline void bset(uint64_t *m, size_t i) { m[i / 64] |= (uint64_t)1 << (i % 64); }

static void bset_range(uint64_t *m, size_t a, size_t b)
{
    while (a < b && a % 64) bset(m, a++);
    for (; a + 64 <= b; a += 64) m[a / 64] = ~(uint64_t)0;
    while (a < b) bset(m, a++);
}

/* First set bit in [a, b), or b. */
static size_t bnext(const uint64_t *m, size_t a, size_t b)
{
    while (a < b) {
        uint64_t w = m[a / 64] >> (a % 64);
        if (w) {
            size_t i = a + (size_t)__builtin_ctzll(w);
            return i < b ? i : b;
        }
        a = (a / 64 + 1) * 64;
    }
    return b;
}

static size_t bcount(const uint64_t *m, size_t a, size_t b)
{
    size_t n = 0;
    while (a < b && a % 64) n += bget(m, a++);
    for (; a + 64 <= b; a += 64) n += (size_t)__builtin_popcountll(m[a / 64]);
    while (a < b) n += bget(m, a++);
    return n;
}

/* ------------------------------------------------------------------ mprotect backend */

typedef struct trk_ent {
    _Atomic int state; /* 0 free, 1 active, 2 being removed */
    uintptr_t lo, hi;
    size_t granule;
    _Atomic uint64_t *bits;
    _Atomic int all_dirty;
    _Atomic uint64_t faults;
    int kind; /* BE_UFFD entries only reserve the range (overlap checks); the handler skips them */
} trk_ent;

static trk_ent g_trk[TRK_MAX];
static _Atomic int g_in_handler;
static _Atomic uint64_t g_faults; /* every backend, every cache: statistics */
static struct sigaction g_old;
static int g_install_err;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static double g_mprot_fault_ns; /* measured at first use */

static void chain(int sig, siginfo_t *si, void *uc)
{
    if (g_old.sa_flags & SA_SIGINFO) {
        if (g_old.sa_sigaction) g_old.sa_sigaction(sig, si, uc);
        return;
    }
    if (g_old.sa_handler == SIG_DFL || g_old.sa_handler == SIG_IGN) {
        /* Restore the default action; returning re-executes the access, which then takes it. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        return;
    }
    g_old.sa_handler(sig);
}

static _Thread_local int t_chaining;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (t_chaining) {
        /* Back here through the handler we chained to (it chains to us in turn): stop the
         * loop with the default action. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        return;
    }
    atomic_fetch_add(&g_in_handler, 1);
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code == SEGV_ACCERR)
        for (int i = 0; i < TRK_MAX; i++) {
            trk_ent *t = &g_trk[i];
            if (atomic_load(&t->state) != 1 || t->kind != BE_MPROT || a < t->lo || a >= t->hi) continue;
            size_t g = (a - t->lo) / t->granule;
            uintptr_t s = t->lo + g * t->granule;
            size_t n = NM_MIN(t->granule, t->hi - s);
            /* Writable first, then marked: a copy that re-protects between the two still
             * finds the mark (see track_begin_copy for the order on its side). */
            if (mprotect((void *)s, n, PROT_READ | PROT_WRITE) != 0) {
                /* Out of mappings (each unprotected granule may split one): give up
                 * tracking this buffer until its next copy. */
                mprotect((void *)t->lo, t->hi - t->lo, PROT_READ | PROT_WRITE);
                atomic_store(&t->all_dirty, 1);
            }
            atomic_fetch_or(&t->bits[g / 64], (uint64_t)1 << (g % 64));
            atomic_fetch_add_explicit(&t->faults, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&g_faults, 1, memory_order_relaxed);
            atomic_fetch_sub(&g_in_handler, 1);
            errno = saved;
            return;
        }
    atomic_fetch_sub(&g_in_handler, 1);
    errno = saved;
    t_chaining = 1;
    chain(sig, si, uc);
    t_chaining = 0;
}

/* Installed at the first mprotect registration, and again at a later one if someone
 * replaced it in between (it then chains to them). Under g_mu. */
static void install(void)
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_segv) {
        g_install_err = 0;
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    g_install_err = sigaction(SIGSEGV, &sa, &g_old) ? errno : 0;
}

/* A free handler-table entry for [lo, hi) (under g_mu); -1 when full or out of memory. */
static int trk_alloc(uintptr_t lo, uintptr_t hi, size_t granule, uint32_t ngran, int kind)
{
    int id = -1;
    for (int i = 0; i < TRK_MAX && id < 0; i++)
        if (atomic_load(&g_trk[i].state) == 0) id = i;
    if (id < 0) return -1;
    _Atomic uint64_t *bits = calloc((ngran + 63) / 64 + 1, sizeof *bits);
    if (!bits) return -2;
    trk_ent *t = &g_trk[id];
    t->lo = lo;
    t->hi = hi;
    t->granule = granule;
    t->bits = bits;
    t->kind = kind;
    atomic_store(&t->all_dirty, 0);
    atomic_store(&t->faults, 0);
    atomic_store(&t->state, 1);
    return id;
}

static void trk_free(int id)
{
    trk_ent *t = &g_trk[id];
    atomic_store(&t->state, 2);
    while (atomic_load(&g_in_handler)) sched_yield();
    free((void *)t->bits);
    t->bits = NULL;
    atomic_store(&t->state, 0);
}

/* Cost of one fault, measured on this host (thread CPU time, best of three): a 4 MiB scratch
 * mapping protected and every 4th page written (page tables about as cold as a real
 * buffer's). Under g_mu, handler installed. */
#define CAL_PAGES 1024u
static void mprot_calibrate(size_t pg)
{
    size_t len = CAL_PAGES * pg;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    memset(p, 1, len);
    int id = trk_alloc((uintptr_t)p, (uintptr_t)p + len, pg, CAL_PAGES, BE_MPROT);
    if (id >= 0) {
        uint64_t best = UINT64_MAX;
        for (int rep = 0; rep < 3; rep++) {
            if (mprotect(p, len, PROT_READ)) break;
            uint64_t c0 = nm_thread_cpu_ns();
            for (size_t i = 0; i < CAL_PAGES; i += 4) ((volatile uint8_t *)p)[i * pg] = (uint8_t)rep;
            best = NM_MIN(best, nm_thread_cpu_ns() - c0);
            mprotect(p, len, PROT_READ | PROT_WRITE);
        }
        if (best != UINT64_MAX) g_mprot_fault_ns = (double)best / (CAL_PAGES / 4);
        atomic_fetch_sub_explicit(&g_faults, atomic_load(&g_trk[id].faults), memory_order_relaxed);
        trk_free(id);
    }
    munmap(p, len);
    if (g_mprot_fault_ns <= 0) g_mprot_fault_ns = 5000.0; /* could not measure: a typical VM figure */
}

uint64_t track_faults_total(void) { return atomic_load_explicit(&g_faults, memory_order_relaxed); }

/* ------------------------------------------------------------------ uffd backend */

static struct {
    pid_t pid;   /* process the descriptors belong to: a fork child opens its own */
    int state;   /* 0 not tried, 1 available, -1 not available */
    int fd, pm;  /* userfaultfd, /proc/self/pagemap */
    double fault_ns;
} g_uffd = {0, 0, -1, -1, 0.0};

#ifdef HAVE_UFFD
static int uffd_wp(uintptr_t lo, uintptr_t hi, bool on)
{
    struct uffdio_writeprotect w;
    memset(&w, 0, sizeof w);
    w.range.start = lo;
    w.range.len = hi - lo;
    w.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
    for (;;) {
        if (ioctl(g_uffd.fd, UFFDIO_WRITEPROTECT, &w) == 0) return 0;
        if (errno != EINTR && errno != EAGAIN) return -1;
    }
}

static int uffd_register_range(uintptr_t lo, uintptr_t hi)
{
    struct uffdio_register reg;
    memset(&reg, 0, sizeof reg);
    reg.range.start = lo;
    reg.range.len = hi - lo;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    return ioctl(g_uffd.fd, UFFDIO_REGISTER, &reg);
}

static void uffd_unregister_range(uintptr_t lo, uintptr_t hi)
{
    struct uffdio_range rg = {lo, hi - lo};
    ioctl(g_uffd.fd, UFFDIO_UNREGISTER, &rg);
}

/* Pages of [lo, hi) written since they were protected: each region found is marked in
 * `bits` (one bit per page from `base`); with wp, protected again in the same walk. Returns
 * 0, or -1 with errno (EPERM: a page without asynchronous write protection, i.e. mapped
 * anew since registration). */
static int uffd_scan(uintptr_t base, uintptr_t lo, uintptr_t hi, bool wp, size_t pg, uint64_t *bits, uint64_t *pages,
                     uint64_t *faults)
{
    struct nm_page_region vec[512];
    uintptr_t at = lo;
    while (at < hi) {
        struct nm_pm_scan_arg a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.flags = NM_PM_SCAN_CHECK_WPASYNC | (wp ? NM_PM_SCAN_WP_MATCHING : 0);
        a.start = at;
        a.end = hi;
        a.vec = (uintptr_t)vec;
        a.vec_len = sizeof vec / sizeof vec[0];
        a.category_mask = NM_PAGE_IS_WRITTEN;
        a.return_mask = NM_PAGE_IS_WRITTEN | NM_PAGE_IS_HUGE;
        long n = ioctl(g_uffd.pm, NM_PAGEMAP_SCAN, &a);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        for (long i = 0; i < n; i++) {
            size_t p0 = (vec[i].start - base) / pg, p1 = (vec[i].end - base) / pg;
            if (bits) bset_range(bits, p0, p1);
            *pages += p1 - p0;
            /* a huge page takes one fault for all its pages */
            *faults += vec[i].categories & NM_PAGE_IS_HUGE ? (p1 - p0 + 511) / 512 : p1 - p0;
        }
        if (a.walk_end <= at || a.walk_end > hi) break;
        at = a.walk_end;
    }
    return 0;
}

/* Open the process's userfaultfd with asynchronous write protection, check that a scan
 * finds written pages, and measure the cost of one fault (thread CPU time, best of three).
 * Under g_mu. */
static bool uffd_available(size_t pg)
{
    if (g_uffd.state && g_uffd.pid == getpid()) return g_uffd.state > 0;
    if (g_uffd.state && g_uffd.pid != getpid()) {
        /* inherited over fork: these descriptors address the parent's memory */
        if (g_uffd.fd >= 0) close(g_uffd.fd);
        if (g_uffd.pm >= 0) close(g_uffd.pm);
    }
    g_uffd.pid = getpid();
    g_uffd.state = -1;
    g_uffd.fd = g_uffd.pm = -1;
    for (int user_only = 0; user_only < 2 && g_uffd.fd < 0; user_only++) {
        /* unprivileged processes may handle faults from user mode only (asynchronous
         * resolution happens before that check, so kernel writes work too) */
        int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | (user_only ? UFFD_USER_MODE_ONLY : 0));
        if (fd < 0) continue;
        struct uffdio_api api;
        memset(&api, 0, sizeof api);
        api.api = UFFD_API;
        api.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
        if (ioctl(fd, UFFDIO_API, &api) != 0) {
            close(fd);
            break; /* no asynchronous write protection in this kernel */
        }
        g_uffd.fd = fd;
    }
    if (g_uffd.fd < 0) return false;
    g_uffd.pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    size_t len = CAL_PAGES * pg;
    uint8_t *p = g_uffd.pm >= 0 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    bool ok = p != MAP_FAILED && uffd_register_range((uintptr_t)p, (uintptr_t)p + len) == 0;
    uint64_t best = UINT64_MAX;
    if (ok) {
        memset(p, 1, len);
        for (int rep = 0; rep < 3 && ok; rep++) {
            uint64_t pages = 0, faults = 0;
            ok = uffd_wp((uintptr_t)p, (uintptr_t)p + len, true) == 0;
            uint64_t c0 = nm_thread_cpu_ns();
            for (size_t i = 0; ok && i < CAL_PAGES; i += 2) ((volatile uint8_t *)p)[i * pg] = (uint8_t)rep;
            best = NM_MIN(best, nm_thread_cpu_ns() - c0);
            /* every other page written: the scan must find exactly those */
            ok = ok && uffd_scan((uintptr_t)p, (uintptr_t)p, (uintptr_t)p + len, true, pg, NULL, &pages, &faults) == 0 &&
                 pages == CAL_PAGES / 2;
        }
        uffd_unregister_range((uintptr_t)p, (uintptr_t)p + len);
    }
    if (p != MAP_FAILED) munmap(p, len);
    if (!ok) {
        close(g_uffd.fd);
        if (g_uffd.pm >= 0) close(g_uffd.pm);
        g_uffd.fd = g_uffd.pm = -1;
        return false;
    }
    g_uffd.fault_ns = (double)best / (CAL_PAGES / 2);
    g_uffd.state = 1;
    return true;
}
#else
static bool uffd_available(size_t pg)
{
    (void)pg;
    return false;
}
static int uffd_wp(uintptr_t lo, uintptr_t hi, bool on)
{
    (void)lo, (void)hi, (void)on;
    errno = ENOSYS;
    return -1;
}
static int uffd_register_range(uintptr_t lo, uintptr_t hi)
{
    (void)lo, (void)hi;
    errno = ENOSYS;
    return -1;
}
static void uffd_unregister_range(uintptr_t lo, uintptr_t hi) { (void)lo, (void)hi; }
static int uffd_scan(uintptr_t base, uintptr_t lo, uintptr_t hi, bool wp, size_t pg, uint64_t *bits, uint64_t *pages,
                     uint64_t *faults)
{
    (void)base, (void)lo, (void)hi, (void)wp, (void)pg, (void)bits, (void)pages, (void)faults;
    errno = ENOSYS;
    return -1;
}
#endif

/* ------------------------------------------------------------------ /proc/self/maps */

typedef struct vma {
    uintptr_t lo, hi;
    bool r, w, shared, file;
} vma;

typedef struct vmas {
    vma *v;
    size_t n;
} vmas;

static int read_maps(vmas *out)
{
    out->v = NULL;
    out->n = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (len + 4096 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fd);
    if (!buf) return -1;
    buf[len] = 0;
    size_t vcap = 256;
    out->v = malloc(vcap * sizeof *out->v);
    for (char *p = buf; out->v && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        /* start-end perms offset dev inode path */
        char *e;
        unsigned long long lo = strtoull(p, &e, 16), hi = 0, inode = 0;
        if (*e == '-') hi = strtoull(e + 1, &e, 16);
        while (*e == ' ') e++;
        char perms[5] = {0};
        for (int i = 0; i < 4 && e[i]; i++) perms[i] = e[i];
        char *q = e;
        for (int f = 0; f < 3 && *q; f++) { /* skip perms, offset, dev */
            while (*q && *q != ' ') q++;
            while (*q == ' ') q++;
        }
        inode = strtoull(q, NULL, 10);
        if (out->n == vcap) {
            vma *nv = realloc(out->v, vcap * 2 * sizeof *nv);
            if (!nv) {
                free(out->v);
                out->v = NULL;
                break;
            }
            out->v = nv;
            vcap *= 2;
        }
        out->v[out->n++] = (vma){(uintptr_t)lo, (uintptr_t)hi, perms[0] == 'r', perms[1] == 'w', perms[3] == 's',
                                 inode != 0};
        if (!nl) break;
        p = nl + 1;
    }
    free(buf);
    return out->v ? 0 : -1;
}

/* ------------------------------------------------------------------ registration */

static bool overlaps_any(uintptr_t a, uintptr_t b)
{
    for (int i = 0; i < TRK_MAX; i++)
        if (atomic_load(&g_trk[i].state) == 1 && a < g_trk[i].hi && g_trk[i].lo < b) return true;
    return false;
}

static size_t page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    return pg > 0 ? (size_t)pg : 4096;
}

nm_err nm_pimc_register(nm_pimc *c, const void *buf, size_t len, nm_pimc_reg **out)
{
    if (!c || !buf || !len || !out) return nm_fail(NM_EINVAL, "pim_cache: register needs a cache, a buffer and a length");
    *out = NULL;
    uintptr_t base = (uintptr_t)buf;
    if (base + len < base) return nm_fail(NM_ERANGE, "pim_cache: register: range wraps");
    if (c->o.track_mode < NM_PIMC_TRACK_AUTO || c->o.track_mode > NM_PIMC_TRACK_MPROTECT)
        return nm_fail(NM_EINVAL, "pim_cache: unknown track mode %d", c->o.track_mode);
    for (nm_pimc_reg *r = c->regs; r; r = r->next)
        if (base < r->base + r->len && r->base < base + len)
            return nm_fail(NM_EEXIST, "pim_cache: [%p, +%zu) overlaps a registered buffer", buf, len);
    size_t pg = page_size();
    nm_pimc_reg *r = calloc(1, sizeof *r);
    if (!r) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    r->c = c;
    r->base = base;
    r->len = len;
    r->id = -1;
    r->lo = NM_ALIGN_UP(base, (uintptr_t)pg);
    r->hi = NM_ALIGN_DOWN(base + len, (uintptr_t)pg);
    if (r->hi < r->lo) r->hi = r->lo;
    /* The buffer must be mapped and readable now. */
    vmas m;
    if (read_maps(&m)) {
        free(r);
        return nm_fail(NM_EIO, "pim_cache: cannot read /proc/self/maps");
    }
    uintptr_t at = base;
    for (size_t i = 0; i < m.n && at < base + len; i++)
        if (m.v[i].lo <= at && at < m.v[i].hi) {
            if (!m.v[i].r) break;
            at = m.v[i].hi;
        }
    free(m.v);
    if (at < base + len) {
        free(r);
        return nm_fail(NM_EINVAL, "pim_cache: [%p, +%zu) is not mapped readable", buf, len);
    }
    nm_err e = NM_OK;
    if (r->hi > r->lo) {
        pthread_mutex_lock(&g_mu);
        if (overlaps_any(r->lo, r->hi)) {
            e = nm_fail(NM_EEXIST, "pim_cache: [%p, +%zu) overlaps a buffer registered with another cache", buf, len);
        } else {
            /* Backend: asynchronous userfaultfd write protection where the kernel has it and
             * the mapping takes it (anonymous memory), mprotect otherwise. */
            if (c->o.track_mode != NM_PIMC_TRACK_MPROTECT && uffd_available(pg) && uffd_register_range(r->lo, r->hi) == 0) {
                r->backend = BE_UFFD;
                r->granule = pg;
                r->fault_ns = g_uffd.fault_ns;
            } else if (c->o.track_mode == NM_PIMC_TRACK_UFFD) {
                e = nm_fail(NM_ENOTSUP,
                            "pim_cache: asynchronous userfaultfd write protection is not available for [%p, +%zu) "
                            "(needs Linux >= 6.7 and anonymous memory)",
                            buf, len);
            } else {
                install();
                if (g_install_err) {
                    e = nm_fail(NM_EIO, "pim_cache: sigaction(SIGSEGV): %s", strerror(g_install_err));
                } else {
                    r->backend = BE_MPROT;
                    r->granule = NM_ALIGN_UP(c->o.track_granule ? c->o.track_granule : (size_t)64 << 10, pg);
                    if (g_mprot_fault_ns <= 0) mprot_calibrate(pg);
                    r->fault_ns = g_mprot_fault_ns;
                }
            }
            if (!e) {
                r->ngran = (uint32_t)((r->hi - r->lo + r->granule - 1) / r->granule);
                int id = trk_alloc(r->lo, r->hi, r->granule, r->ngran, r->backend);
                if (id < 0) {
                    if (r->backend == BE_UFFD) uffd_unregister_range(r->lo, r->hi);
                    e = id == -1 ? nm_fail(NM_EBUSY, "pim_cache: %d registered buffers already", TRK_MAX)
                                 : nm_fail(NM_ENOMEM, "pim_cache: no memory");
                }
                r->id = id;
            }
        }
        pthread_mutex_unlock(&g_mu);
    }
    size_t words = (r->ngran + 63) / 64 + 1;
    if (!e) {
        r->cur = calloc(words, sizeof *r->cur);
        r->touched = calloc(words, sizeof *r->touched);
        if (!r->cur || !r->touched) e = nm_fail(NM_ENOMEM, "pim_cache: no memory");
    }
    if (e) {
        if (r->id >= 0) {
            if (r->backend == BE_UFFD) uffd_unregister_range(r->lo, r->hi);
            trk_free(r->id);
        }
        free(r->cur);
        free(r->touched);
        free(r);
        return e;
    }
    bset_range(r->cur, 0, r->ngran); /* never copied: all unknown */
    r->state = TRK_NEW;
    r->pid = (int)getpid();
    r->next = c->regs;
    c->regs = r;
    *out = r;
    return NM_OK;
}

static void reg_free(nm_pimc_reg *r)
{
    if (r->id >= 0) {
        /* Writable (unprotected) first, so no new fault can need the entry; then wait for
         * handlers that may still be reading it. (Writing the buffer while unregistering
         * it is a race in the application, as with free.) */
        if (r->backend == BE_MPROT && r->protected_) mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
        if (r->backend == BE_UFFD && g_uffd.pid == getpid() && r->pid == (int)getpid())
            uffd_unregister_range(r->lo, r->hi);
        trk_free(r->id);
    }
    for (uint32_t i = 0; i < r->segs_cap; i++)
        if (r->segs[i]) {
            free(r->segs[i]->loc);
            free(r->segs[i]->fp);
            free(r->segs[i]->fp_ok);
            free(r->segs[i]);
        }
    free(r->segs);
    free(r->cur);
    free(r->touched);
    free(r);
}

nm_err nm_pimc_unregister(nm_pimc *c, nm_pimc_reg *r)
{
    if (!c || !r) return nm_fail(NM_EINVAL, "pim_cache: unregister needs a cache and a registration");
    nm_pimc_reg **pp = &c->regs;
    while (*pp && *pp != r) pp = &(*pp)->next;
    if (!*pp) return nm_fail(NM_EINVAL, "pim_cache: %p is not a registration of this cache", (void *)r);
    *pp = r->next;
    reg_free(r);
    return NM_OK;
}

void track_destroy_all(nm_pimc *c)
{
    while (c->regs) {
        nm_pimc_reg *r = c->regs;
        c->regs = r->next;
        reg_free(r);
    }
}

nm_err nm_pimc_reg_touch(nm_pimc_reg *r, size_t off, size_t len)
{
    if (!r) return nm_fail(NM_EINVAL, "pim_cache: touch needs a registration");
    if (off > r->len || len > r->len - off)
        return nm_fail(NM_ERANGE, "pim_cache: touch [%zu, +%zu) outside the %zu registered bytes", off, len, r->len);
    if (r->id < 0 || !len) return NM_OK;
    uintptr_t a = NM_MAX(r->base + off, r->lo), b = NM_MIN(r->base + off + len, r->hi);
    if (a >= b) return NM_OK;
    size_t g0 = (a - r->lo) / r->granule, g1 = (b - 1 - r->lo) / r->granule;
    if (r->backend == BE_UFFD) {
        /* the kernel catches system calls too: recorded for discarded pages (madvise) */
        bset_range(r->touched, g0, g1 + 1);
        return NM_OK;
    }
    trk_ent *t = &g_trk[r->id];
    uintptr_t s = r->lo + g0 * r->granule, e = NM_MIN(r->hi, r->lo + (g1 + 1) * r->granule);
    if (r->protected_ && mprotect((void *)s, e - s, PROT_READ | PROT_WRITE) != 0)
        return nm_fail(NM_EIO, "pim_cache: mprotect: %s", strerror(errno));
    for (size_t g = g0; g <= g1; g++) atomic_fetch_or(&t->bits[g / 64], (uint64_t)1 << (g % 64));
    return NM_OK;
}

/* ------------------------------------------------------------------ per copy */

/* Bytes of the batch's buffers inside r. */
static uint64_t reg_bytes(const nm_pimc *c, const nm_pimc_reg *r, const batch *b)
{
    size_t n = (size_t)b->n * c->t.nr_dpus;
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t p = (uintptr_t)b->bufs[i];
        if (b->lens[i] && p >= r->base && p + b->lens[i] <= r->base + r->len) s += b->lens[i];
    }
    return s;
}

/* Modeled ns of one plain push of the batch (0 without a model) and its bytes. */
static double batch_push_ns(const nm_pimc *c, const batch *b, double *bytes)
{
    const unsigned nd = c->t.nr_dpus;
    double max_rank = 0, all = 0;
    unsigned active = 0;
    *bytes = 0;
    for (unsigned r = 0; r < c->nranks; r++) {
        uint64_t rb = 0;
        for (unsigned d = r * c->dpr; d < NM_MIN(nd, (r + 1) * c->dpr); d++)
            for (unsigned k = 0; k < b->n; k++) {
                size_t len = b->lens[(size_t)k * nd + d];
                rb += NM_ALIGN_UP(len, 8u);
                *bytes += (double)len;
            }
        active += rb > 0;
        max_rank = NM_MAX(max_rank, (double)rb);
        all += (double)rb;
    }
    return pimc_push_ns(c, max_rank, all, active); /* every rank at once, host-limited */
}

/* Does tracking r pay for the next interval, when a share w of it is written and that
 * takes `faults` write faults? Tracked, the next copy costs the faults, fingerprinting the
 * written bytes and sending what changed; untracked, a plain push of r's bytes (the sample
 * decides; records rarely hold fingerprints of every block). Both on the host's critical
 * path, with the rates the cache measured (cache.c, calibrate). Without them (serial mode,
 * no transfer model), tracking pays while less than half of the buffer is written. */
static bool pays(const nm_pimc *c, const nm_pimc_reg *r, double w, double faults, double rbytes, double push_ns,
                 double bbytes, double margin)
{
    if (push_ns <= 0 || c->hash_ns <= 0 || bbytes <= 0) return w < 0.5;
    double p_r = push_ns * rbytes / bbytes;
    /* the tracked copy: the DRM over the written bytes (each may be new) and their transfer */
    double t_tracked = pimc_drm_predict(c, w * rbytes, w * rbytes, 0) + w * p_r;
    return faults * r->fault_ns + t_tracked < margin * p_r;
}

/* Probe sample: runs of at least PROBE_RUN bytes, every PROBE_STRIDE-th from the phase (at
 * least one, at most PROBE_MAX_RUNS: each costs a system call per copy). */
static uint32_t probe_run_len(const nm_pimc_reg *r)
{
    size_t by_size = NM_MAX((size_t)1, PROBE_RUN / r->granule);
    size_t by_count = ((size_t)r->ngran + (size_t)PROBE_STRIDE * PROBE_MAX_RUNS - 1) / ((size_t)PROBE_STRIDE * PROBE_MAX_RUNS);
    return (uint32_t)NM_MAX(by_size, by_count);
}
static uint32_t probe_nruns(const nm_pimc_reg *r) { return (r->ngran + probe_run_len(r) - 1) / probe_run_len(r); }
static bool probe_next(const nm_pimc_reg *r, uint32_t *run, uint32_t *g0, uint32_t *g1)
{
    uint32_t n = probe_nruns(r), rl = probe_run_len(r);
    uint32_t first = r->probe_phase % NM_MIN(n, PROBE_STRIDE);
    if (*run == UINT32_MAX) *run = first;
    else *run += PROBE_STRIDE;
    if (*run >= n) return false;
    *g0 = *run * rl;
    *g1 = NM_MIN(r->ngran, *g0 + rl);
    return true;
}

/* mprotect backend: protect (on) or open the granules [g0, g1). */
static int mprot_range(const nm_pimc_reg *r, uint32_t g0, uint32_t g1, bool on)
{
    uintptr_t a = r->lo + (uintptr_t)g0 * r->granule, z = NM_MIN(r->hi, r->lo + (uintptr_t)g1 * r->granule);
    return a < z ? mprotect((void *)a, z - a, on ? PROT_READ : PROT_READ | PROT_WRITE) : 0;
}

/* One registration's written granules since its last copy (into r->cur), and the
 * protection for the next interval. Faults of the interval go to *faults. */
static nm_err track_reg(nm_pimc *c, nm_pimc_reg *r, double rbytes, double push_ns, double bbytes, uint64_t *faults)
{
    const size_t pg = page_size();
    trk_ent *t = &g_trk[r->id];
    uint64_t f = 0, written = 0;
    r->arm = ARM_NONE;
    if (r->state == TRK_NEW) {
        bset_range(r->cur, 0, r->ngran);
        r->arm = ARM_FULL;
        /* (again, if a remap since dropped the registration of part of the range) */
        if (r->backend == BE_UFFD) uffd_register_range(r->lo, r->hi);
    } else if (r->backend == BE_UFFD && r->state == TRK_FULL) {
        /* Written pages (counted, not yet protected again), the decision, then the scan that
         * protects them again (pages written in between join). */
        int rc = uffd_scan(r->lo, r->lo, r->hi, false, pg, r->cur, &written, &f);
        bool keep = !rc && pays(c, r, (double)written / r->ngran, (double)f, rbytes, push_ns, bbytes, PAY_MARGIN);
        if (!rc && keep && written) {
            /* (nothing written: nothing to protect again; a page written since faults anew
             * or is seen by the next copy's scan) */
            written = f = 0;
            rc = uffd_scan(r->lo, r->lo, r->hi, true, pg, r->cur, &written, &f);
        }
        if (rc) {
            /* a page without write protection: mapped anew since (or the scan failed):
             * read everything, register the range again, protect it after the copy */
            bset_range(r->cur, 0, r->ngran);
            uffd_register_range(r->lo, r->hi);
            r->state = TRK_NEW;
            r->arm = ARM_FULL;
        } else if (!keep) {
            r->arm = ARM_OFF; /* this copy knows exactly what was written; later ones do not */
        }
    } else if (r->backend == BE_MPROT && r->state == TRK_FULL) {
        /* Count first (faults, marks), decide, then protect again what was opened (marks
         * and writable pieces), and only then collect the marks: a write in between either
         * faults again or finds its granule already marked. */
        f = atomic_exchange(&t->faults, 0);
        bool all = atomic_load(&t->all_dirty);
        for (size_t w = 0; w < (r->ngran + 63) / 64; w++)
            written += (uint64_t)__builtin_popcountll(atomic_load(&t->bits[w]) | r->cur[w]);
        bool keep = !all && pays(c, r, (double)written / r->ngran, (double)f, rbytes, push_ns, bbytes, PAY_MARGIN);
        if (keep) {
            for (uint32_t g = 0; g < r->ngran;) {
                bool open = bget(r->cur, g) || (atomic_load(&t->bits[g / 64]) >> (g % 64) & 1);
                if (!open) {
                    g++;
                    continue;
                }
                uint32_t z = g + 1;
                while (z < r->ngran && (bget(r->cur, z) || (atomic_load(&t->bits[z / 64]) >> (z % 64) & 1))) z++;
                if (mprot_range(r, g, z, true) != 0) {
                    keep = false;
                    break;
                }
                g = z;
            }
        }
        for (size_t w = 0; w < (r->ngran + 63) / 64; w++) r->cur[w] |= atomic_exchange(&t->bits[w], 0);
        if (atomic_exchange(&t->all_dirty, 0)) bset_range(r->cur, 0, r->ngran);
        if (!keep) r->arm = ARM_OFF;
    } else if (r->state == TRK_OFF) {
        /* Off: nothing protected, everything read; after the wait, a sample is protected. */
        bset_range(r->cur, 0, r->ngran);
        if (r->backend == BE_MPROT) {
            f = atomic_exchange(&t->faults, 0);
            for (size_t w = 0; w < (r->ngran + 63) / 64; w++) atomic_store(&t->bits[w], 0);
            atomic_store(&t->all_dirty, 0);
        }
        if (r->wait) r->wait--;
        if (!r->wait) r->arm = ARM_PROBE;
    } else {
        /* Probe: the buffer is unprotected but for the sample runs; everything is read. The
         * sample's written share predicts what full tracking would cost. */
        bset_range(r->cur, 0, r->ngran);
        uint64_t spl = 0, sw = 0;
        uint32_t run = UINT32_MAX, g0, g1;
        int rc = 0;
        while (!rc && probe_next(r, &run, &g0, &g1)) {
            spl += g1 - g0;
            if (r->backend == BE_UFFD) {
                uint64_t wpg = 0;
                rc = uffd_scan(r->lo, r->lo + (uintptr_t)g0 * pg, NM_MIN(r->hi, r->lo + (uintptr_t)g1 * pg), true, pg, NULL,
                               &wpg, &f);
                sw += wpg;
            } else {
                for (uint32_t g = g0; g < g1; g++) sw += atomic_load(&t->bits[g / 64]) >> (g % 64) & 1;
            }
        }
        if (r->backend == BE_MPROT) {
            f = atomic_exchange(&t->faults, 0);
            for (size_t w = 0; w < (r->ngran + 63) / 64; w++) atomic_store(&t->bits[w], 0);
            atomic_store(&t->all_dirty, 0);
        }
        double w = spl ? (double)sw / (double)spl : 1.0;
        if (rc) {
            uffd_register_range(r->lo, r->hi);
            r->state = TRK_NEW;
            r->arm = ARM_FULL;
        } else if (pays(c, r, w, w * r->ngran, rbytes, push_ns, bbytes, REARM_MARGIN)) {
            r->arm = ARM_FULL;
        } else {
            r->arm = ARM_OFF;
        }
    }
    if (r->backend == BE_UFFD) {
        for (size_t w = 0; w < (r->ngran + 63) / 64; w++) {
            r->cur[w] |= r->touched[w];
            r->touched[w] = 0;
        }
        atomic_fetch_add_explicit(&g_faults, f, memory_order_relaxed);
    }
    r->last_faults = f;
    *faults = f;
    return NM_OK;
}

static bool reg_used(const nm_pimc *c, const nm_pimc_reg *r, const batch *b)
{
    size_t n = (size_t)b->n * c->t.nr_dpus;
    for (size_t i = 0; i < n; i++) {
        uintptr_t p = (uintptr_t)b->bufs[i];
        if (b->lens[i] && p >= r->base && p + b->lens[i] <= r->base + r->len) return true;
    }
    return false;
}

nm_err track_begin_copy(nm_pimc *c)
{
    const batch *b = c->cur_batch;
    c->st.last_write_faults = 0;
    c->st.last_fault_cost_ns = 0;
    c->st.last_track_ns = 0;
    bool any = false;
    for (nm_pimc_reg *r = c->regs; r && !any; r = r->next) any = reg_used(c, r, b);
    if (!any) return NM_OK;
    uint64_t c0 = nm_thread_cpu_ns();
    /* The mprotect backend needs the mappings (which pieces are writable); the uffd backend
     * only that the buffer is still mapped (msync fails with ENOMEM on a hole, ~0.2 us where
     * reading /proc/self/maps costs ~100 us): a remapped piece has no write protection,
     * which its scan reports, and probes and off periods read everything. */
    bool need_maps = false;
    for (nm_pimc_reg *r = c->regs; r; r = r->next) need_maps |= r->backend != BE_UFFD && reg_used(c, r, b);
    vmas m = {NULL, 0};
    if (need_maps && read_maps(&m)) return nm_fail(NM_EIO, "pim_cache: cannot read /proc/self/maps");
    double bbytes, push_ns = batch_push_ns(c, b, &bbytes);
    const size_t pg = page_size();
    nm_err e = NM_OK;
    for (nm_pimc_reg *r = c->regs; r && !e; r = r->next) {
        r->cur_epoch = 0;
        r->arm = ARM_NONE;
        if (!reg_used(c, r, b)) continue;
        if (r->backend == BE_UFFD && r->pid != (int)getpid()) {
            /* A fork child: the descriptors it inherited address the parent's memory, and
             * its own mappings lost the registration. Open its own and start again. */
            pthread_mutex_lock(&g_mu);
            bool ok = uffd_available(pg);
            pthread_mutex_unlock(&g_mu);
            if (!ok) {
                e = nm_fail(NM_ENOTSUP, "pim_cache: userfaultfd unavailable in this (forked) process");
                break;
            }
            r->pid = (int)getpid();
            r->state = TRK_NEW;
        }
        if (r->backend == BE_UFFD) {
            uintptr_t a0 = NM_ALIGN_DOWN(r->base, (uintptr_t)pg), a1 = NM_ALIGN_UP(r->base + r->len, (uintptr_t)pg);
            if (msync((void *)a0, a1 - a0, MS_ASYNC) != 0 && errno == ENOMEM) {
                e = nm_fail(NM_ESTATE,
                            "pim_cache: registered buffer [%p, +%zu) is no longer mapped (freed or unmapped while "
                            "registered): unregister it before freeing",
                            (void *)r->base, r->len);
                break;
            }
            memset(r->cur, 0, ((r->ngran + 63) / 64) * sizeof *r->cur);
            r->cur_epoch = c->copy_no;
            if (!r->ngran) continue;
            uint64_t f = 0;
            e = track_reg(c, r, (double)reg_bytes(c, r, b), push_ns, bbytes, &f);
            c->st.last_write_faults += f;
            c->st.last_fault_cost_ns += (double)f * r->fault_ns;
            c->st.fault_ns = r->fault_ns;
            c->st.last_track_backend = r->backend;
            continue;
        }
        /* 1. Still mapped and readable? Shared or file-backed pieces count as written
         * (another process may change them), and with mprotect so do writable pieces over
         * tracked pages (remapped, or re-protected by someone else). */
        size_t words = (r->ngran + 63) / 64;
        memset(r->cur, 0, words * sizeof *r->cur);
        uintptr_t at = r->base, end = r->base + r->len;
        for (size_t i = 0; i < m.n && at < end; i++) {
            const vma *v = &m.v[i];
            if (v->hi <= at || v->lo > at) continue;
            if (!v->r) break;
            bool dirty = v->shared || v->file || (r->backend == BE_MPROT && v->w && r->protected_);
            if (dirty && r->ngran) {
                uintptr_t a = NM_MAX(v->lo, r->lo), z = NM_MIN(v->hi, r->hi);
                if (a < z) bset_range(r->cur, (a - r->lo) / r->granule, (z - 1 - r->lo) / r->granule + 1);
            }
            at = v->hi;
        }
        if (at < end) {
            e = nm_fail(NM_ESTATE,
                        "pim_cache: registered buffer [%p, +%zu) is no longer mapped (freed or unmapped while "
                        "registered): unregister it before freeing",
                        (void *)r->base, r->len);
            break;
        }
        r->cur_epoch = c->copy_no;
        if (!r->ngran) continue; /* no whole page: nothing tracked, everything read */
        uint64_t f = 0;
        e = track_reg(c, r, (double)reg_bytes(c, r, b), push_ns, bbytes, &f);
        c->st.last_write_faults += f;
        c->st.last_fault_cost_ns += (double)f * r->fault_ns;
        c->st.fault_ns = r->fault_ns;
        c->st.last_track_backend = r->backend;
    }
    free(m.v);
    c->st.last_track_ns = nm_thread_cpu_ns() - c0;
    return e;
}

hclk track_end_copy(nm_pimc *c, const batch *b)
{
    hclk h0 = hclk_now(c);
    bool any = false;
    for (nm_pimc_reg *r = c->regs; r; r = r->next) {
        if (r->cur_epoch != c->copy_no || !r->ngran || !reg_used(c, r, b)) continue;
        if (r->state == TRK_FULL && r->arm == ARM_NONE && c->st.last_mode == NM_PIMC_MODE_PLAIN)
            r->arm = ARM_OFF; /* tracked, and still not worth CAC: the faults bought nothing */
        else if (r->state == TRK_FULL && r->arm == ARM_NONE)
            r->backoff = 0;
        if (r->arm == ARM_OFF) {
            /* Wait longer each time (2, 4, ... 64 copies) before sampling again. */
            r->backoff = NM_MIN(NM_MAX(r->backoff * 2, 2u), 64u);
            r->wait = r->backoff;
        }
        if (r->arm == ARM_FULL) {
            any = true;
            int rc;
            if (r->backend == BE_UFFD) {
                rc = uffd_wp(r->lo, r->hi, true);
            } else {
                trk_ent *t = &g_trk[r->id];
                atomic_store(&t->faults, 0);
                rc = mprotect((void *)r->lo, r->hi - r->lo, PROT_READ);
                r->protected_ = true;
            }
            r->state = rc ? TRK_NEW : TRK_FULL;
        } else if (r->arm == ARM_OFF || r->arm == ARM_PROBE) {
            any = true;
            int rc = 0;
            uint32_t run = UINT32_MAX, g0, g1;
            const size_t pg = page_size();
            if (r->arm == ARM_OFF && r->state == TRK_FULL) {
                /* pages still protected would fault for nothing: open them all (one walk of
                 * the page tables; it overlaps the transfers) */
                rc = r->backend == BE_UFFD ? uffd_wp(r->lo, r->hi, false)
                                           : mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
            } else if (r->arm == ARM_OFF) {
                /* from a probe: open its runs */
                while (!rc && probe_next(r, &run, &g0, &g1))
                    rc = r->backend == BE_UFFD
                             ? uffd_wp(r->lo + (uintptr_t)g0 * pg, NM_MIN(r->hi, r->lo + (uintptr_t)g1 * pg), false)
                             : mprot_range(r, g0, g1, false);
            } else {
                r->probe_phase = (uint32_t)(c->copy_no * 7u); /* a new sample each time */
                while (!rc && probe_next(r, &run, &g0, &g1))
                    rc = r->backend == BE_UFFD
                             ? uffd_wp(r->lo + (uintptr_t)g0 * pg, NM_MIN(r->hi, r->lo + (uintptr_t)g1 * pg), true)
                             : mprot_range(r, g0, g1, true);
                if (r->backend == BE_MPROT) r->protected_ = true;
            }
            r->state = rc ? TRK_NEW : r->arm == ARM_OFF ? TRK_OFF : TRK_PROBE;
        }
        r->arm = ARM_NONE;
    }
    if (!any) return (hclk){0, 0, 0};
    hclk h = hclk_sub(hclk_now(c), h0);
    c->st.last_track_ns += h.crit;
    return h;
}

/* Whether granules [g0, g1] are all unwritten (cur bitmap). */
static inline bool gran_clean(const nm_pimc_reg *r, size_t g0, size_t g1) { return bnext(r->cur, g0, g1 + 1) > g1; }

bool track_clean(const nm_pimc_reg *r, uintptr_t a, uintptr_t b)
{
    if (a < r->lo || b > r->hi || a >= b) return false;
    return gran_clean(r, (a - r->lo) / r->granule, (b - 1 - r->lo) / r->granule);
}

uintptr_t track_next_dirty(const nm_pimc_reg *r, uintptr_t a, uintptr_t b)
{
    if (a >= b) return b;
    if (a < r->lo || a >= r->hi) return a; /* edge pages are never tracked */
    size_t g = bnext(r->cur, (a - r->lo) / r->granule, r->ngran);
    uintptr_t d = g >= r->ngran ? r->hi : r->lo + g * r->granule;
    d = NM_MAX(d, a);
    return NM_MIN(d, b);
}

uint64_t track_clean_bytes(const nm_pimc_reg *r, uintptr_t a, uintptr_t b)
{
    a = NM_MAX(a, r->lo);
    b = NM_MIN(b, r->hi);
    if (a >= b) return 0;
    size_t g0 = (a - r->lo) / r->granule, g1 = (b - 1 - r->lo) / r->granule;
    uint64_t n = 0;
    if (g1 > g0 + 1) n = (uint64_t)(g1 - g0 - 1 - bcount(r->cur, g0 + 1, g1)) * r->granule;
    for (size_t g = g0; g <= g1; g += NM_MAX((size_t)1, g1 - g0)) {
        if (!bget(r->cur, g)) {
            uintptr_t s = NM_MAX(a, r->lo + g * r->granule), e = NM_MIN(b, r->lo + (g + 1) * r->granule);
            n += e - s;
        }
        if (g1 == g0) break;
    }
    return n;
}

static uint64_t seg_hash(size_t off, unsigned d) { return ((uint64_t)off * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)d * 0xC2B2AE3D27D4EB4Full); }

/* Records live in their own allocations (views keep pointers to them while the map grows). */
static seg *seg_find(nm_pimc_reg *r, size_t off, unsigned d, bool create)
{
    if (create && (uint64_t)(r->segs_n + 1) * 2 > r->segs_cap) {
        uint32_t ncap = r->segs_cap ? r->segs_cap * 2 : 16;
        seg **ns = calloc(ncap, sizeof *ns);
        if (!ns) return NULL;
        for (uint32_t i = 0; i < r->segs_cap; i++)
            if (r->segs[i]) {
                uint32_t j = (uint32_t)(seg_hash(r->segs[i]->off, r->segs[i]->dpu) >> 7) & (ncap - 1);
                while (ns[j]) j = (j + 1) & (ncap - 1);
                ns[j] = r->segs[i];
            }
        free(r->segs);
        r->segs = ns;
        r->segs_cap = ncap;
    }
    if (!r->segs_cap) return NULL;
    uint32_t m = r->segs_cap - 1;
    for (uint32_t j = (uint32_t)(seg_hash(off, d) >> 7) & m;; j = (j + 1) & m) {
        seg *s = r->segs[j];
        if (!s) {
            if (!create) return NULL;
            s = calloc(1, sizeof *s);
            if (!s) return NULL;
            s->used = true;
            s->off = off;
            s->dpu = d;
            s->gen = NO_GEN;
            r->segs[j] = s;
            r->segs_n++;
            return s;
        }
        if (s->off == off && s->dpu == d) return s;
    }
}

void track_view_of(nm_pimc *c, const void *buf, size_t len, unsigned d, track_view *v)
{
    memset(v, 0, sizeof *v);
    if (!len || !c->regs) return;
    uintptr_t p = (uintptr_t)buf;
    for (nm_pimc_reg *r = c->regs; r; r = r->next) {
        if (p < r->base || p + len > r->base + r->len || r->cur_epoch != c->copy_no) continue;
        size_t off = p - r->base;
        /* Fixed blocks reuse per-block records, so the block grid must be the same. */
        if (c->o.chunking == NM_PIMC_FIXED && off % c->bs) return;
        seg *s = seg_find(r, off, d, true);
        if (!s) return; /* no memory: copy without tracking */
        v->reg = r;
        v->sg = s;
        v->off = off;
        v->seg_valid = s->gen != NO_GEN && s->gen == c->d[d].gen && s->len == len;
        v->all_clean = v->seg_valid && track_clean(r, p, p + len);
        v->clean_bytes = v->all_clean ? len : v->seg_valid ? track_clean_bytes(r, p, p + len) : 0;
        return;
    }
}

int seg_reserve(seg *s, uint32_t n, bool with_fp)
{
    if (n > s->cap) {
        uint32_t *loc = realloc(s->loc, (size_t)n * sizeof *loc);
        if (!loc) return -1;
        s->loc = loc;
        if (s->fp) {
            uint64_t *fp = realloc(s->fp, (size_t)n * sizeof *fp);
            if (!fp) return -1;
            s->fp = fp;
            uint64_t *ok = realloc(s->fp_ok, ((size_t)n + 63) / 64 * sizeof *ok);
            if (!ok) return -1;
            size_t had = (s->cap + 63) / 64, now = ((size_t)n + 63) / 64;
            memset(ok + had, 0, (now - had) * sizeof *ok);
            if (s->cap % 64) ok[had - 1] &= ((uint64_t)1 << (s->cap % 64)) - 1;
            s->fp_ok = ok;
        }
        s->cap = n;
    }
    if (with_fp && !s->fp) {
        s->fp = malloc(NM_MAX(s->cap, 1) * sizeof *s->fp);
        s->fp_ok = calloc((NM_MAX(s->cap, 1) + 63) / 64, sizeof *s->fp_ok);
        if (!s->fp || !s->fp_ok) {
            free(s->fp);
            free(s->fp_ok);
            s->fp = NULL;
            s->fp_ok = NULL;
            return -1;
        }
    }
    return 0;
}
