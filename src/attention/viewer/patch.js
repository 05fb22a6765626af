/* live panel: patching (POST /v1/patch). Two sentences of its own, and which heads and
 * source positions carry the difference between them: the measured effects and attribution
 * patching's estimates, as qkv patch draws them. */
/* a diverging colour for an effect e of the largest size m: red above 0 (the patch raises
   the metric), blue below, as qkv patch's patch.svg colours them */
const divColour = (e, m) => { const x = Math.min(1, Math.abs(e) / (m || 1)), c = Math.round(255 * (1 - x));
  return e >= 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`; };
async function runPatch() {
  const body = { clean: $("p-clean").value, corrupt: $("p-corrupt").value, checkpoint: $("live-ckpt").value };
  if ($("p-a").value && $("p-b").value) { body.compare = [$("p-a").value, $("p-b").value]; body.at = parseInt($("p-at").value, 10) || 0; }
  $("p-status").textContent = "patching\u2026";
  try {
    const t = await postJSON("/v1/patch", body);
    state.whatif.patch = t;
    renderPatch(t);
    return true;
  } catch (e) {
    $("p-status").textContent = String(e.message || e);
    return false;
  }
}
function renderPatch(t) {
  const box = $("p-view");
  box.textContent = "";
  $("p-status").textContent = `metric ${t.metric}: clean ${t.clean.toFixed(3)}, corrupt ${t.corrupt.toFixed(3)}; ` +
    `Spearman rho (attribution patching against patching) ${t.rho === null ? "undefined" : t.rho.toFixed(3)} over ${t.components.length} components`;
  const m = t.components.reduce((v, c) => Math.max(v, Math.abs(c.effect), Math.abs(c.atp)), 0), cell = 26;
  const heads = t.components.filter(c => c.kind !== "stream"), stream = t.components.filter(c => c.kind === "stream");
  const hrows = [...new Set(heads.map(c => `${c.kind} L${c.layer}`))], hcols = heads.reduce((v, c) => Math.max(v, c.head + 1), 0);
  const srows = stream.reduce((v, c) => Math.max(v, c.layer + 1), 0);
  /* the maps' width, and at least their captions' (the scatter starts past it) */
  const width = Math.max(90 + hcols * cell, 90 + t.source.length * cell, 430) + 40;
  const svg = el("svg", { width: width + 380, height: Math.max(60 + hrows.length * cell + 80 + srows * cell + 20, 310),
                          id: "p-svg" }, box);
  el("text", { x: 0, y: 14, "font-size": 12 }, svg, "effect of each head (rows kind \u00d7 layer, columns heads)");
  el("text", { x: width, y: 14, "font-size": 11, fill: "#555" }, svg,
     `red: the patch raises the metric, blue: lowers it; largest ${m.toPrecision(3)}`);
  const cellOf = (c, x, y) => {
    const r = el("rect", { x, y, width: cell - 2, height: cell - 2, fill: divColour(c.effect, m), stroke: "#ccc", class: "pcell",
                          "data-effect": c.effect }, svg);
    r.addEventListener("mousemove", ev => showTip(ev, `${c.name}: effect ${c.effect.toFixed(4)}, estimate ${c.atp.toFixed(4)}`));
    r.addEventListener("mouseleave", hideTip);
  };
  hrows.forEach((rname, i) => el("text", { x: 0, y: 24 + i * cell + 17, "font-size": 11 }, svg, rname));
  heads.forEach(c => cellOf(c, 90 + c.head * cell, 24 + hrows.indexOf(`${c.kind} L${c.layer}`) * cell));
  const y0 = 24 + hrows.length * cell + 70;
  el("text", { x: 0, y: y0 - 56, "font-size": 12 }, svg, "effect of the encoder's stream (rows layers, columns source positions)");
  t.source.forEach((w, j) => { const x = 90 + j * cell + 10; el("text", { x, y: y0 - 6, transform: `rotate(-45 ${x} ${y0 - 6})`, "font-size": 11 }, svg, w); });
  for (let l = 0; l < srows; l++) el("text", { x: 0, y: y0 + l * cell + 17, "font-size": 11 }, svg, `enc L${l}`);
  stream.forEach(c => cellOf(c, 90 + c.pos * cell, y0 + c.layer * cell));
  /* the scatter: attribution patching's estimate against the measured effect */
  const sx = width, sy = 24, ss = 240, sc = v => (v / (m || 1)) * ss / 2;
  el("rect", { x: sx, y: sy, width: ss, height: ss, fill: "#fafafa", stroke: "#aaa" }, svg);
  el("line", { x1: sx, y1: sy + ss, x2: sx + ss, y2: sy, stroke: "#ccc" }, svg);
  el("text", { x: sx, y: sy + ss + 30, "font-size": 11 }, svg, "x: effect, y: estimate; dots: heads dark, stream orange");
  /* both axes run from -m to m: their ends and middle */
  for (const k of [-1, 0, 1]) {
    const v = (k * m).toPrecision(2);
    el("text", { x: sx + ss / 2 + k * ss / 2, y: sy + ss + 13, "font-size": 10, "text-anchor": "middle", fill: "#555" }, svg, v);
    el("text", { x: sx + ss + 4, y: sy + ss / 2 - k * ss / 2 + 4, "font-size": 10, fill: "#555" }, svg, v);
  }
  t.components.forEach(c => el("circle", { cx: sx + ss / 2 + sc(c.effect), cy: sy + ss / 2 - sc(c.atp), r: 3,
                                           fill: c.kind === "stream" ? "#e67e22" : "#3b528b", class: "pdot" }, svg));
}
