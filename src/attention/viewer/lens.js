/* what-if panel: the logit lens, each decoder layer's top token at each position. */
function renderLens(a) {
  const box = $("w-lens"), now = a.changed || a.model;
  box.textContent = "";
  if (!now.lens) return;
  html("h3", {}, box, "logit lens: what each decoder layer's stream would predict at each position (its top token; shade: its p)");
  const t = html("table", { class: "wt", id: "w-lens-table" }, box), head = html("tr", {}, t);
  html("th", {}, head, "layer");
  a.tokens.forEach(w => html("th", {}, head, w));
  now.lens.forEach((row, l) => {
    const tr = html("tr", {}, t);
    html("td", {}, tr, `layer ${l}`);
    row.forEach(c => {
      const p = Math.exp(c.top_logp), td = html("td", {}, tr, c.top);
      td.style.background = `rgba(59,82,139,${(0.1 + 0.8 * p).toFixed(2)})`;
      if (p > 0.5) td.style.color = "#fff";
      td.title = `top p ${p.toFixed(3)}; the word's p ${Math.exp(c.word_logp).toFixed(3)}`;
    });
  });
}
