/* parallel: see parallel.h. */
#define _POSIX_C_SOURCE 200809L
#include "train/parallel.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"
#include "nn/profile.h"
#include "nn/vecmath.h"
#include "train/dist.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

typedef struct {
    struct Workers *w;
    int i;
} ThreadArg;

/* What each shard tells every rank after its backward pass (allgathered as doubles). */
enum { STAT_SUMSQ, STAT_LOSS, STAT_TOKENS, N_STATS };

struct Workers {
    int n;              /* threads of this process */
    int pass_tokens;    /* most padded tokens one pass runs (0: a whole shard) */
    int rank, ranks, N; /* this process' rank, the ranks, the shards: N = ranks * n */
    ThreadArg arg[PARALLEL_MAX];
    Model *model;                /* the main model: replica 0 */
    Model replica[PARALLEL_MAX]; /* [1..n-1] */
    Adam *adam;
    pthread_t thread[PARALLEL_MAX];
    pthread_barrier_t start, phase, done;
    /* The start/stop protocol. Every started thread first passes the gate, held by
     * start_threads until pthread_create has been called for all of them: under the gate
     * it reads start_failed, which start_threads writes before releasing it. When all
     * started, each thread then waits at `start` for every step and for the stop alike,
     * and reads quit only after that barrier, which orders it after the stopper's write:
     * a thread the OS runs late still meets the barrier the stopper waits at. */
    pthread_mutex_t gate;
    int start_failed; /* written before the gate opens, read under it */
    atomic_int quit;  /* written before `start`, read after it */
    /* the current step */
    ModelBatch part[PARALLEL_MAX];
    uint64_t seed, step;
    double clip_norm, lr;
    int total_tokens; /* target tokens of the whole batch: the loss is normalised by it */
    int stop;         /* in: this process' stop request; out: any rank's */
    int failed;       /* a transfer failed (error set): the step's results are void */
    /* the parameters in N slices, one per shard; rank r updates slices r*n .. r*n+n-1 */
    size_t *begin;     /* (N + 1) */
    size_t lo, hi;     /* this rank's part: begin[rank * n], begin[rank * n + n] */
    double *stats;     /* (n * N_STATS + 1): this rank's shards, then its stop request */
    double *all_stats; /* (ranks * (n * N_STATS + 1)): every rank's, in rank order */
    /* ranks > 1: the other ranks' shards' gradients over [lo, hi), one slot per shard */
    float *inbox;         /* ((N - n) * (hi - lo)) */
    DistPlan *plan;       /* sends of local gradients to each owner, receives into inbox */
    int *counts, *displs; /* (ranks) each rank's part of the parameters, for allgatherv */
    double comm_s;        /* seconds thread 0 spent in transfers between ranks, all steps */
    long comm_steps;
    /* the timeline (workers_record): (marks_cap x n x N_MARKS), marks_steps of them written */
    double *marks;
    int marks_cap, marks_steps;
};

static Model *replica(Workers *w, int i) { return i == 0 ? w->model : &w->replica[i]; }

/* Thread i's mark k of this step, when a timeline is being recorded. The main thread
 * moves marks_steps on after the step's last barrier, which the others pass only before
 * the next step's first: every thread writes the step's row. */
static void mark(Workers *w, int i, int k) {
    if (w->marks && w->marks_steps < w->marks_cap)
        w->marks[((size_t)w->marks_steps * w->n + i) * N_MARKS + k] = now_seconds();
}

int shard_first_row(const ModelBatch *b, const ModelConfig *c, int n, int k) {
    if (b->B < n) return k < b->B ? k : b->B;
    double src, tgt, total = 0.0;
    model_position_flops(c, &src, &tgt);
    for (int r = 0; r < b->B; r++) total += src * b->src_len[r] + tgt * b->tgt_len[r];
    double target = total * k / n, before = 0.0;
    int r = 0;
    for (; r < b->B; r++) {
        double row = src * b->src_len[r] + tgt * b->tgt_len[r];
        if (before + row / 2 >= target) break; /* the boundary before row r is the nearer */
        before += row;
    }
    if (r < k) r = k;
    if (r > b->B - (n - k)) r = b->B - (n - k);
    return r;
}

int pass_rows(int pass_tokens, int B, int S, int T) {
    int rows = pass_tokens > 0 ? pass_tokens / (S + T) : B;
    if (rows < 1) rows = 1;
    return rows < B ? rows : B;
}

ModelBatch shard_batch(const ModelBatch *b, const ModelConfig *c, int n, int k) {
    int first = shard_first_row(b, c, n, k);
    return batch_rows(b, first, shard_first_row(b, c, n, k + 1) - first);
}

ModelBatch batch_rows(const ModelBatch *b, int first, int count) {
    return (ModelBatch){count,
                        b->S,
                        b->T,
                        b->src + (size_t)first * b->S,
                        b->src_len + first,
                        b->tgt_in + (size_t)first * b->T,
                        b->tgt_out ? b->tgt_out + (size_t)first * b->T : NULL,
                        b->tgt_len + first,
                        b->row0 + first};
}

/* All threads meet here between phases (nothing to wait for with one). */
static void meet(Workers *w) {
    if (w->n > 1) pthread_barrier_wait(&w->phase);
}

/* A wait at barrier b (with more than one thread), counted by qkv bench apart from the
 * work around it, for each thread: how long the first to finish a phase waits for the
 * last, the price of an uneven cut. */
static void wait_timed(Workers *w, pthread_barrier_t *b) {
    double t0 = prof_start();
    if (w->n > 1) pthread_barrier_wait(b);
    prof_stop(PROF_WAIT, t0);
}

/* Shard s's gradient at parameter j (lo <= j < hi): a local replica's, or the copy
 * another rank sent into the inbox. */
static const float *shard_grads(Workers *w, int s, size_t j) {
    int local = s - w->rank * w->n;
    if (local >= 0 && local < w->n) return replica(w, local)->grads + j;
    int slot = s < w->rank * w->n ? s : s - w->n;
    return w->inbox + (size_t)slot * (w->hi - w->lo) + (j - w->lo);
}

/* Slice [lo, hi) of the summed gradient into the main model's grads: shard 0 + shard 1
 * + ... + shard N-1, added in that order whichever process holds each shard, so the
 * sum has the same bits as in one process with N threads. Local replicas' gradients
 * (other than the main model's) are zeroed once used. Returns the slice's sum of squares
 * (vec_sum_squares_double's bits). One pass in pieces that stay in the cache: each piece
 * is summed over the shards, squared and stored while hot, instead of a pass over the
 * whole slice per shard, one for the zeroing and one for the squares. */
static double fold(Workers *w, size_t lo, size_t hi) {
    enum { PIECE = 64 * VEC_LANES }; /* a multiple of VEC_LANES: the lanes stay in step */
    float *g = w->model->grads;
    int me = w->rank * w->n;
    double lane[VEC_LANES] = {0};
    for (size_t p = lo; p < hi; p += PIECE) {
        size_t len = hi - p < PIECE ? hi - p : PIECE;
        /* the running sum starts in shard 0's buffer: the main model's on rank 0, else an
         * inbox slot (this rank's first shard is not shard 0, so its own buffer waits) */
        float *acc = me == 0 ? g + p : (float *)shard_grads(w, 0, p);
        for (int s = 1; s < w->N; s++) {
            const float *gs = shard_grads(w, s, p);
            for (size_t j = 0; j < len; j++) acc[j] += gs[j];
            int local = s - me;
            if (local > 0 && local < w->n) memset(replica(w, local)->grads + p, 0, sizeof(float) * len);
        }
        if (acc != g + p) memcpy(g + p, acc, sizeof(float) * len);
        vec_sum_squares_lanes(lane, g + p, len);
    }
    double sum = 0.0;
    for (int k = 0; k < VEC_LANES; k++) sum += lane[k];
    return sum;
}

/* forward, then backward on this shard's rows, pass by pass (the gradients are all zero
 * here: the previous step zeroed each buffer once it was used, and each pass adds to
 * them), normalised by the whole batch's token count */
static void run_shard(Workers *w, Model *m, const ModelBatch *b, double *st) {
    st[STAT_LOSS] = st[STAT_TOKENS] = 0.0;
    int rows = pass_rows(w->pass_tokens, b->B, b->S, b->T);
    for (int first = 0; first < b->B; first += rows) {
        ModelBatch pass = batch_rows(b, first, b->B - first < rows ? b->B - first : rows);
        m->loss_tokens = w->total_tokens;
        model_forward_backward(m, &pass, w->seed, w->step);
        st[STAT_LOSS] += m->loss_sum, st[STAT_TOKENS] += m->n_tokens;
    }
}

static void work(Workers *w, int i) {
    Model *m = replica(w, i);
    double *st = w->stats + (size_t)i * N_STATS;
    /* 1. this shard's gradients */
    mark(w, i, MARK_BEGIN);
    run_shard(w, m, &w->part[i], st);
    mark(w, i, MARK_SHARD_END);
    wait_timed(w, &w->phase);
    mark(w, i, MARK_FOLD_BEGIN);
    /* 2. ranks > 1: each rank's part of every shard's gradients goes to that rank */
    double t0 = prof_start();
    if (w->ranks > 1) {
        if (i == 0) {
            double c0 = now_seconds();
            if (dist_plan_run(w->plan) != 0) w->failed = 1;
            w->comm_s += now_seconds() - c0;
        }
        meet(w);
        /* what was sent is no longer needed: zero it for the next step */
        float *gi = m->grads;
        memset(gi, 0, sizeof(float) * w->lo);
        memset(gi + w->hi, 0, sizeof(float) * (w->model->n_params - w->hi));
    }
    /* 3. this shard's slice of the gradients summed over shards, and its sum of squares */
    int s = w->rank * w->n + i;
    size_t lo = w->begin[s], hi = w->begin[s + 1];
    st[STAT_SUMSQ] = fold(w, lo, hi);
    prof_stop(PROF_OPTIM, t0);
    mark(w, i, MARK_FOLD_END);
    wait_timed(w, &w->phase);
    mark(w, i, MARK_ADAM_BEGIN);
    t0 = prof_start();
    double *all = w->stats;
    if (w->ranks > 1) {
        if (i == 0) {
            double c0 = now_seconds();
            if (dist_allgather_doubles(w->stats, w->all_stats, w->n * N_STATS + 1) != 0) w->failed = 1;
            w->comm_s += now_seconds() - c0;
        }
        meet(w);
        all = w->all_stats;
    }
    /* 4. clip with the global norm (every thread of every rank computes it the same way,
     * slices in order), folding the factor into Adam's pass rather than scaling memory first */
    double norm = 0.0;
    for (int q = 0; q < w->ranks; q++)
        for (int k = 0; k < w->n; k++) norm += all[(size_t)q * (w->n * N_STATS + 1) + (size_t)k * N_STATS + STAT_SUMSQ];
    float scale = clip_scale(sqrt(norm), w->clip_norm);
    adam_update_range(w->adam, w->model->params, w->model->grads, w->model->tensors, w->model->n_tensors, w->lr,
                      w->adam->t + 1, lo, hi, scale, 1);
    /* 5. ranks > 1: every rank's updated part to every rank */
    if (w->ranks > 1) {
        meet(w);
        if (i == 0) {
            double c0 = now_seconds();
            if (dist_allgatherv_floats(w->model->params, w->counts, w->displs) != 0) w->failed = 1;
            w->comm_s += now_seconds() - c0;
            w->comm_steps++;
        }
    }
    prof_stop(PROF_OPTIM, t0);
    mark(w, i, MARK_ADAM_END);
}

static void *worker(void *p) {
    ThreadArg *a = p;
    Workers *w = a->w;
    prof_thread = a->i;
    /* wait until every thread has been created; if one could not be, the barriers would
     * never fill, so leave without meeting them (the starter joins, and waits at none) */
    pthread_mutex_lock(&w->gate);
    int abandoned = w->start_failed;
    pthread_mutex_unlock(&w->gate);
    if (abandoned) return NULL;
    for (;;) {
        /* a step, or the stop: quit says which; the mark is written into the step's row
         * when it is one (marks_steps is read after the barrier) */
        double arrive = now_seconds();
        pthread_barrier_wait(&w->start);
        if (atomic_load(&w->quit)) break;
        if (w->marks && w->marks_steps < w->marks_cap)
            w->marks[((size_t)w->marks_steps * w->n + a->i) * N_MARKS + MARK_ARRIVE] = arrive;
        work(w, a->i);
        wait_timed(w, &w->done); /* its LEAVE is its next ARRIVE: nothing runs between */
    }
    return NULL;
}

/* Starts threads 1..n-1. They first pass the gate, which stays locked until every
 * pthread_create has returned: if one failed, those already created are told there
 * (start_failed) to leave instead of waiting forever at a barrier sized for n. */
static int start_threads(Workers *w) {
    int n = w->n, started = 1;
    if (pthread_barrier_init(&w->start, NULL, (unsigned)n) != 0) return err_set("cannot create thread barriers");
    if (pthread_barrier_init(&w->phase, NULL, (unsigned)n) != 0) {
        pthread_barrier_destroy(&w->start);
        return err_set("cannot create thread barriers");
    }
    if (pthread_barrier_init(&w->done, NULL, (unsigned)n) != 0) {
        pthread_barrier_destroy(&w->start), pthread_barrier_destroy(&w->phase);
        return err_set("cannot create thread barriers");
    }
    pthread_mutex_init(&w->gate, NULL);
    pthread_mutex_lock(&w->gate);
    int rc = 0;
    for (; started < n; started++) {
        w->arg[started] = (ThreadArg){w, started};
        if ((rc = pthread_create(&w->thread[started], NULL, worker, &w->arg[started])) != 0) break;
    }
    if (rc != 0) w->start_failed = 1;
    pthread_mutex_unlock(&w->gate);
    if (rc == 0) return 0;
    for (int i = 1; i < started; i++) pthread_join(w->thread[i], NULL);
    pthread_barrier_destroy(&w->start), pthread_barrier_destroy(&w->phase), pthread_barrier_destroy(&w->done);
    pthread_mutex_destroy(&w->gate);
    return err_set("cannot start %d training threads: %s", n, strerror(rc));
}

/* parallel.h. A cut at tensor boundaries gave the thread whose slice held a
 * vocabulary's embedding up to four times the others' share at 16 threads (Multi30k's
 * 8,000 x 192 table against slices of 387 K), and them the wait. */
void param_slices(size_t n_params, int N, size_t *begin) {
    enum { LINE = 16 }; /* floats in 64 bytes */
    for (int i = 0; i < N; i++) begin[i] = n_params * (size_t)i / (size_t)N / LINE * LINE;
    begin[N] = n_params;
}

/* ranks > 1: the transfers of every step, set up once. This rank sends each local
 * shard's gradients over rank q's part to q (tagged with the global shard), and
 * receives every other rank's shards over its own part into the inbox. */
static int plan_exchange(Workers *w) {
    int n = w->n, R = w->ranks;
    for (int q = 0; q < R; q++) {
        w->displs[q] = (int)w->begin[q * n];
        w->counts[q] = (int)(w->begin[q * n + n] - w->begin[q * n]);
    }
    size_t len = w->hi - w->lo;
    w->inbox = xcalloc((size_t)(w->N - n) * len + 1, sizeof(float));
    w->plan = dist_plan_new(2 * (R - 1) * n);
    for (int q = 0; q < R; q++) {
        if (q == w->rank) continue;
        for (int k = 0; k < n; k++) {
            int mine = w->rank * n + k, theirs = q * n + k;
            if (dist_plan_send(w->plan, replica(w, k)->grads + w->displs[q], (size_t)w->counts[q], q, mine) != 0 ||
                dist_plan_recv(w->plan, (float *)shard_grads(w, theirs, w->lo), len, q, theirs) != 0)
                return -1;
        }
    }
    return 0;
}

static void free_workers(Workers *w) {
    for (int i = 1; i < w->n; i++) model_free(&w->replica[i]);
    dist_plan_free(w->plan);
    free(w->marks);
    free(w->begin), free(w->stats), free(w->all_stats), free(w->inbox), free(w->counts), free(w->displs);
    free(w);
}

Workers *workers_start(Model *m, Adam *adam, int n, int pass_tokens) {
    if (n < 1) n = 1;
    if (n > PARALLEL_MAX) n = PARALLEL_MAX;
    if (blas_room_check(n) != 0) return NULL;
    Workers *w = xcalloc(1, sizeof *w);
    w->n = n;
    w->pass_tokens = pass_tokens;
    w->rank = dist_rank(), w->ranks = dist_size(), w->N = w->ranks * n;
    w->model = m;
    w->adam = adam;
    for (int i = 1; i < n; i++) model_init_replica(&w->replica[i], m);
    w->begin = xmalloc(sizeof(size_t) * (size_t)(w->N + 1));
    param_slices(m->n_params, w->N, w->begin);
    w->lo = w->begin[w->rank * n], w->hi = w->begin[w->rank * n + n];
    w->stats = xcalloc((size_t)n * N_STATS + 1, sizeof(double));
    w->all_stats = xcalloc((size_t)w->ranks * ((size_t)n * N_STATS + 1), sizeof(double));
    w->counts = xcalloc((size_t)w->ranks, sizeof(int));
    w->displs = xcalloc((size_t)w->ranks, sizeof(int));
    openblas_set_num_threads(1);
    if (w->ranks > 1 && m->n_params > INT_MAX) {
        err_set("%zu parameters: more than one MPI message can carry", m->n_params);
        free_workers(w);
        return NULL;
    }
    if ((w->ranks > 1 && plan_exchange(w) != 0) || (n > 1 && start_threads(w) != 0)) {
        free_workers(w);
        return NULL;
    }
    return w;
}

void workers_stop(Workers *w) {
    if (!w) return;
    if (w->n > 1) {
        /* every thread was created (workers_start returned w), so each of them meets
         * `start` once more, however late it runs, and reads quit after it */
        atomic_store(&w->quit, 1);
        pthread_barrier_wait(&w->start);
        for (int i = 1; i < w->n; i++) pthread_join(w->thread[i], NULL);
        pthread_barrier_destroy(&w->start);
        pthread_barrier_destroy(&w->phase);
        pthread_barrier_destroy(&w->done);
        pthread_mutex_destroy(&w->gate);
    }
    free_workers(w);
}

int workers_count(const Workers *w) { return w->n; }
int workers_shards(const Workers *w) { return w->N; }

size_t workers_arena_floats(const Workers *w, int B, int S, int T) {
    /* a shard's rows follow their work: at most all but one row for each other shard */
    int most = B - (w->N - 1);
    return model_arena_floats(w->model, pass_rows(w->pass_tokens, most > 1 ? most : 1, S, T), S, T);
}

void workers_reserve(Workers *w, size_t floats) {
    for (int i = 1; i < w->n; i++) model_reserve(&w->replica[i], floats);
}

double workers_step(Workers *w, const ModelBatch *b, uint64_t seed, uint64_t step, double clip_norm, double lr,
                    int *stop) {
    w->seed = seed, w->step = step, w->clip_norm = clip_norm, w->lr = lr;
    /* the batch's target tokens, counted as the loss counts them, so no shard waits for
     * another's forward pass to know it */
    int total = 0, pad = w->model->cfg.pad_id;
    for (size_t j = 0; j < (size_t)b->B * b->T; j++) total += b->tgt_out[j] != pad;
    w->total_tokens = total;
    for (int i = 0; i < w->n; i++) w->part[i] = shard_batch(b, &w->model->cfg, w->N, w->rank * w->n + i);
    w->stats[(size_t)w->n * N_STATS] = *stop;
    mark(w, 0, MARK_ARRIVE);
    wait_timed(w, &w->start);
    work(w, 0);
    wait_timed(w, &w->done);
    mark(w, 0, MARK_LEAVE);
    /* every other thread has written this row's marks before the barrier, and writes the
     * next row's only after the next step's start */
    if (w->marks && w->marks_steps < w->marks_cap) w->marks_steps++;
    w->adam->t++;
    if (w->failed) return NAN;
    /* the loss over every shard in shard order, and any rank's stop request */
    const double *all = w->ranks > 1 ? w->all_stats : w->stats;
    double loss = 0.0, tokens = 0.0;
    for (int q = 0; q < w->ranks; q++) {
        const double *r = all + (size_t)q * ((size_t)w->n * N_STATS + 1);
        for (int k = 0; k < w->n; k++) loss += r[k * N_STATS + STAT_LOSS], tokens += r[k * N_STATS + STAT_TOKENS];
        if (r[w->n * N_STATS] != 0) *stop = (int)r[w->n * N_STATS];
    }
    return tokens > 0 ? loss / tokens : 0.0;
}

int workers_failed(const Workers *w) { return w->failed; }

void workers_record(Workers *w, int steps) {
    free(w->marks);
    w->marks = NULL, w->marks_cap = w->marks_steps = 0;
    if (steps <= 0) return;
    /* zeroed: the other threads' LEAVE stays 0 (it is their next ARRIVE) */
    w->marks = xcalloc((size_t)steps * (size_t)w->n * N_MARKS, sizeof(double));
    w->marks_cap = steps;
}

int workers_recorded(const Workers *w) { return w->marks_steps; }

const double *workers_marks(const Workers *w, int k, int i) { return w->marks + ((size_t)k * w->n + i) * N_MARKS; }

double workers_comm(const Workers *w, double *bytes_per_step) {
    /* sent: every local shard's gradients over the other ranks' parts, and this rank's
     * updated part to each other rank (about the size of those parts together); received:
     * as much. The stats are a few doubles. */
    size_t others = w->model->n_params - (w->hi - w->lo);
    *bytes_per_step = (double)others * sizeof(float) * (double)(w->n + 1);
    return w->comm_steps ? w->comm_s / (double)w->comm_steps : 0.0;
}

int workers_gather_moments(Workers *w) {
    if (w->ranks == 1) return 0;
    return dist_gatherv_floats(w->adam->m, w->counts, w->displs) != 0 ||
                   dist_gatherv_floats(w->adam->v, w->counts, w->displs) != 0
               ? -1
               : 0;
}
