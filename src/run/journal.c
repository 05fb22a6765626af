/* journal: see journal.h. */
#include "run/journal.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/cpu.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

/* "model name : AMD EPYC ..." of /proc/cpuinfo; NULL where there is none */
static json_t *cpu_name(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    char line[512];
    json_t *name = NULL;
    while (!name && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        char *v = colon + 1 + strspn(colon + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        name = json_string(v); /* NULL if not UTF-8: the report says it is unknown */
    }
    fclose(f);
    return name;
}

json_t *journal_machine(int threads, int ranks) {
    json_t *o = json_object();
    char host[256] = "";
    json_put(o, "cpu", cpu_name());
    json_put(o, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    if (gethostname(host, sizeof host - 1) == 0) json_put(o, "host", json_string(host));
    json_put(o, "openblas", json_string(openblas_get_corename()));
    const char *coretype = getenv("OPENBLAS_CORETYPE"), *picked = kernels_openblas_picked();
    if (picked) json_put(o, "openblas_chose", json_string(picked));
    else if (coretype) json_put(o, "openblas_coretype", json_string(coretype));
    json_put(o, "threads", json_integer(threads));
    json_put(o, "ranks", json_integer(ranks));
    return o;
}

/* counts[len] of one side; its token and unknown-token totals */
static json_t *lengths(const Seq *s, int n, int max_len, int unk_id, long long *tokens, long long *unk) {
    long long *count = xcalloc((size_t)max_len + 1, sizeof *count);
    for (int i = 0; i < n; i++) {
        int len = s[i].len < 0 ? 0 : s[i].len > max_len ? max_len : s[i].len;
        count[len]++;
        *tokens += s[i].len;
        for (int k = 0; k < s[i].len; k++) *unk += s[i].ids[k] == unk_id;
    }
    json_t *a = json_array();
    for (int len = 0; len <= max_len; len++) json_array_append_new(a, json_integer(count[len]));
    free(count);
    return a;
}

json_t *journal_split(const Corpus *c, int max_len, int unk_id) {
    json_t *o = json_object();
    long long st = 0, su = 0, tt = 0, tu = 0;
    json_put(o, "lines", json_integer(c->lines));
    json_put(o, "pairs", json_integer(c->n));
    json_put(o, "dropped_empty", json_integer(c->dropped_empty));
    json_put(o, "dropped_long", json_integer(c->dropped_long));
    json_put(o, "max_len", json_integer(max_len));
    json_t *sl = lengths(c->src, c->n, max_len, unk_id, &st, &su),
           *tl = lengths(c->tgt, c->n, max_len, unk_id, &tt, &tu);
    json_put(o, "src_tokens", json_integer(st));
    json_put(o, "tgt_tokens", json_integer(tt));
    json_put(o, "src_unk", json_integer(su));
    json_put(o, "tgt_unk", json_integer(tu));
    json_put(o, "src_lengths", sl);
    json_put(o, "tgt_lengths", tl);
    return o;
}

int journal_append(const char *dir, const char *file, json_t *line) {
    char path[4096], when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    json_put(line, "time", json_string(when));
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = json_dumps(line, JSON_WRITE_FLAGS);
    json_decref(line);
    int rc = text ? append_line(path, text, "cannot append to it")
                  : err_set("%s: a line that would not serialise", path);
    free(text);
    return rc;
}

int journal_begin(const Run *r, long long step, int ranks, const Corpus *train, const Corpus *valid,
                  size_t parameters) {
    const Config *cfg = &r->cfg;
    json_t *o = json_object(), *data = json_object();
    json_put(o, "event", json_string(step == 0 ? "start" : "resume"));
    json_put(o, "step", json_integer(step));
    json_put(o, "steps", json_integer(cfg->train.steps));
    json_put(o, "machine", journal_machine(cfg->train.threads, ranks));
    json_put(data, "tokenizer", json_string(tokenizer_name(cfg->data.tokenizer)));
    json_put(data, "src_vocab", json_integer(r->src_vocab.size));
    json_put(data, "tgt_vocab", json_integer(r->tgt_vocab.size));
    json_put(data, "shared_vocab", json_boolean(cfg->data.shared_vocab));
    json_put(data, "train", journal_split(train, cfg->data.max_len, VOCAB_UNK));
    if (valid) json_put(data, "valid", journal_split(valid, cfg->data.max_len, VOCAB_UNK));
    json_put(o, "data", data);
    json_put(o, "parameters", json_integer((json_int_t)parameters));
    return journal_append(cfg->run_dir, RUN_JOURNAL, o);
}

int journal_end(const char *dir, long long step, const char *how, int signal, const char *error, double seconds) {
    json_t *o = json_object();
    json_put(o, "event", json_string("end"));
    json_put(o, "step", json_integer(step));
    json_put(o, "how", json_string(how));
    if (strcmp(how, "stopped") == 0) json_put(o, "signal", json_integer(signal));
    if (error) json_put(o, "error", json_string(error));
    json_put(o, "seconds", json_fmt("%.3f", seconds));
    return journal_append(dir, RUN_JOURNAL, o);
}
