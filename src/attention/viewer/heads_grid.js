/* heads grid: every head at once (the heads view, and qkv heads' output beside the live
 * page), coloured by its ranking score and labelled with its role; a click opens its map. */
/* a head's role as the lines of its cell, whole: one role a line (each but the last keeps
   its "+"), a role past 14 characters cut into lines of 14; the lines joined give the role */
const roleLines = r => !r ? ["\u2013"] : r.split(/(?<=\+)/).flatMap(p => p.match(/.{1,14}/gu) || []);
/* the ranking score's colour: a sequential scale of its own (light yellow to dark red), so
   it cannot be read as an attention weight */
function impColour(p) {
  const stops = [[255, 255, 204], [254, 217, 118], [253, 141, 60], [227, 26, 28], [128, 0, 38]];
  const x = Math.min(Math.max(p, 0), 1) * 4, i = Math.min(Math.floor(x), 3), f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
/* the scale runs from 0 (or the lowest score, if below: a dNLL can be) to the highest */
const headScore = h => h[HEAD_ORDER];
const IMP = (() => {
  const v = HEAD_LIST ? HEAD_LIST.map(headScore).filter(isNum) : [];
  const lo = Math.min(0, ...v), hi = v.length ? Math.max(...v) : 1;
  return { lo, hi: hi > lo ? hi : lo + 1 };
})();
const impShare = v => (v - IMP.lo) / (IMP.hi - IMP.lo);
const headFill = h => isNum(headScore(h)) ? impColour(impShare(headScore(h))) : "#ddd";
/* a self-attention head's share of weight on the previous, its own and the next position:
   "positional": {"prev", "self", "next"}, or the fields "previous", "current", "next" */
const positional = h => h.positional && typeof h.positional === "object"
  ? { previous: h.positional.prev, current: h.positional.self, next: h.positional.next }
  : { previous: h.previous, current: h.current, next: h.next };
/* the head the page opens on: rank 1 (by the default order), else the highest score */
function topHead() {
  const sc = h => isNum(headScore(h)) ? headScore(h) : -Infinity;
  const order = HEAD_LIST.slice().sort((a, b) => (isNum(a.rank) ? a.rank : Infinity) - (isNum(b.rank) ? b.rank : Infinity) ||
                                                  sc(b) - sc(a));
  return order[0];
}
function headTip(h) {
  const lines = [`${KIND_NAMES[h.kind] || h.kind}, layer ${h.layer}, head ${h.head}` + (h.role ? `: ${h.role}` : "") +
                 (isNum(h.rank) ? ` (rank ${h.rank} of ${HEAD_LIST.length} by ${HEAD_ORDER})` : "")];
  lines.push(`importance ${num(h.importance)}` + (isNum(h.importance_raw) ? ` (raw ${num(h.importance_raw)})` : ""));
  if (isNum(h.delta_nll)) lines.push(`\u0394NLL ${num(h.delta_nll)}`);
  const ce = [];
  if (isNum(h.confidence)) ce.push(`confidence ${num(h.confidence)}`);
  if (isNum(h.entropy)) ce.push(`entropy ${num(h.entropy)}`);
  if (ce.length) lines.push(ce.join(", "));
  const pos = positional(h), at = Object.keys(pos).filter(k => isNum(pos[k]));
  if (at.length) lines.push("positional: " + at.map(k => `${k} ${num(pos[k])}`).join(", "));
  if (h.roles_by_rule && typeof h.roles_by_rule === "object") {
    for (const [rule, list] of Object.entries(h.roles_by_rule))
      if (Array.isArray(list) && list.length) lines.push(`roles (${rule}): ${list.join(", ")}`);
  } else if (Array.isArray(h.roles) && h.roles.length) lines.push(`roles: ${h.roles.join(", ")}`);
  if (isNum(h.rare)) lines.push(`rare ${num(h.rare)}`);
  if (isNum(h.sink)) lines.push(`sink ${num(h.sink)} (top weight on the first key or EOS)`);
  if (isNum(h.aer)) lines.push(`AER ${num(h.aer)}`);
  if (state.maps) lines.push("click: its map below, for the chosen sentence");
  return lines.join("\n");
}
/* open head h's map in the viewer below, as the kind/layer/head controls would */
function openHead(h) {
  if (!state.maps || !state.maps[h.kind] || h.layer >= state.maps[h.kind].length || h.head >= state.maps.heads) return;
  state.kind = h.kind;
  state.layer = h.layer;
  state.head = h.head;
  if (state.mode === "grid") state.mode = "heatmap";
  sync();
}

/* Rows: kind x layer; columns: head. The shape is the sentences' model's, widened to any
   head the list names beyond it; a head of the model the list lacks is a blank cell. */
function renderHeads() {
  const box = $("heads");
  box.textContent = "";
  const byKey = new Map(HEAD_LIST.map(h => [headKey(h.kind, h.layer, h.head), h]));
  const rows = [];
  KINDS.forEach((kind, k) => {
    const layers = HEAD_LIST.filter(h => h.kind === kind).reduce((m, h) => Math.max(m, h.layer + 1), state.maps ? state.maps[kind].length : 0);
    for (let layer = 0; layer < layers; layer++) rows.push({ kind, layer, group: k });
  });
  const cols = HEAD_LIST.reduce((m, h) => Math.max(m, h.head + 1), state.maps ? state.maps.heads : 0);
  const from = LIVE ? DATA.head_analysis : null;
  if (from) html("p", {}, box, `qkv heads on ${from.set || "a held-out set"}` + (isNum(from.sentences) ? ` (${from.sentences} sentences)` : "") +
                 (isNum(from.step) ? `, the checkpoint of step ${from.step}` : "") + ` (${from.file}):`);
  html("p", {}, box, `${HEAD_LIST.length} heads: rows are kind \u00d7 layer, columns heads. Colour: ${HEAD_ORDER}` +
       (DATA.default_order || (from && from.default_order) ? ", the default ranking qkv heads chose by its pruning curves" : "") +
       `; in the cell, its role and ${HEAD_ORDER}. Point at a head for its numbers` + (state.maps ? "; click it to open its map below, " +
       "for the sentence chosen there." : "."));
  const left = 150, top = 22, gap = 8, svg = el("svg", { "font-family": "sans-serif" }, box);
  /* cells as wide as the longest role line (measured in the page's own font where it is
     drawn, else 6.6 px a character), a row as tall as its cell of the most lines */
  const probe = el("text", { "font-size": 10, "font-weight": "bold" }, svg);
  const wide = HEAD_LIST.flatMap(h => roleLines(h.role))
    .reduce((w, t) => { probe.textContent = t; return Math.max(w, probe.getComputedTextLength() || 6.6 * t.length); }, 0);
  probe.remove();
  const cw = Math.max(72, Math.ceil(wide) + 12);
  const heights = rows.map(({ kind, layer }) => 22 + 12 * HEAD_LIST.filter(h => h.kind === kind && h.layer === layer)
                                                          .reduce((n, h) => Math.max(n, roleLines(h.role).length), 1));
  const ys = heights.reduce((at, hgt, r) => at.concat(at[r] + hgt + (r + 1 < rows.length && rows[r + 1].group !== rows[r].group ? gap : 0)), [top]);
  const yOf = r => ys[r], bottom = ys[rows.length];
  svg.setAttribute("width", Math.max(left + cols * cw + 10, left + 330));
  svg.setAttribute("height", bottom + 50);
  for (let c = 0; c < cols; c++) el("text", { x: left + c * cw + cw / 2, y: top - 8, "text-anchor": "middle", "font-size": 12 }, svg, `head ${c}`);
  rows.forEach(({ kind, layer }, r) => {
    const y = yOf(r), ch = heights[r];
    el("text", { x: left - 8, y: y + ch / 2 + 4, "text-anchor": "end", "font-size": 12 }, svg, `${KIND_NAMES[kind]}, layer ${layer}`);
    for (let c = 0; c < cols; c++) {
      const h = byKey.get(headKey(kind, layer, c)), x = left + c * cw;
      if (!h) {
        el("rect", { x, y, width: cw - 2, height: ch - 2, fill: "#fff", stroke: "#ddd", class: "hmissing" }, svg);
        continue;
      }
      const chosen = state.kind === kind && state.layer === layer && state.head === c;
      const g = el("g", { class: "hcell" + (chosen ? " chosen" : ""), "data-head": headKey(kind, layer, c) }, svg);
      el("rect", { x, y, width: cw - 2, height: ch - 2, fill: headFill(h), stroke: "#bbb", class: "bg" }, g);
      const ink = isNum(headScore(h)) && impShare(headScore(h)) > 0.55 ? "#fff" : "#222";
      const role = el("text", { x: x + cw / 2 - 1, y: y + 1, "text-anchor": "middle", "font-size": 10, "font-weight": "bold", fill: ink,
                                class: "role" }, g);
      roleLines(h.role).forEach(t => el("tspan", { x: x + cw / 2 - 1, dy: 12 }, role, t));
      el("text", { x: x + cw / 2 - 1, y: y + ch - 9, "text-anchor": "middle", "font-size": 10, fill: ink, class: "score" }, g,
         num(headScore(h)));
      if (chosen) el("rect", { x: x - 1, y: y - 1, width: cw, height: ch, fill: "none", stroke: "#06c", "stroke-width": 3 }, g);
      g.addEventListener("mousemove", ev => showTip(ev, headTip(h)));
      g.addEventListener("mouseleave", hideTip);
      g.addEventListener("click", () => { hideTip(); openHead(h); });
    }
  });
  const defs = el("defs", {}, svg), grad = el("linearGradient", { id: "impscale", x1: 0, y1: 0, x2: 1, y2: 0 }, defs);
  for (let k = 0; k <= 4; k++) el("stop", { offset: `${k * 25}%`, "stop-color": impColour(k / 4) }, grad);
  const ly = bottom + 12;
  el("rect", { x: left, y: ly, width: 200, height: 12, fill: "url(#impscale)", stroke: "#888" }, svg);
  for (let k = 0; k <= 2; k++)
    el("text", { x: left + k * 100, y: ly + 26, "text-anchor": "middle", "font-size": 11 }, svg, num(IMP.lo + (IMP.hi - IMP.lo) * k / 2));
  el("text", { x: left + 210, y: ly + 11, "font-size": 12, fill: "#555", class: "scorename" }, svg, HEAD_ORDER);
}
