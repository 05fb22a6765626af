/* tokenizer_json: see tokenizer_json.h. The pipeline a runtime runs on a source line:
 * added tokens (the four specials, matched first), normalizer, pre-tokenizer, model,
 * post-processor (<eos> appended); on an output: the decoder, after the specials are
 * dropped. Each kind's stages restate what qkv's own tokenizer does (data/tokenize.h,
 * data/spm.h); what differs at the edges is said in docs/export.md. */
#include "onnx/tokenizer_json.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "onnx/spm_proto.h"
#include "util/err.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

/* The score of a piece the source model lacks: no segmentation of a line into source
 * pieces (each above -100 in practice, a line a few thousand pieces at most) scores as
 * low, so the Viterbi search never takes one while a source piece covers the text. */
#define TOKENIZER_NEVER_SCORE (-1e7)

static json_t *regex(const char *re) { return json_pack("{s:s}", "Regex", re); }

/* The special names are no added tokens: the runtimes match an added token anywhere in a
 * line, inside a word too ("a<unk>b"), where qkv reads the text as it reads any other
 * (a word, characters, SentencePiece pieces). The model's vocabulary holds them at their
 * ids, which is what the post-processor and a whole word "<eos>" need; tokenizer_config.json
 * names them, so that decoding still drops them. */
static json_t *added_tokens(void) { return json_array(); }

/* qkv frames a source as its ids then <eos> (data/batch.h), with no <bos> */
static json_t *post_processor(const JointVocab *jv) {
    const char *eos = jv->tokens[VOCAB_EOS];
    json_t *seq = json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0);
    json_t *end = json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", eos, "type_id", 0);
    json_t *special = json_object();
    json_put(special, eos, json_pack("{s:s, s:[i], s:[s]}", "id", eos, "ids", VOCAB_EOS, "tokens", eos));
    return json_pack("{s:s, s:[o, o], s:[o, o, o], s:o}", "type", "TemplateProcessing", "single", json_deep_copy(seq),
                     json_deep_copy(end), "pair", seq, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "B", "type_id", 1),
                     end, "special_tokens", special);
}

static json_t *word_level(const JointVocab *jv) {
    json_t *vocab = json_object();
    for (int id = 0; id < jv->size; id++) json_put(vocab, jv->tokens[id], json_integer(id));
    return json_pack("{s:s, s:o, s:s}", "type", "WordLevel", "vocab", vocab, "unk_token", jv->tokens[VOCAB_UNK]);
}

/* qkv's blanks (data/tokenize.c): space, tab, CR, VT, FF */
#define BLANKS "[ \\t\\r\\x0b\\x0c]"

static void word_stages(json_t *t, const JointVocab *jv, int kind) {
    if (kind == TOKENIZER_WORD) {
        json_put(t, "normalizer", json_null());
        json_put(t, "pre_tokenizer",
                 json_pack("{s:s, s:o, s:s, s:b}", "type", "Split", "pattern", regex(BLANKS "+"), "behavior", "Removed",
                           "invert", 0));
        json_put(t, "post_processor", post_processor(jv));
        json_put(t, "decoder", json_null()); /* tokens joined with one space */
    } else {
        /* char: blanks at the ends go, each run inside becomes "▁"; then one token a code point */
        json_put(t, "normalizer",
                 json_pack("{s:s, s:[{s:s, s:o, s:s}, {s:s, s:o, s:s}]}", "type", "Sequence", "normalizers", "type",
                           "Replace", "pattern", regex("^" BLANKS "+|" BLANKS "+$"), "content", "", "type", "Replace",
                           "pattern", regex(BLANKS "+"), "content", "\xE2\x96\x81"));
        json_put(t, "pre_tokenizer",
                 json_pack("{s:s, s:o, s:s, s:b}", "type", "Split", "pattern", regex("."), "behavior", "Isolated",
                           "invert", 0));
        json_put(t, "post_processor", post_processor(jv));
        json_put(t, "decoder",
                 json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}]}", "type", "Sequence", "decoders", "type", "Replace",
                           "pattern", "String", "\xE2\x96\x81", "content", " ", "type", "Fuse"));
    }
    json_put(t, "model", word_level(jv));
}

/* The normalizer of a SentencePiece model's rule, NULL with the error set for a rule no
 * tokenizer.json normalizer restates. */
static json_t *spm_normalizer(const SpmProto *p) {
    json_t *list = json_array();
    if (strcmp(p->norm_name, "nmt_nfkc") == 0 || strcmp(p->norm_name, "nfkc") == 0) {
        StrBuf map = {0};
        sb_append_base64(&map, p->charsmap, p->charsmap_len);
        json_array_append_new(list, json_pack("{s:s, s:s}", "type", "Precompiled", "precompiled_charsmap",
                                              map.buf ? map.buf : ""));
        sb_free(&map);
    } else if (strcmp(p->norm_name, "identity") != 0) {
        json_decref(list);
        err_set("tokenizer.json: the source SentencePiece model's normalization '%s' has no counterpart in the "
                "Hugging Face tokenizers format (nmt_nfkc, nfkc and identity have)",
                p->norm_name);
        return NULL;
    }
    if (p->remove_extra_whitespaces) {
        json_array_append_new(list, json_pack("{s:s, s:b, s:b}", "type", "Strip", "strip_left", 1, "strip_right", 1));
        json_array_append_new(list, json_pack("{s:s, s:o, s:s}", "type", "Replace", "pattern", regex(" {2,}"),
                                              "content", " "));
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "normalizers", list);
}

static json_t *unigram(const JointVocab *jv, const SpmProto *p) {
    json_t *vocab = json_array();
    for (int id = 0; id < jv->size; id++) {
        int s = jv->source_of[id];
        int own = s < p->n && jv->of_source[s] == id && (p->type[s] == SPM_NORMAL || p->type[s] == SPM_USER_DEFINED);
        json_array_append_new(vocab,
                              json_pack("[s, f]", jv->tokens[id], own ? (double)p->score[s] : TOKENIZER_NEVER_SCORE));
    }
    return json_pack("{s:s, s:i, s:o, s:b}", "type", "Unigram", "unk_id", VOCAB_UNK, "vocab", vocab, "byte_fallback",
                     p->byte_fallback);
}

typedef struct {
    float score;            /* the piece's */
    int piece, left, right; /* source ids */
} Merge;

static int merge_order(const void *a, const void *b) {
    const Merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

/* SentencePiece's BPE joins, at each step, the neighbours whose join is the best-scored
 * piece; a BPE model ranks merges instead. Every split of a source piece into two source
 * pieces is a merge, ranked by the piece's score (then ids: the order Hugging Face's own
 * conversion gives), so the merges happen in the order qkv's model makes the pieces. */
static json_t *bpe(const JointVocab *jv, const Vocab *src, const SpmProto *p) {
    json_t *vocab = json_object();
    for (int id = 0; id < jv->size; id++) json_put(vocab, jv->tokens[id], json_integer(id));
    Merge *m = NULL;
    size_t n = 0, cap = 0;
    for (int s = VOCAB_N_SPECIAL; s < p->n; s++) {
        if (p->type[s] != SPM_NORMAL && p->type[s] != SPM_USER_DEFINED) continue;
        const char *piece = p->piece[s];
        size_t len = strlen(piece);
        for (size_t cut = 1; cut < len; cut++) {
            if (((unsigned char)piece[cut] & 0xC0) == 0x80) continue; /* inside a character */
            int l = vocab_lookup(src, piece, cut), r = vocab_lookup(src, piece + cut, len - cut);
            if (l < VOCAB_N_SPECIAL || r < VOCAB_N_SPECIAL) continue;
            if (n == cap) cap = cap ? 2 * cap : 1024, m = xrealloc(m, sizeof *m * cap);
            m[n++] = (Merge){p->score[s], s, l, r};
        }
    }
    if (n) qsort(m, n, sizeof *m, merge_order);
    json_t *merges = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(merges, json_pack("[s, s]", p->piece[m[i].left], p->piece[m[i].right]));
    free(m);
    return json_pack("{s:s, s:o, s:o, s:s, s:b, s:b, s:b}", "type", "BPE", "vocab", vocab, "merges", merges,
                     "unk_token", jv->tokens[VOCAB_UNK], "fuse_unk", 1, "byte_fallback", p->byte_fallback,
                     "ignore_merges", 0);
}

/* A Replace decoder: pattern (a regex when re, else a string) to content in each token. */
static json_t *replace(const char *pattern, int re, const char *content) {
    return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", re ? "Regex" : "String", pattern, "content",
                     content);
}

/* U+FDD0, a noncharacter (Unicode keeps them for a program's own use): no piece holds it */
#define MARK "\xEF\xB7\x90"

/* SentencePiece's Decode: each piece's "▁" is a space, byte pieces are their bytes read as
 * UTF-8 (data/spm.h), and, when the model adds a dummy prefix or strips spaces
 * (bos_ws), every piece before the first that writes anything loses its first "▁", as does
 * that one: "▁ ▁ ▁felo" is "felo", "<0x20> ▁felo" two spaces and "felo". A decoder sees
 * one token at a time, so each piece's first "▁" becomes MARK before the rest become
 * spaces and the bytes are read; once the pieces are joined, the marks that open the text
 * go (pieces that wrote nothing else, and the first one's) and the others are spaces. A
 * byte space is no piece's "▁", and stays; a NUL byte writes nothing. */
static json_t *spm_decoder(int bos_ws) {
    json_t *d = json_array();
    if (bos_ws) json_array_append_new(d, replace("^\xE2\x96\x81", 1, MARK));
    json_array_append_new(d, replace("\xE2\x96\x81", 0, " "));
    json_array_append_new(d, json_pack("{s:s}", "type", "ByteFallback"));
    json_array_append_new(d, json_pack("{s:s}", "type", "Fuse"));
    if (bos_ws) {
        json_array_append_new(d, replace("\\A" MARK "+", 1, ""));
        json_array_append_new(d, replace(MARK, 0, " "));
    }
    /* a NUL byte writes nothing, as in qkv's text (data/spm.h), once it has ended the
     * marks' run as SentencePiece's text that it opens */
    json_array_append_new(d, json_pack("{s:s, s:{s:s%}, s:s}", "type", "Replace", "pattern", "String", "", (size_t)1,
                                       "content", ""));
    return json_pack("{s:s, s:o}", "type", "Sequence", "decoders", d);
}

static int subword_stages(json_t *t, const JointVocab *jv, const Vocab *src) {
    SpmProto p;
    if (spm_proto_read(&p, src->spm_model, src->spm_len, "the source SentencePiece model") != 0) return -1;
    json_t *norm = NULL;
    if (p.model_type != SPM_UNIGRAM && p.model_type != SPM_BPE) {
        err_set("tokenizer.json: the source SentencePiece model is of type %s; the export writes unigram and bpe "
                "models",
                p.model_type == SPM_WORD   ? "word"
                : p.model_type == SPM_CHAR ? "char"
                                           : "unknown");
    } else if (!p.escape_whitespaces) {
        err_set("tokenizer.json: the source SentencePiece model keeps spaces unescaped (escape_whitespaces false), "
                "which the Metaspace pre-tokenizer cannot restate");
    } else norm = spm_normalizer(&p);
    if (!norm) return spm_proto_free(&p), -1;
    const char *scheme = p.add_dummy_prefix ? "always" : "never";
    json_put(t, "normalizer", norm);
    json_put(t, "pre_tokenizer",
             json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "\xE2\x96\x81", "prepend_scheme",
                       scheme, "split", 1));
    json_put(t, "post_processor", post_processor(jv));
    json_put(t, "decoder", spm_decoder(p.add_dummy_prefix || p.remove_extra_whitespaces));
    json_put(t, "model", p.model_type == SPM_UNIGRAM ? unigram(jv, &p) : bpe(jv, src, &p));
    spm_proto_free(&p);
    return 0;
}

char *tokenizer_json(const JointVocab *jv, int kind, const Vocab *src) {
    json_t *t = json_object();
    json_put(t, "version", json_string("1.0"));
    json_put(t, "truncation", json_null());
    json_put(t, "padding", json_null());
    json_put(t, "added_tokens", added_tokens());
    if (!tokenizer_is_subword(kind)) word_stages(t, jv, kind);
    else if (!src->spm_model) {
        json_decref(t);
        err_set("tokenizer.json: a %s run whose source vocabulary holds no SentencePiece model", tokenizer_name(kind));
        return NULL;
    } else if (subword_stages(t, jv, src) != 0) {
        json_decref(t);
        return NULL;
    }
    /* jansson drops a string that is not UTF-8 (a key, an array's element) without a word:
     * the ids after it would shift, so a vocabulary short of an entry is an error */
    json_t *vocab = json_object_get(json_object_get(t, "model"), "vocab");
    size_t n = json_is_array(vocab) ? json_array_size(vocab) : json_object_size(vocab);
    if (n != (size_t)jv->size) {
        json_decref(t);
        err_set("tokenizer.json: %d of the vocabulary's %d tokens could not be written (not UTF-8?)", jv->size - (int)n,
                jv->size);
        return NULL;
    }
    return json_text_line(t, JSON_WRITE_FLAGS);
}

char *tokenizer_config_json(const JointVocab *jv, int max_length) {
    json_t *o = json_object();
    json_put(o, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    json_put(o, "model_max_length", json_integer(max_length));
    json_put(o, "pad_token", json_string(jv->tokens[VOCAB_PAD]));
    json_put(o, "bos_token", json_string(jv->tokens[VOCAB_BOS]));
    json_put(o, "eos_token", json_string(jv->tokens[VOCAB_EOS]));
    json_put(o, "unk_token", json_string(jv->tokens[VOCAB_UNK]));
    /* qkv's output is the tokens as they are: no space taken from before "." or "'s" */
    json_put(o, "clean_up_tokenization_spaces", json_false());
    json_put(o, "model_input_names", json_pack("[s, s]", "input_ids", "attention_mask"));
    /* the specials, dropped from a decoded output (tokenizer.json's added_tokens does not
     * hold them: see added_tokens) */
    json_t *special = json_array();
    for (int id = 0; id < VOCAB_N_SPECIAL; id++) json_array_append_new(special, json_string(jv->tokens[id]));
    json_put(o, "additional_special_tokens", special);
    return json_text_line(o, JSON_WRITE_FLAGS);
}
