/* Write tracking of registered source buffers (beyond the paper; issue 17 item 3).
 *
 * Applications copy the same buffers again and again (training epochs, iterative solvers).
 * After a copy the whole pages of a registered buffer are write-protected (mprotect); the
 * first write to a granule (64 KiB by default) raises SIGSEGV, and our handler marks the
 * granule written and makes it writable again, so the application's write goes through
 * after one fault. The next copy fingerprints only the granules written since; the blocks
 * of unwritten granules keep the BRB addresses they had, without being read.
 *
 * Why mprotect and not the alternatives (docs/pim-cache.md, "Write tracking"):
 *  - soft-dirty bits (/proc/self/clear_refs + pagemap) can only be cleared for the whole
 *    process: every page of the process then takes a write fault again (a tax on memory we
 *    do not track), and any other soft-dirty user (CRIU) and we would clear each other's
 *    bits; the kernel option is also missing on some systems;
 *  - userfaultfd write-protect needs a fault-handling thread (a round trip per first write)
 *    and, for unprivileged processes, vm.unprivileged_userfaultfd or user-mode-only faults;
 *  - mprotect works for any unprivileged process and costs only the tracked pages, once per
 *    granule per copy. Its price: a system call that writes into a protected page fails with
 *    EFAULT instead of faulting, so callers declare such writes first (nm_pimc_reg_touch).
 *
 * The handler chains to the handler installed before it (ASan's, a crash reporter's) for
 * every fault that is not a write to a tracked page. Whether the buffer is still mapped is
 * checked against /proc/self/maps at every copy: an unmapped buffer is an error (NM_ESTATE),
 * and any writable, shared or file-backed mapping over a tracked page (a remap after
 * munmap, a mprotect by the application) counts as written, so a buffer freed and
 * allocated again at the same address is read again, never served stale. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nearmem/common/error.h"
#include "internal.h"

#define TRK_MAX 256
#define HEAVY_SHARE 0.5 /* a copy that finds this share of granules written is "heavy" */
#define HEAVY_RUN 2     /* after this many heavy copies in a row, stop protecting ... */
#define OFF_COPIES 8    /* ... for this many copies, then try again */

typedef struct trk_ent {
    _Atomic int state; /* 0 free, 1 active, 2 being removed */
    uintptr_t lo, hi;
    size_t granule;
    _Atomic uint64_t *bits;
    _Atomic int all_dirty;
} trk_ent;

static trk_ent g_trk[TRK_MAX];
static _Atomic int g_in_handler;
static _Atomic uint64_t g_faults;
static struct sigaction g_old;
static int g_install_err;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

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
            if (atomic_load(&t->state) != 1 || a < t->lo || a >= t->hi) continue;
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

/* Installed at the first registration, and again at a later one if someone replaced it in
 * between (it then chains to them). Under g_mu. */
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

uint64_t track_faults_total(void) { return atomic_load_explicit(&g_faults, memory_order_relaxed); }

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

static void set_bit(uint64_t *m, size_t i) { m[i / 64] |= (uint64_t)1 << (i % 64); }

nm_err nm_pimc_register(nm_pimc *c, const void *buf, size_t len, nm_pimc_reg **out)
{
    if (!c || !buf || !len || !out) return nm_fail(NM_EINVAL, "pim_cache: register needs a cache, a buffer and a length");
    *out = NULL;
    uintptr_t base = (uintptr_t)buf;
    if (base + len < base) return nm_fail(NM_ERANGE, "pim_cache: register: range wraps");
    for (nm_pimc_reg *r = c->regs; r; r = r->next)
        if (base < r->base + r->len && r->base < base + len)
            return nm_fail(NM_EEXIST, "pim_cache: [%p, +%zu) overlaps a registered buffer", buf, len);
    pthread_mutex_lock(&g_mu);
    install();
    pthread_mutex_unlock(&g_mu);
    if (g_install_err) return nm_fail(NM_EIO, "pim_cache: sigaction(SIGSEGV): %s", strerror(g_install_err));
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) pg = 4096;
    size_t gran = NM_ALIGN_UP(c->o.track_granule ? c->o.track_granule : (size_t)64 << 10, (size_t)pg);
    nm_pimc_reg *r = calloc(1, sizeof *r);
    if (!r) return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    r->c = c;
    r->base = base;
    r->len = len;
    r->id = -1;
    r->lo = NM_ALIGN_UP(base, (uintptr_t)pg);
    r->hi = NM_ALIGN_DOWN(base + len, (uintptr_t)pg);
    if (r->hi < r->lo) r->hi = r->lo;
    r->granule = gran;
    r->ngran = (uint32_t)((r->hi - r->lo + gran - 1) / gran);
    r->cur = calloc((r->ngran + 64) / 64, sizeof *r->cur);
    if (!r->cur) {
        free(r);
        return nm_fail(NM_ENOMEM, "pim_cache: no memory");
    }
    for (uint32_t g = 0; g < r->ngran; g++) set_bit(r->cur, g); /* never copied: all unknown */
    /* The buffer must be mapped and readable now. */
    vmas m;
    if (read_maps(&m)) {
        free(r->cur);
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
        free(r->cur);
        free(r);
        return nm_fail(NM_EINVAL, "pim_cache: [%p, +%zu) is not mapped readable", buf, len);
    }
    if (r->ngran) {
        pthread_mutex_lock(&g_mu);
        if (overlaps_any(r->lo, r->hi)) {
            pthread_mutex_unlock(&g_mu);
            free(r->cur);
            free(r);
            return nm_fail(NM_EEXIST, "pim_cache: [%p, +%zu) overlaps a buffer registered with another cache", buf,
                           len);
        }
        int id = -1;
        for (int i = 0; i < TRK_MAX && id < 0; i++)
            if (atomic_load(&g_trk[i].state) == 0) id = i;
        _Atomic uint64_t *bits = id >= 0 ? calloc((r->ngran + 63) / 64, sizeof *bits) : NULL;
        if (id < 0 || !bits) {
            pthread_mutex_unlock(&g_mu);
            free(bits);
            free(r->cur);
            free(r);
            return id < 0 ? nm_fail(NM_EBUSY, "pim_cache: %d registered buffers already", TRK_MAX)
                          : nm_fail(NM_ENOMEM, "pim_cache: no memory");
        }
        trk_ent *t = &g_trk[id];
        t->lo = r->lo;
        t->hi = r->hi;
        t->granule = gran;
        t->bits = bits;
        atomic_store(&t->all_dirty, 0);
        atomic_store(&t->state, 1);
        pthread_mutex_unlock(&g_mu);
        r->id = id;
    }
    r->next = c->regs;
    c->regs = r;
    *out = r;
    return NM_OK;
}

static void reg_free(nm_pimc_reg *r)
{
    if (r->id >= 0) {
        trk_ent *t = &g_trk[r->id];
        /* Writable first, so no new fault can need the entry; then wait for handlers that
         * may still be reading it. (Writing the buffer while unregistering it is a race
         * in the application, as with free.) */
        if (r->protected_) mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
        atomic_store(&t->state, 2);
        while (atomic_load(&g_in_handler)) sched_yield();
        free((void *)t->bits);
        t->bits = NULL;
        atomic_store(&t->state, 0);
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
    trk_ent *t = &g_trk[r->id];
    size_t g0 = (a - r->lo) / r->granule, g1 = (b - 1 - r->lo) / r->granule;
    uintptr_t s = r->lo + g0 * r->granule, e = NM_MIN(r->hi, r->lo + (g1 + 1) * r->granule);
    if (r->protected_ && mprotect((void *)s, e - s, PROT_READ | PROT_WRITE) != 0)
        return nm_fail(NM_EIO, "pim_cache: mprotect: %s", strerror(errno));
    for (size_t g = g0; g <= g1; g++) atomic_fetch_or(&t->bits[g / 64], (uint64_t)1 << (g % 64));
    return NM_OK;
}

/* ------------------------------------------------------------------ per copy */

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
    bool any = false;
    for (nm_pimc_reg *r = c->regs; r && !any; r = r->next) any = reg_used(c, r, b);
    if (!any) return NM_OK;
    vmas m;
    if (read_maps(&m)) return nm_fail(NM_EIO, "pim_cache: cannot read /proc/self/maps");
    nm_err e = NM_OK;
    for (nm_pimc_reg *r = c->regs; r && !e; r = r->next) {
        r->cur_epoch = 0;
        if (!reg_used(c, r, b)) continue;
        /* 1. Still mapped and readable? Any writable, shared or file-backed piece over a
         * tracked page counts as written (remapped, re-protected by someone else, or
         * changeable behind our back). */
        size_t words = (r->ngran + 63) / 64;
        memset(r->cur, 0, words * sizeof *r->cur);
        uintptr_t at = r->base, end = r->base + r->len;
        for (size_t i = 0; i < m.n && at < end; i++) {
            const vma *v = &m.v[i];
            if (v->hi <= at || v->lo > at) continue;
            if (!v->r) break;
            if ((v->w || v->shared || v->file) && r->ngran) {
                uintptr_t a = NM_MAX(v->lo, r->lo), z = NM_MIN(v->hi, r->hi);
                for (uintptr_t g = a < z ? (a - r->lo) / r->granule : 1, gz = a < z ? (z - 1 - r->lo) / r->granule : 0;
                     a < z && g <= gz; g++)
                    set_bit(r->cur, g);
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
        if (r->id < 0) continue; /* no whole page: nothing tracked, everything read */
        trk_ent *t = &g_trk[r->id];
        /* 2. Protect again what is writable now: the granules written since the last copy
         * (the handler opened them) and anything remapped; then collect the marks. A
         * granule opened by a fault after the maps were read keeps its mark for this copy
         * or, being writable, shows up in the maps of the next one: no write is lost. */
        bool was = r->protected_;
        bool protect = r->off_left == 0;
        if (r->off_left) r->off_left--;
        if (protect) {
            for (uint32_t g = 0; g < r->ngran && !e;) {
                if (!(was ? r->cur[g / 64] >> (g % 64) & 1 : 1)) {
                    g++;
                    continue;
                }
                uint32_t z = g + 1;
                while (z < r->ngran && (was ? r->cur[z / 64] >> (z % 64) & 1 : 1)) z++;
                uintptr_t a = r->lo + (uintptr_t)g * r->granule, zz = NM_MIN(r->hi, r->lo + (uintptr_t)z * r->granule);
                if (mprotect((void *)a, zz - a, PROT_READ) != 0) {
                    if (errno == ENOMEM)
                        e = nm_fail(NM_ESTATE, "pim_cache: registered buffer [%p, +%zu) is no longer mapped",
                                    (void *)r->base, r->len);
                    protect = false;
                    break;
                }
                g = z;
            }
            if (e) break;
        }
        if (!protect && (was || r->protected_)) mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
        for (size_t w = 0; w < words; w++) r->cur[w] |= atomic_exchange(&t->bits[w], 0);
        if (atomic_exchange(&t->all_dirty, 0) || !was)
            for (uint32_t g = 0; g < r->ngran; g++) set_bit(r->cur, g); /* state unknown */
        r->protected_ = protect;
        uint64_t f = atomic_load_explicit(&g_faults, memory_order_relaxed);
        r->faults_seen = f;
        /* 3. Adaptive: when most of the buffer is rewritten between copies, protecting it
         * costs a fault per granule and saves nothing: stop for a while. */
        uint64_t dirty = 0;
        for (size_t w = 0; w < words; w++) dirty += (uint64_t)__builtin_popcountll(r->cur[w]);
        if (was && (double)dirty >= HEAVY_SHARE * r->ngran) {
            if (++r->heavy >= HEAVY_RUN && r->protected_) {
                mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
                r->protected_ = false;
                r->off_left = OFF_COPIES;
                r->heavy = 0;
            }
        } else {
            r->heavy = 0;
        }
    }
    free(m.v);
    return e;
}

bool track_clean(const nm_pimc_reg *r, uintptr_t a, uintptr_t b)
{
    if (a < r->lo || b > r->hi || a >= b) return false;
    size_t g0 = (a - r->lo) / r->granule, g1 = (b - 1 - r->lo) / r->granule;
    for (size_t g = g0; g <= g1; g++)
        if (r->cur[g / 64] >> (g % 64) & 1) return false;
    return true;
}

uint64_t track_clean_bytes(const nm_pimc_reg *r, uintptr_t a, uintptr_t b)
{
    a = NM_MAX(a, r->lo);
    b = NM_MIN(b, r->hi);
    if (a >= b) return 0;
    uint64_t n = 0;
    size_t g0 = (a - r->lo) / r->granule, g1 = (b - 1 - r->lo) / r->granule;
    for (size_t g = g0; g <= g1; g++)
        if (!(r->cur[g / 64] >> (g % 64) & 1)) {
            uintptr_t s = NM_MAX(a, r->lo + g * r->granule), e = NM_MIN(b, r->lo + (g + 1) * r->granule);
            n += e - s;
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
