/* joint_vocab: see joint_vocab.h. The union is keyed by the token's string, so a word or
 * a piece both vocabularies hold gets one id (its target id): the tokenizer finds it
 * once, and the encoder still reads it as the source id it has there. */
#include "onnx/joint_vocab.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

static int same_list(const Vocab *a, const Vocab *b) {
    if (a->size != b->size) return 0;
    for (int i = 0; i < a->size; i++)
        if (strcmp(vocab_token(a, i), vocab_token(b, i)) != 0) return 0;
    return 1;
}

/* tok's id in v, or -1 (vocab_lookup answers <unk> for both "<unk>" and an absent token) */
static int find(const Vocab *v, const char *tok) {
    int id = vocab_lookup(v, tok, strlen(tok));
    return id == VOCAB_UNK && strcmp(tok, vocab_token(v, VOCAB_UNK)) != 0 ? -1 : id;
}

void joint_vocab_build(JointVocab *j, const Vocab *src, const Vocab *tgt) {
    memset(j, 0, sizeof *j);
    j->n_target = tgt->size, j->n_source = src->size;
    j->shared = same_list(src, tgt);
    int extra = 0;
    j->of_source = xmalloc(sizeof(int) * (size_t)src->size);
    for (int s = 0; s < src->size; s++) {
        int t = s < VOCAB_N_SPECIAL ? s : find(tgt, vocab_token(src, s));
        j->of_source[s] = t >= 0 ? t : tgt->size + extra++;
    }
    j->size = tgt->size + extra;
    j->tokens = xmalloc(sizeof(char *) * (size_t)j->size);
    j->source_of = xmalloc(sizeof(int) * (size_t)j->size);
    for (int t = 0; t < tgt->size; t++) j->tokens[t] = xstrdup(vocab_token(tgt, t)), j->source_of[t] = VOCAB_UNK;
    for (int s = 0; s < src->size; s++) {
        int id = j->of_source[s];
        if (id >= tgt->size) j->tokens[id] = xstrdup(vocab_token(src, s));
        j->source_of[id] = s;
    }
}

void joint_vocab_free(JointVocab *j) {
    if (!j || !j->tokens) return;
    for (int i = 0; i < j->size; i++) free(j->tokens[i]);
    free(j->tokens), free(j->source_of), free(j->of_source);
    memset(j, 0, sizeof *j);
}
