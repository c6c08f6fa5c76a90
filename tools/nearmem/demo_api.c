#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "demo_internal.h"
#include "nearmem/common/fs.h"

void nm_demo_say(nm_demo *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("    ", d->out);
    vfprintf(d->out, fmt, ap);
    fputc('\n', d->out);
    va_end(ap);
    fflush(d->out);
}

const char *nm_demo_tmpdir(nm_demo *d)
{
    if (!d->tmpdir[0] && nm_tmpdir_create(d->tmpdir, sizeof d->tmpdir, "nearmem-demo") != NM_OK) return NULL;
    return d->tmpdir;
}

unsigned long long nm_demo_seed(const nm_demo *d) { return d->seed; }
const char *nm_demo_self(const nm_demo *d) { return d->self; }

void nm_demo_cleanup(nm_demo *d)
{
    if (d->tmpdir[0]) nm_rmtree(d->tmpdir);
    d->tmpdir[0] = '\0';
}
