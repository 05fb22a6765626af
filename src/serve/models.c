/* models: see models.h. */
#include "serve/models.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention/attnmap.h"
#include "heads/headreport.h"
#include "run/files.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

/* util/err's message is one buffer for the process: every serve thread that can set it
 * (a load here, a mask parsed by the HTTP thread) holds this lock from the failing call
 * to reading the message. Loads hold it throughout, so one loads at a time. */
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
void served_error_lock(void) { pthread_mutex_lock(&error_lock); }
void served_error_unlock(void) { pthread_mutex_unlock(&error_lock); }

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* name as the API and the page show it: well-formed UTF-8 (a file name's bad byte a
 * U+FFFD, as every label of qkv), cut to whole characters within n bytes. */
static void shown_name(char *out, size_t n, const char *name) {
    char *t = attnmap_utf8(name);
    size_t len = strlen(t);
    if (len >= n) {
        len = n - 1;
        while (len > 0 && ((unsigned char)t[len] & 0xC0) == 0x80) len--; /* not inside a character */
    }
    memcpy(out, t, len);
    out[len] = '\0';
    free(t);
}

static void add(ServedModels *s, const char *file_name, const char *path) {
    char name[sizeof s->ck->name];
    shown_name(name, sizeof name, file_name);
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ck[i].name, name) == 0) return;
    s->ck = xrealloc(s->ck, sizeof(ServedCheckpoint) * (size_t)(s->n + 1));
    ServedCheckpoint *c = &s->ck[s->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->path, sizeof c->path, "%s", path);
    pthread_mutex_init(&c->lock, NULL);
}

/* "dir/x.safetensors" -> "x" into name; 0 when the file is not one. */
static int weights_name(const char *file, char *name, size_t n) {
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    size_t len = strlen(base), ext = strlen(".safetensors");
    if (len <= ext || strcmp(base + len - ext, ".safetensors") != 0 || len - ext >= n) return 0;
    memcpy(name, base, len - ext);
    name[len - ext] = '\0';
    return 1;
}

/* The run's exported weights beside its config: "<dir>/<name>.safetensors", those that
 * carry their vocabularies (a step checkpoint or `qkv grads`' file copied there does not,
 * and could never be loaded from there). Read at start-up, before any thread. */
static void add_exports(ServedModels *s, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char name[96];
        if (weights_name(e->d_name, name, sizeof name))
            names = xrealloc(names, sizeof(char *) * (size_t)(n + 1)), names[n++] = xstrdup(name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof(char *), by_name);
    for (int i = 0; i < n; i++) {
        char path[CONFIG_PATH_MAX + 96];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, names[i]);
        CkptMeta meta;
        if (ckpt_peek(path, &meta) != 0) /* said, not hidden: the server starts without it */
            fprintf(stderr, "qkv: warning: %s not offered: %s\n", path, err_msg());
        else {
            if (meta.src_vocab) add(s, names[i], path);
            ckpt_meta_free(&meta);
        }
        free(names[i]);
    }
    free(names);
}

int served_open(ServedModels *s, const char *path) {
    memset(s, 0, sizeof *s);
    Run first;
    if (run_open(&first, path) != 0) return -1;
    char name[96];
    if (!weights_name(first.weights, name, sizeof name)) snprintf(name, sizeof name, "%s", first.which);
    add(s, name, first.weights);
    model_keep_step_weights(&first.model); /* a served model's weights never change */
    s->ck[0].run = first, s->ck[0].state = 1;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char **steps;
        int n = run_step_checkpoints(path, &steps);
        char best[CONFIG_PATH_MAX + 96];
        snprintf(best, sizeof best, "%s/ckpt/best.safetensors", path);
        if (access(best, R_OK) == 0) add(s, "best", best);
        for (int i = n - 1; i >= 0; i--)
            if (weights_name(steps[i], name, sizeof name)) add(s, name, steps[i]);
        free_lines(steps, n);
        add_exports(s, path);
    }
    s->fallback = 0;
    return 0;
}

int served_find(const ServedModels *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ck[i].name, name) == 0) return i;
    return -1;
}

const Run *served_get(ServedModels *s, int i, char *err, size_t errn) {
    ServedCheckpoint *c = &s->ck[i];
    pthread_mutex_lock(&c->lock);
    if (c->state == 0) {
        served_error_lock();
        if (run_open(&c->run, c->path) == 0) c->state = 1, model_keep_step_weights(&c->run.model);
        else c->state = -1, snprintf(c->error, sizeof c->error, "%s", err_msg());
        served_error_unlock();
    }
    int ok = c->state == 1;
    pthread_mutex_unlock(&c->lock);
    if (!ok) snprintf(err, errn, "checkpoint \"%s\" cannot be loaded: %s", c->name, c->error);
    return ok ? &c->run : NULL;
}

const Run *served_peek(ServedModels *s, int i) {
    ServedCheckpoint *c = &s->ck[i];
    if (pthread_mutex_trylock(&c->lock) != 0) return NULL; /* a load under way */
    int ok = c->state == 1;
    pthread_mutex_unlock(&c->lock);
    return ok ? &c->run : NULL;
}

void served_close(ServedModels *s) {
    for (int i = 0; i < s->n; i++) {
        if (s->ck[i].state == 1) run_close(&s->ck[i].run);
        pthread_mutex_destroy(&s->ck[i].lock);
    }
    free(s->ck);
    memset(s, 0, sizeof *s);
}

int served_heads(const ServedModels *s, char *path, size_t n, json_t **heads) {
    *heads = NULL;
    snprintf(path, n, "%s/" RUN_HEADS_DIR "/heads.json", s->ck[s->fallback].run.dir);
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    json_t *root = heads_read(path);
    if (!root) return -1;
    json_t *out = json_object(), *model = json_object_get(root, "model"), *set = json_object_get(root, "set");
    json_put(out, "heads", json_incref(json_object_get(root, "heads")));
    json_t *order = json_object_get(root, "default_order"); /* the grid's score; absent before it was measured */
    if (json_is_string(order)) json_put(out, "default_order", json_incref(order));
    char *shown = attnmap_utf8(path);
    json_put(out, "file", json_string(shown));
    free(shown);
    json_put(out, "step", json_incref(json_object_get(model, "step")));
    json_put(out, "set", json_incref(json_object_get(set, "src")));
    json_put(out, "sentences", json_incref(json_object_get(set, "sentences")));
    json_decref(root);
    *heads = out;
    return 1;
}
