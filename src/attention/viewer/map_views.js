/* map views: one head's (or the heads' average) map as a heatmap, every head at once, lines
 * from queries to keys, and the queries and keys in the plane of their PCA. */
function heatmap(parent, kind, layer, head, cell, withLabels, x0, y0) {
  const m = matrix(kind, layer, head, state.value), lab = labels(kind), [lo, hi] = range(m);
  /* labels of up to 24 characters (the tooltip has them whole), no taller than a cell, and
     margins that hold them: the column labels run up at 60 degrees */
  const cut = t => t.length > 24 ? t.slice(0, 23) + "\u2026" : t, font = Math.min(12, Math.floor(cell * 0.8));
  const px = t => cut(t).length * 0.6 * font;
  const longest = ts => ts.reduce((w, t) => Math.max(w, px(t)), 0);
  const left = withLabels ? Math.max(110, longest(lab.rows) + 16) : 0;
  const top = withLabels ? Math.max(90, Math.ceil(longest(lab.cols) * 0.87) + 16) : 0;
  const g = el("g", { transform: `translate(${x0},${y0})` }, parent);
  if (withLabels) {
    lab.cols.forEach((t, j) => {
      const x = left + j * cell + cell / 2 + 4, y = top - 6;
      el("text", { x, y, transform: `rotate(-60 ${x} ${y})`, "font-size": font }, g, cut(t));
    });
    lab.rows.forEach((t, i) => {
      const r = el("text", { x: left - 6, y: top + i * cell + cell / 2 + 0.35 * font, "text-anchor": "end", "font-size": font,
                             class: "rowlabel" + (i === state.query ? " chosen" : "") }, g, cut(t));
      r.addEventListener("click", () => chooseQuery(i));
    });
  }
  m.forEach((row, i) => row.forEach((v, j) => {
    const r = el("rect", { x: left + j * cell, y: top + i * cell, width: cell, height: cell, class: "cell",
                           fill: v === null ? "#ddd" : colour((v - lo) / (hi - lo)) }, g);
    if (!withLabels) return;
    r.addEventListener("mousemove", ev => showTip(ev, `${lab.rows[i]} \u2192 ${lab.cols[j]}: ${state.value} ${fmt(v)}`));
    r.addEventListener("mouseleave", hideTip);
    r.addEventListener("click", () => {
      if (LIVE && state.whatif.pinMode && kind === "cross") return head === "avg" ? pinRefused() : pinAt(layer, head, i, j);
      chooseQuery(i);
    });
  }));
  if (withLabels && state.query >= 0 && state.query < m.length)
    el("rect", { x: left - 1, y: top + state.query * cell - 1, width: m[0].length * cell + 2, height: cell + 2,
                 fill: "none", stroke: "#c00", "stroke-width": 2 }, g);
  return { width: left + m[0].length * cell, height: top + m.length * cell, top, lo, hi };
}

function legend(svg, x, y, h, lo, hi) {
  const defs = el("defs", {}, svg), grad = el("linearGradient", { id: "scale", x1: 0, y1: 1, x2: 0, y2: 0 }, defs);
  for (let k = 0; k <= 4; k++) el("stop", { offset: `${k * 25}%`, "stop-color": colour(k / 4) }, grad);
  el("rect", { x, y, width: 16, height: h, fill: "url(#scale)", stroke: "#888" }, svg);
  for (let k = 0; k <= 4; k++) el("text", { x: x + 22, y: y + h - k * h / 4 + 4, "font-size": 12 }, svg, fmt(lo + (hi - lo) * k / 4));
  el("text", { x: x - 4, y: y + h + 18, "font-size": 12, fill: "#555" }, svg, state.value);
}

function renderHeatmap(svg) {
  const lab = labels(state.kind), n = Math.max(lab.rows.length, lab.cols.length);
  const cell = Math.max(10, Math.min(32, Math.floor(560 / n)));
  const size = heatmap(svg, state.kind, state.layer, state.head, cell, true, 0, 0);
  legend(svg, size.width + 30, size.top, Math.max(120, lab.rows.length * cell), size.lo, size.hi);
  return { width: size.width + 110, height: Math.max(size.height, size.top + 140, 250) + 30 };
}

function renderGrid(svg) {
  const lab = labels(state.kind), n = Math.max(lab.rows.length, lab.cols.length);
  const cell = Math.max(3, Math.min(12, Math.floor(200 / n)));
  const heads = ["avg"].concat(state.maps[state.kind][state.layer].map((_, h) => h));
  const w = lab.cols.length * cell, h = lab.rows.length * cell, per = 4, top = 22;
  /* the thumbnails are too small for words: a line says what their rows and columns are */
  const what = { encoder_self: ["source words", "source words"], decoder_self: ["target words (queries)", "the words before them"],
                 cross: ["target words", "source words"] }[state.kind];
  fitText(el("text", { x: 0, y: 14, "font-size": 12, fill: "#555" }, svg,
             `each head's map: rows ${what[0]}, columns ${what[1]}, as in the heatmap; click one to open it with its words`),
          Math.max(per * (w + 30) - 10, 300));
  heads.forEach((head, k) => {
    const x = (k % per) * (w + 30), y = top + Math.floor(k / per) * (h + 40);
    const g = el("g", { class: "thumb" }, svg);
    el("text", { x, y: y + 14, "font-size": 12 }, g, head === "avg" ? "average" : `head ${head}`);
    heatmap(g, state.kind, state.layer, head, cell, false, x, y + 20);
    el("rect", { x, y: y + 20, width: w, height: h, fill: "none", stroke: "#ccc", class: "frame" }, g);
    g.addEventListener("click", () => { state.head = head; state.mode = "heatmap"; sync(); });
  });
  return { width: Math.max(per * (w + 30), 310), height: top + Math.ceil(heads.length / per) * (h + 40) + 10 };
}

function renderLines(svg) {
  const m = matrix(state.kind, state.layer, state.head), lab = labels(state.kind);
  const step = 70, width = Math.max(lab.rows.length, lab.cols.length) * step + 40, yk = 40, yq = 240;
  const xk = j => 20 + j * step + step / 2, xq = i => 20 + i * step + step / 2;
  el("text", { x: 0, y: 14, "font-size": 12, fill: "#555" }, svg, "keys");
  el("text", { x: 0, y: yq + 34, "font-size": 12, fill: "#555" }, svg, "queries");
  m.forEach((row, i) => row.forEach((p, j) => {
    if (p < 0.02 || (state.query >= 0 && i !== state.query)) return;
    const line = el("line", { x1: xq(i), y1: yq, x2: xk(j), y2: yk, stroke: colour(p), "stroke-width": 1 + 5 * p,
                              "stroke-opacity": Math.min(1, 0.15 + p), class: "cell" }, svg);
    line.addEventListener("mousemove", ev => showTip(ev, `${lab.rows[i]} \u2192 ${lab.cols[j]}: ${p.toFixed(3)}`));
    line.addEventListener("mouseleave", hideTip);
  }));
  /* each word in its own slot of `step` px, cut to fit it (the whole word in the tooltip) */
  lab.cols.forEach((t, j) => fitText(el("text", { x: xk(j), y: yk - 8, "text-anchor": "middle", "font-size": 13 }, svg, t), step - 6));
  lab.rows.forEach((t, i) => {
    const r = fitText(el("text", { x: xq(i), y: yq + 18, "text-anchor": "middle", "font-size": 13,
                                   class: "rowlabel" + (i === state.query ? " chosen" : "") }, svg, t), step - 6);
    r.addEventListener("click", () => chooseQuery(i === state.query ? -1 : i));
  });
  return { width, height: yq + 50 };
}

/* The top two principal axes of the rows of P (power iteration with deflation). */
function pca2(P) {
  const n = P.length, d = P[0].length, mean = Array(d).fill(0);
  P.forEach(x => x.forEach((v, e) => { mean[e] += v / n; }));
  const C = P.map(x => x.map((v, e) => v - mean[e]));
  const cov = Array.from({ length: d }, (_, a) => Array.from({ length: d }, (_, b) => C.reduce((s, x) => s + x[a] * x[b], 0) / n));
  const total = cov.reduce((s, row, a) => s + row[a], 0), axes = [], vars = [];
  for (let k = 0; k < 2; k++) {
    let v = Array.from({ length: d }, (_, e) => Math.sin(e + 1 + k));
    for (let it = 0; it < 200; it++) {
      const w = cov.map(row => row.reduce((s, c, e) => s + c * v[e], 0));
      const norm = Math.hypot(...w) || 1;
      v = w.map(x => x / norm);
    }
    const lambda = cov.reduce((s, row, a) => s + v[a] * row.reduce((t, c, e) => t + c * v[e], 0), 0);
    axes.push(v), vars.push(lambda);
    for (let a = 0; a < d; a++) for (let b = 0; b < d; b++) cov[a][b] -= lambda * v[a] * v[b];
  }
  return { points: C.map(x => axes.map(v => x.reduce((s, c, e) => s + c * v[e], 0))),
           explained: total > 0 ? (vars[0] + vars[1]) / total : 1 };
}

function renderQK(svg) {
  const h = headOf(), lab = labels(state.kind);
  if (!state.maps[`${state.kind}_queries`]) { /* a report keeps the last step's queries and keys alone */
    const last = DATA.snapshots ? DATA.snapshots[DATA.snapshots.length - 1].step : "?";
    el("text", { x: 4, y: 20, "font-size": 13, fill: "#555" }, svg,
       `This page keeps the queries and keys of the last step only (step ${last}): move the step slider there.`);
    return { width: 720, height: 32 };
  }
  const Q = state.maps[`${state.kind}_queries`][state.layer][h], K = state.maps[`${state.kind}_keys`][state.layer][h];
  const Wt = state.maps[state.kind][state.layer][h], S = state.maps[`${state.kind}_scores`][state.layer][h];
  const { points, explained } = pca2(Q.concat(K));
  const size = 460, pad = 40;
  const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
  const span = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys)) || 1;
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cy = (Math.max(...ys) + Math.min(...ys)) / 2;
  const px = p => pad + size / 2 + (p[0] - cx) / span * size, py = p => pad + size / 2 - (p[1] - cy) / span * size;
  const q = state.query >= 0 ? state.query : 0;
  el("rect", { x: 0, y: 0, width: size + 2 * pad + 130, height: size + 2 * pad, fill: "#fafafa", stroke: "#ddd" }, svg);
  K.forEach((_, j) => {
    const w = Wt[q][j];
    if (w < 0.01) return;
    el("line", { x1: px(points[q]), y1: py(points[q]), x2: px(points[Q.length + j]), y2: py(points[Q.length + j]),
                 stroke: "#c00", "stroke-width": 1 + 6 * w, "stroke-opacity": Math.min(1, 0.15 + w) }, svg);
  });
  const markers = [];
  K.forEach((_, j) => {
    const p = points[Q.length + j];
    const r = el("rect", { x: px(p) - 5, y: py(p) - 5, width: 10, height: 10, fill: "#3b528b", class: "cell" }, svg);
    r.addEventListener("mousemove", ev => showTip(ev, `key ${lab.cols[j]}: score ${fmt(S[q][j])}, weight ${Wt[q][j].toFixed(3)}`));
    r.addEventListener("mouseleave", hideTip);
    markers.push({ x0: px(p) - 6, y0: py(p) - 6, x1: px(p) + 6, y1: py(p) + 6 });
  });
  Q.forEach((_, i) => {
    const p = points[i], r = i === q ? 7 : 5;
    const c = el("circle", { cx: px(p), cy: py(p), r, fill: i === q ? "#c00" : "#e69f00", class: "cell rowlabel" }, svg);
    c.addEventListener("click", () => chooseQuery(i));
    c.addEventListener("mousemove", ev => showTip(ev, `query ${lab.rows[i]}`));
    c.addEventListener("mouseleave", hideTip);
    markers.push({ x0: px(p) - r - 1, y0: py(p) - r - 1, x1: px(p) + r + 1, y1: py(p) + r + 1 });
  });
  /* the words beside their points, each on a box of the panel's colour (a line under a word
     gives way to it), placed clear of the points and of each other: the chosen query first */
  const words = [[points[q], lab.rows[q], { "font-size": 13, "font-weight": "bold", fill: "#c00" }]]
    .concat(K.map((_, j) => [points[Q.length + j], lab.cols[j], { "font-size": 12, fill: "#3b528b" }]));
  const boxes = el("g", {}, svg), texts = words.map(([, t, attrs]) => fitText(el("text", attrs, svg, t), 120));
  const sizes = words.map(([p, , attrs], k) => ({ x: px(p), y: py(p), w: textWidth(texts[k]) + 4, h: attrs["font-size"] + 4 }));
  placeLabels(sizes, markers, { x0: 1, y0: 1, x1: size + 2 * pad + 129, y1: size + 2 * pad - 1 }).forEach((b, k) => {
    el("rect", { x: b.x0, y: b.y0, width: b.x1 - b.x0, height: b.y1 - b.y0, fill: "#fafafa" }, boxes);
    texts[k].setAttribute("x", b.x0 + 2);
    texts[k].setAttribute("y", b.y1 - 2 - 0.22 * (sizes[k].h - 4));
  });
  /* an average of heads has no queries or keys of its own: say whose these are */
  const caption = (state.head === "avg" ? [`head ${h}: the average of heads has no queries and keys (choose a head above);`] : [])
    .concat([`head ${h}: ${Q.length} queries (circles), ${K.length} keys (squares);`,
                   `PCA of all ${Q.length + K.length} vectors, showing ${(100 * explained).toFixed(0)}% of their variance;`,
                   `lines: query '${lab.rows[q]}' to its keys, width = weight`,
                   "(the plane keeps directions roughly, the table exactly)"]);
  caption.forEach((t, k) => fitText(el("text", { x: 4, y: size + 2 * pad + 16 + 15 * k, "font-size": 12, fill: "#555" }, svg, t), size + 2 * pad + 122));
  return { width: size + 2 * pad + 130, height: size + 2 * pad + 16 + 15 * caption.length };
}
