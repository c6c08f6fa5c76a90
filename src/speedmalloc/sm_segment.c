/* SpeedMalloc: segments, slices and pages: the server-private free bitmaps, page
 * ownership, taking small blocks back, returning empty pages to the OS (decay).
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

/* Everything here runs only on the metadata owner: the server thread, or a client
 * holding srv_lock (inline mode). */
struct segment *sm_seg_new(void)
{
    uintptr_t raw = (uintptr_t)sm_os_map(2 * SEG_SIZE);
    if (!raw) return NULL;
    uintptr_t a = (raw + SEG_SIZE - 1) & ~(SEG_SIZE - 1);
    if (a > raw) munmap((void *)raw, a - raw);
    if (raw + 2 * SEG_SIZE > a + SEG_SIZE) munmap((void *)(a + SEG_SIZE), raw + 2 * SEG_SIZE - (a + SEG_SIZE));
    struct segment *s = (struct segment *)a;
    s->magic = SEG_MAGIC;
    s->si = sm_window_place(a, s->slice_info); /* all zero: no pages yet */
    s->free_slices = ~1ull;
    s->next = sm_g.segs;
    sm_g.segs = s;
    sm_g.st.segments++;
    sm_g.st.mapped_bytes += SEG_SIZE;
    sm_reg_set(a, REG_KIND_SEG);
    return s;
}

void sm_list_push(struct page **head, struct page *pg)
{
    pg->prev = NULL;
    pg->next = *head;
    if (pg->next) pg->next->prev = pg;
    *head = pg;
    pg->list = head;
}
void sm_list_remove(struct page *pg)
{
    if (pg->prev) pg->prev->next = pg->next;
    else *pg->list = pg->next;
    if (pg->next) pg->next->prev = pg->prev;
    pg->list = NULL;
}
void sm_page_set_owner(struct page *pg, struct client *c)
{
    struct segment *s = (struct segment *)(pg->start & ~(SEG_SIZE - 1));
    unsigned i = (unsigned)((pg->start - (uintptr_t)s) >> SLICE_SHIFT);
    pg->owner = c ? c->id : 0;
    pg->owner_gen = c ? c->sv_gen : 0;
    for (unsigned k = 0; k < pg->nslices; k++) /* only the metadata owner writes slice words */
        STORE_REL(&s->si[i + k], SI_WITH_OWNER(s->si[i + k], pg->owner));
}
/* The page's owner if it is still the same live thread. */
struct client *sm_page_owner(const struct page *pg)
{
    if (!pg->owner) return NULL;
    struct client *c = sm_g.clients[pg->owner - 1];
    return c->sv_gen == pg->owner_gen && LOAD_ACQ(&c->state) == ST_ACTIVE ? c : NULL;
}

struct page *sm_page_new(unsigned cls)
{
    unsigned ns = sm_g.cls_nslices[cls];
    uint64_t run = ns == 64 ? ~0ull : ((1ull << ns) - 1);
    /* First slices that are free but still resident (a page emptied less than the decay
     * ago: reusing them costs no page faults and no RSS), then any free slices, then a new
     * segment. Without the first pass, medium pages (up to 32 slices) landed in fresh
     * memory while freed slices elsewhere stayed resident: the data-cube workload peaked
     * at 1.7x mimalloc's RSS. */
    for (int attempt = 0; attempt < 3; attempt++) {
        for (struct segment *s = sm_g.segs; s; s = s->next) {
            uint64_t fs = s->free_slices & (attempt == 0 ? s->dirty_slices : ~0ull);
            if (!fs) continue;
            for (unsigned i = 1; i + ns <= SLICES; i++) {
                if (((fs >> i) & run) != run) continue;
                s->free_slices &= ~(run << i);
                s->dirty_slices &= ~(run << i);
                struct page *pg = &s->pages[i];
                pg->start = (uintptr_t)s + ((uintptr_t)i << SLICE_SHIFT);
                pg->cls = cls;
                pg->nslices = ns;
                pg->capacity = (uint32_t)((ns * SLICE_SIZE) / sm_g.cls_size[cls]);
                pg->nfree = pg->capacity;
                memset(pg->free_bits, 0, sizeof pg->free_bits);
                memset(pg->free_bits, 0xff, (pg->capacity / 64) * sizeof(uint64_t));
                if (pg->capacity % 64) pg->free_bits[pg->capacity / 64] = (1ull << (pg->capacity % 64)) - 1;
                for (unsigned k = 0; k < ns; k++) STORE_REL(&s->si[i + k], SI_MAKE(cls, pg->start, 0));
                sm_g.st.pages_in_use++;
                sm_page_set_owner(pg, NULL);
                sm_list_push(&sm_g.partial[cls], pg);
                return pg;
            }
        }
        if (attempt == 1 && !sm_seg_new()) return NULL;
    }
    return NULL;
}

void sm_page_release(struct segment *s, struct page *pg)
{
    unsigned i = (unsigned)((pg->start - (uintptr_t)s) >> SLICE_SHIFT);
    uint64_t run = ((pg->nslices == 64) ? ~0ull : ((1ull << pg->nslices) - 1)) << i;
    for (unsigned k = 0; k < pg->nslices; k++) STORE_REL(&s->si[i + k], 0); /* not a page */
    s->free_slices |= run;
    s->dirty_slices |= run;
    uint32_t now_ms = (uint32_t)(sm_mono_ns() >> 20);
    for (unsigned k = 0; k < pg->nslices; k++) s->dirty_ms[i + k] = now_ms;
    sm_g.dirty_pages++;
    sm_g.st.pages_in_use--;
}

/* Unmaps cached large mappings older than LCACHE_DECAY_NS. */
void sm_lcache_sweep(uint64_t now)
{
    for (unsigned i = 0; i < sm_g.lcache_n;) {
        if (now - sm_g.lcache[i].since < LCACHE_DECAY_NS) { i++; continue; }
        munmap((void *)sm_g.lcache[i].base, sm_g.lcache[i].len);
        sm_g.st.mapped_bytes -= sm_g.lcache[i].len;
        sm_g.st.madvised_bytes += sm_g.lcache[i].len;
        sm_g.lcache_bytes -= sm_g.lcache[i].len;
        sm_g.lcache[i] = sm_g.lcache[--sm_g.lcache_n];
    }
}

/* Return the slices of pages that stayed empty for DECAY_NS to the OS (and old cached
 * large mappings). */
void sm_decay_sweep(uint64_t now)
{
    sm_g.last_sweep = now;
    sm_lcache_sweep(now);
    if (!sm_g.dirty_pages) return;
    uint64_t left = 0;
    uint32_t now_ms = (uint32_t)(now >> 20), decay_ms = (uint32_t)(DECAY_NS >> 20);
    for (struct segment *s = sm_g.segs; s; s = s->next) {
        if (!s->dirty_slices) continue;
        uint64_t d = 0; /* the dirty slices that are old enough */
        for (uint64_t x = s->dirty_slices; x; x &= x - 1) {
            unsigned i = (unsigned)__builtin_ctzll(x);
            if (now_ms - s->dirty_ms[i] >= decay_ms) d |= 1ull << i;
        }
        s->dirty_slices &= ~d;
        if (s->dirty_slices) left++;
        while (d) {
            unsigned i = (unsigned)__builtin_ctzll(d);
            unsigned j = i;
            while (j < SLICES && (d >> j) & 1) j++;
            madvise((char *)s + ((uintptr_t)i << SLICE_SHIFT), (uintptr_t)(j - i) << SLICE_SHIFT, MADV_DONTNEED);
            sm_g.st.madvised_bytes += (uint64_t)(j - i) << SLICE_SHIFT;
            d &= (j == 64) ? 0 : ~0ull << j;
        }
    }
    sm_g.dirty_pages = left;
}

static SM_SLOW void srv_free_error(uintptr_t p, int why)
{
    if (why == 2) {
        sm_g.st.double_frees++;
        sm_report(&sm_g.reported_double, "double free of", (void *)p);
        return;
    }
    sm_g.st.invalid_frees++;
    sm_report(&sm_g.reported_invalid,
              why ? "free of a pointer that is not a block start (server)" : "free of a pointer outside any page (server)",
              (void *)p);
}
/* A page a free made empty, or that had none free (on no list): settle it. */
static inline bool settle_due(const struct page *pg) { return pg->nfree == pg->capacity || !pg->list; }
static SM_SLOW void srv_page_settle(struct segment *s, struct page *pg)
{
    if (pg->nfree == pg->capacity) {
        /* Empty: back to the segment. A one-slice page (64 KiB) that is its list's only page
         * stays, to avoid thrash; a bigger page always goes (kept empty, medium pages of up
         * to 2 MiB each held 40 MiB at the data cube's peak: 1.7x mimalloc's RSS). */
        if (!pg->list || *pg->list != pg || pg->next || pg->nslices > 1) {
            if (pg->list) sm_list_remove(pg);
            sm_page_set_owner(pg, NULL);
            sm_page_release(s, pg);
        }
    } else if (!pg->list) {
        struct client *o = sm_page_owner(pg);
        if (!o && pg->owner) sm_page_set_owner(pg, NULL);
        sm_list_push(o ? &o->sv_partial[pg->cls] : &sm_g.partial[pg->cls], pg);
    }
}

/* Takes back one small block (p is in one of our segments: the caller checked the window
 * or the registry). Validates it against the slice word (a block start of a live page)
 * and the free bitmap (double free). The block-start check is free()'s (sm_types.h): the
 * low half of off * mul tests it, and for a block start the high half is its index. */
void sm_srv_free_small(uintptr_t p)
{
    struct segment *s = (struct segment *)(p & ~(SEG_SIZE - 1));
    uint64_t w = s->si[(p >> SLICE_SHIFT) & (SLICES - 1)];
    unsigned k = SI_K(w); /* class + 1, 0 = no page */
    if (SM_UNLIKELY(s->magic != SEG_MAGIC || k - 1 >= sm_g.nclass)) { srv_free_error(p, 0); return; }
    uint32_t off = (uint32_t)p - (uint32_t)w;
    unsigned __int128 m = (unsigned __int128)off * sm_g.cls_chk[k].mul;
    if (SM_UNLIKELY((uint64_t)m >= sm_g.cls_chk[k].lim)) { srv_free_error(p, 1); return; }
    uint64_t idx = (uint64_t)(m >> 64);
    struct page *pg = &s->pages[SI_PSTART(w)];
    uint64_t bit = 1ull << (idx & 63), *word = &pg->free_bits[idx >> 6];
    if (SM_UNLIKELY(*word & bit)) { srv_free_error(p, 2); return; }
    *word |= bit;
    pg->nfree++;
    sm_g.st.bytes_out -= sm_g.cls_size[k - 1];
    if (SM_UNLIKELY(settle_due(pg))) srv_page_settle(s, pg);
}

/* A client's free ring from index h to t (one batch of what sm_drain_frees takes): each
 * block as sm_srv_free_small would take it, with what a block's page gives remembered
 * per class for the batch (a small table indexed by class, keyed by the slice word and
 * segment): the segment is checked (registry, magic) when it changes, and a block whose
 * slice word matches its class's entry needs only the block-start multiply and the
 * double-free bit; the byte count is written once. A thread's queued frees come from a
 * few pages, one per class (xmalloc-test 2t: every free goes through here; 73 -> 54
 * instructions per block, callgrind). Pages are settled (put on a list, or released) when
 * their entry is replaced and at the end, which leaves the same state as settling after
 * each block: nothing else reads the page meanwhile, and a block of a fully free page is
 * a double free either way. Entries that are not small blocks of a segment take the
 * general path. */
#define FR_WAYS 16
void sm_srv_free_ring(void *const *ring, uint32_t h, uint32_t t)
{
    struct {
        uint64_t w;          /* the slice word that selects this page (0: empty) */
        struct segment *s;
        struct page *pg;
        uintptr_t base;
        uint64_t mul, lim, size;
    } e[FR_WAYS];
    for (unsigned i = 0; i < FR_WAYS; i++) e[i].w = 0;
    struct segment *seg = NULL; /* the last segment checked */
    uint64_t out = 0;
    for (; h != t; h++) {
        uintptr_t p = (uintptr_t)ring[h % FRING];
        struct segment *s = (struct segment *)(p & ~(SEG_SIZE - 1));
        if (SM_UNLIKELY(s != seg)) {
            unsigned r = (p >> ADDR_BITS) ? 0 : sm_g.registry[p >> SEG_SHIFT];
            if (r != REG_KIND_SEG || s->magic != SEG_MAGIC) { sm_srv_free_any(p); continue; } /* large, or the report */
            seg = s;
        }
        uint64_t w = s->si[(p >> SLICE_SHIFT) & (SLICES - 1)];
        unsigned k = SI_K(w);
        if (SM_UNLIKELY(k - 1 >= sm_g.nclass)) { srv_free_error(p, 0); continue; }
        unsigned x = k % FR_WAYS;
        if (SM_UNLIKELY(e[x].w != w || e[x].s != s)) { /* settle the entry's page, take this one */
            if (e[x].w && settle_due(e[x].pg)) srv_page_settle(e[x].s, e[x].pg);
            e[x].w = w;
            e[x].s = s;
            e[x].pg = &s->pages[SI_PSTART(w)];
            e[x].base = (uint32_t)w;
            e[x].mul = sm_g.cls_chk[k].mul;
            e[x].lim = sm_g.cls_chk[k].lim;
            e[x].size = sm_g.cls_size[k - 1];
        }
        uint32_t off = (uint32_t)p - (uint32_t)e[x].base;
        unsigned __int128 m = (unsigned __int128)off * e[x].mul;
        if (SM_UNLIKELY((uint64_t)m >= e[x].lim)) { srv_free_error(p, 1); continue; }
        uint64_t idx = (uint64_t)(m >> 64);
        struct page *pg = e[x].pg;
        uint64_t bit = 1ull << (idx & 63), *word = &pg->free_bits[idx >> 6];
        if (SM_UNLIKELY(*word & bit)) { srv_free_error(p, 2); continue; }
        *word |= bit;
        pg->nfree++;
        out += e[x].size;
    }
    for (unsigned i = 0; i < FR_WAYS; i++)
        if (e[i].w && settle_due(e[i].pg)) srv_page_settle(e[i].s, e[i].pg);
    sm_g.st.bytes_out -= out;
}

/* The server thread should never allocate; if libc makes it, serve it directly. */
void *sm_server_self_malloc(unsigned cls)
{
    struct page *pg = sm_g.partial[cls];
    if (!pg && !(pg = sm_page_new(cls))) return NULL;
    for (unsigned w = 0; w < 64; w++) {
        if (!pg->free_bits[w]) continue;
        unsigned b = (unsigned)__builtin_ctzll(pg->free_bits[w]);
        pg->free_bits[w] &= pg->free_bits[w] - 1;
        if (!--pg->nfree) sm_list_remove(pg);
        sm_g.st.bytes_out += sm_g.cls_size[cls];
        return (void *)(pg->start + (uintptr_t)(w * 64 + b) * sm_g.cls_size[cls]);
    }
    return NULL;
}

