/* Shared by the host and the DPU program, as in PrIM's trees. It defines a
 * function and a variable (not static): both programs get their own copy, in
 * one process, with no clash. */
#ifndef COMMON_H
#define COMMON_H

#include <stdint.h>

#define BLOCK_SIZE 1024
typedef int32_t T;

typedef struct {
    uint32_t size;          /* bytes of A on this DPU */
    uint32_t transfer_size; /* bytes transferred (padded) */
} dpu_arguments_t;

int checksum_seed = 17;
uint32_t divceil(uint32_t n, uint32_t m) { return (n + m - 1) / m; }

#endif
