/* PMAlloc internals, API layer (inspect.c, pmalloc.c, tcache.c): the public
 * calls, open/close/check, the heap tool's dump, and the thread caches that
 * every operation runs in. */
#ifndef PMALLOC_API_H
#define PMALLOC_API_H

#include "pm_ops.h"

/* ---- pmalloc.c ---- */
uint64_t pm_super_check(const pm_super *sb);

/* ---- tcache.c ---- */
pm_tcache *pm_tc_get(pm_heap *h);
void pm_tc_destructor(void *p);
void pm_tc_destroy_all(pm_heap *h);
void pm_tc_forget_all(pm_heap *h); /* free without touching the heap (crash) */
void pm_tc_rebind(pm_heap *h, pm_tcache *tc); /* return cached blocks, move to an arena of the thread's node */
void pm_numa_tick(pm_heap *h, pm_tcache *tc);               /* migration check, every N ops */

#endif
