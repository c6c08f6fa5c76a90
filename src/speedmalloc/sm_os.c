/* SpeedMalloc: helpers that never allocate (futex, clocks, mmap, write(2)),
 * the bootstrap arena and the once-per-kind error reports.
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

#ifdef NEARMEM_TSAN
unsigned long sm_tsan_fence_word;
#endif

/* ---- helpers without libc allocation ----------------------------------- */
long sm_futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}
void sm_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    sm_futex(addr, FUTEX_WAIT_PRIVATE, val, timeout_ns ? &ts : NULL);
}
void sm_futex_wake(uint32_t *addr) { sm_futex(addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL); }
uint64_t sm_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
void *sm_os_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
/* Small text output for reports and statistics: write(2), never stdio. */
size_t sm_fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}
void sm_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) { if (w < 0 && errno == EINTR) continue; return; }
        s += w; n -= (size_t)w;
    }
}
void sm_write_str(int fd, const char *s) { sm_write_all(fd, s, strlen(s)); }
void sm_write_hex(int fd, uintptr_t v)
{
    char b[20] = "0x";
    int n = 2;
    for (int sh = 60; sh >= 0; sh -= 4) {
        unsigned d = (unsigned)(v >> sh) & 15u;
        if (n == 2 && d == 0 && sh) continue;
        b[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    sm_write_all(fd, b, (size_t)n);
}

/* ---- bootstrap arena: allocations made while this thread is initializing --- */
static _Alignas(64) unsigned char sm_boot_arena[256 << 10];
size_t sm_boot_used;
bool sm_in_boot(const void *p)
{
    return (const unsigned char *)p >= sm_boot_arena && (const unsigned char *)p < sm_boot_arena + sizeof sm_boot_arena;
}
void *sm_boot_alloc(size_t size, size_t align)
{
    if (align < 16) align = 16;
    size_t used = LOAD_RLX(&sm_boot_used), at;
    do { /* a compare-and-swap on the bootstrap arena only, never on allocator metadata */
        at = (used + 16 + align - 1) & ~(align - 1);
        if (size > sizeof sm_boot_arena || at + size > sizeof sm_boot_arena) { errno = ENOMEM; return NULL; }
    } while (!__atomic_compare_exchange_n(&sm_boot_used, &used, at + size, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    ((size_t *)(sm_boot_arena + at))[-1] = size;
    return sm_boot_arena + at;
}
size_t sm_boot_size(const void *p) { return ((const size_t *)p)[-1]; }

/* ---- error reports: once per kind, never corrupt, never abort ------------- */
void sm_report(uint32_t *once, const char *what, const void *p)
{
    if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED)) return;
    int e = errno;
    sm_write_str(2, "speedmalloc: ");
    sm_write_str(2, what);
    sm_write_str(2, " ");
    sm_write_hex(2, (uintptr_t)p);
    sm_write_str(2, " ignored (reported once; see nm_speedmalloc_get_stats)\n");
    errno = e;
}
/* How many of the process's threads other than the caller are still running, from
 * /proc/self/task (a zombie, i.e. a thread group leader that called pthread_exit while
 * other threads ran on, stays listed there and is not counted); -1 if that cannot be read.
 * Raw syscalls into stack buffers: the server thread calls it, and it never allocates. */
/* "/proc/self/task/<tid><suffix>" into out (64 bytes). */
static void task_path(char *out, long tid, const char *suffix)
{
    static const char pre[] = "/proc/self/task/";
    memcpy(out, pre, sizeof pre - 1);
    size_t k = sizeof pre - 1 + sm_fmt_u64(out + sizeof pre - 1, (uint64_t)tid);
    size_t n = strlen(suffix);
    memcpy(out + k, suffix, n + 1);
}
/* Waits (up to ~1 s) until thread tid has left the kernel's thread list, i.e. its
 * /proc/self/task entry is gone (or /proc cannot be read: nothing better to wait on). */
void sm_os_wait_thread_gone(int tid)
{
    char path[64];
    task_path(path, tid, "");
    for (int i = 0; i < 20000; i++) { /* the thread's last steps in the kernel: microseconds */
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return;
        syscall(SYS_close, fd);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}
int sm_os_other_threads(void)
{
    int dir = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    long self = (long)syscall(SYS_gettid);
    int live = 0;
    _Alignas(8) char buf[2048];
    for (;;) {
        long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n < 0) { live = -1; break; }
        if (n == 0) break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            off += reclen;
            long tid = 0;
            if (*name < '0' || *name > '9') continue;
            for (const char *q = name; *q >= '0' && *q <= '9'; q++) tid = tid * 10 + (*q - '0');
            if (tid == self) continue;
            char path[64], st[512];
            task_path(path, tid, "/stat");
            int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue; /* gone meanwhile */
            long m = syscall(SYS_read, fd, st, sizeof st - 1);
            syscall(SYS_close, fd);
            if (m <= 0) continue;
            st[m] = 0;
            const char *rp = strrchr(st, ')'); /* "tid (comm) S ...": comm may hold spaces or ')' */
            char state = rp && rp[1] == ' ' ? rp[2] : '?';
            if (state != 'Z' && state != 'X' && state != 'x') live++;
        }
    }
    syscall(SYS_close, dir);
    return live;
}
uint64_t sm_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

