/* bench_timeline: see bench_timeline.h. */
#include "cmdlib/bench_timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/parallel.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

static const double *marks(const Timeline *tl, int k, int i) {
    return tl->marks + ((size_t)k * tl->threads + i) * N_MARKS;
}

/* When thread i left the step's last barrier: the main thread marks it; another thread's
 * next arrival follows at once (nothing runs between), and after the last step the main
 * thread's leaving stands in. */
static double leave(const Timeline *tl, int k, int i) {
    if (i == 0 || k + 1 >= tl->steps) return marks(tl, k, 0)[MARK_LEAVE];
    return marks(tl, k + 1, i)[MARK_ARRIVE];
}

/* Arrival and departure of thread i at barrier b of step k. */
static void at_barrier(const Timeline *tl, int k, int i, int b, double *arrive, double *depart) {
    const double *m = marks(tl, k, i);
    switch (b) {
    case TL_START: /* the others wait from the main thread's arrival: before it, they idle */
        *arrive = fmax(m[MARK_ARRIVE], marks(tl, k, 0)[MARK_ARRIVE]), *depart = m[MARK_BEGIN];
        break;
    case TL_AFTER_SHARDS: *arrive = m[MARK_SHARD_END], *depart = m[MARK_FOLD_BEGIN]; break;
    case TL_AFTER_FOLD: *arrive = m[MARK_FOLD_END], *depart = m[MARK_ADAM_BEGIN]; break;
    default: *arrive = m[MARK_ADAM_END], *depart = leave(tl, k, i); break;
    }
}

ThreadStep timeline_thread_step(const Timeline *tl, int k, int i) {
    const double *m = marks(tl, k, i), *main = marks(tl, k, 0);
    ThreadStep s = {.shard = m[MARK_SHARD_END] - m[MARK_BEGIN],
                    .fold = m[MARK_FOLD_END] - m[MARK_FOLD_BEGIN],
                    .adam = m[MARK_ADAM_END] - m[MARK_ADAM_BEGIN]};
    for (int b = 0; b < TL_BARRIERS; b++) {
        double last = -INFINITY, arrive, depart;
        for (int j = 0; j < tl->threads; j++) {
            at_barrier(tl, k, j, b, &arrive, &depart);
            last = fmax(last, arrive);
        }
        at_barrier(tl, k, i, b, &arrive, &depart);
        s.lag[b] = last - arrive;
        s.wake[b] = fmax(0.0, depart - last);
    }
    /* the main thread alone, from the call to its arrival and from leaving to the return */
    s.serial = (main[MARK_ARRIVE] - tl->call[2 * k]) + (tl->call[2 * k + 1] - main[MARK_LEAVE]);
    return s;
}

static const char *barrier_names[TL_BARRIERS] = {"start", "after shards", "after fold", "end"};

static json_t *per_thread(const double *v, int n, double scale, const char *fmt) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_fmt(fmt, v[i] * scale));
    return a;
}

json_t *timeline_summary(const Timeline *tl) {
    int n = tl->threads, K = tl->steps;
    json_t *r = json_object();
    json_put(r, "steps", json_integer(K));
    json_put(r, "threads", json_integer(n));
    json_put(r, "barriers_per_step", json_integer(TL_BARRIERS));
    if (K == 0) return r;
    double *shard = xcalloc((size_t)n, sizeof(double)), *fold = xcalloc((size_t)n, sizeof(double)),
           *adam = xcalloc((size_t)n, sizeof(double)), *work = xcalloc((size_t)n, sizeof(double)),
           *lag = xcalloc((size_t)n * TL_BARRIERS, sizeof(double)),
           *wake = xcalloc((size_t)n * TL_BARRIERS, sizeof(double)), *last = xcalloc((size_t)n, sizeof(double));
    double wall = 0, serial = 0, waiting = 0, heaviest_last = 0;
    for (int k = 0; k < K; k++) {
        wall += tl->call[2 * k + 1] - tl->call[2 * k];
        int slowest = 0, heaviest = 0;
        double slowest_t = -1;
        for (int i = 0; i < n; i++) {
            ThreadStep s = timeline_thread_step(tl, k, i);
            shard[i] += s.shard, fold[i] += s.fold, adam[i] += s.adam, work[i] += tl->work[(size_t)k * n + i];
            for (int b = 0; b < TL_BARRIERS; b++) {
                lag[(size_t)i * TL_BARRIERS + b] += s.lag[b], wake[(size_t)i * TL_BARRIERS + b] += s.wake[b];
                waiting += s.lag[b] + s.wake[b];
            }
            if (i == 0) serial += s.serial;
            if (s.shard > slowest_t) slowest_t = s.shard, slowest = i;
            if (tl->work[(size_t)k * n + i] > tl->work[(size_t)k * n + heaviest]) heaviest = i;
        }
        last[slowest] += 1;
        heaviest_last += slowest == heaviest;
    }
    double ms = 1e3 / K, thread_time = wall * n;
    json_put(r, "step_ms", json_fmt("%.3f", wall * ms));
    /* every thread's waits at the step's barriers, of all threads' time */
    json_put(r, "waiting_share", json_fmt("%.4f", waiting / thread_time));
    /* the other threads idle while the main thread works alone between steps */
    json_put(r, "serial_ms", json_fmt("%.3f", serial * ms));
    json_put(r, "serial_idle_share", json_fmt("%.4f", serial * (n - 1) / thread_time));
    json_put(r, "shard_ms", per_thread(shard, n, ms, "%.3f"));
    json_put(r, "fold_ms", per_thread(fold, n, ms, "%.3f"));
    json_put(r, "adam_ms", per_thread(adam, n, ms, "%.3f"));
    double *rate = xcalloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) rate[i] = shard[i] > 0 ? work[i] / shard[i] / 1e9 : 0.0;
    json_put(r, "shard_gflop", per_thread(work, n, 1e-9 / K, "%.4f"));
    json_put(r, "shard_gflops", per_thread(rate, n, 1.0, "%.2f"));
    json_put(r, "shard_last", per_thread(last, n, 1.0, "%.0f"));
    json_put(r, "last_was_heaviest", json_fmt("%.4f", heaviest_last / K));
    json_t *bar = json_object();
    for (int b = 0; b < TL_BARRIERS; b++) {
        json_t *o = json_object();
        double l[PARALLEL_MAX], w[PARALLEL_MAX];
        for (int i = 0; i < n && i < PARALLEL_MAX; i++)
            l[i] = lag[(size_t)i * TL_BARRIERS + b], w[i] = wake[(size_t)i * TL_BARRIERS + b];
        json_put(o, "lag_ms", per_thread(l, n, ms, "%.3f"));
        json_put(o, "wake_ms", per_thread(w, n, ms, "%.3f"));
        json_put(bar, barrier_names[b], o);
    }
    json_put(r, "barriers", bar);
    free(shard), free(fold), free(adam), free(work), free(lag), free(wake), free(last), free(rate);
    return r;
}

json_t *timeline_steps(const Timeline *tl) {
    json_t *a = json_array();
    for (int k = 0; k < tl->steps; k++) {
        json_t *st = json_object(), *th = json_array();
        json_put(st, "ms", json_fmt("%.3f", 1e3 * (tl->call[2 * k + 1] - tl->call[2 * k])));
        for (int i = 0; i < tl->threads; i++) {
            ThreadStep s = timeline_thread_step(tl, k, i);
            double wait = 0;
            for (int b = 0; b < TL_BARRIERS; b++) wait += s.lag[b] + s.wake[b];
            json_t *o = json_object();
            json_put(o, "shard_gflop", json_fmt("%.5f", tl->work[(size_t)k * tl->threads + i] * 1e-9));
            json_put(o, "shard_ms", json_fmt("%.3f", 1e3 * s.shard));
            json_put(o, "fold_ms", json_fmt("%.3f", 1e3 * s.fold));
            json_put(o, "adam_ms", json_fmt("%.3f", 1e3 * s.adam));
            json_put(o, "wait_ms", json_fmt("%.3f", 1e3 * wait));
            /* the span those add up to, from the step's call: from the main thread's arrival
             * (this thread's, if later) to leaving the last barrier, which a thread the OS
             * runs late may do after the main thread has returned */
            double from, to;
            at_barrier(tl, k, i, TL_START, &from, &to);
            json_put(o, "from_ms", json_fmt("%.3f", 1e3 * (from - tl->call[2 * k])));
            json_put(o, "to_ms", json_fmt("%.3f", 1e3 * (leave(tl, k, i) - tl->call[2 * k])));
            json_array_append_new(th, o);
        }
        json_put(st, "threads", th);
        json_array_append_new(a, st);
    }
    return a;
}

/* the picture's colours: one per phase, waits in a light red, the main thread alone grey */
enum { PHASE_SHARD, PHASE_FOLD, PHASE_ADAM, PHASE_WAIT, PHASE_SERIAL, N_PHASES };
static const char *phase_colour[N_PHASES] = {"#4e79a7", "#f28e2b", "#59a14f", "#e8a0a0", "#bab0ac"};
static const char *phase_name[N_PHASES] = {"forward + backward (its shard)", "gradient sum (its slice)",
                                           "Adam (its slice)", "waiting at a barrier", "main thread alone"};

typedef struct {
    StrBuf *sb;
    double t0, px_per_s;
    int x0, lane_h, top;
} Lanes;

static void bar(const Lanes *ln, int lane, double a, double b, int phase) {
    if (!(b > a)) return;
    double x = ln->x0 + (a - ln->t0) * ln->px_per_s, w = (b - a) * ln->px_per_s;
    sb_printf(ln->sb,
              "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>%s: %.3f ms</title></rect>\n",
              x, ln->top + lane * (ln->lane_h + 6), w < 0.3 ? 0.3 : w, ln->lane_h, phase_colour[phase],
              phase_name[phase], (b - a) * 1e3);
}

char *timeline_svg(const Timeline *tl, int first, int count, const char *title) {
    if (first < 0) first = 0;
    if (first + count > tl->steps) count = tl->steps - first;
    int n = tl->threads, width = 960, x0 = 90, lane_h = 22, top = 46;
    int height = top + n * (lane_h + 6) + 90;
    StrBuf sb = {0};
    sb_printf(&sb,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
              "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n<text x=\"%d\" y=\"20\" "
              "font-size=\"14\">",
              width, height, x0);
    sb_append_xml(&sb, title);
    sb_printf(&sb, "</text>\n");
    if (count <= 0) {
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\">no step recorded</text>\n</svg>\n", x0, top + 14);
        return sb.buf;
    }
    double t0 = tl->call[2 * first], t1 = tl->call[2 * (first + count - 1) + 1];
    Lanes ln = {&sb, t0, (width - x0 - 20) / fmax(t1 - t0, 1e-9), x0, lane_h, top};
    for (int i = 0; i < n; i++)
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">thread %d</text>\n", x0 - 8,
                  top + i * (lane_h + 6) + lane_h / 2 + 4, i);
    for (int k = first; k < first + count; k++) {
        const double *main = marks(tl, k, 0);
        for (int i = 0; i < n; i++) {
            const double *m = marks(tl, k, i);
            if (i == 0) {
                bar(&ln, 0, tl->call[2 * k], main[MARK_ARRIVE], PHASE_SERIAL);
                bar(&ln, 0, main[MARK_LEAVE], tl->call[2 * k + 1], PHASE_SERIAL);
            }
            bar(&ln, i, fmax(m[MARK_ARRIVE], main[MARK_ARRIVE]), m[MARK_BEGIN], PHASE_WAIT);
            bar(&ln, i, m[MARK_BEGIN], m[MARK_SHARD_END], PHASE_SHARD);
            bar(&ln, i, m[MARK_SHARD_END], m[MARK_FOLD_BEGIN], PHASE_WAIT);
            bar(&ln, i, m[MARK_FOLD_BEGIN], m[MARK_FOLD_END], PHASE_FOLD);
            bar(&ln, i, m[MARK_FOLD_END], m[MARK_ADAM_BEGIN], PHASE_WAIT);
            bar(&ln, i, m[MARK_ADAM_BEGIN], m[MARK_ADAM_END], PHASE_ADAM);
            bar(&ln, i, m[MARK_ADAM_END], leave(tl, k, i), PHASE_WAIT);
        }
    }
    /* the time axis: about eight ticks at a round number of ms */
    int axis_y = top + n * (lane_h + 6) + 4;
    double span_ms = (t1 - t0) * 1e3, step = pow(10, floor(log10(span_ms / 8)));
    if (!(step > 0)) step = 1; /* a span of 0 (marks set by hand) */
    if (span_ms / step > 40) step *= 5;
    else if (span_ms / step > 16) step *= 2;
    sb_printf(&sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", x0, axis_y, width - 20, axis_y);
    for (double v = 0; v <= span_ms + 1e-9; v += step) {
        double x = x0 + v / 1e3 * ln.px_per_s;
        sb_printf(&sb, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>", x, axis_y, x, axis_y + 4);
        sb_printf(&sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, axis_y + 16, v);
    }
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">ms</text>\n", x0 - 8, axis_y + 16);
    int lx = x0, ly = axis_y + 40;
    for (int p = 0; p < N_PHASES; p++) {
        int w = 16 + 7 * (int)strlen(phase_name[p]) + 18; /* about 7 px a character */
        if (lx + w > width) lx = x0, ly += 20;
        sb_printf(&sb, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx, ly - 10,
                  phase_colour[p]);
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 16, ly, phase_name[p]);
        lx += w;
    }
    sb_printf(&sb, "</svg>\n");
    return sb.buf;
}
