#include "bench_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nearmem/common/fs.h"
#include "nearmem/common/json.h"

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "nearmem-bench: out of memory\n");
        exit(2);
    }
    return q;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "nearmem-bench: out of memory\n");
        exit(2);
    }
    return d;
}

/* Setting a key twice replaces the value, so suites may update a figure. */
static field *record_slot(record *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->f[i].key, key) == 0) {
            free(r->f[i].str);
            r->f[i].str = NULL;
            return &r->f[i];
        }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->f = xrealloc(r->f, r->cap * sizeof *r->f);
    }
    field *f = &r->f[r->n++];
    memset(f, 0, sizeof *f);
    f->key = xstrdup(key);
    return f;
}

static void record_num(record *r, const char *key, double v)
{
    field *f = record_slot(r, key);
    f->type = FIELD_NUM;
    f->num = v;
}

static void record_str(record *r, const char *key, const char *v, enum field_type t)
{
    field *f = record_slot(r, key);
    f->type = t;
    f->str = xstrdup(v);
}

static void record_free(record *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->f[i].key);
        free(r->f[i].str);
    }
    free(r->f);
    memset(r, 0, sizeof *r);
}

static void record_write(const record *r, nm_json *j)
{
    nm_json_begin_object(j);
    for (size_t i = 0; i < r->n; i++) {
        nm_json_key(j, r->f[i].key);
        switch (r->f[i].type) {
        case FIELD_NUM: nm_json_number(j, r->f[i].num); break;
        case FIELD_STR: nm_json_string(j, r->f[i].str); break;
        case FIELD_RAW: nm_json_raw(j, r->f[i].str); break;
        }
    }
    nm_json_end_object(j);
}

void nm_bench_init(nm_bench *b, const char *suite)
{
    memset(b, 0, sizeof *b);
    b->suite = suite;
    b->seed = 42;
}

void nm_bench_destroy(nm_bench *b)
{
    if (b->tmpdir[0]) nm_rmtree(b->tmpdir);
    record_free(&b->config);
    record_free(&b->summary);
    for (size_t i = 0; i < b->nrows; i++) {
        record_free(&b->rows[i]->rec);
        free(b->rows[i]);
    }
    free(b->rows);
    for (size_t i = 0; i < b->nparams; i++) free(b->params[i]);
    free(b->params);
}

void nm_bench_add_param(nm_bench *b, const char *kv)
{
    b->params = xrealloc(b->params, (b->nparams + 1) * sizeof *b->params);
    b->params[b->nparams++] = xstrdup(kv);
}

bool nm_bench_quick(const nm_bench *b) { return b->quick; }
unsigned nm_bench_threads(const nm_bench *b) { return b->threads; }
uint64_t nm_bench_seed(const nm_bench *b) { return b->seed; }

const char *nm_bench_param(const nm_bench *b, const char *key, const char *dflt)
{
    size_t kl = strlen(key);
    /* Last --set wins. */
    for (size_t i = b->nparams; i-- > 0;)
        if (strncmp(b->params[i], key, kl) == 0 && b->params[i][kl] == '=') return b->params[i] + kl + 1;
    return dflt;
}

double nm_bench_param_num(const nm_bench *b, const char *key, double dflt)
{
    const char *v = nm_bench_param(b, key, NULL);
    if (!v) return dflt;
    char *end;
    double d = strtod(v, &end);
    return end != v ? d : dflt;
}

const char *nm_bench_tmpdir(nm_bench *b)
{
    if (!b->tmpdir[0] && nm_tmpdir_create(b->tmpdir, sizeof b->tmpdir, "nearmem-bench") != NM_OK) return NULL;
    return b->tmpdir;
}

void nm_bench_config_num(nm_bench *b, const char *key, double v) { record_num(&b->config, key, v); }
void nm_bench_config_str(nm_bench *b, const char *key, const char *v) { record_str(&b->config, key, v, FIELD_STR); }
void nm_bench_config_raw(nm_bench *b, const char *key, const char *json) { record_str(&b->config, key, json, FIELD_RAW); }

void nm_bench_plot_spec(nm_bench *b, const char *json_panels)
{
    record_str(&b->config, "plot", json_panels, FIELD_RAW);
}

nm_bench_row *nm_bench_row_new(nm_bench *b)
{
    if (b->nrows == b->rows_cap) {
        b->rows_cap = b->rows_cap ? 2 * b->rows_cap : 16;
        b->rows = xrealloc(b->rows, b->rows_cap * sizeof *b->rows);
    }
    nm_bench_row *r = xrealloc(NULL, sizeof *r);
    memset(r, 0, sizeof *r);
    b->rows[b->nrows++] = r;
    return r;
}

void nm_bench_row_num(nm_bench_row *r, const char *key, double v) { record_num(&r->rec, key, v); }
void nm_bench_row_str(nm_bench_row *r, const char *key, const char *v) { record_str(&r->rec, key, v, FIELD_STR); }
void nm_bench_summary_num(nm_bench *b, const char *key, double v) { record_num(&b->summary, key, v); }
void nm_bench_summary_str(nm_bench *b, const char *key, const char *v) { record_str(&b->summary, key, v, FIELD_STR); }

double nm_bench_summary_get(const nm_bench *b, const char *key)
{
    for (size_t i = 0; i < b->summary.n; i++)
        if (b->summary.f[i].type == FIELD_NUM && strcmp(b->summary.f[i].key, key) == 0) return b->summary.f[i].num;
    return NAN;
}

void nm_bench_progress(nm_bench *b, const char *fmt, ...)
{
    if (b->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", b->suite);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int nm_bench_write_json(const nm_bench *b, FILE *f)
{
    nm_json j;
    nm_json_init(&j, f, true);
    nm_json_begin_object(&j);
    nm_json_key(&j, "suite");
    nm_json_string(&j, b->suite);
    nm_json_key(&j, "config");
    record_write(&b->config, &j);
    nm_json_key(&j, "rows");
    nm_json_begin_array(&j);
    for (size_t i = 0; i < b->nrows; i++) record_write(&b->rows[i]->rec, &j);
    nm_json_end_array(&j);
    nm_json_key(&j, "summary");
    record_write(&b->summary, &j);
    nm_json_end_object(&j);
    fputc('\n', f);
    return nm_json_finish(&j);
}

void nm_bench_print_summary(const nm_bench *b, FILE *f)
{
    fprintf(f, "%s: %zu rows\n", b->suite, b->nrows);
    for (size_t i = 0; i < b->summary.n; i++) {
        const field *x = &b->summary.f[i];
        if (x->type == FIELD_NUM) fprintf(f, "  %-40s %.6g\n", x->key, x->num);
        else fprintf(f, "  %-40s %s\n", x->key, x->str);
    }
}
