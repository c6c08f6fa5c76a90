/* UPMEM SDK <defs.h> (nearmem): me(), halt(), check_stack(). */
#ifndef DPUSYSCORE_DEFS_H
#define DPUSYSCORE_DEFS_H

#include <sysdef.h>
#include <dpufault.h>
#include <macro_utils.h>
#include <attributes.h>
#include <built_ins.h>

#if __STDC_VERSION__ >= 201112L
#define __ATTRIBUTE_NO_RETURN__ _Noreturn
#else
#define __ATTRIBUTE_NO_RETURN__
#endif

/* The calling tasklet's id, 0 .. NR_TASKLETS - 1. */
static inline sysname_t me(void) { return __nm_me(); }

/* Stops the DPU with a fault (FAULT_HALT on the hardware). */
__ATTRIBUTE_NO_RETURN__ static inline void halt(void) { __nm_fault("halt()"); }

/* Unused 32-bit words of the calling tasklet's stack: nearmem does not
 * measure native stack depth, so this reports the whole modeled stack. */
int check_stack(void);

#endif
