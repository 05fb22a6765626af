/* what-if panel: the output. The translation under the changes, word by word with its log p
 * and the change in it; a click on a word forces the translation up to it; with heads off,
 * the translation they change into, the words that changed marked. */

/* the words of b that a word-level alignment with a does not match */
function changedWords(a, b) {
  const n = a.length, m = b.length, L = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const keep = new Set();
  for (let i = 0, j = 0; i < n && j < m;) if (a[i] === b[j]) keep.add(j), i++, j++; else if (L[i + 1][j] >= L[i][j + 1]) i++; else j++;
  return b.map((_, j) => !keep.has(j));
}
function renderOutput(a) {
  const box = $("w-output");
  box.textContent = "";
  html("h3", {}, box, "the output: click a word to force the translation up to it; under each word its log p" + (a.change ? " and the change" : ""));
  const line = html("div", {}, box);
  a.tokens.forEach((t, i) => {
    const w = html("span", { class: "wword" + (a.forced ? " forced" : ""), "data-pos": i }, line);
    html("span", {}, w, t);
    html("span", { class: "d" }, w, a.model.logp[i].toFixed(2) + (a.change ? ` ${a.change[i] >= 0 ? "+" : ""}${a.change[i].toFixed(2)}` : ""));
    if (a.change && Math.abs(a.change[i]) > 1e-4) w.style.borderColor = a.change[i] < 0 ? "#c33" : "#2a9d3a";
    w.addEventListener("click", () => forcePrefix(a.tokens.slice(0, Math.min(i + 1, a.tokens.length - 1))));
  });
  if (a.translation_changed !== undefined) {
    const before = a.target.split(/\s+/).filter(Boolean), after = a.translation_changed.split(/\s+/).filter(Boolean);
    const diff = changedWords(before, after), p = html("div", { id: "w-diff" }, box);
    html("b", {}, p, "with the heads off: ");
    after.forEach((w, j) => html("span", { class: "wword" + (diff[j] ? " diff" : "") }, p, w));
    if (!after.length) html("span", {}, p, "(empty)");
    html("span", { class: "note" }, p, diff.some(Boolean) || after.length !== before.length ? "  (changed words highlighted)" : "  (unchanged)");
  }
}
function forcePrefix(tokens) {
  state.whatif.prefix = piecesText(tokens);
  $("w-prefix").value = state.whatif.prefix;
  return whatif();
}
