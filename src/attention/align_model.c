/* align_model: see align_model.h. */
#include "attention/align_model.h"

#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/corpus.h"
#include "util/err.h"
#include "util/mem.h"

int aligner_picks(int layers, int heads, AlignPick *picks) {
    int k = 0;
    for (int l = 0; l < layers; l++)
        for (int h = -1; h < heads; h++) picks[k++] = (AlignPick){l, h};
    picks[k++] = (AlignPick){-1, -1};
    return k;
}

/* The cross-attention map of pick into out (a->T x a->S); from: what the measure gave
 * (T, S + 1), read by an ALIGN_CONTRIB pick. */
static void pick_map(const AttnMaps *a, const float *from, AlignPick p, float *out) {
    int rows = a->T, cols = a->S, L = a->layers[ATTN_CROSS];
    size_t per = (size_t)rows * cols;
    if (p.layer == ALIGN_CONTRIB) {
        align_source_columns(from, rows, cols, out);
        return;
    }
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

/* Both sides' ids (room for max + 2 each); -1 with the error set for a side the model
 * cannot read whole. */
static int encode_pair(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, int *sid,
                       int *ns, int *tid, int *nt) {
    int max = m->cfg.max_positions - 2;
    /* one past the positions: a line the model cannot read whole is refused, not cut
     * (its alignments would stop short of its last words) */
    *ns = encode_line(p->src, tokenizer, sv, sid, max + 1);
    *nt = encode_line(p->tgt, tokenizer, tv, tid, max + 1);
    if (*ns > max || *nt > max)
        return err_set("%s:%d: more than the %d tokens this model has positions for",
                       *ns > max ? p->src_file : p->tgt_file, p->line, max);
    return 0;
}

/* One pair's maps and the word each piece belongs to. */
typedef struct {
    AttnMaps maps;
    int *src_word, *tgt_word; /* (S), (T): -1 for no word */
    int n_src_words, n_tgt_words;
    float *from; /* NULL, or (T, S + 1): what the null decision reads */
} PairWords;

static void capture_words(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const int *sid, int ns,
                          const int *tid, int nt, AlignNullMeasure null, PairWords *w) {
    attnmap_capture(m, sv, tv, sid, ns, tid, nt, &w->maps);
    w->from = NULL;
    if (null) null(m, &w->maps, w->from = xmalloc(sizeof(float) * (size_t)w->maps.T * (w->maps.S + 1)));
    w->src_word = xmalloc(sizeof(int) * (size_t)w->maps.S);
    w->tgt_word = xmalloc(sizeof(int) * (size_t)w->maps.T);
    /* the vocabulary's pieces, whose space markers say where words start */
    w->n_src_words = align_words(w->maps.src, w->maps.S, tokenizer, w->src_word);
    w->n_tgt_words = align_words(w->maps.tgt_out, w->maps.T, tokenizer, w->tgt_word);
}

static void free_words(PairWords *w) {
    attnmap_free(&w->maps);
    free(w->src_word), free(w->tgt_word), free(w->from);
}

/* links (n_tgt_words of them) under pick, the null decision read when null is set; map
 * has room for one (T x S) map. */
static void pick_links(const PairWords *w, AlignPick pick, int null, float *map, int *links) {
    pick_map(&w->maps, w->from, pick, map);
    const AttnMaps *a = &w->maps;
    align_links(map, null ? w->from : NULL, w->tgt_word, a->T, w->n_tgt_words, w->src_word, a->S, w->n_src_words,
                links);
}

int aligner_links(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, AlignPick pick,
                  int **links) {
    return aligner_links_null(m, tokenizer, sv, tv, p, pick, NULL, 0, links);
}

int aligner_links_null(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, AlignPick pick,
                       AlignNullMeasure null, int null_on, int **links) {
    int max = m->cfg.max_positions - 2, ns, nt, rc = 0;
    int *sid = xmalloc(sizeof(int) * (size_t)(max + 1)), *tid = xmalloc(sizeof(int) * (size_t)(max + 1));
    *links = NULL;
    if (encode_pair(m, tokenizer, sv, tv, p, sid, &ns, tid, &nt) != 0) rc = -1;
    else if (ns > 0 && nt > 0) {
        PairWords w;
        capture_words(m, tokenizer, sv, tv, sid, ns, tid, nt, null, &w);
        float *map = xmalloc(sizeof(float) * (size_t)w.maps.S * w.maps.T);
        *links = xmalloc(sizeof(int) * (size_t)(w.n_tgt_words ? w.n_tgt_words : 1));
        pick_links(&w, pick, null_on, map, *links);
        rc = w.n_tgt_words;
        free(map);
        free_words(&w);
    }
    free(sid), free(tid);
    return rc;
}

int aligner_score(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, const AlignPick *picks,
                  int n_picks, AlignCounts *counts) {
    return aligner_score_null(m, tokenizer, sv, tv, p, picks, n_picks, NULL, 0, counts);
}

int aligner_score_null(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p,
                       const AlignPick *picks, int n_picks, AlignNullMeasure null, int null_on, AlignCounts *counts) {
    int max = m->cfg.max_positions - 2, ns, nt, rc = -1;
    int *sid = xmalloc(sizeof(int) * (size_t)(max + 1)), *tid = xmalloc(sizeof(int) * (size_t)(max + 1));
    /* room for every link the line can hold: each takes at least 3 bytes ("i-j") */
    int cap = (int)(strlen(p->gold) / 3 + 1), ng = 0;
    AlignLink *pairs = xmalloc(sizeof(AlignLink) * (size_t)cap);
    PairWords w = {0};
    if (encode_pair(m, tokenizer, sv, tv, p, sid, &ns, tid, &nt) != 0) goto done;
    if ((ng = align_parse(p->gold, pairs, cap)) < 0) {
        err_set("%s:%d: not Pharaoh alignments (i-j pairs)", p->gold_file, p->line);
        goto done;
    }
    if (ns == 0 || nt == 0) {
        if (ng > 0) {
            err_set("%s:%d: link %d-%d is out of range: the pair has an empty side", p->gold_file, p->line, pairs[0][0],
                    pairs[0][1]);
            goto done;
        }
        rc = 0; /* nothing to link, and no link to find */
        goto done;
    }
    capture_words(m, tokenizer, sv, tv, sid, ns, tid, nt, null, &w);
    int bad = align_out_of_range(pairs, ng, w.n_src_words, w.n_tgt_words);
    if (bad >= 0) {
        err_set("%s:%d: link %d-%d is out of range: the pair has %d source and %d target words", p->gold_file, p->line,
                pairs[bad][0], pairs[bad][1], w.n_src_words, w.n_tgt_words);
        goto done;
    }
    ng = align_unique(pairs, ng); /* a link written twice is one sure link */
    float *map = xmalloc(sizeof(float) * (size_t)w.maps.S * w.maps.T);
    int *links = xmalloc(sizeof(int) * (size_t)(w.n_tgt_words ? w.n_tgt_words : 1));
    for (int k = 0; k < n_picks; k++) {
        pick_links(&w, picks[k], null_on, map, links);
        align_score(links, w.n_tgt_words, pairs, ng, &counts[k]);
    }
    free(map), free(links);
    rc = 0;
done:
    if (w.src_word) free_words(&w);
    free(sid), free(tid), free(pairs);
    return rc;
}
