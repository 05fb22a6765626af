/* bench_translate: see bench_translate.h.
 *
 * The figures are the user's: the run's own weights and vocabularies, the same call that
 * `qkv translate` makes, one warm-up pass first (page faults, OpenBLAS's threads). FLOPs
 * are those decode_counting reports: every matrix product at the shapes run (padded
 * sources, every row of each step, finished or not), so the fraction of the ceiling says
 * how well the products that are run go, and sentences/s how little is run. */
#include "cmdlib/bench_translate.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmdlib/bench_ceiling.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "decode/translator.h"
#include "nn/panels.h"
#include "run/run.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

/* One timed translation of lines[0..n) with search options o, as a JSON object. */
static json_t *time_search(Run *r, char **lines, int n, const TranslateOptions *o, double peak) {
    TranslateStats st;
    if (o->decode.beam == 1) cmd_progress("bench", "greedy search of %d lines", n);
    else cmd_progress("bench", "beam search (beam %d) of %d lines", o->decode.beam, n);
    double t0 = now_seconds();
    char **text = translate_lines(&r->model, r->cfg.data.tokenizer, &r->src_vocab, &r->tgt_vocab, lines, n, o, &st,
                                  NULL);
    double secs = now_seconds() - t0;
    free_lines(text, n * o->decode.nbest);
    json_t *j = json_object();
    json_put(j, "beam", json_integer(o->decode.beam));
    json_put(j, "seconds", json_fmt("%.6f", secs));
    json_put(j, "sentences_per_s", json_fmt("%.1f", n / secs));
    json_put(j, "target_tokens", json_integer(st.out_tokens));
    json_put(j, "target_tokens_per_s", json_fmt("%.1f", (double)st.out_tokens / secs));
    json_put(j, "gflop", json_fmt("%.6f", st.flops / 1e9));
    json_put(j, "gflops", json_fmt("%.2f", st.flops / secs / 1e9));
    json_put(j, "ceiling_fraction", json_fmt("%.4f", st.flops / secs / 1e9 / peak));
    return j;
}

int bench_translate(const char *run_path, const char *src_path, double ceiling) {
    int n;
    /* as every corpus is read: a FIFO or a device is refused at once, never waited on */
    char **lines = read_file_lines(src_path, &n);
    if (!lines) return cmd_fail(err_status());
    if (n == 0) return free_lines(lines, n), err_set("%s: no line to translate", src_path), cmd_fail(2);
    Run r;
    if (run_open(&r, run_path) != 0) return free_lines(lines, n), cmd_fail(err_status());
    /* decoding as translate runs it: OpenBLAS's threads as they are */
    double peak = ceiling;
    if (peak <= 0) {
        cmd_progress("bench", "the sgemm ceiling on %d threads", openblas_get_num_threads());
        peak = bench_ceiling(openblas_get_num_threads());
    }
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    TranslateOptions greedy = decode_options_defaults(), beam = greedy;
    beam = translate_options_for_run(&beam, &r.cfg); /* translate's defaults: the run's length penalty */
    greedy.decode.beam = 1;
    /* warm-up: the first lines once, untimed */
    TranslateStats st;
    int warm = n < 64 ? n : 64;
    free_lines(translate_lines(&r.model, r.cfg.data.tokenizer, &r.src_vocab, &r.tgt_vocab, lines, warm, &greedy, &st,
                               NULL),
               warm);
    json_t *j = json_object();
    json_put(j, "impl", json_string("qkv"));
    json_put(j, "weights", json_utf8(r.weights));
    json_put(j, "step", json_integer((json_int_t)r.meta.step));
    json_put(j, "source", json_utf8(src_path));
    json_put(j, "sentences", json_integer(n));
    json_put(j, "corename", json_string(openblas_get_corename()));
    if (kernels_openblas_picked()) json_put(j, "openblas_chose", json_string(kernels_openblas_picked()));
    json_put(j, "threads", json_integer(openblas_get_num_threads()));
    json_put(j, "step_products", json_string(panels_enabled() ? "panels" : "sgemm")); /* nn/panels.h */
    json_put(j, "peak_gflops", json_fmt("%.1f", peak));
    json_put(j, "greedy", time_search(&r, lines, n, &greedy, peak));
    json_put(j, "beam", time_search(&r, lines, n, &beam, peak));
    cmd_progress("bench", NULL);
    char *text = xcheck(json_dumps(j, JSON_WRITE_FLAGS));
    printf("%s\n", text);
    free(text);
    json_decref(j);
    free_lines(lines, n);
    run_close(&r);
    return 0;
}
