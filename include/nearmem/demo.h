/* The API a step of `nearmem demo` uses. A step is `int fn(nm_demo *d)`,
 * registered with nearmem_add_demo_step() in tools/demo/<component>/. It runs
 * its component on an embedded default (emulated PIM machine, a heap in a
 * temporary file, ...) in a second or two and says what it did in a few lines.
 * Return 0, or an nm_err code (the demo then fails). */
#ifndef NEARMEM_DEMO_H
#define NEARMEM_DEMO_H

typedef struct nm_demo nm_demo;

/* One indented line of output. */
void nm_demo_say(nm_demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A private temporary directory, removed when the demo ends. */
const char *nm_demo_tmpdir(nm_demo *d);
/* The seed of this run (--seed, default 1). */
unsigned long long nm_demo_seed(const nm_demo *d);
/* Path of the running nearmem executable (for steps that fork/exec helpers). */
const char *nm_demo_self(const nm_demo *d);

#endif
