#include "nearmem/common/error.h"

#include <stdarg.h>
#include <stdio.h>

static const struct {
    const char *name;
    const char *text;
} k_errors[NM_ERR_COUNT] = {
    [NM_OK] = {"NM_OK", "success"},
    [NM_EINVAL] = {"NM_EINVAL", "invalid argument"},
    [NM_ENOMEM] = {"NM_ENOMEM", "out of memory"},
    [NM_ERANGE] = {"NM_ERANGE", "size or index out of range"},
    [NM_EALIGN] = {"NM_EALIGN", "misaligned address or size"},
    [NM_EBADFREE] = {"NM_EBADFREE", "free of an address that was not allocated"},
    [NM_EDOUBLEFREE] = {"NM_EDOUBLEFREE", "double free"},
    [NM_ECORRUPT] = {"NM_ECORRUPT", "corrupt metadata"},
    [NM_EFORMAT] = {"NM_EFORMAT", "unrecognized format or version"},
    [NM_EIO] = {"NM_EIO", "I/O error"},
    [NM_EFAULT] = {"NM_EFAULT", "device fault"},
    [NM_ESTATE] = {"NM_ESTATE", "operation not valid in the current state"},
    [NM_ENOTSUP] = {"NM_ENOTSUP", "not supported"},
    [NM_EEXIST] = {"NM_EEXIST", "already exists"},
    [NM_ENOENT] = {"NM_ENOENT", "not found"},
    [NM_EBUSY] = {"NM_EBUSY", "resource busy"},
    [NM_EOVERFLOW] = {"NM_EOVERFLOW", "arithmetic overflow"},
    [NM_ETIMEOUT] = {"NM_ETIMEOUT", "timed out"},
};

const char *nm_strerror(nm_err e)
{
    if ((unsigned)e >= NM_ERR_COUNT) return "unknown error";
    return k_errors[e].text;
}

const char *nm_errname(nm_err e)
{
    if ((unsigned)e >= NM_ERR_COUNT) return "NM_E?";
    return k_errors[e].name;
}

static _Thread_local char t_msg[512];

nm_err nm_fail(nm_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_msg, sizeof t_msg, fmt, ap);
    va_end(ap);
    return e;
}

const char *nm_last_errmsg(void) { return t_msg; }
void nm_clear_errmsg(void) { t_msg[0] = '\0'; }
