/* Temporary directories for tests, demos and benchmarks (heap files, pools). */
#ifndef NEARMEM_COMMON_FS_H
#define NEARMEM_COMMON_FS_H

#include <stddef.h>
#include "nearmem/common/error.h"

/* Create a fresh private directory "$TMPDIR/<prefix>-XXXXXX" (or /tmp) and
 * write its path to buf. */
nm_err nm_tmpdir_create(char *buf, size_t bufsize, const char *prefix);
/* Remove a directory tree (files, subdirectories; links are not followed). */
nm_err nm_rmtree(const char *path);

#endif
