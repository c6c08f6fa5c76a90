#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "demo_internal.h"

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
    if (!d->tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(d->tmpdir, sizeof d->tmpdir, "%s/nearmem-demo-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(d->tmpdir)) {
            d->tmpdir[0] = '\0';
            return NULL;
        }
    }
    return d->tmpdir;
}

unsigned long long nm_demo_seed(const nm_demo *d) { return d->seed; }
const char *nm_demo_self(const nm_demo *d) { return d->self; }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void nm_demo_cleanup(nm_demo *d)
{
    if (d->tmpdir[0]) nftw(d->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    d->tmpdir[0] = '\0';
}
