/* A plain program (system malloc API) meant to run under LD_PRELOAD of
 * libspeedmalloc.so: threads with cross-thread frees, realloc chains, aligned
 * allocations, content checks on every block, thread churn and fork. Exits 0
 * only if every check held and the allocator in use is SpeedMalloc. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nearmem/speedmalloc.h"

#define NT 4
#define SLOTS 1024
#define BOX 128

typedef struct { unsigned char *p; size_t size; unsigned char fill; } blk;
static struct { pthread_mutex_t lock; blk b[NT][BOX]; unsigned n[NT]; } mail = {.lock = PTHREAD_MUTEX_INITIALIZER};
static int iters = 200000;
static int failures;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static size_t rsize(uint64_t *s)
{
    unsigned k = (unsigned)(rng_next(s) % 1000);
    if (k < 700) return rng_next(s) % 200;
    if (k < 970) return 200 + rng_next(s) % 8000;
    if (k < 998) return 8192 + rng_next(s) % 200000;
    return 300000 + rng_next(s) % 3000000;
}
static int check(const blk *b)
{
    for (size_t i = 0; i < b->size; i++)
        if (b->p[i] != b->fill) return 1;
    return 0;
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t s = 0x9E3779B97F4A7C15ull * (id + 1);
    blk *slot = calloc(SLOTS, sizeof *slot);
    int bad = 0;
    for (int it = 0; it < iters; it++) {
        blk *b = &slot[rng_next(&s) % SLOTS];
        unsigned op = (unsigned)(rng_next(&s) % 10);
        if (b->p) {
            bad += check(b);
            if (op < 5) { free(b->p); b->p = NULL; }
            else if (op < 7) {
                size_t ns = rsize(&s) + 1;
                unsigned char *q = realloc(b->p, ns);
                if (!q) { bad++; continue; }
                for (size_t k = 0; k < (ns < b->size ? ns : b->size); k++) if (q[k] != b->fill) { bad++; break; }
                b->p = q;
                b->size = ns;
                b->fill = (unsigned char)rng_next(&s);
                memset(b->p, b->fill, ns);
            } else {
                unsigned to = (unsigned)(rng_next(&s) % NT);
                pthread_mutex_lock(&mail.lock);
                if (mail.n[to] < BOX) { mail.b[to][mail.n[to]++] = *b; b->p = NULL; }
                pthread_mutex_unlock(&mail.lock);
            }
        } else {
            size_t size = rsize(&s), align = 16;
            if (op < 6) b->p = malloc(size);
            else if (op < 7) {
                b->p = calloc(size, 1);
                if (b->p) for (size_t k = 0; k < size; k++) if (b->p[k]) { bad++; break; }
            } else if (op < 8) {
                align = (size_t)1 << (3 + rng_next(&s) % 13);
                void *q = NULL;
                if (posix_memalign(&q, align, size)) { bad++; continue; }
                b->p = q;
            } else {
                align = (size_t)1 << (rng_next(&s) % 14);
                b->p = aligned_alloc(align, size);
            }
            if (!b->p) { bad++; continue; }
            if ((uintptr_t)b->p % align || malloc_usable_size(b->p) < size) bad++;
            b->size = size;
            b->fill = (unsigned char)rng_next(&s);
            memset(b->p, b->fill, size);
        }
        if ((it & 127) == 0) {
            blk in[BOX];
            pthread_mutex_lock(&mail.lock);
            unsigned n = mail.n[id];
            memcpy(in, mail.b[id], n * sizeof(blk));
            mail.n[id] = 0;
            pthread_mutex_unlock(&mail.lock);
            for (unsigned k = 0; k < n; k++) { bad += check(&in[k]); free(in[k].p); }
        }
    }
    for (unsigned i = 0; i < SLOTS; i++) if (slot[i].p) { bad += check(&slot[i]); free(slot[i].p); }
    free(slot);
    __atomic_fetch_add(&failures, bad, __ATOMIC_RELAXED);
    return NULL;
}

static void *short_lived(void *arg)
{
    free(arg); /* a block from the joining thread: a cross-thread free */
    void *v[64];
    for (int i = 0; i < 64; i++) { v[i] = malloc((size_t)(i * 37) % 3000 + 1); memset(v[i], i, (size_t)(i * 37) % 3000 + 1); }
    for (int i = 0; i < 64; i++) free(v[i]);
    return malloc(200); /* freed by the joiner after this thread's queues were recycled */
}

/* --pthread-exit: main() ends with pthread_exit, so the process must end when its last
 * thread does (glibc then exits with status 0). Under SpeedMalloc the server thread is one
 * more thread; it must not keep the process alive. The last thread here never allocates. */
static void *pe_alloc(void *arg)
{
    char *gift = arg; /* main's block, freed after main has gone */
    unsigned bad = gift[0] != 'g';
    free(gift);
    for (int i = 0; i < 20000; i++) {
        unsigned char *p = malloc((size_t)(i % 500) + 1);
        p[0] = (unsigned char)i;
        bad += p[0] != (unsigned char)i;
        free(p);
    }
    if (bad) { fprintf(stderr, "preload_stress: wrong contents after main's pthread_exit\n"); exit(1); }
    return NULL;
}
static void *pe_quiet(void *arg)
{
    pthread_t *other = arg;
    pthread_join(*other, NULL);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* outlive every client */
    static const char msg[] = "preload_stress: pthread-exit ok\n";
    if (write(1, msg, sizeof msg - 1) != (ssize_t)(sizeof msg - 1)) exit(1);
    return NULL;
}
static int pthread_exit_mode(void)
{
    char *gift = malloc(64);
    gift[0] = 'g';
    static pthread_t a, q;
    if (pthread_create(&a, NULL, pe_alloc, gift) != 0 || pthread_create(&q, NULL, pe_quiet, &a) != 0) return 1;
    pthread_detach(q);
    pthread_exit(NULL);
}

/* --unshare: unshare(CLONE_NEWUSER) needs a single-threaded process; the server thread must
 * step aside for it (it made the call fail with EINVAL), and allocation goes on afterwards,
 * from new threads too. The test script runs this only where `unshare -U` works at all. */
static int un_running; /* the threads keep allocating while this is set (besides 200 rounds) */
static void *un_work(void *arg)
{
    (void)arg;
    unsigned bad = 0;
    void *v[256];
    for (int r = 0; r < 200 || __atomic_load_n(&un_running, __ATOMIC_ACQUIRE); r++) {
        for (int i = 0; i < 256; i++) { v[i] = malloc((size_t)(i * 13) % 2000 + 1); memset(v[i], i, (size_t)(i * 13) % 2000 + 1); }
        for (int i = 0; i < 256; i++) { bad += ((unsigned char *)v[i])[0] != (unsigned char)i; free(v[i]); }
    }
    return (void *)(uintptr_t)bad;
}
static int unshare_mode(void)
{
    unsigned bad = 0;
    for (int round = 0; round < 2; round++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, un_work, NULL);
        for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); bad += (unsigned)(uintptr_t)r; }
        if (round == 0 && unshare(CLONE_NEWUSER) != 0) { perror("preload_stress: unshare(CLONE_NEWUSER)"); return 1; }
    }
    /* while other threads allocate, the call fails (the process is multi-threaded, as without
     * SpeedMalloc); the server stops and restarts under them each time, and nothing is lost */
    pthread_t t[2];
    __atomic_store_n(&un_running, 1, __ATOMIC_RELEASE); /* they must still run during every call */
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, un_work, NULL);
    for (int k = 0; k < 50; k++)
        if (unshare(CLONE_NEWUSER) == 0 || errno != EINVAL) { fprintf(stderr, "preload_stress: unshare with threads running: not EINVAL\n"); return 1; }
    __atomic_store_n(&un_running, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) { void *r; pthread_join(t[i], &r); bad += (unsigned)(uintptr_t)r; }
    if (bad) { fprintf(stderr, "preload_stress: %u wrong blocks around unshare\n", bad); return 1; }
    puts("preload_stress: unshare ok");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--pthread-exit") == 0) return pthread_exit_mode();
    if (argc > 1 && strcmp(argv[1], "--unshare") == 0) return unshare_mode();
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) iters = 30000;
    int (*get)(nm_speedmalloc_stats *) = (int (*)(nm_speedmalloc_stats *))dlsym(RTLD_DEFAULT, "nm_speedmalloc_get_stats");
    if (!get) { fprintf(stderr, "preload_stress: SpeedMalloc is not the malloc of this process\n"); return 2; }
    nm_speedmalloc_stats before, after;
    get(&before);

    pthread_t t[NT];
    for (unsigned i = 0; i < NT; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < NT; i++) pthread_join(t[i], NULL);
    for (unsigned to = 0; to < NT; to++)
        for (unsigned k = 0; k < mail.n[to]; k++) { failures += check(&mail.b[to][k]); free(mail.b[to][k].p); }

    /* thread churn: slots are recycled, not leaked */
    for (int round = 0; round < 200; round++) {
        pthread_t x;
        char *gift = malloc(100);
        pthread_create(&x, NULL, short_lived, gift);
        void *ret;
        pthread_join(x, &ret);
        free(ret);
    }
    /* fork: the child allocates (its server restarts) and runs a real program */
    pid_t pid = fork();
    if (pid == 0) {
        char *p = malloc(1000);
        memset(p, 1, 1000);
        free(p);
        execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "preload_stress: fork child failed\n"); failures++; }

    get(&after);
    if (after.invalid_frees != before.invalid_frees || after.double_frees != before.double_frees) {
        fprintf(stderr, "preload_stress: unexpected invalid/double frees\n");
        failures++;
    }
    if (after.clients_registered < before.clients_registered + NT + 200 || after.clients_active > 16) {
        fprintf(stderr, "preload_stress: thread slots not recycled (%llu active)\n", (unsigned long long)after.clients_active);
        failures++;
    }
    if (failures) { fprintf(stderr, "preload_stress: %d check failures\n", failures); return 1; }
    printf("preload_stress: ok (%llu refills, %llu fast mallocs)\n", (unsigned long long)after.refill_blocks,
           (unsigned long long)after.fast_mallocs);
    return 0;
}
