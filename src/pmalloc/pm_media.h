/* PMAlloc internals, media layer (persist.c, files.c, handle.c): making lines
 * durable (or recording them for the power-failure image), the heap files and
 * their mapping, the handle table. Calls nothing above it. Layers and the rule
 * they follow: docs/pmalloc.md, "Code layout". */
#ifndef PMALLOC_MEDIA_H
#define PMALLOC_MEDIA_H

#include "pm_types.h"

/* ---- persist.c ---- */
extern PM_TLS pm_tlctr pm_tl_ctr[PM_TL_CTRS]; /* this thread's block per heap (heap uid) */
pm_ctrblk *pm_ctr_block_new(pm_heap *h);
static inline void pm_ctr_add(pm_heap *h, int which, uint64_t n);
uint64_t pm_ctr_sum(pm_heap *h, int which);
void pm_ctr_set(pm_heap *h, int which, uint64_t v); /* not concurrent with adds */
nm_err pm_ctr_init(pm_heap *h);
void pm_ctr_free(pm_heap *h);
void pm_flush(pm_heap *h, const void *addr, size_t len, int meta);
void pm_drain(pm_heap *h);
static inline void pm_persist(pm_heap *h, const void *addr, size_t len, int meta)
{
    pm_flush(h, addr, len, meta);
    pm_drain(h);
}
nm_err pm_sim_init(pm_heap *h, bool fresh);
void pm_sim_free(pm_heap *h);
/* This thread's block for heap h, or NULL if it has none yet (no allocation). */
static inline pm_ctrblk *pm_ctr_find(const pm_heap *h)
{
    for (unsigned i = 0; i < PM_TL_CTRS; i++)
        if (pm_tl_ctr[i].uid == h->uid) return pm_tl_ctr[i].b != h->ctr_shared ? pm_tl_ctr[i].b : NULL;
    return NULL;
}
/* The calling thread now works for arena `id`: its log appends go to that
 * arena's lane. Kept per (thread, heap) with the counters, not looked up
 * through the thread-cache key, which recovery and helper threads lack. */
static inline void pm_set_lane(pm_heap *h, unsigned id)
{
    pm_ctrblk *b = pm_ctr_find(h);
    if (!b) b = pm_ctr_block_new(h);
    if (b && b != h->ctr_shared) b->lane = id;
}
/* Per-thread counter blocks: a plain store to a line no other thread writes. */
static inline void pm_ctr_add(pm_heap *h, int which, uint64_t n)
{
    pm_ctrblk *b = NULL;
    for (unsigned i = 0; i < PM_TL_CTRS; i++)
        if (pm_tl_ctr[i].uid == h->uid) { b = pm_tl_ctr[i].b; break; }
    if (NM_UNLIKELY(!b)) b = pm_ctr_block_new(h);
    if (NM_UNLIKELY(b == h->ctr_shared)) {
        __atomic_fetch_add(&b->v[which], n, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&b->v[which], __atomic_load_n(&b->v[which], __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- files.c ---- */
nm_err pm_files_create(pm_heap *h, const char *dir, const pmalloc_options *o, unsigned nfiles, uint64_t data_off,
                       uint64_t heap_size, int *is_pmem); /* maps everything; sets base, size, lock_fd */
nm_err pm_files_create_single(pm_heap *h, const char *dir, uint64_t heap_size, int *is_pmem); /* one file, under the temporary name */
void pm_files_detach(pm_heap *h);                          /* one-file create committed: forget the create state */
nm_err pm_files_commit(pm_heap *h);                    /* create done: the main file gets its name */
nm_err pm_files_open(pm_heap *h, const char *dir, const pmalloc_options *o, const pm_super *sb, int *is_pmem);
void pm_files_discard(pm_heap *h);                     /* failed create: remove what it made */
void pm_files_unmap(pm_heap *h);
bool pm_data_punch(pm_heap *h, uint64_t page, uint64_t npages); /* hole punch (decay), in the right file(s) */
nm_err pm_files_snapshot(pm_heap *h, const char *dir,
                         nm_err (*write_range)(void *arg, int fd, uint64_t off, uint64_t len), void *arg);

/* ---- handle.c ---- */
/* The handle table (handle.c): inline resolution, since every public call
 * (pmalloc_direct above all, which programs call per object access) pays it. */
#define PM_HMAGIC 0x9e4bull
#define PM_HSLOTS 1024u
typedef struct pm_hslot {
    pm_heap *h;
    uint32_t gen; /* atomic; odd = in use */
    uint32_t next_free;
} pm_hslot;
extern pm_hslot pm_hslots[PM_HSLOTS];
static inline pm_heap *pm_resolve(const pmalloc_heap *hd) /* NULL: not a live handle */
{
    uint64_t v = (uint64_t)(uintptr_t)hd;
    unsigned idx = (unsigned)(v & 0xffffu);
    if (NM_UNLIKELY(v >> 48 != PM_HMAGIC || idx >= PM_HSLOTS)) return NULL;
    const pm_hslot *s = &pm_hslots[idx];
    if (NM_UNLIKELY(__atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) != (uint32_t)(v >> 16))) return NULL;
    return s->h;
}
nm_err pm_handle_error(const pmalloc_heap *hd, const char *fn); /* NM_EINVAL (NULL, garbage) or NM_ESTATE (closed) */
pmalloc_heap *pm_handle_new(pm_heap *h);                  /* NULL (NM_EBUSY) when the table is full */
void pm_handle_drop(const pmalloc_heap *hd);
/* Resolve handle `hd` into `h` at the top of a public call; on failure return `ret`. */
#define PM_ENTER(h, hd, ret)                 \
    pm_heap *h = pm_resolve(hd);             \
    if (NM_UNLIKELY(h == NULL)) return ret
#define PM_ENTER_ERR(h, hd) PM_ENTER(h, hd, pm_handle_error(hd, __func__))

#endif
