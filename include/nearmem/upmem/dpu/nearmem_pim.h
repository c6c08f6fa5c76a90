/* nearmem's own additions for DPU programs built by nearmem-dpu-cc: not part
 * of the UPMEM SDK. A portable kernel guards their use with
 *     #ifdef __NEARMEM_DPU__ ... #endif
 * so the same file builds with UPMEM's compiler.
 *
 *   nm_pim_charge(n)    charge n extra DPU instructions to the calling tasklet
 *                       (compute is costed by nearmem-dpu-cc itself; this is
 *                       an escape hatch for modeled hardware units)
 *   nm_pim_cycle()      the DPU's current modeled cycle
 *   nm_pim_fault(why)   stop the DPU with a fault that says why
 *   hardware units      modeled ISA extensions (docs: "Modeled hardware units")
 *   NM_PIM_HW_MODEL     marks a function that models hardware (the body of a
 *                       unit instruction): nearmem-dpu-cc does not cost its
 *                       code, and calls to it cost nothing beyond what it
 *                       charges with nm_pim_hw_exec (docs: "Costing")
 *   NM_PIM_UNCOSTED     the same mark for the emulator's own instrumentation
 *                       (statistics a production kernel would not keep) */
#ifndef NEARMEM_UPMEM_DPU_NEARMEM_PIM_H
#define NEARMEM_UPMEM_DPU_NEARMEM_PIM_H

#include <stddef.h>
#include <stdint.h>

#include "_nearmem_rt.h"

/* The annotation is read by nearmem-dpu-cc's pass plugin (src/pim/dpucc). */
#define NM_PIM_HW_MODEL __attribute__((annotate("nearmem.hw_model"), noinline))
#define NM_PIM_UNCOSTED NM_PIM_HW_MODEL

void nm_pim_charge(uint32_t instructions);
uint64_t nm_pim_cycle(void);
__attribute__((noreturn)) void nm_pim_fault(const char *why);

/* Same layout as the host's nm_pim_hw_unit (nearmem/pim/types.h). */
typedef struct nm_pim_hw_unit {
    const char *name;
    size_t state_size;
    void (*reset)(void *state);
} nm_pim_hw_unit;
void *nm_pim_hw_state(const nm_pim_hw_unit *unit);
void nm_pim_hw_exec(const nm_pim_hw_unit *unit, uint32_t extra_cycles);
__attribute__((noreturn)) void nm_pim_hw_refuse(const nm_pim_hw_unit *unit, const char *why);

#endif
