/* common: what every panel uses: a maps object's numbers, colours, the source line, SVG and
 * HTML elements, the tooltip, menus, number formats. */
const SVG = "http://www.w3.org/2000/svg";
const $ = id => document.getElementById(id);

/* ---- the numbers --------------------------------------------------------------------- */

function labels(kind) {
  if (kind === "encoder_self") return { rows: state.maps.source, cols: state.maps.source };
  if (kind === "decoder_self") return { rows: state.maps.target_out, cols: state.maps.target_in };
  return { rows: state.maps.target_out, cols: state.maps.source };
}
const arrayName = (kind, value) => value === "weights" ? kind : `${kind}_${value}`;
/* one head's matrix, or the head average (null where every head is null: masked) */
function matrix(kind, layer, head, value) {
  const maps = state.maps[arrayName(kind, value || "weights")][layer];
  if (head !== "avg") return maps[head];
  return maps[0].map((row, i) => row.map((v, j) => v === null ? null : maps.reduce((s, m) => s + m[i][j], 0) / maps.length));
}
const headOf = () => state.head === "avg" ? 0 : state.head;
function range(m) {
  let lo = Infinity, hi = -Infinity;
  m.forEach(row => row.forEach(v => { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }));
  if (state.value === "weights") return [0, 1];
  if (state.value === "contrib") lo = 0;
  return hi > lo ? [lo, hi] : [lo, lo + 1];
}
const fmt = v => v === null ? "masked" : Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3);

function colour(p) {
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = Math.min(Math.max(p, 0), 1) * 4, i = Math.min(Math.floor(x), 3), f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/* A source word the model read as <unk> (its position in "source_unk", which qkv serve's
   answers carry) keeps the text's own word as its label, marked: every view then says that
   the model never saw it. Once per maps object. */
const UNK_MARK = " (<unk>)";
function markUnknown(M, positions) {
  if (!M || M.unknown || !Array.isArray(positions)) return;
  M.unknown = positions.filter(j => Number.isInteger(j) && j >= 0 && j < M.source.length - 1);
  M.unknown.forEach(j => { M.source[j] += UNK_MARK; });
}
/* the source line: the words, those read as <unk> in red, and a note naming them */
function showSource() {
  const box = $("src"), unknown = state.maps.unknown || [];
  box.textContent = "";
  state.maps.source.slice(0, -1).forEach((w, j) => {
    if (j) box.append(" ");
    if (!unknown.includes(j)) return box.append(w);
    html("span", { class: "unk", title: "not in the source vocabulary: the model read this word as <unk>" }, box, w);
  });
  $("src-unk").textContent = unknown.length ? `(not in the source vocabulary, read as <unk>: ${unknownWords(state.maps)})` : "";
}
/* the words of M read as <unk>, quoted, as the text has them; "" for none */
const unknownWords = M => (M.unknown || []).map(j => `'${M.source[j].slice(0, -UNK_MARK.length)}'`).join(", ");

/* ---- drawing helpers ------------------------------------------------------------------- */

function el(name, attrs, parent, text) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function html(name, attrs, parent, text) {
  const e = document.createElement(name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
/* ---- texts that fit: a picture's words inside it, apart from each other and off its lines ---- */
/* a text's drawn width in px, measured where the page lays it out (an estimate where it is
   not laid out: a hidden panel) */
function textWidth(t) {
  const w = t.getComputedTextLength();
  return w > 0 ? w : t.textContent.length * 0.62 * parseFloat(t.getAttribute("font-size") || 12);
}
/* the text t cut with an ellipsis to at most max px; the whole words in the tooltip */
function fitText(t, max) {
  const whole = t.textContent;
  if (textWidth(t) <= max) return t;
  for (let n = whole.length - 1; n >= 1; n--) {
    t.textContent = whole.slice(0, n) + "\u2026";
    if (textWidth(t) <= max) break;
  }
  t.addEventListener("mousemove", ev => showTip(ev, whole));
  t.addEventListener("mouseleave", hideTip);
  return t;
}
/* Labels beside points: for each {x, y, w, h} (a point and its label's size), the top-left
   corner of a box beside the point that lies inside `bounds` ({x0, y0, x1, y1}) and clear of
   the boxes already placed and of `keepOff` (boxes {x0, y0, x1, y1}: the markers). Tried
   right, left, above, below, then the corners, at growing distances; where nothing is clear,
   the first place inside the bounds. */
function placeLabels(items, keepOff, bounds) {
  const taken = keepOff.slice();
  const inside = b => b.x0 >= bounds.x0 && b.y0 >= bounds.y0 && b.x1 <= bounds.x1 && b.y1 <= bounds.y1;
  const clear = b => inside(b) && taken.every(o => b.x1 <= o.x0 || b.x0 >= o.x1 || b.y1 <= o.y0 || b.y0 >= o.y1);
  return items.map(({ x, y, w, h }) => {
    let fallback = null, chosen = null;
    for (const r of [8, 16, 28, 44, 64]) {
      const spots = [[x + r, y - h / 2], [x - r - w, y - h / 2], [x - w / 2, y - r - h], [x - w / 2, y + r],
                     [x + r * 0.7, y - r * 0.7 - h], [x - r * 0.7 - w, y - r * 0.7 - h], [x + r * 0.7, y + r * 0.7], [x - r * 0.7 - w, y + r * 0.7]];
      for (const [bx, by] of spots) {
        const b = { x0: bx, y0: by, x1: bx + w, y1: by + h };
        if (!fallback && inside(b)) fallback = b;
        if (clear(b)) { chosen = b; break; }
      }
      if (chosen) break;
    }
    chosen = chosen || fallback || { x0: x + 8, y0: y - h / 2, x1: x + 8 + w, y1: y + h / 2 };
    taken.push(chosen);
    return chosen;
  });
}

function showTip(ev, text) {
  const tip = $("tip");
  tip.textContent = text;
  tip.style.display = "block";
  tip.style.left = ev.clientX + 12 + "px";
  tip.style.top = ev.clientY + 12 + "px";
}
function hideTip() { $("tip").style.display = "none"; }

/* the three kinds of attention, each a field of a maps object, and their names; a head's key */
const KINDS = ["encoder_self", "decoder_self", "cross"];
const KIND_NAMES = { encoder_self: "encoder self", decoder_self: "decoder self", cross: "cross" };
const headKey = (kind, layer, head) => `${kind}/${layer}/${head}`;
const isNum = v => typeof v === "number" && isFinite(v);
const num = v => !isNum(v) ? "\u2013" : v === 0 ? "0" : Math.abs(v) >= 1000 || Math.abs(v) < 0.001 ? v.toExponential(2)
                                                  : String(parseFloat(v.toPrecision(3)));

function fillSelect(sel, values, names) {
  sel.textContent = "";
  values.forEach((v, i) => { const o = document.createElement("option"); o.value = v; o.textContent = names[i]; sel.appendChild(o); });
}
