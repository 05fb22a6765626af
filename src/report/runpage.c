/* runpage: see runpage.h. Reads the run's files, each once, into a Story; then writes the
 * page's sections into its frame, report.html (which holds the style and the charts' read-out
 * under the pointer, the page's one script), each where its {{name}} stands; the attention and
 * heads sections are the viewer page itself (attnview.html) in frames, not a copy of it. */
#include "report/runpage.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention/attnmap.h"
#include "attention/watch.h"
#include "config.h"
#include "decode/search.h"
#include "heads/headreport.h"
#include "report/chart.h"
#include "run/curves.h"
#include "run/files.h"
#include "run/journal.h"
#include "run/run.h"
#include "score/sacrebleu.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/page_fill.h"
#include "util/text.h"

/* the page's frame: src/report/report.html, built in as a string (Makefile) */
extern const char report_html[];

/* A JSON-lines file: its objects, how many lines were not one, whether it was there (or
 * readable: what is wrong with it, when something is there that is no file to read). */
typedef struct {
    json_t **v;
    int n, bad, absent;
    char why[256];
} JsonLines;

typedef struct {
    const char *dir;
    const RunPageOptions *o;
    Config cfg;
    int have_cfg;
    char cfg_error[512];
    JsonLines metrics, journal, evals, aligns, samples;
    long holder; /* the pid training the run now, 0 for none */
} Story;

static void read_jsonl(const char *dir, const char *file, JsonLines *out) {
    char path[CONFIG_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct stat st;
    *out = (JsonLines){0};
    if (lstat(path, &st) != 0) {
        out->absent = 1;
        return;
    }
    /* a FIFO, a directory, a device (or a link to one) is refused at once, never waited on */
    char *text = read_file_max(path, CURVES_METRICS_MAX, NULL);
    if (!text) {
        out->absent = 1;
        size_t skip = strncmp(err_msg(), path, strlen(path)) == 0 && err_msg()[strlen(path)] == ':' ? strlen(path) + 2
                                                                                                    : 0;
        snprintf(out->why, sizeof out->why, "%s", err_msg() + skip);
        return;
    }
    int cap = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *o = json_loads(line, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            out->bad++; /* a line cut by a kill, or not ours */
            continue;
        }
        if (out->n == cap) cap = cap ? 2 * cap : 64, out->v = xrealloc(out->v, sizeof(json_t *) * (size_t)cap);
        out->v[out->n++] = o;
    }
    free(text);
}

static void free_jsonl(JsonLines *l) {
    for (int i = 0; i < l->n; i++) json_decref(l->v[i]);
    free(l->v);
}

static double num(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static const char *str(const json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

/* HTML text that keeps its line breaks (sb_append_xml drops control bytes) */
static void text(StrBuf *sb, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '\n' || *p == '\t') sb_append(sb, p, 1);
        else if (*p == '\'') sb_append(sb, "&#39;", 5);
        else {
            char one[2] = {*p, 0};
            sb_append_xml(sb, one);
        }
    }
}

/* "<file> is empty", or that none of its lines could be read: it is not empty then */
static void no_records(StrBuf *sb, const char *file, const JsonLines *l) {
    if (l->bad == 0) sb_printf(sb, "%s is empty", file);
    else
        sb_printf(sb, "%s holds %d line%s and no record qkv wrote (a line cut by a kill, or another program's)", file,
                  l->bad, l->bad == 1 ? "" : "s");
}

/* "<file> is missing", or what is wrong with what is there */
static void absence(StrBuf *sb, const char *file, const JsonLines *l) {
    if (!l->why[0]) {
        sb_printf(sb, "%s is missing", file);
        return;
    }
    sb_printf(sb, "%s could not be read: ", file);
    text(sb, l->why);
}

static void duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "unknown");
    else if (s < 60) snprintf(buf, n, "%.0f s", s);
    else if (s < 3600) snprintf(buf, n, "%d min %02d s", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%d h %02d min", (int)s / 3600, ((int)s % 3600) / 60);
}

/* the last journal line of one of the events (NULL for none) */
static json_t *last_event(const Story *st, const char *a, const char *b) {
    for (int i = st->journal.n - 1; i >= 0; i--) {
        const char *e = str(st->journal.v[i], "event");
        if (e && ((a && strcmp(e, a) == 0) || (b && strcmp(e, b) == 0))) return st->journal.v[i];
    }
    return NULL;
}

static json_t *last_metrics(const Story *st) { return st->metrics.n ? st->metrics.v[st->metrics.n - 1] : NULL; }

/* ---- header ------------------------------------------------------------------------------ */

/* running, finished, or stopped at step N; then how the last process ended when it was not
 * by finishing: the journal's last line is its "end" (a signal, a divergence, a failure),
 * or, when that line is missing, the process never wrote it (killed). minutes: train.minutes,
 * 0 for none (a run its budget ended says "done" before its steps) */
static void status_line(StrBuf *sb, const Story *st, double step, int steps, double minutes) {
    const json_t *end = last_event(st, "end", NULL);
    int said_how = end && end == st->journal.v[st->journal.n - 1];
    const char *how = said_how ? str(end, "how") : NULL;
    int running = st->o->running || st->holder;
    int finished = (steps && step >= steps) || (minutes > 0 && how && strcmp(how, "done") == 0);
    if (running) sb_printf(sb, "<b>running</b>");
    else if (finished) sb_printf(sb, "<b>finished</b>");
    else sb_printf(sb, "<b>stopped at step %.0f</b>", step);
    if (minutes > 0) sb_printf(sb, ": step %.0f of at most %d in a budget of %g minutes", step, steps, minutes);
    else sb_printf(sb, ": step %.0f of %d", step, steps);
    if (running && !st->o->running) sb_printf(sb, " (process %ld is training it)", st->holder);
    if (running || finished || st->journal.absent) return;
    if (how && strcmp(how, "done") != 0) {
        sb_printf(sb, "; the last ended: "), text(sb, how);
        if (json_is_integer(json_object_get(end, "signal")))
            sb_printf(sb, " by signal %lld", json_integer_value(json_object_get(end, "signal")));
        if (str(end, "error")) sb_printf(sb, ": "), text(sb, str(end, "error"));
    } else if (!said_how) {
        sb_printf(sb, "; the last training process ended without saying how (killed?)");
    }
}

static void header(StrBuf *sb, const void *story) {
    const Story *st = story;
    const json_t *last = last_metrics(st), *end = last_event(st, "end", NULL),
                 *began = last_event(st, "start", "resume");
    double step = last ? num(last, "step") : 0, epoch = last ? num(last, "epoch") : NAN;
    if (end && (!last || num(end, "step") > step)) step = num(end, "step");
    sb_printf(sb, "<h1>qkv run: ");
    text(sb, st->have_cfg ? st->cfg.name : st->dir);
    sb_printf(sb, "</h1>\n<p class=\"status\">");
    status_line(sb, st, step, st->have_cfg ? st->cfg.train.steps : 0, st->have_cfg ? st->cfg.train.minutes : 0);
    if (isfinite(epoch)) sb_printf(sb, ", epoch %.2f", epoch);
    char wall[48];
    duration(wall, sizeof wall, last ? num(last, "elapsed_s") : NAN);
    sb_printf(sb, "; %s of training", wall);
    sb_printf(sb, "</p>\n<p class=\"machine\">");
    const json_t *m = began ? json_object_get(began, "machine") : NULL;
    if (m) {
        text(sb, str(m, "cpu") ? str(m, "cpu") : "an unknown CPU");
        sb_printf(sb, ", %lld cores; OpenBLAS ", json_integer_value(json_object_get(m, "cores")));
        text(sb, str(m, "openblas") ? str(m, "openblas") : "?");
        sb_printf(sb, " kernels");
        if (str(m, "openblas_coretype"))
            sb_printf(sb, " (OPENBLAS_CORETYPE="), text(sb, str(m, "openblas_coretype")), sb_printf(sb, ")");
        else if (str(m, "openblas_chose"))
            sb_printf(sb, " (chosen by qkv; OpenBLAS chose "), text(sb, str(m, "openblas_chose")), sb_printf(sb, ")");
        sb_printf(sb, "; %lld training thread%s", json_integer_value(json_object_get(m, "threads")),
                  json_integer_value(json_object_get(m, "threads")) == 1 ? "" : "s");
        if (json_integer_value(json_object_get(m, "ranks")) > 1)
            sb_printf(sb, " x %lld MPI ranks", json_integer_value(json_object_get(m, "ranks")));
        if (str(m, "host")) sb_printf(sb, "; host "), text(sb, str(m, "host"));
        sb_printf(sb, " (the "), text(sb, str(began, "event"));
        sb_printf(sb, " of step %.0f, ", num(began, "step"));
        text(sb, str(began, "time")), sb_printf(sb, ")");
    } else {
        sb_printf(sb, "The machine is unknown: ");
        if (st->journal.why[0]) absence(sb, RUN_JOURNAL, &st->journal), sb_printf(sb, ".");
        else sb_printf(sb, "the run has no journal.jsonl (runs trained before it existed).");
    }
    sb_printf(sb, "</p>\n<p class=\"where\">Run directory <code>");
    text(sb, st->dir);
    sb_printf(sb, "</code>.</p>\n");
}

/* ---- setup: the config, the data -------------------------------------------------------- */

/* config_text's parts into the page: a key that differs from its default marked */
typedef struct {
    StrBuf body;
    int changed;
} ConfigMarks;

static void mark_part(void *ctx, const char *part, int changed) {
    ConfigMarks *m = ctx;
    if (part[0] == '#') { /* the file's comment line: not a key */
        const char *nl = strchr(part, '\n');
        part = nl ? nl + 1 : "";
    }
    if (!part[0]) return;
    m->changed += changed;
    if (!changed) {
        text(&m->body, part);
        return;
    }
    /* the mark closes before the last line break: each marked line ends with it */
    size_t n = strlen(part), body = n && part[n - 1] == '\n' ? n - 1 : n;
    char *copy = xstrdup(part);
    copy[body] = '\0';
    sb_printf(&m->body, "<mark>");
    text(&m->body, copy);
    sb_printf(&m->body, "</mark>%s", body < n ? "\n" : "");
    free(copy);
}

static void config_section(StrBuf *sb, const Story *st) {
    sb_printf(sb, "<h3>Config</h3>\n");
    if (!st->have_cfg) {
        sb_printf(sb, "<p class=\"missing\">config.yaml could not be read: ");
        text(sb, st->cfg_error);
        sb_printf(sb, "</p>\n");
        return;
    }
    ConfigMarks m = {0};
    if (config_text_parts(&st->cfg, RUN_CONFIG, mark_part, &m) != 0) {
        sb_printf(sb, "<p class=\"missing\">the config could not be printed: ");
        text(sb, err_msg());
        sb_printf(sb, "</p>\n");
    } else {
        sb_printf(sb, "<p>%d key%s differ from the defaults (marked).", m.changed, m.changed == 1 ? "" : "s");
        if (st->cfg.data.valid.src[0]) /* which measure chose ckpt/best.safetensors */
            sb_printf(sb, " The best checkpoint is the best by validation %s (train.best_by).",
                      st->cfg.train.best_by == BEST_BY_BLEU ? "BLEU" : "loss");
        sb_printf(sb, "</p>\n<pre class=\"config\">");
        sb_append(sb, m.body.buf ? m.body.buf : "", m.body.len);
        sb_printf(sb, "</pre>\n");
    }
    sb_free(&m.body);
}

static void split_row(StrBuf *sb, const char *name, const json_t *s) {
    if (!s) return;
    double st = num(s, "src_tokens"), tt = num(s, "tgt_tokens");
    sb_printf(sb,
              "<tr><td>%s</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f (over %.0f tokens)</td><td>%.0f / "
              "%.0f</td><td>%.3f%% / %.3f%%</td></tr>\n",
              name, num(s, "lines"), num(s, "pairs"), num(s, "dropped_empty"), num(s, "dropped_long"),
              num(s, "max_len"), st, tt, st > 0 ? 100 * num(s, "src_unk") / st : 0,
              tt > 0 ? 100 * num(s, "tgt_unk") / tt : 0);
}

static void histogram(StrBuf *sb, const char *title, const json_t *lengths, const char *colour) {
    int n = (int)json_array_size(lengths);
    if (n <= 0) return;
    long long *c = xcalloc((size_t)n, sizeof *c);
    for (int i = 0; i < n; i++) c[i] = json_integer_value(json_array_get(lengths, (size_t)i));
    chart_bars(sb, title, c, n, colour);
    free(c);
}

static void data_section(StrBuf *sb, const Story *st) {
    sb_printf(sb, "<h3>Data</h3>\n");
    const json_t *began = last_event(st, "start", "resume"), *d = began ? json_object_get(began, "data") : NULL;
    if (!d) {
        sb_printf(sb, "<p class=\"missing\">No data summary: ");
        if (st->journal.why[0]) absence(sb, RUN_JOURNAL, &st->journal);
        else
            sb_printf(sb, "journal.jsonl %s (it is written when training starts)",
                      st->journal.absent ? "is missing" : "holds no start");
        sb_printf(sb, ".</p>\n");
        return;
    }
    sb_printf(sb, "<p>Tokenizer <b>"), text(sb, str(d, "tokenizer"));
    sb_printf(sb, "</b>; vocabularies: %.0f source, %.0f target tokens (%s)", num(d, "src_vocab"), num(d, "tgt_vocab"),
              json_is_true(json_object_get(d, "shared_vocab")) ? "shared" : "separate");
    if (isfinite(num(began, "parameters"))) sb_printf(sb, "; %.2fM parameters", num(began, "parameters") / 1e6);
    sb_printf(sb, ".</p>\n<table><tr><th>split</th><th>lines</th><th>pairs kept</th><th>dropped: an empty side</th>"
                  "<th>dropped: too long</th><th>tokens (source / target)</th><th>unknown tokens</th></tr>\n");
    split_row(sb, "train", json_object_get(d, "train"));
    split_row(sb, "valid", json_object_get(d, "valid"));
    sb_printf(sb, "</table>\n<div class=\"row\">\n");
    const json_t *tr = json_object_get(d, "train");
    histogram(sb, "training source lengths (tokens)", json_object_get(tr, "src_lengths"), "#3b528b");
    histogram(sb, "training target lengths (tokens)", json_object_get(tr, "tgt_lengths"), "#e6550d");
    sb_printf(sb, "</div>\n");
}

/* ---- curves ------------------------------------------------------------------------------ */

static void curves_section(StrBuf *sb, const void *story) {
    const Story *st = story;
    if (st->metrics.absent || st->metrics.n == 0) {
        sb_printf(sb, "<p class=\"missing\">No metrics yet: ");
        if (st->metrics.absent) absence(sb, RUN_METRICS, &st->metrics);
        else no_records(sb, RUN_METRICS, &st->metrics);
        sb_printf(sb, ".</p>\n");
        return;
    }
    if (st->metrics.bad)
        sb_printf(sb,
                  "<p class=\"missing\">%d line%s of metrics.jsonl could not be read (a line cut by a kill?) and "
                  "%s left out.</p>\n",
                  st->metrics.bad, st->metrics.bad == 1 ? "" : "s", st->metrics.bad == 1 ? "is" : "are");
    Series loss = {0}, vloss = {0}, ppl = {0}, bleu = {0}, lr = {0}, tps = {0}, epochs = {0};
    double x1 = 0, prev_epoch = 0;
    for (int i = 0; i < st->metrics.n; i++) {
        const json_t *o = st->metrics.v[i];
        double step = num(o, "step");
        if (!isfinite(step)) continue;
        x1 = fmax(x1, step);
        if (isfinite(num(o, "loss"))) series_push(&loss, step, num(o, "loss"));
        if (isfinite(num(o, "valid_loss"))) series_push(&vloss, step, num(o, "valid_loss"));
        if (isfinite(num(o, "valid_ppl"))) series_push(&ppl, step, num(o, "valid_ppl"));
        if (isfinite(num(o, "valid_bleu"))) series_push(&bleu, step, num(o, "valid_bleu"));
        if (isfinite(num(o, "lr"))) series_push(&lr, step, num(o, "lr"));
        if (isfinite(num(o, "tokens_per_s"))) series_push(&tps, step, num(o, "tokens_per_s"));
        double e = num(o, "epoch");
        if (isfinite(e) && floor(e) > floor(prev_epoch) && floor(e) >= 1) series_push(&epochs, step, floor(e));
        if (isfinite(e)) prev_epoch = e;
    }
    double *resumes = xcalloc((size_t)st->journal.n + 1, sizeof(double));
    int nr = 0;
    for (int i = 0; i < st->journal.n; i++)
        if (str(st->journal.v[i], "event") && strcmp(str(st->journal.v[i], "event"), "resume") == 0)
            resumes[nr++] = num(st->journal.v[i], "step");
    ChartAxis ax = {x1, &epochs, resumes, nr};
    sb_printf(sb,
              "<p>Against the step; epochs are marked along the top%s. Point at a panel for its values.</p>\n"
              "<div class=\"row\">\n",
              nr ? ", resumes by dashed red lines" : "");
    const ChartLine l1[2] = {{&loss, "training loss (label-smoothed)", "#3b528b", 0},
                             {&vloss, "validation loss (NLL)", "#e6550d", 1}};
    chart_panel(sb, "loss", &ax, l1, 2);
    const ChartLine l2[1] = {{&ppl, "validation perplexity", "#e6550d", 1}};
    chart_panel(sb, "validation perplexity", &ax, l2, 1);
    const ChartLine l3[1] = {{&bleu, "validation BLEU (greedy)", "#31a354", 1}};
    chart_panel(sb, "validation BLEU", &ax, l3, 1);
    const ChartLine l4[1] = {{&lr, "learning rate", "#756bb1", 0}};
    chart_panel(sb, "learning rate", &ax, l4, 1);
    const ChartLine l5[1] = {{&tps, "tokens/s", "#636363", 0}};
    chart_panel(sb, "throughput (tokens/s)", &ax, l5, 1);
    sb_printf(sb, "</div>\n");
    if (!bleu.n) sb_printf(sb, "<p class=\"note\">No validation BLEU: the run did not set train.valid_bleu.</p>\n");
    free(resumes);
    series_free(&loss), series_free(&vloss), series_free(&ppl), series_free(&bleu), series_free(&lr);
    series_free(&tps), series_free(&epochs);
}

/* ---- evaluations and samples ----------------------------------------------------------- */

static const char *base_name(const char *path) {
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

/* The search options of an eval record that are not translate's defaults (records older
 * than these keys have none of them) */
static void search_beyond_defaults(StrBuf *sb, const json_t *e) {
    DecodeOptions d = decode_defaults();
    double a = num(e, "max_len_a"), b = num(e, "max_len_b"), n = num(e, "no_repeat_ngram");
    if ((!isnan(a) && a != d.max_len_a) || (!isnan(b) && b != d.max_len_b))
        sb_printf(sb, ", at most %g x source + %g tokens", isnan(a) ? d.max_len_a : a, isnan(b) ? d.max_len_b : b);
    if (!isnan(n) && n > 0) sb_printf(sb, ", no repeated %.0f-gram", n);
    if (json_is_false(json_object_get(e, "replace_unk"))) sb_printf(sb, ", &lt;unk&gt; kept");
}

/* "No <what>: " and why there is no record in file l, then the command that adds one */
static void none_yet(StrBuf *sb, const char *what, const char *file, const JsonLines *l, const char *command) {
    sb_printf(sb, "<p class=\"missing\">No %s: ", what);
    if (l->why[0]) absence(sb, file, l);
    else if (l->absent) sb_printf(sb, "%s is missing", file);
    else no_records(sb, file, l);
    if (!l->why[0]) sb_printf(sb, " (<code>%s</code> adds a line)", command);
    sb_printf(sb, ".</p>\n");
}

/* qkv align --gold's records: the default reading's scores, and the best of the readings
 * scored with it (a head, a layer, a method's other reading) */
static void alignments(StrBuf *sb, const Story *st) {
    sb_printf(sb, "<h3>Alignments</h3>\n");
    if (st->aligns.n == 0) {
        none_yet(sb, "alignment scores", RUN_ALIGN, &st->aligns, "qkv align RUN --src F --tgt F --gold F");
        return;
    }
    sb_printf(sb, "<table><tr><th>checkpoint</th><th>step</th><th>gold</th><th>pairs</th><th>reading (the "
                  "default)</th><th>precision</th><th>recall</th><th>AER</th><th>words unaligned</th><th>best "
                  "reading</th></tr>\n");
    for (int i = 0; i < st->aligns.n; i++) {
        const json_t *a = st->aligns.v[i], *rows = json_object_get(a, "readings"), *best = NULL;
        for (size_t k = 0; k < json_array_size(rows); k++)
            if (!best || num(json_array_get(rows, k), "aer") < num(best, "aer")) best = json_array_get(rows, k);
        sb_printf(sb, "<tr><td>");
        text(sb, base_name(str(a, "weights")));
        sb_printf(sb, "</td><td>%.0f</td><td>", num(a, "step"));
        text(sb, base_name(str(a, "gold")));
        sb_printf(sb, "</td><td>%.0f</td><td>", num(a, "pairs"));
        text(sb, str(a, "default"));
        sb_printf(sb, " (--method "), text(sb, str(a, "method") ? str(a, "method") : "?");
        sb_printf(sb, ")</td><td>%.3f</td><td>%.3f</td><td><b>%.3f</b></td><td>", num(a, "precision"), num(a, "recall"),
                  num(a, "aer"));
        if (isfinite(num(a, "target_words")))
            sb_printf(sb, "%.0f of %.0f", num(a, "unaligned"), num(a, "target_words"));
        else sb_printf(sb, "none (--null off)");
        sb_printf(sb, "</td><td>");
        if (best) text(sb, str(best, "name")), sb_printf(sb, ": %.3f", num(best, "aer"));
        sb_printf(sb, "</td></tr>\n");
    }
    sb_printf(sb, "</table>\n");
    if (st->aligns.bad)
        sb_printf(sb, "<p class=\"missing\">%d line(s) of " RUN_ALIGN " could not be read.</p>\n", st->aligns.bad);
}

/* qkv eval's records: BLEU, chrF and NLL of a test set, with the search that gave them */
static void bleu_table(StrBuf *sb, const Story *st) {
    if (st->evals.n == 0) {
        none_yet(sb, "evaluations", RUN_EVAL, &st->evals, "qkv eval RUN --src F --ref F");
        return;
    }
    sb_printf(sb, "<table><tr><th>checkpoint</th><th>step</th><th>test set</th><th>sentences</th><th>BLEU</th>"
                  "<th>chrF</th><th>NLL</th><th>search</th><th>sentences/s</th></tr>\n");
    for (int i = 0; i < st->evals.n; i++) {
        const json_t *e = st->evals.v[i];
        sb_printf(sb, "<tr><td>");
        text(sb, base_name(str(e, "weights")));
        sb_printf(sb, "</td><td>%.0f</td><td>", num(e, "step"));
        text(sb, base_name(str(e, "src")));
        sb_printf(sb,
                  "</td><td>%.0f</td><td><b>%.2f</b></td><td>%.2f</td><td>%.4f</td><td>beam %.0f, length penalty %g",
                  num(e, "sentences"), num(e, "bleu"), num(e, "chrf"), num(e, "nll"), num(e, "beam"),
                  num(e, "length_penalty"));
        search_beyond_defaults(sb, e);
        if (str(e, "mask_heads")) sb_printf(sb, ", heads masked: "), text(sb, str(e, "mask_heads"));
        sb_printf(sb, "</td><td>%.1f</td></tr>\n", num(e, "sentences_per_s"));
    }
    sb_printf(sb, "</table>\n");
    if (st->evals.bad)
        sb_printf(sb, "<p class=\"missing\">%d line(s) of eval.jsonl could not be read.</p>\n", st->evals.bad);
}

static void evals_section(StrBuf *sb, const void *story) {
    bleu_table(sb, story);
    alignments(sb, story);
}

/* Lines in step order, a line without a step after every step, each kind in file order. */
typedef struct {
    double step;
    int line;
} StepLine;
static int by_step_then_line(const void *pa, const void *pb) {
    const StepLine *a = pa, *b = pb;
    int na = isnan(a->step), nb = isnan(b->step);
    if (na != nb) return na - nb;
    if (!na && a->step != b->step) return a->step < b->step ? -1 : 1;
    return (a->line > b->line) - (a->line < b->line);
}

/* stands[i] (malloc'd): line i is the last of its step (a resume may validate a step
 * again; a line without a step stands alone). Sorted, not compared pairwise: the file
 * gains a line at every validation, and a pairwise scan took 24 s over 20,000 lines. */
static char *last_of_each_step(const JsonLines *l) {
    StepLine *order = xmalloc(sizeof *order * (size_t)(l->n ? l->n : 1));
    char *stands = xcalloc((size_t)(l->n ? l->n : 1), 1);
    for (int i = 0; i < l->n; i++) order[i] = (StepLine){num(l->v[i], "step"), i};
    qsort(order, (size_t)l->n, sizeof *order, by_step_then_line);
    for (int i = 0; i < l->n; i++) stands[order[i].line] = i + 1 == l->n || !(order[i + 1].step == order[i].step);
    free(order);
    return stands;
}

/* A translation's sentence BLEU against its reference (sacrebleu's, effective order), as a
 * table cell's text; nothing when either is missing. */
static void sentence_bleu(StrBuf *sb, const char *hyp, const char *ref) {
    if (!hyp || !ref) return;
    BleuStats one = {0};
    bleu_add(&one, hyp, ref);
    sb_printf(sb, "%.2f", bleu_compute(&one, 1).score);
}

/* The first translations the last `qkv eval` kept, shown when training recorded none
 * (train.valid_bleu off, as in the demo's config); 0 when no eval record has them. */
static int eval_samples(StrBuf *sb, const Story *st) {
    const json_t *e = NULL;
    for (int i = st->evals.n - 1; i >= 0 && !e; i--)
        if (json_array_size(json_object_get(st->evals.v[i], "samples"))) e = st->evals.v[i];
    if (!e) return 0;
    const json_t *all = json_object_get(e, "samples");
    sb_printf(sb,
              "<p>Training recorded no translations (<code>train.valid_bleu: true</code> records three at "
              "each validation); the last <code>qkv eval</code> kept its first %zu: ",
              json_array_size(all));
    text(sb, base_name(str(e, "src")));
    sb_printf(sb, ", the checkpoint of step %.0f, beam %.0f.</p>\n", num(e, "step"), num(e, "beam"));
    sb_printf(sb, "<table><tr><th>line</th><th>source</th><th>reference</th><th>translation</th>"
                  "<th title=\"sentence BLEU (sacrebleu's, effective order) against the reference\">its BLEU</th>"
                  "</tr>\n");
    for (size_t k = 0; k < json_array_size(all); k++) {
        const json_t *one = json_array_get(all, k);
        const char *hyp = str(one, "hyp"), *ref = str(one, "ref");
        sb_printf(sb, "<tr><td>%.0f</td><td>", num(one, "line"));
        text(sb, str(one, "src"));
        sb_printf(sb, "</td><td>");
        text(sb, ref);
        sb_printf(sb, "</td><td class=\"hyp\">");
        text(sb, hyp);
        sb_printf(sb, "</td><td>");
        sentence_bleu(sb, hyp, ref);
        sb_printf(sb, "</td></tr>\n");
    }
    sb_printf(sb, "</table>\n");
    return 1;
}

static void samples_section(StrBuf *sb, const void *story) {
    const Story *st = story;
    if (st->samples.n == 0 && !st->samples.why[0] && eval_samples(sb, st)) return;
    if (st->samples.n == 0) {
        sb_printf(sb, "<p class=\"missing\">No samples: ");
        if (st->samples.why[0]) absence(sb, RUN_SAMPLES, &st->samples);
        else
            sb_printf(sb, "%s",
                      st->have_cfg && !st->cfg.train.valid_bleu
                          ? "the run does not decode its validation set (train.valid_bleu: true records "
                            "three sentences' translations at each validation)"
                          : "samples.jsonl is missing or empty (written at each validation with BLEU)");
        sb_printf(sb, ".</p>\n");
        return;
    }
    const json_t *first = st->samples.v[0];
    int ns = (int)json_array_size(json_object_get(first, "samples"));
    sb_printf(sb, "<p>The same %d validation sentences at each validation, greedy, beside their reference.</p>\n", ns);
    char *stands = last_of_each_step(&st->samples);
    for (int k = 0; k < ns; k++) {
        const json_t *one = json_array_get(json_object_get(first, "samples"), (size_t)k);
        sb_printf(sb, "<div class=\"sample\"><p><b>source</b> (line %.0f): ", num(one, "line"));
        text(sb, str(one, "src"));
        sb_printf(sb, "<br><b>reference</b>: ");
        text(sb, str(one, "ref"));
        sb_printf(sb,
                  "</p>\n<table><tr><th>step</th><th title=\"sentence BLEU (sacrebleu's, effective order) of this "
                  "translation against its reference\">its BLEU</th><th title=\"greedy BLEU of the whole validation "
                  "set at that step\">validation BLEU</th><th>translation</th></tr>\n");
        for (int i = 0; i < st->samples.n; i++) {
            double step = num(st->samples.v[i], "step");
            const json_t *s = json_array_get(json_object_get(st->samples.v[i], "samples"), (size_t)k);
            if (!stands[i] || !s) continue;
            const char *hyp = str(s, "hyp"), *ref = str(one, "ref");
            sb_printf(sb, "<tr><td>%.0f</td><td>", step);
            sentence_bleu(sb, hyp, ref);
            sb_printf(sb, "</td><td>%.2f</td><td class=\"hyp\">", num(st->samples.v[i], "valid_bleu"));
            text(sb, str(s, "hyp"));
            sb_printf(sb, "</td></tr>\n");
        }
        sb_printf(sb, "</table></div>\n");
    }
    free(stands);
}

/* ---- attention and heads: the viewer page in a frame ------------------------------------ */

/* page as an iframe's srcdoc: the attribute holds a whole document */
static void frame(StrBuf *sb, const char *id, const char *page, int height) {
    sb_printf(sb, "<iframe id=\"%s\" style=\"width:100%%;height:%dpx;border:1px solid #ccc\" srcdoc=\"", id, height);
    for (const char *p = page; *p; p++) {
        if (*p == '&') sb_append(sb, "&amp;", 5);
        else if (*p == '"') sb_append(sb, "&quot;", 6);
        else sb_append(sb, p, 1);
    }
    sb_printf(sb, "\"></iframe>\n");
}

static void attention_section(StrBuf *sb, const void *story) {
    const Story *st = story;
    WatchLog w;
    char watch_dir[CONFIG_PATH_MAX + 16];
    snprintf(watch_dir, sizeof watch_dir, "%s/" RUN_WATCH_DIR, st->dir);
    struct stat sst;
    if (lstat(watch_dir, &sst) != 0) {
        sb_printf(sb, "<p class=\"missing\">No watched sentences: train.watch lists sentences whose attention is "
                      "recorded at every validation.</p>\n");
        return;
    }
    if (stat(watch_dir, &sst) != 0 || !S_ISDIR(sst.st_mode)) {
        sb_printf(sb, "<p class=\"missing\">The watched sentences could not be read: watch is not a directory.</p>\n");
        return;
    }
    if (watch_load(st->dir, &w) != 0) {
        sb_printf(sb, "<p class=\"missing\">The watched sentences could not be read: ");
        text(sb, err_msg());
        sb_printf(sb, "</p>\n");
        return;
    }
    /* queries and keys are nearly two thirds of a snapshot, and only the viewer's Q.K
     * picture reads them: the page keeps the last snapshot's (the picture says so) */
    for (int k = 0; k + 1 < w.n_snapshots; k++)
        for (int i = 0; i < w.n_sentences; i++)
            for (int kind = 0; kind < ATTN_KINDS; kind++) {
                AttnMaps *a = &w.snap[k].sentences[i];
                free(a->queries[kind]), free(a->keys[kind]);
                a->queries[kind] = a->keys[kind] = NULL;
            }
    char *json = watch_view_json(&w, NULL, 0);
    StrBuf page = {0};
    if (json && attnview_page(json, &page) == 0) {
        sb_printf(sb, "<p>%d sentence%s, %d snapshots (steps %lld to %lld): the step slider replays training.</p>\n",
                  w.n_sentences, w.n_sentences == 1 ? "" : "s", w.n_snapshots, (long long)w.snap[0].step,
                  (long long)w.snap[w.n_snapshots - 1].step);
        frame(sb, "watch", page.buf, 1000);
    } else {
        sb_printf(sb, "<p class=\"missing\">The watched sentences' view could not be made.</p>\n");
    }
    sb_free(&page);
    free(json);
    watch_free(&w);
}

/* heads/heads.svg as an image: a picture in <img> runs no script and loads nothing, whatever
 * the file holds, where the same markup pasted into the page would run its scripts */
static void pruning_curve(StrBuf *sb, const Story *st) {
    char path[CONFIG_PATH_MAX + 32];
    struct stat sst;
    snprintf(path, sizeof path, "%s/" RUN_HEADS_DIR "/heads.svg", st->dir);
    if (lstat(path, &sst) != 0) {
        sb_printf(sb, "<p class=\"note\">No pruning curve (qkv heads ran with --no-curve).</p>\n");
        return;
    }
    size_t len;
    char *svg = read_file_max(path, CURVES_METRICS_MAX, &len);
    if (!svg) {
        sb_printf(sb, "<p class=\"missing\">The pruning curve could not be read: ");
        text(sb, err_msg());
        sb_printf(sb, "</p>\n");
        return;
    }
    sb_printf(sb, "<div class=\"curve\"><img alt=\"the pruning curve (heads/heads.svg)\" style=\"max-width:100%%\" "
                  "src=\"data:image/svg+xml;base64,");
    sb_append_base64(sb, svg, len);
    sb_printf(sb, "\"></div>\n");
    free(svg);
}

/* the grid alone (the viewer's heads view without sentences): heads/index.html holds the
 * maps of the set's first sentences too, megabytes the report links to instead */
static void heads_section(StrBuf *sb, const void *story) {
    const Story *st = story;
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" RUN_HEADS_DIR "/heads.json", st->dir);
    struct stat sst;
    if (stat(path, &sst) != 0) {
        sb_printf(sb,
                  "<p class=\"missing\">No head analysis: <code>qkv heads RUN --src F --ref F</code> writes one into "
                  "RUN/heads.</p>\n");
        return;
    }
    json_t *heads = heads_read(path);
    if (!heads) {
        sb_printf(sb, "<p class=\"missing\">The head analysis could not be read: ");
        text(sb, err_msg());
        sb_printf(sb, "</p>\n");
        return;
    }
    const json_t *set = json_object_get(heads, "set"), *model = json_object_get(heads, "model");
    sb_printf(sb, "<p>qkv heads on <code>");
    text(sb, str(set, "src") ? str(set, "src") : "?");
    sb_printf(sb,
              "</code> (%.0f sentences), the checkpoint of step %.0f: every head by its default ranking's score, its "
              "role in the "
              "cell; point at one for its numbers. <a href=\"heads/index.html\">heads/index.html</a> opens "
              "each head's maps.</p>\n",
              num(set, "sentences"), num(model, "step"));
    json_t *view = json_object();
    json_put(view, "format", json_string("qkv-heads-view-1"));
    json_put(view, "heads", json_incref(json_object_get(heads, "heads")));
    json_t *order = json_object_get(heads, "default_order"); /* the grid's score; absent before it was measured */
    if (json_is_string(order)) json_put(view, "default_order", json_incref(order));
    char *json = json_dumps(view, JSON_COMPACT);
    StrBuf page = {0};
    if (json && attnview_page(json, &page) == 0) frame(sb, "headgrid", page.buf, 420);
    sb_free(&page);
    free(json);
    json_decref(view), json_decref(heads);
    pruning_curve(sb, st);
}

/* ---- the page ------------------------------------------------------------------------------ */

static void title(StrBuf *sb, const void *story) {
    const Story *st = story;
    text(sb, st->have_cfg ? st->cfg.name : st->dir);
}

static void setup(StrBuf *sb, const void *story) {
    config_section(sb, story);
    data_section(sb, story);
}

/* the parts of report.html, each written where its {{name}} stands */
static const PageSlot parts[] = {
    {"title", title},
    {"header", header},
    {"setup", setup},
    {"curves", curves_section},
    {"evals", evals_section},
    {"samples", samples_section},
    {"attention", attention_section},
    {"heads", heads_section},
};

int runpage_write(const char *dir, const char *out, const RunPageOptions *o, long *bytes) {
    RunPageOptions none = {0};
    Story st = {.dir = dir, .o = o ? o : &none};
    char cfg_path[CONFIG_PATH_MAX + 32], out_path[CONFIG_PATH_MAX + 32];
    struct stat sst;
    if (stat(dir, &sst) != 0 || !S_ISDIR(sst.st_mode)) return err_set("%s: not a run directory", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.yaml", dir);
    if (stat(cfg_path, &sst) != 0) return err_set("%s: not a run directory (no config.yaml)", dir);
    if (!out) out = run_path(out_path, sizeof out_path, dir, RUN_REPORT);
    /* the rename would put the page in place of a FIFO or a device node */
    if (regular_or_absent(out) != 0) return -1;
    config_defaults(&st.cfg);
    st.have_cfg = config_load(&st.cfg, cfg_path) == 0;
    if (!st.have_cfg) snprintf(st.cfg_error, sizeof st.cfg_error, "%s", err_msg());
    read_jsonl(dir, RUN_METRICS, &st.metrics);
    read_jsonl(dir, RUN_JOURNAL, &st.journal);
    read_jsonl(dir, RUN_EVAL, &st.evals);
    read_jsonl(dir, RUN_ALIGN, &st.aligns);
    read_jsonl(dir, RUN_SAMPLES, &st.samples);
    st.holder = st.o->running ? 0 : run_lock_holder(dir);
    StrBuf sb = {0};
    int rc = page_fill(&sb, report_html, parts, (int)(sizeof parts / sizeof *parts), &st);
    if (rc == 0) rc = write_file_atomic(out, sb.buf, sb.len);
    if (rc == 0 && bytes) *bytes = (long)sb.len;
    sb_free(&sb);
    free_jsonl(&st.metrics), free_jsonl(&st.journal), free_jsonl(&st.evals), free_jsonl(&st.aligns),
        free_jsonl(&st.samples);
    return rc;
}
