/* SpeedMalloc: a malloc whose metadata lives on one support core.
 *
 * Every allocator data structure (size-class pages and their free bitmaps, the
 * segment and large-object maps, the statistics, the policy of returning memory
 * to the OS) has one owner at a time: the server thread, the software stand-in
 * for the paper's support core (SpeedMalloc, Sec. 3, 5.1), when it runs promptly,
 * otherwise the application thread that needs it, under the metadata lock.
 * Application threads talk to the owner through per-thread single-producer/single-
 * consumer rings: per-size-class ready rings of blocks, frees back in batches, fire
 * and forget. See docs/speedmalloc.md.
 *
 * Two builds of the same code:
 *   libspeedmalloc.so   exports malloc, free, ... : use it as LD_PRELOAD or link it.
 *   libnearmem_speedmalloc.a exports the nm_sm_* names below, beside the system
 *                        malloc (tests, the demo, in-process use).
 * nm_speedmalloc_get_stats() exists in both.
 *
 * Environment:
 *   NEARMEM_SPEEDMALLOC_STATS=1   print the statistics on stderr at exit
 *   NEARMEM_SPEEDMALLOC_CPU=n     pin the server thread to CPU n
 *   NEARMEM_SPEEDMALLOC_INLINE=1  no server thread: clients run the server's
 *                                 code themselves under a lock (fallback mode)
 *   NEARMEM_SPEEDMALLOC_WAKE=1    clients wake a sleeping server for queued frees
 *                                 (off by default: it did not pay on the machines measured)
 *   NEARMEM_SPEEDMALLOC_FAULT=stalled-server  tests only: a server that looks awake
 *                                 but never runs; clients must serve themselves */
#ifndef NEARMEM_SPEEDMALLOC_H
#define NEARMEM_SPEEDMALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nm_speedmalloc_stats {
    uint64_t server_running;      /* 1 when a server thread serves requests, 0 in inline mode */
    uint64_t clients_active;      /* registered client threads */
    uint64_t clients_registered;  /* ever registered (slots are recycled) */
    uint64_t clients_reclaimed;   /* exited threads whose queues were taken back */
    uint64_t size_classes;
    uint64_t refill_blocks;       /* blocks pushed into ready rings */
    uint64_t refill_rounds;       /* (client, class) refills */
    uint64_t client_misses;       /* malloc found its ready ring empty */
    uint64_t inline_serves;       /* a client ran the server's code itself (under the metadata lock) */
    uint64_t frees_received;      /* blocks taken back from free rings */
    uint64_t sync_requests;       /* large malloc/realloc, stats (always served under the lock) */
    uint64_t large_live;          /* live large (mmap) objects */
    uint64_t large_live_bytes;
    uint64_t large_allocs;
    uint64_t segments;            /* 4 MiB segments mapped */
    uint64_t pages_in_use;        /* size-class pages holding blocks */
    uint64_t bytes_out;           /* small-object bytes handed to clients (in use or in magazines) */
    uint64_t mapped_bytes;        /* segments + large mappings */
    uint64_t madvised_bytes;      /* returned to the OS after the decay */
    uint64_t server_wakeups;      /* futex wake-ups of the server */
    uint64_t server_sleeps;
    uint64_t server_cpu_ns;       /* CPU time of the server thread */
    uint64_t server_busy_ns;      /* ... of which in passes that found work (the rest: spinning, waking) */
    uint64_t server_oversub;      /* times the server found itself waiting for a CPU and stepped back */
    uint64_t invalid_frees;       /* reported once on stderr, then ignored */
    uint64_t double_frees;
    uint64_t fast_mallocs;        /* served from the thread's own magazine, no server involved */
    uint64_t ring_mallocs;        /* popped from the ready ring */
} nm_speedmalloc_stats;

/* Snapshot of the statistics (a request to the server). 0, or an errno value. */
int nm_speedmalloc_get_stats(nm_speedmalloc_stats *out);
/* Writes the statistics as text to a file descriptor (no stdio inside). */
void nm_speedmalloc_stats_print(int fd);

/* The static build's allocation API (same semantics as the C library's). */
void *nm_sm_malloc(size_t size);
void nm_sm_free(void *p);
void *nm_sm_calloc(size_t n, size_t size);
void *nm_sm_realloc(void *p, size_t size);
void *nm_sm_reallocarray(void *p, size_t n, size_t size);
void *nm_sm_aligned_alloc(size_t align, size_t size);
int nm_sm_posix_memalign(void **out, size_t align, size_t size);
void *nm_sm_memalign(size_t align, size_t size);
void *nm_sm_valloc(size_t size);
void *nm_sm_pvalloc(size_t size);
size_t nm_sm_malloc_usable_size(void *p);

#ifdef __cplusplus
}
#endif
#endif
