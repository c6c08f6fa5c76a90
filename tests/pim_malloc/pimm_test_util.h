/* Helpers shared by the PIM-malloc tests: a host DPU with one allocator. */
#ifndef PIMM_TEST_UTIL_H
#define PIMM_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "nearmem/pim_malloc.h"
#include "nearmem/pim_malloc_host.h"

typedef struct tdpu {
    nm_pimm_host *host;
    nm_pimm_env env;
    nm_pimm *h;
    uint32_t heap_base, heap_size;
} tdpu;

static inline int tdpu_open_cfg(tdpu *d, nm_pimm_config *cfg)
{
    uint32_t meta = nm_pimm_mram_meta_bytes(cfg);
    if (!meta) return -1;
    uint32_t mram = cfg->heap_base + cfg->heap_size + meta;
    if (nm_pimm_host_create(&d->host, mram)) return -1;
    nm_pimm_host_env(d->host, &d->env);
    nm_pimm_host_set_tasklet(0);
    if (nm_pimm_create(&d->h, cfg, &d->env)) {
        nm_pimm_host_destroy(d->host);
        return -1;
    }
    d->heap_base = cfg->heap_base;
    d->heap_size = cfg->heap_size;
    return 0;
}

static inline int tdpu_open(tdpu *d, nm_pimm_variant v, uint32_t heap_size, unsigned tasklets)
{
    nm_pimm_config cfg;
    nm_pimm_config_default(&cfg, v, 4096);
    cfg.heap_size = heap_size;
    cfg.tasklets = tasklets;
    return tdpu_open_cfg(d, &cfg);
}

static inline void tdpu_close(tdpu *d)
{
    nm_pimm_destroy(d->h);
    nm_pimm_host_destroy(d->host);
}

static inline uint64_t tdpu_violations(tdpu *d)
{
    nm_pimm_host_counters c;
    nm_pimm_host_counters_get(d->host, &c);
    return c.dma_violations;
}

#endif
