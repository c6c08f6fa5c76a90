/* BFS: level-synchronous breadth-first search (top-down) of a graph whose
 * vertices are split across DPUs in ranges of 64. Each level, every DPU
 * expands its own frontier vertices into a next-frontier bitmap of the whole
 * graph; the host ORs the DPUs' bitmaps, removes visited vertices and sends
 * the new frontier. Shared by the host and the DPU code. */
#ifndef BFS_COMMON_H
#define BFS_COMMON_H

#include <stdint.h>

#define UNREACHED 0xFFFFFFFFu

/* Where this DPU's data sits in MRAM (byte offsets from the heap pointer,
 * all multiples of 8, the same on every DPU). */
typedef struct {
    uint32_t first_vertex;  /* global id of this DPU's first vertex */
    uint32_t vertices;      /* vertices per DPU: a multiple of 64 */
    uint32_t bitmap_words;  /* 64-bit words of a whole-graph bitmap */
    uint32_t reserved;
    uint32_t ptrs_off;      /* uint32 ptrs[vertices + 1]: CSR row offsets into edges */
    uint32_t edges_off;     /* uint32 edges[]: global ids of the neighbours */
    uint32_t levels_off;    /* uint32 levels[vertices] */
    uint32_t frontier_off;  /* uint64 frontier[vertices / 64]: this DPU's part */
    uint32_t visited_off;   /* uint64 visited[bitmap_words]: whole graph */
    uint32_t next_off;      /* uint64 next[bitmap_words]: whole graph, written here */
} dpu_arguments_t;

typedef struct {
    uint64_t cycles;
} dpu_results_t;

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
