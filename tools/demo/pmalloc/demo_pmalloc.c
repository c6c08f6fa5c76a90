/* Demo step: a persistent linked list survives a SIGKILL in the middle of
 * appending (PMAlloc-LOG, paper Sec. 4.1 and 7). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/common.h"
#include "nearmem/demo.h"
#include "nearmem/pmalloc.h"

typedef struct node {
    uint64_t value;
    pmalloc_ptr next;
    uint64_t check; /* value * odd constant: set once the node is initialised */
} node;

#define CHECK_MUL 0x9e3779b97f4a7c15ull

static nm_err append(pmalloc_heap *h, pmalloc_ptr *tail_slot, uint64_t value, pmalloc_ptr **new_tail)
{
    nm_err e = pmalloc_malloc_to(h, sizeof(node), tail_slot); /* allocated and linked atomically */
    if (e) return e;
    node *n = pmalloc_direct(h, *tail_slot);
    n->value = value;
    n->next = 0;
    n->check = value * CHECK_MUL;
    pmalloc_persist(h, n, sizeof *n);
    *new_tail = &n->next;
    return NM_OK;
}

static pmalloc_options opts(void)
{
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = 16u << 20;
    o.persist = PMALLOC_PERSIST_CPU;
    o.narenas = 1;
    return o;
}

/* Slab morphing (Sec. 5.2) in miniature: 8000 objects of 100 B, 90% freed,
 * then 130 B objects; slabs in use with and without morphing. */
static nm_err morph_demo(nm_demo *d, const char *dir, bool morph, uint64_t *slabs, uint64_t *morphs)
{
    pmalloc_options o = opts();
    o.morph_su = morph ? 0 : PMALLOC_MORPH_OFF;
    pmalloc_heap *h;
    nm_err e = pmalloc_open(dir, &o, &h);
    if (e) return e;
    enum { N = 8000 };
    if ((e = pmalloc_malloc_to(h, N * sizeof(pmalloc_ptr), pmalloc_root_slot(h, 0)))) return e;
    pmalloc_ptr *slot = pmalloc_direct(h, pmalloc_get_root(h, 0));
    memset(slot, 0, N * sizeof *slot);
    for (unsigned i = 0; i < N && !e; i++) e = pmalloc_malloc_to(h, 100, &slot[i]);
    for (unsigned i = 0; i < N && !e; i++)
        if (i % 10) e = pmalloc_free_from(h, &slot[i]);
    for (unsigned i = 0; i < N && !e; i++)
        if (!slot[i]) e = pmalloc_malloc_to(h, 130, &slot[i]);
    if (!e) e = pmalloc_check(h);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    *slabs = st.slabs;
    *morphs = st.morphs;
    NM_UNUSED(d);
    pmalloc_close(h);
    return e;
}

/* NUMA (Sec. 6) with 2 virtual nodes: node 0 allocates, node 1 frees (two-phase
 * remote frees), the process "crashes", recovery replays the deallocation log. */
static nm_err numa_part(nm_demo *d, const char *dir)
{
    char sub[600];
    snprintf(sub, sizeof sub, "%s/numa", dir);
    mkdir(sub, 0700);
    pmalloc_options o = opts();
    o.numa_vnodes = 2;
    o.numa_sync_ms = PMALLOC_NUMA_SYNC_NEVER;
    pmalloc_heap *h;
    nm_err e = pmalloc_open(sub, &o, &h);
    if (e) return e;
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    enum { N = 500 };
    if ((e = pmalloc_numa_set_node(h, 0))) return e;
    for (unsigned i = 0; i < N; i++)
        if ((e = pmalloc_malloc_to(h, 64, &roots[i]))) return e;
    if ((e = pmalloc_numa_set_node(h, 1))) return e;
    for (unsigned i = 0; i < N; i++)
        if ((e = pmalloc_free_from(h, &roots[i]))) return e;
    pmalloc_numa_stats ns;
    pmalloc_numa_stats_get(h, &ns);
    nm_demo_say(d, "NUMA, 2 virtual nodes: %u heap files hold the nodes' memory (%s/pmalloc.node0.heap, ...node1.heap), "
                   "mapped after the main file into one range", ns.node_files, sub);
    nm_demo_say(d, "node 0 allocated %u blocks, node 1 freed them: %llu two-phase remote frees, "
                   "%llu logged and not yet applied by node 0", N, (unsigned long long)ns.remote_frees, (unsigned long long)ns.pending);
    pmalloc_abandon(h); /* crash between the two phases */
    o.create = false;
    if ((e = pmalloc_open(sub, &o, &h))) return e;
    pmalloc_numa_stats_get(h, &ns);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    nm_demo_say(d, "crash, reopen: recovery replayed %llu deallocation-log entries; %llu objects allocated",
                (unsigned long long)ns.replayed, (unsigned long long)st.objects_live);
    if (st.objects_live != 0) return nm_fail(NM_ECORRUPT, "%llu objects left after the replay", (unsigned long long)st.objects_live);
    if ((e = pmalloc_check(h))) return e;
    e = pmalloc_close(h);
    if (!e) e = pmalloc_remove(sub, NULL); /* the main file and the node files */
    rmdir(sub);
    return e;
}

int nm_demo_pmalloc(nm_demo *d)
{
    const char *dir = nm_demo_tmpdir(d);
    pmalloc_options o = opts();
    pmalloc_heap *h;
    nm_err e = pmalloc_open(dir, &o, &h);
    if (e) return e;
    pmalloc_ptr *slot = pmalloc_root_slot(h, 0);
    for (uint64_t v = 0; v < 1000; v++)
        if ((e = append(h, slot, v, &slot))) return e;
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    nm_demo_say(d, "PMAlloc-LOG heap in %s: list of 1000 nodes, %llu flushes (%llu metadata, %llu reflushes), %llu fences",
                dir, (unsigned long long)st.flushes, (unsigned long long)st.meta_flushes,
                (unsigned long long)st.reflushes, (unsigned long long)st.fences);
    pmalloc_close(h);

    /* a child keeps appending until it is killed */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return nm_fail(NM_EIO, "fork failed");
    if (pid == 0) {
        pmalloc_heap *c;
        pmalloc_options co = opts();
        co.create = false;
        if (pmalloc_open(dir, &co, &c)) _exit(2);
        pmalloc_ptr *s = pmalloc_root_slot(c, 0);
        while (*s) s = &((node *)pmalloc_direct(c, *s))->next;
        for (uint64_t v = 1000;; v++)
            if (append(c, s, v, &s)) _exit(3);
    }
    usleep(30000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status)) return nm_fail(NM_ESTATE, "the child stopped before the kill (status %d)", status);
    nm_demo_say(d, "child appending nodes was killed with SIGKILL after 30 ms (no pmalloc_close)");

    o.create = false;
    if ((e = pmalloc_open(dir, &o, &h))) return e;
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    nm_demo_say(d, "reopened: clean=%s; recovery examined %u WAL entries, finished %u, rolled back %u",
                ri.was_clean ? "yes" : "no", ri.wal_entries, ri.wal_redone, ri.wal_undone);
    uint64_t n = 0, bad = 0;
    pmalloc_ptr *s = pmalloc_root_slot(h, 0);
    while (*s) {
        node *x = pmalloc_direct(h, *s);
        if (x->check != x->value * CHECK_MUL || x->value != n) {
            /* the crash hit between malloc_to and the node's initialisation:
             * the node is allocated and linked, its fields are not written yet */
            if (x->next == 0 || bad) { bad++; break; }
            return nm_fail(NM_ECORRUPT, "node %llu is damaged", (unsigned long long)n);
        }
        n++;
        s = &x->next;
    }
    if (bad) {
        if ((e = pmalloc_free_from(h, s))) return e;
        nm_demo_say(d, "the last node was linked but not yet initialised when the child died: freed it");
    }
    pmalloc_stats_get(h, &st);
    if (st.objects_live != n) return nm_fail(NM_ECORRUPT, "%llu objects allocated, %llu in the list", (unsigned long long)st.objects_live, (unsigned long long)n);
    if ((e = pmalloc_check(h))) return e;
    nm_demo_say(d, "recovered list: %llu nodes with values 0..%llu intact; %llu objects allocated = reachable (no leak)",
                (unsigned long long)n, (unsigned long long)(n - 1), (unsigned long long)st.objects_live);
    if ((e = pmalloc_close(h))) return e;

    char mdir[2][600];
    uint64_t slabs[2], morphs[2];
    for (int k = 0; k < 2; k++) {
        snprintf(mdir[k], sizeof mdir[k], "%s/morph%d", dir, k);
        mkdir(mdir[k], 0700);
        if ((e = morph_demo(d, mdir[k], k == 0, &slabs[k], &morphs[k]))) return e;
    }
    nm_demo_say(d, "slab morphing: 8000 x 100 B, 90%% freed, then 130 B objects: %llu slabs with morphing (%llu morphs), %llu without",
                (unsigned long long)slabs[0], (unsigned long long)morphs[0], (unsigned long long)slabs[1]);
    return numa_part(d, dir);
}
