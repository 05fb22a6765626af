/* what-if panel: every step of the translation, its log p, entropy and top next tokens. */
function renderSteps(a) {
  const box = $("w-steps"), now = a.changed || a.model;
  box.textContent = "";
  html("h3", {}, box, "every step: the word, its log p, the entropy and the top next tokens" + (a.changed ? " (the changed model)" : ""));
  const t = html("table", { class: "wt", id: "w-steps-table" }, box), head = html("tr", {}, t);
  ["step", "word", "log p", "entropy", "top next tokens (p)"].forEach(h => html("th", {}, head, h));
  a.tokens.forEach((w, i) => {
    const tr = html("tr", {}, t);
    html("td", {}, tr, String(i)), html("td", {}, tr, w), html("td", {}, tr, now.logp[i].toFixed(3)), html("td", {}, tr, now.entropy[i].toFixed(3));
    html("td", {}, tr, now.top[i].map(c => `${c.token} ${Math.exp(c.logp).toFixed(2)}`).join("  "));
  });
}
