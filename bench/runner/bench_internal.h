/* Runner-private view of nm_bench (suites see only include/nearmem/bench.h). */
#ifndef NEARMEM_BENCH_INTERNAL_H
#define NEARMEM_BENCH_INTERNAL_H

#include <stdio.h>
#include "nearmem/bench.h"

enum field_type { FIELD_NUM, FIELD_STR, FIELD_RAW };

typedef struct field {
    char *key;
    enum field_type type;
    double num;
    char *str;
} field;

typedef struct record {
    field *f;
    size_t n, cap;
} record;

struct nm_bench_row {
    record rec;
};

struct nm_bench {
    const char *suite;
    bool quick, quiet;
    unsigned threads;
    uint64_t seed;
    char **params; /* "key=value" */
    size_t nparams;
    char tmpdir[256];
    record config, summary;
    nm_bench_row **rows;
    size_t nrows, rows_cap;
};

void nm_bench_init(nm_bench *b, const char *suite);
void nm_bench_destroy(nm_bench *b);
void nm_bench_add_param(nm_bench *b, const char *kv);
/* Write the result JSON; the runner's own config entries come first. */
int nm_bench_write_json(const nm_bench *b, FILE *f);
void nm_bench_print_summary(const nm_bench *b, FILE *f);
void nm_bench_config_raw(nm_bench *b, const char *key, const char *json);

#endif
