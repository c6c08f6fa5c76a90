#ifndef NEARMEM_DEMO_INTERNAL_H
#define NEARMEM_DEMO_INTERNAL_H
#include <stdio.h>
#include "nearmem/demo.h"

struct nm_demo {
    FILE *out;
    char tmpdir[256];
    unsigned long long seed;
    const char *self;
};

void nm_demo_cleanup(nm_demo *d);
#endif
