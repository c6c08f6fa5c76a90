/* SEL: select the int64 elements that satisfy pred(), keeping their order
 * (a stream compaction). Shared by the host and the DPU code. */
#ifndef SEL_COMMON_H
#define SEL_COMMON_H

#include <stdbool.h>
#include <stdint.h>

typedef int64_t T;

typedef struct {
    uint32_t count;         /* elements of this DPU */
    uint32_t transfer_size; /* bytes reserved for the input in MRAM; the output follows */
} dpu_arguments_t;

typedef struct {
    uint32_t kept;          /* elements selected on this DPU */
    uint32_t reserved;
    uint64_t cycles;
} dpu_results_t;

/* The predicate: keep the even values. */
bool pred(const T x)
{
    return (x % 2) == 0;
}

#ifndef BL
#define BL 10
#endif
#define BLOCK_SIZE_LOG2 BL
#define BLOCK_SIZE (1 << BLOCK_SIZE_LOG2)
#define BLOCK_ELEMS (BLOCK_SIZE / sizeof(T))

#define divceil(n, m) (((n) + (m) - 1) / (m))
#define roundup(n, m) (divceil(n, m) * (m))

#endif
