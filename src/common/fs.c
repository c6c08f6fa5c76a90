#include "nearmem/common/fs.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nm_err nm_tmpdir_create(char *buf, size_t bufsize, const char *prefix)
{
    const char *base = getenv("TMPDIR");
    int n = snprintf(buf, bufsize, "%s/%s-XXXXXX", base && *base ? base : "/tmp", prefix);
    if (n < 0 || (size_t)n >= bufsize) return nm_fail(NM_ERANGE, "temporary directory path too long");
    if (!mkdtemp(buf)) {
        nm_err e = nm_fail(NM_EIO, "mkdtemp %s: %s", buf, strerror(errno));
        buf[0] = '\0';
        return e;
    }
    return NM_OK;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

nm_err nm_rmtree(const char *path)
{
    if (!path || !*path) return nm_fail(NM_EINVAL, "nm_rmtree: empty path");
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return nm_fail(NM_EIO, "removing %s: %s", path, strerror(errno));
    return NM_OK;
}
