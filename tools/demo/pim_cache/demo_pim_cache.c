/* Demo step: PIM-CACHE on the emulated machine. 64 DPUs get 512 KiB each, twice: the first
 * copy sends every distinct block, the second only the offset lists. The DPUs then read
 * both copies block by block through the offsets (checksum kernel) and the host checks
 * the sums. Transfer times are modeled; DRM times are this host's wall time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nearmem/common.h"
#include "nearmem/demo.h"
#include "nearmem/pim_cache.h"
#include "nearmem/pim_cache_machine.h"

int nm_demo_pim_cache(nm_demo *d)
{
    enum { DPUS = 64, PER = 512 * 1024 };
    struct dpu_set_t set;
    nm_pimc_transport t = {0};
    nm_pimc *c = NULL;
    uint8_t *data = malloc((size_t)DPUS * PER);
    const void *bufs[DPUS];
    size_t lens[DPUS];
    uint64_t sums[DPUS];
    if (!data) return nm_fail(NM_ENOMEM, "demo buffers");
    nm_rng r;
    nm_rng_seed(&r, nm_demo_seed(d));
    /* Random 32-bit values; a quarter of each DPU's blocks repeat one of 8 blocks. */
    uint8_t pool[8][1024];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 1024; j++) pool[i][j] = (uint8_t)nm_rng_u64(&r);
    for (size_t at = 0; at < (size_t)DPUS * PER; at += 1024) {
        if (nm_rng_below(&r, 4) == 0)
            memcpy(data + at, pool[nm_rng_below(&r, 8)], 1024);
        else
            for (int j = 0; j < 1024; j += 8) {
                uint64_t v = nm_rng_u64(&r);
                memcpy(data + at + j, &v, 8);
            }
    }
    for (int i = 0; i < DPUS; i++) {
        bufs[i] = data + (size_t)i * PER;
        lens[i] = PER;
    }
    nm_err e = NM_OK;
    if (dpu_alloc(DPUS, NULL, &set) != DPU_OK) {
        free(data);
        return nm_fail(NM_ENOMEM, "dpu_alloc(%d)", DPUS);
    }
    if (dpu_load(set, NM_PIMC_PROGRAM, NULL) != DPU_OK) e = nm_fail(NM_ENOENT, "dpu_load(%s)", NM_PIMC_PROGRAM);
    if (!e) e = nm_pimc_machine_transport(set, 0, 16u << 20, &t);
    nm_pimc_options o;
    nm_pimc_options_default(&o);
    o.fallback_threshold = 0; /* show CAC itself on the first copy too */
    if (!e) e = nm_pimc_create(&t, &o, &c);
    if (!e)
        nm_demo_say(d, "%d DPUs x %d KiB, 1 KiB blocks, XXH64, BRB %llu KiB of a 16 MiB region per DPU", DPUS, PER / 1024,
                    (unsigned long long)(nm_pimc_brb_size(c) / 1024));
    nm_pim_cost cost;
    double naive = NAN; /* what dpu_copy_to of the whole buffers would take, modeled */
    if (!e && nm_pim_get_cost(set, &cost) == DPU_OK) naive = (double)DPUS * PER / (cost.bw_serial_to_dpu * 1e9);
    for (unsigned k = 0; k < 2 && !e; k++) {
        e = nm_pimc_copy(c, k, bufs, lens);
        if (e) break;
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        nm_demo_say(d,
                    "copy %u: dedup %5.1f%%, sent %6.2f MiB of blocks + %3.0f KiB of offsets; modeled xfer %7.2f ms "
                    "+ host DRM %5.2f ms (plain serial copy: %.0f ms modeled)",
                    k + 1, st.last_dedup_pct, (double)st.last_sent_bytes / (1 << 20),
                    (double)st.last_meta_bytes / 1024, st.last_xfer_modeled_ns * 1e-6, (double)st.last_drm_ns * 1e-6,
                    naive * 1e3);
    }
    for (unsigned k = 0; k < 2 && !e; k++) {
        e = nm_pimc_machine_sum(&t, (uint32_t)nm_pimc_slot_desc(c, k), sums);
        for (int i = 0; i < DPUS && !e; i++)
            if (sums[i] != nm_pimc_checksum(bufs[i], lens[i]))
                e = nm_fail(NM_ECORRUPT, "DPU %d read a different buffer through slot %u", i, k);
    }
    if (!e) nm_demo_say(d, "every DPU read both copies back through its offset list: checksums match the host's");
    nm_pimc_destroy(c);
    c = NULL;
    /* The drop-in for the parallel push, on a registered (write-tracked) buffer: copied,
     * copied again unchanged, then again after one write. */
    nm_pimc_options_default(&o);
    o.parallel = true;
    nm_pimc_reg *reg = NULL;
    if (!e) e = nm_pimc_create(&t, &o, &c);
    if (!e) e = nm_pimc_register(c, data, (size_t)DPUS * PER, &reg);
    const uint32_t dest = 16u << 20; /* MRAM heap offset after the cache's region */
    for (unsigned k = 0; k < 3 && !e; k++) {
        if (k == 2) data[5 * PER + 12345] ^= 1;
        struct dpu_set_t dpu;
        uint32_t i;
        DPU_FOREACH(set, dpu, i) nm_pimc_prepare_xfer(c, dpu, (void *)(uintptr_t)bufs[i]);
        if (nm_pimc_push_xfer(c, set, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, dest, PER, DPU_XFER_DEFAULT)) {
            e = nm_fail(NM_EIO, "nm_pimc_push_xfer: %s", nm_last_errmsg());
            break;
        }
        nm_pimc_stats st;
        nm_pimc_get_stats(c, &st);
        nm_demo_say(d,
                    "push_xfer %u (%s): %s, %.2f MiB of blocks sent, %.1f MiB known unwritten; host %.2f ms + "
                    "modeled xfer %.2f ms, scheduled total %.2f ms (a plain push: %.2f ms modeled)",
                    k + 1, k == 0 ? "new" : k == 1 ? "unchanged" : "one byte written", st.last_mode ? "plain push" : "CAC",
                    (double)st.last_sent_bytes / (1 << 20), (double)st.last_clean_bytes / (1 << 20),
                    (double)st.last_host_crit_ns * 1e-6, st.last_xfer_modeled_ns * 1e-6, st.last_total_crit_ns * 1e-6,
                    (double)DPUS * PER / (cost.bw_rank_to_dpu * 1e9) * 1e3);
        e = nm_pimc_machine_sum(&t, nm_pimc_machine_addr(&t, dest), sums);
        for (int i2 = 0; i2 < DPUS && !e; i2++)
            if (sums[i2] != nm_pimc_checksum(bufs[i2], lens[i2]))
                e = nm_fail(NM_ECORRUPT, "DPU %d read a different buffer through the push_xfer slot", i2);
    }
    if (!e) nm_demo_say(d, "the DPUs read every push_xfer copy back right through the slot at the destination");
    nm_pimc_destroy(c);
    if (t.ctx) nm_pimc_machine_transport_free(&t);
    dpu_free(set);
    free(data);
    return e;
}
