/* align: see align.h. */
#include "infer/align.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenize.h"
#include "util.h"

int align_words(char **tokens, int n, int pieces_are_chars, int *word_of) {
    int words = 0, in_word = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(tokens[i], TOKENIZE_SPACE) == 0 || strcmp(tokens[i], "<eos>") == 0) {
            word_of[i] = -1;
            in_word = 0;
            continue;
        }
        /* with words every token starts one; with characters a word runs to the next space */
        if (!in_word || !pieces_are_chars) words++;
        in_word = 1;
        word_of[i] = words - 1;
    }
    return words;
}

void align_from_map(const float *map, int cols, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                    const int *src_word, int n_src_pieces, int n_src_words, int *links) {
    double *pooled = xcalloc((size_t)n_tgt_words * (n_src_words ? n_src_words : 1), sizeof(double));
    int *pieces = xcalloc((size_t)(n_tgt_words ? n_tgt_words : 1), sizeof(int));
    for (int t = 0; t < n_tgt_pieces; t++) {
        int w = tgt_word[t];
        if (w < 0) continue;
        pieces[w]++;
        for (int s = 0; s < n_src_pieces; s++)
            if (src_word[s] >= 0) pooled[(size_t)w * n_src_words + src_word[s]] += map[(size_t)t * cols + s];
    }
    for (int w = 0; w < n_tgt_words; w++) {
        int best = 0;
        for (int s = 1; s < n_src_words; s++)
            if (pooled[(size_t)w * n_src_words + s] > pooled[(size_t)w * n_src_words + best]) best = s;
        links[w] = n_src_words ? best : -1;
    }
    free(pooled), free(pieces);
}

int align_parse(const char *line, int (*pairs)[2], int max) {
    int n = 0;
    const char *p = line;
    while (*p) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        long i = strtol(p, &end, 10);
        if (end == p || *end != '-' || i < 0 || i > INT_MAX) return -1;
        p = end + 1;
        long j = strtol(p, &end, 10);
        if (end == p || j < 0 || j > INT_MAX || (*end && *end != ' ' && *end != '\t')) return -1;
        p = end;
        if (n < max) pairs[n][0] = (int)i, pairs[n][1] = (int)j;
        n++;
    }
    return n > max ? max : n;
}

void align_score(const int *links, int n_tgt_words, int (*gold)[2], int n_gold, AlignCounts *c) {
    for (int j = 0; j < n_tgt_words; j++) {
        if (links[j] < 0) continue;
        c->predicted++;
        for (int k = 0; k < n_gold; k++)
            if (gold[k][0] == links[j] && gold[k][1] == j) {
                c->hits++;
                break;
            }
    }
    c->gold += n_gold;
}

double align_precision(const AlignCounts *c) { return c->predicted ? (double)c->hits / (double)c->predicted : 0.0; }
double align_recall(const AlignCounts *c) { return c->gold ? (double)c->hits / (double)c->gold : 0.0; }
double align_aer(const AlignCounts *c) {
    long d = c->predicted + c->gold;
    return d ? 1.0 - 2.0 * (double)c->hits / (double)d : 1.0;
}
