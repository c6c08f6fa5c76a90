#include "nearmem/common/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

void nm_json_init(nm_json *j, FILE *f, bool pretty)
{
    *j = (nm_json){.f = f, .pretty = pretty};
}

static void newline(nm_json *j)
{
    if (!j->pretty) return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

/* Called before every value: emits the comma and indentation it needs, and
 * checks that objects get keys and arrays do not. */
static void before_value(nm_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0 && j->kind[j->depth] == '{') {
        j->err = NM_ESTATE; /* a value in an object needs a key first */
        return;
    }
    if (j->depth == 0 && j->need_comma[0]) {
        j->err = NM_ESTATE; /* only one top-level value */
        return;
    }
    if (j->need_comma[j->depth]) fputc(',', j->f);
    if (j->depth > 0) newline(j);
    j->need_comma[j->depth] = true;
}

static void open(nm_json *j, char kind)
{
    before_value(j);
    if (j->depth >= NM_JSON_MAX_DEPTH) {
        j->err = NM_ERANGE;
        return;
    }
    fputc(kind, j->f);
    j->depth++;
    j->kind[j->depth] = kind;
    j->need_comma[j->depth] = false;
}

static void close_(nm_json *j, char kind)
{
    if (j->depth == 0 || j->kind[j->depth] != kind || j->after_key) {
        j->err = NM_ESTATE;
        return;
    }
    bool had_items = j->need_comma[j->depth];
    j->depth--;
    if (had_items) newline(j);
    fputc(kind == '{' ? '}' : ']', j->f);
}

void nm_json_begin_object(nm_json *j) { open(j, '{'); }
void nm_json_end_object(nm_json *j) { close_(j, '{'); }
void nm_json_begin_array(nm_json *j) { open(j, '['); }
void nm_json_end_array(nm_json *j) { close_(j, '['); }

void nm_json_write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

void nm_json_key(nm_json *j, const char *key)
{
    if (j->depth == 0 || j->kind[j->depth] != '{' || j->after_key) {
        j->err = NM_ESTATE;
        return;
    }
    if (j->need_comma[j->depth]) fputc(',', j->f);
    newline(j);
    j->need_comma[j->depth] = true;
    nm_json_write_escaped(j->f, key);
    fputs(j->pretty ? ": " : ":", j->f);
    j->after_key = true;
}

void nm_json_string(nm_json *j, const char *s)
{
    before_value(j);
    nm_json_write_escaped(j->f, s);
}

void nm_json_number(nm_json *j, double v)
{
    before_value(j);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    /* Integers print exactly; other values with 17 significant digits round-trip. */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) fprintf(j->f, "%.0f", v);
    else {
        /* Shortest of 15 or 17 significant digits that reads back exactly. */
        char buf[40];
        snprintf(buf, sizeof buf, "%.15g", v);
        if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
        fputs(buf, j->f);
    }
}

void nm_json_int(nm_json *j, int64_t v)
{
    before_value(j);
    fprintf(j->f, "%" PRId64, v);
}

void nm_json_uint(nm_json *j, uint64_t v)
{
    before_value(j);
    fprintf(j->f, "%" PRIu64, v);
}

void nm_json_bool(nm_json *j, bool v)
{
    before_value(j);
    fputs(v ? "true" : "false", j->f);
}

void nm_json_null(nm_json *j)
{
    before_value(j);
    fputs("null", j->f);
}

void nm_json_raw(nm_json *j, const char *json_text)
{
    before_value(j);
    fputs(json_text, j->f);
}

nm_err nm_json_finish(nm_json *j)
{
    if (j->err) return j->err;
    if (j->depth != 0 || j->after_key) return NM_ESTATE;
    if (ferror(j->f)) return NM_EIO;
    return NM_OK;
}
