/* PMAlloc: one heap file per NUMA node (paper Sec. 6.1, 7), with virtual
 * nodes on this one-node machine: the file set, where each node's objects
 * land (in the node's own file), reopen, process crashes, node directories,
 * decay in the right file, an interrupted create, and every damaged file set
 * refused cleanly (missing, swapped, truncated, foreign, corrupt). */
#include "nm_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <xxhash.h>
#include "../../src/pmalloc/pm_internal.h"
#include "nearmem/common/prng.h"
#include "nearmem/common/timer.h"
#include "pm_testutil.h"

#define MiB (1u << 20)

static pmalloc_options nf_opts(size_t size, unsigned vnodes)
{
    pmalloc_options o = pmt_opts(size, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.numa_vnodes = vnodes;
    o.numa_sync_ms = PMALLOC_NUMA_SYNC_NEVER;
    return o;
}

static void node_file(char *buf, size_t n, const char *dir, unsigned k)
{
    int w = snprintf(buf, n, "%s/", dir);
    snprintf(buf + w, n - (size_t)w, PMALLOC_NODE_FILE_FMT, k);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static pm_node_trailer read_trailer(const char *path)
{
    pm_node_trailer t;
    memset(&t, 0, sizeof t);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(pread(fd, &t, sizeof t, st.st_size - PM_NODE_TRAILER), (ssize_t)sizeof t);
    close(fd);
    return t;
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* Object i of node k: a pattern that names both. */
static uint8_t pat(unsigned i, unsigned k, size_t j) { return (uint8_t)(i * 31u + k * 7u + j); }

static void fill(pmalloc_heap *h, pmalloc_ptr p, size_t n, unsigned i, unsigned k)
{
    uint8_t *b = pmalloc_direct(h, p);
    for (size_t j = 0; j < n; j++) b[j] = pat(i, k, j);
    pmalloc_persist(h, b, n);
}

static bool holds(const uint8_t *b, size_t n, unsigned i, unsigned k)
{
    for (size_t j = 0; j < n; j++)
        if (b[j] != pat(i, k, j)) return false;
    return true;
}

/* The bytes of heap offset p as stored in node file k (through the file, not the mapping). */
static bool file_holds(const char *dir, unsigned k, pmalloc_ptr ptr, size_t n, unsigned i, unsigned node)
{
    uint64_t p = PMALLOC_PTR_OFFSET(ptr); /* the offset in the heap's bytes */
    char path[400];
    node_file(path, sizeof path, dir, k);
    pm_node_trailer t = read_trailer(path);
    if (p < t.range_off || p + n > t.range_off + t.range_bytes) return false;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, b, n, (off_t)(p - t.range_off)), (ssize_t)n);
    close(fd);
    bool ok = holds(b, n, i, node);
    free(b);
    return ok;
}

enum { PER_NODE = 40 };
static const size_t sizes[4] = {64, 1000, 14000, 40000}; /* slabs and an extent */

/* Fill the heap: PER_NODE objects per node, root slot k * PER_NODE + i. */
static void populate(pmalloc_heap *h, unsigned vnodes)
{
    pmalloc_ptr *roots = pmalloc_root_slot(h, 0);
    for (unsigned k = 0; k < vnodes; k++) {
        assert_int_equal(pmalloc_numa_set_node(h, (int)k), NM_OK);
        for (unsigned i = 0; i < PER_NODE; i++) {
            size_t n = sizes[i % 4];
            assert_int_equal(pmalloc_malloc_to(h, n, &roots[k * PER_NODE + i]), NM_OK);
            fill(h, roots[k * PER_NODE + i], n, i, k);
        }
    }
    assert_int_equal(pmalloc_numa_set_node(h, -1), NM_OK);
}

static void verify(pmalloc_heap *h, const char *dir, unsigned vnodes, bool through_files)
{
    for (unsigned k = 0; k < vnodes; k++)
        for (unsigned i = 0; i < PER_NODE; i++) {
            pmalloc_ptr p = pmalloc_get_root(h, k * PER_NODE + i);
            size_t n = sizes[i % 4];
            assert_true(p != 0);
            assert_int_equal(pmalloc_numa_node_of(h, p), (int)k); /* local first, and room enough */
            assert_true(holds(pmalloc_direct(h, p), n, i, k));
            if (through_files) assert_true(file_holds(dir, k, p, n, i, k)); /* in node k's own file */
        }
    assert_int_equal(pmalloc_check(h), NM_OK);
}

static void layout(unsigned vnodes)
{
    char dir[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "nflayout");
    pmalloc_options o = nf_opts(12 * MiB, vnodes);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_numa_stats ns;
    assert_int_equal(pmalloc_numa_stats_get(h, &ns), NM_OK);
    assert_int_equal(ns.node_files, vnodes);
    assert_int_equal(ns.node_files_bound, 0); /* virtual nodes: no memory policy */
    /* the main file holds the metadata only; the node files the data area, back to back */
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    long long main_size = file_size(path), total = main_size;
    assert_true(main_size > 0 && main_size < 4 * MiB && main_size % PM_PAGE == 0);
    uint64_t next = (uint64_t)main_size;
    for (unsigned k = 0; k < vnodes; k++) {
        node_file(path, sizeof path, dir, k);
        pm_node_trailer t = read_trailer(path);
        assert_int_equal(t.magic, PM_NODE_MAGIC);
        assert_int_equal(t.node, k);
        assert_int_equal(t.nfiles, vnodes);
        assert_int_equal(t.range_off, next);
        assert_int_equal(file_size(path), (long long)(t.range_bytes + PM_NODE_TRAILER));
        /* ranges of >= 4 MiB start on 2 MiB boundaries, in the file set and in the address
         * space (DAX huge pages); smaller ones are the plain even split */
        if (vnodes == 2) assert_int_equal((uintptr_t)pmalloc_direct(h, t.range_off) % (2 * MiB), 0);
        next += t.range_bytes;
        total += (long long)t.range_bytes;
    }
    assert_int_equal(total, 12 * MiB);
    node_file(path, sizeof path, dir, vnodes);
    assert_int_equal(file_size(path), -1);
    populate(h, vnodes);
    verify(h, dir, vnodes, true);
    pmalloc_stats st;
    pmalloc_stats_get(h, &st);
    uint64_t live = st.objects_live;
    assert_int_equal(live, vnodes * PER_NODE);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* reopen: same contents, same files */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_true(ri.was_clean);
    verify(h, dir, vnodes, true);
    /* free half, reopen with one node (the files stay, node logic off) */
    for (unsigned s = 0; s < vnodes * PER_NODE; s += 2) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, s)), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.numa_vnodes = 1;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_numa_stats_get(h, &ns), NM_OK);
    assert_int_equal(ns.nodes, 1);
    assert_int_equal(ns.node_files, vnodes);
    pmalloc_stats_get(h, &st);
    assert_int_equal(st.objects_live, live / 2);
    for (unsigned k = 0; k < vnodes; k++)
        for (unsigned i = 1; i < PER_NODE; i += 2)
            assert_true(holds(pmalloc_direct(h, pmalloc_get_root(h, k * PER_NODE + i)), sizes[i % 4], i, k));
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(rmdir(dir), 0); /* nothing left behind */
}
static void test_layout_2(void **st) { (void)st; layout(2); }
static void test_layout_3(void **st) { (void)st; layout(3); }

/* One node, or single_file: one file exactly as before (format version 1). */
static void test_one_file(void **st)
{
    (void)st;
    for (int variant = 0; variant < 2; variant++) {
        char dir[256], path[400];
        pmt_tmpdir(dir, sizeof dir, "nfone");
        pmalloc_options o = nf_opts(8 * MiB, variant ? 2 : 1);
        o.single_file = variant == 1;
        pmalloc_heap *h;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        pmalloc_numa_stats ns;
        assert_int_equal(pmalloc_numa_stats_get(h, &ns), NM_OK);
        assert_int_equal(ns.node_files, 0);
        assert_int_equal(ns.nodes, variant ? 2u : 1u);
        populate(h, variant ? 2 : 1);
        assert_int_equal(pmalloc_close(h), NM_OK);
        snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
        assert_int_equal(file_size(path), 8 * MiB);
        pm_super sb;
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        assert_int_equal(fread(&sb, sizeof sb, 1, f), 1);
        fclose(f);
        assert_int_equal(sb.version, PM_VERSION);
        node_file(path, sizeof path, dir, 0);
        assert_int_equal(file_size(path), -1);
        o.create = false;
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        verify(h, dir, variant ? 2 : 1, false);
        assert_int_equal(pmalloc_close(h), NM_OK);
        pmt_rmdir(dir);
    }
}

/* Node directories (the per-device mount points of a real machine). */
static void test_node_dirs(void **st)
{
    (void)st;
    char dir[256], d0[256], d1[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "nfmain");
    pmt_tmpdir(d0, sizeof d0, "nfdev0");
    pmt_tmpdir(d1, sizeof d1, "nfdev1");
    const char *dirs[2] = {d0, d1};
    pmalloc_options o = nf_opts(8 * MiB, 2);
    o.node_dirs = dirs;
    o.node_dirs_count = 2;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    populate(h, 2);
    verify(h, d0, 1, true); /* node 0's objects are in d0's file */
    for (unsigned i = 0; i < PER_NODE; i++)
        assert_true(file_holds(d1, 1, pmalloc_get_root(h, PER_NODE + i), sizes[i % 4], i, 1));
    assert_int_equal(pmalloc_close(h), NM_OK);
    node_file(path, sizeof path, dir, 0);
    assert_int_equal(file_size(path), -1);
    /* without the directories the node files are missing: refused, nothing changed */
    o.create = false;
    o.node_dirs = NULL;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ECORRUPT);
    assert_non_null(strstr(nm_last_errmsg(), "missing"));
    o.node_dirs = dirs;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    verify(h, d0, 1, true);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* a second heap on the same node directories would overwrite them: refused */
    char dir2[256];
    pmt_tmpdir(dir2, sizeof dir2, "nfmain2");
    o.create = true;
    assert_int_equal(pmalloc_open(dir2, &o, &h), NM_EEXIST);
    snprintf(path, sizeof path, "%s/%s", dir2, PMALLOC_FILE_NAME);
    assert_int_equal(file_size(path), -1);
    assert_int_equal(rmdir(dir2), 0); /* the failed create left nothing */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK); /* and the first heap is intact */
    verify(h, d0, 1, true);
    /* open: removal refused */
    assert_int_equal(pmalloc_remove(dir, &o), NM_EBUSY);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(dir, &o), NM_OK);
    assert_int_equal(rmdir(d0), 0);
    assert_int_equal(rmdir(d1), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* Process crashes: a child killed while allocating and freeing on both
 * nodes; the parent recovers the file set and checks it. */
static void test_process_crash(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "nfcrash");
    pmalloc_options o = nf_opts(12 * MiB, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    populate(h, 2); /* the objects every crash must preserve */
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(7));
    for (unsigned round = 0; round < 6; round++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            pmalloc_heap *c;
            close(pfd[0]);
            if (pmalloc_open(dir, &o, &c)) _exit(3);
            char one = 1; /* open: the kill may come (on a loaded machine it could come before) */
            if (write(pfd[1], &one, 1) != 1) _exit(4);
            pmalloc_ptr *roots = pmalloc_root_slot(c, 0);
            nm_rng cr;
            nm_rng_seed(&cr, round);
            for (uint64_t it = 0;; it++) { /* churn slots 100..299 until killed */
                pmalloc_numa_set_node(c, (int)(it / 64 % 2));
                unsigned s = 100 + (unsigned)nm_rng_below(&cr, 200);
                if (roots[s]) pmalloc_free_from(c, &roots[s]);
                else pmalloc_malloc_to(c, nm_rng_below(&cr, 4) ? 16 + nm_rng_below(&cr, 3000) : 20000 + nm_rng_below(&cr, 60000), &roots[s]);
                if (round == 5 && it == 3000) _exit(0); /* a crash with nothing in flight */
            }
        }
        close(pfd[1]);
        char one;
        assert_int_equal(read(pfd[0], &one, 1), 1);
        close(pfd[0]);
        usleep((useconds_t)(2000 + nm_rng_below(&r, 30000)));
        kill(pid, SIGKILL);
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_true(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
        nm_err oe = pmalloc_open(dir, &o, &h);
        if (oe) print_message("round %u: open after the kill: %s\n", round, nm_last_errmsg());
        assert_int_equal(oe, NM_OK);
        pmalloc_recovery_info ri;
        pmalloc_recovery_info_get(h, &ri);
        assert_false(ri.was_clean);
        verify(h, dir, 2, true);
        /* every churn slot names a live object or nothing */
        for (unsigned s = 100; s < 300; s++) {
            pmalloc_ptr p = pmalloc_get_root(h, s);
            assert_true(p == 0 || pmalloc_usable_size(h, p) > 0);
        }
        if (round % 2) assert_int_equal(pmalloc_close(h), NM_OK);
        else pmalloc_abandon(h); /* and again without a clean close in between */
    }
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(rmdir(dir), 0);
}

/* Each damaged file set is refused with NM_ECORRUPT and a message naming the
 * problem, maps nothing, changes nothing: repaired, the heap opens intact. */
typedef enum { BAD_MISSING, BAD_SWAPPED, BAD_TRUNCATED, BAD_FOREIGN, BAD_TRAILER, BAD_HEADER, BAD_MAIN_SIZE, BAD_EXTENDED, BAD_N } bad_kind;
static const char *bad_msg[BAD_N] = {"missing", "node 1's memory", "bytes", "another heap", "trailer damaged", "node-file header", "superblock says", "bytes"};

static void test_bad_sets(void **st)
{
    (void)st;
    char dir[256], other[256], p0[400], p1[400], mainp[400], save[400], cmd[2600];
    pmt_tmpdir(dir, sizeof dir, "nfbad");
    pmt_tmpdir(other, sizeof other, "nfother");
    pmalloc_options o = nf_opts(8 * MiB, 2);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(other, &o, &h), NM_OK); /* same geometry, another heap */
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    populate(h, 2);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    node_file(p0, sizeof p0, dir, 0);
    node_file(p1, sizeof p1, dir, 1);
    snprintf(mainp, sizeof mainp, "%s/%s", dir, PMALLOC_FILE_NAME);
    snprintf(save, sizeof save, "%s/saved", other);
    for (int b = 0; b < BAD_N; b++) {
        const char *victim = b == BAD_HEADER || b == BAD_MAIN_SIZE ? mainp : p1;
        copy_file(victim, save);
        switch ((bad_kind)b) {
        case BAD_MISSING: assert_int_equal(unlink(p1), 0); break;
        case BAD_SWAPPED:
            copy_file(p0, save); /* keep both */
            snprintf(cmd, sizeof cmd, "mv '%s' '%s.t' && mv '%s' '%s' && mv '%s.t' '%s'", p0, p0, p1, p0, p0, p1);
            assert_int_equal(system(cmd), 0);
            break;
        case BAD_TRUNCATED: assert_int_equal(truncate(p1, file_size(p1) / 2), 0); break;
        case BAD_FOREIGN: {
            char op[400];
            node_file(op, sizeof op, other, 1);
            copy_file(op, p1);
            break;
        }
        case BAD_TRAILER: {
            int fd = open(p1, O_RDWR);
            uint8_t x;
            off_t at = file_size(p1) - PM_NODE_TRAILER + offsetof(pm_node_trailer, range_bytes);
            assert_int_equal(pread(fd, &x, 1, at), 1);
            x ^= 0x10;
            assert_int_equal(pwrite(fd, &x, 1, at), 1);
            close(fd);
            break;
        }
        case BAD_HEADER: {
            int fd = open(mainp, O_RDWR);
            uint8_t x;
            off_t at = PM_FILES_LINE * PM_LINE + offsetof(pm_files_hdr, heap_id);
            assert_int_equal(pread(fd, &x, 1, at), 1);
            x ^= 1;
            assert_int_equal(pwrite(fd, &x, 1, at), 1);
            close(fd);
            break;
        }
        case BAD_MAIN_SIZE: assert_int_equal(truncate(mainp, file_size(mainp) - PM_PAGE), 0); break;
        case BAD_EXTENDED: assert_int_equal(truncate(p1, file_size(p1) + PM_PAGE), 0); break;
        default: break;
        }
        nm_err e = pmalloc_open(dir, &o, &h);
        print_message("bad set %d: %s: %s\n", b, nm_errname(e), nm_last_errmsg());
        assert_int_equal(e, NM_ECORRUPT);
        assert_non_null(strstr(nm_last_errmsg(), bad_msg[b]));
        /* repair */
        if (b == BAD_SWAPPED) {
            snprintf(cmd, sizeof cmd, "mv '%s' '%s.t' && mv '%s' '%s' && mv '%s.t' '%s'", p0, p0, p1, p0, p0, p1);
            assert_int_equal(system(cmd), 0);
        } else copy_file(save, victim);
        assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        pmalloc_recovery_info ri;
        pmalloc_recovery_info_get(h, &ri);
        assert_true(ri.was_clean); /* the refused opens wrote nothing */
        verify(h, dir, 2, true);
        assert_int_equal(pmalloc_close(h), NM_OK);
    }
    unlink(save);
    assert_int_equal(pmalloc_remove(other, NULL), NM_OK);
    assert_int_equal(rmdir(other), 0);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(rmdir(dir), 0);
}

/* An interrupted create leaves no heap, and the next create cleans up. */
static void test_interrupted_create(void **st)
{
    (void)st;
    char dir[256], path[400], marker[400];
    pmt_tmpdir(dir, sizeof dir, "nfcreate");
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    snprintf(marker, sizeof marker, "%s/%s.creating", dir, PMALLOC_FILE_NAME);
    pmalloc_options o = nf_opts(8 * MiB, 2);
    pmalloc_heap *h;
    /* 1. everything written but the rename: the state just before the commit */
    uint64_t t0 = nm_now_ns();
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    uint64_t create_us = (nm_now_ns() - t0) / 1000; /* scales the kill times of part 4 */
    assert_int_equal(pmalloc_close(h), NM_OK);
    char p1[400];
    node_file(p1, sizeof p1, dir, 1);
    uint64_t old_id = read_trailer(p1).heap_id;
    assert_int_equal(rename(path, marker), 0);
    assert_int_equal(truncate(p1, 0), 0); /* and node 1's file not even sized */
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_ENOENT); /* no heap */
    o.create = true;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_true(ri.created);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(file_size(marker), -1);
    assert_true(read_trailer(p1).heap_id != old_id);
    /* 2. the main file deleted by hand (or by a tool that knows only pmalloc.heap): the
     * orphaned node files of this directory are replaced by the next create */
    assert_int_equal(unlink(path), 0);
    old_id = read_trailer(p1).heap_id;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_true(read_trailer(p1).heap_id != old_id);
    /* 3. a node file of a heap elsewhere is never overwritten, nor removed */
    char other[256], op[400];
    pmt_tmpdir(other, sizeof other, "nfcreate2");
    assert_int_equal(pmalloc_open(other, &o, &h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(unlink(path), 0); /* orphans again: pmalloc_remove finds them without the main file */
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(file_size(p1), -1);
    node_file(op, sizeof op, other, 1);
    copy_file(op, p1);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EEXIST);
    assert_non_null(strstr(nm_last_errmsg(), "already exists"));
    assert_int_equal(file_size(path), -1);
    assert_int_equal(file_size(marker), -1);
    char p0[400];
    node_file(p0, sizeof p0, dir, 0);
    assert_int_equal(file_size(p0), -1); /* the failed create removed what it made */
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_true(file_size(p1) > 0); /* not this directory's: kept */
    assert_int_equal(unlink(p1), 0);
    assert_int_equal(pmalloc_remove(other, NULL), NM_OK);
    assert_int_equal(rmdir(other), 0);
    /* 4. real crashes: a child killed at a random moment of its create leaves
     * either no heap or a heap that opens; a create then always succeeds */
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(11));
    unsigned none = 0, whole = 0;
    for (unsigned i = 0; i < 16; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            pmalloc_heap *c;
            _exit(pmalloc_open(dir, &o, &c) == NM_OK ? 0 : 3);
        }
        usleep((useconds_t)nm_rng_below(&r, 2 * create_us + 1000)); /* about half before the create is done */
        kill(pid, SIGKILL);
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_false(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
        pmalloc_options oo = o;
        oo.create = false;
        nm_err e = pmalloc_open(dir, &oo, &h);
        assert_true(e == NM_OK || e == NM_ENOENT);
        if (e == NM_OK) whole++;
        else {
            none++;
            assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK); /* a create cleans up and succeeds */
        }
        assert_int_equal(pmalloc_check(h), NM_OK);
        assert_int_equal(pmalloc_close(h), NM_OK);
        assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    }
    print_message("killed creates: %u left no heap, %u a whole heap\n", none, whole);
    assert_int_equal(rmdir(dir), 0);
}

/* Concurrent creates of one heap (processes started together): each gets the
 * heap (created, or opened once another made it) or NM_EBUSY; the heap opens. */
static void test_concurrent_create(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "nfrace");
    pmalloc_options o = nf_opts(8 * MiB, 2);
    unsigned created = 0, busy = 0;
    for (unsigned round = 0; round < 6; round++) {
        int go[2];
        assert_int_equal(pipe(go), 0);
        pid_t pid[4];
        for (unsigned c = 0; c < 4; c++) {
            pid[c] = fork();
            assert_true(pid[c] >= 0);
            if (pid[c] == 0) {
                char x;
                close(go[1]);
                if (read(go[0], &x, 1) != 0) _exit(9); /* wait for the start (EOF) */
                pmalloc_heap *h;
                nm_err e = pmalloc_open(dir, &o, &h);
                if (e == NM_EBUSY) _exit(2);
                if (e) _exit(3);
                pmalloc_recovery_info ri;
                pmalloc_recovery_info_get(h, &ri);
                int rc = pmalloc_check(h) != NM_OK ? 4 : ri.created ? 0 : 1;
                if (pmalloc_close(h)) rc = 5;
                _exit(rc);
            }
        }
        close(go[0]);
        close(go[1]); /* start */
        unsigned made = 0;
        for (unsigned c = 0; c < 4; c++) {
            int ws;
            assert_int_equal(waitpid(pid[c], &ws, 0), pid[c]);
            assert_true(WIFEXITED(ws));
            int rc = WEXITSTATUS(ws);
            assert_true(rc <= 2); /* created, opened, or busy: never a damaged or refused heap */
            made += rc == 0;
            busy += rc == 2;
        }
        assert_int_equal(made, 1); /* exactly one create */
        created += made;
        pmalloc_options vo = o;
        vo.create = false;
        pmalloc_heap *h;
        assert_int_equal(pmalloc_open(dir, &vo, &h), NM_OK);
        assert_int_equal(pmalloc_check(h), NM_OK);
        assert_int_equal(pmalloc_close(h), NM_OK);
        assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    }
    print_message("6 rounds of 4 concurrent creates: %u created, %u busy\n", created, busy);
    assert_int_equal(rmdir(dir), 0); /* no leftovers (temporary names included) */
}

/* Decay punches holes in the node file that holds the pages (here an extent
 * that spans both node files: larger than one node's range). */
static void test_decay_spanning(void **st)
{
    (void)st;
    char dir[256], p0[400], p1[400];
    pmt_tmpdir(dir, sizeof dir, "nfdecay");
    node_file(p0, sizeof p0, dir, 0);
    node_file(p1, sizeof p1, dir, 1);
    pmalloc_options o = nf_opts(16 * MiB, 2);
    o.decay_ms = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0), *r1 = pmalloc_root_slot(h, 1), *guard = pmalloc_root_slot(h, 2);
    size_t big = 10 * MiB; /* more than one node's range (8 MiB minus metadata): from the data area's start */
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, big, r0), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    /* a guard keeps the freed extent from merging with the (recently touched) rest */
    assert_int_equal(pmalloc_malloc_to(h, 20000, guard), NM_OK);
    uint64_t e = PMALLOC_PTR_OFFSET(*r0);
    uint8_t *b = pmalloc_direct(h, *r0);
    memset(b, 0x5a, big);
    pmalloc_persist(h, b, big);
    msync(b, big, MS_SYNC);
    pm_node_trailer t0 = read_trailer(p0), t1 = read_trailer(p1);
    assert_true(e < t0.range_off + t0.range_bytes && e + big > t1.range_off); /* spans both files */
    struct stat a0, a1, z0, z1;
    assert_int_equal(stat(p0, &a0), 0);
    assert_int_equal(stat(p1, &a1), 0);
    uint8_t x;
    int fd = open(p1, O_RDONLY);
    assert_int_equal(pread(fd, &x, 1, (off_t)(e + big - 1 - t1.range_off)), 1);
    close(fd);
    assert_int_equal(x, 0x5a); /* the extent's tail is in node 1's file */
    /* allocated before the free: an allocation now could be carved from the freed extent;
     * 1 MiB: above the arena extent caches' bound, so its free reaches the extent allocator */
    assert_int_equal(pmalloc_malloc_to(h, MiB, r1), NM_OK);
    assert_int_equal(pmalloc_numa_set_node(h, 0), NM_OK); /* the owner frees it: no two-phase remote free */
    assert_int_equal(pmalloc_free_from(h, r0), NM_OK);
    usleep(120 * 1000);
    assert_int_equal(pmalloc_numa_set_node(h, 1), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r1), NM_OK); /* a free runs the decay pass */
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    assert_true(s.retained_bytes >= big);
    assert_int_equal(stat(p0, &z0), 0);
    assert_int_equal(stat(p1, &z1), 0);
    print_message("blocks: node 0 %lld -> %lld, node 1 %lld -> %lld\n", (long long)a0.st_blocks, (long long)z0.st_blocks,
                  (long long)a1.st_blocks, (long long)z1.st_blocks);
    assert_true(z0.st_blocks < a0.st_blocks);
    assert_true(z1.st_blocks < a1.st_blocks);
    assert_int_equal(file_size(p0), (long long)(t0.range_bytes + PM_NODE_TRAILER)); /* sizes kept */
    assert_int_equal(file_size(p1), (long long)(t1.range_bytes + PM_NODE_TRAILER));
    assert_int_equal(read_trailer(p1).magic, PM_NODE_MAGIC); /* trailers untouched */
    /* the space comes back as zero pages and holds data */
    assert_int_equal(pmalloc_malloc_to(h, big, r0), NM_OK);
    memset(pmalloc_direct(h, *r0), 0x33, big);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(((uint8_t *)pmalloc_direct(h, pmalloc_get_root(h, 0)))[big - 1], 0x33);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(rmdir(dir), 0);
}

/* A power-failure image of a heap with node files is a file set too, and recovers. */
static void test_sim_image(void **st)
{
    (void)st;
    char dir[256], snap[256];
    pmt_tmpdir(dir, sizeof dir, "nfsim");
    pmt_tmpdir(snap, sizeof snap, "nfsimsnap");
    pmalloc_options o = nf_opts(8 * MiB, 3);
    o.persist = PMALLOC_PERSIST_SIM;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    populate(h, 3);
    assert_int_equal(pmalloc_sim_snapshot(h, snap, 1, 0), NM_OK);
    pmalloc_abandon(h);
    char p[400];
    node_file(p, sizeof p, snap, 2);
    assert_true(file_size(p) > 0);
    pmalloc_options vo = nf_opts(8 * MiB, 3);
    vo.create = false;
    assert_int_equal(pmalloc_open(snap, &vo, &h), NM_OK);
    verify(h, snap, 3, true);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(snap, NULL), NM_OK);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    assert_int_equal(rmdir(snap), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_2),
        cmocka_unit_test(test_layout_3),
        cmocka_unit_test(test_one_file),
        cmocka_unit_test(test_node_dirs),
        cmocka_unit_test(test_process_crash),
        cmocka_unit_test(test_bad_sets),
        cmocka_unit_test(test_interrupted_create),
        cmocka_unit_test(test_concurrent_create),
        cmocka_unit_test(test_decay_spanning),
        cmocka_unit_test(test_sim_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
