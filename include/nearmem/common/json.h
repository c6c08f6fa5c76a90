/* A small streaming JSON writer: commas, nesting and string escaping are
 * handled for the caller. Non-finite numbers are written as null (JSON has no
 * NaN). Errors (unbalanced calls, nesting too deep) latch in `err`. */
#ifndef NEARMEM_COMMON_JSON_H
#define NEARMEM_COMMON_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "nearmem/common/error.h"

#define NM_JSON_MAX_DEPTH 32

typedef struct nm_json {
    FILE *f;
    int depth;
    bool pretty;
    bool need_comma[NM_JSON_MAX_DEPTH + 1];
    char kind[NM_JSON_MAX_DEPTH + 1];  /* '{' or '[' per level */
    bool after_key;
    nm_err err;
} nm_json;

void nm_json_init(nm_json *j, FILE *f, bool pretty);
void nm_json_begin_object(nm_json *j);
void nm_json_end_object(nm_json *j);
void nm_json_begin_array(nm_json *j);
void nm_json_end_array(nm_json *j);
void nm_json_key(nm_json *j, const char *key);
void nm_json_string(nm_json *j, const char *s);
void nm_json_number(nm_json *j, double v);
void nm_json_int(nm_json *j, int64_t v);
void nm_json_uint(nm_json *j, uint64_t v);
void nm_json_bool(nm_json *j, bool v);
void nm_json_null(nm_json *j);
/* Insert already-serialized JSON text as one value (caller guarantees validity). */
void nm_json_raw(nm_json *j, const char *json_text);
/* NM_OK when every container was closed and no misuse happened. */
nm_err nm_json_finish(nm_json *j);

/* Write `s` as a quoted, escaped JSON string. */
void nm_json_write_escaped(FILE *f, const char *s);

#endif
