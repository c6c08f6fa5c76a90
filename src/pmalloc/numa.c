/* NUMA-aware allocation (paper Sec. 6.1, 6.3): topology, arenas affiliated
 * with nodes, node regions of the data area, local-first placement of extents
 * (Algorithm 1; for blocks it is pm_small_take_other, small.c; the
 * thread-migration check of Sec. 6.4 is in tcache.c) and the slab timestamps.
 *
 * Topology comes from libnuma when the machine has more than one node. The
 * option numa_vnodes (or the environment variable NEARMEM_PMALLOC_VNODES)
 * splits the CPUs this process may run on into N virtual nodes instead, so
 * the logic runs, and is tested, on a one-node machine. With one node every
 * function here reduces to part 1's behaviour.
 *
 * Arena i belongs to node i / per_node (the arena count is rounded up to a
 * multiple of the node count). The data area is split into one contiguous
 * page range per node: in a heap created with several nodes, node k's range
 * is node k's heap file (files.c; docs/pmalloc.md, "Node memory"): slabs of a
 * node's arenas and extents requested by its threads come from it first. */
#include <numa.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/common/bitmap.h"
#include "pm_extents.h"

static unsigned parse_vnodes(const pmalloc_options *o, nm_err *err)
{
    *err = NM_OK;
    if (o->numa_vnodes) return o->numa_vnodes;
    const char *env = getenv("NEARMEM_PMALLOC_VNODES");
    if (!env || !*env) return 0;
    char *end;
    unsigned long v = strtoul(env, &end, 10);
    if (*end || v == 0 || v > PM_NUMA_MAX_NODES) {
        *err = nm_fail(NM_EINVAL, "pmalloc: NEARMEM_PMALLOC_VNODES=%s is not a node count 1..%u", env, PM_NUMA_MAX_NODES);
        return 0;
    }
    return (unsigned)v;
}

nm_err pm_numa_setup(pm_heap *h, const pmalloc_options *o)
{
    nm_err err;
    unsigned vn = parse_vnodes(o, &err);
    if (err) return err;
    if (vn > PM_NUMA_MAX_NODES) return nm_fail(NM_EINVAL, "pmalloc_open: %u virtual nodes > %u", vn, PM_NUMA_MAX_NODES);
    pm_numa *n = aligned_alloc(_Alignof(pm_numa), NM_ALIGN_UP(sizeof *n, _Alignof(pm_numa)));
    if (!n) return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory for NUMA state");
    memset(n, 0, sizeof *n);
    h->numa = n;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    long nc = sysconf(_SC_NPROCESSORS_CONF);
    n->ncpu = nc > 0 ? (unsigned)nc : 1;
    n->cpu_node = malloc(n->ncpu * sizeof *n->cpu_node);
    if (!n->cpu_node) return nm_fail(NM_ENOMEM, "pmalloc_open: no host memory for NUMA state");
    for (unsigned c = 0; c < n->ncpu; c++) n->cpu_node[c] = 0;
    n->nnodes = 1;
    if (vn) {
        /* virtual nodes: the i-th CPU we may run on goes to node i * N / ncpus */
        cpu_set_t set;
        CPU_ZERO(&set);
        unsigned k = 0, total = 0;
        if (sched_getaffinity(0, sizeof set, &set) == 0) total = (unsigned)CPU_COUNT(&set);
        for (unsigned c = 0; c < n->ncpu; c++) {
            if (total && c < CPU_SETSIZE && CPU_ISSET(c, &set)) n->cpu_node[c] = (int)(k++ * vn / total);
            else n->cpu_node[c] = (int)(c % vn);
        }
        n->nnodes = vn;
        n->virt = vn > 1;
    } else if (numa_available() >= 0 && numa_num_configured_nodes() > 1) {
        int maxn = numa_max_node();
        n->nnodes = (unsigned)NM_MIN(maxn + 1, (int)PM_NUMA_MAX_NODES);
        for (unsigned c = 0; c < n->ncpu; c++) {
            int nd = numa_node_of_cpu((int)c);
            n->cpu_node[c] = nd >= 0 && (unsigned)nd < n->nnodes ? nd : 0;
        }
    }
    n->sync_ns = o->numa_sync_ms == PMALLOC_NUMA_SYNC_NEVER ? 0 : (uint64_t)(o->numa_sync_ms ? o->numa_sync_ms : 50) * 1000000ull;
    return NM_OK;
}

/* Arena count for `want` requested arenas: a multiple of the node count. */
unsigned pm_numa_narenas(pm_heap *h, unsigned want)
{
    pm_numa *n = h->numa;
    if (want == 0) want = 1;
    if (n->nnodes <= 1) { n->per_node = want; return want; }
    n->per_node = (want + n->nnodes - 1) / n->nnodes;
    return n->per_node * n->nnodes;
}

unsigned pm_numa_arena_node(const pm_heap *h, unsigned arena)
{
    const pm_numa *n = h->numa;
    return n->nnodes > 1 ? arena / n->per_node : 0;
}

static unsigned cpu_node_now(const pm_heap *h)
{
    const pm_numa *n = h->numa;
    if (n->nnodes <= 1) return 0;
    int cpu = sched_getcpu();
    if (cpu < 0 || (unsigned)cpu >= n->ncpu) return 0;
    return (unsigned)n->cpu_node[cpu];
}

unsigned pm_numa_node_now(const pm_heap *h) { return cpu_node_now(h); }

/* The arena with the fewest threads among the node's (paper Sec. 4.2), caller holds tc_lock. */
pm_arena *pm_numa_pick_arena(pm_heap *h, pm_tcache *tc)
{
    pm_numa *n = h->numa;
    if (!tc->pinned) tc->node = cpu_node_now(h);
    unsigned first = n->nnodes > 1 ? tc->node * n->per_node : 0, cnt = n->nnodes > 1 ? n->per_node : h->narenas;
    pm_arena *best = &h->arenas[first + h->next_arena++ % cnt];
    for (unsigned i = 0; i < cnt; i++)
        if (h->arenas[first + i].nthreads < best->nthreads) best = &h->arenas[first + i];
    return best;
}

/* ---- node regions of the data area ---- */

static void node_range(const pm_heap *h, unsigned node, uint64_t *lo, uint64_t *hi)
{
    unsigned nn = h->numa->nnodes;
    if (h->files && h->files->n == nn) { /* node k's range is its file (the layout the heap was created with) */
        *lo = h->files->lo[node];
        *hi = h->files->lo[node + 1];
        return;
    }
    *lo = h->data_pages * node / nn;
    *hi = h->data_pages * (node + 1) / nn;
}

unsigned pm_numa_page_node(const pm_heap *h, uint64_t page)
{
    unsigned nn = h->numa->nnodes;
    if (nn <= 1) return 0;
    unsigned k = (unsigned)NM_MIN(page * nn / h->data_pages, (uint64_t)nn - 1);
    uint64_t lo, hi;
    for (;;) {
        node_range(h, k, &lo, &hi);
        if (page < lo) k--;
        else if (page >= hi) k++;
        else return k;
    }
}

int pmalloc_numa_node_of(pmalloc_heap *hd, pmalloc_ptr p)
{
    PM_ENTER(h, hd, -1);
    if (!pm_ptr_off(h, p, &p) || p < h->sb->data_off || p >= h->size) return -1;
    return (int)pm_numa_page_node(h, (p - h->sb->data_off) / PM_PAGE);
}

/* Nodes in the order to try from `node`: itself, then nearest first (libnuma's
 * distance table; ring order for virtual nodes, which have no distances). */
void pm_numa_node_order(const pm_heap *h, unsigned node, unsigned *order)
{
    unsigned nn = h->numa->nnodes;
    for (unsigned d = 0; d < nn; d++) order[d] = (node + d) % nn;
    if (h->numa->virt || nn <= 2) return;
    for (unsigned i = 2; i < nn; i++) /* insertion sort of order[1..] by distance */
        for (unsigned j = i; j > 1 && numa_distance((int)node, (int)order[j]) < numa_distance((int)node, (int)order[j - 1]); j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* Best fit among the free space inside [lo, hi) (caller holds large_lock). */
static bool fit_in(pm_heap *h, uint64_t lo, uint64_t hi, uint64_t npages, uint64_t *at)
{
    uint64_t best = 0, bestlen = 0;
    for (pm_veh *v = pm_free_first(h); v; v = pm_free_next(h, v)) { /* not in address order */
        uint64_t s = NM_MAX(v->page, lo), e = NM_MIN(v->page + v->npages, hi);
        if (e <= s || e - s < npages) continue;
        if (!bestlen || e - s < bestlen) { best = s; bestlen = e - s; }
        if (bestlen == npages) break;
    }
    *at = best;
    return bestlen != 0;
}

/* Set by pm_small_take_other (small.c) around its last resort: a slab anywhere (node
 * ranges smaller than a slab, or free space only across range borders). */
__thread bool pm_numa_place_anywhere;

/* Algorithm 1 for extents (Sec. 6.3): the node's own range first, then the
 * others (nearest first for real nodes, in ring order for virtual ones), and
 * with `any`, finally anywhere (an extent larger than one node's range). */
nm_err pm_numa_extent_alloc(pm_heap *h, unsigned node, uint64_t npages, int state, bool any, pm_veh **out)
{
    pm_numa *n = h->numa;
    if (n->nnodes <= 1) return pm_extent_alloc(h, npages, state, out);
    uint64_t lo, hi, at;
    node_range(h, node, &lo, &hi);
    if (fit_in(h, lo, hi, npages, &at)) return pm_extent_claim(h, at, npages, state, out);
    /* on-demand synchronisation: extents of this node freed by other nodes */
    if (pm_up_xsync(h, node, PM_SYNC_DEMAND) && fit_in(h, lo, hi, npages, &at)) return pm_extent_claim(h, at, npages, state, out);
    if (!any && !pm_numa_place_anywhere) return nm_fail(NM_ENOMEM, "pmalloc: node %u's range has no free extent of %llu pages", node, (unsigned long long)npages);
    unsigned order[PM_NUMA_MAX_NODES];
    pm_numa_node_order(h, node, order);
    for (unsigned d = 1; d < n->nnodes; d++) {
        unsigned k = order[d];
        node_range(h, k, &lo, &hi);
        if (fit_in(h, lo, hi, npages, &at) || (pm_up_xsync(h, k, PM_SYNC_DEMAND) && fit_in(h, lo, hi, npages, &at))) {
            pm_count(&n->c_remote_extents, 1);
            return pm_extent_claim(h, at, npages, state, out);
        }
    }
    nm_err e = pm_extent_alloc(h, npages, state, out);
    if (!e) pm_count(&n->c_remote_extents, 1);
    return e;
}

nm_err pm_numa_stats(pm_heap *h, pmalloc_numa_stats *st)
{
    pm_numa *n = h->numa;
    memset(st, 0, sizeof *st);
    st->nodes = n->nnodes;
    st->virtual_nodes = n->virt;
    st->remote_free_logs = n->hdr != NULL;
    st->arenas_per_node = n->nnodes > 1 ? n->per_node : h->narenas;
    if (h->files) {
        st->node_files = h->files->n;
        st->node_files_pmem = h->files->pmem_nodes;
        st->node_files_bound = h->files->bound;
    }
#define LD(x) __atomic_load_n(&n->x, __ATOMIC_RELAXED)
    st->remote_frees = LD(c_remote_frees);
    st->synced_on_demand = LD(c_synced[PM_SYNC_DEMAND]);
    st->synced_epoch = LD(c_synced[PM_SYNC_EPOCH]);
    st->synced_other = LD(c_synced[PM_SYNC_OTHER]);
    st->pending = st->remote_frees - st->synced_on_demand - st->synced_epoch - st->synced_other;
    st->sync_passes = LD(c_passes);
    st->log_switches = LD(c_switches);
    st->migrations = LD(c_migrations);
    st->remote_allocs = LD(c_remote_allocs);
    st->remote_extents = LD(c_remote_extents);
    st->replayed = LD(c_replayed);
    st->remote_extent_frees = LD(c_remote_xfrees);
    st->pending_extents = st->remote_extent_frees - LD(c_xsynced);
#undef LD
    return NM_OK;
}

nm_err pmalloc_numa_stats_get(pmalloc_heap *hd, pmalloc_numa_stats *st)
{
    PM_ENTER_ERR(h, hd);
    if (!st) return nm_fail(NM_EINVAL, "pmalloc_numa_stats_get: NULL argument");
    return pm_numa_stats(h, st);
}

void pm_numa_slab_created(pm_heap *h, uint64_t page)
{
    pm_numa *n = h->numa;
    if (!n->hdr) return;
    /* above every timestamp issued so far: entries about earlier slabs here are stale */
    pm_ts_put(h, page, __atomic_fetch_add(&n->dts, 1, __ATOMIC_SEQ_CST));
}
