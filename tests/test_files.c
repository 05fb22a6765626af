/* Files qkv writes and reads: tmp files named per process and swept only when their
 * writer is gone; a checkpoint's header length judged before the file is read. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "train/checkpoint.h"
#include "train/run.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"

/* A pid that no process has now: a child that has exited and been reaped. */
static long dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void touch(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
}

static void test_tmp_names_and_sweep(void) {
    char name[64], path[4200];
    CHECK(tmp_name(name, sizeof name, "a") == 0, "%s", err_msg());
    snprintf(path, sizeof path, "a.%ld.tmp", (long)getpid());
    CHECK(strcmp(name, path) == 0, "tmp name '%s', expected '%s'", name, path);
    long dead = dead_pid(), live = (long)getppid();
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/qkv-files-test-%d", (int)getpid());
    CHECK(make_dirs(dir) == 0 && make_dirs(run_path(path, sizeof path, dir, "ckpt")) == 0, "%s", err_msg());
    const char *names[4] = {"own", "dead", "live", "old"};
    char files[4][256];
    snprintf(files[0], sizeof files[0], "%s/ckpt/step-000001.safetensors.%ld.tmp", dir, (long)getpid());
    snprintf(files[1], sizeof files[1], "%s/ckpt/step-000002.safetensors.%ld.tmp", dir, dead);
    snprintf(files[2], sizeof files[2], "%s/ckpt/export.safetensors.%ld.tmp", dir, live);
    snprintf(files[3], sizeof files[3], "%s/ckpt/step-000003.safetensors.tmp", dir);
    for (int i = 0; i < 4; i++) touch(files[i]);
    run_rotate_checkpoints(dir, 3);
    struct stat st;
    for (int i = 0; i < 4; i++) {
        int there = stat(files[i], &st) == 0;
        CHECK(there == (i == 2), "the %s tmp file was %s", names[i], there ? "kept" : "deleted");
    }
    unlink(files[2]);
    rmdir(path);
    rmdir(dir);
}

/* A 2 GiB sparse file whose header claims a terabyte: refused without reading it. */
static void test_header_length_judged_first(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/qkv-files-huge-%d.safetensors", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t hlen = (uint64_t)1 << 40;
    int ok = fd >= 0 && write(fd, &hlen, 8) == 8 && ftruncate(fd, (off_t)2 << 30) == 0;
    if (fd >= 0) close(fd);
    CHECK(ok, "cannot make the sparse file");
    CkptFile f;
    double t0 = now_seconds();
    int rc = ckpt_open(&f, path);
    double took = now_seconds() - t0;
    unlink(path);
    CHECK(rc != 0 && strstr(err_msg(), "header length 1099511627776 does not fit") && strstr(err_msg(), "headers up to 100000000"),
          "%s", rc ? err_msg() : "accepted");
    CHECK(took < 0.5, "took %.2fs: the file was read", took);
}

/* The config a checkpoint carries goes through the same YAML limits as a config file:
 * 200,000 levels of nesting in its metadata are refused at once, not parsed for ever. */
static void test_deep_config_in_checkpoint(void) {
    const ModelConfig mc = {.src_vocab = 6, .tgt_vocab = 6, .d_model = 4, .heads = 1, .d_ff = 4,
                            .encoder_layers = 1, .decoder_layers = 1, .tie_embeddings = 1, .max_positions = 8};
    Model m;
    CHECK(model_init(&m, &mc) == 0, "%s", err_msg());
    char *config = deep_yaml(200000);
    char path[64];
    snprintf(path, sizeof path, "/tmp/qkv-files-deep-%d.safetensors", (int)getpid());
    CkptMeta meta = {.step = 1, .valid_loss = 1, .best_valid_loss = 1, .config = config};
    int saved = ckpt_save(path, &m, NULL, &meta) == 0;
    free(config);
    model_free(&m);
    CHECK(saved, "%s", err_msg());
    CkptFile f;
    CHECK(ckpt_open(&f, path) == 0, "%s", err_msg());
    unlink(path);
    Config c;
    config_defaults(&c);
    double t0 = now_seconds();
    int rc = config_parse(&c, f.meta.config, strlen(f.meta.config), path);
    double took = now_seconds() - t0;
    ckpt_close(&f);
    CHECK(rc != 0 && strstr(err_msg(), "nested more than 16 levels deep"), "%s", rc ? err_msg() : "accepted");
    CHECK(took < 1, "took %.1fs", took);
}

const TestCase files_tests[] = {
    {"files_deep_config_in_checkpoint_refused_quickly", test_deep_config_in_checkpoint},
    {"files_tmp_names_per_process_and_sweep", test_tmp_names_and_sweep},
    {"files_checkpoint_header_length_judged_first", test_header_length_judged_first},
    {NULL, NULL},
};
