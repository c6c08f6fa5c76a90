/* Helpers for the PMAlloc tests: temporary heap directories. */
#ifndef PM_TESTUTIL_H
#define PM_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nearmem/pmalloc.h"

static inline void pmt_tmpdir(char *buf, size_t n, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, n, "%s/nm-pmalloc-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(buf)) abort();
}

/* The heap's main file and its node files (heaps created with several nodes). */
static inline void pmt_rmheap(const char *dir)
{
    (void)pmalloc_remove(dir, NULL);
}

static inline void pmt_rmdir(const char *dir)
{
    pmt_rmheap(dir);
    rmdir(dir);
}

static inline pmalloc_options pmt_opts(size_t size, pmalloc_model m, pmalloc_persist_mode pm)
{
    pmalloc_options o;
    pmalloc_options_default(&o);
    o.size = size;
    o.model = m;
    o.persist = pm;
    o.eadr = PMALLOC_EADR_OFF;
    o.narenas = 2;
    return o;
}

#endif
