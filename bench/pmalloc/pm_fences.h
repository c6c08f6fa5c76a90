/* Counting the cache-line flushes and store fences an allocator executes per
 * operation, on the native code path (suite pmalloc-fences).
 *
 * Method: every clwb / clflushopt / clflush / sfence / mfence instruction of
 * the objects that can persist (libpmem, libpmemobj, libc, the measuring
 * helper) is found with objdump; gdb runs the helper, and between the two
 * markers of pe_params.mark (the timed phase, after the fill) a breakpoint on
 * each such instruction counts its executions without stopping. Both
 * allocators persist through libpmem (PMAlloc: pmem_flush / pmem_drain;
 * libpmemobj: pmem_flush, pmem_drain, pmem_memcpy/memset/memmove with flags),
 * so the same breakpoints see both. Valgrind is not used: its CPUID hides
 * clwb and clflushopt, so libpmem takes its clflush path, whose pmem_drain
 * issues no sfence (docs/pmalloc.md). */
#ifndef PM_FENCES_H
#define PM_FENCES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum pf_kind { PF_SFENCE, PF_MFENCE, PF_CLWB, PF_CLFLUSHOPT, PF_CLFLUSH, PF_NKINDS } pf_kind;

const char *pf_kind_name(pf_kind k);
/* The kind of a mnemonic (exact word), or -1. */
int pf_kind_of(const char *mnemonic, size_t len);
/* Scans `objdump -d --no-show-raw-insn` text: for each flush or fence
 * instruction writes "<path> <hex address> <kind>\n" to `out` (if not NULL)
 * and counts it in per_kind (if not NULL). Returns the number of sites. */
size_t pf_scan_objdump(const char *text, const char *path, FILE *out, uint64_t per_kind[PF_NKINDS]);
/* Runs objdump on `path` and appends its sites to `out`; -1 if objdump failed. */
long pf_sites_of_object(const char *path, FILE *out, uint64_t per_kind[PF_NKINDS]);
/* Parses the counting script's output ("NMCOUNT <kind> <n>" lines, closed by
 * "NMCOUNT_DONE"). 0 when complete, -1 otherwise. */
int pf_parse_counts(const char *out, uint64_t n[PF_NKINDS]);
/* Writes the gdb Python script that counts the sites listed in `sites_path`. */
int pf_write_gdb_script(const char *script_path, const char *sites_path);

static inline uint64_t pf_fences(const uint64_t n[PF_NKINDS]) { return n[PF_SFENCE] + n[PF_MFENCE]; }
static inline uint64_t pf_flushes(const uint64_t n[PF_NKINDS]) { return n[PF_CLWB] + n[PF_CLFLUSHOPT] + n[PF_CLFLUSH]; }

#endif
