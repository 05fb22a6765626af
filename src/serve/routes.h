/* routes: every path qkv serve answers, one row each: the method, the path, who answers
 * (the server itself, or a job a worker runs), the request's kind (api.h: the body parser
 * and the worker's runner are chosen by it), the work estimate that sets its cost class
 * (work.h), and one line for people. The dispatch (http.c), the 404's list, `qkv serve
 * --help` and the lanes of the queue (jobs.c) read this table: a new endpoint is a row,
 * its parser's kind and its runner. */
#ifndef QKV_SERVE_ROUTES_H
#define QKV_SERVE_ROUTES_H

#include <stdio.h>

#include "run/run.h"
#include "serve/api.h"
#include "serve/runners.h"
#include "serve/work.h"
#include "util/text.h"

typedef enum {
    ROUTE_PAGE,   /* the live page */
    ROUTE_HEALTH, /* the queue's counts */
    ROUTE_MODEL,  /* the model's description */
    ROUTE_ICON,   /* a browser's question for an icon: nothing, said without a 404 */
    ROUTE_JOB,    /* a JSON body parsed as api, answered by a worker */
} RouteAnswer;

typedef struct {
    const char *method; /* "GET" (HEAD answered alike) or "POST" */
    const char *path;
    RouteAnswer answer;
    int api; /* ROUTE_JOB: the request's kind (API_TRANSLATE, ...) */
    /* ROUTE_JOB: the most the request may cost on r's model, from its text as counted in z
     * (what decides its lane) */
    double (*gflop)(const Run *r, const ApiRequest *q, const WorkSize *z);
    Runner run;        /* ROUTE_JOB: what a worker does with it (runners.h) */
    const char *about; /* one line; NULL: left out of the lists (the icon) */
} Route;

/* The row of path, or NULL. */
const Route *route_find(const char *path);
/* The row of a request kind (every kind has one). */
const Route *route_of_api(int api);
/* "GET /, /v1/health, /v1/model and POST /v1/translate, ..., /v1/patch": the listed rows. */
void routes_list(StrBuf *sb);
/* One line a listed row ("  POST /v1/explain      where each word came from ..."). */
void routes_print(FILE *out);

#endif
