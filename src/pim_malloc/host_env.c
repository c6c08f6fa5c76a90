/* Host-memory DPU stand-in for PIM-malloc (see nearmem/pim_malloc_host.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/pim_malloc_host.h"

struct nm_pimm_host {
    uint8_t *mram;
    uint32_t size;
    pthread_mutex_t mu;
    pthread_mutex_t dma; /* one DMA engine per DPU: transfers do not overlap */
    uint64_t dma_reads, dma_writes, dma_read_bytes, dma_write_bytes, violations, locks;
};

static _Thread_local unsigned tl_tasklet;

void nm_pimm_host_set_tasklet(unsigned id) { tl_tasklet = id; }

nm_err nm_pimm_host_create(nm_pimm_host **out, uint32_t mram_bytes)
{
    *out = NULL;
    nm_pimm_host *d = calloc(1, sizeof *d);
    if (!d) return nm_fail(NM_ENOMEM, "host DPU");
    d->mram = calloc(1, mram_bytes);
    if (!d->mram) {
        free(d);
        return nm_fail(NM_ENOMEM, "host DPU: %u bytes of MRAM", mram_bytes);
    }
    d->size = mram_bytes;
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->dma, NULL);
    *out = d;
    return NM_OK;
}

void nm_pimm_host_destroy(nm_pimm_host *d)
{
    if (!d) return;
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->dma);
    free(d->mram);
    free(d);
}

uint8_t *nm_pimm_host_mram(nm_pimm_host *d) { return d->mram; }
uint32_t nm_pimm_host_mram_size(const nm_pimm_host *d) { return d->size; }

static int dma_ok(nm_pimm_host *d, uint32_t addr, uint32_t n)
{
    if (n < 8 || n > 2048 || n % 8 || addr % 8 || (uint64_t)addr + n > d->size) {
        __atomic_fetch_add(&d->violations, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return 1;
}

static void h_read(void *ctx, uint32_t addr, void *wram, uint32_t n)
{
    nm_pimm_host *d = ctx;
    if (!dma_ok(d, addr, n)) return;
    pthread_mutex_lock(&d->dma);
    memcpy(wram, d->mram + addr, n);
    pthread_mutex_unlock(&d->dma);
    __atomic_fetch_add(&d->dma_reads, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->dma_read_bytes, n, __ATOMIC_RELAXED);
}

static void h_write(void *ctx, const void *wram, uint32_t addr, uint32_t n)
{
    nm_pimm_host *d = ctx;
    if (!dma_ok(d, addr, n)) return;
    pthread_mutex_lock(&d->dma);
    memcpy(d->mram + addr, wram, n);
    pthread_mutex_unlock(&d->dma);
    __atomic_fetch_add(&d->dma_writes, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->dma_write_bytes, n, __ATOMIC_RELAXED);
}

static void h_lock(void *ctx)
{
    nm_pimm_host *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->locks++;
}

static void h_unlock(void *ctx)
{
    nm_pimm_host *d = ctx;
    pthread_mutex_unlock(&d->mu);
}

static unsigned h_me(void *ctx)
{
    (void)ctx;
    return tl_tasklet;
}

void nm_pimm_host_env(nm_pimm_host *d, nm_pimm_env *env)
{
    env->ctx = d;
    env->mram_read = h_read;
    env->mram_write = h_write;
    env->lock = h_lock;
    env->unlock = h_unlock;
    env->me = h_me;
    env->hw_op = NULL;
}

void nm_pimm_host_counters_get(nm_pimm_host *d, nm_pimm_host_counters *o)
{
    o->dma_reads = __atomic_load_n(&d->dma_reads, __ATOMIC_RELAXED);
    o->dma_writes = __atomic_load_n(&d->dma_writes, __ATOMIC_RELAXED);
    o->dma_read_bytes = __atomic_load_n(&d->dma_read_bytes, __ATOMIC_RELAXED);
    o->dma_write_bytes = __atomic_load_n(&d->dma_write_bytes, __ATOMIC_RELAXED);
    o->dma_violations = __atomic_load_n(&d->violations, __ATOMIC_RELAXED);
    pthread_mutex_lock(&d->mu);
    o->locks = d->locks;
    pthread_mutex_unlock(&d->mu);
}
