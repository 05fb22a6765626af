/* export: `qkv export RUN [--average N] --out FILE.safetensors`: the weights alone, for
 * use rather than for resuming (no Adam moments: a third of a checkpoint's size), with
 * the config and both vocabularies (or SentencePiece models) in the metadata, so that
 * translate, eval and attention take the file on its own. --average N writes the mean
 * of the run's last N step checkpoints (as fairseq's average_checkpoints.py does), or of
 * the N ending at a step checkpoint given. `--format onnx --out DIR` writes the model as
 * ONNX graphs in the folder layout onnxruntime and transformers.js load (onnx/onnx_dir.h),
 * with one tokenizer over both vocabularies (onnx/joint_vocab.h) and a page that translates,
 * with --reference FILE qkv's own figures for those lines beside them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "data/tokenize.h"
#include "decode/decode.h"
#include "decode/translator.h"
#include "onnx/joint_vocab.h"
#include "onnx/onnx_dir.h"
#include "onnx/reference.h"
#include "onnx/tokenizer_json.h"
#include "run/average.h"
#include "run/checkpoint.h"
#include "run/files.h"
#include "run/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

/* r->model's weights become the mean of n step checkpoints of r's run, each named: its
 * last n, or for a checkpoint given (r->which "given"), the n ending at the one given */
static int average_last(Run *r, int n) {
    char **paths, avg[CONFIG_PATH_MAX + 32];
    int got, given = strcmp(r->which, "given") == 0;
    CkptMeta meta = {0};
    /* the run's mean of its newest: a mean, not a checkpoint a mean could end at */
    if (given && same_file(r->weights, run_path(avg, sizeof avg, r->dir, RUN_AVERAGE)))
        return err_set("%s: --average %d: this is the run's mean of its newest checkpoints, not one checkpoint; give "
                       "the step checkpoint the mean should end at, or the run %s for its last %d",
                       r->weights, n, r->dir, n);
    if (average_newest(r, n, 0, given ? r->meta.step : -1, &r->model, &meta, &paths, &got) != 0) return -1;
    /* once done: a refusal prints nothing */
    if (given) printf("averaged the %d checkpoints of %s ending at step %lld:\n", got, r->dir, (long long)r->meta.step);
    else printf("averaged the last %d checkpoints of %s:\n", got, r->dir);
    for (int i = 0; i < got; i++) printf("  %s\n", paths[i]);
    free_lines(paths, got);
    ckpt_meta_free(&r->meta);
    r->meta = meta;
    return 0;
}

/* One side's vocabulary as the export stores it: the vocabulary file, or the model in hex. */
static char *vocab_for_export(const Vocab *v) { return v->spm ? hex_encode(v->spm_model, v->spm_len) : vocab_text(v); }

/* reference.json's text for the lines of path: each non-empty line encoded as qkv translate
 * encodes it (cut to the position table), decoded greedily as translate --greedy does.
 * NULL with the error set. */
static char *reference_for(Run *r, const JointVocab *jv, const char *path) {
    int n;
    char **lines = read_file_lines(path, &n);
    if (!lines) return NULL;
    Model *m = &r->model;
    int max_src = m->cfg.max_positions - 1, k = 0;
    Seq *src = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1)), *out = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        int cut;
        Seq s = translator_source(lines[i], NULL, r->cfg.data.tokenizer, &r->src_vocab, max_src, &cut);
        if (s.len) src[k++] = s;
    }
    free_lines(lines, n);
    greedy_decode(m, src, k, out);
    char *json = onnx_reference_json(m, jv, src, out, k, &r->src_vocab, &r->tgt_vocab, r->cfg.data.tokenizer);
    for (int i = 0; i < k; i++) free(src[i].ids), free(out[i].ids);
    free(src), free(out);
    return json;
}

/* The ONNX folder of r's model (its weights already averaged when asked). */
static int export_onnx(Run *r, const char *out, const char *reference) {
    JointVocab jv;
    joint_vocab_build(&jv, &r->src_vocab, &r->tgt_vocab);
    /* a tokenizer the format cannot hold is refused before the reference's decoding */
    char *tokenizer = tokenizer_json(&jv, r->cfg.data.tokenizer, &r->src_vocab), *json = NULL;
    int rc = !tokenizer || (reference && !(json = reference_for(r, &jv, reference))) ? -1 : 0;
    OnnxDir e = {&r->model, &jv, tokenizer, json};
    if (rc == 0) rc = onnx_dir_write(out, &e);
    free(tokenizer), free(json);
    if (rc == 0)
        printf("wrote %s: the encoder and the decoder with its key/value cache as ONNX (IR 8, opset 17), %.2fM "
               "weights of step %lld, config.json, generation_config.json, tokenizer.json (%s, %d ids: %s), "
               "index.html%s\n",
               out, (double)r->model.n_params / 1e6, (long long)r->meta.step, tokenizer_name(r->cfg.data.tokenizer),
               jv.size, jv.shared ? "the shared vocabulary" : "the target's, then the source's own",
               reference ? ", reference.json" : "");
    joint_vocab_free(&jv);
    return rc;
}

static const CmdOption options[] = {
    {'o', "out", "FILE", "the weights file to write, or the folder with --format onnx (required)", NULL},
    {'f', "format", "FORMAT",
     "safetensors (one weights file) or onnx (a folder: the encoder and the decoder as ONNX graphs with the "
     "configs and tokenizer onnxruntime and transformers.js read, and index.html, a page that translates in the "
     "browser)",
     "safetensors"},
    {'r', "reference", "FILE",
     "with --format onnx: also reference.json, qkv's own source ids, encoder output, greedy output and every "
     "step's log-probabilities for these source lines, to check a runtime against (a few lines: it holds "
     "whole rows)",
     NULL},
    {'a', "average", "N",
     "the mean of the run's last N step checkpoints instead of one (given a checkpoint: the N ending at it)",
     "the run's best or latest"},
    {0},
};
const CmdSpec cmd_export_spec = {
    .name = "export",
    .operands = "RUN_DIR|CHECKPOINT --out FILE.safetensors [--average N] | --format onnx --out DIR",
    .summary = "weights for use, not resuming: one file with the config and both vocabularies, or ONNX graphs",
    .about =
        "translate, eval and attention take the exported file alone; it holds no optimizer state. --format onnx "
        "writes a folder that onnxruntime and transformers.js load, the source and target vocabularies joined into "
        "one tokenizer (docs/export.md).",
    .options = options,
    .example = "qkv export runs/toy --average 3 --out toy.safetensors",
};

int cmd_export(int argc, char **argv) {
    const char *out = NULL, *format = "safetensors", *reference = NULL;
    int average = 0, c;
    while ((c = cmd_option_next(&cmd_export_spec, argc, argv)) >= 0) {
        if (c == 'o') out = optarg;
        else if (c == 'f') format = optarg;
        else if (c == 'r') reference = optarg;
        else if (cmd_int("--average", "a checkpoint count from 1 to 1000", optarg, 1, 1000, &average) != 0)
            return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !out) return cmd_usage_of(&cmd_export_spec);
    int onnx = strcmp(format, "onnx") == 0;
    if (!onnx && strcmp(format, "safetensors") != 0) {
        err_set("--format: '%s' is not a format qkv exports (safetensors, onnx)", format);
        return cmd_fail(2);
    }
    if (reference && !onnx) {
        err_set("--reference: qkv's figures go beside ONNX graphs, for checking a runtime; give --format onnx");
        return cmd_fail(2);
    }
    /* the rename would put the weights in place of a FIFO or a device node; a folder's
     * name is checked before the work, not after it */
    if (onnx ? staged_dir_usable(out, "--out") != 0 : regular_or_absent(out) != 0) return cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    if (!onnx && run_out_replaces_own_file(&r, out, "the export")) {
        run_close(&r);
        return cmd_fail(2);
    }
    /* the mean of a run's step checkpoints: weights with no run around them have none */
    if (average > 0 && !run_in_its_run(&r)) {
        err_set("--average takes a run (the mean of its last N step checkpoints); %s is weights outside one",
                argv[optind]);
        run_close(&r);
        return cmd_fail(2);
    }
    int rc = 0;
    if (average > 0) rc = average_last(&r, average);
    if (rc == 0 && onnx) {
        rc = export_onnx(&r, out, reference);
        run_close(&r);
        return rc == 0 ? 0 : cmd_fail(err_status());
    }
    if (rc == 0) {
        CkptMeta meta = r.meta;
        meta.src_vocab = vocab_for_export(&r.src_vocab);
        meta.tgt_vocab = vocab_for_export(&r.tgt_vocab);
        rc = ckpt_save(out, &r.model, NULL, &meta);
        free(meta.src_vocab), free(meta.tgt_vocab);
    }
    if (rc == 0)
        printf("wrote %s: %.2fM weights of step %lld%s, config and %s vocabularies; no optimizer state\n", out,
               (double)r.model.n_params / 1e6, (long long)r.meta.step, average > 1 ? " (averaged)" : "",
               r.src_vocab.spm ? "SentencePiece" : "the");
    run_close(&r);
    return rc == 0 ? 0 : cmd_fail(err_status());
}
