/* options: see options.h. */
#include "cmdlib/options.h"

#include <getopt.h>
#include <string.h>

#define LONGOPTS_MAX 64  /* rows of a command's tables together, with --help */
#define HELP_KEY 0x10000 /* --help's key: no table key (a letter) can equal it */

static int table_len(const CmdOption *t) {
    int n = 0;
    while (t && t[n].key) n++;
    return n;
}

/* The i-th row of the command's tables laid end to end. */
static const CmdOption *row(const CmdSpec *spec, int i) {
    int n = table_len(spec->options);
    return i < n ? &spec->options[i] : &spec->shared[i - n];
}

int cmd_option_next(const CmdSpec *spec, int argc, char **argv) {
    /* rebuilt at each call from the same tables, so getopt_long sees the same array */
    static struct option longopts[LONGOPTS_MAX + 2];
    int n = table_len(spec->options) + table_len(spec->shared);
    if (n > LONGOPTS_MAX) n = LONGOPTS_MAX; /* never: a command has a dozen */
    for (int i = 0; i < n; i++) {
        const CmdOption *o = row(spec, i);
        longopts[i] = (struct option){o->name, o->value ? required_argument : no_argument, NULL, o->key};
    }
    longopts[n] = (struct option){"help", no_argument, NULL, HELP_KEY};
    longopts[n + 1] = (struct option){0};
    /* the one short option is -h, every command's help; ':' not leading, so getopt prints
     * its own one-line message ("qkv: train: unrecognized option '--bogus'"). A row keyed
     * 'h' (--head) returns 'h' too: getopt sets the long index only for a long option. */
    int long_index = -1;
    int c = getopt_long(argc, argv, "h", longopts, &long_index);
    if (c == -1) return CMD_OPTIONS_END;
    if (c == HELP_KEY || (c == 'h' && long_index < 0)) {
        cmd_help_print(spec, stdout);
        return CMD_OPTIONS_HELP;
    }
    if (c == '?' || c == ':') return CMD_OPTIONS_BAD;
    /* a folder's trailing slashes go (the root's one stays): the command joins names to it
     * and prints them, and attn/ gave attn//maps.json */
    if (long_index >= 0 && long_index < n && optarg && row(spec, long_index)->value &&
        strcmp(row(spec, long_index)->value, "DIR") == 0)
        for (size_t len = strlen(optarg); len > 1 && optarg[len - 1] == '/'; len--) optarg[len - 1] = '\0';
    return c;
}

const char *cmd_option_name(const CmdOption *table, int key) {
    for (const CmdOption *o = table; o && o->key; o++)
        if (o->key == key) return o->name;
    return NULL;
}

int cmd_option_status(int c) { return c == CMD_OPTIONS_HELP ? 0 : 2; }

static int unlisted(const char *const *names, const char *name) {
    for (int i = 0; names && names[i]; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

static void print_rows(const CmdOption *t, const char *const *skip, FILE *out) {
    for (int i = 0; t && t[i].key; i++) {
        if (unlisted(skip, t[i].name)) continue;
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", t[i].name, t[i].value ? " " : "", t[i].value ? t[i].value : "");
        fprintf(out, "  %-24s %s", left, t[i].help);
        if (t[i].def) fprintf(out, " (default: %s)", t[i].def);
        fputc('\n', out);
    }
}

void cmd_help_print(const CmdSpec *spec, FILE *out) {
    fprintf(out, "usage: qkv %s %s\n\n%s\n", spec->name, spec->operands, spec->summary);
    if (spec->about) fprintf(out, "\n%s\n", spec->about);
    if (spec->more) spec->more(out);
    fprintf(out, "\noptions:\n");
    print_rows(spec->options, NULL, out);
    print_rows(spec->shared, spec->unlisted, out);
    fprintf(out, "  %-24s %s\n", "-h, --help", "this help");
    fprintf(out, "\nexample:\n  %s\n", spec->example);
}

int cmd_usage_of(const CmdSpec *spec) {
    fprintf(stderr, "usage: qkv %s %s (qkv %s --help lists the options)\n", spec->name, spec->operands, spec->name);
    return 2;
}
