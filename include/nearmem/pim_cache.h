/* PIM-CACHE: content-aware host-to-DPU copy (Yuhala et al., "PIM-CACHE: High-Efficiency
 * Content-Aware Copy for Processing-In-Memory"; docs/pim-cache.md).
 *
 * A cache is bound to a set of DPUs through a transport (the emulated PIM machine, or host
 * memory in tests). Each DPU's MRAM region is split (Sec. 4.2) into a block retention
 * buffer (BRB, default 90%) that keeps every distinct block already sent, and a working
 * area holding, per slot, a descriptor and the ordered list of BRB offsets of the logical
 * buffer (the paper's offset buffer). A copy takes one buffer per DPU, of any size:
 * for each DPU the data reduction module (DRM) fingerprints the blocks, looks them up in
 * that DPU's table (fingerprint -> BRB offset), gathers the missing blocks into a block
 * buffer and every block's offset into the offset buffer, and sends both. A DPU kernel then
 * reads the logical buffer block by block through the offsets (pim_cache_dpu.h).
 *
 * Beyond the paper: a fallback to a plain copy when redundancy stays low (Sec. 6.8 left
 * it as future work), a verify mode that compares bytes on a fingerprint hit, a parallel
 * mode built to beat one dpu_push_xfer (BRB tops in lockstep per rank, a sampled decision
 * between CAC and a plain push, fingerprinting of one rank pipelined with the transfer of
 * the previous one), write tracking of registered buffers (a repeated copy reads only the
 * pages written since the last one), content-defined chunking, and several slots so a
 * kernel can read more than one logical buffer. The drop-in for dpu_push_xfer is
 * nm_pimc_push_xfer (pim_cache_machine.h). */
#ifndef NEARMEM_PIM_CACHE_H
#define NEARMEM_PIM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nearmem/common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- transport
 * What the cache needs from a DPU set. Offsets are MRAM byte addresses. Serial copies go
 * to one DPU (dpu_copy_to); a push sends `len` bytes at the same offset to every DPU from
 * one source per DPU (dpu_prepare_xfer + dpu_push_xfer). Lengths and offsets handed to the
 * transport are multiples of 8 (UPMEM's MRAM transfer rule). */
typedef struct nm_pimc_svb_job {
    uint64_t in_off;  /* compressed stream: control bytes then data bytes */
    uint64_t in_len;  /* bytes of the stream (multiple of 8, padded) */
    uint64_t out_off; /* decoded uint32 array */
    uint32_t count;   /* number of integers */
} nm_pimc_svb_job;

typedef struct nm_pimc_transport {
    void *ctx;
    unsigned nr_dpus;
    uint64_t mram_base; /* first MRAM byte the cache may use (multiple of 8) */
    uint64_t mram_size; /* bytes from mram_base the cache may use */
    nm_err (*copy_to)(void *ctx, unsigned dpu, uint64_t off, const void *src, size_t len);
    nm_err (*push_to)(void *ctx, uint64_t off, const void *const *srcs, size_t len);
    nm_err (*copy_from)(void *ctx, unsigned dpu, uint64_t off, void *dst, size_t len);
    /* Run the Stream VByte decoder on every DPU (jobs[d] for DPU d; count 0 = nothing). */
    nm_err (*svb_decode)(void *ctx, const nm_pimc_svb_job *jobs);
    /* Modeled device time spent so far (transfers and kernels), ns; NULL if not modeled. */
    double (*modeled_ns)(void *ctx);
    /* Optional (parallel mode). DPUs d and e share a rank iff d / dpus_per_rank equals
     * e / dpus_per_rank (0 = 64, UPMEM's rank). push_range pushes to DPUs [d0, d1) only
     * (srcs indexed by DPU number), so ranks can be sent one by one; NULL = push_to with
     * every DPU. push_gbps is the modeled push bandwidth of one rank (0 = unknown: the
     * parallel decision then uses fallback_threshold instead of transfer costs). */
    unsigned dpus_per_rank;
    nm_err (*push_range)(void *ctx, unsigned d0, unsigned d1, uint64_t off, const void *const *srcs, size_t len);
    double push_gbps;
    /* Optional: modeled bandwidth of copy_to to one DPU (GB/s; 0 = unknown). Parallel mode
     * sends a rank's blocks serially when only a few of its DPUs have any. */
    double serial_gbps;
    /* Optional: the host-side limit when several ranks are pushed at once (the machine's
     * transfer model, docs/pim-machine.md "Transfer model"): n ranks in flight move at most
     * push_gbps x (1 + push_rank_growth x (n - 1)) GB/s in all, and never more than
     * push_cap_gbps (0 = no cap). push_rank_growth 1 = ranks fully in parallel; 0 (also
     * what a transport that leaves it unset gets) = n ranks share one rank's bandwidth,
     * the strictest limit. */
    double push_rank_growth;
    double push_cap_gbps;
} nm_pimc_transport;

/* A host-memory transport: nr_dpus MRAM arrays of mram_size bytes, no time model
 * (modeled_ns is NULL). Counts bytes and calls. For tests and host-only use. */
typedef struct nm_pimc_memdev nm_pimc_memdev;
nm_err nm_pimc_memdev_create(unsigned nr_dpus, uint64_t mram_size, nm_pimc_memdev **out);
void nm_pimc_memdev_destroy(nm_pimc_memdev *m);
nm_pimc_transport nm_pimc_memdev_transport(nm_pimc_memdev *m);
uint8_t *nm_pimc_memdev_mram(nm_pimc_memdev *m, unsigned dpu); /* direct view, for DPU-side code */
typedef struct nm_pimc_memdev_stats {
    uint64_t serial_calls, serial_bytes, push_calls, push_bytes, read_calls, read_bytes, decode_calls;
} nm_pimc_memdev_stats;
nm_pimc_memdev_stats nm_pimc_memdev_get_stats(const nm_pimc_memdev *m);
/* Make the next `n`th transport call (1 = next) fail with NM_EFAULT, to test recovery. */
void nm_pimc_memdev_fail_after(nm_pimc_memdev *m, unsigned n);

/* ---------------------------------------------------------------- options */
typedef enum nm_pimc_hash {
    NM_PIMC_XXH64 = 0, /* the paper's fingerprint (Sec. 5) */
    NM_PIMC_XXH3 = 1,  /* XXH3_64bits: faster on modern x86 */
    NM_PIMC_WEAK8 = 2  /* TEST ONLY: XXH64 truncated to 8 bits, to force collisions */
} nm_pimc_hash;

typedef enum nm_pimc_chunking {
    NM_PIMC_FIXED = 0, /* fixed-size blocks at fixed offsets (the paper, Sec. 4.2) */
    NM_PIMC_CDC = 1    /* content-defined chunks (gear hash, FastCDC): shifted content deduplicates */
} nm_pimc_chunking;

typedef struct nm_pimc_options {
    uint32_t block_size;       /* bytes, power of two in [64, 4096]; default 1024 (Sec. 6.5) */
    double brb_share;          /* share of the MRAM region for the BRB, (0,1); default 0.9 */
    nm_pimc_hash hash;         /* default NM_PIMC_XXH64 */
    unsigned threads;          /* DRM host threads (DPUs are partitioned among them); 0 = every online CPU (default) */
    unsigned slots;            /* logical buffers resident at once; default 2 */
    bool compress;             /* nm_pimc_copy_u32 sends Stream VByte streams; default false */
    bool parallel;             /* CAC with lockstep BRB tops + dpu_push_xfer; default false (paper: serial) */
    bool verify;               /* compare bytes on a fingerprint hit (host shadow of each BRB) */
    double fallback_threshold; /* dedup fraction below which plain copies take over; 0 = never; default 0.3.
                                * With it on, the first copy starts with a probe. */
    unsigned fallback_window;  /* CAC copies averaged for the decision; default 2 */
    unsigned probe_interval;   /* in fallback, probe redundancy every N copies; default 4 */
    unsigned probe_stride;     /* a probe fingerprints every N-th block; default 16 */
    bool plain_serial;         /* plain (fallback) copies always serial, never a push; default false */
    /* Parallel mode: each copy first fingerprints every sample_stride-th block (default 128)
     * and predicts whether CAC beats a plain push (docs/pim-cache.md, "Parallel mode"). With
     * a transfer model, the sample costs at most sample_budget of the predicted push time
     * (default 0.01: fewer samples, or fewer DPUs sampled, for small copies). */
    unsigned sample_stride;
    double sample_budget;
    /* Chunking (default NM_PIMC_FIXED). CDC chunk sizes: 0 = derived from block_size (avg =
     * block_size, min = avg / 4, max = min(4 avg, 4096)); avg and max powers of two,
     * 8 <= min < avg < max <= 4096. Kernels allocate max bytes of WRAM per read. */
    nm_pimc_chunking chunking;
    uint32_t cdc_min, cdc_avg, cdc_max;
    /* Write tracking of registered buffers (docs/pim-cache.md, "Write tracking"):
     * track_mode NM_PIMC_TRACK_AUTO (default) uses the kernel's asynchronous userfaultfd
     * write-protection with PAGEMAP_SCAN (Linux >= 6.7; page granular, a write fault costs
     * about 1 us here and is handled in the kernel) where available, mprotect + SIGSEGV
     * otherwise; _UFFD and _MPROTECT force one (registration fails with NM_ENOTSUP when the
     * kernel lacks it). track_granule: the mprotect backend's granule (bytes, rounded up to
     * whole pages; 0 = 64 KiB), marked written by its first write after a copy; the uffd
     * backend tracks pages. */
    size_t track_granule;
    int track_mode; /* nm_pimc_track_mode */
} nm_pimc_options;

typedef enum nm_pimc_track_mode {
    NM_PIMC_TRACK_AUTO = 0,
    NM_PIMC_TRACK_UFFD = 1,
    NM_PIMC_TRACK_MPROTECT = 2,
} nm_pimc_track_mode;

void nm_pimc_options_default(nm_pimc_options *o);

/* ---------------------------------------------------------------- cache */
typedef struct nm_pimc nm_pimc;

/* Fails with NM_EINVAL on bad options or transport, NM_ERANGE when the BRB cannot hold one
 * block or a slot cannot hold one offset, NM_ENOMEM on host memory. */
nm_err nm_pimc_create(const nm_pimc_transport *t, const nm_pimc_options *o, nm_pimc **out);
void nm_pimc_destroy(nm_pimc *c);

/* Copy bufs[d] (lens[d] bytes, any size, 0 allowed, NULL only when 0) to DPU d's `slot`.
 * A buffer larger than the BRB fails with NM_ERANGE before anything changes. A copy may
 * invalidate a DPU's BRB (global invalidation, Sec. 4.2): other slots of that DPU then
 * become stale (nm_pimc_slot_valid). On a transport error the affected tables are
 * invalidated so the cache never refers to blocks that did not arrive. */
nm_err nm_pimc_copy(nm_pimc *c, unsigned slot, const void *const *bufs, const size_t *lens);
/* Several slots at once, planned together so none of them can invalidate another:
 * bufs[s * nr_dpus + d], lens likewise, for slots[0..nslots). */
nm_err nm_pimc_copy_multi(nm_pimc *c, unsigned nslots, const unsigned *slots, const void *const *bufs,
                          const size_t *lens);
/* 32-bit integers: with options.compress, encoded with Stream VByte on the host and decoded
 * by the DPUs into MRAM (slot then reads as a plain buffer); otherwise nm_pimc_copy. */
nm_err nm_pimc_copy_u32(nm_pimc *c, unsigned slot, const uint32_t *const *bufs, const size_t *counts);

/* True when `slot` of DPU `dpu` holds the buffer of its last copy (not invalidated since). */
bool nm_pimc_slot_valid(const nm_pimc *c, unsigned slot, unsigned dpu);
/* MRAM address of the descriptor of `slot` (the DPU kernel's entry point, same on every DPU). */
uint64_t nm_pimc_slot_desc(const nm_pimc *c, unsigned slot);
/* Read back the logical buffer of `slot` on `dpu` through the transport (len bytes). */
nm_err nm_pimc_read_back(nm_pimc *c, unsigned slot, unsigned dpu, void *dst, size_t len);
/* Forget every retained block of every DPU. */
void nm_pimc_invalidate_all(nm_pimc *c);

typedef enum nm_pimc_mode { NM_PIMC_MODE_CAC = 0, NM_PIMC_MODE_PLAIN = 1 } nm_pimc_mode;

/* Figures of the last copy and running totals. */
typedef struct nm_pimc_stats {
    /* last copy */
    nm_pimc_mode last_mode;
    bool last_probe;             /* a fallback probe ran during the last copy */
    uint64_t last_logical_bytes; /* bytes of the buffers */
    uint64_t last_sent_bytes;    /* block bytes sent (incl. padding in parallel mode) */
    uint64_t last_new_bytes;     /* bytes of the blocks or chunks that were new (no padding): the
                                  * redundancy itself is 1 - new / logical */
    uint64_t last_meta_bytes;    /* descriptors + offset lists sent */
    uint64_t last_blocks, last_hits;
    double last_dedup_pct;     /* (1 - block bytes sent / logical bytes) * 100, the paper's metric */
    uint64_t last_drm_ns;      /* host wall time of fingerprinting, lookups, gathering (real) */
    double last_xfer_modeled_ns; /* modeled device time of the copy, transfers one after another (NAN without a model) */
    /* Whole cost of the last copy (docs/pim-cache.md, "How totals are formed"):
     * host = wall time of every host step of the copy (sampling, write tracking, DRM,
     * staging; measured), cpu = CPU time of every host thread, total = host and modeled
     * transfers as scheduled: serial mode host + transfers; parallel mode ranks in parallel,
     * rank r's transfers starting when its host stage is done:
     * total = max_r (host before the stages + sum_{j <= r} stage_j + xfer_r). */
    uint64_t last_host_ns, last_host_cpu_ns;
    double last_total_ns;
    /* The same with the host's critical path instead of its wall time: the time the host
     * work takes with each of its threads on a core of its own (CPU time of the calling
     * thread, plus, for each parallel step, the part of its longest thread beyond the
     * caller's share). About the wall time on a quiet machine, and what a machine whose
     * cores other programs keep busy cannot show in wall time. The parallel decision uses it. */
    uint64_t last_host_crit_ns;
    double last_total_crit_ns;
    double last_sample_pct;    /* parallel mode: dedup % the sample predicted (NAN: no sample) */
    double last_sample_later_pct; /* parallel mode: % of samples seen only by the previous copy's sample */
    uint64_t last_clean_bytes; /* write tracking: bytes not read because unwritten since the last copy */
    /* totals */
    uint64_t copies, cac_copies, plain_copies, probes, mode_switches;
    uint64_t invalidations;    /* per-DPU table invalidations */
    uint64_t collisions;       /* verify mode: fingerprint hits whose bytes differed */
    uint64_t verify_bytes;     /* verify mode: bytes compared */
    uint64_t table_entries;    /* fingerprints held now, all DPUs */
    uint64_t table_bytes;      /* host bytes of the tables now (slots * 12) */
    uint64_t shadow_bytes;     /* verify mode: host bytes of the BRB shadows */
    uint64_t write_faults;     /* write tracking: first writes caught, all caches of the process */
    /* Write tracking, last copy: the write faults the application took on the registered
     * buffers this copy read since their previous copy (first writes to protected pages),
     * and their estimated cost (faults x the cost of one fault, measured on this host when
     * the backend was first used; thread CPU time). This cost falls on the application's
     * writes, not on the copy: benchmarks add it to the copy's host time, labelled. */
    uint64_t last_write_faults;
    double last_fault_cost_ns;
    double fault_ns;           /* cost of one write fault (ns) of the backend the cache's registrations use (0: none yet) */
    uint64_t last_track_ns;    /* host critical-path ns of write tracking in the last copy (scan, protect) */
    int last_track_backend;    /* 0 none, 1 uffd, 2 mprotect (the last registration the copy read) */
    uint64_t pool_sync_ns;     /* critical path: wall ns a parallel step adds beyond CPU time (wake-up and
                                * completion of the host threads, least of 16 at create) */
} nm_pimc_stats;

void nm_pimc_get_stats(const nm_pimc *c, nm_pimc_stats *out);
nm_pimc_mode nm_pimc_current_mode(const nm_pimc *c);
uint64_t nm_pimc_brb_size(const nm_pimc *c);
uint64_t nm_pimc_brb_top(const nm_pimc *c, unsigned dpu);
/* Largest buffer (bytes) one slot of one DPU can take. */
uint64_t nm_pimc_max_len(const nm_pimc *c);

/* ---------------------------------------------------------------- write tracking
 * Register a source buffer the application copies again and again. After each copy its
 * whole pages are write-protected; the first write to a granule is caught (SIGSEGV handler,
 * chained to the previous one) and marks it written. The next copy from inside the buffer
 * (any sub-range whose offset is a multiple of the block size; any offset with CDC) reads
 * and fingerprints only written granules; the blocks of the others keep their place in the
 * DPU's BRB and cost nothing on the host or the link. Buffers must be mapped, readable,
 * not overlap another registration (NM_EEXIST) and stay mapped while registered: a copy
 * from a buffer freed or unmapped while registered fails with NM_ESTATE and reads nothing.
 * With the mprotect backend a system call that writes into a protected page (read(2) into
 * the buffer) fails with EFAULT: declare such writes first with nm_pimc_reg_touch (the uffd
 * backend catches them; declaring them is harmless). Discarding pages (madvise
 * MADV_DONTNEED) changes them without a write: declare it too. Partial first and last
 * pages are never protected (they may hold other data) and are read at every copy. The
 * buffer must not be written while a copy from it is in progress (as with dpu_push_xfer:
 * what such a copy sends is undefined, and the next copy may miss the write). Tracking
 * turns itself off when its write faults cost more than it saves, and samples the write
 * rate on a 64th of the buffer until it pays again. */
typedef struct nm_pimc_reg nm_pimc_reg;
nm_err nm_pimc_register(nm_pimc *c, const void *buf, size_t len, nm_pimc_reg **out);
/* Unprotects the pages and forgets the records (also done by nm_pimc_destroy). */
nm_err nm_pimc_unregister(nm_pimc *c, nm_pimc_reg *r);
/* Declare [off, off + len) of the buffer written and make it writable now. */
nm_err nm_pimc_reg_touch(nm_pimc_reg *r, size_t off, size_t len);

/* Fingerprint one block with the cache's hash (exposed for benchmarks). */
uint64_t nm_pimc_fingerprint(nm_pimc_hash h, const void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
