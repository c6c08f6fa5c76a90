/* Heap handles: what pmalloc_open hands out is not the heap's address but a
 * value naming a slot of a process-wide table and the slot's generation
 * (bits 48-63 a magic, 16-47 the generation, 0-15 the slot). Every public call
 * resolves it; pmalloc_close empties the slot and bumps its generation, so a
 * call on a closed handle, or a second close, finds a stale generation and
 * returns NM_ESTATE instead of touching freed memory, also when a later open
 * reuses the slot. The value is a non-canonical address: dereferencing it
 * faults at once. Resolving costs one load of a read-mostly table line. */
#include <pthread.h>
#include <stdint.h>

#include "pm_media.h"

pm_hslot pm_hslots[PM_HSLOTS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static inline bool decode(const pmalloc_heap *hd, unsigned *idx, uint32_t *gen)
{
    uintptr_t v = (uintptr_t)hd;
    if ((uint64_t)v >> 48 != PM_HMAGIC) return false;
    *idx = (unsigned)(v & 0xffffu);
    *gen = (uint32_t)(((uint64_t)v >> 16) & 0xffffffffu);
    return *idx < PM_HSLOTS;
}

nm_err pm_handle_error(const pmalloc_heap *hd, const char *fn)
{
    if (!hd) return nm_fail(NM_EINVAL, "%s: heap handle is NULL", fn);
    unsigned idx;
    uint32_t gen;
    if (!decode(hd, &idx, &gen)) return nm_fail(NM_EINVAL, "%s: %p is not a heap handle", fn, (const void *)hd);
    return nm_fail(NM_ESTATE, "%s: the heap handle was closed (pmalloc_close or pmalloc_abandon)", fn);
}

pmalloc_heap *pm_handle_new(pm_heap *h)
{
    pthread_mutex_lock(&g_lock);
    unsigned idx = PM_HSLOTS;
    for (unsigned i = 0; i < PM_HSLOTS; i++)
        if (!(pm_hslots[i].gen & 1u)) { idx = i; break; }
    if (idx == PM_HSLOTS) {
        pthread_mutex_unlock(&g_lock);
        nm_fail(NM_EBUSY, "pmalloc_open: more than %u heaps open at once", PM_HSLOTS);
        return NULL;
    }
    pm_hslot *s = &pm_hslots[idx];
    s->h = h;
    uint32_t gen = s->gen + 1; /* odd: in use */
    __atomic_store_n(&s->gen, gen, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return (pmalloc_heap *)(uintptr_t)(PM_HMAGIC << 48 | (uint64_t)gen << 16 | idx);
}

void pm_handle_drop(const pmalloc_heap *hd)
{
    unsigned idx;
    uint32_t gen;
    if (!decode(hd, &idx, &gen)) return;
    pthread_mutex_lock(&g_lock);
    pm_hslot *s = &pm_hslots[idx];
    if (s->gen == gen) {
        __atomic_store_n(&s->gen, gen + 1, __ATOMIC_RELEASE); /* even: free, and every old handle stale */
        s->h = NULL;
    }
    pthread_mutex_unlock(&g_lock);
}
