/* align: `qkv align RUN --src F --tgt F [--gold F]`, word alignments read from the
 * cross-attention, one Pharaoh line per pair, or precision/recall/AER per head against
 * gold links. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/alignment.h"
#include "infer/attnmap.h"
#include "train/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

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

/* --layer/--head: a number, or the word that means "averaged" */
static int parse_index(const char *s, const char *what, int *out) {
    char where[16], which[32];
    snprintf(where, sizeof where, "--%s", what);
    snprintf(which, sizeof which, "a %s number", what);
    return cmd_int(where, which, s, 0, 1000, out);
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
        return cmd_usage("qkv align RUN --src SRC --tgt TGT [--layer L|all] [--head H|avg] [--gold GOLD]");
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    int L = r.model.cfg.decoder_layers, H = r.model.cfg.heads;
    /* the default: the last decoder layer's heads averaged; on the toy pair it aligns
     * better than any single head and than all layers together (README, "Alignments") */
    Pick chosen = {L - 1, -1};
    if ((layer_s && strcmp(layer_s, "all") != 0 && parse_index(layer_s, "layer", &chosen.layer) != 0) ||
        (head_s && strcmp(head_s, "avg") != 0 && parse_index(head_s, "head", &chosen.head) != 0)) {
        run_close(&r);
        return cmd_fail(2);
    }
    if (layer_s && strcmp(layer_s, "all") == 0) {
        chosen.layer = -1;
        if (chosen.head >= 0) {
            err_set("--layer all averages every head; leave out --head or give a layer");
            run_close(&r);
            return cmd_fail(2);
        }
    }
    if (chosen.layer >= L || chosen.head >= H) {
        err_set("--layer/--head: this model has layers 0..%d and heads 0..%d", L - 1, H - 1);
        run_close(&r);
        return cmd_fail(2);
    }
    int n_src = 0, n_tgt = 0, n_gold = 0, rc = 2;
    char **src = read_file_lines(src_path, &n_src), **tgt = src ? read_file_lines(tgt_path, &n_tgt) : NULL;
    char **gold = tgt && gold_path ? read_file_lines(gold_path, &n_gold) : NULL;
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
    int (*pairs)[2] = NULL;
    for (int i = 0; i < n_src; i++) {
        /* one past the positions: a line the model cannot read whole is refused, not cut
         * (its alignments would stop short of its last words) */
        int ns = encode_line(src[i], tok, &r.src_vocab, sid, max + 1), nt = encode_line(tgt[i], tok, &r.tgt_vocab, tid, max + 1);
        int ng = 0;
        if (ns > max || nt > max) {
            err_set("%s:%d: more than the %d tokens this model has positions for", ns > max ? src_path : tgt_path, i + 1, max);
            free(sid), free(tid), free(pairs);
            goto done;
        }
        /* room for every link the line can hold: each takes at least 3 bytes ("i-j") */
        int cap = gold ? (int)(strlen(gold[i]) / 3 + 1) : 0;
        if (gold) pairs = xrealloc(pairs, sizeof(int[2]) * (size_t)cap);
        if (gold && (ng = align_parse(gold[i], pairs, cap)) < 0) {
            err_set("%s:%d: not Pharaoh alignments (i-j pairs)", gold_path, i + 1);
            free(sid), free(tid), free(pairs);
            goto done;
        }
        if (ns == 0 || nt == 0) {
            if (gold && ng > 0) {
                err_set("%s:%d: link %d-%d is out of range: the pair has an empty side", gold_path, i + 1, pairs[0][0], pairs[0][1]);
                free(sid), free(tid), free(pairs);
                goto done;
            }
            if (!gold) printf("\n");
            continue;
        }
        AttnMaps a;
        attnmap_capture(&r.model, &r.src_vocab, &r.tgt_vocab, sid, ns, tid, nt, &a);
        int *sw = xmalloc(sizeof(int) * (size_t)a.S), *tw = xmalloc(sizeof(int) * (size_t)a.T);
        int nsw = align_words(a.src, a.S, tok, sw), ntw = align_words(a.tgt_out, a.T, tok, tw); /* the vocabulary's pieces */
        int bad = gold ? align_out_of_range(pairs, ng, nsw, ntw) : -1;
        if (bad >= 0) {
            err_set("%s:%d: link %d-%d is out of range: the pair has %d source and %d target words", gold_path, i + 1,
                    pairs[bad][0], pairs[bad][1], nsw, ntw);
            free(sw), free(tw), free(sid), free(tid), free(pairs);
            attnmap_free(&a);
            goto done;
        }
        if (gold) ng = align_unique(pairs, ng); /* a link written twice is one sure link */
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
    if (rc) cmd_fail(rc);
    free_lines(src, n_src), free_lines(tgt, n_tgt), free_lines(gold, n_gold);
    free(picks), free(counts);
    run_close(&r);
    return rc;
}
