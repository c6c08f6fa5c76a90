/* The SDK's DPU-side surface in plain UPMEM C, one mode per launch (set by
 * the host in `mode`), results in `res`. Built with NR_TASKLETS=8. */
#include <alloc.h>
#include <assert.h>
#include <atomic_bit.h>
#include <barrier.h>
#include <built_ins.h>
#include <defs.h>
#include <errno.h>
#include <handshake.h>
#include <mram.h>
#include <mram_unaligned.h>
#include <mutex.h>
#include <perfcounter.h>
#include <sem.h>
#include <seqread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sdk_modes.h"

STDOUT_BUFFER_INIT(256)

__host uint32_t mode;
__host uint32_t arg;
__host int64_t res[32];

__mram_noinit uint8_t area[SDK_AREA]; /* scratch MRAM, filled by the host */
__mram uint64_t init_words[4] = {0x1111, 0x2222, 0x3333, 0x4444};

BARRIER_INIT(bar, NR_TASKLETS);
SEMAPHORE_INIT(sem, 0);
MUTEX_INIT(mtx);
/* HST-L's pattern: atomic bits and barriers initialised at run time, and
 * mutex ids left zero (bit 0 is a valid mutex). */
ATOMIC_BIT_INIT(group_bits)[2];
barrier_t groups[2];
mutex_id_t zero_mutex[2];
uint32_t shared_count;
uint32_t order[NR_TASKLETS];
uint32_t order_pos;

typedef struct {
    uint8_t a;
    uint16_t b;
    uint32_t c;
    double d;
} item_t;

static void mode_seqread(unsigned t)
{
    if (t != 0)
        return;
    seqreader_t sr;
    uint8_t *p = seqread_init(seqread_alloc(), &area[arg], &sr);
    int64_t sum = 0;
    for (uint32_t i = 0; i < 3000; i++) {
        sum += *p;
        p = seqread_get(p, 1, &sr);
    }
    res[0] = sum;
    res[1] = (int64_t)(uintptr_t)seqread_tell(p, &sr) - (int64_t)(uintptr_t)&area[0];
    uint32_t *q = seqread_seek(&area[64], &sr);
    res[2] = *q;
}

static void mode_unaligned(unsigned t)
{
    if (t != 0)
        return;
    uint8_t *buf = mem_alloc(64);
    uint8_t *p = mram_read_unaligned(&area[arg], buf, 13);
    int64_t sum = 0;
    for (int i = 0; i < 13; i++)
        sum += p[i];
    res[0] = sum;
    uint8_t *src = mem_alloc(64);
    for (int i = 0; i < 32; i++)
        src[i] = (uint8_t)(0xA0 + i);
    mram_write_unaligned(src + (arg & 7), &area[1024 + arg], 5); /* same alignment mod 8 */
}

static void mode_dma_hw(unsigned t)
{
    if (t != 0)
        return;
    uint64_t *buf = mem_alloc(4096);
    uint32_t base = (uint32_t)(uintptr_t)&area[0];
    /* Misaligned MRAM address: the DMA ignores the low 3 bits. */
    mram_read((__mram_ptr void *)(base + 8 + 4), buf, 8);
    res[0] = (int64_t)buf[0];
    /* Misaligned WRAM address: also aligned down. */
    buf[2] = 0;
    mram_read((__mram_ptr void *)(base + 16), (uint8_t *)&buf[2] + 3, 8);
    res[1] = (int64_t)buf[2];
    /* 12 bytes: the length field makes it 8. */
    buf[4] = buf[5] = 0;
    mram_read((__mram_ptr void *)(base + 24), &buf[4], arg + 12);
    res[2] = (int64_t)buf[5];
    /* A 0-byte write (SEL issues one) writes 2048 bytes. */
    for (int i = 0; i < 256; i++)
        buf[i] = 0xC0FFEE00u + (uint64_t)i;
    mram_write(buf, (__mram_ptr void *)(base + 2048), arg);
}

static void mode_direct(unsigned t)
{
    if (t != 0)
        return;
    __mram_ptr uint8_t *b = &area[4096];
    b[1] = 0x12;                                   /* byte store: read-modify-write */
    *(__mram_ptr uint16_t *)(b + 2) = 0x3456;
    *(__mram_ptr uint32_t *)(b + 6) = 0x789abcde; /* crosses an 8-byte boundary */
    *(__mram_ptr uint64_t *)(b + 16) = 0x0123456789abcdefull;
    *(__mram_ptr double *)(b + 24) = 2.5;
    *(__mram_ptr float *)(b + 32) = 1.25f;
    __mram_ptr item_t *it = (__mram_ptr item_t *)(b + 40);
    item_t v = {7, 300, 70000, -3.5};
    *it = v; /* struct store */
    item_t w = *it;
    res[0] = b[1] + *(__mram_ptr uint16_t *)(b + 2);
    res[1] = *(__mram_ptr uint32_t *)(b + 6);
    res[2] = (int64_t)*(__mram_ptr uint64_t *)(b + 16);
    res[3] = (int64_t)(*(__mram_ptr double *)(b + 24) * 4 + *(__mram_ptr float *)(b + 32) * 4);
    res[4] = w.a + w.b + w.c + (int64_t)w.d;
    uint8_t local[40];
    memcpy(local, (const __mram_ptr void *)b, sizeof(local)); /* MRAM -> WRAM */
    res[5] = local[1] + local[16];
    memset((__mram_ptr void *)(b + 64), 0x5a, 19);            /* memset on MRAM */
    memcpy((__mram_ptr void *)(b + 128), (const __mram_ptr void *)(b + 16), 8); /* MRAM -> MRAM */
    res[6] = (int64_t)*(__mram_ptr uint64_t *)(b + 128);
    res[7] = b[64 + 18] + b[64 + 19];
    res[8] = (int64_t)init_words[2];
}

static void mode_handshake(unsigned t)
{
    /* The chain SEL and UNI use: each tasklet waits for the one before. */
    if (t > 0)
        handshake_wait_for(t - 1);
    order[order_pos++] = t;
    if (t < NR_TASKLETS - 1)
        handshake_notify();
    barrier_wait(&bar);
    if (t == 0) {
        int64_t ok = 1;
        for (unsigned i = 0; i < NR_TASKLETS; i++)
            ok &= order[i] == i;
        res[0] = ok;
        order_pos = 0;
    }
    barrier_wait(&bar);
    /* A second waiter for the same notifier gets EALREADY at once (tasklets
     * reach the call at the same modeled time; the lower id goes first). */
    if (t == 1 || t == 2) {
        int r = handshake_wait_for(3);
        res[t] = r == EALREADY ? 100 + (errno == EALREADY) : r;
    }
    if (t == 3)
        handshake_notify();
}

static void mode_sem(unsigned t)
{
    if (t == 0) {
        for (unsigned i = 1; i < NR_TASKLETS; i++)
            sem_give(&sem);
    } else {
        sem_take(&sem);
        mutex_lock(mtx);
        shared_count++;
        mutex_unlock(mtx);
    }
    barrier_wait(&bar);
    if (t == 0) {
        res[0] = shared_count;
        res[1] = (int8_t)sem.count;
        shared_count = 0;
    }
}

static void mode_groups(unsigned t)
{
    unsigned g = t & 1;
    if (t == 0) {
        for (unsigned i = 0; i < 2; i++) {
            groups[i].wait_queue = 0xff;
            groups[i].count = NR_TASKLETS / 2;
            groups[i].initial_count = NR_TASKLETS / 2;
            groups[i].lock = (uint8_t)(uintptr_t)&ATOMIC_BIT_GET(group_bits)[i];
        }
    }
    barrier_wait(&bar);
    for (int k = 0; k < 100; k++) {
        mutex_lock(zero_mutex[g]); /* both groups use mutex id 0 */
        uint32_t v = shared_count;
        mram_read(&init_words[0], &res[20 + t], 8); /* a DMA inside the critical section */
        shared_count = v + 1;
        mutex_unlock(zero_mutex[g]);
    }
    barrier_wait(&groups[g]);
    barrier_wait(&groups[g]);
    barrier_wait(&bar);
    if (t == 0) {
        res[0] = shared_count;
        res[1] = groups[0].count + groups[1].count;
        res[2] = (int64_t)(uintptr_t)zero_mutex[1];
        res[3] = (int64_t)(uintptr_t)mtx; /* declared before group_bits: a small atomic-bit address */
        shared_count = 0;
    }
}

static void mode_alloc(unsigned t)
{
    if (t != 0)
        return;
    buddy_init(4096);
    void *a = buddy_alloc(100), *b = buddy_alloc(100), *c = buddy_alloc(1000);
    res[0] = a && b && c && a != b && (uintptr_t)a % 8 == 0 && (uint8_t *)b - (uint8_t *)a >= 128;
    buddy_free(a);
    void *d = buddy_alloc(64);
    res[1] = d == a;
    errno = 0;
    res[2] = buddy_alloc(8192) == NULL && errno == EINVAL;
    buddy_free(b);
    buddy_free(c);
    buddy_free(d);
    void *e = buddy_alloc(4096); /* everything merged back */
    res[3] = e != NULL;
    fsb_allocator_t f = fsb_alloc(24, 3);
    void *x = fsb_get(f), *y = fsb_get(f), *z = fsb_get(f);
    res[4] = x && y && z && fsb_get(f) == NULL;
    fsb_free(f, y);
    res[5] = fsb_get(f) == y;
    uint8_t *h1 = mem_alloc(10), *h2 = mem_alloc(10);
    res[6] = h2 - h1;
    res[7] = mem_reset() != NULL;
}

static void mode_perf(unsigned t)
{
    if (t != 0)
        return;
    perfcounter_config(COUNT_CYCLES, true);
    uint64_t buf[2];
    mram_read(&init_words[0], buf, 16);
    res[0] = (int64_t)perfcounter_get();
    res[1] = CLOCKS_PER_SEC;
    res[2] = me() == __builtin_dpu_tid();
}

static void mode_print(unsigned t)
{
    if (t == 0)
        for (uint32_t i = 0; i < arg; i++)
            printf("line %u of %u\n", i, arg);
    if (t == 1 && arg == 0) {
        puts("puts");
        putchar('!');
    }
}

int main(void)
{
    unsigned t = me();
    switch (mode) {
    case SDK_SEQREAD: mode_seqread(t); break;
    case SDK_UNALIGNED: mode_unaligned(t); break;
    case SDK_DMA_HW: mode_dma_hw(t); break;
    case SDK_DIRECT: mode_direct(t); break;
    case SDK_HANDSHAKE: mode_handshake(t); break;
    case SDK_SEM: mode_sem(t); break;
    case SDK_GROUPS: mode_groups(t); break;
    case SDK_ALLOC: mode_alloc(t); break;
    case SDK_PERF: mode_perf(t); break;
    case SDK_PRINT: mode_print(t); break;
    case SDK_ASSERT: assert(t != 5); break;
    case SDK_OUT_OF_MRAM: if (t == 3) res[0] = *(__mram_ptr uint64_t *)(uintptr_t)(0x08000000u + (64u << 20)); break;
    case SDK_HALT: if (t == 2) halt(); break;
    default: break;
    }
    return 0;
}
