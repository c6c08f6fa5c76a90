/* nearmem: the project's main tool.
 *
 *   nearmem demo [STEP...] [--seed N]   a short tour of every built component
 *   nearmem list                        the demo steps, the components and the commands
 *   nearmem version
 *   nearmem COMMAND ARGS...             a component's command (registered with
 *                                       nearmem_add_tool_command, include/nearmem/tool.h),
 *                                       e.g. nearmem pmalloc info|check|create|remove|dump HEAPDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_internal.h"
#include "nearmem/common/error.h"
#include "nearmem/common/timer.h"
#include "nearmem/tool.h"

struct nm_registry_entry_demo_step {
    const char *name;
    int (*fn)(nm_demo *);
};
extern const struct nm_registry_entry_demo_step nm_registry_demo_step[];

struct nm_registry_entry_tool_command {
    const char *name;
    int (*fn)(nm_tool *);
};
extern const struct nm_registry_entry_tool_command nm_registry_tool_command[];

/* Every component of nearmem, in tour order, with the paper it implements.
 * A component whose demo step is not registered is reported as not built. */
static const struct {
    const char *step;
    const char *what;
} k_components[] = {
    {"common", "common core: bitmaps, size classes, PRNG, statistics, JSON"},
    {"pim", "emulated UPMEM PIM machine with a cycle cost model"},
    {"pim_malloc", "PIM-malloc: dynamic MRAM allocation on DPUs"},
    {"pim_cache", "PIM-CACHE: content-aware host-to-DPU copy"},
    {"pmalloc", "PMAlloc: crash-consistent persistent-memory allocator"},
    {"speedmalloc", "SpeedMalloc: malloc with metadata on a support core"},
    {"bmem", "bmem: bit-contiguous 2-D allocator for Micron IMI DRAM"},
};

static const struct nm_registry_entry_demo_step *find_step(const char *name)
{
    for (const struct nm_registry_entry_demo_step *e = nm_registry_demo_step; e->name; e++)
        if (strcmp(e->name, name) == 0) return e;
    return NULL;
}

static const char *component_what(const char *step)
{
    for (size_t i = 0; i < sizeof k_components / sizeof k_components[0]; i++)
        if (strcmp(k_components[i].step, step) == 0) return k_components[i].what;
    return step;
}

static int run_step(const struct nm_registry_entry_demo_step *e, nm_demo *d)
{
    printf("== %s: %s\n", e->name, component_what(e->name));
    fflush(stdout);
    nm_clear_errmsg();
    uint64_t t0 = nm_now_ns();
    int rc = e->fn(d);
    double s = nm_ns_to_s(nm_now_ns() - t0);
    nm_demo_cleanup(d);
    if (rc != 0) {
        const char *msg = nm_last_errmsg();
        printf("   FAILED: %s%s%s\n", nm_strerror((nm_err)rc), *msg ? ": " : "", msg);
        return 1;
    }
    printf("   ok (%.2f s host time)\n", s);
    return 0;
}

static int cmd_demo(int argc, char **argv, const char *self)
{
    nm_demo d = {.out = stdout, .seed = 1, .self = self};
    const char *only[64];
    int nonly = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) d.seed = strtoull(argv[++i], NULL, 0);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "nearmem demo: unknown option %s\n", argv[i]);
            return 2;
        } else if (nonly < 64) only[nonly++] = argv[i];
    }
    int failed = 0, ran = 0;
    printf("nearmem %s: a tour of the components built here\n\n", NEARMEM_VERSION);
    if (nonly) {
        for (int i = 0; i < nonly; i++) {
            const struct nm_registry_entry_demo_step *e = find_step(only[i]);
            if (!e) {
                fprintf(stderr, "nearmem demo: no step '%s' (see `nearmem list`)\n", only[i]);
                return 2;
            }
            failed += run_step(e, &d);
            ran++;
        }
    } else {
        for (const struct nm_registry_entry_demo_step *e = nm_registry_demo_step; e->name; e++) {
            failed += run_step(e, &d);
            ran++;
        }
        for (size_t i = 0; i < sizeof k_components / sizeof k_components[0]; i++)
            if (!find_step(k_components[i].step))
                printf("== %s: %s\n   not built yet\n", k_components[i].step, k_components[i].what);
    }
    printf("\n%d step%s run, %d failed\n", ran, ran == 1 ? "" : "s", failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "demo";
    if (strcmp(cmd, "demo") == 0) return cmd_demo(argc > 1 ? argc - 2 : 0, argv + 2, argv[0]);
    if (strcmp(cmd, "list") == 0) {
        for (size_t i = 0; i < sizeof k_components / sizeof k_components[0]; i++)
            printf("%-12s %-9s %s\n", k_components[i].step, find_step(k_components[i].step) ? "built" : "not built",
                   k_components[i].what);
        printf("\ncommands:");
        for (const struct nm_registry_entry_tool_command *e = nm_registry_tool_command; e->name; e++) printf(" %s", e->name);
        printf(" (nearmem COMMAND with no arguments: its usage)\n");
        return 0;
    }
    if (strcmp(cmd, "version") == 0) {
        printf("nearmem %s\n", NEARMEM_VERSION);
        return 0;
    }
    for (const struct nm_registry_entry_tool_command *e = nm_registry_tool_command; e->name; e++)
        if (strcmp(e->name, cmd) == 0) {
            nm_tool t = {.argc = argc - 2, .argv = argv + 2, .self = argv[0]};
            return e->fn(&t);
        }
    fprintf(stderr, "usage: nearmem [demo [STEP...] [--seed N] | list | version | COMMAND ARGS...]\ncommands:");
    for (const struct nm_registry_entry_tool_command *e = nm_registry_tool_command; e->name; e++) fprintf(stderr, " %s", e->name);
    fprintf(stderr, "\n");
    return 2;
}
