/* Shared by the example drivers: fill a run report after the launch and
 * the copy back. tot0 = totals before the launch (inputs sent). */
#ifndef NM_PIM_EXAMPLES_REPORT_H
#define NM_PIM_EXAMPLES_REPORT_H

#include "nearmem/common/timer.h"
#include "nearmem/pim/examples.h"

static inline void nm_pim__fill_report(struct dpu_set_t set, const nm_pim_totals *tot0, uint64_t t0_ns,
                                       nm_pim_run_report *rep)
{
    if (!rep)
        return;
    nm_pim_totals tot;
    nm_pim_launch_stats ls;
    nm_pim_get_totals(set, &tot);
    nm_pim_last_launch(set, &ls);
    rep->modeled_kernel_s = ls.modeled_seconds;
    rep->modeled_xfer_to_s = tot0->modeled_xfer_seconds;
    rep->modeled_xfer_from_s = tot.modeled_xfer_seconds - tot0->modeled_xfer_seconds;
    rep->max_cycles = ls.max_cycles;
    rep->instructions = ls.instructions;
    rep->host_s = nm_ns_to_s(nm_now_ns() - t0_ns);
    rep->host_kernel_s = ls.host_seconds;
}

#endif
