/* attention: `qkv attention RUN --text "..."`, every attention map of one sentence pair
 * as JSON, SVG heatmaps, an HTML viewer and a terminal summary. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/attnmap.h"
#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/decode.h"
#include "train/run.h"
#include "util.h"

/* Encodes text; lists unknown words into `unknown` (may be NULL). Returns the count. */
static int encode_checked(const char *text, int tokenizer, const Vocab *v, int *ids, int max, StrBuf *unknown) {
    int n = encode_line(text, tokenizer, v, ids, max);
    if (unknown) {
        /* find which tokens mapped to <unk>: re-encode token by token */
        char *copy = xstrdup(text);
        int k = 0;
        for (char *tok = strtok(copy, " \t"); tok && k < n; tok = strtok(NULL, " \t")) {
            int sub[64], m = encode_line(tok, tokenizer, v, sub, 64);
            for (int i = 0; i < m && k < n; i++, k++)
                if (ids[k] == VOCAB_UNK) sb_printf(unknown, "%s'%s'", unknown->len ? ", " : "", tok);
        }
        free(copy);
    }
    return n;
}

int cmd_attention(int argc, char **argv) {
    static const struct option opts[] = {{"text", required_argument, 0, 't'}, {"target", required_argument, 0, 'g'},
                                         {"out", required_argument, 0, 'o'}, {0}};
    const char *text = NULL, *target = NULL, *out = "attn";
    int c;
    while ((c = getopt_long(argc, argv, "t:g:o:", opts, NULL)) != -1) {
        if (c == 't') text = optarg;
        else if (c == 'g') target = optarg;
        else if (c == 'o') out = optarg;
        else return 2;
    }
    if (optind != argc - 1 || !text) {
        return cmd_usage("qkv attention RUN --text \"source sentence\" [--target \"translation\"] [--out DIR]");
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    int tok = r.cfg.data.tokenizer, max = r.model.cfg.max_positions - 2, rc = 2;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    StrBuf unknown = {0};
    int n_src = encode_checked(text, tok, &r.src_vocab, src, max + 1, &unknown), n_tgt = 0;
    AttnMaps maps = {0};
    if (n_src == 0) {
        err_set("--text: nothing to attend to: the text is empty");
        goto done;
    }
    if (n_src > max) {
        err_set("--text: %d tokens, more than the %d this model has positions for", n_src, max);
        goto done;
    }
    if (unknown.len) fprintf(stderr, "qkv: warning: not in the source vocabulary, read as <unk>: %s\n", unknown.buf);
    if (target) {
        StrBuf bad = {0};
        n_tgt = encode_checked(target, tok, &r.tgt_vocab, tgt, max + 1, &bad);
        if (bad.len) {
            err_set("--target: not in the target vocabulary: %s", bad.buf);
            sb_free(&bad);
            goto done;
        }
        if (n_tgt > max) {
            err_set("--target: %d tokens, more than the %d this model has positions for", n_tgt, max);
            goto done;
        }
    } else {
        Seq s = {src, n_src}, o;
        greedy_decode(&r.model, &s, 1, &o);
        n_tgt = o.len < max ? o.len : max;
        memcpy(tgt, o.ids, sizeof(int) * (size_t)n_tgt);
        free(o.ids);
    }
    attnmap_capture(&r.model, &r.src_vocab, &r.tgt_vocab, src, n_src, tgt, n_tgt, &maps);
    attnmap_surface_labels(&maps, tok, &r.src_vocab, &r.tgt_vocab, src, text, tgt, target);
    char path[1200];
    int svgs = 0;
    rc = 1;
    if (make_dirs(out) != 0) goto done;
    snprintf(path, sizeof path, "%s/maps.json", out);
    if (attnmap_write_json(&maps, path) != 0 || attnmap_write_svgs(&maps, out, &svgs) != 0) goto done;
    snprintf(path, sizeof path, "%s/index.html", out);
    if (attnmap_write_html(&maps, path) != 0) goto done;
    printf("model: %s (%s, step %lld)\n", r.weights, r.which, (long long)r.meta.step);
    printf("source: %s\n%s: ", text, target ? "target (forced)" : "translation (greedy)");
    char *words = decode_ids(tgt, n_tgt, tok, &r.tgt_vocab);
    printf("%s\n\n", words);
    free(words);
    attnmap_print_terminal(&maps, stdout);
    printf("\nwrote %s/maps.json, %d SVG heatmaps and %s (open it in a browser)\n", out, svgs, path);
    rc = 0;
done:
    if (rc) cmd_fail(rc);
    sb_free(&unknown);
    attnmap_free(&maps);
    free(src), free(tgt);
    run_close(&r);
    return rc;
}
