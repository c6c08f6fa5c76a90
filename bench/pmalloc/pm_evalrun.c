/* nearmem-pmalloc-evalrun: runs one PMAlloc/PMDK measurement of the
 * evaluation kit (pm_eval.h) in this process and prints its result line.
 * The suites start it instead of a forked child when the environment must be
 * in place before libpmem's load-time constructor reads it (PMEM_NO_FLUSH=1),
 * or under gdb to count flush and fence instructions (suite pmalloc-fences).
 * Usage: nearmem-pmalloc-evalrun work=N kind=N threads=N ... dir=PATH */
#include <stdio.h>
#include <unistd.h>

#include "pm_eval.h"

int main(int argc, char **argv)
{
    pe_params p;
    if (pe_params_parse(argc - 1, argv + 1, &p)) {
        fprintf(stderr, "usage: %s work=N kind=N threads=N n=N iters=N ops=N seed=N pool=BYTES [prefault=0|1] "
                        "[eadr=0|1] [no_morph=0|1] [mark=0|1] dir=PATH\n", argv[0]);
        return 2;
    }
    pe_force_pmem();
    pe_result r;
    pe_run_inproc(&p, &r);
    pe_result_print(&r);
    _exit(0); /* no clean close, as in the forked child */
}
