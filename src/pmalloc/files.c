/* One heap file per NUMA node (paper Sec. 6.1: each node's memory comes from
 * its own persistent-memory device; Sec. 7: recovery opens and maps the heap
 * files). See docs/pmalloc.md, "Node memory: one heap file per node".
 *
 * A heap created with N >= 2 nodes (format version 2) is
 *   <dir>/pmalloc.heap            heap bytes [0, data_off): superblock, roots,
 *                                 WAL, bookkeeping log, NUMA region;
 *   <node dir k>/pmalloc.node<k>.heap
 *                                 node k's data pages, then a one-page trailer
 *                                 (magic, heap id, node, range, checksum).
 * The superblock's line 6 (pm_files_hdr) holds the file count and the heap's
 * random 64-bit id; lines 7-14 the first data page of every node file. All
 * files are mapped MAP_FIXED into one reserved range, so a heap offset means
 * what it means in a one-file heap and nothing else in PMAlloc changes.
 *
 * Creation order (crash safety): the main file is created under a temporary
 * name (pmalloc.heap.creating, flock'ed), its files header is written and
 * synced, then the node files are created (O_EXCL), sized, given their
 * trailers and synced, then the heap is initialised (superblock magic last,
 * as for one file), and only then the main file is renamed to pmalloc.heap
 * (no-replace) and the directory synced. A crash before the rename leaves no
 * heap (the next create removes the leftovers the temporary file names); a
 * crash after it leaves a complete heap. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <libpmem.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "nearmem/common/timer.h"
#include "pm_media.h"

#define PM_HUGE (2u << 20) /* reservation alignment: DAX maps 2 MiB pages when offsets agree */
#define MARKER_SUFFIX ".creating"

static inline pm_files_hdr *files_hdr(const void *sb) { return (pm_files_hdr *)((char *)sb + PM_FILES_LINE * PM_LINE); }
static inline uint64_t *files_table(const void *sb) { return (uint64_t *)((char *)sb + (PM_FILES_LINE + 1) * PM_LINE); }

static uint64_t hdr_check(const pm_files_hdr *fh, const uint64_t *table)
{
    uint64_t s = XXH64(fh, offsetof(pm_files_hdr, check), 0x46494c45);
    return XXH64(table, (size_t)fh->nfiles * 8, s);
}

static uint64_t trailer_check(const pm_node_trailer *t) { return XXH64(t, offsetof(pm_node_trailer, check), 0x4e4f4445); }

static void node_path(char *buf, size_t n, const char *dir, const pmalloc_options *o, unsigned k)
{
    const char *d = dir;
    if (o && o->node_dirs && k < o->node_dirs_count && o->node_dirs[k]) d = o->node_dirs[k];
    int w = snprintf(buf, n, "%s/", d);
    snprintf(buf + w, n - (size_t)w, PMALLOC_NODE_FILE_FMT, k);
}

static char *dup_node_path(const char *dir, const pmalloc_options *o, unsigned k)
{
    char p[4200];
    node_path(p, sizeof p, dir, o, k);
    return strdup(p);
}

/* Identity of a heap location (its directory), stored in the node files. */
static uint64_t dir_hash(const char *dir)
{
    char *rp = realpath(dir, NULL);
    const char *d = rp ? rp : dir;
    uint64_t x = XXH64(d, strlen(d), 0x44495248);
    free(rp);
    return x;
}

static void make_trailer(const pm_files *f, uint64_t data_off, unsigned k, pm_node_trailer *t)
{
    memset(t, 0, sizeof *t);
    t->magic = PM_NODE_MAGIC;
    t->version = PM_VERSION_FILES;
    t->node = k;
    t->nfiles = f->n;
    t->heap_id = f->heap_id;
    t->range_off = data_off + f->lo[k] * PM_PAGE;
    t->range_bytes = (f->lo[k + 1] - f->lo[k]) * PM_PAGE;
    t->dir_hash = f->dir_hash;
    t->check = trailer_check(t);
}

/* Validated header of a superblock image: file count and start pages (lo[n] =
 * data pages). Only line 6 and the table are read: an interrupted create
 * wrote nothing else. */
static nm_err read_hdr(const pm_super *sb, pm_files *f, uint64_t *data_off)
{
    const pm_files_hdr *fh = files_hdr(sb);
    const uint64_t *tab = files_table(sb);
    if (fh->magic != PM_FILES_MAGIC || fh->nfiles < 2 || fh->nfiles > PM_NUMA_MAX_NODES || fh->check != hdr_check(fh, tab))
        return nm_fail(NM_ECORRUPT, "pmalloc: node-file header (superblock line %u) is damaged", PM_FILES_LINE);
    uint64_t pages = fh->data_pages;
    *data_off = fh->data_off;
    f->n = fh->nfiles;
    f->heap_id = fh->heap_id;
    for (unsigned k = 0; k < f->n; k++) f->lo[k] = tab[k];
    f->lo[f->n] = pages;
    if (f->lo[0] != 0) return nm_fail(NM_ECORRUPT, "pmalloc: node-file table does not start at the data area");
    for (unsigned k = 0; k < f->n; k++)
        if (f->lo[k + 1] <= f->lo[k]) return nm_fail(NM_ECORRUPT, "pmalloc: node-file table: node %u has no pages", k);
    return NM_OK;
}

/* ---- mapping ---- */

/* Reserve len bytes placed so that heap offset data_off (the start of node 0's
 * file) is 2 MiB aligned: with 2 MiB-aligned node boundaries every node file's
 * offset 0 then sits on a 2 MiB boundary, which DAX needs for huge-page faults. */
static nm_err reserve(pm_files *f, size_t len, uint64_t data_off)
{
    size_t over = len + PM_HUGE;
    char *r = mmap(NULL, over, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return nm_fail(NM_EIO, "pmalloc: cannot reserve %zu bytes of address space: %s", len, strerror(errno));
    char *a = (char *)NM_ALIGN_UP((uintptr_t)r + data_off, PM_HUGE) - data_off;
    if (a < r) a += PM_HUGE;
    if (a > r) munmap(r, (size_t)(a - r));
    if (r + over > a + len) munmap(a + len, (size_t)(r + over - (a + len)));
    f->map = a;
    f->map_len = len;
    return NM_OK;
}

/* Map fd's first len bytes at addr. MAP_SYNC succeeds only on a DAX file
 * (libpmem's own test for "this is persistent memory"); otherwise a plain
 * shared mapping, persistent memory only if PMEM_IS_PMEM_FORCE says so. */
static nm_err map_at(pm_files *f, char *addr, size_t len, int fd, const char *path)
{
    void *p = MAP_FAILED;
#if defined(MAP_SYNC) && defined(MAP_SHARED_VALIDATE)
    p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC | MAP_FIXED, fd, 0);
    if (p == addr) {
        f->pmem++;
        return NM_OK;
    }
#endif
    p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p != addr) return nm_fail(NM_EIO, "pmalloc: cannot map %s: %s", path, strerror(errno));
    if (pmem_is_pmem(addr, len)) f->pmem++;
    return NM_OK;
}

/* Real nodes: node k's pages should come from node k. On DAX the device
 * decides (the user puts node k's directory on node k's namespace); for shmem
 * files (tmpfs) a preferred-node policy places the pages; for page-cache files
 * of other file systems Linux ignores a mapping's policy (the faulting
 * thread's applies), so the call is harmless there. Virtual nodes: nothing. */
static void bind_node(pm_heap *h, unsigned k, char *addr, size_t len, bool pmem)
{
    pm_numa *n = h->numa;
    if (pmem || n->virt || n->nnodes < 2 || n->nnodes != h->files->n) return;
    unsigned long mask[(PM_NUMA_MAX_NODES + 63) / 64 + 1];
    memset(mask, 0, sizeof mask);
    mask[k / 64] |= 1ul << (k % 64);
    if (mbind(addr, len, MPOL_PREFERRED, mask, PM_NUMA_MAX_NODES + 1, 0) == 0) h->files->bound++;
}

static nm_err map_node(pm_heap *h, unsigned k, uint64_t data_off)
{
    pm_files *f = h->files;
    char *addr = f->map + data_off + f->lo[k] * PM_PAGE;
    size_t len = (f->lo[k + 1] - f->lo[k]) * PM_PAGE;
    unsigned before = f->pmem;
    nm_err e = map_at(f, addr, len, f->fd[k], f->path[k]);
    if (!e && f->pmem > before) f->pmem_nodes++;
    if (!e) bind_node(h, k, addr, len, f->pmem > before);
    return e;
}

static void sync_dir_of(const char *path)
{
    char *c = strdup(path);
    if (!c) return;
    int fd = open(dirname(c), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(c);
}

static pm_files *files_new(pm_heap *h, const char *dir)
{
    pm_files *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    for (unsigned k = 0; k < PM_NUMA_MAX_NODES; k++) f->fd[k] = -1;
    h->files = f;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    f->main_path = strdup(p);
    snprintf(p, sizeof p, "%s/%s" MARKER_SUFFIX, dir, PMALLOC_FILE_NAME);
    f->marker = strdup(p);
    return f->main_path && f->marker ? f : NULL;
}

static nm_err set_paths(pm_files *f, const char *dir, const pmalloc_options *o)
{
    for (unsigned k = 0; k < f->n; k++)
        if (!(f->path[k] = dup_node_path(dir, o, k))) return nm_fail(NM_ENOMEM, "pmalloc: no host memory");
    return NM_OK;
}

/* The trailer of the node file at `path`; st_size in *size (-1: absent). */
static int read_trailer(const char *path, pm_node_trailer *t, long long *size)
{
    *size = -1;
    memset(t, 0, sizeof *t);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) == 0) {
        *size = (long long)st.st_size;
        if (st.st_size >= (off_t)PM_NODE_TRAILER && pread(fd, t, sizeof *t, st.st_size - PM_NODE_TRAILER) != (ssize_t)sizeof *t)
            memset(t, 0, sizeof *t);
    }
    close(fd);
    return 0;
}

static bool trailer_valid(const pm_node_trailer *t) { return t->magic == PM_NODE_MAGIC && t->check == trailer_check(t); }

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return false;
    return true;
}

/* Remove the node files that the (main or temporary) heap file `fd` names:
 * those whose trailer carries its id, and those its create left unfinished
 * (empty, or of the expected size with a blank trailer). */
static nm_err remove_named(int fd, const char *dir, const pmalloc_options *o)
{
    static __thread _Alignas(64) char page[PM_PAGE];
    if (pread(fd, page, PM_PAGE, 0) != (ssize_t)PM_PAGE) return NM_OK; /* not even a superblock: names nothing */
    const pm_super *sb = (const pm_super *)page;
    pm_files f;
    memset(&f, 0, sizeof f);
    uint64_t data_off;
    if (files_hdr(sb)->magic != PM_FILES_MAGIC || read_hdr(sb, &f, &data_off) != NM_OK) return NM_OK;
    for (unsigned k = 0; k < f.n; k++) {
        char p[4200];
        node_path(p, sizeof p, dir, o, k);
        pm_node_trailer t;
        long long size;
        if (read_trailer(p, &t, &size) != 0) continue;
        uint64_t want = (f.lo[k + 1] - f.lo[k]) * PM_PAGE + PM_NODE_TRAILER;
        bool ours = trailer_valid(&t) ? t.heap_id == f.heap_id : size == 0 || ((uint64_t)size == want && all_zero(&t, sizeof t));
        if (ours && unlink(p) != 0 && errno != ENOENT) return nm_fail(NM_EIO, "pmalloc: cannot remove %s: %s", p, strerror(errno));
    }
    return NM_OK;
}

/* Remove `path` (a heap's main or temporary file) and the node files it names,
 * unless it is in use. */
static nm_err remove_heap_file(const char *path, const char *dir, const pmalloc_options *o)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? NM_OK : nm_fail(NM_EIO, "pmalloc: cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return nm_fail(NM_EBUSY, "pmalloc: %s is in use (open, or being created)", path);
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || stat(path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        close(fd); /* replaced meanwhile: someone else is at work here */
        return nm_fail(NM_EBUSY, "pmalloc: %s changed while being removed", path);
    }
    nm_err e = remove_named(fd, dir, o);
    if (!e && unlink(path) != 0 && errno != ENOENT) e = nm_fail(NM_EIO, "pmalloc: cannot remove %s: %s", path, strerror(errno));
    close(fd);
    return e;
}

/* Node files of a heap at `dir` whose main file is gone (deleted by hand, or
 * by a tool that knows only pmalloc.heap): nothing can open them any more. */
static nm_err remove_orphans(const char *dir, const pmalloc_options *o, uint64_t dh)
{
    for (unsigned k = 0; k < PM_NUMA_MAX_NODES; k++) {
        char p[4200];
        node_path(p, sizeof p, dir, o, k);
        pm_node_trailer t;
        long long size;
        if (read_trailer(p, &t, &size) != 0 || !trailer_valid(&t) || t.dir_hash != dh) continue;
        if (unlink(p) != 0 && errno != ENOENT) return nm_fail(NM_EIO, "pmalloc: cannot remove %s: %s", p, strerror(errno));
    }
    return NM_OK;
}

nm_err pmalloc_remove(const char *dir, const pmalloc_options *o)
{
    if (!dir) return nm_fail(NM_EINVAL, "pmalloc_remove: NULL directory");
    char p[4200];
    snprintf(p, sizeof p, "%s/%s" MARKER_SUFFIX, dir, PMALLOC_FILE_NAME);
    nm_err e = remove_heap_file(p, dir, o);
    if (e) return e;
    snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
    if ((e = remove_heap_file(p, dir, o))) return e;
    struct stat st;
    if (stat(p, &st) == 0) return NM_OK; /* created again meanwhile: not ours to touch */
    return remove_orphans(dir, o, dir_hash(dir));
}

/* ---- create ---- */

/* Node boundaries: the even split numa.c uses for one-file heaps, each moved to
 * the nearest 2 MiB boundary of the data area when every node has at least
 * 4 MiB (huge-page DAX faults; the split is recorded in the superblock). */
static void split(pm_files *f, uint64_t pages)
{
    const uint64_t hp = PM_HUGE / PM_PAGE;
    unsigned n = f->n;
    for (unsigned k = 0; k <= n; k++) f->lo[k] = pages * k / n;
    if (pages / n < 2 * hp) return;
    for (unsigned k = 1; k < n; k++) f->lo[k] = (pages * k / n + hp / 2) / hp * hp;
}

/* The temporary name appears already locked, so an unlocked one is always a
 * leftover, never a create that has not taken its lock yet: the file is made
 * nameless (O_TMPFILE), locked, then linked to the name (which fails if the
 * name exists). Where O_TMPFILE or /proc is missing, a unique name stands in
 * for the nameless file (a crash in the few instructions between its creation
 * and its removal leaves an empty pmalloc.heap.creating.<pid>.<id>). */
static nm_err make_marker(pm_heap *h, const char *dir)
{
    pm_files *f = h->files;
    int fd = -1, err = 0;
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && linkat(AT_FDCWD, proc, AT_FDCWD, f->marker, AT_SYMLINK_FOLLOW) == 0) {
            h->lock_fd = fd;
            return NM_OK;
        }
        err = errno;
        close(fd);
        fd = -1;
    }
#endif
    if (err != EEXIST) {
        char uniq[4300];
        snprintf(uniq, sizeof uniq, "%s.%ld.%016llx", f->marker, (long)getpid(), (unsigned long long)f->heap_id);
        fd = open(uniq, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) return nm_fail(NM_EIO, "pmalloc_open: cannot create %s: %s", uniq, strerror(errno));
        err = flock(fd, LOCK_EX | LOCK_NB) == 0 && link(uniq, f->marker) == 0 ? 0 : errno;
        unlink(uniq);
        if (!err) {
            h->lock_fd = fd;
            return NM_OK;
        }
        close(fd);
    }
    return err == EEXIST ? nm_fail(NM_EBUSY, "pmalloc_open: %s is being created by another process", f->main_path)
                         : nm_fail(NM_EIO, "pmalloc_open: cannot create %s: %s", f->marker, strerror(err));
}

nm_err pm_files_create(pm_heap *h, const char *dir, const pmalloc_options *o, unsigned nfiles, uint64_t data_off,
                       uint64_t heap_size, int *is_pmem)
{
    pm_files *f = files_new(h, dir);
    if (!f) return nm_fail(NM_ENOMEM, "pmalloc: no host memory");
    f->n = nfiles;
    uint64_t pages = (heap_size - data_off) / PM_PAGE;
    if (pages < nfiles) /* a range smaller than a slab is fine: slabs and extents may span files */
        return nm_fail(NM_ERANGE, "pmalloc_open: a %llu-byte heap is too small for %u node files", (unsigned long long)heap_size, nfiles);
    split(f, pages);
    if (getrandom(&f->heap_id, sizeof f->heap_id, 0) != (ssize_t)sizeof f->heap_id) f->heap_id = nm_now_ns() ^ ((uint64_t)getpid() << 32);
    if (f->heap_id == 0) f->heap_id = 1;
    f->dir_hash = dir_hash(dir);
    nm_err e = set_paths(f, dir, o);
    if (e) return e;

    /* leftovers of an interrupted create (its temporary main file names them) */
    if ((e = remove_heap_file(f->marker, dir, o))) return e;
    if ((e = make_marker(h, dir))) return e;
    /* holding the temporary name, no other create of this directory can be
     * under way; one that finished before would have its main file there */
    struct stat st;
    if (stat(f->main_path, &st) == 0) return nm_fail(NM_EBUSY, "pmalloc_open: %s was created by another process meanwhile", f->main_path);
    if (ftruncate(h->lock_fd, (off_t)data_off) != 0) return nm_fail(NM_EIO, "pmalloc_open: cannot size %s: %s", f->marker, strerror(errno));
    if ((e = reserve(f, heap_size, data_off)) || (e = map_at(f, f->map, data_off, h->lock_fd, f->marker))) return e;
    h->base = f->map;
    h->size = heap_size;
    h->sb = (pm_super *)h->base;

    /* the header first: a leftover temporary file names the node files to remove */
    pm_files_hdr *fh = files_hdr(h->sb);
    uint64_t *tab = files_table(h->sb);
    fh->magic = PM_FILES_MAGIC;
    fh->nfiles = nfiles;
    fh->heap_id = f->heap_id;
    fh->data_off = data_off;
    fh->data_pages = pages;
    for (unsigned k = 0; k < nfiles; k++) tab[k] = f->lo[k];
    fh->check = hdr_check(fh, tab);
    if (msync(h->base, PM_PAGE, MS_SYNC) != 0 || fsync(h->lock_fd) != 0)
        return nm_fail(NM_EIO, "pmalloc_open: cannot sync %s: %s", f->marker, strerror(errno));
    sync_dir_of(f->marker);

    for (unsigned k = 0; k < nfiles; k++) {
        int fd = open(f->path[k], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST) {
            /* an orphan of a heap in this very directory whose main file is gone
             * (the check above: no heap is here) is replaced; another heap's never */
            pm_node_trailer t;
            long long size;
            if (read_trailer(f->path[k], &t, &size) == 0 && trailer_valid(&t) && t.dir_hash == f->dir_hash && unlink(f->path[k]) == 0)
                fd = open(f->path[k], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            else errno = EEXIST;
        }
        if (fd < 0)
            return errno == EEXIST ? nm_fail(NM_EEXIST, "pmalloc_open: node file %s already exists and is not this heap's "
                                                        "(another heap's, or left over: pmalloc_remove it, or use other node_dirs)",
                                             f->path[k])
                                   : nm_fail(NM_EIO, "pmalloc_open: cannot create %s: %s", f->path[k], strerror(errno));
        f->fd[k] = fd;
        f->created |= 1ull << k;
        uint64_t len = (f->lo[k + 1] - f->lo[k]) * PM_PAGE;
        pm_node_trailer t;
        make_trailer(f, data_off, k, &t);
        if (ftruncate(fd, (off_t)(len + PM_NODE_TRAILER)) != 0 || pwrite(fd, &t, sizeof t, (off_t)len) != (ssize_t)sizeof t || fsync(fd) != 0)
            return nm_fail(NM_EIO, "pmalloc_open: cannot write %s: %s", f->path[k], strerror(errno));
        sync_dir_of(f->path[k]);
        if ((e = map_node(h, k, data_off))) return e;
    }
    *is_pmem = f->pmem == nfiles + 1;
    return NM_OK;
}

/* A one-file heap is built the same way, under the temporary name, and gets
 * its name last (pm_files_commit, then pm_files_detach): a create killed at
 * any moment leaves no pmalloc.heap (only an unlocked temporary file, which
 * the next create removes) or a complete heap. */
nm_err pm_files_create_single(pm_heap *h, const char *dir, uint64_t heap_size, int *is_pmem)
{
    pm_files *f = files_new(h, dir);
    if (!f) return nm_fail(NM_ENOMEM, "pmalloc: no host memory");
    f->single = true;
    if (getrandom(&f->heap_id, sizeof f->heap_id, 0) != (ssize_t)sizeof f->heap_id) f->heap_id = nm_now_ns() ^ ((uint64_t)getpid() << 32);
    nm_err e = remove_heap_file(f->marker, dir, NULL); /* an interrupted create's leftover */
    if (e || (e = make_marker(h, dir))) return e;
    struct stat st;
    if (stat(f->main_path, &st) == 0) return nm_fail(NM_EBUSY, "pmalloc_open: %s was created by another process meanwhile", f->main_path);
    /* the blocks up front (as libpmem's pmem_map_file does): a page fault on a
     * full file system would be a SIGBUS, not an error code */
    int fe = posix_fallocate(h->lock_fd, 0, (off_t)heap_size);
    if (fe == EOPNOTSUPP || fe == EINVAL) fe = ftruncate(h->lock_fd, (off_t)heap_size) ? errno : 0;
    if (fe) return nm_fail(fe == ENOSPC ? NM_ENOMEM : NM_EIO, "pmalloc_open: cannot size %s: %s", f->marker, strerror(fe));
    if ((e = reserve(f, heap_size, 0)) || (e = map_at(f, f->map, heap_size, h->lock_fd, f->marker))) return e;
    h->base = f->map;
    h->size = heap_size;
    h->sb = (pm_super *)h->base;
    *is_pmem = f->pmem == 1;
    return NM_OK;
}

/* After the commit of a one-file create: the heap is an ordinary one-file heap
 * (one mapping, unmapped at close like an opened one). */
void pm_files_detach(pm_heap *h)
{
    pm_files *f = h->files;
    if (!f || !f->single) return;
    free(f->marker);
    free(f->main_path);
    free(f);
    h->files = NULL;
}

nm_err pm_files_commit(pm_heap *h)
{
    pm_files *f = h->files;
    if (fsync(h->lock_fd) != 0) return nm_fail(NM_EIO, "pmalloc_open: cannot sync %s: %s", f->marker, strerror(errno));
    /* no-replace: a heap another process created meanwhile (one file, which
     * takes no temporary name) is never overwritten */
    if (renameat2(AT_FDCWD, f->marker, AT_FDCWD, f->main_path, RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) return nm_fail(NM_EBUSY, "pmalloc_open: %s was created by another process meanwhile", f->main_path);
        if (errno != EINVAL && errno != ENOSYS) return nm_fail(NM_EIO, "pmalloc_open: cannot rename %s: %s", f->marker, strerror(errno));
        /* a file system without RENAME_NOREPLACE: link() never replaces either */
        if (link(f->marker, f->main_path) != 0)
            return errno == EEXIST ? nm_fail(NM_EBUSY, "pmalloc_open: %s was created by another process meanwhile", f->main_path)
                                   : nm_fail(NM_EIO, "pmalloc_open: cannot link %s: %s", f->main_path, strerror(errno));
        unlink(f->marker);
    }
    f->committed = true;
    sync_dir_of(f->main_path);
    return NM_OK;
}

void pm_files_discard(pm_heap *h)
{
    pm_files *f = h->files;
    if (!f || f->committed) return;
    if (f->single && f->map) { /* nothing else was made */
        munmap(f->map, f->map_len);
        f->map = NULL;
        h->base = NULL;
    }
    for (unsigned k = 0; k < f->n; k++)
        if (f->created >> k & 1) unlink(f->path[k]);
    if (h->lock_fd >= 0 && f->marker) unlink(f->marker); /* ours: we hold its lock */
}

/* ---- open ---- */

nm_err pm_files_open(pm_heap *h, const char *dir, const pmalloc_options *o, const pm_super *sb, int *is_pmem)
{
    pm_files *f = files_new(h, dir);
    if (!f) return nm_fail(NM_ENOMEM, "pmalloc: no host memory");
    f->committed = true; /* an existing heap: nothing of it is being created */
    uint64_t data_off;
    nm_err e = read_hdr(sb, f, &data_off);
    if (e || (e = set_paths(f, dir, o))) return e;
    if (data_off != sb->data_off || f->lo[f->n] != (sb->heap_size - sb->data_off) / PM_PAGE)
        return nm_fail(NM_ECORRUPT, "pmalloc: node-file header and superblock disagree on the data area");
    struct stat st;
    if (fstat(h->lock_fd, &st) != 0) return nm_fail(NM_EIO, "pmalloc_open: cannot stat %s: %s", f->main_path, strerror(errno));
    if ((uint64_t)st.st_size != sb->data_off)
        return nm_fail(NM_ECORRUPT, "pmalloc: %s has %lld bytes, its superblock says %llu", f->main_path, (long long)st.st_size,
                       (unsigned long long)sb->data_off);
    /* every node file is checked before anything is mapped */
    for (unsigned k = 0; k < f->n; k++) {
        const char *p = f->path[k];
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return errno == ENOENT ? nm_fail(NM_ECORRUPT, "pmalloc: node file %s of heap %s is missing (moved? other node_dirs?)", p, f->main_path)
                                   : nm_fail(NM_EIO, "pmalloc: cannot open node file %s: %s", p, strerror(errno));
        f->fd[k] = fd;
        if (fstat(fd, &st) != 0) return nm_fail(NM_EIO, "pmalloc: cannot stat %s: %s", p, strerror(errno));
        pm_node_trailer t, want;
        memset(&t, 0, sizeof t);
        make_trailer(f, sb->data_off, k, &want);
        uint64_t size = want.range_bytes + PM_NODE_TRAILER;
        if (st.st_size >= (off_t)PM_NODE_TRAILER && pread(fd, &t, sizeof t, st.st_size - PM_NODE_TRAILER) != (ssize_t)sizeof t)
            return nm_fail(NM_EIO, "pmalloc: cannot read %s: %s", p, strerror(errno));
        if (!trailer_valid(&t)) {
            if ((uint64_t)st.st_size != size)
                return nm_fail(NM_ECORRUPT, "pmalloc: node file %s has %lld bytes, node %u of this heap has %llu (truncated or not a node file)", p,
                               (long long)st.st_size, k, (unsigned long long)size);
            return nm_fail(NM_ECORRUPT, "pmalloc: node file %s: trailer damaged (bad magic or checksum)", p);
        }
        if (t.heap_id != f->heap_id)
            return nm_fail(NM_ECORRUPT, "pmalloc: node file %s belongs to another heap (id %016llx, this heap %016llx)", p,
                           (unsigned long long)t.heap_id, (unsigned long long)f->heap_id);
        if (t.node != k) return nm_fail(NM_ECORRUPT, "pmalloc: node file %s holds node %u's memory, not node %u's (files swapped?)", p, t.node, k);
        if (t.nfiles != f->n || t.version != PM_VERSION_FILES || t.range_off != want.range_off || t.range_bytes != want.range_bytes)
            return nm_fail(NM_ECORRUPT, "pmalloc: node file %s describes another layout than its heap's superblock", p);
        if ((uint64_t)st.st_size != size)
            return nm_fail(NM_ECORRUPT, "pmalloc: node file %s has %lld bytes, expected %llu (truncated or extended)", p, (long long)st.st_size,
                           (unsigned long long)size);
    }
    if ((e = reserve(f, sb->heap_size, sb->data_off)) || (e = map_at(f, f->map, sb->data_off, h->lock_fd, f->main_path))) return e;
    h->base = f->map;
    h->size = sb->heap_size;
    h->sb = (pm_super *)h->base;
    for (unsigned k = 0; k < f->n; k++)
        if ((e = map_node(h, k, sb->data_off))) return e;
    *is_pmem = f->pmem == f->n + 1;
    return NM_OK;
}

void pm_files_unmap(pm_heap *h)
{
    pm_files *f = h->files;
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    for (unsigned k = 0; k < PM_NUMA_MAX_NODES; k++) {
        if (f->fd[k] >= 0) close(f->fd[k]);
        free(f->path[k]);
    }
    free(f->marker);
    free(f->main_path);
    free(f);
    h->files = NULL;
    h->base = NULL;
}

/* ---- decay and crash images ---- */

bool pm_data_punch(pm_heap *h, uint64_t page, uint64_t npages)
{
    const int mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    pm_files *f = h->files;
    if (!f) return fallocate(h->lock_fd, mode, (off_t)(h->sb->data_off + page * PM_PAGE), (off_t)(npages * PM_PAGE)) == 0;
    /* an extent may span node files (an allocation larger than one node's range) */
    for (unsigned k = 0; k < f->n; k++) {
        uint64_t a = NM_MAX(page, f->lo[k]), b = NM_MIN(page + npages, f->lo[k + 1]);
        if (a >= b) continue;
        if (fallocate(f->fd[k], mode, (off_t)((a - f->lo[k]) * PM_PAGE), (off_t)((b - a) * PM_PAGE)) != 0) return false;
    }
    return true;
}

/* Crash image of a heap with node files: the main file and every node file
 * (with its trailer) in `dir`; write_range writes heap bytes [off, off+len)
 * of the image at the file's start. */
nm_err pm_files_snapshot(pm_heap *h, const char *dir, nm_err (*write_range)(void *arg, int fd, uint64_t off, uint64_t len), void *arg)
{
    pm_files *f = h->files;
    for (unsigned k = 0; k <= f->n; k++) {
        char p[4200];
        if (k == 0) snprintf(p, sizeof p, "%s/%s", dir, PMALLOC_FILE_NAME);
        else node_path(p, sizeof p, dir, NULL, k - 1);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return nm_fail(NM_EIO, "pmalloc: cannot create %s: %s", p, strerror(errno));
        nm_err e;
        if (k == 0) e = write_range(arg, fd, 0, h->sb->data_off);
        else {
            unsigned n = k - 1;
            uint64_t len = (f->lo[n + 1] - f->lo[n]) * PM_PAGE;
            e = write_range(arg, fd, h->sb->data_off + f->lo[n] * PM_PAGE, len);
            pm_node_trailer t;
            make_trailer(f, h->sb->data_off, n, &t);
            if (!e && (pwrite(fd, &t, sizeof t, (off_t)len) != (ssize_t)sizeof t || ftruncate(fd, (off_t)(len + PM_NODE_TRAILER)) != 0))
                e = nm_fail(NM_EIO, "pmalloc: writing %s: %s", p, strerror(errno));
        }
        close(fd);
        if (e) return e;
    }
    return NM_OK;
}
