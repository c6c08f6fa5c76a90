/* The heap tool (`nearmem pmalloc info|check|create|remove|dump HEAPDIR`):
 * create, info and check of a clean heap; info and check of a crashed one
 * (check recovers it); a damaged bitmap makes check exit 1 naming the slab;
 * damaged checkpoint-bound copies make dump exit 1; remove; usage errors. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nm_test.h"
#include "../../src/pmalloc/pm_internal.h"
#include "pm_testutil.h"

static char g_out[65536];

/* Run `nearmem pmalloc ARGS`; its stdout+stderr in g_out; its exit status. */
static int tool(const char *args)
{
    const char *bin = getenv("NEARMEM_BINARY_DIR");
    assert_non_null(bin);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/bin/nearmem pmalloc %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(g_out, 1, sizeof g_out - 1, p);
    g_out[n] = 0;
    int st = pclose(p);
    print_message("$ nearmem pmalloc %s  -> %d\n%s", args, WIFEXITED(st) ? WEXITSTATUS(st) : -1, g_out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_tool(void **st)
{
    (void)st;
    char dir[256], a[512];
    pmt_tmpdir(dir, sizeof dir, "tool");
    snprintf(a, sizeof a, "create %s --size 16M", dir);
    assert_int_equal(tool(a), 0);
    assert_int_equal(tool(a), 3); /* one is there */
    snprintf(a, sizeof a, "info %s", dir);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "clean"));
    /* a crashed heap with objects */
    pmalloc_options o = pmt_opts(16u << 20, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    o.create = false;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    for (unsigned i = 0; i < 20; i++) assert_int_equal(pmalloc_malloc_to(h, 48, pmalloc_root_slot(h, i)), NM_OK);
    assert_int_equal(pmalloc_sync(h), NM_OK);
    uint64_t blk = PMALLOC_PTR_OFFSET(pmalloc_get_root(h, 5));
    pmalloc_abandon(h);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "crashed"));
    snprintf(a, sizeof a, "dump %s", dir);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "running"));
    snprintf(a, sizeof a, "check %s", dir);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "recovered"));
    assert_non_null(strstr(g_out, "objects: 20"));
    snprintf(a, sizeof a, "info %s", dir);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "48 B: 20 objects"));
    snprintf(a, sizeof a, "dump %s", dir);
    assert_int_equal(tool(a), 0);
    assert_non_null(strstr(g_out, "objects (heap offset"));
    snprintf(a, sizeof a, "check %s", dir);
    /* a bitmap bit cleared behind the allocator's back: check names the slab */
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pm_heap *ph = pm_resolve(h);
    pm_vslab *s;
    uint32_t idx;
    assert_true(pm_small_block_at(ph, blk, &s, &idx));
    uint64_t m, *w = pm_pbm_word(s, idx, &m);
    uint64_t woff = (uint64_t)((char *)w - ph->base);
    assert_int_equal(pmalloc_close(h), NM_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint64_t word;
    assert_int_equal(pread(fd, &word, 8, (off_t)woff), 8);
    assert_true(word & m);
    word &= ~m;
    assert_int_equal(pwrite(fd, &word, 8, (off_t)woff), 8);
    assert_int_equal(tool(a), 1);
    assert_non_null(strstr(g_out, "DAMAGED"));
    assert_non_null(strstr(g_out, "its bitmap does not match its checksum"));
    word |= m;
    assert_int_equal(pwrite(fd, &word, 8, (off_t)woff), 8);
    assert_int_equal(tool(a), 0);
    /* both copies of the checkpoint bound damaged: dump marks them, exits 1 */
    uint64_t junk = 0x0123456789abcdefull;
    assert_int_equal(pwrite(fd, &junk, 8, 4 * PM_LINE + 8), 8);
    snprintf(a, sizeof a, "dump %s --no-objects", dir); /* listing objects opens (and closes) the heap, which repairs it */
    assert_int_equal(tool(a), 0); /* one copy: repaired from the other at open */
    assert_non_null(strstr(g_out, "DAMAGED (open repairs it"));
    assert_int_equal(pwrite(fd, &junk, 8, PM_GW_B_LINE * PM_LINE + 8), 8);
    assert_int_equal(tool(a), 1);
    snprintf(a, sizeof a, "check %s", dir);
    assert_int_equal(tool(a), 1);
    assert_non_null(strstr(g_out, "checkpoint bound"));
    close(fd);
    snprintf(a, sizeof a, "remove %s", dir);
    assert_int_equal(tool(a), 0);
    assert_int_equal(tool(a), 3); /* nothing left */
    snprintf(a, sizeof a, "info %s", dir);
    assert_int_equal(tool(a), 3);
    assert_int_equal(tool("frobnicate"), 2);
    assert_int_equal(tool(""), 2);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tool)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
