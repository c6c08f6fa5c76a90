/* Unit test of the flush/fence counting kit of suite pmalloc-fences
 * (bench/pmalloc/pm_fences.c) and of the helper's argv/result round trips
 * (pm_eval.c), on synthetic inputs: no gdb, no PMDK pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nm_test.h"
#include "pm_eval.h"
#include "pm_fences.h"

/* objdump -d --no-show-raw-insn lines: labels, prefixes, look-alike names. */
static const char synth[] =
    "\n/usr/lib/libx.so:     file format elf64-x86-64\n\n"
    "Disassembly of section .text:\n\n"
    "000000000000cbd0 <sfence_wrapper>:\n"          /* a label, not an instruction */
    "    cbd0:\tmov    %rdi,%rax\n"
    "    cbe0:\tclflushopt (%rax)\n"
    "    cc00:\tclwb   (%rax)\n"
    "    cc20:\tclflush (%rax)\n"
    "    cc30:\tsfence\n"
    "    cc33:\tret\n"
    "    cc40:\tlock cmpxchg %rdx,(%rdi)\n"          /* a locked op is not counted */
    "    cc50:\tmfence\n"
    "    cc60:\tcall   1234 <clwb_helper@plt>\n"    /* a name in the operands */
    "    cc70:\tds sfence\n"                          /* prefix word skipped */
    "    cc80:\tclflushoptx (%rax)\n"                 /* not an exact mnemonic */
    "   1cc90:\tclwb   0x40(%rax)";                  /* last line without newline */

static void test_scan(void **st)
{
    (void)st;
    uint64_t k[PF_NKINDS] = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    size_t n = pf_scan_objdump(synth, "/usr/lib/libx.so", out, k);
    fclose(out);
    assert_int_equal(n, 7);
    assert_int_equal(k[PF_SFENCE], 2);
    assert_int_equal(k[PF_MFENCE], 1);
    assert_int_equal(k[PF_CLWB], 2);
    assert_int_equal(k[PF_CLFLUSHOPT], 1);
    assert_int_equal(k[PF_CLFLUSH], 1);
    assert_int_equal(pf_fences(k), 3);
    assert_int_equal(pf_flushes(k), 4);
    assert_non_null(strstr(buf, "/usr/lib/libx.so cbe0 clflushopt\n"));
    assert_non_null(strstr(buf, "/usr/lib/libx.so cc70 sfence\n"));
    assert_non_null(strstr(buf, "/usr/lib/libx.so 1cc90 clwb\n"));
    assert_null(strstr(buf, " cbd0 "));
    assert_null(strstr(buf, " cc60 "));
    assert_null(strstr(buf, " cc80 "));
    free(buf);
    assert_int_equal(pf_scan_objdump("", "x", NULL, NULL), 0);
    assert_int_equal(pf_kind_of("clflush", 7), PF_CLFLUSH);
    assert_int_equal(pf_kind_of("clflushopt", 10), PF_CLFLUSHOPT);
    assert_int_equal(pf_kind_of("clflushop", 9), -1);
}

static void test_parse_counts(void **st)
{
    (void)st;
    uint64_t n[PF_NKINDS];
    const char *ok = "Reading symbols...\nNMCOUNT_SITES 1021\n[New Thread 0x7f]\nNMCOUNT clwb 3620\nNMCOUNT sfence 4810\n"
                     "NMCOUNT_DONE\nPE_RESULT err=0 ...\n";
    assert_int_equal(pf_parse_counts(ok, n), 0);
    assert_int_equal(n[PF_CLWB], 3620);
    assert_int_equal(n[PF_SFENCE], 4810);
    assert_int_equal(n[PF_MFENCE] + n[PF_CLFLUSH] + n[PF_CLFLUSHOPT], 0);
    /* incomplete: the end mark was never reached */
    assert_int_equal(pf_parse_counts("NMCOUNT_SITES 3\nNMCOUNT_ERROR no end mark\n", n), -1);
    /* an unknown kind is an error, a mid-line NMCOUNT is not a count */
    assert_int_equal(pf_parse_counts("NMCOUNT movnti 4\nNMCOUNT_DONE\n", n), -1);
    assert_int_equal(pf_parse_counts("x NMCOUNT sfence 9\nNMCOUNT sfence 2\nNMCOUNT_DONE\n", n), 0);
    assert_int_equal(n[PF_SFENCE], 2);
}

static void test_roundtrip(void **st)
{
    (void)st;
    pe_params p;
    memset(&p, 0, sizeof p); /* padding too: the parsed copy is compared bytewise */
    p.work = PE_LARSON_LARGE;
    p.kind = PE_PMDK;
    p.threads = 2;
    p.n = 100;
    p.iters = 4;
    p.ops = 12345;
    p.seed = 987654321987ull;
    p.pool_size = (size_t)512 << 20;
    p.prefault = 1;
    p.no_morph = 1;
    p.mark = 1;
    snprintf(p.dir, sizeof p.dir, "/tmp/some dir=x");
    char buf[1024];
    assert_int_equal(pe_params_format(&p, buf, sizeof buf), 0);
    char *argv[32], dirarg[600];
    int ac = 0;
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) argv[ac++] = t;
    snprintf(dirarg, sizeof dirarg, "dir=%s", p.dir);
    argv[ac++] = dirarg;
    pe_params q;
    assert_int_equal(pe_params_parse(ac, argv, &q), 0);
    assert_memory_equal(&p, &q, sizeof p);
    char *bad[] = {"threads=2", "kind=1", "bogus=1", "dir=/x"};
    assert_int_equal(pe_params_parse(4, bad, &q), -1);
    char *nodir[] = {"threads=2", "kind=1"};
    assert_int_equal(pe_params_parse(2, nodir, &q), -1);

    pe_result r, s;
    memset(&r, 0, sizeof r);
    r.seconds = 0.25;
    r.ops = 8000;
    r.peak_bytes = 1 << 20;
    r.is_pmem = 1;
    r.flushes = 24267;
    r.fences = 24200;
    snprintf(r.msg, sizeof r.msg, "fine");
    char out[1024];
    snprintf(out, sizeof out,
             "gdb noise\nPE_RESULT err=%d seconds=%.9g ops=%.17g peak=%.17g aux=%.17g is_pmem=%.17g flushes=%.17g "
             "fences=%.17g msg=%s\nmore noise\n",
             r.err, r.seconds, r.ops, r.peak_bytes, r.aux, r.is_pmem, r.flushes, r.fences, r.msg);
    assert_int_equal(pe_result_parse(out, &s), 0);
    assert_true(s.seconds == 0.25 && s.ops == 8000 && s.flushes == 24267 && s.fences == 24200 && s.is_pmem == 1);
    assert_string_equal(s.msg, "fine");
    assert_int_equal(pe_result_parse("no result here", &s), -1);
    assert_int_equal(pe_result_parse("PE_RESULT err=0 seconds=x", &s), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_parse_counts),
        cmocka_unit_test(test_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
