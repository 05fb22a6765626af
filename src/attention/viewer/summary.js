/* summary: the explain pane's table of every word.
 *
 * Every word at once, as qkv explain --text prints it: its log p, its source share, and the
 * source token four methods rank first (the last layer's head average, the rollout,
 * integrated gradients, leave-one-out) with its score; a click on a row chooses the word. */
const SUMMARY = last => [`L${last}.avg`, "contrib.rollout", "integrated-gradients", "leave-one-out"];
/* the source position row ranks first, the EOS column left out; -1 where it ranks nothing
   (every score the same: gradients not computed, or of an f that is 0) */
function topSource(row, S) {
  let best = -1, flat = true;
  for (let j = 0; j + 1 < S; j++) {
    if (best < 0 || row[j] > row[best]) best = j;
    flat = flat && row[j] === row[0];
  }
  return flat ? -1 : best;
}
function summaryCell(name, t) {
  const m = state.explained.methods.find(m => m.name === name), j = m ? topSource(m.scores[t], state.explained.maps.source.length) : -1;
  if (m && m.family === "gradient" && foilIsWord(t)) return "\u2013 (the foil)";
  return j < 0 ? "\u2013" : `${state.explained.maps.source[j]} ${m.scores[t][j].toFixed(2)}`;
}
function renderSummary() {
  const XM = state.explained.maps, last = XM.cross.length - 1, box = $("xsummary");
  box.textContent = "";
  html("h3", {}, box, "every word: its source share, and the source token each method ranks first (with its score)");
  const table = html("table", { class: "wt xsum" }, box), head = html("tr", {}, table);
  ["target", "log p", "share"].concat(SUMMARY(last)).forEach(h => html("th", { title: methodTip(h) }, head, h));
  XM.target_out.forEach((w, t) => {
    const tr = html("tr", { class: t === Math.min(state.word, XM.target_out.length - 1) ? "chosen" : "", "data-word": t }, table);
    [w, state.explained.logp[t].toFixed(3), shareOf(t).toFixed(2)].concat(SUMMARY(last).map(name => summaryCell(name, t)))
      .forEach(v => html("td", {}, tr, v));
    tr.addEventListener("click", () => chooseWord(t));
  });
}
