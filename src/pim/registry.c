/* Program and symbol registry: filled by constructors from dpu.h's macros,
 * laid out (sealed) at the first dpu_load of a program. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nearmem/common/util.h"

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_pim_program_def *g_programs;

void nm_pim__register_program(nm_pim_program_def *p)
{
    pthread_mutex_lock(&g_reg_lock);
    p->next = g_programs;
    g_programs = p;
    pthread_mutex_unlock(&g_reg_lock);
}

void nm_pim__register_symbol(nm_pim_program_def *p, nm_pim_symbol *s)
{
    pthread_mutex_lock(&g_reg_lock);
    if (s->tls_addr) {
        /* Capture the initial value now, in the registering thread, whose
         * copy no kernel has touched yet. */
        s->initial = calloc(1, s->size ? s->size : 1);
        if (s->initial)
            memcpy(s->initial, s->tls_addr(), s->size);
    }
    s->next = p->symbols;
    p->symbols = s;
    p->nr_symbols++;
    pthread_mutex_unlock(&g_reg_lock);
}

static int cmp_sym(const void *a, const void *b)
{
    const nm_pim_symbol *x = *(const nm_pim_symbol *const *)a, *y = *(const nm_pim_symbol *const *)b;
    return strcmp(x->name, y->name);
}

/* Lay out WRAM globals and MRAM variables in name order, so the layout does
 * not depend on the order in which constructors ran. */
int nm_pim__seal_program(nm_pim_program_def *p)
{
    pthread_mutex_lock(&g_reg_lock);
    if (p->sealed) {
        pthread_mutex_unlock(&g_reg_lock);
        return 0;
    }
    uint32_t n = p->nr_symbols;
    nm_pim_symbol **v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        pthread_mutex_unlock(&g_reg_lock);
        return -1;
    }
    uint32_t i = 0;
    for (nm_pim_symbol *s = p->symbols; s; s = s->next)
        v[i++] = s;
    qsort(v, n, sizeof(*v), cmp_sym);
    uint64_t wram = 0, mram = 0;
    uint32_t mutexes = 0;
    for (i = 0; i < n; i++) {
        nm_pim_symbol *s = v[i];
        if (s->kind == NM_PIM_SYM_MRAM) {
            s->offset = (uint32_t)mram;
            mram = NM_ALIGN_UP(mram + s->size, 8);
            if (mram <= NM_PIM_MRAM_SIZE)
                *s->mram_ptr = (void *)(uintptr_t)(NM_PIM_MRAM_BASE + s->offset);
        } else {
            s->offset = (uint32_t)wram;
            wram = NM_ALIGN_UP(wram + s->size, 8);
            if (s->kind == NM_PIM_SYM_MUTEX)
                mutexes++;
        }
    }
    /* Relink in layout order. */
    for (i = 0; i < n; i++)
        v[i]->next = i + 1 < n ? v[i + 1] : NULL;
    p->symbols = n ? v[0] : NULL;
    free(v);
    p->wram_globals_bytes = wram > UINT32_MAX ? UINT32_MAX : (uint32_t)wram;
    p->mram_vars_bytes = mram > UINT32_MAX ? UINT32_MAX : (uint32_t)mram;
    p->nr_mutexes = mutexes;
    p->sealed = true;
    pthread_mutex_unlock(&g_reg_lock);
    return 0;
}

nm_pim_program_def *nm_pim__find_program_mut(const char *name)
{
    pthread_mutex_lock(&g_reg_lock);
    nm_pim_program_def *p = g_programs;
    while (p && strcmp(p->name, name) != 0)
        p = p->next;
    pthread_mutex_unlock(&g_reg_lock);
    return p;
}

const nm_pim_program_def *nm_pim_find_program(const char *name) { return nm_pim__find_program_mut(name); }

const nm_pim_symbol *nm_pim__find_symbol(const nm_pim_program_def *p, const char *name)
{
    for (const nm_pim_symbol *s = p->symbols; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

nm_pim_cost nm_pim_cost_default(void)
{
    nm_pim_cost c = {
        .freq_mhz = 350.0,        /* UPMEM v1A; PrIM §2 */
        .revolver_cycles = 11,    /* UPMEM docs; PrIM §2.2 (Hot Chips 31) */
        .dma_read_alpha = 77.0,   /* PrIM §3.2.1, MRAM read latency */
        .dma_read_beta = 0.5,
        .dma_write_alpha = 61.0,  /* PrIM §3.2.1, MRAM write latency */
        .dma_write_beta = 0.5,
        .bw_serial_to_dpu = 0.33, /* PrIM §3.4, Fig. 10 (one DPU) */
        .bw_serial_from_dpu = 0.12,
        .bw_rank_to_dpu = 6.68,   /* PrIM §3.4, Fig. 10 (64 DPUs of one rank) */
        .bw_rank_from_dpu = 4.74,
        .bw_rank_broadcast = 16.88,
        /* (13.2003 / 5.3014 - 1) / 39: Friesel et al. (derf/prim-benchmarks,
         * upvec-write.tex), calibration points xfer.push.to.ranks1/ranks40 of
         * bench/pim/reference/prim_reference.json */
        .bw_rank_growth = 0.0382042,
        .bw_host_cap = 0.0,
        .instr_dma = 1,           /* one ldma/sdma; address arithmetic is the kernel's */
        .instr_mutex = 2,         /* acquire + conditional jump / release + return */
        .instr_barrier = 8,       /* estimate, see docs */
        .instr_sem = 4,           /* estimate, see docs */
        .instr_mem_alloc = 4,     /* estimate, see docs */
        .instr_perfcounter = 1,
    };
    return c;
}

const char *nm_pim_fault_name(nm_pim_fault_code c)
{
    static const char *const names[NM_PIM_FAULT_COUNT] = {
        "none", "dma-size", "dma-align", "mram-bounds", "wram-overflow", "tasklets",
        "deadlock", "mutex", "barrier", "hw-unit", "kernel", "wram-bounds"};
    return (unsigned)c < NM_PIM_FAULT_COUNT ? names[c] : "unknown";
}
