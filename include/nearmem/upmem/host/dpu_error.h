/* UPMEM SDK <dpu_error.h> for host programs that run on nearmem's emulated PIM
 * machine: the SDK's host API is declared in nearmem/pim/host.h (see
 * docs/pim-machine.md, "API against the SDK"). `dpu-pkg-config --cflags dpu`
 * puts this directory on the include path. */
#ifndef NEARMEM_UPMEM_HOST_DPU_ERROR_H
#define NEARMEM_UPMEM_HOST_DPU_ERROR_H

#include "nearmem/pim/host.h"

#endif
