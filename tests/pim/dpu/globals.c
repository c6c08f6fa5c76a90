/* A DPU program in plain UPMEM C (built by nearmem-dpu-cc, loaded by path):
 * every kind of global a kernel declares, updated from the DPU's tag so the
 * host can tell if any of them leaked between DPUs, launches or loads. */
#include <barrier.h>
#include <defs.h>
#include <mram.h>
#include <mutex.h>
#include <stdint.h>
#include <stdio.h>

__host uint64_t tag;    /* set by the host, per DPU */
__host uint64_t out[12]; /* results for the host */
uint64_t plain;          /* plain global, zero-initialised */
uint64_t plain_init = 7; /* plain global with an initial value */
static uint64_t file_static;
__mram uint64_t m_init[4] = {11, 22, 33, 44};
__mram_noinit uint64_t m_noinit[4];
__mram uint64_t m_zero[4];
__mram_ptr uint64_t *m_ptr = &m_init[1]; /* MRAM address in a WRAM global's initialiser */
const uint64_t table[4] = {100, 200, 300, 400};
uint64_t *wptr = &plain; /* WRAM address in a WRAM global's initialiser */
static uint64_t twice(uint64_t x) { return 2 * x; }
uint64_t (*fn)(uint64_t) = twice;
uint64_t per_tasklet[NR_TASKLETS];
BARRIER_INIT(bar, NR_TASKLETS);
MUTEX_INIT(mtx);

int main(void)
{
    static uint64_t launches; /* static local */
    unsigned t = me();
    mutex_lock(mtx);
    plain += tag;
    mutex_unlock(mtx);
    per_tasklet[t] = tag * 10 + t;
    barrier_wait(&bar);
    if (t == 0) {
        launches++;
        file_static += tag;
        plain_init += 1;
        m_noinit[0] = tag;  /* direct MRAM store */
        m_init[2] += tag;   /* read-modify-write of an initialised MRAM variable */
        *m_ptr += 1;        /* through an MRAM pointer */
        uint64_t s = 0;
        for (unsigned i = 0; i < NR_TASKLETS; i++)
            s += per_tasklet[i];
        out[0] = plain;
        out[1] = plain_init;
        out[2] = file_static;
        out[3] = launches;
        out[4] = m_init[1];
        out[5] = m_init[2];
        out[6] = m_noinit[0] + m_zero[3];
        out[7] = table[tag % 4] + fn(tag) + *wptr;
        out[8] = s;
        out[9] = (uint64_t)(uintptr_t)DPU_MRAM_HEAP_POINTER;
        out[10] = sizeof(m_ptr);
        out[11] = (uint64_t)(uintptr_t)&m_init[1];
        printf("tag %llu launch %llu\n", (unsigned long long)tag, (unsigned long long)launches);
    }
    return 0;
}
