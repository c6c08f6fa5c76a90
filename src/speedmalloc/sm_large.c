/* SpeedMalloc: objects above the largest class: mapped with a header page, kept in
 * the server's hash map, cached for reuse, grown and shrunk with mremap.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* ---- large objects ------------------------------------------------------------ */
static size_t lmap_hash(uintptr_t k) { return (size_t)((k >> 12) * 0x9E3779B97F4A7C15ull); }
static bool lmap_grow(void)
{
    size_t ncap = sm_g.lmap_cap ? sm_g.lmap_cap * 2 : 1024;
    void *nm = sm_os_map(ncap * sizeof *sm_g.lmap);
    if (!nm) return false;
    __typeof__(sm_g.lmap) old = sm_g.lmap;
    size_t ocap = sm_g.lmap_cap;
    sm_g.lmap = nm;
    sm_g.lmap_cap = ncap;
    sm_g.lmap_used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].key <= 1) continue;
        size_t h = lmap_hash(old[i].key) & (ncap - 1);
        while (sm_g.lmap[h].key) h = (h + 1) & (ncap - 1);
        sm_g.lmap[h] = old[i];
        sm_g.lmap_used++;
    }
    if (old) munmap(old, ocap * sizeof *old);
    return true;
}
static bool lmap_put(uintptr_t k, struct large_hdr *h)
{
    if ((sm_g.lmap_used + 1) * 2 > sm_g.lmap_cap && !lmap_grow()) return false;
    size_t i = lmap_hash(k) & (sm_g.lmap_cap - 1);
    while (sm_g.lmap[i].key > 1) i = (i + 1) & (sm_g.lmap_cap - 1);
    if (sm_g.lmap[i].key == 0) sm_g.lmap_used++;
    sm_g.lmap[i].key = k;
    sm_g.lmap[i].hdr = h;
    return true;
}
static struct large_hdr *lmap_take(uintptr_t k)
{
    if (!sm_g.lmap_cap) return NULL;
    size_t i = lmap_hash(k) & (sm_g.lmap_cap - 1);
    while (sm_g.lmap[i].key) {
        if (sm_g.lmap[i].key == k) { sm_g.lmap[i].key = 1; return sm_g.lmap[i].hdr; }
        i = (i + 1) & (sm_g.lmap_cap - 1);
    }
    return NULL;
}
static size_t large_round(size_t len)
{
    if (len < ((size_t)1 << 20) || len > ((size_t)1 << 40)) return len;
    unsigned lg = 63u - (unsigned)__builtin_clzll(len);
    size_t step = (size_t)1 << (lg - 2);
    return (len + step - 1) & ~(step - 1);
}

void *sm_srv_large_malloc(size_t size, size_t align, int *err)
{
    if (align < PAGE_SIZE_OS) align = PAGE_SIZE_OS;
    size_t len;
    if (size > PTRDIFF_MAX - align - 2 * PAGE_SIZE_OS) { *err = ENOMEM; return NULL; }
    len = large_round((size + PAGE_SIZE_OS + (align - PAGE_SIZE_OS) + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1));
    uintptr_t base = 0;
    uint64_t recycled = 0;
    if (sm_g.lcache_n) sm_lcache_sweep(sm_mono_ns());
    /* Any cached mapping serves: its pages are resident, so reusing them costs no page faults
     * and no new RSS (a cache that only served near sizes kept the data cube's temporaries of
     * other sizes resident beside new mappings: 1.2-1.6x mimalloc's peak RSS). The best fit
     * is the smallest that is big enough (its excess beyond 2x is unmapped); else the biggest
     * one, grown with mremap (no copy; the new tail is fresh zero pages). */
    int fit = -1, grow = -1;
    for (unsigned i = 0; i < sm_g.lcache_n; i++) {
        size_t l = sm_g.lcache[i].len;
        if (l >= len) { if (fit < 0 || l < sm_g.lcache[fit].len) fit = (int)i; }
        else if (grow < 0 || l > sm_g.lcache[grow].len) grow = (int)i;
    }
    int pick = fit >= 0 ? fit : grow;
    if (pick >= 0) {
        uintptr_t b = sm_g.lcache[pick].base;
        size_t l = sm_g.lcache[pick].len;
        sm_g.lcache_bytes -= l;
        sm_g.lcache[pick] = sm_g.lcache[--sm_g.lcache_n];
        if (l > 2 * len) { /* keep 2x at most: the excess is resident memory nobody asked for */
            munmap((void *)(b + 2 * len), l - 2 * len);
            sm_g.st.mapped_bytes -= l - 2 * len;
            l = 2 * len;
        } else if (l < len) {
            void *nb = mremap((void *)b, l, len, MREMAP_MAYMOVE);
            if (nb == MAP_FAILED) { munmap((void *)b, l); sm_g.st.mapped_bytes -= l; b = 0; }
            else { b = (uintptr_t)nb; sm_g.st.mapped_bytes += len - l; l = len; }
        }
        if (b) { base = b; len = l; recycled = 1; }
    }
    if (!base) {
        base = (uintptr_t)sm_os_map(len);
        if (!base) { *err = ENOMEM; return NULL; }
        sm_g.st.mapped_bytes += len;
    }
    uintptr_t user = (base + PAGE_SIZE_OS + align - 1) & ~(uintptr_t)(align - 1);
    struct large_hdr *h = (struct large_hdr *)(user - PAGE_SIZE_OS);
    h->recycled = recycled;
    h->magic = LARGE_MAGIC;
    h->base = base;
    h->maplen = len;
    h->size = size;
    h->align = align;
    if (!lmap_put(user, h)) { munmap((void *)base, len); *err = ENOMEM; return NULL; }
    sm_reg_large_add(user);
    sm_g.st.large_live++;
    sm_g.st.large_allocs++;
    sm_g.st.large_live_bytes += size;
    return (void *)user;
}

void sm_srv_free_large(uintptr_t p)
{
    struct large_hdr *h = lmap_take(p);
    if (!h) {
        if (sm_g.registry[p >> SEG_SHIFT] == REG_KIND_SEG) { sm_srv_free_small(p); return; }
        sm_g.st.invalid_frees++;
        sm_report(&sm_g.reported_invalid, "free of a pointer that is not a live large object (server)", (void *)p);
        return;
    }
    sm_reg_large_del(p);
    sm_g.st.large_live--;
    sm_g.st.large_live_bytes -= h->size;
    uintptr_t base = h->base;
    size_t len = h->maplen;
    uint64_t now = sm_mono_ns();
    if (sm_g.lcache_n) sm_lcache_sweep(now);
    while (sm_g.lcache_n && (sm_g.lcache_n == LCACHE_N || sm_g.lcache_bytes + len > LCACHE_BYTES)) {
        unsigned old = 0; /* evict the oldest: recent sizes are the likely next requests */
        for (unsigned i = 1; i < sm_g.lcache_n; i++)
            if (sm_g.lcache[i].since < sm_g.lcache[old].since) old = i;
        munmap((void *)sm_g.lcache[old].base, sm_g.lcache[old].len);
        sm_g.st.mapped_bytes -= sm_g.lcache[old].len;
        sm_g.lcache_bytes -= sm_g.lcache[old].len;
        sm_g.lcache[old] = sm_g.lcache[--sm_g.lcache_n];
    }
    if (len <= LCACHE_BYTES / 4) {
        /* keep it for a while: programs often free and re-allocate large buffers */
        sm_g.lcache[sm_g.lcache_n].base = base;
        sm_g.lcache[sm_g.lcache_n].len = len;
        sm_g.lcache[sm_g.lcache_n].since = now;
        sm_g.lcache_n++;
        sm_g.lcache_bytes += len;
        return;
    }
    sm_g.st.mapped_bytes -= len;
    munmap((void *)base, len);
}

void *sm_srv_large_realloc(uintptr_t p, size_t size, int *err)
{
    struct large_hdr *h = lmap_take(p);
    if (!h) { sm_g.st.invalid_frees++; sm_report(&sm_g.reported_invalid, "realloc of an invalid pointer", (void *)p); *err = EINVAL; return NULL; }
    size_t need = (size + PAGE_SIZE_OS + (h->align - PAGE_SIZE_OS) + PAGE_SIZE_OS - 1) & ~(size_t)(PAGE_SIZE_OS - 1);
    if (size > PTRDIFF_MAX - h->align - 2 * PAGE_SIZE_OS) { lmap_put(p, h); *err = ENOMEM; return NULL; }
    uintptr_t user = p;
    if (need > h->maplen || (need < h->maplen / 2)) {
        size_t off = p - h->base, oldlen = h->maplen;
        void *nb = mremap((void *)h->base, oldlen, need, MREMAP_MAYMOVE);
        if (nb == MAP_FAILED) {
            lmap_put(p, h);
            if (need < h->maplen) return (void *)p; /* shrinking in place is always possible */
            *err = ENOMEM;
            return NULL;
        }
        sm_g.st.mapped_bytes += need;
        sm_g.st.mapped_bytes -= oldlen; /* h may have moved with the mapping */
        user = (uintptr_t)nb + off;
        h = (struct large_hdr *)(user - PAGE_SIZE_OS);
        h->base = (uintptr_t)nb;
        h->maplen = need;
        if (user != p) { sm_reg_large_del(p); sm_reg_large_add(user); }
    }
    sm_g.st.large_live_bytes += size;
    sm_g.st.large_live_bytes -= h->size;
    h->size = size;
    if (!lmap_put(user, h)) { *err = ENOMEM; return NULL; } /* cannot happen: a slot was just freed */
    return (void *)user;
}

void sm_srv_free_any(uintptr_t p)
{
    unsigned k = (p >> ADDR_BITS) ? 0 : sm_g.registry[p >> SEG_SHIFT];
    if (k == REG_KIND_SEG) sm_srv_free_small(p);
    else if (k >= 2) sm_srv_free_large(p);
    else { sm_g.st.invalid_frees++; sm_report(&sm_g.reported_invalid, "free of a pointer not from this allocator (server)", (void *)p); }
}
