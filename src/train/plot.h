/* plot: training curves (loss, validation loss) from metrics.jsonl as an SVG file. */
#ifndef QKV_PLOT_H
#define QKV_PLOT_H

/* -1 with the error set when the metrics cannot be read or hold nothing yet. */
int plot_metrics(const char *metrics_path, const char *svg_path);

#endif
