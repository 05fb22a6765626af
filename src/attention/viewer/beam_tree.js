/* what-if panel: the beam tree, every extension beam search weighed and its fate. */
function renderTree(a) {
  const box = $("w-tree");
  box.textContent = "";
  if (!a.beam_tree) return;
  html("h3", {}, box, `beam tree: every extension beam search weighed (blue kept, green finished, grey dropped; log P); best: ${a.beam_best || "(empty)"}`);
  const nodes = a.beam_tree, steps = nodes.reduce((m, n) => Math.max(m, n.step), 0) + 1, rowOf = [], perStep = new Array(steps).fill(0);
  nodes.forEach((n, i) => { rowOf[i] = perStep[n.step]++; });
  const dx = 110, dy = 24, rows = Math.max(1, ...perStep);
  const svg = el("svg", { width: steps * dx + 60, height: rows * dy + 20, id: "w-tree-svg" }, box);
  const at = i => [30 + nodes[i].step * dx, 14 + rowOf[i] * dy];
  nodes.forEach((n, i) => {
    if (n.parent < 0) return;
    const [x1, y1] = at(n.parent), [x2, y2] = at(i);
    el("line", { x1, y1, x2, y2, stroke: n.fate === "dropped" ? "#ddd" : "#888" }, svg);
  });
  nodes.forEach((n, i) => {
    const [x, y] = at(i), g = el("g", { class: "tnode" }, svg);
    el("circle", { cx: x, cy: y, r: 5, class: `fate-${n.fate}` }, g);
    el("text", { x: x + 8, y: y + 4, "font-size": 11, fill: n.fate === "dropped" ? "#999" : "#222" }, g, `${n.token} ${n.logp.toFixed(2)}`);
    g.addEventListener("mousemove", ev => showTip(ev, `step ${n.step}: ${n.token}, ${n.fate}, log P ${n.logp.toFixed(4)}`));
    g.addEventListener("mouseleave", hideTip);
  });
}
