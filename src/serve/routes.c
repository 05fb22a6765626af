/* routes: see routes.h. */
#include "serve/routes.h"

#include <string.h>

#include "serve/work.h"

static const Route routes[] = {
    {"GET", "/", ROUTE_PAGE, -1, NULL, NULL, "the live page: type a sentence, see its translation and attention"},
    {"GET", "/v1/health", ROUTE_HEALTH, -1, NULL, NULL, "{\"status\", \"queued\", \"working\"}"},
    {"GET", "/v1/model", ROUTE_MODEL, -1, NULL, NULL, "the model, its checkpoints and vocabularies"},
    {"GET", "/favicon.ico", ROUTE_ICON, -1, NULL, NULL, NULL},
    {"POST", "/v1/translate", ROUTE_JOB, API_TRANSLATE, work_translate_request, runner_translate,
     "translate sentences: the n-best list of each"},
    {"POST", "/v1/attention", ROUTE_JOB, API_ATTENTION, work_attention_request, runner_attention,
     "one sentence's translation and every attention map (qkv attention --text)"},
    {"POST", "/v1/explain", ROUTE_JOB, API_EXPLAIN, work_explain_request, runner_explain,
     "where each target word came from (qkv explain --text)"},
    {"POST", "/v1/whatif", ROUTE_JOB, API_WHATIF, work_whatif_request, runner_whatif,
     "heads off, a query pinned, the lens, the beam tree (qkv whatif)"},
    {"POST", "/v1/patch", ROUTE_JOB, API_PATCH, work_patch_request, runner_patch,
     "which heads and positions carry a difference (qkv patch)"},
};
enum { N_ROUTES = sizeof routes / sizeof *routes };

const Route *route_find(const char *path) {
    for (int i = 0; i < N_ROUTES; i++)
        if (strcmp(routes[i].path, path) == 0) return &routes[i];
    return NULL;
}

const Route *route_of_api(int api) {
    for (int i = 0; i < N_ROUTES; i++)
        if (routes[i].answer == ROUTE_JOB && routes[i].api == api) return &routes[i];
    return NULL;
}

void routes_list(StrBuf *sb) {
    const char *methods[] = {"GET", "POST"};
    for (int k = 0; k < 2; k++) {
        int listed = 0;
        sb_printf(sb, "%s%s ", k ? " and " : "", methods[k]);
        for (int i = 0; i < N_ROUTES; i++) {
            if (!routes[i].about || strcmp(routes[i].method, methods[k]) != 0) continue;
            listed++;
            sb_printf(sb, "%s%s", listed == 1 ? "" : ", ", routes[i].path);
        }
    }
}

void routes_print(FILE *out) {
    fprintf(out, "\nroutes:\n");
    for (int i = 0; i < N_ROUTES; i++)
        if (routes[i].about) fprintf(out, "  %-4s %-15s %s\n", routes[i].method, routes[i].path, routes[i].about);
}
