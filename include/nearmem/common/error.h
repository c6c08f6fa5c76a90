/* Error codes shared by every nearmem component.
 *
 * Functions return nm_err (0 = NM_OK). A function that fails may also leave a
 * detailed, human-readable message for the calling thread (nm_last_errmsg),
 * so that the code stays machine-checkable and the message stays specific. */
#ifndef NEARMEM_COMMON_ERROR_H
#define NEARMEM_COMMON_ERROR_H

typedef enum nm_err {
    NM_OK = 0,
    NM_EINVAL,      /* invalid argument */
    NM_ENOMEM,      /* out of memory (heap, MRAM, host) */
    NM_ERANGE,      /* size or index out of the allowed range (0, too large) */
    NM_EALIGN,      /* misaligned address or size */
    NM_EBADFREE,    /* free of an address that was not returned by the allocator */
    NM_EDOUBLEFREE, /* free of an address that is already free */
    NM_ECORRUPT,    /* corrupt metadata or persistent image */
    NM_EFORMAT,     /* not a nearmem file, or a version we do not read */
    NM_EIO,         /* an operating-system I/O call failed (see errno in the message) */
    NM_EFAULT,      /* an emulated device stopped on a hardware-rule violation */
    NM_ESTATE,      /* call not valid in the object's current state */
    NM_ENOTSUP,     /* not supported in this build or configuration */
    NM_EEXIST,      /* already exists */
    NM_ENOENT,      /* does not exist (file, symbol, kernel, suite) */
    NM_EBUSY,       /* resource busy */
    NM_EOVERFLOW,   /* arithmetic overflow in a size computation */
    NM_ETIMEOUT,    /* an operation did not complete in time */
    NM_ERR_COUNT
} nm_err;

/* Short description of a code ("invalid argument"); never NULL. */
const char *nm_strerror(nm_err e);
/* Symbolic name of a code ("NM_EINVAL"); never NULL. */
const char *nm_errname(nm_err e);

/* Record a detailed message for the calling thread and return `e`, so that
 * `return nm_fail(NM_EINVAL, "size %zu is 0", n);` reads naturally. */
nm_err nm_fail(nm_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last message set by nm_fail ("" if none). */
const char *nm_last_errmsg(void);
void nm_clear_errmsg(void);

#endif
