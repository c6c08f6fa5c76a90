/* Inspection of a heap's files without opening it (`nearmem pmalloc info`,
 * `nearmem pmalloc dump`): the main file mapped read-only, no lock, nothing
 * written. Each structure is printed by the file that owns its layout and
 * checks (pm_redo_dump, pm_bk_dump, pm_numa_dump). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pm_api.h"

typedef struct view {
    char *base;
    size_t size;
    bool in_use;
} view;

static nm_err view_open(const char *dir, view *v)
{
    char path[4200];
    if (!dir || snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME) >= (int)sizeof path)
        return nm_fail(NM_EINVAL, "pmalloc: no heap directory, or its name is too long");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? nm_fail(NM_ENOENT, "pmalloc: no heap in %s (%s is missing)", dir, PMALLOC_FILE_NAME)
                                       : nm_fail(NM_EIO, "pmalloc: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)PM_PAGE) {
        close(fd);
        return nm_fail(NM_EFORMAT, "pmalloc: %s is too small to be a PMAlloc heap", path);
    }
    /* pmalloc_open holds an exclusive lock on the main file while the heap is open */
    v->in_use = flock(fd, LOCK_SH | LOCK_NB) != 0;
    if (!v->in_use) flock(fd, LOCK_UN);
    v->size = (size_t)st.st_size;
    v->base = mmap(NULL, v->size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (v->base == MAP_FAILED) return nm_fail(NM_EIO, "pmalloc: cannot map %s: %s", path, strerror(errno));
    const pm_super *sb = (const pm_super *)v->base;
    nm_err e = NM_OK;
    if (sb->magic != PM_MAGIC) e = nm_fail(NM_EFORMAT, "pmalloc: %s is not a PMAlloc heap (no magic)", path);
    else if (sb->version != PM_VERSION && sb->version != PM_VERSION_FILES)
        e = nm_fail(NM_EFORMAT, "pmalloc: %s has heap format version %u; this build reads %u and %u", path, sb->version, PM_VERSION,
                    PM_VERSION_FILES);
    else if (sb->check != pm_super_check(sb)) e = nm_fail(NM_ECORRUPT, "pmalloc: %s: the superblock fails its checksum", path);
    else if (sb->data_off > sb->heap_size || sb->redo_off > sb->data_off || sb->bk_off > sb->data_off ||
             (sb->version == PM_VERSION && sb->heap_size != v->size))
        e = nm_fail(NM_ECORRUPT, "pmalloc: %s: the superblock describes another layout than the file's", path);
    if (e) munmap(v->base, v->size);
    return e;
}

static void fill(const view *v, pmalloc_file_info *fi)
{
    const pm_super *sb = (const pm_super *)v->base;
    memset(fi, 0, sizeof *fi);
    fi->version = sb->version;
    fi->model = (pmalloc_model)sb->model;
    fi->heap_size = sb->heap_size;
    fi->data_bytes = sb->heap_size - sb->data_off;
    fi->ptr_tag = sb->ptr_tag;
    if (sb->version == PM_VERSION_FILES) {
        const pm_files_hdr *fh = (const pm_files_hdr *)(v->base + PM_FILES_LINE * PM_LINE);
        fi->node_files = fh->magic == PM_FILES_MAGIC ? fh->nfiles : 0;
    }
    fi->redo_rings = sb->nrings;
    fi->ring_records = sb->ring_recs;
    fi->log_chunks = sb->nchunks;
    fi->clean = sb->state == PM_STATE_CLEAN;
    fi->recovering = sb->state == PM_STATE_RECOVERING;
    fi->in_use = v->in_use;
    const pm_numa_hdr *nh = (const pm_numa_hdr *)(v->base + PM_NUMA_HDR_LINE * PM_LINE);
    fi->numa_logs = nh->magic == PM_NUMA_MAGIC;
    pm_heap *h = calloc(1, sizeof *h);
    if (h) {
        h->base = v->base;
        h->size = v->size;
        h->sb = (pm_super *)v->base;
        pm_redo_summary(h, &fi->checkpoint_bound, &fi->records_pending);
        fi->log_chunks_listed = pm_bk_listed(h);
        free(h);
    }
}

nm_err pmalloc_inspect(const char *dir, const pmalloc_options *o, pmalloc_file_info *fi)
{
    NM_UNUSED(o);
    if (!fi) return nm_fail(NM_EINVAL, "pmalloc_inspect: no info struct");
    view v;
    nm_err e = view_open(dir, &v);
    if (e) return e;
    fill(&v, fi);
    munmap(v.base, v.size);
    return NM_OK;
}

nm_err pmalloc_dump(const char *dir, const pmalloc_options *o, FILE *out)
{
    NM_UNUSED(o);
    if (!out) return nm_fail(NM_EINVAL, "pmalloc_dump: no output");
    view v;
    nm_err e = view_open(dir, &v);
    if (e) return e;
    pmalloc_file_info fi;
    fill(&v, &fi);
    const pm_super *sb = (const pm_super *)v.base;
    fprintf(out, "heap %s/%s: format %u, %s model, %llu bytes (%llu of data at %#llx), %s\n", dir, PMALLOC_FILE_NAME, fi.version,
            fi.model == PMALLOC_GC ? "GC" : "LOG", (unsigned long long)fi.heap_size, (unsigned long long)fi.data_bytes,
            (unsigned long long)sb->data_off, fi.node_files ? "node files" : "one file");
    fprintf(out, "superblock: checksum ok; pointer tag %#llx; %u stripes; %u roots at %#llx\n", (unsigned long long)fi.ptr_tag,
            sb->stripes, sb->nroots, (unsigned long long)sb->roots_off);
    const char *state = sb->state == PM_STATE_CLEAN ? "clean (closed)" : sb->state == PM_STATE_RUNNING ? "running (open, or crashed)"
                        : sb->state == PM_STATE_RECOVERING ? "recovering (crashed inside a recovery)" : "UNKNOWN (damaged)";
    fprintf(out, "session state (line 2): %s%s\n", state, v.in_use ? "; a process has the heap open now" : "");
    /* a fake heap for the owners' dump functions: base, size and superblock only */
    pm_heap *h = calloc(1, sizeof *h);
    if (!h) { munmap(v.base, v.size); return nm_fail(NM_ENOMEM, "pmalloc_dump: host memory"); }
    h->base = v.base;
    h->size = v.size;
    h->sb = (pm_super *)v.base;
    unsigned bad = sb->state != PM_STATE_CLEAN && sb->state != PM_STATE_RUNNING && sb->state != PM_STATE_RECOVERING;
    bad += pm_redo_dump(h, out);
    bad += pm_bk_dump(h, out);
    bad += pm_numa_dump(h, out);
    fprintf(out, "slabs and objects: not read here (the log must be replayed: `nearmem pmalloc check`)\n");
    free(h);
    munmap(v.base, v.size);
    if (bad) return nm_fail(NM_ECORRUPT, "pmalloc_dump: %u structure%s damaged (marked above)", bad, bad == 1 ? "" : "s");
    return NM_OK;
}
