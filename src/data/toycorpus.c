/* toycorpus: a deterministic synthetic language pair that needs real translation, plus
 * copy and reverse sanity tasks.
 *
 * The pair: an English-like source and an invented target language with
 *   - a lexicon (every word translated, no cognates to copy),
 *   - word-order change: adjectives follow their noun, the verb goes last (SOV),
 *     prepositional phrases sit before the verb,
 *   - agreement: determiners and adjectives agree with the noun's lexical gender and
 *     number, the verb with the subject's number; gender is not visible in the source,
 *     so it has to be learned per noun,
 * and 3-20 words per sentence. Each pair comes with its gold word alignment in Pharaoh
 * format ("i-j": source word i, target word j), for checking attention later.
 *
 * The "particles" task is the same pair, sentence for sentence (the same draws of the same
 * seed), with two case particles the target grammar inserts: "ga" after the subject's noun
 * phrase and "wo" after the object's. No source word stands for them, so their gold leaves
 * them unaligned, as real gold leaves function words and case markers: an aligner has to
 * decide that a target word came from nowhere. The other words' links are translate's, their
 * target indices moved past the particles. */
#include "data/toycorpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/mem.h"
#include "util/rng.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *sg, *pl, *t_sg, *t_pl;
    int fem;
} Noun;
typedef struct {
    const char *en, *stem;
} Adj;
typedef struct {
    const char *sg, *pl, *stem;
    int transitive;
} Verb;

static const Noun nouns[] = {
    {"cat", "cats", "miro", "miros", 0},           {"dog", "dogs", "kano", "kanes", 0},
    {"bird", "birds", "avela", "avelas", 1},       {"farmer", "farmers", "grano", "granos", 0},
    {"teacher", "teachers", "mesta", "mestas", 1}, {"child", "children", "nilo", "nilos", 0},
    {"horse", "horses", "kabo", "kabos", 0},       {"house", "houses", "dema", "demas", 1},
    {"river", "rivers", "rivo", "rivos", 0},       {"tree", "trees", "silva", "silvas", 1},
    {"apple", "apples", "pomi", "pomis", 1},       {"book", "books", "libro", "libres", 0},
    {"wolf", "wolves", "lupo", "lupos", 0},        {"girl", "girls", "nena", "nenas", 1},
    {"boy", "boys", "nano", "nanos", 0},           {"king", "kings", "rego", "regos", 0},
    {"queen", "queens", "rega", "regas", 1},       {"flower", "flowers", "flora", "floras", 1},
    {"city", "cities", "urba", "urbas", 1},        {"friend", "friends", "amiko", "amikos", 0},
};
static const Adj adjs[] = {
    {"red", "rub"},  {"old", "vet"},   {"big", "grand"},  {"small", "pik"},  {"happy", "fel"},   {"green", "verd"},
    {"tall", "alt"}, {"young", "jov"}, {"quiet", "kalm"}, {"black", "negr"}, {"white", "blank"}, {"brave", "fort"},
};
static const Verb verbs[] = {
    {"sees", "see", "vid", 1},       {"likes", "like", "am", 1}, {"finds", "find", "trov", 1},
    {"follows", "follow", "sek", 1}, {"eats", "eat", "manj", 1}, {"helps", "help", "aid", 1},
    {"sleeps", "sleep", "dorm", 0},  {"runs", "run", "kur", 0},  {"sings", "sing", "kant", 0},
    {"waits", "wait", "atend", 0},
};
static const char *preps[][2] = {{"near", "apud"}, {"under", "sub"}, {"with", "kun"}, {"behind", "post"}};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_WORDS 64

typedef struct {
    const char *src[MAX_WORDS];
    char tgt_buf[MAX_WORDS][24];
    int ns, nt;
    int align[MAX_WORDS]; /* source index of each target word; -1: unaligned */
    int particles;        /* 1: the particles task's case particles are inserted */
    int n_unaligned;      /* target words with no source word */
} Pair;

static void add_src(Pair *p, const char *w) { p->src[p->ns++] = w; }
static void add_tgt(Pair *p, const char *w, int src_index) {
    snprintf(p->tgt_buf[p->nt], sizeof p->tgt_buf[0], "%s", w);
    p->align[p->nt++] = src_index;
}
/* A case particle of the particles task (none in the others): a target word of no source
 * word. It draws nothing from the generator, so the sentences stay translate's. */
static void add_particle(Pair *p, const char *w) {
    if (!p->particles) return;
    add_tgt(p, w, -1);
    p->n_unaligned++;
}

typedef struct {
    int noun, plural, det, n_adj, adj[2];
    int src_det, src_adj[2], src_noun; /* source positions */
} NounPhrase;

static void gen_np(Pair *p, NounPhrase *np, Rng *r) {
    np->noun = (int)rng_below(r, COUNT(nouns));
    np->plural = rng_below(r, 2) == 0;
    np->det = (int)rng_below(r, 2); /* 0: definite, 1: indefinite */
    np->n_adj = (int)rng_below(r, 3);
    if (np->n_adj == 2 && rng_below(r, 2)) np->n_adj = 1;
    for (int i = 0; i < np->n_adj; i++) {
        do np->adj[i] = (int)rng_below(r, COUNT(adjs));
        while (i == 1 && np->adj[1] == np->adj[0]);
    }
    const Noun *n = &nouns[np->noun];
    np->src_det = p->ns;
    const char *next = np->n_adj ? adjs[np->adj[0]].en : np->plural ? n->pl : n->sg;
    add_src(p, np->det == 0 ? "the" : np->plural ? "some" : strchr("aeiou", next[0]) ? "an" : "a");
    for (int i = 0; i < np->n_adj; i++) np->src_adj[i] = p->ns, add_src(p, adjs[np->adj[i]].en);
    np->src_noun = p->ns;
    add_src(p, np->plural ? n->pl : n->sg);
}

static void emit_np(Pair *p, const NounPhrase *np) {
    const Noun *n = &nouns[np->noun];
    static const char *dets[2][2][2] = {{{"lo", "los"}, {"la", "las"}}, {{"un", "unos"}, {"una", "unas"}}};
    static const char *endings[2][2] = {{"o", "os"}, {"a", "as"}};
    /* the determiner's gold is the source determiner it translates, as annotators link
     * articles, though its gender (and with "the" its number) is the noun's */
    add_tgt(p, dets[np->det][n->fem][np->plural], np->src_det);
    add_tgt(p, np->plural ? n->t_pl : n->t_sg, np->src_noun);
    for (int i = 0; i < np->n_adj; i++) {
        char w[24];
        snprintf(w, sizeof w, "%s%s", adjs[np->adj[i]].stem, endings[n->fem][np->plural]);
        add_tgt(p, w, np->src_adj[i]);
    }
}

/* One clause: subject, verb, (object), (prepositional phrase); emitted verb-final. */
static void gen_clause(Pair *p, Rng *r) {
    NounPhrase subj, obj, pp_np;
    gen_np(p, &subj, r);
    const Verb *v = &verbs[rng_below(r, COUNT(verbs))];
    int src_verb = p->ns;
    add_src(p, subj.plural ? v->pl : v->sg);
    int has_obj = v->transitive, has_pp = rng_below(r, 3) == 0, prep = 0, src_prep = 0;
    if (has_obj) gen_np(p, &obj, r);
    if (has_pp) {
        prep = (int)rng_below(r, COUNT(preps));
        src_prep = p->ns;
        add_src(p, preps[prep][0]);
        gen_np(p, &pp_np, r);
    }
    emit_np(p, &subj);
    add_particle(p, "ga");
    if (has_obj) emit_np(p, &obj), add_particle(p, "wo");
    if (has_pp) add_tgt(p, preps[prep][1], src_prep), emit_np(p, &pp_np);
    char w[24];
    snprintf(w, sizeof w, "%s%s", v->stem, subj.plural ? "an" : "a");
    add_tgt(p, w, src_verb);
}

static void gen_translate(Pair *p, Rng *r, int particles) {
    do {
        memset(p, 0, sizeof *p);
        p->particles = particles;
        gen_clause(p, r);
        if (rng_below(r, 3) == 0) {
            int src_and = p->ns;
            add_src(p, "and");
            add_tgt(p, "e", src_and);
            gen_clause(p, r);
        }
        /* the length limit counts translate's words only, so both tasks keep the same pairs */
    } while (p->ns < 3 || p->ns > 20 || p->nt - p->n_unaligned > 20);
}

static const char *letters[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
                                "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"};

static void gen_sequence(Pair *p, Rng *r, int reverse) {
    memset(p, 0, sizeof *p);
    int n = 3 + (int)rng_below(r, 18);
    for (int i = 0; i < n; i++) add_src(p, letters[rng_below(r, COUNT(letters))]);
    for (int j = 0; j < n; j++) {
        int i = reverse ? n - 1 - j : j;
        add_tgt(p, p->src[i], i);
    }
}

/* A small open-addressing set of sentence hashes, so no pair repeats across splits. */
typedef struct {
    uint64_t *slots;
    size_t n;
} Seen;
static int seen_add(Seen *s, uint64_t h) {
    if (h == 0) h = 1;
    size_t i = h & (s->n - 1);
    while (s->slots[i]) {
        if (s->slots[i] == h) return 0;
        i = (i + 1) & (s->n - 1);
    }
    s->slots[i] = h;
    return 1;
}

static uint64_t pair_hash(const Pair *p) {
    uint64_t h = 0x1234567;
    for (int i = 0; i < p->ns; i++)
        for (const char *c = p->src[i]; *c; c++) h = hash64(h, (uint64_t)(unsigned char)*c + 1);
    return h;
}

/* The nine files of a toy corpus, made in memory and written as one set */
typedef struct {
    StrBuf files[3][3]; /* [split][src, tgt, align] */
} ToySet;

static const char *const toy_splits[3] = {"train", "valid", "test"}, *const toy_exts[3] = {"src", "tgt", "align"};

int toydata_write(const char *dir, const char *task, int n_train, int n_valid, int n_test, uint64_t seed) {
    int kind = strcmp(task, "translate") == 0   ? 0
               : strcmp(task, "copy") == 0      ? 1
               : strcmp(task, "reverse") == 0   ? 2
               : strcmp(task, "particles") == 0 ? 3
                                                : -1;
    if (kind < 0) return err_set("unknown toy task '%s' (translate, copy, reverse, particles)", task);
    if (staged_dir_usable(dir, "DIR") != 0) return -1;
    int sizes[3] = {n_train, n_valid, n_test};
    size_t total = (size_t)n_train + n_valid + n_test;
    Seen seen = {NULL, 1024};
    while (seen.n < 4 * total) seen.n *= 2;
    seen.slots = xcalloc(seen.n, sizeof(uint64_t));
    Rng r;
    rng_seed(&r, seed);
    ToySet set = {0};
    for (int s = 0; s < 3; s++) {
        StrBuf *src = &set.files[s][0], *tgt = &set.files[s][1], *align = &set.files[s][2];
        for (int k = 0; k < sizes[s]; k++) {
            Pair p;
            int tries = 0;
            do {
                if (kind == 0 || kind == 3) gen_translate(&p, &r, kind == 3);
                else gen_sequence(&p, &r, kind == 2);
            } while (!seen_add(&seen, pair_hash(&p)) && ++tries < 1000);
            for (int i = 0; i < p.ns; i++) sb_printf(src, "%s%s", i ? " " : "", p.src[i]);
            for (int j = 0; j < p.nt; j++) sb_printf(tgt, "%s%s", j ? " " : "", p.tgt_buf[j]);
            for (int j = 0, first = 1; j < p.nt; j++)
                if (p.align[j] >= 0) sb_printf(align, "%s%d-%d", first ? "" : " ", p.align[j], j), first = 0;
            sb_append(src, "\n", 1), sb_append(tgt, "\n", 1), sb_append(align, "\n", 1);
        }
    }
    free(seen.slots);
    /* all nine or none: a stop or a full disk never leaves a new train.src beside an old
     * train.align (other files in the folder are left alone) */
    char names[9][16];
    StagedPart parts[9];
    for (int s = 0; s < 3; s++)
        for (int e = 0; e < 3; e++) {
            int i = 3 * s + e;
            snprintf(names[i], sizeof names[i], "%s.%s", toy_splits[s], toy_exts[e]);
            const StrBuf *b = &set.files[s][e];
            parts[i] = (StagedPart){names[i], b->buf ? b->buf : "", b->len};
        }
    int rc = staged_dir_write_parts(dir, "DIR", parts, 9, NULL);
    for (int s = 0; s < 3; s++)
        for (int e = 0; e < 3; e++) sb_free(&set.files[s][e]);
    return rc;
}
