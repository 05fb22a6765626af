/* what-if panel: the pinned step. The next-token distribution at the step whose query was
 * pinned, as trained and pinned side by side. */
function renderPin(a) {
  const box = $("w-pin");
  box.textContent = "";
  if (!state.whatif.pin || !a.changed) return;
  const q = state.whatif.pin.query;
  html("h3", {}, box, `pinned: cross-attention layer ${state.whatif.pin.layer}, head ${state.whatif.pin.head}, step ${q} (${a.tokens[q] || ""}) onto source ` +
       `${state.whatif.pin.key} (${state.maps && state.maps.source[state.whatif.pin.key] || ""}): the next-token distribution at that step, before and after`);
  const t = html("table", { class: "wt" }, box), head = html("tr", {}, t);
  html("th", {}, head, "as trained"), html("th", {}, head, ""), html("th", {}, head, "pinned"), html("th", {}, head, "");
  const before = a.model.top[q] || [], after = a.changed.top[q] || [];
  for (let i = 0; i < Math.max(before.length, after.length); i++) {
    const tr = html("tr", {}, t);
    [[before[i], ""], [after[i], " after"]].forEach(([c, cls]) => {
      html("td", {}, tr, c ? c.token : "");
      const td = html("td", {}, tr);
      if (c) { html("span", { class: "pbar" + cls, style: `width:${Math.round(120 * Math.exp(c.logp))}px` }, td); html("span", {}, td, Math.exp(c.logp).toFixed(3)); }
    });
  }
  html("div", { class: "note" }, box, `entropy ${a.model.entropy[q].toFixed(3)} \u2192 ${a.changed.entropy[q].toFixed(3)} nats; ` +
       `log p of "${a.tokens[q]}" ${a.model.logp[q].toFixed(3)} \u2192 ${a.changed.logp[q].toFixed(3)}`);
}
