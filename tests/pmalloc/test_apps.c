/* The paper's applications on PMAlloc-LOG, PMAlloc-GC and PMDK (issue 19):
 *  - the applications' undo-log transactions: commit, rollback of an interrupted
 *    transaction (changes undone, its allocations freed), completion of a
 *    committed one (deferred frees done), overflow refused, on every allocator;
 *  - every application at small sizes, in process, on every allocator (and
 *    DRAM malloc) at 1 thread, on PMAlloc at 2 too (each checks its own result);
 *  - a few process crashes of FPTree and Vacation per allocator (the
 *    pmalloc-crash suite runs hundreds);
 *  - suite pmalloc-apps in quick mode through nearmem-bench: every key present,
 *    finite and positive. Speeds are not asserted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nm_test.h"
#include "pm_apps.h"
#include "pm_apps_crash.h"
#include "pm_testutil.h"

static const pa_kind pkinds[] = {PA_LOG, PA_GC, PA_PMDK};

static void open_heap(pa_heap *a, pa_kind k, const char *dir, bool create)
{
    char msg[300];
    pa_open_opts o = {.kind = k, .dir = dir, .size = (size_t)16 << 20, .create = create, .persist = PMALLOC_PERSIST_CPU};
    if (pa_open(a, &o, msg, sizeof msg)) fail_msg("pa_open: %s", msg);
}

static size_t count_objects_cb_n;
static int count_cb(void *arg, void *addr, size_t usable)
{
    (void)arg;
    (void)addr;
    (void)usable;
    count_objects_cb_n++;
    return 0;
}
static size_t count_objects(pa_heap *a)
{
    count_objects_cb_n = 0;
    assert_int_equal(pa_walk(a, count_cb, NULL), 0);
    return count_objects_cb_n;
}

typedef struct tx_root { pa_ptr log; pa_ptr obj; uint64_t word[8]; } tx_root;

static void test_tx(void **st)
{
    (void)st;
    for (unsigned ki = 0; ki < 3; ki++) {
        char dir[256];
        pmt_tmpdir(dir, sizeof dir, "apps-tx");
        pa_heap a;
        open_heap(&a, pkinds[ki], dir, true);
        tx_root *r = a.root;
        assert_int_equal(pa_alloc(&a, sizeof(pa_txlog), &r->log), 0);
        pa_txlog *log = pa_get(&a, r->log);
        memset(log, 0, sizeof *log);
        pa_persist(&a, log, sizeof *log);
        pa_tx *tx = malloc(sizeof *tx);
        assert_non_null(tx);
        pa_tx_init(tx, &a, log);
        size_t base = count_objects(&a);

        /* commit: a change and an allocation linked into the root */
        pa_tx_begin(tx);
        assert_int_equal(pa_tx_add(tx, r->word, sizeof r->word), 0);
        r->word[0] = 11;
        pa_ptr *s = pa_tx_alloc(tx, 64);
        assert_non_null(s);
        uint64_t *o = pa_get(&a, *s);
        o[0] = 77;
        pa_tx_new(tx, o, 64);
        assert_int_equal(pa_tx_add(tx, &r->obj, sizeof r->obj), 0);
        r->obj = *s;
        assert_int_equal(pa_tx_commit(tx), 0);
        assert_int_equal(log->state, 0);
        assert_true(pa_isnull(&a, log->alloc[0]));
        assert_int_equal(count_objects(&a), base + 1);
        assert_int_equal(((uint64_t *)pa_get(&a, r->obj))[0], 77);

        /* interrupted: changes, an allocation and a deferred free, no commit -> rolled back */
        pa_tx_begin(tx);
        assert_int_equal(pa_tx_add(tx, r->word, sizeof r->word), 0);
        r->word[0] = 12;
        r->word[7] = 99;
        assert_non_null(pa_tx_alloc(tx, 200));
        assert_int_equal(pa_tx_add(tx, &r->obj, sizeof r->obj), 0);
        assert_int_equal(pa_tx_free(tx, r->obj), 0);
        memset(&r->obj, 0, sizeof r->obj);
        assert_int_equal(count_objects(&a), base + 2);
        assert_int_equal(pa_tx_recover(&a, log), 1);
        assert_int_equal(r->word[0], 11);
        assert_int_equal(r->word[7], 0);
        assert_false(pa_isnull(&a, r->obj));
        assert_int_equal(((uint64_t *)pa_get(&a, r->obj))[0], 77);
        assert_int_equal(count_objects(&a), base + 1);
        assert_int_equal(log->state, 0);

        /* committed (state 2) before its deferred free ran -> recovery frees it */
        pa_tx_begin(tx);
        assert_int_equal(pa_tx_add(tx, &r->obj, sizeof r->obj), 0);
        assert_int_equal(pa_tx_free(tx, r->obj), 0);
        memset(&r->obj, 0, sizeof r->obj);
        pa_persist(&a, log->frees, sizeof log->frees[0]);
        log->state = 2;
        pa_persist(&a, &log->state, 8);
        assert_int_equal(pa_tx_recover(&a, log), 2);
        assert_true(pa_isnull(&a, r->obj));
        assert_true(pa_isnull(&a, log->frees[0]));
        assert_int_equal(count_objects(&a), base);

        /* an idle log recovers to nothing; an undo overflow is refused */
        assert_int_equal(pa_tx_recover(&a, log), 0);
        pa_ptr *bigp = &r->obj;
        assert_int_equal(pa_alloc(&a, 16384, bigp), 0);
        char *big = pa_get(&a, *bigp);
        memset(big, 0, 16384);
        pa_persist(&a, big, 16384);
        pa_tx_begin(tx);
        for (unsigned i = 0; i < 1100; i++) (void)pa_tx_add(tx, big + 8 * i, 8);
        assert_true(tx->overflow);
        assert_int_equal(pa_tx_commit(tx), -1);
        assert_int_equal(pa_tx_recover(&a, log), 1);
        assert_int_equal(pa_free(&a, bigp), 0);
        assert_int_equal(count_objects(&a), base);
        free(tx);
        pa_close(&a);
        pmt_rmdir(dir);
    }
}

/* A failed transaction rolled back before the next one (another thread's log)
 * runs: left to recovery, its change would be restored from the next
 * transaction's image (recovery undoes the logs one after the other). */
static void test_tx_abort(void **st)
{
    (void)st;
    for (unsigned ki = 0; ki < 3; ki++) {
        char dir[256];
        pmt_tmpdir(dir, sizeof dir, "apps-txabort");
        pa_heap a;
        open_heap(&a, pkinds[ki], dir, true);
        tx_root *r = a.root;
        pa_ptr *lp = &r->log, *lq = &r->obj; /* two logs: two threads' */
        assert_int_equal(pa_alloc(&a, sizeof(pa_txlog), lp), 0);
        assert_int_equal(pa_alloc(&a, sizeof(pa_txlog), lq), 0);
        pa_txlog *l1 = pa_get(&a, *lp), *l2 = pa_get(&a, *lq);
        memset(l1, 0, sizeof *l1);
        memset(l2, 0, sizeof *l2);
        pa_persist(&a, l1, sizeof *l1);
        pa_persist(&a, l2, sizeof *l2);
        pa_tx *t1 = malloc(sizeof *t1), *t2 = malloc(sizeof *t2);
        assert_non_null(t1);
        assert_non_null(t2);
        pa_tx_init(t1, &a, l1);
        pa_tx_init(t2, &a, l2);
        size_t base = count_objects(&a);
        /* thread 1: changes a word, allocates, then overflows its deferred frees */
        pa_tx_begin(t1);
        assert_int_equal(pa_tx_add(t1, r->word, sizeof r->word), 0);
        r->word[0] = 5;
        assert_non_null(pa_tx_alloc(t1, 64));
        pa_ptr none;
        memset(&none, 0, sizeof none);
        for (unsigned i = 0; i <= PA_TX_SLOTS; i++) (void)pa_tx_free(t1, none);
        assert_true(t1->overflow);
        assert_int_equal(pa_tx_commit(t1), -1);
        assert_int_equal(pa_tx_abort(t1), 0);
        assert_int_equal(r->word[0], 0);
        assert_int_equal(l1->state, 0);
        assert_int_equal(count_objects(&a), base);
        /* thread 2: changes the same word and crashes before its commit */
        pa_tx_begin(t2);
        assert_int_equal(pa_tx_add(t2, r->word, sizeof r->word), 0);
        r->word[0] = 6;
        assert_int_equal(pa_tx_recover(&a, l1), 0);
        assert_int_equal(pa_tx_recover(&a, l2), 1);
        assert_int_equal(r->word[0], 0);
        free(t1);
        free(t2);
        pa_close(&a);
        pmt_rmdir(dir);
    }
}

/* Every application, small, in process, every allocator, 1 and 2 threads. */
static void test_apps_inproc(void **st)
{
    (void)st;
    static const struct { const char *name; uint64_t n, ops, iters; } sz[] = {
        {"fptree", 1500, 3000, 10}, {"vacation", 128, 300, 0}, {"ackermann", 0, 0, 1}, {"nqueens", 6, 0, 2},
        {"cfrac", 2, 0, 1}, {"barnes", 256, 0, 2}, {"kruskal", 3000, 0, 0}, {"kv", 1000, 3000, 0},
    };
    for (unsigned i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        const pa_app *app = pa_app_find(sz[i].name);
        assert_non_null(app);
#ifdef NEARMEM_SANITIZED
        const unsigned nkinds = PA_NKINDS - 1; /* DRAM-malloc leaves its "persistent" objects at exit (LeakSanitizer) */
#else
        const unsigned nkinds = PA_NKINDS;
#endif
        for (unsigned k = 0; k < nkinds; k++)
            for (unsigned th = 1; th <= (app->mt && k <= PA_GC ? 2u : 1u); th++) { /* the suite runs PMDK at 2 */
                char dir[256];
                pmt_tmpdir(dir, sizeof dir, "apps-run");
                pa_run_opts o = {.app = app, .kind = (pa_kind)k, .cfg = {th, sz[i].n, sz[i].ops, sz[i].iters, 5 + th},
                                 .dir = dir, .pool = (size_t)24 << 20};
                pa_result r;
                pa_run_inproc(&o, &r);
                if (r.err) fail_msg("%s on %s, %u threads: %s", sz[i].name, pa_kind_name((pa_kind)k), th, r.msg);
                assert_true(r.seconds > 0 && r.app_ops > 0);
                if (k == PA_LOG || k == PA_GC) assert_true(r.pm_lines > 0);
                pa_remove(dir);
                rmdir(dir);
            }
    }
}

static void test_crash_apps(void **st)
{
    (void)st;
    const pa_crash_app *apps[] = {&pa_crash_fptree, &pa_crash_vacation};
    for (unsigned ai = 0; ai < 2; ai++)
        for (unsigned ki = 0; ki < 3; ki++) {
            char dir[256];
            pmt_tmpdir(dir, sizeof dir, "apps-crash");
            pa_crash_run r;
            memset(&r, 0, sizeof r);
            r.app = apps[ai];
            r.kind = pkinds[ki];
            r.points = 4;
            r.threads = 1 + (ai + ki) % 2;
            r.universe = ai ? 64 : 128;
            r.pool = (size_t)16 << 20;
            r.seed = nm_test_seed(31) + ai * 3 + ki;
            r.tmpdir = dir;
            uint64_t f = pa_crash_proc(&r);
            print_message("%s on %s: %llu crash points, %llu checked, %llu failures %s\n", apps[ai]->name, pa_kind_name(r.kind),
                          (unsigned long long)r.tried, (unsigned long long)r.checked, (unsigned long long)r.failures, r.first_failure);
            assert_int_equal(f, 0);
            assert_true(r.checked >= 2);
            if (r.kind == PA_GC) assert_int_equal(r.gc_checked, r.checked);
            rmdir(dir);
        }
}

/* Vacation: deleting a customer that holds more reservations than the undo log
 * has deferred-free slots for (2 per reservation) made every later deletion of
 * that customer fail; the crash campaign met it as children failing a
 * transaction. The customer reserves all 3 x 128 items here. */
static void test_vacation_big_customer(void **st)
{
    (void)st;
    for (unsigned ki = 0; ki < 3; ki++) {
        char dir[256], msg[300] = "";
        pmt_tmpdir(dir, sizeof dir, "apps-vcbig");
        pa_heap a;
        pa_open_opts o = {.kind = pkinds[ki], .dir = dir, .size = (size_t)32 << 20, .create = true, .persist = PMALLOC_PERSIST_CPU};
        if (pa_open(&a, &o, msg, sizeof msg)) fail_msg("pa_open: %s", msg);
        unsigned held = 0;
        int rc = pa_vacation_check_big_customer(&a, 128, &held, msg, sizeof msg);
        print_message("vacation on %s: customer with %u reservations deleted: %s\n", pa_kind_name(pkinds[ki]), held, rc ? msg : "ok");
        assert_int_equal(rc, 0);
        assert_true(held > 0);
        pa_close(&a);
        pa_remove(dir);
        rmdir(dir);
    }
}

static void test_suite_quick(void **st)
{
    (void)st;
    const char *bin = getenv("NEARMEM_BINARY_DIR");
    assert_non_null(bin);
    char json[256], cmd[1024];
    snprintf(json, sizeof json, "/tmp/nm-pmalloc-apps-%d.json", (int)getpid());
#ifdef NEARMEM_TSAN
    /* libpmemobj is not instrumented: ThreadSanitizer reports its internal synchronisation
     * as races when two threads allocate; the applications' 2-thread runs on PMAlloc are
     * covered in process (test_apps_inproc) */
    const char *extra = "--set threads=1";
#else
    const char *extra = "";
#endif
    snprintf(cmd, sizeof cmd, "%s/bin/nearmem-bench pmalloc-apps --quick --set reps=1 --set malloc=0 %s --json %s > /dev/null 2>&1", bin,
             extra, json);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(json, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(json);
    const char *sum = strstr(buf, "\"summary\"");
    assert_non_null(sum);
    static const char *const apps[] = {"fptree", "vacation", "ackermann", "nqueens", "cfrac", "barnes", "kruskal", "kv"};
    for (unsigned i = 0; i < 9; i++)
        for (unsigned g = 0; g < 2; g++) {
            char key[96], pat[128];
            if (i == 8) snprintf(key, sizeof key, g ? "app_speedup_gc_vs_pmdk_geomean" : "app_speedup_vs_pmdk_geomean");
            else snprintf(key, sizeof key, g ? "app_speedup_gc_vs_pmdk_%s" : "app_speedup_vs_pmdk_%s", apps[i]);
            snprintf(pat, sizeof pat, "\"%s\":", key);
            const char *at = strstr(sum, pat);
            if (!at) fail_msg("summary key %s missing", key);
            double v = strtod(at + strlen(pat), NULL);
            if (!isfinite(v) || v <= 0) fail_msg("%s = %g", key, v);
        }
}

int main(void)
{
    pa_force_pmem();
    if (getenv("NM_TEST_FILTER")) cmocka_set_test_filter(getenv("NM_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tx),
        cmocka_unit_test(test_tx_abort),
        cmocka_unit_test(test_apps_inproc),
        cmocka_unit_test(test_crash_apps),
        cmocka_unit_test(test_vacation_big_customer),
        cmocka_unit_test(test_suite_quick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
