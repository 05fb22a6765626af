/* info: `qkv info CHECKPOINT`, what a checkpoint holds, after verifying all of it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "config.h"
#include "run/checkpoint.h"

/* The model line, from the config the checkpoint carries (left out if it does not parse). */
static const char *const tokenizer_names[] = {"word", "char", "bpe", "unigram"}; /* TOKENIZER_* */

static void print_model(const CkptMeta *m) {
    Config cfg;
    config_defaults(&cfg);
    if (config_parse(&cfg, m->config, strlen(m->config), "config") != 0) return;
    printf("model: d_model %d, %d heads, d_ff %d, %d+%d layers, %s-LN, %s embeddings; %s tokenizer; run %s\n",
           cfg.model.d_model, cfg.model.heads, cfg.model.d_ff, cfg.model.encoder_layers, cfg.model.decoder_layers,
           cfg.model.norm == NORM_PRE ? "pre" : "post", cfg.model.tie_embeddings ? "tied" : "separate",
           tokenizer_names[cfg.data.tokenizer], cfg.name);
}

static void print_tensors(const CkptFile *f) {
    size_t params = 0;
    int weights = 0;
    for (int i = 0; i < f->n_tensors; i++)
        if (strncmp(f->tensors[i].name, "optim.", 6) != 0)
            weights++, params += (f->tensors[i].end - f->tensors[i].begin) / 4;
    printf("tensors: %d weights (%zu parameters)%s\n", weights, params, f->has_optim ? " + Adam moments for each" : "");
    for (int i = 0; i < f->n_tensors; i++) {
        const CkptTensor *t = &f->tensors[i];
        if (strncmp(t->name, "optim.", 6) == 0) continue;
        char shape[64] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "",
                     (long long)t->shape[d]);
        printf("  %-44s F32 [%s]\n", t->name, shape);
    }
}

static const CmdOption options[] = {{0}};
const CmdSpec cmd_info_spec = {
    .name = "info",
    .operands = "CHECKPOINT.safetensors",
    .summary = "what a checkpoint holds, after verifying every byte of it",
    .about = "Prints the step, epoch, losses, the model's shape and every tensor, once the header's\n"
             "and the data's checksums are verified (a damaged file is refused, naming what).",
    .options = options,
    .example = "qkv info runs/toy/ckpt/best.safetensors",
};

int cmd_info(int argc, char **argv) {
    int c = cmd_option_next(&cmd_info_spec, argc, argv);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_info_spec);
    CkptFile f;
    if (ckpt_open(&f, argv[optind]) != 0) return cmd_fail(2);
    const CkptMeta *m = &f.meta;
    printf("%s: %s, %.2f MB\n", f.path, CKPT_FORMAT, (double)f.len / 1e6);
    printf("step %lld (epoch %lld, batch %d of the epoch), seed %lld, %d threads\n", (long long)m->step,
           (long long)m->epoch, m->batch_pos, (long long)m->seed, m->threads);
    printf("validation loss %.4f at this step, best %.4f\n", m->valid_loss, m->best_valid_loss);
    if (!isnan(m->valid_bleu) || !isnan(m->best_valid_bleu))
        printf("validation BLEU %.2f at this step, best %.2f\n", m->valid_bleu, m->best_valid_bleu);
    if (m->config) { /* which measure chose best.safetensors: the run's resolved config says */
        Config c;
        config_defaults(&c);
        if (config_parse(&c, m->config, strlen(m->config), "the checkpoint's config") == 0 && c.data.valid.src[0])
            printf("best checkpoint of the run: the best by validation %s (train.best_by)\n",
                   c.train.best_by == BEST_BY_BLEU ? "BLEU" : "loss");
    }
    printf("trained for %.1fs\n", m->elapsed_s);
    print_model(m);
    print_tensors(&f);
    if (m->src_vocab)
        printf("exported weights: the config and both vocabularies are inside; "
               "translate, eval and attention take this file alone\n");
    printf("checksums: header OK, data OK\n");
    ckpt_close(&f);
    return 0;
}
