/* UPMEM SDK <handshake.h> (nearmem). handshake_notify() stops the caller
 * until a tasklet waits for it; handshake_wait_for(n) stops the caller until
 * tasklet n notifies, and returns EALREADY (errno too) at once if another
 * tasklet already waits for n. */
#ifndef DPUSYSCORE_HANDSHAKE_H
#define DPUSYSCORE_HANDSHAKE_H

#include <sysdef.h>
#include "_nearmem_rt.h"

static inline void handshake_notify(void) { __nm_handshake_notify(); }
static inline int handshake_wait_for(sysname_t notifier) { return __nm_handshake_wait_for(notifier); }

#endif
