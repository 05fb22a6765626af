// Every text of every picture on the page, measured as Chromium lays it out: inside its
// picture, apart from the other texts and off the lines. A picture is an <svg> that is not
// inside another; it is named by the nearest data-name above it (the file it came from),
// else its id, else the id of what holds it, else its place on the page. svgFitFaults()
// returns one line per fault, [] when every text fits; hidden pictures and texts (no box)
// are not measured, and svgFitFaults.pictures and .texts count those that were.
//
// A text's box is its glyph box (getBBox) less the part of the em box that holds no ink (the
// space above the capitals and below the descenders), turned as the text is turned: a
// column label at 60 degrees is a slanted box, not the upright box around it. Two boxes
// meet when no axis separates them. A line is a <line>, <polyline>, <polygon> or <path>
// with a stroke, a path followed along its length, and it counts where it is seen: not
// where a filled shape painted after it hides it (a legend's white box). Coordinates are
// the window's, read with getScreenCTM.
function svgFitFaults(doc, where) {
  doc = doc || document;
  where = where || "";
  const faults = [], style = (e) => doc.defaultView.getComputedStyle(e);
  doc.querySelectorAll("iframe").forEach((f, i) => {
    if (f.contentDocument && f.getClientRects().length)
      faults.push(...svgFitFaults(f.contentDocument, where + (f.id || "frame " + (i + 1)) + ": "));
  });
  const pictures = [...doc.querySelectorAll("svg")].filter((s) => !s.parentElement.closest("svg"));
  pictures.forEach((svg, index) => {
    svg.scrollIntoView(); // elementsFromPoint sees the window only
    [pointed.x0, pointed.y0] = [doc.defaultView.scrollX, doc.defaultView.scrollY];
    const frame = svg.getBoundingClientRect();
    if (frame.width === 0 || frame.height === 0) return;
    svgFitFaults.pictures = (svgFitFaults.pictures || 0) + 1;
    const named = svg.closest("[data-name]"), held = svg.parentElement.closest("[id]");
    const name = where + (named ? named.dataset.name : svg.id || (held ? "#" + held.id : "picture " + (index + 1)));
    const texts = [];
    svg.querySelectorAll("text").forEach((t) => {
      const words = t.textContent.trim();
      if (!words || t.getClientRects().length === 0 || style(t).visibility === "hidden") return;
      const b = t.getBBox(), m = t.getScreenCTM();
      if (b.width === 0 || b.height === 0) return;
      const x0 = b.x + 0.5, x1 = b.x + b.width - 0.5, y0 = b.y + b.height * 0.16, y1 = b.y + b.height * 0.9;
      const corners = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]].map(([x, y]) => new DOMPoint(x, y).matrixTransform(m));
      texts.push({ words, corners });
    });
    svgFitFaults.texts = (svgFitFaults.texts || 0) + texts.length;
    const quote = (t) => JSON.stringify(t.words.length > 40 ? t.words.slice(0, 40) + "…" : t.words);
    for (const t of texts) {
      const out = Math.max(...t.corners.map((p) => Math.max(frame.left - p.x, p.x - frame.right, frame.top - p.y, p.y - frame.bottom)));
      if (out > 0.5) faults.push(`${name}: ${quote(t)} is cut by the picture's edge (${out.toFixed(1)} px out)`);
    }
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++)
        if (meet(texts[i].corners, texts[j].corners, 0.5)) faults.push(`${name}: ${quote(texts[i])} lies over ${quote(texts[j])}`);
    for (const [kind, points, line] of strokes(svg, style))
      for (const t of texts)
        for (let k = 1; k < points.length; k++)
          if (meet([points[k - 1], points[k]], t.corners, 0) && !covered(doc, line, points[k - 1], points[k], t.corners)) {
            faults.push(`${name}: a ${kind} runs through ${quote(t)}`);
            break;
          }
  });
  return faults;
}

// [kind, [{x, y}...], element] for each stroked line of the picture, in the window's coordinates
function strokes(svg, style) {
  const out = [];
  svg.querySelectorAll("line, polyline, polygon, path").forEach((e) => {
    const s = style(e);
    if (s.stroke === "none" || parseFloat(s.strokeWidth) === 0 || s.visibility === "hidden") return;
    if (e.getClientRects().length === 0 || parseFloat(s.strokeOpacity) === 0) return;
    const m = e.getScreenCTM(), at = (x, y) => new DOMPoint(x, y).matrixTransform(m);
    let points = [];
    const tag = e.tagName.toLowerCase();
    if (tag === "line") {
      const v = (a) => e[a].baseVal.value;
      points = [at(v("x1"), v("y1")), at(v("x2"), v("y2"))];
    } else if (tag === "path") {
      const length = e.getTotalLength(), n = Math.min(400, Math.max(2, Math.ceil(length / 2)));
      for (let i = 0; i <= n; i++) {
        const p = e.getPointAtLength((length * i) / n);
        points.push(at(p.x, p.y));
      }
    } else {
      points = [...e.points].map((p) => at(p.x, p.y));
      if (tag === "polygon" && points.length) points.push(points[0]);
    }
    out.push([tag === "path" ? "path" : "line", points, e]);
  });
  return out;
}

// whether two convex shapes (points in order: a segment, or a box's four corners) overlap by
// by at least `by` pixels along every axis that could separate them (their edges' normals)
function meet(a, b, by) {
  for (const shape of [a, b])
    for (let i = 0; i < shape.length; i++) {
      const p = shape[i], q = shape[(i + 1) % shape.length], len = Math.hypot(q.x - p.x, q.y - p.y);
      if (len === 0) continue;
      const nx = (p.y - q.y) / len, ny = (q.x - p.x) / len;
      const span = (s) => s.reduce(([lo, hi], v) => [Math.min(lo, v.x * nx + v.y * ny), Math.max(hi, v.x * nx + v.y * ny)], [Infinity, -Infinity]);
      const [alo, ahi] = span(a), [blo, bhi] = span(b);
      if (Math.min(ahi, bhi) - Math.max(alo, blo) < by) return false;
    }
  return true;
}

// what lies at the point `at` (the window's coordinates when the picture was measured),
// top first: the window scrolled to it where it lies outside (a picture taller or wider
// than the window), and back
function pointed(doc, at) {
  const view = doc.defaultView, x = at.x - (view.scrollX - pointed.x0), y = at.y - (view.scrollY - pointed.y0);
  if (x >= 0 && y >= 0 && x < view.innerWidth && y < view.innerHeight) return doc.elementsFromPoint(x, y);
  const back = [view.scrollX, view.scrollY];
  view.scrollTo(pointed.x0 + at.x - view.innerWidth / 2, pointed.y0 + at.y - view.innerHeight / 2);
  const stack = doc.elementsFromPoint(at.x - (view.scrollX - pointed.x0), at.y - (view.scrollY - pointed.y0));
  view.scrollTo(back[0], back[1]);
  return stack;
}

// whether point p lies inside the convex box (four corners in order)
function inside(p, box) {
  let sign = 0;
  for (let i = 0; i < 4; i++) {
    const a = box[i], b = box[(i + 1) % 4], c = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
    if (c !== 0 && sign !== 0 && Math.sign(c) !== sign) return false;
    if (c !== 0) sign = Math.sign(c);
  }
  return true;
}

// whether the part of the segment p-q inside the box is hidden under something opaque
// painted after the line: at every point of it, a pixel apart, where the line is hit, a
// filled shape other than a text lies above it
function covered(doc, line, p, q, box) {
  let within = 0, seen = 0;
  const n = Math.min(4000, Math.ceil(Math.hypot(q.x - p.x, q.y - p.y))); // a point each pixel
  for (let i = 0; i <= n; i++) {
    const at = { x: p.x + ((q.x - p.x) * i) / n, y: p.y + ((q.y - p.y) * i) / n };
    if (!inside(at, box)) continue;
    within++;
    const stack = pointed(doc, at), under = stack.indexOf(line);
    if (under < 0) continue; // not hit here (a dash's gap, or off by rounding): the next point
    const above = stack.slice(0, under).some((e) => {
      if (!(e instanceof doc.defaultView.SVGGeometryElement) || e.tagName.toLowerCase() === "line") return false;
      const s = doc.defaultView.getComputedStyle(e);
      return s.fill !== "none" && parseFloat(s.fillOpacity) >= 0.9 && parseFloat(s.opacity) >= 0.9;
    });
    if (!above) return false;
    seen++;
  }
  return within === 0 || seen > 0; // no point within: it grazes a corner by less than a pixel
}
