/* Everything of nearmem's common core in one include. */
#ifndef NEARMEM_COMMON_H
#define NEARMEM_COMMON_H
#include "nearmem/common/util.h"
#include "nearmem/common/error.h"
#include "nearmem/common/bitmap.h"
#include "nearmem/common/sizeclass.h"
#include "nearmem/common/prng.h"
#include "nearmem/common/timer.h"
#include "nearmem/common/stats.h"
#include "nearmem/common/json.h"
#include "nearmem/common/fs.h"
#endif
