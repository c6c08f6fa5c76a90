/* UPMEM SDK <stdio.h> (nearmem): DPU printf writes into the DPU's log,
 * which the host prints with dpu_log_read(dpu, stdout). The log holds
 * __stdout_buffer_size bytes (STDOUT_BUFFER_INIT(size); 1 MiB when the
 * program does not declare one) and is cleared at each launch. */
#ifndef _DPUSYSCORE_STDIO_H_
#define _DPUSYSCORE_STDIO_H_

#include <attributes.h>
#include <stddef.h>

#define STDOUT_BUFFER_INIT(size)                                                                                \
    _Static_assert((size >= 8) && (((size)&7) == 0), "stdout buffer size must be a multiple of 8 and > 0");     \
    unsigned char __dma_aligned __mram_noinit __stdout_buffer[(size)];                                          \
    const unsigned int __stdout_buffer_size = (size);

void __attribute__((format(printf, 1, 2))) printf(const char *restrict format, ...);
void puts(const char *str);
void putchar(int c);

#endif
