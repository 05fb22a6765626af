/* the watch view's charts as drawn: every label inside its SVG, the y ticks at a round step */
addEventListener("load", () => setTimeout(() => {
  const wrong = [], svg = document.querySelector("#curves svg"), all = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll("text")) {
    const b = t.getBoundingClientRect();
    if (b.left < all.left - 0.5 || b.right > all.right + 0.5) wrong.push(`'${t.textContent}' leaves the SVG`);
  }
  for (const g of svg.querySelectorAll(":scope > g")) {
    const ticks = [...g.querySelectorAll('text[text-anchor="end"]')].map(t => +t.textContent).filter(Number.isFinite);
    const step = ticks[1] - ticks[0], mag = Math.pow(10, Math.floor(Math.log10(step) + 1e-9)), f = Math.round(step / mag * 1e6) / 1e6;
    if (![1, 2, 5].includes(f) || ticks.some((v, i) => i && Math.abs(v - ticks[i - 1] - step) > step * 1e-6))
      wrong.push(`ticks ${ticks.join(" ")}`);
  }
  document.body.setAttribute("data-pictures", wrong.length ? wrong.slice(0, 4).join("; ") : "ok");
}, 0));
