/* what-if panel: the beam tree, every extension beam search weighed and its fate. A step is a
   column as wide as its longest label; an extension's line leaves its parent's label from the
   column's right edge (a short tie along the parent's own row reaches it), so no line runs
   through a word. */
function renderTree(a) {
  const box = $("w-tree");
  box.textContent = "";
  if (!a.beam_tree) return;
  html("h3", {}, box, `beam tree: every extension beam search weighed (blue kept, green finished, grey dropped; log P); best: ${a.beam_best || "(empty)"}`);
  const nodes = a.beam_tree, steps = nodes.reduce((m, n) => Math.max(m, n.step), 0) + 1, rowOf = [], perStep = new Array(steps).fill(0);
  nodes.forEach((n, i) => { rowOf[i] = perStep[n.step]++; });
  const dy = 24, rows = Math.max(1, ...perStep);
  const svg = el("svg", { id: "w-tree-svg", height: rows * dy + 20 }, box);
  const ties = el("g", {}, svg);
  const words = nodes.map(n => el("text", { "font-size": 11, fill: n.fate === "dropped" ? "#999" : "#222" }, svg, `${n.token} ${n.logp.toFixed(2)}`));
  const colX = [], colEnd = [];
  for (let s = 0, x = 14; s < steps; s++) {
    colX[s] = x;
    colEnd[s] = x + 8 + nodes.reduce((w, n, i) => n.step === s ? Math.max(w, textWidth(words[i])) : w, 0) + 6;
    x = colEnd[s] + 40;
  }
  const at = i => [colX[nodes[i].step], 14 + rowOf[i] * dy];
  nodes.forEach((n, i) => {
    if (n.parent < 0) return;
    const [px, py] = at(n.parent), [x, y] = at(i), from = colEnd[nodes[n.parent].step];
    const stroke = n.fate === "dropped" ? "#ddd" : "#888";
    el("line", { x1: px + 8 + textWidth(words[n.parent]) + 3, y1: py, x2: from, y2: py, stroke: "#888" }, ties);
    el("line", { x1: from, y1: py, x2: x - 5, y2: y, stroke }, ties);
  });
  nodes.forEach((n, i) => {
    const [x, y] = at(i), g = el("g", { class: "tnode" }, svg);
    el("circle", { cx: x, cy: y, r: 5, class: `fate-${n.fate}` }, g);
    words[i].setAttribute("x", x + 8);
    words[i].setAttribute("y", y + 4);
    g.appendChild(words[i]);
    g.addEventListener("mousemove", ev => showTip(ev, `step ${n.step}: ${n.token}, ${n.fate}, log P ${n.logp.toFixed(4)}`));
    g.addEventListener("mouseleave", hideTip);
  });
  svg.setAttribute("width", colEnd[steps - 1] + 10);
}
