/* nearmem pmalloc: the PMAlloc heap tool.
 *
 *   nearmem pmalloc info   HEAPDIR   what the heap is (read without opening it), usage per size class
 *   nearmem pmalloc check  HEAPDIR   open (recovering a crashed heap), check everything, close
 *   nearmem pmalloc create HEAPDIR [--size N[K|M|G]] [--model log|gc] [--nodes N] [--one-file]
 *   nearmem pmalloc remove HEAPDIR   delete the heap's files
 *   nearmem pmalloc dump   HEAPDIR   every persistent structure and its checks (read-only), then the objects
 *
 * Exit status: 0 ok; 1 damaged (check and dump name the structure); 2 usage;
 * 3 another error (no heap, in use, I/O). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nearmem/common/error.h"
#include "nearmem/pmalloc.h"
#include "nearmem/tool.h"

#define MAX_NODE_DIRS 64

typedef struct args {
    const char *verb, *dir;
    size_t size;
    pmalloc_model model;
    unsigned nodes;
    bool one_file, no_objects;
    const char *node_dirs[MAX_NODE_DIRS];
    unsigned nnode_dirs;
} args;

static int usage(void)
{
    fprintf(stderr,
            "usage: nearmem pmalloc info|check|create|remove|dump HEAPDIR [options]\n"
            "  info    what the heap is: format, model, size, state, log state (read without opening\n"
            "          it); a clean heap not in use is also opened for its usage per size class\n"
            "  check   open the heap (a crashed heap is recovered, as any open does), run\n"
            "          pmalloc_check, close; exit 1 naming the damaged structure\n"
            "  create  a new heap: --size N[K|M|G] (default 64M), --model log|gc (default log),\n"
            "          --nodes N (NUMA nodes, virtual on a one-node machine), --one-file\n"
            "  remove  delete the heap's files (refused while a process has it open)\n"
            "  dump    every persistent metadata structure with the result of its checks,\n"
            "          read-only (works on a crashed heap); exit 1 if open would refuse one;\n"
            "          then the allocated objects of a clean heap (--no-objects: not them)\n"
            "options: --node-dir DIR (repeatable: where node k's file lives, for heaps with node files)\n");
    return 2;
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return false;
    unsigned long long m = 1;
    if (*end == 'K' || *end == 'k') m = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') m = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') m = 1ull << 30, end++;
    if (*end == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B') end++;
    if (*end || v > (~0ull) / m) return false;
    *out = (size_t)(v * m);
    return true;
}

static int parse(nm_tool *t, args *a)
{
    memset(a, 0, sizeof *a);
    a->size = 64u << 20;
    a->model = PMALLOC_LOG;
    for (int i = 0; i < t->argc; i++) {
        const char *w = t->argv[i];
        const char *val = i + 1 < t->argc ? t->argv[i + 1] : NULL;
        if (strcmp(w, "--size") == 0 && val) {
            if (!parse_size(val, &a->size)) { fprintf(stderr, "nearmem pmalloc: bad size '%s'\n", val); return 2; }
            i++;
        } else if (strcmp(w, "--model") == 0 && val) {
            if (strcmp(val, "log") == 0 || strcmp(val, "LOG") == 0) a->model = PMALLOC_LOG;
            else if (strcmp(val, "gc") == 0 || strcmp(val, "GC") == 0) a->model = PMALLOC_GC;
            else { fprintf(stderr, "nearmem pmalloc: model is log or gc, not '%s'\n", val); return 2; }
            i++;
        } else if (strcmp(w, "--nodes") == 0 && val) {
            a->nodes = (unsigned)strtoul(val, NULL, 10);
            i++;
        } else if (strcmp(w, "--node-dir") == 0 && val) {
            if (a->nnode_dirs == MAX_NODE_DIRS) return usage();
            a->node_dirs[a->nnode_dirs++] = val;
            i++;
        } else if (strcmp(w, "--one-file") == 0) {
            a->one_file = true;
        } else if (strcmp(w, "--no-objects") == 0) {
            a->no_objects = true;
        } else if (w[0] == '-') {
            fprintf(stderr, "nearmem pmalloc: unknown option %s\n", w);
            return usage();
        } else if (!a->verb) {
            a->verb = w;
        } else if (!a->dir) {
            a->dir = w;
        } else {
            return usage();
        }
    }
    return a->verb && a->dir ? 0 : usage();
}

static pmalloc_options opts_of(const args *a, bool create)
{
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.create = create;
    o.size = a->size;
    o.model = a->model;
    if (a->nodes) o.numa_vnodes = a->nodes;
    o.single_file = a->one_file;
    if (a->nnode_dirs) {
        o.node_dirs = a->node_dirs;
        o.node_dirs_count = a->nnode_dirs;
    }
    return o;
}

static int fail(const char *verb, const char *dir, nm_err e)
{
    const char *msg = nm_last_errmsg();
    if (e == NM_ECORRUPT) {
        printf("nearmem pmalloc %s %s: DAMAGED: %s\n", verb, dir, msg);
        return 1;
    }
    fprintf(stderr, "nearmem pmalloc %s %s: %s%s%s\n", verb, dir, nm_strerror(e), *msg ? ": " : "", msg);
    return 3;
}

static void human(char *buf, size_t n, uint64_t b)
{
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= (1ull << 10)) snprintf(buf, n, "%.1f KiB", (double)b / (1ull << 10));
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
}

static void print_stats(pmalloc_heap *h)
{
    pmalloc_stats st;
    if (pmalloc_stats_get(h, &st) != NM_OK) return;
    char live[32], freeb[32], data[32];
    human(live, sizeof live, st.bytes_live);
    human(freeb, sizeof freeb, st.free_bytes);
    human(data, sizeof data, st.data_bytes);
    printf("  objects: %llu (%s live), %llu slabs, %llu extents; free extents: %s of %s\n", (unsigned long long)st.objects_live, live,
           (unsigned long long)st.slabs, (unsigned long long)st.extents, freeb, data);
    if (st.morph_slabs_in) printf("  morphed slabs holding old blocks: %llu (%llu old blocks)\n", (unsigned long long)st.morph_slabs_in,
                                  (unsigned long long)st.morph_old_live);
}

/* Objects per usable size (a small block's size is its class's) */
typedef struct class_use {
    uint64_t size[256], count[256], bytes[256];
    unsigned n;
    uint64_t large, large_bytes;
} class_use;
static int usage_fn(void *arg, pmalloc_ptr p, size_t usable)
{
    (void)p;
    class_use *u = arg;
    if (usable > PMALLOC_SMALL_MAX) {
        u->large++;
        u->large_bytes += usable;
        return 0;
    }
    unsigned i = 0;
    while (i < u->n && u->size[i] != usable) i++;
    if (i == u->n) {
        if (u->n == 256) return 0;
        u->size[u->n++] = usable;
    }
    u->count[i]++;
    u->bytes[i] += usable;
    return 0;
}

static void print_usage(pmalloc_heap *h)
{
    static class_use u;
    memset(&u, 0, sizeof u);
    if (pmalloc_walk(h, usage_fn, &u) != NM_OK) return;
    for (unsigned i = 0; i < u.n; i++) /* by size */
        for (unsigned j = i + 1; j < u.n; j++)
            if (u.size[j] < u.size[i]) {
                uint64_t t;
                t = u.size[i], u.size[i] = u.size[j], u.size[j] = t;
                t = u.count[i], u.count[i] = u.count[j], u.count[j] = t;
                t = u.bytes[i], u.bytes[i] = u.bytes[j], u.bytes[j] = t;
            }
    if (u.n) printf("  small objects per size class:\n");
    for (unsigned i = 0; i < u.n; i++)
        printf("    %6llu B: %llu objects\n", (unsigned long long)u.size[i], (unsigned long long)u.count[i]);
    char lb[32];
    human(lb, sizeof lb, u.large_bytes);
    printf("  extents (large objects): %llu, %s\n", (unsigned long long)u.large, lb);
}

static int dump_fn(void *arg, pmalloc_ptr p, size_t usable)
{
    (void)arg;
    printf("  %#llx %zu\n", (unsigned long long)PMALLOC_PTR_OFFSET(p), usable);
    return 0;
}

static int cmd_info(const args *a)
{
    pmalloc_options o = opts_of(a, false);
    pmalloc_file_info fi;
    nm_err e = pmalloc_inspect(a->dir, &o, &fi);
    if (e) return fail("info", a->dir, e);
    char size[32], data[32];
    human(size, sizeof size, fi.heap_size);
    human(data, sizeof data, fi.data_bytes);
    printf("heap %s: PMAlloc format %u (%s), %s model\n", a->dir, fi.version, fi.node_files ? "node files" : "one file",
           fi.model == PMALLOC_GC ? "GC" : "LOG");
    printf("  size %s (%s of data); pointer tag %#llx\n", size, data, (unsigned long long)fi.ptr_tag);
    if (fi.node_files) printf("  node files: %u\n", fi.node_files);
    printf("  redo rings: %u x %u records; bookkeeping log: %u chunks; NUMA deallocation logs: %s\n", fi.redo_rings, fi.ring_records,
           fi.log_chunks, fi.numa_logs ? "yes" : "no");
    const char *state = fi.in_use ? "open in another process" : fi.clean ? "clean (closed)"
                        : fi.recovering ? "crashed inside a recovery (the next open recovers it again)"
                                        : "crashed (the next open recovers it: `nearmem pmalloc check`)";
    printf("  state: %s\n", state);
    printf("  log: checkpoint bound %llu, %llu redo records after it; %u bookkeeping-log chunks in use\n",
           (unsigned long long)fi.checkpoint_bound, (unsigned long long)fi.records_pending, fi.log_chunks_listed);
    if (!fi.clean || fi.in_use) return 0;
    pmalloc_heap *h;
    if ((e = pmalloc_open(a->dir, &o, &h))) return fail("info", a->dir, e);
    print_stats(h);
    print_usage(h);
    e = pmalloc_close(h);
    return e ? fail("info", a->dir, e) : 0;
}

static int cmd_check(const args *a)
{
    pmalloc_options o = opts_of(a, false);
    pmalloc_heap *h;
    nm_err e = pmalloc_open(a->dir, &o, &h);
    if (e) return fail("check", a->dir, e);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    if (ri.was_clean) printf("nearmem pmalloc check %s: the heap was closed cleanly\n", a->dir);
    else
        printf("nearmem pmalloc check %s: recovered a %s: %u redo records after the checkpoint bound, %u changes replayed%s\n", a->dir,
               ri.was_recovering ? "crash inside a recovery" : "crash", ri.wal_entries, ri.wal_redone,
               ri.gc_freed ? " (GC freed unreachable blocks)" : "");
    e = pmalloc_check(h);
    if (e) {
        int rc = fail("check", a->dir, e);
        pmalloc_abandon(h); /* a damaged heap is left as it was found (plus the recovery) */
        return rc;
    }
    print_stats(h);
    if ((e = pmalloc_close(h))) return fail("check", a->dir, e);
    printf("nearmem pmalloc check %s: ok\n", a->dir);
    return 0;
}

static int cmd_create(const args *a)
{
    pmalloc_options o = opts_of(a, true);
    pmalloc_file_info fi;
    nm_err e = pmalloc_inspect(a->dir, &o, &fi);
    if (e != NM_ENOENT) {
        if (e == NM_OK || e == NM_ECORRUPT || e == NM_EFORMAT) {
            fprintf(stderr, "nearmem pmalloc create %s: a heap (or another file named %s) is there already; remove it first\n", a->dir,
                    PMALLOC_FILE_NAME);
            return 3;
        }
        return fail("create", a->dir, e);
    }
    if (mkdir(a->dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "nearmem pmalloc create %s: cannot create the directory: %s\n", a->dir, strerror(errno));
        return 3;
    }
    pmalloc_heap *h;
    if ((e = pmalloc_open(a->dir, &o, &h))) return fail("create", a->dir, e);
    if ((e = pmalloc_close(h))) return fail("create", a->dir, e);
    char size[32];
    human(size, sizeof size, a->size);
    printf("nearmem pmalloc create %s: a %s %s heap\n", a->dir, size, a->model == PMALLOC_GC ? "GC" : "LOG");
    return 0;
}

static int cmd_remove(const args *a)
{
    pmalloc_options o = opts_of(a, false);
    pmalloc_file_info fi;
    nm_err e = pmalloc_inspect(a->dir, &o, &fi);
    if (e == NM_ENOENT) return fail("remove", a->dir, e);
    if ((e = pmalloc_remove(a->dir, &o))) return fail("remove", a->dir, e);
    printf("nearmem pmalloc remove %s: removed\n", a->dir);
    return 0;
}

static int cmd_dump(const args *a)
{
    pmalloc_options o = opts_of(a, false);
    nm_err e = pmalloc_dump(a->dir, &o, stdout);
    if (e) return fail("dump", a->dir, e);
    if (a->no_objects) return 0;
    pmalloc_file_info fi;
    if ((e = pmalloc_inspect(a->dir, &o, &fi))) return fail("dump", a->dir, e);
    if (!fi.clean || fi.in_use) {
        printf("objects: not listed (the heap %s; `nearmem pmalloc check` recovers a crashed heap)\n",
               fi.in_use ? "is open in another process" : "crashed");
        return 0;
    }
    pmalloc_heap *h;
    if ((e = pmalloc_open(a->dir, &o, &h))) return fail("dump", a->dir, e);
    printf("objects (heap offset, usable bytes), in address order:\n");
    e = pmalloc_walk(h, dump_fn, NULL);
    nm_err e2 = pmalloc_close(h);
    return e ? fail("dump", a->dir, e) : e2 ? fail("dump", a->dir, e2) : 0;
}

int nm_tool_pmalloc(nm_tool *t)
{
    args a;
    int rc = parse(t, &a);
    if (rc) return rc;
    if (strcmp(a.verb, "info") == 0) return cmd_info(&a);
    if (strcmp(a.verb, "check") == 0) return cmd_check(&a);
    if (strcmp(a.verb, "create") == 0) return cmd_create(&a);
    if (strcmp(a.verb, "remove") == 0) return cmd_remove(&a);
    if (strcmp(a.verb, "dump") == 0) return cmd_dump(&a);
    return usage();
}
