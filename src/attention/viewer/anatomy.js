/* anatomy: the query chosen on the map, key by key: its scores, weights and contributions,
 * sortable, and the formulas they follow. */
function renderAnatomy() {
  const box = $("anatomy");
  box.textContent = "";
  if (state.query < 0 || state.mode === "grid") {
    html("p", {}, box, "Click a row of the heatmap (a query) to see its scores, weights and contributions.");
    return;
  }
  const h = headOf(), lab = labels(state.kind), i = state.query;
  const s = state.maps[`${state.kind}_scores`][state.layer][h][i], w = state.maps[state.kind][state.layer][h][i],
        c = state.maps[`${state.kind}_contrib`][state.layer][h][i];
  html("h3", {}, box, `query ${i}: '${lab.rows[i]}' \u2014 ${state.kind}, layer ${state.layer}, head ${h}`);
  if (state.head === "avg") html("p", {}, box, "(the heatmap shows the head average; a query's anatomy is one head's: choose a head above)");
  const finite = s.filter(v => v !== null), max = Math.max(...finite);
  const z = finite.reduce((a, v) => a + Math.exp(v - max), 0);
  const soft = s.map(v => v === null ? 0 : Math.exp(v - max) / z);
  const worst = Math.max(...soft.map((v, j) => Math.abs(v - w[j])));
  const sum = w.reduce((a, v) => a + v, 0);
  html("div", { class: "formula" }, box,
       `score_j = q\u00b7k_j / \u221a${state.maps.d_head}\nweight_j = exp(score_j) / \u03a3_k exp(score_k)\n` +
       `contrib_j = weight_j \u00b7 \u2016v_j W_O[head ${h}]\u2016\n` +
       `(v_j: key j's value in head ${h}; W_O[head ${h}]: the rows of the output projection W_O that head ${h} writes through)`);
  html("div", {}, box, `\u03a3 weights = ${sum.toFixed(6)};  softmax(scores) \u2212 weights: at most ${worst.toExponential(1)}`);
  const sorts = html("div", { class: "sorts" }, box, "keys sorted by ");
  for (const key of ["key", "score", "weight", "contrib"]) {
    const b = html("button", { class: key === state.sort ? "on" : "", "data-sort": key }, sorts, key === "key" ? "position" : key);
    b.addEventListener("click", () => { state.sort = key; renderAnatomy(); });
  }
  const order = s.map((_, j) => j);
  const by = { score: s.map(v => v === null ? -Infinity : v), weight: w, contrib: c }[state.sort];
  if (by) order.sort((a, b) => by[b] - by[a]);
  const table = html("table", {}, box), head = html("tr", {}, table);
  for (const t of ["key", "score", "weight", "", "contrib", "", "\u2016v W_O\u2016"]) html("th", {}, head, t);
  const cmax = Math.max(...c) || 1;
  order.forEach(j => {
    const tr = html("tr", {}, table);
    html("td", { class: "tok" }, tr, `${j} ${lab.cols[j]}`);
    html("td", {}, tr, fmt(s[j]));
    html("td", {}, tr, w[j].toFixed(4));
    html("span", { class: "bar", style: `width:${Math.round(80 * w[j])}px` }, html("td", { class: "tok" }, tr));
    html("td", {}, tr, c[j].toFixed(4));
    html("span", { class: "bar", style: `width:${Math.round(80 * c[j] / cmax)}px;background:#21918c` }, html("td", { class: "tok" }, tr));
    /* contrib / weight gives the norm back to float precision however small the weight,
       until the product underflows (a weight of 0: no norm to read) */
    html("td", {}, tr, w[j] > 1e-30 ? (c[j] / w[j]).toFixed(3) : "\u2013");
  });
}
