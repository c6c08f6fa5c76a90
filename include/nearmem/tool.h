/* A command of the nearmem tool: `nearmem NAME ARGS...` runs `int fn(nm_tool *t)`,
 * registered with nearmem_add_tool_command(NAME ... FUNCTION fn ...) in
 * tools/commands/<component>/ (the tool links whatever registered). The
 * function parses t->argv[0..argc) (the words after NAME) and returns the
 * process exit status: 0 success, 1 the checked thing is damaged or failed,
 * 2 usage, 3 another error. */
#ifndef NEARMEM_TOOL_H
#define NEARMEM_TOOL_H

typedef struct nm_tool {
    int argc;
    char **argv;
    const char *self; /* path of the nearmem executable */
} nm_tool;

#endif
