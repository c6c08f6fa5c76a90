/* Shared test helpers: cmocka plus a few conveniences. */
#ifndef NM_TEST_H
#define NM_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

/* Test seed: NEARMEM_TEST_SEED overrides, so a failing randomized run can be replayed. */
static inline uint64_t nm_test_seed(uint64_t dflt)
{
    const char *s = getenv("NEARMEM_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

#define assert_near(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

#endif
