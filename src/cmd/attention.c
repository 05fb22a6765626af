/* cmd_attention: the `attention` and `align` commands, attention maps for people and
 * alignments for scoring. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/align.h"
#include "infer/attnmap.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/decode.h"
#include "train/run.h"
#include "util.h"

static int fail2(void) {
    fprintf(stderr, "qkv: %s\n", err_msg());
    return 2;
}

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
        fprintf(stderr, "usage: qkv attention RUN --text \"source sentence\" [--target \"translation\"] [--out DIR]\n");
        return 2;
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return fail2();
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
    for (int t = 0; t < n_tgt; t++) printf("%s%s", t ? " " : "", vocab_token(&r.tgt_vocab, tgt[t]));
    printf("\n\n");
    attnmap_print_terminal(&maps, stdout);
    printf("\nwrote %s/maps.json, %d SVG heatmaps and %s (open it in a browser)\n", out, svgs, path);
    rc = 0;
done:
    if (rc) fprintf(stderr, "qkv: %s\n", err_msg());
    sb_free(&unknown);
    attnmap_free(&maps);
    free(src), free(tgt);
    run_close(&r);
    return rc;
}

/* ---- align -------------------------------------------------------------------------------- */

static char **read_all_lines(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        err_set("%s: %s", path, strerror(errno));
        return NULL;
    }
    char **lines = read_lines(f, n);
    fclose(f);
    return lines;
}

/* Selections: every (layer, head), each layer's head average, and all layers' average. */
typedef struct {
    int layer, head; /* -1: averaged */
} Pick;

static void pick_map(const AttnMaps *a, Pick p, float *out) {
    int rows = a->T, cols = a->S, L = a->layers[ATTN_CROSS];
    size_t per = (size_t)rows * cols;
    if (p.head >= 0) {
        memcpy(out, attnmap_at(a, ATTN_CROSS, p.layer, p.head), sizeof(float) * per);
        return;
    }
    float *tmp = xmalloc(sizeof(float) * per);
    memset(out, 0, sizeof(float) * per);
    for (int l = p.layer < 0 ? 0 : p.layer; l < (p.layer < 0 ? L : p.layer + 1); l++) {
        attnmap_head_average(a, ATTN_CROSS, l, tmp);
        for (size_t i = 0; i < per; i++) out[i] += tmp[i] / (float)(p.layer < 0 ? L : 1);
    }
    free(tmp);
}

static void pick_name(Pick p, char *buf, size_t n) {
    if (p.layer < 0) snprintf(buf, n, "all layers, all heads");
    else if (p.head < 0) snprintf(buf, n, "layer %d, average", p.layer);
    else snprintf(buf, n, "layer %d, head %d", p.layer, p.head);
}

static int parse_index(const char *s, const char *what, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > 1000) return err_set("--%s: '%s' is not a %s number", what, s, what);
    *out = (int)v;
    return 0;
}

int cmd_align(int argc, char **argv) {
    static const struct option opts[] = {{"src", required_argument, 0, 's'},   {"tgt", required_argument, 0, 't'},
                                         {"gold", required_argument, 0, 'g'},  {"layer", required_argument, 0, 'l'},
                                         {"head", required_argument, 0, 'h'},  {0}};
    const char *src_path = NULL, *tgt_path = NULL, *gold_path = NULL, *layer_s = NULL, *head_s = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "s:t:g:l:h:", opts, NULL)) != -1) {
        switch (c) {
        case 's': src_path = optarg; break;
        case 't': tgt_path = optarg; break;
        case 'g': gold_path = optarg; break;
        case 'l': layer_s = optarg; break;
        case 'h': head_s = optarg; break;
        default: return 2;
        }
    }
    if (optind != argc - 1 || !src_path || !tgt_path) {
        fprintf(stderr, "usage: qkv align RUN --src SRC --tgt TGT [--layer L|all] [--head H|avg] [--gold GOLD]\n");
        return 2;
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return fail2();
    int L = r.model.cfg.decoder_layers, H = r.model.cfg.heads;
    /* the default: the last decoder layer's heads averaged; on the toy pair it aligns
     * better than any single head and than all layers together (README, "Alignments") */
    Pick chosen = {L - 1, -1};
    if ((layer_s && strcmp(layer_s, "all") != 0 && parse_index(layer_s, "layer", &chosen.layer) != 0) ||
        (head_s && strcmp(head_s, "avg") != 0 && parse_index(head_s, "head", &chosen.head) != 0)) {
        run_close(&r);
        return fail2();
    }
    if (layer_s && strcmp(layer_s, "all") == 0) {
        chosen.layer = -1;
        if (chosen.head >= 0) {
            err_set("--layer all averages every head; leave out --head or give a layer");
            run_close(&r);
            return fail2();
        }
    }
    if (chosen.layer >= L || chosen.head >= H) {
        err_set("--layer/--head: this model has layers 0..%d and heads 0..%d", L - 1, H - 1);
        run_close(&r);
        return fail2();
    }
    int n_src = 0, n_tgt = 0, n_gold = 0, rc = 2;
    char **src = read_all_lines(src_path, &n_src), **tgt = src ? read_all_lines(tgt_path, &n_tgt) : NULL;
    char **gold = tgt && gold_path ? read_all_lines(gold_path, &n_gold) : NULL;
    int n_picks = L * (H + 1) + 1;
    Pick *picks = xmalloc(sizeof(Pick) * (size_t)n_picks);
    AlignCounts *counts = xcalloc((size_t)n_picks, sizeof(AlignCounts));
    if (!src || !tgt || (gold_path && !gold)) goto done;
    if (n_src != n_tgt || (gold && n_gold != n_src)) {
        err_set("%s has %d lines, %s %d%s%s%s: they must be line-aligned", src_path, n_src, tgt_path, n_tgt,
                gold ? ", " : "", gold ? gold_path : "", gold ? "" : "");
        goto done;
    }
    int k = 0;
    for (int l = 0; l < L; l++)
        for (int h = -1; h < H; h++) picks[k++] = (Pick){l, h};
    picks[k++] = (Pick){-1, -1};
    int tok = r.cfg.data.tokenizer, max = r.model.cfg.max_positions - 2;
    int *sid = xmalloc(sizeof(int) * (size_t)(max + 1)), *tid = xmalloc(sizeof(int) * (size_t)(max + 1));
    int (*pairs)[2] = xmalloc(sizeof(int[2]) * 4096);
    for (int i = 0; i < n_src; i++) {
        int ns = encode_line(src[i], tok, &r.src_vocab, sid, max), nt = encode_line(tgt[i], tok, &r.tgt_vocab, tid, max);
        int ng = 0;
        if (gold && (ng = align_parse(gold[i], pairs, 4096)) < 0) {
            err_set("%s:%d: not Pharaoh alignments (i-j pairs)", gold_path, i + 1);
            free(sid), free(tid), free(pairs);
            goto done;
        }
        if (ns == 0 || nt == 0) {
            if (!gold) printf("\n");
            continue;
        }
        AttnMaps a;
        attnmap_capture(&r.model, &r.src_vocab, &r.tgt_vocab, sid, ns, tid, nt, &a);
        int *sw = xmalloc(sizeof(int) * (size_t)a.S), *tw = xmalloc(sizeof(int) * (size_t)a.T);
        int nsw = align_words(a.src, a.S, tok == TOKENIZER_CHAR, sw), ntw = align_words(a.tgt_out, a.T, tok == TOKENIZER_CHAR, tw);
        float *map = xmalloc(sizeof(float) * (size_t)a.S * a.T);
        int *links = xmalloc(sizeof(int) * (size_t)(ntw ? ntw : 1));
        for (int p = 0; p < n_picks; p++) {
            int is_chosen = picks[p].layer == chosen.layer && picks[p].head == chosen.head;
            if (!gold && !is_chosen) continue;
            pick_map(&a, picks[p], map);
            align_from_map(map, a.S, tw, a.T, ntw, sw, a.S, nsw, links);
            if (gold) align_score(links, ntw, pairs, ng, &counts[p]);
            else
                for (int j = 0; j < ntw; j++) printf("%s%d-%d", j ? " " : "", links[j], j);
        }
        if (!gold) printf("\n");
        free(sw), free(tw), free(map), free(links);
        attnmap_free(&a);
    }
    free(sid), free(tid), free(pairs);
    if (gold) {
        printf("%-24s %9s %9s %9s\n", "cross-attention", "precision", "recall", "AER");
        int best = -1;
        for (int p = 0; p < n_picks; p++) {
            char name[64];
            pick_name(picks[p], name, sizeof name);
            printf("%-24s %9.3f %9.3f %9.3f%s\n", name, align_precision(&counts[p]), align_recall(&counts[p]),
                   align_aer(&counts[p]), picks[p].layer == chosen.layer && picks[p].head == chosen.head ? "  (default)" : "");
            if (picks[p].head >= 0 && (best < 0 || align_aer(&counts[p]) < align_aer(&counts[best]))) best = p;
        }
        char name[64];
        pick_name(picks[best], name, sizeof name);
        printf("best head: %s, AER %.3f (%ld sentence pairs, %ld gold links)\n", name, align_aer(&counts[best]),
               (long)n_src, counts[best].gold);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "qkv: %s\n", err_msg());
    free_lines(src, n_src), free_lines(tgt, n_tgt), free_lines(gold, n_gold);
    free(picks), free(counts);
    run_close(&r);
    return rc;
}
