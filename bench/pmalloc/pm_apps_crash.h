/* Crash checks of the persistent applications (FPTree, Vacation) on every
 * allocator: a child process opens the heap (the allocator's recovery), runs the
 * application's recovery, signals that it is running and then runs random
 * operations (1 or 2 threads) until the parent kills it with SIGKILL at a random
 * moment (a quarter of the points without waiting for the signal, so some kills
 * land in the recoveries). Every third crash is left for the next child to
 * recover; the others are reopened and checked by the parent: the application's
 * structure is consistent (its own check) and every object it reaches is
 * allocated; PMAlloc-LOG and PMDK: the allocated objects are exactly the
 * reachable ones (nothing leaks); PMAlloc-GC: right after its recovery every
 * allocated object is reachable from the root by the conservative rule (the GC
 * collected everything else); objects its mark kept through stale words are
 * counted (gc_retained_*). */
#ifndef PM_APPS_CRASH_H
#define PM_APPS_CRASH_H

#include "pm_apps.h"

typedef struct pa_crash_app {
    const char *name;
    /* After pa_open: the application's recovery (creates the structure in a
     * new heap). *recovered = objects its recovery freed or operations it undid. */
    void *(*open)(pa_heap *a, uint64_t universe, int *recovered, char *msg, size_t cap);
    /* One random operation of thread tid (threads run concurrently). */
    int (*step)(void *st, unsigned tid, nm_rng *r, char *msg, size_t cap);
    /* Check the structure; list every object reachable from it but the root area (malloc'd array). */
    int (*reachable)(void *st, const void ***objs, size_t *n, char *msg, size_t cap);
    void (*close)(void *st);
} pa_crash_app;

extern const pa_crash_app pa_crash_fptree, pa_crash_vacation;

/* Vacation: a customer that reserved every item of a fresh database of
 * `relations` relations is deleted in one transaction; 0 if the deletion commits
 * and the database checks. *held = the reservations it held (a test hook). */
int pa_vacation_check_big_customer(pa_heap *a, uint64_t relations, unsigned *held, char *msg, size_t cap);

typedef struct pa_crash_run {
    const pa_crash_app *app;
    pa_kind kind;
    unsigned points;
    unsigned threads;   /* workload threads in the child */
    uint64_t universe;  /* key / id range of the workload */
    uint64_t seed;
    size_t pool;
    const char *tmpdir; /* must exist */
    /* results (added to) */
    uint64_t tried, checked, failures;
    uint64_t app_recovered;  /* objects freed / transactions undone by the application's recoveries */
    uint64_t gc_freed;       /* PMAlloc-GC: blocks its recovery mark freed */
    uint64_t wal_redone;     /* PMAlloc: operations the WAL completed */
    uint64_t objects;        /* objects live at the checked points (sum) */
    uint64_t gc_checked;     /* PMAlloc-GC: checks that everything no root reaches was collected */
    uint64_t gc_retained_now, gc_retained_max; /* PMAlloc-GC: allocated objects the application cannot
                                                * reach, kept by stale words (see pa_crash_check_dir) */
    char first_failure[512];
} pa_crash_run;

/* The process-crash campaign; returns the number of failures. */
uint64_t pa_crash_proc(pa_crash_run *r);
/* Reopen and check the heap in dir (and close it cleanly). 0 if consistent. */
int pa_crash_check_dir(pa_crash_run *r, const char *dir);

#endif
