/* The DPU program "pim_cache" (dpu_kernel.c, plain UPMEM C) is embedded in this library
 * (nearmem_embed_dpu_program) and registered under NM_PIMC_PROGRAM, so that
 * dpu_load(set, NM_PIMC_PROGRAM, NULL) loads it. */
#include "nearmem/pim/host.h"
#include "nearmem/pim_cache_machine.h"

extern struct dpu_incbin_t nm_dpu_incbin_pim_cache;

/* Referenced by the transport, so that a static link keeps this file (and the program). */
int nm_pimc__kernel_anchor;

__attribute__((constructor)) static void nm_pimc__register_program(void)
{
    nm_pim_register_image(NM_PIMC_PROGRAM, &nm_dpu_incbin_pim_cache);
}
