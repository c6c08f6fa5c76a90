/* PIM-malloc inside a kernel of the emulated PIM machine (nearmem/pim/dpu.h),
 * with the paper's API (Table II): initAllocator, pimMalloc, pimFree.
 *
 * In a kernel file, after DPU_PROGRAM(...):
 *
 *   NM_PIMM_DPU_ALLOCATOR();             // per-DPU allocator pointer + its mutex
 *   int DPU_MAIN(void) {
 *       if (me() == 0) initAllocator(32 << 20, NULL);   // or nm_pimm_dpu_init(&cfg)
 *       barrier_wait(&bar);
 *       mram_addr_t p = pimMalloc(256);  ...  pimFree(p);
 *   }
 *
 * WRAM: the macro reserves NM_PIMM_DPU_WRAM_BYTES (default 12 KiB: thread
 * caches for 24 tasklets plus the largest metadata store, the 4 KiB pinned
 * tree) in the kernel's WRAM globals, so the machine's 64 KiB budget counts
 * the allocator; init fails (NM_ENOMEM) if a configuration needs more. The
 * allocator object itself, with that state, is host memory owned by the DPU's
 * WRAM pointer (its DMA goes through WRAM stack buffers); it survives launches
 * and is freed by nm_pimm_dpu_teardown()
 * (call it from one tasklet in a last launch, or before dpu_load/dpu_free).
 * The heap starts at DPU_MRAM_HEAP_POINTER rounded up to 4 KiB; the
 * allocator's MRAM metadata follows the heap. pimFree never faults: errors
 * are returned by nm_pimm_free and counted in the statistics. */
#ifndef NEARMEM_PIM_MALLOC_DPU_H
#define NEARMEM_PIM_MALLOC_DPU_H

#include "nearmem/pim/dpu.h"
#include "nearmem/pim_malloc.h"

typedef struct nm_pimm_dpu_binding {
    mutex_id_t (*mutex)(void); /* the DPU's allocator mutex (resolved at each call) */
} nm_pimm_dpu_binding;

/* An environment over the running DPU: mram_read/write, nm_pim_charge, the
 * binding's mutex, me(), and the buddy cache as a modeled hardware unit. */
void nm_pimm_dpu_env(nm_pimm_env *env, const nm_pimm_dpu_binding *b);
/* The buddy cache's hardware unit (its instructions count in hw_unit_ops). */
extern const nm_pim_hw_unit nm_pimm_buddy_cache_unit;

/* nm_pimm_create, refused (NM_ENOMEM) when the allocator's WRAM state would
 * exceed `wram_budget` bytes. */
nm_err nm_pimm_create_checked(nm_pimm **out, const nm_pimm_config *cfg, const nm_pimm_env *env, uint32_t wram_budget);

/* Heap base for a kernel: DPU_MRAM_HEAP_POINTER rounded up to 4 KiB. */
static inline uint32_t nm_pimm_dpu_heap_base(void)
{
    return (nm_pim_mram_heap_pointer() + NM_PIMM_BLOCK - 1) & ~(NM_PIMM_BLOCK - 1);
}

#ifndef NM_PIMM_DPU_WRAM_BYTES
#define NM_PIMM_DPU_WRAM_BYTES 12288u
#endif

#define NM_PIMM_DPU_ALLOCATOR()                                                               \
    MUTEX_INIT(nm_pimm__mutex);                                                               \
    DPU_WRAM(uint64_t, nm_pimm__wram_reserved, [NM_PIMM_DPU_WRAM_BYTES / 8]);                 \
    DPU_WRAM(nm_pimm *, nm_pimm__heap) = NULL;                                                \
    static mutex_id_t nm_pimm__mutex_get(void) { return nm_pimm__mutex; }                     \
    static const nm_pimm_dpu_binding nm_pimm__binding = {nm_pimm__mutex_get};                 \
    /* Create this DPU's allocator (one tasklet). heap_base 0 = the default. */               \
    static inline nm_err nm_pimm_dpu_init(const nm_pimm_config *cfg)                          \
    {                                                                                         \
        nm_pimm_env env;                                                                      \
        nm_pimm_config c = *cfg;                                                              \
        if (!c.heap_base) c.heap_base = nm_pimm_dpu_heap_base();                              \
        nm_pimm_dpu_env(&env, &nm_pimm__binding);                                             \
        nm_pimm_destroy(nm_pimm__heap);                                                       \
        nm_pimm__heap = NULL;                                                                 \
        (void)nm_pimm__wram_reserved;                                                         \
        return nm_pimm_create_checked(&nm_pimm__heap, &c, &env, NM_PIMM_DPU_WRAM_BYTES);      \
    }                                                                                         \
    static inline nm_pimm *nm_pimm_dpu_heap(void) { return nm_pimm__heap; }                   \
    static inline void nm_pimm_dpu_teardown(void)                                             \
    {                                                                                         \
        nm_pimm_destroy(nm_pimm__heap);                                                       \
        nm_pimm__heap = NULL;                                                                 \
    }                                                                                         \
    /* Paper, Table II. size_classes: up to 8 ascending sizes ending with 0, or NULL for      \
     * the paper's 16 B..2 KiB. PIM-malloc-SW with NR_TASKLETS thread caches. */              \
    static inline void initAllocator(uint32_t heap_size, const uint32_t *size_classes)       \
    {                                                                                         \
        nm_pimm_config c;                                                                     \
        nm_pimm_config_default(&c, NM_PIMM_SW, 0);                                            \
        c.heap_size = heap_size;                                                              \
        c.tasklets = NR_TASKLETS;                                                             \
        for (unsigned i = 0; size_classes && i < NM_PIMM_MAX_CLASSES && size_classes[i]; i++) \
            c.classes[c.nclasses++] = size_classes[i];                                        \
        if (nm_pimm_dpu_init(&c) != NM_OK) nm_pim_fault(nm_last_errmsg());                    \
    }                                                                                         \
    static inline mram_addr_t pimMalloc(uint32_t size) { return nm_pimm_malloc(nm_pimm__heap, size); } \
    static inline void pimFree(mram_addr_t ptr) { (void)nm_pimm_free(nm_pimm__heap, ptr); }   \
    struct nm_pimm__allocator_semicolon

#endif
