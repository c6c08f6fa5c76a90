/* PIM-CACHE DPU-side code: the logical-buffer reader (Sec. 4.2, "data reconstruction on
 * DPUs": no DPU ever rebuilds the whole buffer) and the parallel Stream VByte decoder
 * (Sec. 4.2 "Compression", Sec. 6.4). Written for the DPU's rules, see pim_cache_dpu.h. */
#include <stdint.h>
#include <string.h>

#include "nearmem/pim_cache_dpu.h"

/* Compute is costed from this code when it runs on the emulated DPU (built by
 * nearmem-dpu-cc, docs/pim-machine.md "Costing"). There it calls the SDK's
 * mram_read/mram_write directly, as DPU code would (an indirect call per DMA
 * would be costed too); on the host (memdev.c) it goes through `io`. */
#ifdef __NEARMEM_DPU__
#include <mram.h>
#define IO_READ(io, off, w, n) ((void)(io), mram_read((__mram_ptr const void *)(uintptr_t)(off), (w), (n)))
#define IO_WRITE(io, w, off, n) ((void)(io), mram_write((w), (__mram_ptr void *)(uintptr_t)(off), (n)))
#else
#define IO_READ(io, off, w, n) (io)->read((io)->ctx, (off), (w), (n))
#define IO_WRITE(io, w, off, n) (io)->write((io)->ctx, (w), (off), (n))
#endif

int nm_pimc_reader_open(nm_pimc_reader *r, const nm_pimc_mram_io *io, uint32_t desc_off, uint32_t first,
                        uint32_t stride)
{
    uint64_t raw[NM_PIMC_DESC_SIZE / 8];
    if ((desc_off & 7u) != 0) return -1;
    IO_READ(io, desc_off, raw, NM_PIMC_DESC_SIZE);
    memcpy(&r->d, raw, sizeof r->d);
    uint32_t bs = r->d.block_size;
    if (r->d.magic != NM_PIMC_DESC_MAGIC || r->d.mode > NM_PIMC_MODE_CHUNKS || bs < 64 || bs > 4096 ||
        (bs & (bs - 1)) != 0)
        return -1;
    if (r->d.mode != NM_PIMC_MODE_CHUNKS && r->d.nblocks != (uint32_t)((r->d.length + bs - 1) / bs)) return -1;
    if (r->d.mode == NM_PIMC_MODE_CHUNKS && (r->d.nblocks > r->d.length || (r->d.length && !r->d.nblocks)))
        return -1;
    r->io = io;
    r->desc_off = desc_off;
    r->next = first;
    r->stride = stride ? stride : 1;
    r->cache_base = 0;
    r->cache_n = 0;
    r->pos = 0;
    return 0;
}

/* CDC: entry i is (address, logical start); the chunk ends where entry i + 1 starts, so
 * the window always holds i and i + 1 (a reader in order fetches 16 entries at a time, a
 * striding one only the two it needs). */
static uint32_t chunk_at(nm_pimc_reader *r, uint32_t i, uint32_t *addr)
{
    uint32_t last = i + 1 < r->d.nblocks ? i + 1 : i;
    if (i < r->cache_base || last >= r->cache_base + r->cache_n) {
        uint32_t n = r->stride == 1 ? NM_PIMC_READER_OFFS / 2 : 2;
        if (n > r->d.nblocks - i) n = r->d.nblocks - i;
        IO_READ(r->io, r->desc_off + NM_PIMC_DESC_SIZE + i * 8u, r->offs, n * 8u);
        r->cache_base = i;
        r->cache_n = n;
    }
    const uint32_t *e = r->offs + 2 * (i - r->cache_base);
    *addr = e[0];
    r->pos = e[1];
    uint64_t end = i + 1 < r->d.nblocks ? e[3] : r->d.length;
    return (uint32_t)(end - e[1]);
}

uint32_t nm_pimc_reader_next(nm_pimc_reader *r, void *wram, uint32_t *index)
{
    if (r->next >= r->d.nblocks) return 0;
    uint32_t i = r->next, bs = r->d.block_size, n = bs;
    r->next += r->stride;
    uint32_t addr;
    if (r->d.mode == NM_PIMC_MODE_FLAT) {
        addr = r->d.data_off + i * bs;
    } else if (r->d.mode == NM_PIMC_MODE_CHUNKS) {
        n = chunk_at(r, i, &addr);
        if (n > bs) n = bs; /* a corrupt list must not overrun the kernel's buffer */
    } else {
        if (i < r->cache_base || i >= r->cache_base + r->cache_n) {
            /* Refill on an aligned group so the MRAM read starts on 8 bytes; the host pads
             * the list to 8 bytes, so rounding the length up stays inside it. */
            uint32_t base = i & ~(NM_PIMC_READER_OFFS - 1u);
            uint32_t cnt = r->d.nblocks - base;
            if (cnt > NM_PIMC_READER_OFFS) cnt = NM_PIMC_READER_OFFS;
            uint32_t bytes = (cnt * 4u + 7u) & ~7u;
            IO_READ(r->io, r->desc_off + NM_PIMC_DESC_SIZE + base * 4u, r->offs, bytes);
            r->cache_base = base;
            r->cache_n = cnt;
        }
        addr = r->offs[i - r->cache_base];
    }
    uint32_t dma = r->d.mode == NM_PIMC_MODE_CHUNKS ? (n + 7u) & ~7u : bs;
    for (uint32_t done = 0; done < dma; done += NM_PIMC_DMA_MAX) {
        uint32_t k = dma - done < NM_PIMC_DMA_MAX ? dma - done : NM_PIMC_DMA_MAX;
        IO_READ(r->io, addr + done, (uint8_t *)wram + done, k);
    }
    if (index) *index = i;
    if (r->d.mode == NM_PIMC_MODE_CHUNKS) return n;
    r->pos = (uint64_t)i * bs;
    uint64_t left = r->d.length - (uint64_t)i * bs;
    return left < bs ? (uint32_t)left : bs;
}

/* ------------------------------------------------------------------ Stream VByte */

/* Data bytes described by one control byte holding `valid` codes (1..4). */
static inline uint32_t ctrl_len(uint8_t c, uint32_t valid)
{
    uint32_t s = 0;
    for (uint32_t k = 0; k < valid; k++) s += ((c >> (2 * k)) & 3u) + 1u;
    return s;
}

/* Control bytes [c0, c1) of tasklet tid: equal shares, so every tasklet starts on a
 * multiple of 4 integers (16 output bytes: aligned for mram_write). */
static void share(uint32_t nctrl, unsigned tid, unsigned nt, uint32_t *c0, uint32_t *c1)
{
    uint32_t per = (nctrl + nt - 1) / nt;
    uint64_t a = (uint64_t)per * tid, b = a + per;
    if (a > nctrl) a = nctrl;
    if (b > nctrl) b = nctrl;
    *c0 = (uint32_t)a;
    *c1 = (uint32_t)b;
}

/* A read-only byte window over MRAM [lo, hi) fetched through WRAM in aligned pieces. */
#define SVB_WIN 256u
typedef struct bytewin {
    const nm_pimc_mram_io *io;
    uint32_t lo, hi;   /* readable area, lo aligned, hi multiple of 8 */
    uint32_t base, n;  /* buf holds MRAM [base, base + n) */
    uint64_t buf[SVB_WIN / 8];
} bytewin;

static inline uint8_t win_byte(bytewin *w, uint32_t a)
{
    if (a < w->base || a >= w->base + w->n) {
        uint32_t base = a & ~7u, n = w->hi - base;
        if (n > SVB_WIN) n = SVB_WIN;
        IO_READ(w->io, base, w->buf, n);
        w->base = base;
        w->n = n;
    }
    return ((const uint8_t *)w->buf)[a - w->base];
}

void nm_pimc_svb_phase_sum(const nm_pimc_mram_io *io, const nm_pimc_svb_args *a, unsigned tid,
                           unsigned ntasklets, nm_pimc_svb_shared *shared)
{
    uint32_t nctrl = nm_pimc_svb_ctrl_len(a->count), c0, c1;
    share(nctrl, tid, ntasklets, &c0, &c1);
    bytewin w = {.io = io, .lo = a->in_off, .hi = a->in_off + a->in_len, .base = 0, .n = 0};
    uint32_t sum = 0;
    for (uint32_t c = c0; c < c1; c++) {
        uint32_t valid = (c == nctrl - 1 && (a->count & 3u)) ? (a->count & 3u) : 4u;
        sum += ctrl_len(win_byte(&w, a->in_off + c), valid);
    }
    shared->part[tid] = sum;
}

void nm_pimc_svb_phase_decode(const nm_pimc_mram_io *io, const nm_pimc_svb_args *a, unsigned tid,
                              unsigned ntasklets, const nm_pimc_svb_shared *shared)
{
    uint32_t nctrl = nm_pimc_svb_ctrl_len(a->count), c0, c1;
    share(nctrl, tid, ntasklets, &c0, &c1);
    if (c0 >= c1) return;
    uint32_t data = a->in_off + nctrl;
    for (unsigned t = 0; t < tid; t++) data += shared->part[t]; /* prefix over <= 24 parts */
    /* Two windows: one over control bytes, one over data bytes. */
    bytewin cw = {.io = io, .lo = a->in_off, .hi = a->in_off + a->in_len, .base = 0, .n = 0};
    bytewin dw = cw;
    uint32_t out[64]; /* 256 B of WRAM; flushed to MRAM when full */
    uint32_t nout = 0, out_at = a->out_off + c0 * 16u;
    uint32_t first = c0 * 4u, last = c1 * 4u < a->count ? c1 * 4u : a->count;
    uint8_t ctrl = 0;
    for (uint32_t i = first; i < last; i++) {
        if ((i & 3u) == 0) ctrl = win_byte(&cw, a->in_off + i / 4u);
        uint32_t len = ((ctrl >> (2 * (i & 3u))) & 3u) + 1u, v = 0;
        for (uint32_t j = 0; j < len; j++) v |= (uint32_t)win_byte(&dw, data++) << (8 * j);
        out[nout++] = v;
        if (nout == 64) {
            IO_WRITE(io, out, out_at, sizeof out);
            out_at += sizeof out;
            nout = 0;
        }
    }
    if (nout) {
        /* Only the very last tasklet can end on an odd count; pad to 8 bytes (the host
         * reserves the room). */
        uint32_t bytes = nout * 4u;
        if (bytes & 7u) {
            out[nout] = 0;
            bytes += 4;
        }
        IO_WRITE(io, out, out_at, bytes);
    }
}

uint64_t nm_pimc_checksum_block(const void *blk, uint32_t n, uint64_t first_word)
{
    const uint8_t *p = blk;
    uint64_t s = 0;
    for (uint32_t at = 0, w = 0; at < n; at += 8, w++) {
        uint64_t v = 0;
        memcpy(&v, p + at, n - at >= 8 ? 8 : n - at);
        s += v * (2 * (first_word + w) + 1);
    }
    return s;
}

uint64_t nm_pimc_checksum_at(const void *p, uint32_t n, uint64_t at)
{
    /* Byte j of the logical buffer contributes b_j << 8 (j mod 8) times (2 floor(j / 8) + 1):
     * the word sum of nm_pimc_checksum_block split by bytes, so any cut gives the same total. */
    const uint8_t *b = p;
    uint64_t s = 0;
    uint32_t k = 0;
    for (; k < n && ((at + k) & 7u); k++) s += ((uint64_t)b[k] << (8 * ((at + k) & 7u))) * (2 * ((at + k) / 8) + 1);
    uint32_t words = (n - k) / 8;
    if (words) {
        s += nm_pimc_checksum_block(b + k, words * 8, (at + k) / 8);
        k += words * 8;
    }
    for (; k < n; k++) s += ((uint64_t)b[k] << (8 * ((at + k) & 7u))) * (2 * ((at + k) / 8) + 1);
    return s;
}
