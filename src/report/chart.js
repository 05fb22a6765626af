"use strict";
for (const svg of document.querySelectorAll("svg.chart")) {
  const x0 = +svg.dataset.x0, x1 = +svg.dataset.x1, left = +svg.dataset.left, width = +svg.dataset.width;
  const lines = [...svg.querySelectorAll("polyline")].map(p => ({ label: p.dataset.label,
    steps: p.dataset.steps.split(" ").map(Number), values: p.dataset.values.split(" ").map(Number) }));
  const tip = document.getElementById("charttip"), cursor = svg.querySelector(".cursor");
  svg.addEventListener("mousemove", ev => {
    const box = svg.getBoundingClientRect(), px = ev.clientX - box.left;
    const step = x0 + (px - left) / width * (x1 - x0);
    const rows = [];
    for (const l of lines) {
      let best = 0;
      l.steps.forEach((s, i) => { if (Math.abs(s - step) < Math.abs(l.steps[best] - step)) best = i; });
      rows.push(`${l.label}: ${l.values[best]} (step ${l.steps[best]})`);
    }
    if (!rows.length || px < left || px > left + width) { tip.style.display = "none"; return; }
    cursor.setAttribute("x1", px), cursor.setAttribute("x2", px), cursor.setAttribute("visibility", "visible");
    tip.textContent = rows.join("\n");
    tip.style.left = ev.clientX + 14 + "px", tip.style.top = ev.clientY + 10 + "px", tip.style.display = "block";
  });
  svg.addEventListener("mouseleave", () => { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); });
}
