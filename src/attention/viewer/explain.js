/* explain: one sentence explained (qkv-explain-1, and the live page's explain pane).
 * state.explained: the explanation shown (qkv explain's page: DATA; the live page: POST
 * /v1/explain's answer), state.explained.maps its sentence's maps. The translation as a row
 * of words, each with its source share (a ring: the last row of state.explained.share) and
 * log p. For the word chosen: a line in plain words, and every method's scores of the source
 * tokens side by side, each column scaled to its largest |score| for that word; the target
 * prefix likewise (the rollout's target columns, the prefix gradients). An attention column
 * opens its cross-attention head's map in the maps pane, on the word's row. */

const FAMILY = { attention: ["#4c78a8", "attention"], contrib: ["#f58518", "contributions"], gradient: ["#54a24b", "gradients"],
                 loo: ["#b279a2", "leave-one-out"] };
const NEGATIVE = "#d62728", SOURCE_INK = "#3b528b", PREFIX_INK = "#e8c07a";
const shareOf = t => state.explained.share[state.explained.share.length - 1][t];
/* the foil is word t itself: f = log p(y) - log p(y) is 0, its gradients rank nothing */
const foilIsWord = t => !!(state.explained.foil_is_word && state.explained.foil_is_word[t]);
const pct = v => `${Math.round(100 * v)}%`;
/* two maps objects of the same sentence and target: the explain pane's heads open the maps
   pane's map only then (the live page's maps may be of the beam's best translation, its
   explanation of the greedy one) */
const sameMaps = (a, b) => a === b || !!a && !!b && a.source.join("\n") === b.source.join("\n") &&
                                        a.target_out.join("\n") === b.target_out.join("\n");

/* the columns the pane opens on: the last layer's head average and shift-att, the rollout,
   the gradients and leave-one-out; every head of every layer on request */
function explainColumns() {
  if (state.every) return state.explained.methods;
  const last = state.explained.maps.cross.length - 1;
  return [`L${last}.avg`, `shift.L${last}`, "contrib.rollout", "saliency", "x-gradient", "x-gradient-l2", "integrated-gradients",
          "leave-one-out"].map(name => state.explained.methods.find(m => m.name === name)).filter(m => m);
}

/* the cross-attention map an attention method reads for word t: L1.H3 is layer 1's head 3,
   L1.avg its head average, shift.L1 that average one row on (the step that reads the word;
   the last row its own); null for any other name */
function methodMap(name, t) {
  const at = /^L(\d+)\.(?:H(\d+)|avg)$/.exec(name), shift = /^shift\.L(\d+)$/.exec(name), XM = state.explained.maps;
  const map = at ? { layer: +at[1], head: at[2] === undefined ? "avg" : +at[2], query: t }
            : shift ? { layer: +shift[1], head: "avg", query: Math.min(t + 1, XM.target_out.length - 1) } : null;
  return map && map.layer < XM.cross.length && (map.head === "avg" || map.head < XM.heads) ? map : null;
}

function methodTip(name) {
  const at = /^L(\d+)\.(?:H(\d+)|avg)$/.exec(name), shift = /^shift\.L(\d+)$/.exec(name);
  if (at) return at[2] === undefined ? `cross-attention of decoder layer ${at[1]}, its heads averaged`
                                     : `cross-attention weight of decoder layer ${at[1]}, head ${at[2]}`;
  if (shift) return `layer ${shift[1]}'s head average one step on: the step that reads the word`;
  return { "contrib.layer": "the last cross-attention layer's contributions",
           "contrib.rollout": "contributions rolled out through every layer: with the prefix's, they sum to 1",
           "saliency": "|gradient| at the token's embedding",
           "x-gradient": "embedding \u00b7 gradient (input \u00d7 gradient), signed: a token against the word ranks last",
           "x-gradient-l2": "|embedding \u00d7 gradient|\u2082: input \u00d7 gradient's magnitude, either way (Inseq's L2 over the embedding)",
           "integrated-gradients": "embedding \u00b7 gradient averaged from a blank embedding to the token's",
           "leave-one-out": "drop in log p when the token is read as <unk>" }[name] || name;
}

/* the maps pane on one cross-attention head, at the query anatomy of row map.query */
function openMap(map) {
  hideTip();
  Object.assign(state, { pane: "maps", kind: "cross", layer: map.layer, head: map.head, query: map.query });
  if (state.mode === "grid") state.mode = "heatmap";
  sync();
}

function chooseWord(t) {
  state.word = t;
  if (state.kind !== "encoder_self") state.query = t; /* the maps pane shows the same row */
  sync();
}

/* a ring: share p of the circle in the source's colour, the rest in the prefix's */
function ring(parent, p) {
  const r = 12, c = 2 * Math.PI * r, svg = el("svg", { width: 32, height: 32 }, parent);
  el("circle", { cx: 16, cy: 16, r, fill: "none", stroke: PREFIX_INK, "stroke-width": 5 }, svg);
  el("circle", { cx: 16, cy: 16, r, fill: "none", stroke: SOURCE_INK, "stroke-width": 5, class: "share",
                 "stroke-dasharray": `${(p * c).toFixed(2)} ${c.toFixed(2)}`, transform: "rotate(-90 16 16)" }, svg);
  el("text", { x: 16, y: 20, "text-anchor": "middle", "font-size": 10 }, svg, String(Math.round(100 * p)));
}

/* rows: [{label, muted}]; columns: [{name, colour, values (one a row), tip, open}]. Each
   column is scaled to its largest |value| over the rows not muted (the source's EOS, which
   no method ranks); a column with a negative value draws from a middle axis, negatives to
   the left in red. The outlined cell is the token the column ranks first. */
function barTable(parent, cls, rows, columns) {
  const table = html("table", { class: `xt ${cls}` }, parent), head = html("tr", {}, table);
  html("th", { style: "border-top-color:transparent" }, head);
  for (const c of columns) {
    const th = html("th", { style: `border-top-color:${c.colour}`, title: c.tip, "data-method": c.name }, head);
    const name = c.open ? html("a", { href: "#", class: "xmap" }, th) : th;
    c.name.split(/(?<=[.-])/).forEach((part, k) => { if (k) html("wbr", {}, name); name.append(part); }); /* breaks after . and - */
    if (c.open) name.addEventListener("click", ev => { ev.preventDefault(); c.open(); });
  }
  const counted = (v, i) => !rows[i].muted && isNum(v);
  const scale = columns.map(c => {
    const kept = c.values.filter(counted), top = Math.max(0, ...kept.map(Math.abs));
    let best = -1;
    c.values.forEach((v, i) => { if (counted(v, i) && (best < 0 || v > c.values[best])) best = i; });
    return { top, best: top > 0 ? best : -1, signed: kept.some(v => v < 0) };
  });
  rows.forEach((r, i) => {
    const tr = html("tr", { class: r.muted ? "muted" : "" }, table);
    html("td", { class: "tok" }, tr, r.label);
    columns.forEach((c, k) => {
      const v = c.values[i], { top, best, signed } = scale[k];
      const w = (signed ? 50 : 100) * (isNum(v) && top > 0 ? Math.min(1, Math.abs(v) / top) : 0);
      const box = html("div", { class: "xbox" + (i === best ? " top" : "") + (c.open ? " link" : "") }, html("td", {}, tr));
      if (signed) html("div", { class: "axis" }, box);
      html("div", { class: "xbar", style: `left:${signed ? (v < 0 ? 50 - w : 50) : 0}%;width:${w}%;background:${v < 0 ? NEGATIVE : c.colour}` }, box);
      const say = `${c.name}, '${r.label}': ${num(v)}` + (isNum(v) && top > 0 ? ` (${Math.round(100 * v / top)}% of the column's largest |score|)` : "") +
                  (i === best ? "\nthe column's first-ranked token" : "") + (r.muted ? "\nthe source's end: no method ranks it" : "") +
                  (c.open ? "\nclick: this head's map, on the word's row" : "");
      box.addEventListener("mousemove", ev => showTip(ev, say));
      box.addEventListener("mouseleave", hideTip);
      if (c.open) box.addEventListener("click", c.open);
    });
  });
  return table;
}

function renderExplain() {
  const XM = state.explained.maps, S = XM.source.length, T = XM.target_out.length, t = Math.min(state.word, T - 1), word = XM.target_out[t];
  const words = $("xwords");
  words.textContent = "";
  XM.target_out.forEach((w, i) => {
    const b = html("div", { class: "xword" + (i === t ? " chosen" : ""), "data-word": i }, words);
    html("span", { class: "w" }, b, w);
    ring(b, Math.min(Math.max(shareOf(i), 0), 1));
    html("span", { class: "lp" }, b, `log p ${state.explained.logp[i].toFixed(2)}`);
    b.addEventListener("mousemove", ev => showTip(ev, `'${w}': source share ${shareOf(i).toFixed(3)}\n` +
                                                      `log p ${state.explained.logp[i].toFixed(3)} (p ${Math.exp(state.explained.logp[i]).toFixed(3)})\n` +
                                                      (foilIsWord(i) ? "the foil itself: the gradients rank nothing for it\n" : "") +
                                                      "click: where it came from"));
    b.addEventListener("mouseleave", hideTip);
    b.addEventListener("click", () => { hideTip(); chooseWord(i); });
  });

  const say = $("xsay"), share = shareOf(t), prefix = XM.target_in.slice(0, t + 1);
  say.textContent = "";
  const first = html("div", {}, say);
  html("b", {}, first, `'${word}'`);
  first.append(` (log p ${state.explained.logp[t].toFixed(3)}, p ${Math.exp(state.explained.logp[t]).toFixed(2)}): source share ${share.toFixed(2)}. ` +
               `${pct(share)} of what the decoder used for this word came from the source, the rest (${pct(1 - share)}) from ` +
               `the words it already wrote (${prefix.join(" ")}). `);
  const mix = html("span", { class: "mix", title: `source ${pct(share)}, prefix ${pct(1 - share)}` }, first);
  html("span", { style: `width:${100 * share}%;background:${SOURCE_INK}` }, mix);
  html("span", { style: `width:${100 * (1 - share)}%;background:${PREFIX_INK}` }, mix);
  html("div", {}, say, `Source share after each decoder layer: ${state.explained.share.map(row => row[t].toFixed(2)).join(" \u2192 ")} ` +
       "(what each input gives the word's vector, traced back through every attention layer and rolled out).");
  const explained = state.explained.foil ? `log p('${word}') \u2212 log p('${state.explained.foil}'): why this word and not '${state.explained.foil}'` : `log p('${word}')`;
  const gap = state.explained.f[t] - state.explained.f_base[t], err = state.explained.ig_error[t];
  if (foilIsWord(t))
    html("div", { class: "foilword" }, say, `The gradients explain ${explained}; but '${state.explained.foil}' is this word itself: ` +
         "the difference is 0 whatever the input, so the gradient columns rank nothing for it (every score 0).");
  else html("div", {}, say, `The gradients explain ${explained}. ` + (state.explained.ig_steps > 0 && isNum(err)
    ? `Integrated gradients (${state.explained.ig_steps} steps) should add up to its change from a blank input, ${num(gap)}; ` +
      `their completeness error ${num(Math.abs(err))}` + (gap !== 0 ? ` (${pct(Math.abs(err / gap))} of it)` : "") +
      " says how far to trust their column: the smaller, the better."
    : "Integrated gradients were not computed (--ig-steps 0)."));

  const columns = explainColumns().map(m => {
    const map = m.family === "attention" && sameMaps(state.explained.maps, state.maps) ? methodMap(m.name, t) : null;
    return { name: m.name, colour: (FAMILY[m.family] || ["#888"])[0], values: m.scores[t], tip: methodTip(m.name),
             open: map ? () => openMap(map) : null };
  });
  const src = $("xsource");
  src.textContent = "";
  html("h3", {}, src, `source tokens behind '${word}'`);
  barTable(src, state.every ? "xsrc every" : "xsrc", XM.source.map((w, j) => ({ label: w, muted: j === S - 1 })), columns);
  const pre = $("xprefix");
  pre.textContent = "";
  html("h3", {}, pre, `the words already written, behind '${word}'`);
  barTable(pre, "xpre", prefix.map(w => ({ label: w, muted: false })),
           [{ name: "contrib.rollout", colour: FAMILY.contrib[0], values: state.explained.rollout[t].slice(S, S + t + 1),
              tip: "the prefix's part of the rolled-out contributions: with the source's, they sum to 1" }]
             .concat(state.explained.prefix.map(m => ({ name: m.name, colour: FAMILY.gradient[0], values: m.scores[t].slice(0, t + 1),
                                             tip: methodTip(m.name) }))));
  html("p", { class: "note" }, pre, `together ${pct(1 - share)} of the word (rollout)`);

  renderSummary();
  const key = $("xkey");
  key.textContent = "Each column is scaled to its largest |score| for this word; red bars are negative (they speak against " +
                    "the word); the outlined cell is the token the column ranks first. Point at a bar for its number. A blue " +
                    "method name is an attention head: a click opens its map in the maps pane, on this word's row. Colours:";
  for (const f of Object.keys(FAMILY)) {
    html("span", { class: "key", style: `background:${FAMILY[f][0]}` }, key);
    key.append(FAMILY[f][1]);
  }
}
