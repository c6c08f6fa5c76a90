/* PIM-malloc's environment on the emulated PIM machine (nearmem/pim/dpu.h). */
#include "nearmem/pim_malloc_dpu.h"

/* The buddy cache (paper Sec. IV-B): its state is kept by the allocator
 * object of the DPU; the unit is declared so that its instructions are issued
 * and counted as hardware-unit operations of 1 cycle (Sec. V: "a buddy cache
 * access latency of 1 PIM core cycle", no latency beyond the pipeline). */
const nm_pim_hw_unit nm_pimm_buddy_cache_unit = {.name = "pim_malloc.buddy_cache", .state_size = 8, .reset = NULL};

static void d_read(void *ctx, uint32_t addr, void *wram, uint32_t n)
{
    (void)ctx;
    nm_pim_mram_read(addr, wram, n);
}

static void d_write(void *ctx, const void *wram, uint32_t addr, uint32_t n)
{
    (void)ctx;
    nm_pim_mram_write(wram, addr, n);
}

static void d_charge(void *ctx, uint32_t n)
{
    (void)ctx;
    nm_pim_charge(n);
}

static void d_lock(void *ctx) { nm_pim_mutex_lock(((const nm_pimm_dpu_binding *)ctx)->mutex()); }
static void d_unlock(void *ctx) { nm_pim_mutex_unlock(((const nm_pimm_dpu_binding *)ctx)->mutex()); }

static unsigned d_me(void *ctx)
{
    (void)ctx;
    return nm_pim_me();
}

static void d_hw(void *ctx, uint32_t n)
{
    (void)ctx;
    for (uint32_t i = 0; i < n; i++) nm_pim_hw_exec(&nm_pimm_buddy_cache_unit, 0);
}

void nm_pimm_dpu_env(nm_pimm_env *env, const nm_pimm_dpu_binding *b)
{
    env->ctx = (void *)b;
    env->mram_read = d_read;
    env->mram_write = d_write;
    env->charge = d_charge;
    env->lock = d_lock;
    env->unlock = d_unlock;
    env->me = d_me;
    env->hw_op = d_hw;
}

nm_err nm_pimm_create_checked(nm_pimm **out, const nm_pimm_config *cfg, const nm_pimm_env *env, uint32_t wram_budget)
{
    nm_err e = nm_pimm_create(out, cfg, env);
    if (e) return e;
    nm_pimm_stats st;
    nm_pimm_get_stats(*out, &st);
    if (st.wram_bytes > wram_budget) {
        nm_pimm_destroy(*out);
        *out = NULL;
        return nm_fail(NM_ENOMEM, "pim_malloc: needs %u bytes of WRAM, the kernel reserved %u (NM_PIMM_DPU_WRAM_BYTES)",
                       st.wram_bytes, wram_budget);
    }
    return NM_OK;
}
