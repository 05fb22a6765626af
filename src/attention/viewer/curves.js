/* curves: over training (the watch view): each head's entropy, AER against --gold and the
 * source share, at every recorded step, the step shown marked. */
/* a round tick step (1, 2 or 5 times a power of ten) for about n ticks over [lo, hi]: the
   rule of util/axis.c, so these charts' scales read like the C pictures' (0.5, 1, 1.5, not
   a quarter of the top: 0.51, 1.02, 1.53) */
function tickStep(lo, hi, n) {
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw > 0 ? raw : 1))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

function lineChart(svg, x0, title, steps, series, current, yLabel) {
  const w = 360, h = 160, left = 44, top = 24, all = series.flatMap(s => s.values);
  const low = Math.min(0, ...all), high = Math.max(...all) || 1, step = tickStep(low, high, 4);
  const lo = Math.floor(low / step) * step, hi = Math.ceil(high / step) * step;
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const xAt = k => left + (steps.length > 1 ? k / (steps.length - 1) : 0) * w, yAt = v => top + h - (v - lo) / (hi - lo) * h;
  const g = el("g", { transform: `translate(${x0},0)` }, svg);
  el("text", { x: left, y: 14, "font-size": 13 }, g, title);
  el("rect", { x: left, y: top, width: w, height: h, fill: "none", stroke: "#bbb" }, g);
  for (let k = 0, v = lo; v <= hi + step * 1e-9; k++, v = lo + k * step)
    el("text", { x: left - 4, y: yAt(v) + 4, "text-anchor": "end", "font-size": 11 }, g, String(+v.toFixed(digits)));
  el("text", { x: left, y: top + h + 16, "font-size": 11 }, g, `step ${steps[0]}`);
  el("text", { x: left + w, y: top + h + 16, "font-size": 11, "text-anchor": "end" }, g, `step ${steps[steps.length - 1]}`);
  el("text", { x: left + w / 2, y: top + h + 16, "font-size": 11, "text-anchor": "middle", fill: "#555" }, g, yLabel);
  el("line", { x1: xAt(current), x2: xAt(current), y1: top, y2: top + h, stroke: "#c00", "stroke-dasharray": "3,3" }, g);
  series.forEach(s => {
    el("polyline", { points: s.values.map((v, k) => `${xAt(k)},${yAt(v)}`).join(" "), fill: "none", stroke: s.colour,
                     "stroke-width": s.width || 1.5 }, g);
  });
  return g;
}

function renderCurves() {
  const box = $("curves");
  box.textContent = "";
  if (!WATCH) return;
  /* a chart and its legend take 520 px ("after layer 1" ends at 516): the SVG is as wide
     as the charts drawn */
  const slot = 520, svg = el("svg", { "font-family": "sans-serif", width: slot, height: 220 }, box);
  const steps = DATA.snapshots.map(s => s.step), ent = DATA.entropy[state.sentence];
  const heads = ent[0][state.kind][state.layer].length, palette = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725", "#e69f00", "#cc79a7", "#999"];
  const series = [];
  for (let h = 0; h < heads; h++)
    series.push({ values: ent.map(e => e[state.kind][state.layer][h]), colour: palette[h % palette.length],
                  width: state.head === h ? 3.5 : 1.5 });
  const g = lineChart(svg, 0, `entropy of each head's weights (${state.kind}, layer ${state.layer})`, steps, series, state.step,
                      "nats, mean over queries");
  series.forEach((s, h) => {
    el("line", { x1: 412, x2: 426, y1: 34 + 16 * h, y2: 34 + 16 * h, stroke: s.colour, "stroke-width": 3 }, g);
    el("text", { x: 430, y: 38 + 16 * h, "font-size": 11 }, g, `head ${h}`);
  });
  if (DATA.aer) svg.setAttribute("width", 2 * slot);
  if (DATA.aer) lineChart(svg, slot, DATA.aer_null ? "AER against --gold (last cross-attention block's contributions, null on)" : "AER against --gold (last decoder layer, heads averaged, null off)", steps,
                          [{ values: DATA.aer, colour: "#c00", width: 2 }], state.step, "lower is better");
  /* the source share over training (snapshots that recorded it): mean over the target
     words after each decoder layer; the last layer's is the answer, drawn thickest */
  const shares = DATA.snapshots.map(s => s.sentences[state.sentence].source_share);
  if (shares.every(x => Array.isArray(x))) {
    const x0 = DATA.aer ? 2 * slot : slot, layers = shares[0].length;
    svg.setAttribute("width", x0 + slot);
    const mean = row => row.reduce((a, b) => a + b, 0) / row.length;
    const series = [];
    for (let l = 0; l < layers; l++)
      series.push({ values: shares.map(x => mean(x[l])), colour: palette[(l * 2) % palette.length], width: l === layers - 1 ? 3 : 1.5 });
    const g = lineChart(svg, x0, "source share: how much of each word came from the source", steps, series, state.step,
                        "mean over target words (0..1)");
    g.setAttribute("data-share-chart", String(layers));
    series.forEach((sr, l) => {
      el("line", { x1: 412, x2: 426, y1: 34 + 16 * l, y2: 34 + 16 * l, stroke: sr.colour, "stroke-width": 3 }, g);
      el("text", { x: 430, y: 38 + 16 * l, "font-size": 11 }, g, `after layer ${l}`);
    });
  }
}
