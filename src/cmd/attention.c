/* attention: `qkv attention RUN --text "..."`, the anatomy of every attention of one
 * sentence pair (weights, scores, contributions, queries and keys) as JSON, SVG heatmaps,
 * an HTML viewer and terminal views; `--watch`, the same over training from the
 * snapshots train.watch recorded.
 *
 * Files are written into a fresh directory beside --out and moved into place only when
 * all are written: a full disk leaves the old export whole, and a new export never shows
 * beside the files of an old one. A place that cannot hold the files exits 2, a write
 * that fails partway (full disk) 1, as for every command that writes. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/attnmap.h"
#include "infer/decode.h"
#include "infer/watch.h"
#include "train/run.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

typedef struct {
    const char *text, *target, *out, *gold;
    int watch;
    int query, kind, layer, head; /* --query: -1 none; layer/head -1: the default */
} Options;

/* ---- the export directory ------------------------------------------------------------- */

/* Files an export writes: what a new export replaces and clears out of an old one. */
static int export_file(const char *name) {
    if (strcmp(name, "maps.json") == 0 || strcmp(name, "index.html") == 0 || strcmp(name, "watch.json") == 0) return 1;
    size_t n = strlen(name);
    if (n < 4 || strcmp(name + n - 4, ".svg") != 0) return 0;
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t m = strlen(attnmap_kind_name(k));
        if (strncmp(name, attnmap_kind_name(k), m) == 0 && strncmp(name + m, "-layer", 6) == 0) return 1;
    }
    return 0;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[CONFIG_PATH_MAX + 300];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* A new, empty directory beside out for the files being written. */
static int staging_dir(const char *out, char *tmp, size_t n) {
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') len--;
    if (len == 0 || len + 32 >= n) return err_set("--out: '%s' is not a usable directory name", out);
    snprintf(tmp, n, "%.*s.partial-%d", (int)len, out, (int)getpid());
    remove_dir(tmp); /* a leftover of this pid's predecessor */
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) return err_set("--out: %s exists and is not a directory", out);
    char parent[CONFIG_PATH_MAX + 64];
    snprintf(parent, sizeof parent, "%s", tmp);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (make_dirs(parent) != 0) return -1;
    }
    if (mkdir(tmp, 0777) != 0) {
        int e = errno;
        return err_set("%s: cannot create: %s", out, strerror(e)), err_io(e); /* the place named, not the staging name */
    }
    return 0;
}

/* Moves every file of tmp into out (made if missing) and removes the old export's files
 * that the new one does not have. Renames within one file system cannot run out of space. */
static int publish(const char *tmp, const char *out) {
    if (rename(tmp, out) == 0) return 0; /* out did not exist (or was empty) */
    DIR *d = opendir(out);
    if (!d) {
        int e = errno;
        return err_set("%s: cannot open: %s", out, strerror(e)), err_io(e);
    }
    char from[CONFIG_PATH_MAX + 300], to[CONFIG_PATH_MAX + 300];
    struct dirent *e;
    while ((e = readdir(d))) { /* stale files of the old export first */
        snprintf(from, sizeof from, "%s/%s", tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (export_file(e->d_name) && access(from, F_OK) != 0) unlink(to);
    }
    closedir(d);
    int rc = 0;
    d = opendir(tmp);
    while (d && (e = readdir(d)) && rc == 0) {
        if (e->d_name[0] == '.') continue;
        snprintf(from, sizeof from, "%s/%s", tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (rename(from, to) != 0) {
            int e = errno;
            rc = err_set("%s: cannot move into place: %s", to, strerror(e)), err_io(e);
        }
    }
    if (d) closedir(d);
    remove_dir(tmp);
    return rc;
}

/* ---- one sentence ------------------------------------------------------------------------ */

/* A word of the user's text quoted for a one-line message: control bytes and bytes that
 * are not UTF-8 spelled \n, \t, \xNN, as every message spells them. */
static void quote_word(StrBuf *sb, const char *w) {
    sb_append(sb, "'", 1);
    while (*w) {
        size_t n = attnmap_utf8_char(w);
        unsigned char c = (unsigned char)*w;
        if (n && c >= 0x20 && c != 0x7f) sb_append(sb, w, n), w += n;
        else if (c == '\n' || c == '\t') sb_append(sb, c == '\n' ? "\\n" : "\\t", 2), w++;
        else sb_printf(sb, "\\x%02x", c), w++;
    }
    sb_append(sb, "'", 1);
}

/* Encodes text; lists unknown words into `unknown` (may be NULL), each once. Returns the
 * count. */
static int encode_checked(const char *text, int tokenizer, const Vocab *v, int *ids, int max, StrBuf *unknown) {
    int n = encode_line(text, tokenizer, v, ids, max);
    if (unknown) {
        /* which words mapped to <unk>: re-encode word by word, split where the tokenizer
         * splits; with characters, the space token between words is no word's */
        char *copy = xstrdup(text);
        int *sub = xmalloc(sizeof(int) * (size_t)(max + 1)), k = 0, first = 1;
        for (char *tok = strtok(copy, " \t\r\v\f"); tok && k < n; tok = strtok(NULL, " \t\r\v\f"), first = 0) {
            if (tokenizer == TOKENIZER_CHAR && !first) k++;
            int m = encode_line(tok, tokenizer, v, sub, max + 1), unk = 0;
            for (int i = 0; i < m && k < n; i++, k++) unk |= ids[k] == VOCAB_UNK;
            if (unk) {
                if (unknown->len) sb_append(unknown, ", ", 2);
                quote_word(unknown, tok);
            }
        }
        free(copy), free(sub);
    }
    return n;
}

/* The source and target ids of --text and --target (or the greedy translation); -1 with
 * the error set. */
static int sentence_ids(Run *r, const Options *o, int *src, int *n_src, int *tgt, int *n_tgt) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    StrBuf unknown = {0};
    *n_src = encode_checked(o->text, tok, &r->src_vocab, src, max + 1, &unknown);
    if (*n_src == 0) return sb_free(&unknown), err_set("--text: nothing to attend to: the text is empty");
    if (*n_src > max) return sb_free(&unknown), err_set("--text: %d tokens, more than the %d this model has positions for", *n_src, max);
    if (unknown.len) fprintf(stderr, "qkv: warning: not in the source vocabulary, read as <unk>: %s\n", unknown.buf);
    sb_free(&unknown);
    if (o->target) {
        StrBuf bad = {0};
        *n_tgt = encode_checked(o->target, tok, &r->tgt_vocab, tgt, max + 1, &bad);
        if (bad.len) {
            err_set("--target: not in the target vocabulary: %s", bad.buf);
            sb_free(&bad);
            return -1;
        }
        if (*n_tgt > max) return err_set("--target: %d tokens, more than the %d this model has positions for", *n_tgt, max);
        return 0;
    }
    *n_tgt = greedy_ids(&r->model, src, *n_src, tgt, max);
    return 0;
}

/* --kind/--layer/--head/--query against the maps' counts; -1 with the error set. */
static int check_query(const AttnMaps *a, Options *o) {
    if (o->layer < 0) o->layer = a->layers[o->kind] - 1;
    if (o->head < 0) o->head = 0;
    if (o->layer >= a->layers[o->kind] || o->head >= a->heads)
        return err_set("--layer/--head: this model's %s has layers 0..%d and heads 0..%d", attnmap_kind_name(o->kind),
                       a->layers[o->kind] - 1, a->heads - 1);
    if (o->query >= attnmap_rows(a, o->kind))
        return err_set("--query: %s has queries 0..%d for this sentence", attnmap_kind_name(o->kind), attnmap_rows(a, o->kind) - 1);
    return 0;
}

static int one_sentence(Run *r, Options *o) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2, n_src = 0, n_tgt = 0, rc = 2, svgs = 0, held = 0;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    AttnMaps maps = {0};
    char tmp[CONFIG_PATH_MAX + 64], path[CONFIG_PATH_MAX + 96];
    tmp[0] = '\0';
    if (sentence_ids(r, o, src, &n_src, tgt, &n_tgt) != 0) goto done;
    attnmap_capture(&r->model, &r->src_vocab, &r->tgt_vocab, src, n_src, tgt, n_tgt, &maps);
    attnmap_surface_labels(&maps, tok, &r->src_vocab, &r->tgt_vocab, src, o->text, tgt, o->target);
    if (o->query >= 0 && check_query(&maps, o) != 0) goto done;
    rc = 1;
    signals_hold(), held = 1; /* a stop lands once the staging directory is published or gone */
    if (staging_dir(o->out, tmp, sizeof tmp) != 0) goto done;
    snprintf(path, sizeof path, "%s/maps.json", tmp);
    if (attnmap_write_json(&maps, path) != 0 || attnmap_write_svgs(&maps, tmp, &svgs) != 0) goto done;
    snprintf(path, sizeof path, "%s/index.html", tmp);
    if (attnmap_write_html(&maps, path) != 0 || publish(tmp, o->out) != 0) goto done;
    tmp[0] = '\0';
    signals_release(), held = 0;
    printf("model: %s (%s, step %lld)\n", r->weights, r->which, (long long)r->meta.step);
    /* what the terminal shows is UTF-8 too, as the files are: a bad byte is U+FFFD */
    char *text = attnmap_utf8(o->text), *words = decode_ids(tgt, n_tgt, tok, &r->tgt_vocab), *shown = attnmap_utf8(words);
    printf("source: %s\n%s: %s\n\n", text, o->target ? "target (forced)" : "translation (greedy)", shown);
    free(text), free(words), free(shown);
    if (o->query >= 0) attnmap_print_query(&maps, o->kind, o->layer, o->head, o->query, stdout);
    else attnmap_print_terminal(&maps, stdout);
    printf("\nwrote %s/maps.json, %d SVG heatmaps and %s/index.html (open it in a browser)\n", o->out, svgs, o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status(); /* where the files could not go: 2; a full disk: 1 */
    if (tmp[0]) remove_dir(tmp);
    if (held) signals_release();
    attnmap_free(&maps);
    free(src), free(tgt);
    return rc;
}

/* ---- over training ------------------------------------------------------------------------ */

static int watched(Run *r, const Options *o) {
    WatchLog w;
    if (watch_load(r->dir, &w) != 0) return 2;
    int rc = 2, n_gold = 0;
    char **gold = NULL;
    double *aer = NULL;
    char tmp[CONFIG_PATH_MAX + 64], path[CONFIG_PATH_MAX + 96];
    tmp[0] = '\0';
    if (o->gold) {
        if (!(gold = read_file_lines(o->gold, &n_gold))) goto done;
        if (n_gold != w.n_sentences) {
            err_set("%s: %d lines, but %d sentences are watched: one Pharaoh line each", o->gold, n_gold, w.n_sentences);
            goto done;
        }
        /* a snapshot's labels are the text subword pieces stand for: where a word starts
         * is gone, and pieces counted as words would give an AER of something else */
        int tok = r->cfg.data.tokenizer;
        if (tokenizer_is_subword(tok)) {
            err_set("--gold: the snapshots of a %s run do not keep where words start; score alignments with 'qkv align "
                    "--gold'",
                    tok == TOKENIZER_BPE ? "bpe" : "unigram");
            goto done;
        }
        /* which sentences have a given target (their target words are fixed): the run's
         * own train.watch, when it lists the sentences the snapshots hold */
        int forced[CONFIG_WATCH_MAX] = {0};
        for (int i = 0; i < w.n_sentences && r->cfg.train.n_watch == w.n_sentences; i++) forced[i] = r->cfg.train.watch[i].tgt[0] != 0;
        if (watch_gold_check(&w, tok, gold, o->gold, forced, r->model.cfg.max_positions - 2) != 0) goto done;
        aer = xmalloc(sizeof(double) * (size_t)w.n_snapshots);
        for (int k = 0; k < w.n_snapshots; k++)
            if (watch_aer(&w, k, tok, gold, &aer[k]) != 0) goto done;
    }
    rc = 1;
    char *json = watch_view_json(&w, aer);
    signals_hold(); /* a stop lands once the staging directory is published or gone */
    int written = staging_dir(o->out, tmp, sizeof tmp) == 0 &&
                  (snprintf(path, sizeof path, "%s/watch.json", tmp), write_file_atomic(path, json, strlen(json)) == 0) &&
                  (snprintf(path, sizeof path, "%s/index.html", tmp), attnview_write(json, path) == 0) &&
                  publish(tmp, o->out) == 0;
    free(json);
    if (!written && tmp[0]) remove_dir(tmp), tmp[0] = '\0';
    signals_release();
    if (!written) goto done;
    tmp[0] = '\0';
    const AttnMaps *first = &w.snap[0].sentences[0];
    int L = first->layers[ATTN_CROSS];
    printf("%d watched sentence%s, %d snapshots (steps %lld..%lld)\n", w.n_sentences, w.n_sentences == 1 ? "" : "s",
           w.n_snapshots, (long long)w.snap[0].step, (long long)w.snap[w.n_snapshots - 1].step);
    printf("entropy of cross-attention, decoder layer %d, heads averaged: mean over target words (nats)\n", L - 1);
    printf("%10s", "step");
    for (int i = 0; i < w.n_sentences; i++) printf("  sentence %d", i + 1);
    printf("%s\n", aer ? "    AER" : "");
    for (int k = 0; k < w.n_snapshots; k++) {
        printf("%10lld", (long long)w.snap[k].step);
        for (int i = 0; i < w.n_sentences; i++) printf("  %10.4f", attnmap_entropy(&w.snap[k].sentences[i], ATTN_CROSS, L - 1, -1));
        if (aer) printf("  %6.3f", aer[k]);
        printf("\n");
    }
    for (int i = 0; i < w.n_sentences; i++) {
        const AttnMaps *a = &w.snap[w.n_snapshots - 1].sentences[i];
        printf("sentence %d: %d source tokens; uniform attention over them has entropy %.4f\n", i + 1, a->S, log((double)a->S));
    }
    printf("\nwrote %s/watch.json and %s/index.html (open it in a browser: the step slider replays training)\n", o->out,
           o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    if (tmp[0]) remove_dir(tmp);
    if (gold) free_lines(gold, n_gold);
    free(aer);
    watch_free(&w);
    return rc;
}

int cmd_attention(int argc, char **argv) {
    static const struct option opts[] = {
        {"text", required_argument, 0, 't'},  {"target", required_argument, 0, 'g'}, {"out", required_argument, 0, 'o'},
        {"query", required_argument, 0, 'q'}, {"kind", required_argument, 0, 'k'},   {"layer", required_argument, 0, 'l'},
        {"head", required_argument, 0, 'h'},  {"watch", no_argument, 0, 'w'},        {"gold", required_argument, 0, 'a'},
        {0}};
    Options o = {.out = "attn", .query = -1, .kind = ATTN_CROSS, .layer = -1, .head = -1};
    int c, bad = 0, picked = 0; /* --kind, --layer or --head given */
    while ((c = getopt_long(argc, argv, "t:g:o:q:k:l:h:wa:", opts, NULL)) != -1 && !bad) {
        switch (c) {
        case 't': o.text = optarg; break;
        case 'g': o.target = optarg; break;
        case 'o': o.out = optarg; break;
        case 'w': o.watch = 1; break;
        case 'a': o.gold = optarg; break;
        case 'q': bad = cmd_int("--query", "a query (row) number", optarg, 0, 100000, &o.query) != 0; break;
        case 'l': bad = cmd_int("--layer", "a layer number", optarg, 0, 1000, &o.layer) != 0, picked = 1; break;
        case 'h': bad = cmd_int("--head", "a head number", optarg, 0, 1000, &o.head) != 0, picked = 1; break;
        case 'k':
            o.kind = -1, picked = 1;
            for (int k = 0; k < ATTN_KINDS; k++)
                if (strcmp(optarg, attnmap_kind_name(k)) == 0) o.kind = k;
            if (o.kind < 0) bad = err_set("--kind: '%s' is not one of encoder_self, decoder_self, cross", optarg) != 0;
            break;
        default: return 2;
        }
    }
    if (bad) return cmd_fail(2);
    if (optind != argc - 1 || (!o.text) == !o.watch)
        return cmd_usage("qkv attention RUN (--text \"source\" [--target \"translation\"] [--query N [--kind K] [--layer L] "
                         "[--head H]] | --watch [--gold ALIGNMENTS]) [--out DIR]");
    if (o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    if (o.gold && !o.watch) return err_set("--gold goes with --watch (for a corpus: qkv align --gold)"), cmd_fail(2);
    /* an option that would change nothing is refused, not ignored */
    if (o.watch && (o.target || o.query >= 0 || picked))
        return err_set("--%s goes with --text, not --watch", o.target ? "target" : o.query >= 0 ? "query" : "kind/--layer/--head"),
               cmd_fail(2);
    if (picked && o.query < 0) return err_set("--kind/--layer/--head pick the map of --query N: give a query"), cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    int rc = o.watch ? watched(&r, &o) : one_sentence(&r, &o);
    if (rc) cmd_fail(rc);
    run_close(&r);
    return rc;
}
