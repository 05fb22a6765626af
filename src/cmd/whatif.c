/* whatif: `qkv whatif RUN --text "..."`, change the model and see what changes: heads
 * switched off (--mask-heads), one cross-attention query pinned onto a source token
 * (--pin), the target forced (--target); per target position the change in log p, the
 * top-k next tokens and their entropy, the logit lens of every decoder layer (--lens) and
 * the beam tree (--tree). The library work is explain/intervene.h's and decode's; this file
 * parses, prints and writes whatif.json. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "cmdlib/sentence.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "decode/decode.h"
#include "decode/headmask.h"
#include "explain/intervene.h"
#include "explain/whatif_run.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

typedef struct {
    const char *text, *target, *mask_heads, *pin, *out;
    int top, lens, tree, beam;
} Options;

/* a target token for people: valid UTF-8 (caller frees) */
static char *label(const Run *r, int id) { return attnmap_utf8(id < 0 ? "" : vocab_token(&r->tgt_vocab, id)); }

/* The tree from node `at`'s children down, indented by depth. */
static void print_tree(const Run *r, const BeamTrace *tr, int parent, int depth) {
    for (int i = 0; i < tr->n; i++) {
        const BeamNode *n = &tr->nodes[i];
        if (n->parent != parent) continue;
        char *s = label(r, n->token);
        const char *mark = n->fate == BEAM_DROPPED ? "x" : n->fate == BEAM_KEPT ? "+" : "#";
        const char *why = n->fate == BEAM_DROPPED    ? "  (dropped)"
                          : n->fate == BEAM_FINISHED ? "  (finished)"
                          : n->fate == BEAM_AT_LIMIT ? "  (finished at the length limit)"
                                                     : "";
        printf("%*s%s ", 2 * depth, "", mark);
        cmd_print_column(s, 12);
        printf(" %8.3f  step %d%s\n", n->logp, n->step, why);
        free(s);
        if (n->fate == BEAM_KEPT) print_tree(r, tr, i, depth + 1);
    }
}

/* --pin L.H.T=J: cross-attention layer L, head H, target position T onto source position J */
static int parse_pin(const char *s, int *l, int *h, int *t, int *j) {
    int *field[4] = {l, h, t, j};
    const char *p = s, sep[3] = {'.', '.', '='};
    for (int k = 0; k < 4; k++) {
        /* digits only, each below a million: %d would take "-1" and wrap 4294967299 to 3 */
        long v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) v = v * 10 + (*p - '0');
        if (digits == 0 || digits == 7 || *p != (k < 3 ? sep[k] : '\0'))
            return err_set("--pin: '%s' is not LAYER.HEAD.TARGET=SOURCE (cross-attention; numbers from 0, below a "
                           "million)",
                           s);
        *field[k] = (int)v;
        if (k < 3) p++;
    }
    return 0;
}

static int run_whatif(Run *r, const Options *o) {
    int tok = r->cfg.data.tokenizer, rc = 2;
    WhatifPin pin = {0};
    WhatifAsk ask = whatif_ask(o->text, o->target, &r->cfg);
    ask.top = o->top, ask.beam = o->tree ? o->beam : 0;
    WhatifResult x = {0};
    float *gates = NULL;
    char *text = NULL;
    char pin_name[96]; /* every part of the pin named by the option and its value */
    if (o->pin) {
        if (parse_pin(o->pin, &pin.layer, &pin.head, &pin.query, &pin.key) != 0) goto done;
        ask.pin = &pin;
        snprintf(pin_name, sizeof pin_name, "--pin %s", o->pin);
        for (int k = 0; k < 5; k++) ask.pin_names[k] = pin_name;
    }
    if (whatif_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, NULL) != 0) goto done;
    cmd_warn_unknown(NULL, &x.unknown);
    int masked = 0;
    if (o->mask_heads) {
        gates = xmalloc(sizeof(float) * (size_t)model_head_count(&r->model));
        if ((masked = head_mask_parse(&r->model, o->mask_heads, gates)) < 0) goto done;
        if (masked > 0) ask.gates = gates;
    }
    whatif_decode(&r->model, &ask, &x);
    if (whatif_check_query(&ask, &x) != 0) goto done;
    whatif_run(&r->model, &r->tgt_vocab, tok, &ask, &x);
    const WhatifSteps *now = x.changed ? &x.after : &x.base;
    int nt = x.nt, *tgt = x.tgt;
    text = attnmap_utf8(o->text);
    cmd_print_text("source: ", text);
    cmd_print_text(o->target ? "target (forced): " : "translation (greedy): ", x.target_text);
    if (masked > 0) {
        const char *alt = x.translation_changed;
        printf("with %d head%s off:   %s%s\n", masked, masked == 1 ? "" : "s", alt,
               strcmp(alt, x.target_text) == 0 ? "  (unchanged)" : "");
    }
    if (o->pin)
        printf("pinned: cross-attention layer %d, head %d, at target position %d, onto source position %d\n", pin.layer,
               pin.head, pin.query, pin.key);
    int changed = x.changed;
    const WhatifSteps base = x.base, after = x.after;
    printf("\n%-4s %-14s %9s%s %8s   top %d next tokens%s\n", "pos", "word", "log p", changed ? "   change" : "",
           "entropy", o->top, changed ? " (changed model)" : "");
    for (int t = 0; t < base.T; t++) {
        int id = t < nt ? tgt[t] : VOCAB_EOS;
        char *w = label(r, id);
        printf("%-4d ", t);
        cmd_print_column(w, 14);
        printf(" %9.3f", now->logp[t]);
        if (changed) printf(" %+8.3f", after.logp[t] - base.logp[t]);
        printf(" %8.3f  ", now->entropy[t]);
        for (int i = 0; i < o->top && now->top[t * o->top + i] >= 0; i++) {
            char *c = label(r, now->top[t * o->top + i]);
            printf(" %s %.2f", c, exp(now->top_lp[t * o->top + i]));
            free(c);
        }
        putchar('\n');
        free(w);
    }
    if (o->lens) {
        printf("\nlogit lens: what each decoder layer's stream would predict (its top token, p; the word's p)\n%-4s "
               "%-14s",
               "pos", "word");
        for (int l = 0; l < now->L; l++) printf("  layer %-18d", l);
        putchar('\n');
        for (int t = 0; t < now->T; t++) {
            char *w = label(r, t < nt ? tgt[t] : VOCAB_EOS);
            printf("%-4d ", t);
            cmd_print_column(w, 14);
            for (int l = 0; l < now->L; l++) {
                char *c = label(r, now->lens_top[((size_t)l * now->T + t) * now->k]);
                printf("  ");
                cmd_print_column(c, 10);
                printf(" %4.2f %5.2f", exp(now->lens_lp[((size_t)l * now->T + t) * now->k]),
                       exp(now->lens_word[(size_t)l * now->T + t]));
                free(c);
            }
            putchar('\n');
            free(w);
        }
    }
    if (o->tree) {
        printf("\nbeam tree (beam %d): + kept, # finished, x dropped; log P of the hypothesis\n", o->beam);
        print_tree(r, &x.tree, -1, 0);
        printf("best: %s (score %.3f)\n", x.beam_best, x.beam_score);
    }
    if (o->out) {
        char *js = xcheck(json_dumps(x.json, JSON_WRITE_FLAGS | JSON_INDENT(1)));
        rc = write_file_atomic(o->out, js, strlen(js)) == 0 ? 0 : err_status();
        free(js);
        if (rc) goto done;
        printf("\nwrote %s\n", o->out);
    }
    rc = 0;
done:
    whatif_result_free(&x);
    free(text), free(gates);
    return rc;
}

static const CmdOption options[] = {
    {'t', "text", "SOURCE", "the sentence (required)", NULL},
    {'g', "target", "TRANSLATION",
     "force this translation, its <eos> included (default: the model's greedy translation)", NULL},
    {'m', "mask-heads", "SPEC", MASK_HEADS_HELP, NULL},
    {'p', "pin", "L.H.T=J", "pin cross-attention layer L, head H, at target position T onto source position J", NULL},
    {'k', "top", "K", "next tokens listed per position", "5"},
    {'l', "lens", NULL, "the logit lens: what each decoder layer's stream would predict", NULL},
    {'b', "tree", NULL, "the beam tree: every hypothesis beam search kept, finished and dropped", NULL},
    {'B', "beam", "K", "with --tree: the beam", "5"},
    {'o', "out", "FILE", "also write everything as JSON (qkv-whatif-1)", NULL},
    {0},
};
const CmdSpec cmd_whatif_spec = {
    .name = "whatif",
    .operands = "RUN --text \"SOURCE\" [--target \"...\"] [--mask-heads SPEC] [--pin L.H.T=J] [--lens] [--tree]",
    .summary = "change the model and see what changes: heads off, attention pinned, the layers read out",
    .about = "Per target position: the word's log p (and its change under --mask-heads or --pin), the\n"
             "entropy and the top-k next tokens; with heads off, the translation they give; --lens, what\n"
             "each decoder layer would predict; --tree, the beam search tree.",
    .options = options,
    .example = "qkv whatif runs/toy --text \"a red bird sleeps\" --mask-heads cross.1.1 --lens --tree",
};

int cmd_whatif(int argc, char **argv) {
    Options o = {.top = WHATIF_TOP, .beam = WHATIF_BEAM};
    int c, bad = 0, beam_given = 0;
    while (!bad && (c = cmd_option_next(&cmd_whatif_spec, argc, argv)) >= 0) {
        switch (c) {
        case 't': o.text = optarg; break;
        case 'g': o.target = optarg; break;
        case 'm': o.mask_heads = optarg; break;
        case 'p': /* the last would win unseen */
            if (o.pin) bad = (err_set("--pin: one pin at a time (given twice)"), 1);
            o.pin = optarg;
            break;
        case 'l': o.lens = 1; break;
        case 'b': o.tree = 1; break;
        case 'o': o.out = optarg; break;
        case 'k': bad = cmd_int("--top", "a count (1..50)", optarg, 1, 50, &o.top) != 0; break;
        case 'B':
            bad = cmd_int("--beam", "a beam (2..64)", optarg, 2, 64, &o.beam) != 0;
            beam_given = 1;
            break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !o.text) return cmd_usage_of(&cmd_whatif_spec);
    /* the greedy steps are what the rest shows: a beam without the tree would change nothing */
    if (beam_given && !o.tree) return err_set("--beam goes with --tree (the beam search tree)"), cmd_fail(2);
    if (o.out && o.out[0] == '\0') return err_set("--out: an empty file name"), cmd_fail(2);
    /* the rename would put the JSON in place of a FIFO or a device node */
    if (o.out && regular_or_absent(o.out) != 0) return cmd_fail(2);
    if (o.out && probe_writable(o.out) != 0) return cmd_fail(err_status()); /* before the table is printed */
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    if (o.out && run_out_replaces_own_file(&r, o.out, "the whatif")) return run_close(&r), cmd_fail(2);
    openblas_set_num_threads(1); /* one sentence's products: threads would only wait */
    int rc = run_whatif(&r, &o);
    if (rc) cmd_fail(rc);
    run_close(&r);
    return rc;
}
