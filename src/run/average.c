/* average: see average.h. */
#include "run/average.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run/checkpoint.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

int average_newest(const Run *r, int n, int partial, long long until, Model *out, CkptMeta *meta, char ***paths_out,
                   int *got) {
    char **paths;
    struct rlimit lim; /* room for n open files at once (up to 1000; the soft limit is often 1024) */
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < (rlim_t)n + 64) {
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max > (rlim_t)n + 64 ? (rlim_t)n + 64 : lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    int *fds = xmalloc(sizeof(int) * (size_t)n);
    int have = run_open_newest_checkpoints(r->dir, until >= 0 ? until : LLONG_MAX, n, fds, &paths), rc = 0;
    if (have < 0) return free(fds), -1;
    /* the newest listed up to `until` is of that step, or the run no longer keeps it */
    int ends = until < 0 || (have > 0 && run_check_step_name(paths[have - 1], until) == 0);
    if (!ends || have == 0 || (have < n && !partial)) {
        for (int i = 0; i < have; i++) close(fds[i]);
        free_lines(paths, have), free(fds);
        if (!ends)
            return err_set("%s: holds step %lld, but the run %s keeps no step checkpoint of it (only its last %d: "
                           "train.keep_checkpoints) for --average %d to end at",
                           r->weights, until, r->dir, r->cfg.train.keep_checkpoints, n);
        if (have == 0) return err_set("%s: no step checkpoint to average", r->dir);
        if (until >= 0)
            return err_set("%s: --average %d ending at step %lld, but the run has %d step checkpoints up to it (it "
                           "keeps up to %d: train.keep_checkpoints)",
                           r->dir, n, until, have, r->cfg.train.keep_checkpoints);
        return err_set("%s: --average %d, but the run has %d step checkpoints (it keeps up to %d: "
                       "train.keep_checkpoints)",
                       r->dir, n, have, r->cfg.train.keep_checkpoints);
    }
    n = have;
    Model tmp;
    ModelConfig mc = out->cfg;
    model_init(&tmp, &mc);
    double *sum = xcalloc(out->n_params, sizeof(double));
    for (int i = 0; i < n && rc == 0; i++) {
        CkptFile f;
        size_t len;
        char *bytes = read_fd_max(fds[i], paths[i], READ_FILE_ANY, &len);
        rc = bytes ? ckpt_parse(&f, paths[i], bytes, len) : -1;
        if (rc == 0) {
            rc = run_check_checkpoint(r, paths[i], &f.meta);
            if (rc == 0) rc = ckpt_read(&f, &tmp, NULL);
            if (rc == 0 && i == n - 1 && meta) *meta = ckpt_meta_take(&f);
            ckpt_close(&f);
        }
        for (size_t k = 0; rc == 0 && k < tmp.n_params; k++) sum[k] += tmp.params[k];
    }
    for (size_t k = 0; rc == 0 && k < tmp.n_params; k++) out->params[k] = (float)(sum[k] / n);
    for (int i = 0; i < n; i++) close(fds[i]);
    free(sum), free(fds);
    model_free(&tmp);
    if (rc == 0 && paths_out) *paths_out = paths;
    else free_lines(paths, n);
    if (got) *got = n;
    return rc;
}

int average_write(const Run *r, int n) {
    Model avg;
    ModelConfig mc = run_model_config(&r->cfg, r->src_vocab.size, r->tgt_vocab.size);
    if (model_init(&avg, &mc) != 0) return -1;
    CkptMeta meta = {0};
    char path[CONFIG_PATH_MAX + 32];
    int rc = average_newest(r, n, 1, -1, &avg, &meta, NULL, NULL);
    if (rc == 0) rc = ckpt_save(run_path(path, sizeof path, r->dir, RUN_AVERAGE), &avg, NULL, &meta);
    ckpt_meta_free(&meta);
    model_free(&avg);
    return rc;
}
