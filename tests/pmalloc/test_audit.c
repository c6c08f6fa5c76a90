/* PMAlloc: the outside audit's findings (issue 16, "Audit fixes"), one test each.
 *  - calls on a closed handle, and a second close, are errors, never a use after free;
 *  - two threads freeing one object at once: the loser gets NM_EDOUBLEFREE and its
 *    source pointer is unchanged, also when the winner's free releases the slab;
 *  - malloc_to into a destination that holds an object is NM_EEXIST (PMALLOC_OVERWRITE
 *    allows it);
 *  - a pointer of another heap is NM_EINVAL everywhere (pointers carry the heap's tag);
 *  - heap creation is atomic: a killed create leaves no heap or a whole one, and a
 *    create over what an interrupted create of an older build left works. */
#include "nm_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "nearmem/common/prng.h"
#include "nearmem/common/timer.h"
#include "nearmem/common/util.h"
#include "pm_testutil.h"

#define MiB (1u << 20)

static void test_closed_handle(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "closed");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_malloc_to(h, 64, pmalloc_root_slot(h, 0)), NM_OK);
    pmalloc_ptr p = pmalloc_get_root(h, 0);
    pmalloc_ptr *slot = pmalloc_root_slot(h, 1);
    assert_int_equal(pmalloc_close(h), NM_OK);
    /* the same memory may well hold the next heap's handle: the old one must stay dead */
    pmalloc_heap *h2;
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h2), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_ESTATE);
    assert_int_equal(pmalloc_malloc_to(h, 64, slot), NM_ESTATE);
    assert_int_equal(pmalloc_free_from(h, slot), NM_ESTATE);
    pmalloc_stats s;
    assert_int_equal(pmalloc_stats_get(h, &s), NM_ESTATE);
    assert_int_equal(pmalloc_check(h), NM_ESTATE);
    assert_int_equal(pmalloc_set_root(h, 0, 0), NM_ESTATE);
    assert_null(pmalloc_direct(h, p));
    assert_null(pmalloc_root_slot(h, 0));
    assert_int_equal(pmalloc_get_root(h, 0), 0);
    assert_int_equal(pmalloc_usable_size(h, p), 0);
    assert_int_equal(pmalloc_numa_sync(h), NM_ESTATE);
    pmalloc_abandon(h); /* harmless too */
    /* the live heap is untouched */
    assert_int_equal(pmalloc_get_root(h2, 0), p);
    assert_true(pmalloc_usable_size(h2, p) >= 64);
    assert_int_equal(pmalloc_check(h2), NM_OK);
    assert_int_equal(pmalloc_close(h2), NM_OK);
    assert_int_equal(pmalloc_close(h2), NM_ESTATE);
    assert_int_equal(pmalloc_close(NULL), NM_EINVAL);
    pmt_rmdir(dir);
}

typedef struct rf_arg {
    pmalloc_heap *h;
    unsigned root;
    pthread_barrier_t *bar;
    nm_err err;
} rf_arg;

static void *rf_free(void *p)
{
    rf_arg *a = p;
    pthread_barrier_wait(a->bar);
    a->err = pmalloc_free_from(a->h, pmalloc_root_slot(a->h, a->root));
    return NULL;
}

/* The target is the last live block of its slab while another slab of its class
 * has room: the winner's free empties the slab, which goes back to the extent
 * allocator (pm_slab_settle), and the loser used to find no slab there at all. */
static void racing_frees(pmalloc_model m)
{
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "race");
    pmalloc_options o = pmt_opts(16 * MiB, m, PMALLOC_PERSIST_CPU);
    o.narenas = 1;
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    unsigned bad = 0, lost = 0, rounds = 300;
    /* a partial slab of the class that stays: 2 blocks of 4 KiB in it */
    for (unsigned round = 0; round < rounds; round++) {
        size_t size = round % 3 == 2 ? 40000 : 4000; /* a 4 KiB class: 15 blocks per slab; and extents */
        unsigned n = size > PMALLOC_SMALL_MAX ? 1 : 15;
        for (unsigned i = 0; i < n; i++) assert_int_equal(pmalloc_malloc_to(h, size, pmalloc_root_slot(h, 100 + i)), NM_OK);
        for (unsigned i = 1; i < n; i++) assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 100 + i)), NM_OK);
        assert_int_equal(pmalloc_set_root(h, 1, pmalloc_get_root(h, 100)), NM_OK);
        pmalloc_ptr p = pmalloc_get_root(h, 100);
        rf_arg a = {h, 100, &bar, NM_OK}, b = {h, 1, &bar, NM_OK};
        pthread_t t;
        pthread_create(&t, NULL, rf_free, &a);
        rf_free(&b);
        pthread_join(t, NULL);
        bool one = (a.err == NM_OK) != (b.err == NM_OK);
        assert_true(one);
        nm_err loser = a.err == NM_OK ? b.err : a.err;
        unsigned lr = a.err == NM_OK ? 1 : 100, wr = a.err == NM_OK ? 100 : 1;
        if (loser != NM_EDOUBLEFREE) bad++;
        if (pmalloc_get_root(h, lr) != p) lost++; /* nothing changes on error */
        assert_int_equal(pmalloc_get_root(h, wr), 0);
        assert_int_equal(pmalloc_set_root(h, lr, 0), NM_OK);
    }
    pthread_barrier_destroy(&bar);
    print_message("racing frees (%s): %u of %u losers without NM_EDOUBLEFREE, %u changed their pointer\n",
                  m == PMALLOC_LOG ? "LOG" : "GC", bad, rounds, lost);
    assert_int_equal(bad, 0);
    assert_int_equal(lost, 0);
    pmalloc_stats s;
    assert_int_equal(pmalloc_stats_get(h, &s), NM_OK);
    assert_int_equal(s.objects_live, 0);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    assert_int_equal(pmalloc_check(h), NM_OK);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

static void test_racing_frees_log(void **st) { (void)st; racing_frees(PMALLOC_LOG); }
static void test_racing_frees_gc(void **st) { (void)st; racing_frees(PMALLOC_GC); }

static void test_nonempty_destination(void **st)
{
    (void)st;
    char dir[256];
    pmt_tmpdir(dir, sizeof dir, "dst");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    pmalloc_ptr *r0 = pmalloc_root_slot(h, 0);
    for (unsigned k = 0; k < 2; k++) {
        size_t size = k ? 50000 : 100;
        assert_int_equal(pmalloc_malloc_to(h, size, r0), NM_OK);
        pmalloc_ptr p = *r0;
        pmalloc_stats a, b;
        pmalloc_stats_get(h, &a);
        assert_int_equal(pmalloc_malloc_to(h, 64, r0), NM_EEXIST);
        assert_int_equal(pmalloc_malloc_to(h, 50000, r0), NM_EEXIST);
        assert_int_equal(*r0, p);
        pmalloc_stats_get(h, &b);
        assert_int_equal(a.objects_live, b.objects_live);
        assert_int_equal(a.bytes_live, b.bytes_live);
        /* the documented flag allows it: the old object stays allocated, the caller keeps it */
        assert_int_equal(pmalloc_set_root(h, 1, p), NM_OK);
        assert_int_equal(pmalloc_malloc_to_ex(h, 64, r0, PMALLOC_OVERWRITE), NM_OK);
        assert_true(*r0 != p && *r0 != 0);
        assert_true(pmalloc_usable_size(h, p) >= size);
        assert_int_equal(pmalloc_malloc_to_ex(h, 64, pmalloc_root_slot(h, 2), 0x100), NM_EINVAL); /* unknown flag */
        assert_int_equal(pmalloc_free_from(h, r0), NM_OK);
        assert_int_equal(pmalloc_free_from(h, pmalloc_root_slot(h, 1)), NM_OK);
        assert_int_equal(pmalloc_check(h), NM_OK);
    }
    /* garbage in a destination is non-empty too */
    *r0 = 0x1234;
    pmalloc_persist(h, r0, 8);
    assert_int_equal(pmalloc_malloc_to(h, 64, r0), NM_EEXIST);
    assert_int_equal(pmalloc_malloc_to_ex(h, 64, r0, PMALLOC_OVERWRITE), NM_OK);
    assert_int_equal(pmalloc_free_from(h, r0), NM_OK);
    pmalloc_stats s;
    pmalloc_stats_get(h, &s);
    assert_int_equal(s.objects_live, 0);
    assert_int_equal(pmalloc_close(h), NM_OK);
    pmt_rmdir(dir);
}

/* Two heaps built by the same sequence of calls: their objects have the same
 * offsets, so an offset-only pointer of one names a live object of the other. */
static void test_foreign_pointer(void **st)
{
    (void)st;
    char da[256], db[256];
    pmt_tmpdir(da, sizeof da, "fpa");
    pmt_tmpdir(db, sizeof db, "fpb");
    pmalloc_options o = pmt_opts(8 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *a, *b;
    assert_int_equal(pmalloc_open(da, &o, &a), NM_OK);
    assert_int_equal(pmalloc_open(db, &o, &b), NM_OK);
    size_t sizes[] = {64, 50000};
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(pmalloc_malloc_to(a, sizes[i], pmalloc_root_slot(a, i)), NM_OK);
        assert_int_equal(pmalloc_malloc_to(b, sizes[i], pmalloc_root_slot(b, i)), NM_OK);
        memset(pmalloc_direct(a, pmalloc_get_root(a, i)), 0xa0 + (int)i, sizes[i]);
    }
    for (unsigned i = 0; i < 2; i++) {
        pmalloc_ptr pa = pmalloc_get_root(a, i), pb = pmalloc_get_root(b, i);
        assert_true(pa != pb); /* the heaps' tags differ */
        assert_null(pmalloc_direct(a, pb));
        assert_int_equal(pmalloc_usable_size(a, pb), 0);
        assert_int_equal(pmalloc_set_root(a, 10, pb), NM_EINVAL);
        /* a foreign pointer stored by hand in a destination of heap a */
        pmalloc_ptr *slot = pmalloc_root_slot(a, 10);
        *slot = pb;
        assert_int_equal(pmalloc_free_from(a, slot), NM_EINVAL);
        assert_int_equal(*slot, pb);
        *slot = 0;
        assert_true(pmalloc_usable_size(a, pa) >= sizes[i]);
        const unsigned char *c = pmalloc_direct(a, pa);
        for (size_t k = 0; k < sizes[i]; k += 61) assert_int_equal(c[k], 0xa0 + i);
    }
    pmalloc_stats s;
    pmalloc_stats_get(a, &s);
    assert_int_equal(s.objects_live, 2);
    assert_int_equal(pmalloc_check(a), NM_OK);
    /* pointers keep their tag across reopens, and survive a mapping elsewhere */
    pmalloc_ptr pa0 = pmalloc_get_root(a, 0);
    assert_int_equal(pmalloc_close(a), NM_OK);
    o.create = false;
    assert_int_equal(pmalloc_open(da, &o, &a), NM_OK);
    assert_int_equal(pmalloc_get_root(a, 0), pa0);
    assert_non_null(pmalloc_direct(a, pa0));
    assert_int_equal(pmalloc_free_from(a, pmalloc_root_slot(a, 0)), NM_OK);
    assert_int_equal(pmalloc_free_from(a, pmalloc_root_slot(a, 1)), NM_OK);
    assert_int_equal(pmalloc_close(a), NM_OK);
    assert_int_equal(pmalloc_close(b), NM_OK);
    /* a heap of an older format is refused with a clear version error */
    char path[400];
    snprintf(path, sizeof path, "%s/%s", da, PMALLOC_FILE_NAME);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint32_t v = 1;
    assert_int_equal(pwrite(fd, &v, 4, 8), 4); /* the version field */
    close(fd);
    assert_int_equal(pmalloc_open(da, &o, &a), NM_EFORMAT);
    print_message("old format: %s\n", nm_last_errmsg());
    assert_non_null(strstr(nm_last_errmsg(), "version 1"));
    pmt_rmdir(da);
    pmt_rmdir(db);
}

static long long fsize(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 ? (long long)s.st_size : -1;
}

static void test_atomic_create(void **st)
{
    (void)st;
    char dir[256], path[400];
    pmt_tmpdir(dir, sizeof dir, "create");
    snprintf(path, sizeof path, "%s/%s", dir, PMALLOC_FILE_NAME);
    pmalloc_options o = pmt_opts(32 * MiB, PMALLOC_LOG, PMALLOC_PERSIST_CPU);
    pmalloc_heap *h;
    uint64_t t0 = nm_now_ns();
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
    uint64_t create_us = (nm_now_ns() - t0) / 1000;
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    /* what an interrupted create of an older build left: the file, sized, without magic */
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 32 * MiB), 0);
    close(fd);
    pmalloc_options oo = o;
    oo.create = false;
    assert_int_equal(pmalloc_open(dir, &oo, &h), NM_EFORMAT);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK); /* create = true replaces it */
    pmalloc_recovery_info ri;
    pmalloc_recovery_info_get(h, &ri);
    assert_true(ri.created);
    assert_int_equal(pmalloc_close(h), NM_OK);
    assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    /* a file that is not a heap (data in its first page) is never replaced */
    fd = open(path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "hello", 5, 0), 5);
    assert_int_equal(ftruncate(fd, 32 * MiB), 0);
    close(fd);
    assert_int_equal(pmalloc_open(dir, &o, &h), NM_EFORMAT);
    assert_int_equal(unlink(path), 0);
    /* real crashes: a child killed at a random moment of its create */
    nm_rng r;
    nm_rng_seed(&r, nm_test_seed(21));
    unsigned none = 0, whole = 0;
    for (unsigned i = 0; i < 16; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            pmalloc_heap *c;
            _exit(pmalloc_open(dir, &o, &c) == NM_OK ? 0 : 3);
        }
        usleep((useconds_t)nm_rng_below(&r, 2 * create_us + 1000));
        kill(pid, SIGKILL);
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_false(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
        nm_err e = pmalloc_open(dir, &oo, &h);
        if (e != NM_OK && e != NM_ENOENT) print_message("after a killed create: %s\n", nm_last_errmsg());
        assert_true(e == NM_OK || e == NM_ENOENT);
        if (e == NM_OK) whole++;
        else {
            none++;
            assert_int_equal(fsize(path), -1);
            assert_int_equal(pmalloc_open(dir, &o, &h), NM_OK);
        }
        assert_int_equal(pmalloc_check(h), NM_OK);
        assert_int_equal(pmalloc_close(h), NM_OK);
        assert_int_equal(pmalloc_remove(dir, NULL), NM_OK);
    }
    print_message("killed creates: %u left no heap, %u a whole heap\n", none, whole);
    assert_int_equal(rmdir(dir), 0); /* no leftovers */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_handle),
        cmocka_unit_test(test_racing_frees_log),
        cmocka_unit_test(test_racing_frees_gc),
        cmocka_unit_test(test_nonempty_destination),
        cmocka_unit_test(test_foreign_pointer),
        cmocka_unit_test(test_atomic_create),
    };
    const char *only = getenv("PMT_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
