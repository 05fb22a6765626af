/* config: YAML config file -> struct Config, with defaults, validation and overrides.
 *
 * Owns the config contract of DESIGN.md: every key, its type, its default and its range
 * live in one table in config.c. Errors name the place: "configs/x.yaml:12:3: unknown key
 * 'stepz'". Knows nothing of what the values are used for.
 *
 * Adding a key: its field in Config below, and one row of config.c's keys[] (path, field,
 * default, range); parsing, --set, defaults, the resolved config.yaml and the checks all
 * walk that table. A choice key's values are an enum here, in the order of its choices in
 * its row (a stored value is its choice's index). Past CONFIG_KEYS_MAX keys, raise it. */
#ifndef QKV_CONFIG_H
#define QKV_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_PATH_MAX 1024
/* train.threads: the most training threads one process runs (train/parallel.h sizes its
 * per-thread tables by it), so a config never asks for more than are run */
#define CONFIG_THREADS_MAX 256
#define CONFIG_TEXT_MAX (1 << 20) /* bytes of YAML a config may be: every key with room to spare */
#define CONFIG_KEYS_MAX 64        /* keys in config.c's table (it fails to compile past this) */

/* The values of the keys that name one of a few choices, in the order of their choices
 * in config.c's table (a stored value is its choice's index). They live here, at the
 * bottom of the house, so that config includes nothing above it; the layers that act on
 * them (data/tokenize, nn/optim, train/) include this header. */
/* data.tokenizer: bpe and unigram are SentencePiece models (data/spm.h, through the
 * vocabulary); word and char are data/tokenize.h's own cutters. */
enum { TOKENIZER_WORD, TOKENIZER_CHAR, TOKENIZER_BPE, TOKENIZER_UNIGRAM };
static inline int tokenizer_is_subword(int kind) { return kind == TOKENIZER_BPE || kind == TOKENIZER_UNIGRAM; }
static inline const char *tokenizer_name(int kind) {
    return kind == TOKENIZER_CHAR      ? "char"
           : kind == TOKENIZER_BPE     ? "bpe"
           : kind == TOKENIZER_UNIGRAM ? "unigram"
                                       : "word";
}
enum { NORM_POST, NORM_PRE };        /* model.norm */
enum { LR_NOAM, LR_CONSTANT };       /* train.lr.schedule (nn/optim.h's LrSchedule.kind) */
enum { BEST_BY_LOSS, BEST_BY_BLEU }; /* train.best_by: what best.safetensors is best at */

typedef struct {
    char src[CONFIG_PATH_MAX], tgt[CONFIG_PATH_MAX];
} PathPair;

/* train.watch: sentences whose attention training records (attention/watch.h); tgt empty:
 * force-decode the model's own greedy translation at the time. */
#define CONFIG_WATCH_MAX 8
#define CONFIG_WATCH_LEN 512
typedef struct {
    char src[CONFIG_WATCH_LEN], tgt[CONFIG_WATCH_LEN];
} WatchSentence;

typedef struct {
    char name[128];
    char run_dir[CONFIG_PATH_MAX];
    int64_t seed;
    struct {
        PathPair train, valid;
        PathPair spm_model; /* existing SentencePiece models; empty: trained by qkv train */
        int tokenizer;
        int vocab_size, min_freq, shared_vocab, max_len;
    } data;
    struct {
        int d_model, heads, d_ff, encoder_layers, decoder_layers;
        double dropout;
        int norm, tie_embeddings;
    } model;
    struct {
        int steps, batch_tokens;
        /* 0, or a budget of training time: the run ends at the first step that starts past
         * it (train.steps, a cap then, may end it sooner) */
        double minutes;
        int pass_tokens; /* most padded tokens a thread runs at once; 0: its whole share */
        struct {
            int schedule;
            double factor;
            int warmup;
            double value;
            double cooldown; /* 0, or the last fraction of the run, over which the rate falls to 0 */
        } lr;
        struct {
            double beta1, beta2, eps, weight_decay;
        } adam;
        double clip_norm, label_smoothing;
        int log_every, valid_every, checkpoint_every, keep_checkpoints, threads;
        int average_last; /* 0, or: ckpt/average.safetensors, the mean of the newest N step checkpoints */
        int valid_bleu, best_by;
        WatchSentence watch[CONFIG_WATCH_MAX];
        int n_watch;
    } train;
    struct {
        double length_penalty; /* the run's beam search: what --length-penalty is when not given */
    } decode;
    /* where each key was set, for errors found after parsing (index = key table order) */
    char source[CONFIG_PATH_MAX];
    int set_line[CONFIG_KEYS_MAX], set_col[CONFIG_KEYS_MAX];
} Config;

/* Every key at its table default; strings and train.watch empty. */
void config_defaults(Config *c);
/* Checks config.c's key table itself, for the tests: each default a whole number where the
 * key holds one, within the key's range, a choice key's among its choices. 0, or -1 with
 * the error naming the first bad row. */
int config_check_keys(void);
/* Reads and applies a YAML file over the current values. -1 with the error set. */
int config_load(Config *c, const char *path);
/* The same from text in memory; name stands for the file in errors. */
int config_parse(Config *c, const char *text, size_t len, const char *name);
/* 1 if a and b describe the same model (model.* but dropout, tokenizer, shared vocab);
 * else 0 with the first differing key in what. */
int config_same_model(const Config *a, const Config *b, char *what, size_t n);
/* How many keys hold different values in a and b, leaving out those named in skip (a
 * NULL-terminated list; NULL: none); the first that differs (in table order) in what. */
int config_differences(const Config *a, const Config *b, const char *const *skip, char *what, size_t n);
/* The keys named in paths (a NULL-terminated list) from src into dst. */
void config_copy_keys(Config *dst, const Config *src, const char *const *paths);
/* Where key path got its value, for a message about it found after parsing (buf, n bytes):
 * "file:line:col", "--set path" for the command line, or the file alone for a default. */
const char *config_where(const Config *c, const char *path, char *buf, size_t n);
/* Applies one "a.b=value" override with the same checks as the file. */
int config_set(Config *c, const char *assignment);
/* Cross-key checks and required keys; check_files also checks the data files exist. */
int config_validate(Config *c, int check_files);
/* Every key (the resolved config) as YAML text (malloc'd); name stands for the file in
 * errors. NULL with the error set (a string YAML cannot hold). */
char *config_text(const Config *c, const char *name);
/* config_text in parts, in order: fn(ctx, text, changed) for the lines that open sections
 * (changed 0), then for each key its lines (its list items included), changed when it
 * differs from the key's default. -1 with the error set (as config_text). */
typedef void (*ConfigTextFn)(void *ctx, const char *text, int changed);
int config_text_parts(const Config *c, const char *name, ConfigTextFn fn, void *ctx);
/* Writes config_text atomically. */
int config_write(const Config *c, const char *path);

#endif
