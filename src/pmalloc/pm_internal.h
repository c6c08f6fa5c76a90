/* PMAlloc internals, all layers: for the tests and tools that look inside a
 * heap. A file of src/pmalloc includes its own layer's header instead
 * (docs/pmalloc.md, "Code layout"; tests/pmalloc/check_layers.cmake). */
#ifndef PMALLOC_INTERNAL_H
#define PMALLOC_INTERNAL_H

#include "pm_api.h"

#endif
