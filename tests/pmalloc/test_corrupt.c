/* PMAlloc: random corruption of every persistent metadata structure (issue 16).
 *
 * Heap images of every kind (LOG and GC, clean and crashed mid-run by the
 * power-failure simulation, with NUMA deallocation logs, with morphed slabs)
 * get one random corruption per trial in one structure: a bit flipped, a byte
 * or an 8-byte word replaced, a word zeroed, a few bytes sprayed. Each trial
 * opens the damaged image; it passes if
 *   - pmalloc_open refuses it (NM_ECORRUPT, or NM_EFORMAT for the magic), or
 *   - pmalloc_open accepts it and pmalloc_check finds the damage, or
 *   - pmalloc_open accepts it (repaired from the other copy or the log, or the
 *     damage was in bytes nothing reads) and the heap is the one the
 *     undamaged image opens to: the same objects, the same roots, check OK.
 * Anything else (accepted and different: silently used) fails the test.
 *
 * What no checksum can cover, and is left out (counted, printed): the last
 * redo record of a thread in a crashed image (damage there looks like a
 * write torn by the crash; the operation is undone as if the crash had come
 * just before its fence). Root slots are not PMAlloc's metadata: they are
 * pointer words the application stores into, like fields of its objects.
 *
 * PMT_CORRUPT_TRIALS (default 120) sets the trials per structure and image,
 * PMT_CORRUPT_SEED other images and corruptions. */
#include "nm_test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <xxhash.h>
#include "../../src/pmalloc/pm_internal.h"
#include "nearmem/common/prng.h"
#include "pm_testutil.h"

#define MiB (1u << 20)
#define NSLOTS 300u
#define ROOT0 8u

enum { R_SB_FIXED, R_SB_STATE, R_BKDESC, R_BOUND, R_SETTLE, R_SB_OTHER, R_RINGS, R_CHUNK_HDR, R_CHUNK_ENT, R_SLAB_HDR,
       R_BITMAP, R_MORPH, R_NUMA_HDR, R_SEG_HDR, R_TS, R_DLOG, R_NREG };
static const char *const reg_name[R_NREG] = {
    "superblock fixed fields", "session state", "log descriptor copies", "checkpoint bound copies", "settle record",
    "other superblock lines", "redo rings", "log chunk headers", "settled log entries", "slab headers",
    "slab bitmaps", "morph images and words", "NUMA header", "dealloc-log segment headers", "slab timestamp table",
    "dealloc-log entries"};

typedef struct span { uint64_t off, len; } span;
typedef struct region { span *s; size_t n, cap; } region;
typedef struct objv { uint64_t p, n; } objv;

typedef struct image {
    const char *name;
    pmalloc_model model;
    bool crashed;
    unsigned vnodes;
    unsigned char *bytes;
    size_t size;
    objv *obj;
    size_t nobj;
    pmalloc_ptr roots[PMALLOC_NROOTS];
    region reg[R_NREG];
    uint64_t skipped_newest; /* bytes of newest-per-thread records (not a target) */
} image;

static void add_span(region *r, uint64_t off, uint64_t len)
{
    if (!len) return;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->s = realloc(r->s, r->cap * sizeof *r->s);
        assert_non_null(r->s);
    }
    r->s[r->n++] = (span){off, len};
}

static pmalloc_options img_opts(pmalloc_model m, unsigned vnodes, pmalloc_persist_mode pm)
{
    pmalloc_options o = pmt_opts(8 * MiB, m, pm);
    o.narenas = vnodes ? vnodes : 1;
    o.morph_su = 100; /* morphed slabs in every image */
    o.numa_vnodes = vnodes;
    o.numa_sync_ms = PMALLOC_NUMA_SYNC_NEVER;
    o.single_file = true; /* node files and their trailers: test_nodefiles */
    return o;
}

/* ---- the workload that makes an image ---- */

static size_t band_size(nm_rng *r, unsigned phase)
{
    static const unsigned lo[] = {17, 100, 200, 500, 1000, 40}, hi[] = {32, 112, 256, 600, 1100, 64};
    if (nm_rng_below(r, 100) < 6) return (size_t)nm_rng_range(r, 5000, 40000); /* extents */
    unsigned b = phase % 6;
    return (size_t)nm_rng_range(r, lo[b], hi[b]);
}

static void workload(pmalloc_heap *h, unsigned steps, uint64_t seed, unsigned vnodes, unsigned crash_at, const char *crash_dir)
{
    nm_rng r;
    nm_rng_seed(&r, seed);
    for (unsigned i = 0; i < steps; i++) {
        if (vnodes > 1) assert_int_equal(pmalloc_numa_set_node(h, (int)(i / 7 % vnodes)), NM_OK);
        unsigned k = ROOT0 + (unsigned)nm_rng_below(&r, NSLOTS);
        pmalloc_ptr *slot = pmalloc_root_slot(h, k);
        if (*slot) assert_int_equal(pmalloc_free_from(h, slot), NM_OK);
        else assert_int_equal(pmalloc_malloc_to(h, band_size(&r, i / 400), slot), NM_OK);
        if (i + 1 == crash_at) assert_int_equal(pmalloc_sim_snapshot(h, crash_dir, seed, 0), NM_OK);
    }
}

/* ---- expected state, layout ---- */

static int walk_fn(void *arg, pmalloc_ptr p, size_t usable)
{
    image *im = arg;
    im->obj = realloc(im->obj, (im->nobj + 1) * sizeof *im->obj);
    assert_non_null(im->obj);
    im->obj[im->nobj++] = (objv){p, usable};
    return 0;
}

typedef struct walkcmp { const image *im; size_t i; bool diff; } walkcmp;
static int cmp_fn(void *arg, pmalloc_ptr p, size_t usable)
{
    walkcmp *w = arg;
    if (w->i >= w->im->nobj || w->im->obj[w->i].p != p || w->im->obj[w->i].n != usable) { w->diff = true; return 1; }
    w->i++;
    return 0;
}

static char g_dir[256], g_path[400];

static void write_file(const unsigned char *b, size_t n)
{
    int fd = open(g_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, b, n, 0), (ssize_t)n);
    close(fd);
}

static void read_image(image *im, const char *dir)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    im->size = (size_t)st.st_size;
    im->bytes = malloc(im->size);
    assert_non_null(im->bytes);
    assert_int_equal(pread(fd, im->bytes, im->size, 0), (ssize_t)im->size);
    close(fd);
}

static inline uint32_t rec_check(uint64_t w0, uint64_t block, uint64_t loc, uint64_t size)
{
    uint64_t v[4] = {w0, block, loc, size};
    return (uint32_t)XXH3_64bits(v, sizeof v);
}

/* the regions of an image: from its bytes and, for the slabs, from a heap opened on a copy */
static void find_regions(image *im, pmalloc_heap *hd)
{
    const pm_super *sb = (const pm_super *)im->bytes;
    region *R = im->reg;
    add_span(&R[R_SB_FIXED], 0, 96);
    add_span(&R[R_SB_STATE], 2 * PM_LINE, 8);
    add_span(&R[R_BKDESC], 3 * PM_LINE, 16);
    add_span(&R[R_BKDESC], PM_BK_B_LINE * PM_LINE, 16);
    add_span(&R[R_BOUND], 4 * PM_LINE, 16);
    add_span(&R[R_BOUND], PM_GW_B_LINE * PM_LINE, 16);
    add_span(&R[R_SETTLE], PM_SETTLE_LINE * PM_LINE, sizeof(pm_settle_rec));
    const pm_numa_hdr *nh = (const pm_numa_hdr *)(im->bytes + PM_NUMA_HDR_LINE * PM_LINE);
    for (unsigned l = 5; l < PM_PAGE / PM_LINE; l++)
        if (l != PM_GW_B_LINE && l != PM_BK_B_LINE && (l < PM_SETTLE_LINE || l >= PM_SETTLE_LINE + 3) &&
            !(l == PM_NUMA_HDR_LINE && nh->magic == PM_NUMA_MAGIC))
            add_span(&R[R_SB_OTHER], (uint64_t)l * PM_LINE, PM_LINE);
    /* redo rings: slots with a record; in a crashed image not the last record of each thread */
    uint64_t ga = *(const uint64_t *)(im->bytes + 4 * PM_LINE), gb = *(const uint64_t *)(im->bytes + PM_GW_B_LINE * PM_LINE);
    uint64_t gw = NM_MAX(ga, gb);
    const pm_rec *rec = (const pm_rec *)(im->bytes + sb->redo_off);
    size_t nrec = (size_t)sb->nrings * sb->ring_recs;
    uint64_t *named = calloc(nrec + 1, sizeof *named), nn = 0;
    for (size_t i = 0; i < nrec; i++) {
        pm_rec e = rec[i];
        if (!e.seq_op || (uint32_t)e.aux != rec_check(e.seq_op, e.block, e.loc, e.aux >> 32)) continue;
        if (PM_REC_BACK(e.loc)) named[nn++] = (e.seq_op >> 8) - PM_REC_BACK(e.loc);
    }
    for (size_t i = 0; i < nrec; i++) {
        pm_rec e = rec[i];
        if (!e.seq_op) continue;
        uint64_t seq = e.seq_op >> 8;
        bool valid = (uint32_t)e.aux == rec_check(e.seq_op, e.block, e.loc, e.aux >> 32);
        if (im->crashed && valid && seq > gw) {
            bool is_named = false;
            for (size_t k = 0; k < nn && !is_named; k++) is_named = named[k] == seq;
            if (!is_named) { im->skipped_newest += sizeof e; continue; }
        }
        add_span(&R[R_RINGS], sb->redo_off + i * sizeof e, sizeof e);
    }
    free(named);
    /* the bookkeeping log's chunks, from copy A of the descriptor */
    uint32_t c = (uint32_t)*(const uint64_t *)(im->bytes + 3 * PM_LINE);
    for (uint32_t k = 0; c != PM_CHUNK_NONE && c < sb->nchunks && k < sb->nchunks; k++) {
        uint64_t off = sb->bk_off + (uint64_t)c * PM_CHUNK_BYTES;
        const pm_chunk_hdr *ch = (const pm_chunk_hdr *)(im->bytes + off);
        add_span(&R[R_CHUNK_HDR], off, 40);
        uint32_t cnt = (uint32_t)ch->count;
        if (cnt) add_span(&R[R_CHUNK_ENT], off + PM_LINE, (uint64_t)NM_MIN(cnt, PM_CHUNK_ENTRIES) * 8); /* approx. (interleaved: some lines) */
        c = (uint32_t)ch->next;
    }
    /* slabs */
    pm_heap *h = pm_resolve(hd);
    assert_non_null(h);
    for (uint64_t p = 0; p < h->data_pages; p += h->pmap[p]->npages) {
        pm_veh *v = h->pmap[p];
        if (v->state != PM_VEH_SLAB || !v->slab) continue;
        pm_vslab *s = v->slab;
        uint64_t base = (uint64_t)((char *)s->hdr - h->base);
        if (getenv("PMT_DEBUG"))
            print_message("slab %#llx cls %u bs %u nblocks %u%s cur bm %u+%u old bm %u+%u nold %u\n", (unsigned long long)base, s->cls,
                          s->block_size, s->nblocks, s->mo ? " morphed" : "", s->mo ? s->mo->cur.bm_line : 1,
                          s->mo ? s->mo->cur.bm_lines : s->hdr->bm_lines, s->mo ? s->mo->old.bm_line : 0, s->mo ? s->mo->old.bm_lines : 0,
                          s->mo ? s->mo->nold : 0);
        add_span(&R[R_SLAB_HDR], base, 40);
        add_span(&R[R_SLAB_HDR], base + offsetof(pm_slab_hdr, reserved) + 8, 8); /* the bitmap checksum */
        if (s->mo) {
            add_span(&R[R_BITMAP], base + (uint64_t)s->mo->cur.bm_line * PM_LINE, (uint64_t)s->mo->cur.bm_lines * PM_LINE);
            add_span(&R[R_BITMAP], base + (uint64_t)s->mo->old.bm_line * PM_LINE, (uint64_t)s->mo->old.bm_lines * PM_LINE);
            add_span(&R[R_MORPH], base + offsetof(pm_slab_hdr, reserved), 8);
            add_span(&R[R_MORPH], base + (uint64_t)s->mo->cur.img_line * PM_LINE, PM_LINE);
        } else {
            add_span(&R[R_BITMAP], base + PM_LINE, (uint64_t)s->hdr->bm_lines * PM_LINE);
        }
    }
    if (nh->magic == PM_NUMA_MAGIC) {
        add_span(&R[R_NUMA_HDR], PM_NUMA_HDR_LINE * PM_LINE, 56);
        for (unsigned i = 0; i < nh->nlogs * 2; i++) add_span(&R[R_SEG_HDR], nh->region_off + (uint64_t)i * PM_LINE, 32);
        add_span(&R[R_TS], nh->ts_off, (sb->heap_size - sb->data_off) / PM_PAGE * 8);
        const pm_dlog_ent *ent = (const pm_dlog_ent *)(im->bytes + nh->seg_off);
        for (size_t i = 0; i < (size_t)nh->nlogs * 2 * nh->seg_entries; i++)
            if (ent[i].block || ent[i].ts || ent[i].gen || ent[i].check) add_span(&R[R_DLOG], nh->seg_off + i * sizeof *ent, sizeof *ent);
    }
}

static void make_image(image *im, const char *name, pmalloc_model m, bool crashed, unsigned vnodes, uint64_t seed)
{
    memset(im, 0, sizeof *im);
    im->name = name;
    im->model = m;
    im->crashed = crashed;
    im->vnodes = vnodes;
    char dir[256], cdir[256];
    pmt_tmpdir(dir, sizeof dir, "corrupt-mk");
    pmt_tmpdir(cdir, sizeof cdir, "corrupt-img");
    pmalloc_options o = img_opts(m, vnodes, crashed ? PMALLOC_PERSIST_SIM : PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    workload(h, 2600, seed, vnodes, crashed ? 2400 : 0, cdir);
    assert_int_equal(pmalloc_close(h), NM_OK);
    read_image(im, crashed ? cdir : dir);
    pmt_rmdir(dir);
    pmt_rmdir(cdir);
    /* what the undamaged image opens to */
    write_file(im->bytes, im->size);
    pmalloc_options oo = img_opts(m, vnodes, PMALLOC_PERSIST_CPU);
    oo.create = false;
    nm_err e = pmalloc_open(g_dir, &oo, &h);
    if (e) print_message("%s: %s\n", name, nm_last_errmsg());
    assert_int_equal(e, NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_walk(h, walk_fn, im), NM_OK);
    for (unsigned i = 0; i < PMALLOC_NROOTS; i++) im->roots[i] = pmalloc_get_root(h, i);
    find_regions(im, h);
    assert_int_equal(pmalloc_close(h), NM_OK);
}

static void free_image(image *im)
{
    free(im->bytes);
    free(im->obj);
    for (int r = 0; r < R_NREG; r++) free(im->reg[r].s);
}

/* ---- trials ---- */

typedef struct tally { unsigned trials, refused, checked, same, silent, other; } tally;

static uint64_t g_off; /* where the last corruption went */
static const char *corrupt(unsigned char *b, const region *r, nm_rng *rng)
{
    uint64_t total = 0;
    for (size_t i = 0; i < r->n; i++) total += r->s[i].len;
    uint64_t x = nm_rng_below(rng, total), off = 0;
    size_t si = 0;
    for (; si < r->n; si++) {
        if (x < r->s[si].len) { off = r->s[si].off + x; break; }
        x -= r->s[si].len;
    }
    const span *s = &r->s[si];
    g_off = off;
    switch (nm_rng_below(rng, 5)) {
    case 0:
        b[off] ^= (unsigned char)(1u << nm_rng_below(rng, 8));
        return "bit";
    case 1: {
        unsigned char v;
        do v = (unsigned char)nm_rng_u32(rng);
        while (v == b[off]);
        b[off] = v;
        return "byte";
    }
    case 2: case 3: {
        uint64_t w = off & ~7ull;
        if (w < s->off || w + 8 > s->off + s->len) { b[off] ^= 0x5a; return "byte"; }
        uint64_t v, old;
        memcpy(&old, b + w, 8);
        if (old && nm_rng_below(rng, 2)) v = 0;
        else do v = nm_rng_u64(rng); while (v == old);
        memcpy(b + w, &v, 8);
        return v ? "word" : "zero word";
    }
    default: {
        unsigned n = 2 + (unsigned)nm_rng_below(rng, 3);
        for (unsigned k = 0; k < n; k++) {
            uint64_t o = s->off + nm_rng_below(rng, s->len);
            b[o] ^= (unsigned char)(1 + nm_rng_below(rng, 255));
        }
        return "bytes";
    }
    }
}

static unsigned trials_per(void)
{
    const char *e = getenv("PMT_CORRUPT_TRIALS");
    return e && *e ? (unsigned)strtoul(e, NULL, 10) : 120u;
}

/* The trial file is mapped here: a trial restores the pages the last one
 * changed (open and close write a few), not the whole file. */
static void restore(unsigned char *map, const image *im)
{
    for (size_t p = 0; p < im->size; p += PM_PAGE)
        if (memcmp(map + p, im->bytes + p, PM_PAGE)) memcpy(map + p, im->bytes + p, PM_PAGE);
}

static unsigned run_image(image *im, uint64_t seed)
{
    unsigned T = trials_per(), silent = 0;
    write_file(im->bytes, im->size);
    int fd = open(g_path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char *work = mmap(NULL, im->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(work != MAP_FAILED);
    nm_rng rng;
    nm_rng_seed(&rng, seed);
    pmalloc_options o = img_opts(im->model, im->vnodes, PMALLOC_PERSIST_CPU);
    o.create = false;
    print_message("image %s (%zu objects): trials per structure %u\n", im->name, im->nobj, T);
    for (int r = 0; r < R_NREG; r++) {
        if (!im->reg[r].n) continue;
        tally t = {0};
        for (unsigned k = 0; k < T; k++) {
            restore(work, im);
            const char *how = corrupt(work, &im->reg[r], &rng);
            static unsigned char *keep;
            const char *kd = getenv("PMT_KEEP"); /* debugging: the damaged image of a silent trial goes to $PMT_KEEP */
            if (kd && (keep = realloc(keep, im->size))) memcpy(keep, work, im->size);
            pmalloc_heap *h;
            nm_err e = pmalloc_open(g_dir, &o, &h);
            t.trials++;
            if (e == NM_ECORRUPT || e == NM_EFORMAT) { t.refused++; continue; }
            if (e != NM_OK) {
                t.other++;
                print_message("  %s / %s (%s): open returned %s: %s\n", im->name, reg_name[r], how, nm_strerror(e), nm_last_errmsg());
                continue;
            }
            if (pmalloc_check(h) == NM_ECORRUPT) { t.checked++; pmalloc_abandon(h); continue; }
            walkcmp w = {im, 0, false};
            assert_int_equal(pmalloc_walk(h, cmp_fn, &w) == NM_OK || w.diff, true);
            bool same = !w.diff && w.i == im->nobj;
            for (unsigned i = 0; i < PMALLOC_NROOTS && same; i++) same = pmalloc_get_root(h, i) == im->roots[i];
            if (same) t.same++;
            else {
                t.silent++;
                print_message("  SILENT: %s / %s (%s at %#llx): opened with another heap (objects %zu of %zu matched)\n", im->name,
                              reg_name[r], how, (unsigned long long)g_off, w.i, im->nobj);
                if (kd && keep) {
                    int kf = open(kd, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                    if (kf >= 0 && write(kf, keep, im->size) == (ssize_t)im->size) print_message("  (image kept in %s)\n", kd);
                    if (kf >= 0) close(kf);
                    kd = NULL;
                }
            }
            assert_int_equal(pmalloc_close(h), NM_OK);
        }
        print_message("  %-28s %4u trials: %4u refused at open, %3u by check, %4u unchanged, %u silent, %u other\n", reg_name[r], t.trials,
                      t.refused, t.checked, t.same, t.silent, t.other);
        silent += t.silent + t.other;
    }
    if (im->skipped_newest)
        print_message("  (not targeted: %llu bytes of the last redo record of each thread, which a crash may tear)\n",
                      (unsigned long long)im->skipped_newest);
    munmap(work, im->size);
    return silent;
}

static void one(const char *name, pmalloc_model m, bool crashed, unsigned vnodes, uint64_t seed)
{
    pmt_tmpdir(g_dir, sizeof g_dir, "corrupt");
    snprintf(g_path, sizeof g_path, "%s/%s", g_dir, PMALLOC_FILE_NAME);
    static image im;
    const char *es = getenv("PMT_CORRUPT_SEED");
    if (es && *es) seed += 1000 * strtoull(es, NULL, 10);
    make_image(&im, name, m, crashed, vnodes, seed);
    unsigned bad = run_image(&im, seed * 7 + 1);
    free_image(&im);
    pmt_rmdir(g_dir);
    assert_int_equal(bad, 0);
}

static void test_log_clean(void **st) { (void)st; one("LOG clean", PMALLOC_LOG, false, 0, 11); }
static void test_log_crashed(void **st) { (void)st; one("LOG crashed", PMALLOC_LOG, true, 0, 12); }
static void test_gc_clean(void **st) { (void)st; one("GC clean", PMALLOC_GC, false, 0, 13); }
static void test_gc_crashed(void **st) { (void)st; one("GC crashed", PMALLOC_GC, true, 0, 14); }
static void test_numa_clean(void **st) { (void)st; one("LOG 3 nodes clean", PMALLOC_LOG, false, 3, 15); }
static void test_numa_crashed(void **st) { (void)st; one("LOG 3 nodes crashed", PMALLOC_LOG, true, 3, 16); }

/* The audit's case: one bitmap bit cleared behind the allocator's back is
 * refused at open, and found by pmalloc_check at run time. */
static void test_bitmap_bit(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "corrupt-bit");
    pmalloc_options o = img_opts(PMALLOC_LOG, 0, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    for (unsigned i = 0; i < 10; i++) assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(pmalloc_sync(h), NM_OK); /* bits and checksums written back */
    pm_heap *ph = pm_resolve(h);
    pm_vslab *s = NULL;
    uint32_t idx = 0;
    assert_true(pm_small_block_at(ph, PMALLOC_PTR_OFFSET(pmalloc_get_root(h, 3)), &s, &idx));
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    assert_true(*w & m);
    __atomic_fetch_and(w, ~m, __ATOMIC_RELAXED); /* the bit, not the allocator's DRAM state */
    assert_int_equal(pmalloc_check(h), NM_ECORRUPT);
    print_message("check: %s\n", nm_last_errmsg());
    assert_int_equal(pmalloc_close(h), NM_OK); /* a clean heap with the cleared bit and the old checksum */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    print_message("open: %s\n", nm_last_errmsg());
    pmt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitmap_bit),  cmocka_unit_test(test_log_clean),  cmocka_unit_test(test_log_crashed),
        cmocka_unit_test(test_gc_clean),    cmocka_unit_test(test_gc_crashed), cmocka_unit_test(test_numa_clean),
        cmocka_unit_test(test_numa_crashed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
