/* PIM-malloc core: buddy backend, metadata stores, thread caches.
 * Paper sections: III-B (straw-man), IV-A (SW), IV-B (HW/SW), VI-D (lazy). */
#include <stdlib.h>
#include <string.h>

#include "nearmem/common/bitmap.h"
#include "nearmem/common/util.h"
#include "pimm_internal.h"

/* The allocator's compute is costed by nearmem-dpu-cc from its compiled code
 * when it runs on the emulated DPU (docs/pim-machine.md, "Costing"); there
 * are no hand-written instruction counts. The buddy cache is modeled
 * hardware (its functions are NM_PIMM_HW: not costed, each instruction
 * issued on the machine's unit); statistics are the emulator's
 * instrumentation (STAT: not costed either). */

static const char *const variant_names[NM_PIMM_VARIANT_COUNT] = {"strawman", "sw",     "hwsw",
                                                                 "lazy",     "pinned", "adaptive"};

const char *nm_pimm_variant_name(nm_pimm_variant v)
{
    return (unsigned)v < NM_PIMM_VARIANT_COUNT ? variant_names[v] : "?";
}

int nm_pimm_variant_parse(const char *name)
{
    for (int i = 0; i < NM_PIMM_VARIANT_COUNT; i++)
        if (name && strcmp(name, variant_names[i]) == 0) return i;
    return -1;
}

void nm_pimm_config_default(nm_pimm_config *c, nm_pimm_variant v, uint32_t heap_base)
{
    memset(c, 0, sizeof *c);
    c->variant = v;
    c->heap_base = heap_base;
    c->heap_size = 32u << 20;
    c->tasklets = 16;
    c->strawman_grain = 32;
    c->swbuf_bytes = 256;
    c->bc_entries = 16;
    c->pin_budget = 4096;
}

/* ---------------------------------------------------------------- env glue */

/* DMA in legal pieces (<= 2048 bytes each). */
static void dma_rd(nm_pimm *h, uint32_t addr, void *dst, uint32_t n)
{
    uint8_t *d = dst;
    while (n) {
        uint32_t k = n > 2048 ? 2048 : n;
        ENV_READ(h, addr, d, k);
        addr += k, d += k, n -= k;
    }
}

static void dma_wr(nm_pimm *h, uint32_t addr, const void *src, uint32_t n)
{
    const uint8_t *s = src;
    while (n) {
        uint32_t k = n > 2048 ? 2048 : n;
        ENV_WRITE(h, s, addr, k);
        addr += k, s += k, n -= k;
    }
}

/* ------------------------------------------------------- metadata stores */

/* The 8-byte MRAM pair that holds tree word w (DMA is 8-byte granular). */
static uint64_t pair_read(nm_pimm *h, uint32_t w)
{
    uint64_t v;
    dma_rd(h, h->tree_base + (w & ~1u) * 4, &v, 8);
    STAT(h->meta_rd, 8);
    return v;
}

static void pair_write(nm_pimm *h, uint32_t w, uint64_t v)
{
    dma_wr(h, h->tree_base + (w & ~1u) * 4, &v, 8);
    STAT(h->meta_wr, 8);
}

static inline uint32_t pair_get(uint64_t p, uint32_t w) { return (uint32_t)(p >> ((w & 1) * 32)); }
static inline uint64_t pair_put(uint64_t p, uint32_t w, uint32_t v)
{
    unsigned s = (w & 1) * 32;
    return (p & ~((uint64_t)0xffffffffu << s)) | ((uint64_t)v << s);
}

/* Coarse buffer (Sec. III-B, Fig. 13a): a miss flushes the whole buffer and
 * reloads the aligned region that holds the word. The flush writes the buffer
 * back on every miss, as the paper describes it (Fig. 13a, lines 8-9: "Flush
 * all the metadata from SW buff."; Sec. IV-B: "a miss at the software-managed
 * buffer leads to flushing this buffer and a subsequent reloading"); the paper
 * names no dirty bit. Until the fidelity audit the buffer was written back
 * only when modified; cfg.swbuf_dirty_only keeps that as an option. */
static uint32_t *sb_word(nm_pimm *h, uint32_t w)
{
    STAT(h->meta_accesses, 1);
    if (h->sb_valid && w - h->sb_w0 < h->sb_words) {
        STAT(h->meta_hits, 1);
        return &h->sb[w - h->sb_w0];
    }
    /* The buffer is WRAM (the allocator's arena on the DPU): DMA goes
     * straight into it. */
    uint32_t bytes = h->sb_words * 4;
    if (h->sb_valid && (h->sb_dirty || !h->cfg.swbuf_dirty_only)) {
        dma_wr(h, h->tree_base + h->sb_w0 * 4, h->sb, bytes);
        STAT(h->meta_wr, bytes);
    }
    h->sb_w0 = w - w % h->sb_words;
    dma_rd(h, h->tree_base + h->sb_w0 * 4, h->sb, bytes);
    STAT(h->meta_rd, bytes);
    h->sb_valid = true;
    h->sb_dirty = false;
    return &h->sb[w - h->sb_w0];
}

/* Buddy cache (Sec. IV-B, Fig. 13b/14): fully associative, LRU, 4-byte
 * entries, write-back; a miss fetches only the requested word (an 8-byte DMA,
 * the smallest legal one). The cache is hardware: the functions marked
 * NM_PIMM_HW below are its instructions (init_bc, lookup_bc, read_bc,
 * write_bc; Sec. IV-C), each one issued on the machine's unit (1 cycle,
 * Sec. V) and not costed as code. The software around them (Fig. 13b:
 * the miss path's DMA, the write-back of a dirty victim) is costed. */
NM_PIMM_HW static void bc_init(nm_pimm *h)
{
    for (unsigned i = 0; i < h->bc_n; i++) h->bc[i].valid = 0;
    ENV_HW(h, 1);
}

/* lookup_bc: the entry holding tree word w (and it becomes the most
 * recently used), or -1. */
NM_PIMM_HW static int bc_lookup(nm_pimm *h, uint32_t w)
{
    ENV_HW(h, 1);
    for (unsigned i = 0; i < h->bc_n; i++) /* CAM: one parallel lookup in hardware */
        if (h->bc[i].valid && h->bc[i].tag == w) {
            h->bc[i].lru = ++h->bc_clock;
            return (int)i;
        }
    return -1;
}

/* read_bc; `clean` also marks the entry written back (a partner word that
 * goes to MRAM with its pair). */
NM_PIMM_HW static uint32_t bc_read(nm_pimm *h, int i, bool clean)
{
    ENV_HW(h, 1);
    if (clean) h->bc[i].dirty = 0;
    return h->bc[i].val;
}

/* write_bc of a new value into entry i (dirty: write-back). */
NM_PIMM_HW static void bc_write(nm_pimm *h, int i, uint32_t v)
{
    ENV_HW(h, 1);
    h->bc[i].val = v;
    h->bc[i].dirty = 1;
}

/* write_bc after a miss: the LRU entry makes room for word w (value v,
 * clean); returns its index, and the evicted word when it was dirty. */
NM_PIMM_HW static int bc_fill(nm_pimm *h, uint32_t w, uint32_t v, bool *ev_dirty, uint32_t *ev_tag, uint32_t *ev_val)
{
    ENV_HW(h, 1);
    bc_entry *victim = NULL;
    for (unsigned i = 0; i < h->bc_n; i++) {
        bc_entry *e = &h->bc[i];
        if (!victim || !e->valid || (victim->valid && e->lru < victim->lru)) victim = e;
        if (!e->valid) break;
    }
    *ev_dirty = victim->valid && victim->dirty;
    *ev_tag = victim->tag;
    *ev_val = victim->val;
    victim->tag = w;
    victim->val = v;
    victim->valid = 1;
    victim->dirty = 0;
    victim->lru = ++h->bc_clock;
    return (int)(victim - h->bc);
}

/* The entry for word w, fetched from MRAM on a miss (Fig. 13b). */
static int bc_word(nm_pimm *h, uint32_t w)
{
    STAT(h->meta_accesses, 1);
    int i = bc_lookup(h, w);
    if (i >= 0) {
        STAT(h->meta_hits, 1);
        return i;
    }
    uint32_t v = pair_get(pair_read(h, w), w);
    bool dirty;
    uint32_t et, ev;
    i = bc_fill(h, w, v, &dirty, &et, &ev);
    if (dirty) { /* write the evicted word back with its pair partner */
        uint32_t partner = et ^ 1u;
        int pi = bc_lookup(h, partner);
        uint64_t p = pi >= 0 ? pair_put(0, partner, bc_read(h, pi, true)) : pair_read(h, et);
        pair_write(h, et, pair_put(p, et, ev));
    }
    return i;
}

/* Pinned (beyond the paper): the top words of the tree live in WRAM and are
 * never moved; deeper words are read and written with single 8-byte DMAs. */
static inline bool pinned(const nm_pimm *h, uint32_t w) { return w < h->pin_words; }

static uint32_t node_get(nm_pimm *h, unsigned t, uint32_t node)
{
    (void)t;
    uint32_t w = node >> 4, sh = (node & 15) * 2, word;
    switch (h->meta_kind) {
    case META_SWBUF: word = *sb_word(h, w); break;
    case META_BCACHE: word = bc_read(h, bc_word(h, w), false); break;
    default:
        STAT(h->meta_accesses, 1);
        if (pinned(h, w)) {
            STAT(h->meta_hits, 1);
            word = h->pin[w];
        } else {
            word = pair_get(pair_read(h, w), w);
        }
    }
    return (word >> sh) & 3u;
}

static void node_set(nm_pimm *h, unsigned t, uint32_t node, uint32_t v)
{
    (void)t;
    uint32_t w = node >> 4, sh = (node & 15) * 2, mask = 3u << sh;
    switch (h->meta_kind) {
    case META_SWBUF: {
        uint32_t *p = sb_word(h, w);
        *p = (*p & ~mask) | (v << sh);
        h->sb_dirty = true;
        break;
    }
    case META_BCACHE: {
        int i = bc_word(h, w);
        bc_write(h, i, (bc_read(h, i, false) & ~mask) | (v << sh));
        break;
    }
    default:
        STAT(h->meta_accesses, 1);
        if (pinned(h, w)) {
            STAT(h->meta_hits, 1);
            h->pin[w] = (h->pin[w] & ~mask) | (v << sh);
        } else {
            uint64_t p = pair_read(h, w);
            uint32_t word = pair_get(p, w);
            pair_write(h, w, pair_put(p, w, (word & ~mask) | (v << sh)));
        }
    }
}

/* ------------------------------------------------------------ buddy tree */

static inline bool is_full(uint32_t s) { return s >= ND_FULL; }

static inline uint32_t node_offset(const nm_pimm *h, uint32_t node, unsigned depth)
{
    return (node - (1u << depth)) * (h->cfg.heap_size >> depth);
}

/* After node became ALLOC or FULL: propagate FULL upwards while both children are full. */
static void fix_full(nm_pimm *h, unsigned t, uint32_t node, uint32_t state)
{
    while (node > 1) {
        uint32_t sib = node_get(h, t, node ^ 1u), parent = node >> 1;
        uint32_t ns = is_full(state) && is_full(sib) ? ND_FULL : ND_PART;
        if (node_get(h, t, parent) == ns) return;
        node_set(h, t, parent, ns);
        node = parent;
        state = ns;
    }
}

/* Depth-first search for a FREE node at `target` depth, leftmost first,
 * splitting a FREE ancestor on the way. Returns the heap offset or UINT32_MAX. */
static uint32_t buddy_alloc(nm_pimm *h, unsigned t, unsigned target)
{
    uint32_t node = 1;
    unsigned depth = 0;
    STAT(h->backend_ops, 1);
    for (;;) {
        uint32_t s = node_get(h, t, node);
        if (s == ND_FREE) {
            if (depth < target) node_set(h, t, node, ND_PART);
            while (depth < target) {
                node_set(h, t, 2 * node + 1, ND_FREE);
                node *= 2;
                depth++;
                if (depth < target) node_set(h, t, node, ND_PART);
            }
            node_set(h, t, node, ND_ALLOC);
            fix_full(h, t, node, ND_ALLOC);
            uint32_t bs = h->cfg.heap_size >> target;
            stat_reserve(h, bs);
            return node_offset(h, node, depth);
        }
        if (s == ND_PART && depth < target) {
            node *= 2;
            depth++;
            continue;
        }
        while (node & 1u) { /* backtrack to the next unvisited right sibling */
            if (node == 1) return UINT32_MAX;
            node >>= 1;
            depth--;
        }
        node++;
    }
}

static nm_err buddy_free(nm_pimm *h, unsigned t, uint32_t off)
{
    uint32_t node = 1, bs = h->cfg.heap_size;
    unsigned depth = 0;
    STAT(h->backend_ops, 1);
    for (;;) {
        uint32_t s = node_get(h, t, node);
        if (s == ND_ALLOC) {
            if (off & (bs - 1)) {
                STAT(h->ts[t].bad_free, 1);
                return nm_fail(NM_EBADFREE, "pimFree: offset %u is inside a %u-byte block, not its start", off, bs);
            }
            break;
        }
        if (s == ND_FREE) {
            STAT(h->ts[t].double_free, 1);
            return nm_fail(NM_EDOUBLEFREE, "pimFree: offset %u is not allocated (double free?)", off);
        }
        if (depth == h->maxdepth) return nm_fail(NM_ECORRUPT, "pimFree: buddy leaf %u is split", node);
        bs >>= 1;
        node = 2 * node + ((off & bs) ? 1u : 0u);
        depth++;
    }
    stat_release(h, bs);
    node_set(h, t, node, ND_FREE);
    while (node > 1 && node_get(h, t, node ^ 1u) == ND_FREE) { /* merge buddies */
        node >>= 1;
        node_set(h, t, node, ND_FREE);
    }
    while (node > 1) { /* ancestors that were FULL now have free space below */
        node >>= 1;
        if (node_get(h, t, node) == ND_PART) break;
        node_set(h, t, node, ND_PART);
    }
    return NM_OK;
}

static unsigned depth_for(const nm_pimm *h, uint32_t bytes)
{
    return nm_log2_floor(h->cfg.heap_size) - nm_log2_floor(bytes);
}

/* Backend allocation under the mutex: MRAM address or 0. */
static uint32_t backend_alloc(nm_pimm *h, unsigned t, uint32_t bytes)
{
    ENV_LOCK(h);
    uint32_t off = buddy_alloc(h, t, depth_for(h, bytes));
    ENV_UNLOCK(h);
    return off == UINT32_MAX ? 0 : h->cfg.heap_base + off;
}

static nm_err backend_free(nm_pimm *h, unsigned t, uint32_t addr)
{
    ENV_LOCK(h);
    nm_err e = buddy_free(h, t, addr - h->cfg.heap_base);
    ENV_UNLOCK(h);
    return e;
}

/* ------------------------------------------------------ block table (MRAM) */

static inline uint32_t rec_addr(const nm_pimm *h, uint32_t b) { return h->blk_base + b * (uint32_t)sizeof(blkrec); }
static inline uint32_t blk_addr(const nm_pimm *h, uint32_t b) { return h->cfg.heap_base + b * NM_PIMM_BLOCK; }

static void rec_read(nm_pimm *h, unsigned t, uint32_t b, blkrec *r, uint32_t bytes)
{
    dma_rd(h, rec_addr(h, b), r, bytes);
    STAT(h->ts[t].blk_dma, bytes);
}

/* Writes the record from byte `from` (0 or 8: the owner word is written only
 * when a block changes hands). */
static void rec_write(nm_pimm *h, unsigned t, uint32_t b, const blkrec *r, uint32_t from, uint32_t bytes)
{
    dma_wr(h, rec_addr(h, b) + from, (const uint8_t *)r + from, bytes);
    STAT(h->ts[t].blk_dma, bytes);
}

static void rec_set_owner(nm_pimm *h, unsigned t, uint32_t b, uint8_t flags, uint8_t owner, uint8_t cls)
{
    blkrec r = {.flags = flags, .owner = owner, .cls = cls};
    rec_write(h, t, b, &r, 0, 8);
}

/* Update the prev (which=0) or next (which=1) link of block b's record. */
static void rec_set_link(nm_pimm *h, unsigned t, uint32_t b, int which, uint16_t v)
{
    blkrec r;
    dma_rd(h, rec_addr(h, b) + 8, &r.nfree, 8);
    if (which) r.next = v;
    else r.prev = v;
    dma_wr(h, rec_addr(h, b) + 8, &r.nfree, 8);
    STAT(h->ts[t].blk_dma, 16);
}

/* ------------------------------------------------------------ thread cache */

static void tc_activate(nm_pimm *h, tclass *c, unsigned cls, uint32_t b)
{
    c->active = b + 1;
    c->nfree = (uint16_t)h->slots[cls];
    memset(c->bits, 0, sizeof c->bits);
    nm_bitmap_set_range(c->bits, 0, h->slots[cls]);
}

static inline void lock_unless(nm_pimm *h, unsigned t, bool locked)
{
    (void)t;
    if (locked) return;
    ENV_LOCK(h);
}

static inline void unlock_unless(nm_pimm *h, bool locked)
{
    if (!locked) ENV_UNLOCK(h);
}

/* No free by another tasklet is pending in block b (mutex held). */
static bool no_remote_pending(nm_pimm *h, unsigned t, uint32_t b)
{
    uint64_t rb[8];
    dma_rd(h, rec_addr(h, b) + REC_RBITS, rb, sizeof rb);
    STAT(h->ts[t].blk_dma, sizeof rb);
    for (int i = 0; i < 8; i++)
        if (rb[i]) return false;
    return true;
}

/* Give a fully free thread-cache block back to the buddy backend, unless a
 * free by another tasklet into it is still pending (that free can only be a
 * double free, found when the owner applies it; keeping the block means it can
 * never hit a new owner's data). The owner word is cleared under the mutex,
 * where other tasklets look at it. Returns whether the block went back. */
static bool tc_return_block(nm_pimm *h, unsigned t, uint32_t b, bool locked)
{
    lock_unless(h, t, locked);
    bool ok = no_remote_pending(h, t, b);
    if (ok) {
        rec_set_owner(h, t, b, 0, 0, 0);
        (void)buddy_free(h, t, blk_addr(h, b) - h->cfg.heap_base);
    }
    unlock_unless(h, locked);
    return ok;
}

/* The active block of class cls is exhausted: retire it to the block table and
 * take an owned block with free slots, the spare, or a new block. */
static bool tc_refill(nm_pimm *h, unsigned t, unsigned cls)
{
    tclass *c = &h->tc[t].c[cls];
    if (c->active) { /* retired full: the record now holds its state (and its class) */
        blkrec r = {.flags = BLK_TC, .owner = (uint8_t)t, .cls = (uint8_t)cls};
        rec_write(h, t, c->active - 1, &r, 0, 48);
        c->active = 0;
    }
    if (c->partial) {
        uint32_t b = c->partial - 1u;
        blkrec r;
        rec_read(h, t, b, &r, 48);
        c->partial = r.next;
        if (r.next) rec_set_link(h, t, r.next - 1u, 0, 0);
        c->active = b + 1;
        c->nfree = r.nfree;
        memcpy(c->bits, r.bits, sizeof c->bits);
        STAT(h->ts[t].tc_hits, 1);
        return true;
    }
    if (h->tc[t].spare) {
        /* No DMA: the record already names the owner (written at init) and
         * gets the class when the block is retired; until then only the
         * owner's fast path touches the block and others' frees are refused. */
        uint32_t b = h->tc[t].spare - 1u;
        h->tc[t].spare = 0;
        tc_activate(h, c, cls, b);
        STAT(h->ts[t].tc_spare, 1);
        return true;
    }
    uint32_t a = backend_alloc(h, t, NM_PIMM_BLOCK);
    if (!a) return false;
    uint32_t b = (a - h->cfg.heap_base) / NM_PIMM_BLOCK;
    rec_set_owner(h, t, b, BLK_TC, (uint8_t)t, (uint8_t)cls);
    tc_activate(h, c, cls, b);
    STAT(h->ts[t].tc_misses, 1);
    return true;
}

static uint32_t tc_alloc(nm_pimm *h, unsigned t, unsigned cls)
{
    tclass *c = &h->tc[t].c[cls];
    if (c->nfree == 0 || !c->active) {
        if (!tc_refill(h, t, cls)) return 0;
    } else {
        STAT(h->ts[t].tc_hits, 1);
    }
    size_t i = nm_bitmap_find_first_set(c->bits, h->slots[cls], 0);
    nm_bitmap_clear(c->bits, i);
    c->nfree--;
    return blk_addr(h, c->active - 1) + (uint32_t)i * h->sc.size[cls];
}

/* Validate ptr against a block's slot bitmap; returns the slot or sets *err. */
static int slot_of(nm_pimm *h, unsigned t, unsigned cls, uint32_t b, uint32_t ptr, const uint64_t *bits, nm_err *err)
{
    uint32_t off = ptr - blk_addr(h, b), size = (uint32_t)h->sc.size[cls];
    if (off % size || off / size >= h->slots[cls]) {
        STAT(h->ts[t].bad_free, 1);
        *err = nm_fail(NM_EBADFREE, "pimFree: 0x%x is not the start of a %u-byte block", ptr, size);
        return -1;
    }
    int s = (int)(off / size);
    if (nm_bitmap_test(bits, (size_t)s)) {
        STAT(h->ts[t].double_free, 1);
        *err = nm_fail(NM_EDOUBLEFREE, "pimFree: 0x%x (%u-byte block) is already free", ptr, size);
        return -1;
    }
    return s;
}

/* Free into a block of the caller's own that is not active: its state lives in
 * the block table (lock-free: only the owner touches it). `locked`: the
 * caller holds the mutex (applying other tasklets' frees). */
static nm_err tc_free_owned(nm_pimm *h, unsigned t, uint32_t b, uint32_t ptr, blkrec *r, bool locked)
{
    nm_err err = NM_OK;
    rec_read(h, t, b, r, 48);
    unsigned cls = r->cls;
    if (cls >= h->sc.count) return nm_fail(NM_ECORRUPT, "block %u: class %u out of range", b, cls);
    int s = slot_of(h, t, cls, b, ptr, r->bits, &err);
    if (s < 0) return err;
    nm_bitmap_set(r->bits, (size_t)s);
    tclass *c = &h->tc[t].c[cls];
    uint16_t before = r->nfree++;
    if (r->nfree == h->slots[cls]) { /* completely free: unlink and return (Sec. IV-A) */
        lock_unless(h, t, locked);
        bool clean = no_remote_pending(h, t, b);
        if (clean) {
            if (before > 0) {
                if (r->prev) rec_set_link(h, t, r->prev - 1u, 1, r->next);
                else c->partial = r->next;
                if (r->next) rec_set_link(h, t, r->next - 1u, 0, r->prev);
            }
            rec_set_owner(h, t, b, 0, 0, 0);
            (void)buddy_free(h, t, blk_addr(h, b) - h->cfg.heap_base);
        }
        unlock_unless(h, locked);
        if (clean) return NM_OK;
    }
    if (before == 0) { /* first free slot: join the class's list of blocks with room */
        r->prev = 0;
        r->next = c->partial;
        if (c->partial) rec_set_link(h, t, c->partial - 1u, 0, (uint16_t)(b + 1));
        c->partial = (uint16_t)(b + 1);
    }
    rec_write(h, t, b, r, 8, 40);
    return NM_OK;
}

/* Fast path: ptr is in one of the caller's active blocks (WRAM only). */
static bool free_active(nm_pimm *h, unsigned t, uint32_t b, uint32_t ptr, nm_err *e)
{
    tcache *tc = &h->tc[t];
    for (unsigned cls = 0; cls < h->sc.count; cls++) {
        tclass *c = &tc->c[cls];
        if (c->active != b + 1) continue;
        int slot = slot_of(h, t, cls, b, ptr, c->bits, e);
        if (slot < 0) return true;
        nm_bitmap_set(c->bits, (size_t)slot);
        c->nfree++;
        *e = NM_OK;
        return true;
    }
    return false;
}

/* Free into a non-active block whose owner word says it is the caller's. */
static nm_err free_mine(nm_pimm *h, unsigned t, uint32_t b, uint32_t ptr, blkrec *r, bool locked)
{
    if (r->flags & BLK_SPARE) { /* an activated ex-spare is active, caught before */
        STAT(h->ts[t].bad_free, 1);
        return nm_fail(NM_EBADFREE, "pimFree: 0x%x is in a spare block, never handed out", ptr);
    }
    return tc_free_owned(h, t, b, ptr, r, locked);
}

/* The remote part of a block record (rnext, queued, rbits), under the mutex. */
typedef struct remote_part {
    uint16_t rnext, queued, pad[2];
    uint64_t rbits[8];
} remote_part;
_Static_assert(sizeof(remote_part) == 72, "remote part of the record");

/* A free by tasklet t of a block in tasklet o's cache. The owner's state is
 * lock-free, so the free is queued: under the mutex, its 8-byte unit is marked
 * in the block's rbits (a second free of the same address is refused at once)
 * and the block joins o's inbox if it is not on it yet. Nothing is written
 * into the heap, so even an invalid address hurts no live data; the owner
 * validates each queued free when it applies its inbox at its next pimMalloc. */
static nm_err remote_free(nm_pimm *h, unsigned t, uint32_t b, uint32_t ptr, unsigned o)
{
    uint32_t bit = (ptr - blk_addr(h, b)) >> 3;
    remote_part rp;
    blkrec r;
    ENV_LOCK(h);
    rec_read(h, t, b, &r, 8);
    if (!(r.flags & BLK_TC) || r.owner != o) {
        /* The block left o's cache since we looked: o gives a block back only
         * when every slot is free, so this address was already free. */
        ENV_UNLOCK(h);
        STAT(h->ts[t].double_free, 1);
        return nm_fail(NM_EDOUBLEFREE, "pimFree: 0x%x: its block left tasklet %u's cache (already free)", ptr, o);
    }
    dma_rd(h, rec_addr(h, b) + REC_REMOTE, &rp, sizeof rp);
    if ((rp.rbits[bit / 64] >> (bit % 64)) & 1u) {
        ENV_UNLOCK(h);
        STAT(h->ts[t].double_free, 1);
        return nm_fail(NM_EDOUBLEFREE, "pimFree: 0x%x was already freed by another tasklet (pending)", ptr);
    }
    rp.rbits[bit / 64] |= (uint64_t)1 << (bit % 64);
    if (!rp.queued) {
        rp.queued = 1;
        rp.rnext = (uint16_t)h->tc[o].inbox;
        __atomic_store_n(&h->tc[o].inbox, b + 1, __ATOMIC_RELEASE);
    }
    dma_wr(h, rec_addr(h, b) + REC_REMOTE, &rp, sizeof rp);
    STAT(h->ts[t].blk_dma, 2 * sizeof rp);
    ENV_UNLOCK(h);
    return NM_OK;
}

/* Apply the frees other tasklets queued for tasklet t (at its pimMalloc and
 * release_cache): for every block on the inbox, every marked 8-byte unit is
 * freed as if by the owner; invalid ones are counted. */
static void tc_drain(nm_pimm *h, unsigned t)
{
    if (!__atomic_load_n(&h->tc[t].inbox, __ATOMIC_ACQUIRE)) return;
    ENV_LOCK(h);
    uint32_t next = h->tc[t].inbox;
    __atomic_store_n(&h->tc[t].inbox, 0, __ATOMIC_RELAXED);
    while (next) {
        uint32_t b = next - 1;
        remote_part rp, zero = {0};
        dma_rd(h, rec_addr(h, b) + REC_REMOTE, &rp, sizeof rp);
        dma_wr(h, rec_addr(h, b) + REC_REMOTE, &zero, sizeof zero);
        STAT(h->ts[t].blk_dma, 2 * sizeof rp);
        next = rp.rnext;
        for (unsigned w = 0; w < 8; w++) {
            while (rp.rbits[w]) {
                unsigned k = nm_ctz64(rp.rbits[w]);
                rp.rbits[w] &= rp.rbits[w] - 1;
                uint32_t p = blk_addr(h, b) + (w * 64 + k) * 8;
                nm_err e = NM_OK;
                if (free_active(h, t, b, p, &e)) continue;
                blkrec r;
                rec_read(h, t, b, &r, 8);
                if ((r.flags & BLK_TC) && r.owner == t) (void)free_mine(h, t, b, p, &r, true);
                else STAT(h->ts[t].double_free, 1); /* the block went back meanwhile: a double free */
            }
        }
    }
    ENV_UNLOCK(h);
}

/* ------------------------------------------------------------------- API */

uint32_t nm_pimm_mram_meta_bytes(const nm_pimm_config *cfg)
{
    uint32_t grain = cfg->variant == NM_PIMM_STRAWMAN ? cfg->strawman_grain : NM_PIMM_BLOCK;
    if (!grain || !nm_is_pow2(grain) || !nm_is_pow2(cfg->heap_size) || cfg->heap_size < 2 * grain) return 0;
    unsigned d = nm_log2_floor(cfg->heap_size / grain);
    uint64_t words = ((2ull << d) + 15) / 16;
    uint64_t tree = NM_ALIGN_UP(words * 4, 8);
    uint64_t align = cfg->swbuf_bytes > 8 ? cfg->swbuf_bytes : 8;
    tree = NM_ALIGN_UP(tree, align);
    uint64_t blk = cfg->variant == NM_PIMM_STRAWMAN ? 0 : (uint64_t)(cfg->heap_size / NM_PIMM_BLOCK) * sizeof(blkrec);
    uint64_t total = tree + blk;
    return total > UINT32_MAX ? 0 : (uint32_t)total;
}

static nm_err check_config(const nm_pimm_config *c, const nm_pimm_env *env)
{
    if (!env || !env->mram_read || !env->mram_write || !env->lock || !env->unlock || !env->me)
        return nm_fail(NM_EINVAL, "pim_malloc: incomplete environment");
    if ((unsigned)c->variant >= NM_PIMM_VARIANT_COUNT) return nm_fail(NM_EINVAL, "pim_malloc: bad variant");
    if (c->tasklets < 1 || c->tasklets > NM_PIMM_MAX_TASKLETS)
        return nm_fail(NM_EINVAL, "pim_malloc: tasklets %u not in 1..%d", c->tasklets, NM_PIMM_MAX_TASKLETS);
    if (!nm_is_pow2(c->heap_size) || c->heap_size < 2 * NM_PIMM_BLOCK || c->heap_size > (1u << 30))
        return nm_fail(NM_EINVAL, "pim_malloc: heap size %u must be a power of two, 8 KiB..1 GiB", c->heap_size);
    if (c->heap_base == 0 || c->heap_base % NM_PIMM_BLOCK)
        return nm_fail(NM_EALIGN, "pim_malloc: heap base 0x%x must be a non-zero multiple of 4 KiB", c->heap_base);
    if ((uint64_t)c->heap_base + c->heap_size > UINT32_MAX) return nm_fail(NM_ERANGE, "pim_malloc: heap past 4 GiB");
    if (c->meta_base % 8) return nm_fail(NM_EALIGN, "pim_malloc: meta base 0x%x not 8-aligned", c->meta_base);
    if (c->variant == NM_PIMM_STRAWMAN &&
        (!nm_is_pow2(c->strawman_grain) || c->strawman_grain < 8 || c->strawman_grain > NM_PIMM_BLOCK))
        return nm_fail(NM_EINVAL, "pim_malloc: straw-man grain %u must be a power of two, 8..4096", c->strawman_grain);
    if (c->swbuf_bytes < 8 || c->swbuf_bytes > 2048 || !nm_is_pow2(c->swbuf_bytes))
        return nm_fail(NM_EINVAL, "pim_malloc: metadata buffer %u must be a power of two, 8..2048", c->swbuf_bytes);
    if (c->bc_entries < 2 || c->bc_entries > 1024)
        return nm_fail(NM_EINVAL, "pim_malloc: buddy cache entries %u not in 2..1024", c->bc_entries);
    if (c->nclasses > NM_PIMM_MAX_CLASSES) return nm_fail(NM_EINVAL, "pim_malloc: at most 8 size classes");
    if (c->prepopulate > NM_PIMM_PREPOP_OFF) return nm_fail(NM_EINVAL, "pim_malloc: bad prepopulate %u", c->prepopulate);
    for (unsigned i = 0; i < c->nclasses; i++) {
        uint32_t s = c->classes[i];
        if (s < 16 || s > 2048 || s % 8 || (i && s <= c->classes[i - 1]))
            return nm_fail(NM_EINVAL, "pim_malloc: size class %u must be ascending multiples of 8 in 16..2048", s);
    }
    return NM_OK;
}

nm_err nm_pimm_create(nm_pimm **out, const nm_pimm_config *cfg_in, const nm_pimm_env *env)
{
    if (!out || !cfg_in) return nm_fail(NM_EINVAL, "pim_malloc: NULL argument");
    *out = NULL;
    nm_err e = check_config(cfg_in, env);
    if (e) return e;
    nm_pimm *h = PIMM_CALLOC(1, sizeof *h);
    if (!h) return nm_fail(NM_ENOMEM, "pim_malloc: host allocation");
    h->cfg = *cfg_in;
    h->env = *env;
    nm_pimm_config *c = &h->cfg;
    if (!c->meta_base) c->meta_base = c->heap_base + c->heap_size;
    uint32_t meta = nm_pimm_mram_meta_bytes(c);
    if (!meta || (uint64_t)c->meta_base + meta > UINT32_MAX ||
        (c->meta_base < c->heap_base + c->heap_size && c->meta_base + meta > c->heap_base)) {
        uint32_t mb = c->meta_base;
        PIMM_FREE(h);
        return nm_fail(NM_ERANGE, "pim_malloc: metadata at 0x%x overlaps the heap or the address space", mb);
    }
    nm_pimm_variant v = c->variant;
    h->tcaches = v != NM_PIMM_STRAWMAN;
    h->prepopulate = c->prepopulate == NM_PIMM_PREPOP_ON ||
                     (c->prepopulate == NM_PIMM_PREPOP_VARIANT &&
                      (v == NM_PIMM_SW || v == NM_PIMM_HWSW || v == NM_PIMM_PINNED));
    h->spare = v == NM_PIMM_ADAPTIVE;
    h->meta_kind = v == NM_PIMM_HWSW ? META_BCACHE
                   : (v == NM_PIMM_PINNED || v == NM_PIMM_ADAPTIVE) ? META_PINNED
                                                                     : META_SWBUF;
    h->grain = h->tcaches ? NM_PIMM_BLOCK : c->strawman_grain;
    h->maxdepth = nm_log2_floor(c->heap_size / h->grain);
    h->tree_base = c->meta_base;
    h->tree_words = (uint32_t)(((2ull << h->maxdepth) + 15) / 16);
    h->tree_bytes = NM_ALIGN_UP(NM_ALIGN_UP(h->tree_words * 4, 8), c->swbuf_bytes);
    h->blk_base = h->tree_base + h->tree_bytes;
    h->nblocks = c->heap_size / NM_PIMM_BLOCK;

    if (c->nclasses == 0) {
        e = nm_sizeclass_init_pow2(&h->sc, 16, 2048);
    } else {
        size_t sizes[NM_PIMM_MAX_CLASSES];
        for (unsigned i = 0; i < c->nclasses; i++) sizes[i] = c->classes[i];
        e = nm_sizeclass_init_custom(&h->sc, sizes, c->nclasses);
    }
    if (e) {
        PIMM_FREE(h);
        return e;
    }
    for (unsigned i = 0; i < h->sc.count; i++) h->slots[i] = NM_PIMM_BLOCK / (uint32_t)h->sc.size[i];

    h->sb_words = c->swbuf_bytes / 4;
    h->sb = PIMM_CALLOC(h->sb_words, 4);
    h->bc_n = c->bc_entries;
    h->bc = PIMM_CALLOC(h->bc_n, sizeof *h->bc);
    if (h->meta_kind == META_PINNED) {
        uint32_t pw = c->pin_budget / 4;
        pw = pw ? (uint32_t)1 << nm_log2_floor(pw) : 0;
        h->pin_words = NM_MIN(pw, h->tree_words);
        h->pin = PIMM_CALLOC(h->pin_words ? h->pin_words : 1, 4);
    }
    h->tc = PIMM_CALLOC(c->tasklets, sizeof *h->tc);
    h->ts = PIMM_CALLOC_STATS(NM_PIMM_MAX_TASKLETS, sizeof *h->ts);
    if (!h->sb || !h->bc || (h->meta_kind == META_PINNED && !h->pin) || !h->tc || !h->ts) {
        nm_pimm_destroy(h);
        return nm_fail(NM_ENOMEM, "pim_malloc: host allocation");
    }

    /* initAllocator (Sec. IV-A): one tasklet resets the metadata. Only the
     * root word must be valid: children of a FREE node are written before
     * they are ever read. The block table's owner words start cleared. */
    unsigned t = ENV_ME(h) % NM_PIMM_MAX_TASKLETS;
    if (h->meta_kind == META_BCACHE) bc_init(h); /* init_bc (Sec. IV-B): the entries start invalid */
    uint64_t zero[256] = {0};
    dma_wr(h, h->tree_base, zero, 8);
    if (h->tcaches) {
        uint32_t n = h->nblocks * (uint32_t)sizeof(blkrec);
        for (uint32_t o = 0; o < n; o += sizeof zero) dma_wr(h, h->blk_base + o, zero, NM_MIN((uint32_t)sizeof zero, n - o));
    }
    for (unsigned k = 0; k < c->tasklets && (h->prepopulate || h->spare); k++) {
        for (unsigned cls = 0; cls < h->sc.count && h->prepopulate; cls++) {
            uint32_t a = backend_alloc(h, t, NM_PIMM_BLOCK);
            if (!a) break; /* a heap too small to pre-populate fully still works */
            uint32_t b = (a - c->heap_base) / NM_PIMM_BLOCK;
            rec_set_owner(h, t, b, BLK_TC, (uint8_t)k, (uint8_t)cls);
            tc_activate(h, &h->tc[k].c[cls], cls, b);
        }
        if (h->spare) {
            uint32_t a = backend_alloc(h, t, NM_PIMM_BLOCK);
            if (!a) break;
            uint32_t b = (a - c->heap_base) / NM_PIMM_BLOCK;
            rec_set_owner(h, t, b, BLK_TC | BLK_SPARE, (uint8_t)k, 0xff);
            h->tc[k].spare = b + 1;
        }
    }
    *out = h;
    return NM_OK;
}

void nm_pimm_destroy(nm_pimm *h)
{
    if (!h) return;
    PIMM_FREE(h->sb);
    PIMM_FREE(h->bc);
    PIMM_FREE(h->pin);
    PIMM_FREE(h->tc);
    PIMM_FREE(h->ts);
    PIMM_FREE(h);
}

const nm_pimm_config *nm_pimm_get_config(const nm_pimm *h) { return &h->cfg; }

/* The caller's thread cache; tasklets beyond the configured count have none
 * (sharing one would race), so their calls fail cleanly. */
static inline unsigned my_tasklet(nm_pimm *h) { return ENV_ME(h); }

uint32_t nm_pimm_malloc(nm_pimm *h, uint32_t size)
{
    unsigned t = my_tasklet(h);
    if (t >= h->cfg.tasklets) {
        nm_fail(NM_ESTATE, "pimMalloc: tasklet %u has no thread cache (allocator made for %u)", t, h->cfg.tasklets);
        return 0;
    }
    tstats *s = &h->ts[t];
    STAT(s->mallocs, 1);
    if (size == 0 || size > h->cfg.heap_size) {
        STAT(s->fail_size, 1);
        return 0;
    }
    uint32_t a;
    if (!h->tcaches) {
        uint32_t bytes = (uint32_t)NM_MAX(nm_next_pow2(size), h->grain);
        a = backend_alloc(h, t, bytes);
    } else {
        int cls = size <= nm_sizeclass_max(&h->sc) ? nm_sizeclass_lookup(&h->sc, size) : -1;
        tc_drain(h, t);
        if (cls >= 0) {
            a = tc_alloc(h, t, (unsigned)cls);
        } else {
            STAT(s->bypass, 1);
            a = backend_alloc(h, t, (uint32_t)NM_MAX(nm_next_pow2(size), NM_PIMM_BLOCK));
        }
    }
    if (!a) STAT(s->fail_oom, 1);
    return a;
}

nm_err nm_pimm_free(nm_pimm *h, uint32_t ptr)
{
    unsigned t = my_tasklet(h);
    if (t >= h->cfg.tasklets)
        return nm_fail(NM_ESTATE, "pimFree: tasklet %u has no thread cache (allocator made for %u)", t, h->cfg.tasklets);
    tstats *s = &h->ts[t];
    if (ptr == 0) return NM_OK;
    if (ptr < h->cfg.heap_base || ptr - h->cfg.heap_base >= h->cfg.heap_size) {
        STAT(s->bad_free, 1);
        return nm_fail(NM_EBADFREE, "pimFree: 0x%x is outside the heap", ptr);
    }
    if (ptr & 7u) {
        STAT(s->misaligned_free, 1);
        return nm_fail(NM_EALIGN, "pimFree: 0x%x is not 8-byte aligned", ptr);
    }
    if (!h->tcaches) {
        nm_err e = backend_free(h, t, ptr);
        if (!e) STAT(s->frees, 1);
        return e;
    }
    uint32_t b = (ptr - h->cfg.heap_base) / NM_PIMM_BLOCK;
    nm_err e = NM_OK;
    if (free_active(h, t, b, ptr, &e)) {
        if (!e) STAT(s->frees, 1);
        return e;
    }
    blkrec r;
    rec_read(h, t, b, &r, 8);
    if (r.flags & BLK_TC) {
        if (r.owner == t) {
            e = free_mine(h, t, b, ptr, &r, false);
        } else if (r.owner >= h->cfg.tasklets) {
            e = nm_fail(NM_ECORRUPT, "pimFree: block %u names tasklet %u as owner", b, r.owner);
        } else {
            e = remote_free(h, t, b, ptr, r.owner);
            if (!e) STAT(s->remote_free, 1);
        }
    } else {
        e = backend_free(h, t, ptr);
    }
    if (!e) STAT(s->frees, 1);
    return e;
}

void nm_pimm_release_cache(nm_pimm *h)
{
    unsigned t = my_tasklet(h);
    if (!h->tcaches || t >= h->cfg.tasklets) return;
    tcache *tc = &h->tc[t];
    tc_drain(h, t);
    for (unsigned cls = 0; cls < h->sc.count; cls++) {
        tclass *c = &tc->c[cls];
        if (c->active && c->nfree == h->slots[cls] && tc_return_block(h, t, c->active - 1, false)) {
            c->active = 0;
            c->nfree = 0;
        }
    }
    if (tc->spare && tc_return_block(h, t, tc->spare - 1, false)) tc->spare = 0;
}

void nm_pimm_get_stats(const nm_pimm *h, nm_pimm_stats *o)
{
    memset(o, 0, sizeof *o);
    for (unsigned t = 0; t < NM_PIMM_MAX_TASKLETS; t++) {
        const tstats *s = &h->ts[t];
        o->mallocs += s->mallocs;
        o->frees += s->frees;
        o->fail_size += s->fail_size;
        o->fail_oom += s->fail_oom;
        o->tc_hits += s->tc_hits;
        o->tc_misses += s->tc_misses;
        o->tc_spare += s->tc_spare;
        o->bypass += s->bypass;
        o->bad_free += s->bad_free;
        o->misaligned_free += s->misaligned_free;
        o->double_free += s->double_free;
        o->remote_free += s->remote_free;
        o->blk_dma += s->blk_dma;
    }
    o->backend_ops = h->backend_ops;
    o->meta_accesses = h->meta_accesses;
    o->meta_hits = h->meta_hits;
    o->meta_dma_read = h->meta_rd;
    o->meta_dma_written = h->meta_wr;
    o->reserved = h->reserved;
    o->reserved_peak = h->reserved_peak;
    uint32_t wram = (uint32_t)(h->tcaches ? h->cfg.tasklets * sizeof(tcache) : 0);
    if (h->meta_kind == META_SWBUF) wram += h->sb_words * 4;
    if (h->meta_kind == META_BCACHE) wram += 0; /* the buddy cache is hardware, not WRAM */
    if (h->meta_kind == META_PINNED) wram += h->pin_words * 4;
    o->wram_bytes = wram;
    o->mram_meta_bytes = nm_pimm_mram_meta_bytes(&h->cfg);
}

void nm_pimm_reset_counters(nm_pimm *h)
{
    memset(h->ts, 0, NM_PIMM_MAX_TASKLETS * sizeof *h->ts);
    h->backend_ops = h->meta_accesses = h->meta_hits = h->meta_rd = h->meta_wr = 0;
    h->reserved_peak = h->reserved;
}

/* --------------------------------------------------------- consistency */

/* The WRAM copy of a tree word when one is authoritative, else MRAM. */
static uint32_t check_word(nm_pimm *h, uint32_t w)
{
    if (h->meta_kind == META_PINNED && pinned(h, w)) return h->pin[w];
    if (h->meta_kind == META_SWBUF && h->sb_valid && w - h->sb_w0 < h->sb_words) return h->sb[w - h->sb_w0];
    if (h->meta_kind == META_BCACHE)
        for (unsigned i = 0; i < h->bc_n; i++)
            if (h->bc[i].valid && h->bc[i].tag == w) return h->bc[i].val;
    uint64_t p;
    dma_rd(h, h->tree_base + (w & ~1u) * 4, &p, 8);
    return pair_get(p, w);
}

static uint32_t check_node(nm_pimm *h, uint32_t n) { return (check_word(h, n >> 4) >> ((n & 15) * 2)) & 3u; }

/* Returns the free bytes under node, or UINT64_MAX if inconsistent. */
static uint64_t check_rec(nm_pimm *h, uint32_t node, unsigned depth, uint64_t *alloc)
{
    uint32_t s = check_node(h, node);
    uint64_t bs = (uint64_t)h->cfg.heap_size >> depth;
    if (s == ND_FREE) return bs;
    if (s == ND_ALLOC) {
        *alloc += bs;
        return 0;
    }
    if (depth == h->maxdepth) return UINT64_MAX;
    uint64_t l = check_rec(h, 2 * node, depth + 1, alloc), r = check_rec(h, 2 * node + 1, depth + 1, alloc);
    if (l == UINT64_MAX || r == UINT64_MAX) return UINT64_MAX;
    uint32_t lc = check_node(h, 2 * node), rc = check_node(h, 2 * node + 1);
    if (lc == ND_FREE && rc == ND_FREE) return UINT64_MAX; /* unmerged buddies */
    bool full = is_full(lc) && is_full(rc);
    if ((s == ND_FULL) != full) return UINT64_MAX;
    return l + r;
}

/* Is heap offset `off` inside a block the tree says is allocated? */
static bool check_allocated(nm_pimm *h, uint32_t off)
{
    uint32_t node = 1, bs = h->cfg.heap_size;
    for (unsigned depth = 0;; depth++) {
        uint32_t st = check_node(h, node);
        if (st == ND_ALLOC) return true;
        if (st == ND_FREE || depth == h->maxdepth) return false;
        bs >>= 1;
        node = 2 * node + ((off & bs) ? 1u : 0u);
    }
}

nm_err nm_pimm_check(nm_pimm *h, uint64_t *free_bytes)
{
    uint64_t alloc = 0, fr = check_rec(h, 1, 0, &alloc);
    if (fr == UINT64_MAX) return nm_fail(NM_ECORRUPT, "pim_malloc: buddy tree inconsistent");
    if (alloc != h->reserved)
        return nm_fail(NM_ECORRUPT, "pim_malloc: tree holds %llu allocated bytes, counter says %llu",
                       (unsigned long long)alloc, (unsigned long long)h->reserved);
    /* every block a thread cache holds (owner word set) is allocated in the tree */
    for (uint32_t b = 0; h->tcaches && b < h->nblocks; b++) {
        uint64_t w0;
        dma_rd(h, rec_addr(h, b), &w0, 8);
        if ((w0 & 0xff) && !check_allocated(h, b * NM_PIMM_BLOCK))
            return nm_fail(NM_ECORRUPT, "pim_malloc: block %u is cached (flags 0x%x) but free in the tree", b,
                           (unsigned)(w0 & 0xff));
    }
    if (free_bytes) *free_bytes = fr;
    return NM_OK;
}
