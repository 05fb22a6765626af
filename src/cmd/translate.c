/* translate: `qkv translate RUN [--greedy] < source > translation`, one output line
 * per input line (empty lines stay empty), detokenized. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "data/tokenize.h"
#include "infer/decode.h"
#include "train/run.h"
#include "util.h"

/* Prints the translations of lines[0..n) with the run's model. */
static void translate_lines(Run *r, char **lines, int n) {
    int tok = r->cfg.data.tokenizer, max_src = r->model.cfg.max_positions - 1, truncated = 0;
    Seq *src = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1)), *out = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1));
    int *nonempty = xmalloc(sizeof(int) * (size_t)(n ? n : 1)), k = 0;
    for (int i = 0; i < n; i++) {
        int *ids = xmalloc(sizeof(int) * (size_t)(max_src + 1));
        int len = encode_line(lines[i], tok, &r->src_vocab, ids, max_src + 1);
        if (len > max_src) len = max_src, truncated++;
        if (len == 0) {
            free(ids);
            continue;
        }
        src[k] = (Seq){ids, len};
        nonempty[k++] = i;
    }
    if (truncated) fprintf(stderr, "qkv: warning: %d lines longer than %d tokens were truncated\n", truncated, max_src);
    greedy_decode(&r->model, src, k, out);
    size_t cap = 1 << 16;
    char *text = xmalloc(cap);
    for (int i = 0, j = 0; i < n; i++) {
        size_t len = 0;
        text[0] = '\0';
        if (j < k && nonempty[j] == i) {
            for (int t = 0; t < out[j].len; t++)
                detokenize_append(tok, text, cap, &len, vocab_token(&r->tgt_vocab, out[j].ids[t]), t == 0);
            free(out[j].ids), free(src[j].ids);
            j++;
        }
        printf("%s\n", text);
    }
    free(text), free(src), free(out), free(nonempty);
}

int cmd_translate(int argc, char **argv) {
    static const struct option opts[] = {{"greedy", no_argument, 0, 'g'}, {"beam", required_argument, 0, 'b'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "gb:", opts, NULL)) != -1) {
        if (c == 'b') {
            fprintf(stderr, "qkv: --beam: beam search is not implemented yet; use --greedy\n");
            return 2;
        }
        if (c != 'g') return 2;
    }
    if (optind != argc - 1) return cmd_usage("qkv translate RUN_DIR|WEIGHTS [--greedy] < source.txt > translation.txt");
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    fprintf(stderr, "qkv: translating with %s (%s, step %lld)\n", r.weights, r.which, (long long)r.meta.step);
    int n;
    char **lines = read_lines(stdin, &n);
    translate_lines(&r, lines, n);
    free_lines(lines, n);
    run_close(&r);
    return 0;
}
