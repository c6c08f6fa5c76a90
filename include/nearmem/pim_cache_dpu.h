/* PIM-CACHE, DPU side: what a DPU kernel uses to read a logical buffer that nm_pimc_copy
 * sent, and the Stream VByte decoder that tasklets run in parallel.
 *
 * The code is plain C written for the DPU's rules: MRAM is only touched through 8-byte
 * aligned reads and writes of at most 2048 bytes (mram_read/mram_write), WRAM use is a few
 * hundred bytes per tasklet, no SIMD. MRAM access goes through nm_pimc_mram_io so the same
 * code runs on the emulated machine (io = mram_read/mram_write of the running tasklet) and
 * in host tests (io = memcpy on a host array). */
#ifndef NEARMEM_PIM_CACHE_DPU_H
#define NEARMEM_PIM_CACHE_DPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NM_PIMC_DESC_MAGIC 0x43414350u /* "PCAC" little-endian */
#define NM_PIMC_DESC_SIZE 32u
#define NM_PIMC_MAX_TASKLETS 24u
#define NM_PIMC_DMA_MAX 2048u /* largest single mram_read / mram_write */

/* Per-slot descriptor, at nm_pimc_slot_desc(); in CAC mode the uint32 BRB offsets of the
 * blocks follow it (padded to 8 bytes): block i holds logical bytes [i*bs, (i+1)*bs). In
 * CDC mode a list of (uint32 MRAM address, uint32 logical start) pairs follows, one per
 * chunk in order; chunk i holds logical bytes [start_i, start_{i+1}) (the last one up to
 * length), stored at an 8-byte aligned address. */
#define NM_PIMC_MODE_LIST 0u  /* fixed blocks through an offset list */
#define NM_PIMC_MODE_FLAT 1u  /* contiguous */
#define NM_PIMC_MODE_CHUNKS 2u /* content-defined chunks through an (address, start) list */
typedef struct nm_pimc_desc {
    uint32_t magic;
    uint32_t mode;       /* NM_PIMC_MODE_LIST, _FLAT or _CHUNKS */
    uint64_t length;     /* logical bytes */
    uint32_t nblocks;    /* ceil(length / block_size); CDC: number of chunks */
    uint32_t block_size; /* bytes; CDC: the largest chunk (a kernel's WRAM buffer size) */
    uint32_t data_off;   /* plain mode: MRAM address of byte 0 */
    uint32_t seq;        /* copy number, for kernels that want to tell copies apart */
} nm_pimc_desc;

typedef struct nm_pimc_mram_io {
    void *ctx;
    /* n: multiple of 8, 8..2048; both addresses 8-byte aligned. */
    void (*read)(void *ctx, uint32_t mram_off, void *wram, uint32_t n);
    void (*write)(void *ctx, const void *wram, uint32_t mram_off, uint32_t n);
} nm_pimc_mram_io;

/* --------------------------------------------------------------- block reader
 * One call per block (or chunk), in order (or every stride-th from `first`, so tasklet t
 * of T reads blocks t, t+T, ...). The list is fetched NM_PIMC_READER_OFFS words at a time. */
#define NM_PIMC_READER_OFFS 32u
typedef struct nm_pimc_reader {
    const nm_pimc_mram_io *io;
    nm_pimc_desc d;
    uint32_t desc_off;
    uint32_t next, stride;
    uint32_t cache_base, cache_n;
    uint64_t pos; /* logical offset of the block or chunk last returned */
    uint32_t offs[NM_PIMC_READER_OFFS] __attribute__((aligned(8))); /* DMA target: 8-byte aligned */
} nm_pimc_reader;

/* 0 on success, -1 if the descriptor is not one (bad magic, mode or block size). */
int nm_pimc_reader_open(nm_pimc_reader *r, const nm_pimc_mram_io *io, uint32_t desc_off, uint32_t first,
                        uint32_t stride);
/* Read the next block into `wram` (block_size bytes, 8-byte aligned). Returns the number of
 * logical bytes in it (block_size, less for the last block; a chunk's length in CDC mode)
 * and its index in *index; 0 at the end. Bytes past the returned count are padding. Its
 * logical offset is r->pos (index * block_size except in CDC mode). */
uint32_t nm_pimc_reader_next(nm_pimc_reader *r, void *wram, uint32_t *index);

/* --------------------------------------------------------------- Stream VByte
 * Format of libstreamvbyte 0.4.1 (Lemire et al., IPL 2018): ceil(n/4) control bytes, two
 * bits per integer (lowest bits first; code c means c+1 data bytes), then the data bytes,
 * little-endian. Decoding in two phases separated by a barrier:
 *   1. each tasklet sums the data lengths of its share of control bytes into shared->part;
 *   2. each tasklet adds up the parts before its own (its data start) and decodes its
 *      integers, reading data bytes through WRAM and writing integers to MRAM.
 * job->in_off and job->out_off must be 8-byte aligned. */
typedef struct nm_pimc_svb_shared {
    uint32_t part[NM_PIMC_MAX_TASKLETS];
} nm_pimc_svb_shared;

typedef struct nm_pimc_svb_args {
    uint32_t in_off;  /* MRAM address of the stream */
    uint32_t in_len;  /* bytes of the stream area (multiple of 8); reads stay inside it */
    uint32_t out_off; /* MRAM address of the decoded integers */
    uint32_t count;   /* integers */
} nm_pimc_svb_args;

void nm_pimc_svb_phase_sum(const nm_pimc_mram_io *io, const nm_pimc_svb_args *a, unsigned tid,
                           unsigned ntasklets, nm_pimc_svb_shared *shared);
void nm_pimc_svb_phase_decode(const nm_pimc_mram_io *io, const nm_pimc_svb_args *a, unsigned tid,
                              unsigned ntasklets, const nm_pimc_svb_shared *shared);
/* Number of control bytes for `count` integers. */
static inline uint32_t nm_pimc_svb_ctrl_len(uint32_t count) { return (count + 3u) / 4u; }

/* Order-independent checksum of a logical buffer: the sum over its 8-byte words (the last
 * one zero-padded) of word * (2 * word_index + 1), modulo 2^64. The block form adds the
 * words of n bytes starting at word index first_word, so tasklets can sum their blocks. */
uint64_t nm_pimc_checksum_block(const void *blk, uint32_t n, uint64_t first_word);
/* The same sum for n bytes at any logical byte offset `at` (CDC chunks start anywhere). */
uint64_t nm_pimc_checksum_at(const void *p, uint32_t n, uint64_t at);
static inline uint64_t nm_pimc_checksum(const void *buf, uint64_t len)
{
    uint64_t s = 0;
    for (uint64_t at = 0; at < len; at += 4096)
        s += nm_pimc_checksum_block((const uint8_t *)buf + at, (uint32_t)(len - at < 4096 ? len - at : 4096), at / 8);
    return s;
}

/* --------------------------------------------------------------- the pim_cache program
 * Kernel arguments of the DPU program "pim_cache" (src/pim_cache/kernel.c): WRAM symbol
 * "pimc_args", all 32-bit for 4-byte WRAM transfers. */
enum { NM_PIMC_OP_NOP = 0, NM_PIMC_OP_SVB = 1, NM_PIMC_OP_VADD = 2, NM_PIMC_OP_SUM = 3 };
typedef struct nm_pimc_kargs {
    uint32_t op;
    uint32_t desc_a, desc_b; /* VADD: C = A + B (uint32); SUM: checksum of A */
    uint32_t out;            /* VADD: MRAM address of C (block i at out + i * block_size) */
    uint32_t in_off, in_len, out_off, count; /* SVB */
} nm_pimc_kargs;
#define NM_PIMC_TASKLETS 16u


#ifdef __cplusplus
}
#endif
#endif
