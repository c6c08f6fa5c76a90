/* BFS host: breadth-first search from -r on a random undirected graph of -n
 * vertices and average degree -k (or the edge list in -f FILE: "u v" per
 * line, '#' or '%' comments), vertices split across -d DPUs.
 *
 *   ./bin/host_code [-d DPUS] [-n VERTICES] [-k DEGREE] [-f FILE] [-r ROOT] [-w WARMUP] [-e REPS] [-s SEED]
 *
 * Exits 0 when every vertex's level equals the host's BFS, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dpu.h>

#include "../support/common.h"
#include "../support/utils.h"

#ifndef DPU_BINARY
#define DPU_BINARY "./bin/dpu_code"
#endif

typedef struct {
    uint32_t nr_dpus;
    uint32_t n, degree, root;
    const char *file;
    unsigned int warmup, reps;
    uint64_t seed;
} Params;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-d DPUS] [-n VERTICES (default 64K)] [-k AVERAGE_DEGREE (default 8)] [-f EDGE_LIST]\n"
            "          [-r ROOT (default 0)] [-w WARMUP] [-e REPS] [-s SEED]\n",
            prog);
}

static Params input_params(int argc, char **argv)
{
    Params p = {.nr_dpus = 1, .n = 1 << 16, .degree = 8, .root = 0, .file = NULL, .warmup = 0, .reps = 1, .seed = 1};
    int opt;
    while ((opt = getopt(argc, argv, "hd:n:k:f:r:w:e:s:")) >= 0) {
        switch (opt) {
        case 'd': p.nr_dpus = (uint32_t)atoi(optarg); break;
        case 'n': p.n = (uint32_t)parse_size(optarg); break;
        case 'k': p.degree = (uint32_t)atoi(optarg); break;
        case 'f': p.file = optarg; break;
        case 'r': p.root = (uint32_t)atoi(optarg); break;
        case 'w': p.warmup = (unsigned)atoi(optarg); break;
        case 'e': p.reps = (unsigned)atoi(optarg); break;
        case 's': p.seed = strtoull(optarg, NULL, 0); break;
        case 'h': usage(argv[0]); exit(0);
        default: usage(argv[0]); exit(2);
        }
    }
    if (p.nr_dpus == 0 || (p.n == 0 && !p.file) || p.reps == 0) {
        usage(argv[0]);
        exit(2);
    }
    return p;
}

/* A graph in CSR form: ptrs[n + 1], edges[ptrs[n]]. */
typedef struct {
    uint32_t n;
    uint32_t *ptrs;
    uint32_t *edges;
} Graph;

/* From an edge list (both directions of every edge). */
static Graph build_csr(uint32_t n, const uint32_t *eu, const uint32_t *ev, uint64_t m)
{
    Graph g = {.n = n};
    g.ptrs = calloc((uint64_t)n + 1, sizeof(uint32_t));
    g.edges = calloc(2 * m + 2, sizeof(uint32_t)); /* +2: 8-byte transfers may read past the end */
    if (!g.ptrs || !g.edges) {
        fprintf(stderr, "BFS: out of host memory\n");
        exit(2);
    }
    for (uint64_t k = 0; k < m; k++) {
        g.ptrs[eu[k] + 1]++;
        g.ptrs[ev[k] + 1]++;
    }
    for (uint32_t v = 0; v < n; v++)
        g.ptrs[v + 1] += g.ptrs[v];
    uint32_t *fill = malloc((uint64_t)n * sizeof(uint32_t));
    memcpy(fill, g.ptrs, (uint64_t)n * sizeof(uint32_t));
    for (uint64_t k = 0; k < m; k++) {
        g.edges[fill[eu[k]]++] = ev[k];
        g.edges[fill[ev[k]]++] = eu[k];
    }
    free(fill);
    return g;
}

static Graph random_graph(uint32_t n, uint32_t degree)
{
    uint64_t m = (uint64_t)n * degree / 2;
    uint32_t *eu = malloc(m * sizeof(uint32_t) + 4), *ev = malloc(m * sizeof(uint32_t) + 4);
    for (uint64_t k = 0; k < m; k++) {
        uint64_t r = rng_next();
        eu[k] = (uint32_t)(r % n);
        ev[k] = (uint32_t)((r >> 32) % n);
        if (ev[k] == eu[k])
            ev[k] = (eu[k] + 1) % n;
    }
    Graph g = build_csr(n, eu, ev, m);
    free(eu);
    free(ev);
    return g;
}

static Graph read_graph(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    uint64_t m = 0, cap = 1 << 20;
    uint32_t n = 0;
    uint32_t *eu = malloc(cap * sizeof(uint32_t)), *ev = malloc(cap * sizeof(uint32_t));
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        unsigned long u, v;
        if (line[0] == '#' || line[0] == '%' || sscanf(line, "%lu %lu", &u, &v) != 2 || u == v)
            continue;
        if (m == cap) {
            cap *= 2;
            eu = realloc(eu, cap * sizeof(uint32_t));
            ev = realloc(ev, cap * sizeof(uint32_t));
        }
        eu[m] = (uint32_t)u;
        ev[m] = (uint32_t)v;
        m++;
        if (u >= n)
            n = (uint32_t)u + 1;
        if (v >= n)
            n = (uint32_t)v + 1;
    }
    fclose(f);
    Graph g = build_csr(n, eu, ev, m);
    free(eu);
    free(ev);
    return g;
}

/* The reference levels. */
static void host_bfs(const Graph *g, uint32_t root, uint32_t *level)
{
    uint32_t *queue = malloc((uint64_t)g->n * sizeof(uint32_t));
    for (uint32_t v = 0; v < g->n; v++)
        level[v] = UNREACHED;
    uint64_t head = 0, tail = 0;
    level[root] = 0;
    queue[tail++] = root;
    while (head < tail) {
        uint32_t v = queue[head++];
        for (uint32_t e = g->ptrs[v]; e < g->ptrs[v + 1]; e++)
            if (level[g->edges[e]] == UNREACHED) {
                level[g->edges[e]] = level[v] + 1;
                queue[tail++] = g->edges[e];
            }
    }
    free(queue);
}

int main(int argc, char **argv)
{
    Params p = input_params(argc, argv);
    struct dpu_set_t set, dpu;
    uint32_t nr_dpus, i;

    rng_seed(p.seed);
    Graph g = p.file ? read_graph(p.file) : random_graph(p.n, p.degree);
    if (p.root >= g.n) {
        fprintf(stderr, "BFS: root %u is not a vertex (%u vertices)\n", p.root, g.n);
        return 2;
    }

    DPU_ASSERT(dpu_alloc(p.nr_dpus, NULL, &set));
    DPU_ASSERT(dpu_load(set, DPU_BINARY, NULL));
    DPU_ASSERT(dpu_get_nr_dpus(set, &nr_dpus));

    /* Vertex ranges of a multiple of 64; the layout of every DPU's MRAM. */
    const uint32_t per_dpu = (uint32_t)roundup(divceil(g.n, nr_dpus), 64);
    const uint32_t words = (uint32_t)((uint64_t)per_dpu * nr_dpus / 64);
    uint32_t max_edges = 0;
    for (i = 0; i < nr_dpus; i++) {
        uint32_t lo = i * per_dpu < g.n ? i * per_dpu : g.n, hi = (i + 1) * per_dpu < g.n ? (i + 1) * per_dpu : g.n;
        uint32_t e = g.ptrs[hi] - g.ptrs[lo];
        max_edges = e > max_edges ? e : max_edges;
    }
    dpu_arguments_t layout = {.vertices = per_dpu, .bitmap_words = words};
    layout.ptrs_off = 0;
    layout.edges_off = layout.ptrs_off + (uint32_t)roundup((per_dpu + 1) * sizeof(uint32_t), 8);
    layout.levels_off = layout.edges_off + (uint32_t)roundup(max_edges * sizeof(uint32_t), 8);
    layout.frontier_off = layout.levels_off + per_dpu * (uint32_t)sizeof(uint32_t);
    layout.visited_off = layout.frontier_off + per_dpu / 8;
    layout.next_off = layout.visited_off + words * (uint32_t)sizeof(uint64_t);
    if ((uint64_t)layout.next_off + words * sizeof(uint64_t) > (60u << 20)) {
        fprintf(stderr, "BFS: %u vertices and %u edges per DPU do not fit in MRAM\n", per_dpu, max_edges);
        return 2;
    }

    /* Per-DPU CSR offsets, local to the DPU's edges. */
    const uint32_t ptr_stride = (uint32_t)roundup(per_dpu + 1, 2);
    uint32_t *ptrs = calloc((uint64_t)ptr_stride * nr_dpus, sizeof(uint32_t));
    uint32_t *levels = calloc((uint64_t)per_dpu * nr_dpus, sizeof(uint32_t));
    uint32_t *unreached = malloc((uint64_t)per_dpu * sizeof(uint32_t));
    uint32_t *expect = malloc((uint64_t)g.n * sizeof(uint32_t));
    uint64_t *visited = calloc(words, sizeof(uint64_t));
    uint64_t *frontier = calloc(words, sizeof(uint64_t));
    uint64_t *next = calloc((uint64_t)words * nr_dpus, sizeof(uint64_t));
    if (!ptrs || !levels || !unreached || !expect || !visited || !frontier || !next) {
        fprintf(stderr, "BFS: out of host memory\n");
        return 2;
    }
    for (i = 0; i < nr_dpus; i++) {
        uint64_t base_v = (uint64_t)i * per_dpu;
        uint32_t base_e = g.ptrs[base_v < g.n ? base_v : g.n];
        for (uint32_t v = 0; v <= per_dpu; v++) {
            uint64_t gv = base_v + v < g.n ? base_v + v : g.n;
            ptrs[(uint64_t)i * ptr_stride + v] = g.ptrs[gv] - base_e;
        }
    }
    for (uint32_t v = 0; v < per_dpu; v++)
        unreached[v] = UNREACHED;
    printf("BFS: %u DPUs, %u vertices, %u edges\n", nr_dpus, g.n, g.ptrs[g.n]);

    Timer timer = {0};
    uint32_t depth = 0;
    for (unsigned int rep = 0; rep < p.warmup + p.reps; rep++) {
        int r = rep < p.warmup ? 0 : (int)(rep - p.warmup);
        start(&timer, 1, r);
        /* The graph: arguments and CSR offsets in parallel, edges one DPU at a time. */
        dpu_arguments_t *args = malloc(nr_dpus * sizeof(*args));
        DPU_FOREACH(set, dpu, i) {
            args[i] = layout;
            args[i].first_vertex = i * per_dpu;
            DPU_ASSERT(dpu_prepare_xfer(dpu, &args[i]));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, sizeof(args[0]), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, ptrs + (uint64_t)i * ptr_stride));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, layout.ptrs_off,
                                 ptr_stride * sizeof(uint32_t), DPU_XFER_DEFAULT));
        DPU_FOREACH(set, dpu, i) {
            uint64_t lo = (uint64_t)i * per_dpu < g.n ? (uint64_t)i * per_dpu : g.n;
            uint64_t hi = (uint64_t)(i + 1) * per_dpu < g.n ? (uint64_t)(i + 1) * per_dpu : g.n;
            uint32_t e = g.ptrs[hi] - g.ptrs[lo];
            if (e)
                DPU_ASSERT(dpu_copy_to(dpu, DPU_MRAM_HEAP_POINTER_NAME, layout.edges_off, g.edges + g.ptrs[lo],
                                       roundup(e * sizeof(uint32_t), 8)));
        }
        free(args);
        DPU_ASSERT(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, layout.levels_off, unreached,
                                    per_dpu * sizeof(uint32_t), DPU_XFER_DEFAULT));
        memset(visited, 0, words * sizeof(uint64_t));
        memset(frontier, 0, words * sizeof(uint64_t));
        visited[p.root / 64] = frontier[p.root / 64] = 1ull << (p.root % 64);
        stop(&timer, 1);

        bool any = true;
        for (depth = 0; any; depth++) {
            start(&timer, 4, r || depth);
            DPU_ASSERT(dpu_broadcast_to(set, "level", 0, &depth, sizeof(depth), DPU_XFER_DEFAULT));
            DPU_ASSERT(dpu_broadcast_to(set, DPU_MRAM_HEAP_POINTER_NAME, layout.visited_off, visited,
                                        words * sizeof(uint64_t), DPU_XFER_DEFAULT));
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, frontier + (uint64_t)i * per_dpu / 64));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, layout.frontier_off,
                                     per_dpu / 8, DPU_XFER_DEFAULT));
            stop(&timer, 4);
            start(&timer, 2, r || depth);
            DPU_ASSERT(dpu_launch(set, DPU_SYNCHRONOUS));
            stop(&timer, 2);
            start(&timer, 4, 1);
            DPU_FOREACH(set, dpu, i) {
                DPU_ASSERT(dpu_prepare_xfer(dpu, next + (uint64_t)i * words));
            }
            DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, layout.next_off,
                                     words * sizeof(uint64_t), DPU_XFER_DEFAULT));
            any = false;
            for (uint32_t w = 0; w < words; w++) {
                uint64_t bits = 0;
                for (i = 0; i < nr_dpus; i++)
                    bits |= next[(uint64_t)i * words + w];
                frontier[w] = bits & ~visited[w];
                visited[w] |= frontier[w];
                any |= frontier[w] != 0;
            }
            stop(&timer, 4);
        }
        start(&timer, 3, r);
        DPU_FOREACH(set, dpu, i) {
            DPU_ASSERT(dpu_prepare_xfer(dpu, levels + (uint64_t)i * per_dpu));
        }
        DPU_ASSERT(dpu_push_xfer(set, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, layout.levels_off,
                                 per_dpu * sizeof(uint32_t), DPU_XFER_DEFAULT));
        stop(&timer, 3);
    }

    host_bfs(&g, p.root, expect);
    uint32_t errors = 0, reached = 0;
    for (uint32_t v = 0; v < g.n; v++) {
        reached += expect[v] != UNREACHED;
        if (levels[v] != expect[v]) {
            if (errors < 5)
                fprintf(stderr, "BFS: level[%u] = %u, expected %u\n", v, levels[v], expect[v]);
            errors++;
        }
    }
    print_timer(&timer, 1, "CPU-DPU", p.reps);
    print_timer(&timer, 2, "DPU kernel", p.reps);
    print_timer(&timer, 4, "Inter-DPU", p.reps);
    print_timer(&timer, 3, "DPU-CPU", p.reps);
    if (errors)
        printf("[ERROR] %u wrong levels\n", errors);
    else
        printf("[OK] levels are equal (%u levels, %u of %u vertices reached)\n", depth, reached, g.n);
    free(g.ptrs);
    free(g.edges);
    free(ptrs);
    free(levels);
    free(unreached);
    free(expect);
    free(visited);
    free(frontier);
    free(next);
    DPU_ASSERT(dpu_free(set));
    return errors ? 1 : 0;
}
