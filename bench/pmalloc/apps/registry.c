/* The applications, in the order of the paper's figures (32, then 34/35 (a)-(f)), then KV. */
#include <string.h>

#include "pm_apps.h"

extern const pa_app pa_app_fptree, pa_app_vacation, pa_app_ackermann, pa_app_nqueens, pa_app_cfrac, pa_app_barnes,
    pa_app_kruskal, pa_app_kv;

const pa_app *const pa_apps[] = {&pa_app_fptree, &pa_app_vacation, &pa_app_ackermann, &pa_app_nqueens,
                                 &pa_app_cfrac, &pa_app_barnes, &pa_app_kruskal, &pa_app_kv, NULL};

const pa_app *pa_app_find(const char *name)
{
    for (unsigned i = 0; pa_apps[i]; i++)
        if (strcmp(pa_apps[i]->name, name) == 0) return pa_apps[i];
    return NULL;
}
