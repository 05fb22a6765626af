"use strict";
/* The viewer page's checks, kept out of the page a user gets: the tests add this script to a
 * copy of a page (tests/lib.sh: with_script; for qkv serve's live page, the little proxy
 * tests/selftest_proxy.py) and open it with #selftest, #selftest-live or #selftest-whatif in
 * the address. The checks drive the controls as a user would and write their verdict, JSON,
 * into the element pre#selftest, which the suites read from Chromium's --dump-dom. They run after
 * the page's own script, and read the page's state and functions by name. */
(() => {
  const out = document.createElement("pre");
  out.id = "selftest";
  out.style.display = "none";
  document.body.appendChild(out);
})();

/* The heads view's part of #selftest: the grid has one cell per head of the model, coloured
 * by importance and labelled with its role; pointing at a cell tells its numbers; a click
 * opens that head in the controls and the map panel, from the all-heads view too; another
 * sentence keeps the head and shows its maps. Clicks go through act(), into checks. */
function selftestHeads(act, choose, checks, initial) {
  const cellOf = h => document.querySelector(`#heads .hcell[data-head="${headKey(h.kind, h.layer, h.head)}"]`);
  const clickCell = h => () => cellOf(h).dispatchEvent(new MouseEvent("click", { bubbles: true }));
  const cells = [...document.querySelectorAll("#heads .hcell")], keys = new Set(cells.map(c => c.getAttribute("data-head")));
  const modelKeys = KINDS.flatMap(k => state.maps[k].flatMap((_, l) => [...Array(state.maps.heads).keys()].map(h => headKey(k, l, h))));
  const r = { cells: cells.length, modelHeads: modelKeys.length, listed: DATA.heads.length };
  r.oneCellPerHead = cells.length === modelKeys.length && keys.size === cells.length && DATA.heads.length === cells.length &&
                     modelKeys.every(k => keys.has(k));
  const fills = cells.map(c => c.querySelector("rect.bg").getAttribute("fill"));
  r.colouredByImportance = DATA.heads.every(h => cellOf(h) && cellOf(h).querySelector("rect.bg").getAttribute("fill") === headFill(h)) &&
                           new Set(fills).size > 1 && document.querySelector("#heads linearGradient#impscale stop") !== null;
  /* the score is the file's default order, named under the scale, and rank 1 has the highest */
  const ranked = DATA.heads.filter(h => isNum(h.rank) && isNum(headScore(h)));
  r.colouredByDefaultOrder = (!DATA.default_order || HEAD_ORDER === DATA.default_order) &&
                             document.querySelector("#heads text.scorename").textContent === HEAD_ORDER &&
                             ranked.every(h => h.rank !== 1 || ranked.every(o => headScore(o) <= headScore(h)));
  /* the whole role in the cell, its lines inside the cell's box and above the score */
  const inside = (a, b) => a.x >= b.x && a.x + a.width <= b.x + b.width && a.y >= b.y && a.y + a.height <= b.y + b.height;
  r.labelledWithRole = DATA.heads.every(h => {
    const c = cellOf(h), text = c && c.querySelector("text.role"), bg = c && c.querySelector("rect.bg");
    if (!text || text.textContent !== (h.role || "\u2013")) return false;
    const box = bg.getBBox(), tb = text.getBBox(), sb = c.querySelector("text.score").getBBox();
    return inside(tb, box) && inside(sb, box) && tb.y + tb.height <= sb.y + 1;
  });
  const box = $("heads").getBoundingClientRect();
  r.gridAboveMaps = box.height > 0 && box.bottom <= $("view").getBoundingClientRect().top;
  const top = topHead();
  r.opensOnTopHead = initial.kind === top.kind && initial.layer === top.layer && initial.head === top.head;
  r.tooltip = DATA.heads.every(h => { /* pointing at each cell: its tooltip names the head and every number of it */
    cellOf(h).dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 20, clientY: 20 }));
    const tip = $("tip").textContent, shown = $("tip").style.display === "block", p = positional(h);
    cellOf(h).dispatchEvent(new MouseEvent("mouseleave"));
    return shown && $("tip").style.display === "none" && tip.includes(`layer ${h.layer}, head ${h.head}`) && (!h.role || tip.includes(h.role)) &&
           [h.importance, h.importance_raw, h.delta_nll, h.confidence, h.entropy, h.rare, h.sink, h.aer, p.previous, p.current, p.next]
             .every(v => !isNum(v) || tip.includes(num(v))) && (!Array.isArray(h.roles) || h.roles.every(x => tip.includes(x)));
  });
  /* what the map panel draws, and what it would draw for head h of sentence M */
  const panel = () => [...$("view").querySelectorAll("rect.cell")].map(e => e.getAttribute("fill")).join(" ");
  const fillsOf = (M, h, head) => {
    const saved = state.maps;
    state.maps = M;
    try {
      const m = matrix(h.kind, h.layer, head, state.value), [lo, hi] = range(m);
      return m.flat().map(v => v === null ? "#ddd" : colour((v - lo) / (hi - lo))).join(" ");
    } finally { state.maps = saved; }
  };
  const shows = (M, h) => state.mode === "heatmap" && state.maps === M && panel() === fillsOf(M, h, h.head) && panel() !== fillsOf(M, h, "avg");
  const selected = h => state.kind === h.kind && state.layer === h.layer && state.head === h.head && $("kind").value === h.kind &&
                        $("layer").value === String(h.layer) && $("head").value === String(h.head) &&
                        cellOf(h).classList.contains("chosen") && document.querySelectorAll("#heads .hcell.chosen").length === 1;
  const fits = h => h.layer < state.maps[h.kind].length && h.head < state.maps.heads;
  const a = DATA.heads.find(h => fits(h) && h.kind !== state.kind && h.head !== state.head) || DATA.heads.find(fits);
  const b = DATA.heads.find(h => fits(h) && h.kind !== a.kind && h.kind !== state.kind && h.head !== a.head) ||
            DATA.heads.find(h => fits(h) && h !== a);
  const name = h => `${h.kind} layer ${h.layer} head ${h.head}`;
  choose("mode", "grid")(); /* from the all-heads view of the viewer, a head's click comes back to its heatmap */
  let c = act(`click ${name(a)} in the heads grid`, clickCell(a));
  checks.push(c);
  r.clickOpensHead = c.changed && selected(a) && shows(state.sentences[state.sentence], a);
  c = act(`click ${name(b)} in the heads grid`, clickCell(b));
  checks.push(c);
  r.clickAnotherHead = c.changed && selected(b) && shows(state.sentences[state.sentence], b);
  r.sentenceSwitch = r.clickAfterSwitch = null; /* one sentence: nothing to switch to */
  if (state.sentences.length > 1) {
    const to = state.sentences.length - 1, M = state.sentences[to];
    c = act(`sentence ${to + 1} in the heads view`, choose("sentence", to));
    checks.push(c);
    r.sentenceSwitch = c.changed && state.sentence === to && $("src").textContent === M.source.slice(0, -1).join(" ") &&
                       selected(b) && shows(M, b) && document.querySelectorAll("#heads .hcell").length === cells.length;
    c = act(`click ${name(a)} for sentence ${to + 1}`, clickCell(a));
    checks.push(c);
    r.clickAfterSwitch = c.changed && state.sentence === to && $("sentence").value === String(to) && selected(a) && shows(M, a);
  }
  r.ok = Object.values(r).every(v => v !== false);
  return r;
}

/* The explain pane's part of #selftest: a box per target word, each with its ring; the
 * shares in [0, 1] and the rollout's source columns summing to them; the source table has a
 * row per source token, the default methods as columns, each bar its score over the
 * column's largest |score|; a click on a word selects it and says its share; "every method"
 * shows them all; an attention column's name opens its head's map in the maps pane, on the
 * word's row, with the query anatomy; the explain pane comes back on the same word; a word
 * that is the foil itself is said to be, and no gradient column ranks a token for it. */
function selftestExplain(checks) {
  const XM = state.explained.maps, T = XM.target_out.length, S = XM.source.length, last = XM.cross.length - 1, r = {};
  const act = (what, fn) => { const before = $("explain").innerHTML; fn(); return { change: what, changed: $("explain").innerHTML !== before,
                                                                                 cells: document.querySelectorAll("#explain .xbox").length }; };
  const boxes = () => [...document.querySelectorAll("#xwords .xword")];
  const methods = () => [...document.querySelectorAll("table.xsrc tr:first-child th[data-method]")].map(th => th.getAttribute("data-method"));
  const sum = a => a.reduce((x, y) => x + y, 0);
  /* every bar of the source table is its score over its column's largest |score| (EOS aside) */
  const barsMatch = t => {
    const trs = [...document.querySelectorAll("table.xsrc tr")].slice(1);
    return trs.length === S && methods().every((name, k) => {
      const v = state.explained.methods.find(m => m.name === name).scores[t].slice(0, S - 1), top = Math.max(...v.map(Math.abs));
      const full = v.some(x => x < 0) ? 50 : 100;
      return v.every((x, j) => Math.abs(parseFloat(trs[j].children[k + 1].querySelector(".xbar").style.width) / full -
                                        (top > 0 ? Math.abs(x) / top : 0)) < 1e-3);
    });
  };
  r.words = boxes().length;
  r.oneBoxPerWord = r.words === T && boxes().every((b, i) => b.querySelector(".w").textContent === XM.target_out[i] &&
                                                   b.querySelector("circle.share") !== null);
  r.sharesInRange = state.explained.share.length === XM.cross.length && state.explained.share.every(row => row.length === T && row.every(v => isNum(v) && v >= 0 && v <= 1));
  r.rolloutIsShare = state.explained.rollout.length === T && state.explained.rollout.every((row, t) => row.length === S + T &&
    Math.abs(sum(row.slice(0, S)) - shareOf(t)) < 1e-3 && Math.abs(sum(row) - 1) < 1e-3);
  const want = [`L${last}.avg`, `shift.L${last}`, "contrib.rollout", "saliency", "x-gradient", "x-gradient-l2", "integrated-gradients",
                "leave-one-out"];
  r.defaultColumns = methods().join(",") === want.join(",") && barsMatch(state.word);
  /* every word at once, as qkv explain --text prints it: the word, log p, share, and each of
     four methods' top source token (the largest score, EOS aside; a dash where the row is flat) */
  const summary = [...document.querySelectorAll("table.xsum tr")].slice(1).map(tr => [...tr.children].map(td => td.textContent));
  const topOf = (name, t) => {
    const m = state.explained.methods.find(m => m.name === name), row = m ? m.scores[t].slice(0, S - 1) : [];
    if (!m || row.every(v => v === row[0]) || m.family === "gradient" && foilIsWord(t)) return null;
    return [XM.source[row.indexOf(Math.max(...row))], Math.max(...row).toFixed(2)].join(" ");
  };
  r.summaryTable = summary.length === T && summary.every((cells, t) => cells.length === 7 && cells[0] === XM.target_out[t] &&
    cells[1] === state.explained.logp[t].toFixed(3) && cells[2] === shareOf(t).toFixed(2) &&
    SUMMARY(last).every((name, k) => topOf(name, t) === null ? cells[3 + k].startsWith("\u2013") : cells[3 + k] === topOf(name, t)));
  const k = (state.word + 1) % T, word = XM.target_out[k];
  let c = act(`click target word ${k} '${word}'`, () => boxes()[k].dispatchEvent(new MouseEvent("click", { bubbles: true })));
  checks.push(c);
  const chosen = document.querySelectorAll("#xwords .xword.chosen"), said = $("xsay").textContent;
  r.clickSelectsWord = c.changed && state.word === k && chosen.length === 1 && chosen[0].getAttribute("data-word") === String(k) &&
                       said.includes(`'${word}'`) && said.includes(`${pct(shareOf(k))} of what the decoder used for this word came from the source`) &&
                       document.querySelectorAll("table.xpre tr").length === k + 2 && barsMatch(k);
  r.completeness = state.explained.ig_steps > 0 && isNum(state.explained.ig_error[k]) ? said.includes(`completeness error ${num(Math.abs(state.explained.ig_error[k]))}`) : null;
  c = act("every method", () => { $("xevery").checked = true; $("xevery").dispatchEvent(new Event("change")); });
  checks.push(c);
  r.everyMethod = c.changed && methods().join(",") === state.explained.methods.map(m => m.name).join(",") && barsMatch(k);
  const links = [...document.querySelectorAll("table.xsrc th a.xmap")];
  r.attentionLinks = links.length === state.explained.methods.filter(m => m.family === "attention").length;
  const head = XM.heads - 1, name = `L${last}.H${head}`, link = links.find(a => a.textContent === name);
  const maps = () => $("view").innerHTML + $("anatomy").innerHTML, before = maps();
  if (link) link.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
  checks.push({ change: `click ${name}`, changed: maps() !== before, cells: $("view").querySelectorAll(".cell").length });
  const title = $("anatomy").querySelector("h3");
  r.headOpensMap = !!link && maps() !== before && state.pane === "maps" && state.kind === "cross" && state.layer === last &&
                   state.head === head && state.query === k && $("explain").style.display === "none" &&
                   document.querySelector(".main").style.display === "" && $("view").querySelectorAll("rect.cell").length > 0 &&
                   title !== null && title.textContent === `query ${k}: '${word}' \u2014 cross, layer ${last}, head ${head}`;
  $("pane-explain").click();
  r.backToExplain = state.pane === "explain" && $("explain").style.display === "block" && document.querySelector(".main").style.display === "none" &&
                    document.querySelector("#xwords .xword.chosen").getAttribute("data-word") === String(k);
  /* a word that is the foil itself: said, and no gradient column outlines a token for it */
  const foiled = [...Array(T).keys()].filter(foilIsWord);
  if (foiled.length) {
    boxes()[foiled[0]].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    const ths = methods(), grads = state.explained.methods.filter(m => m.family === "gradient").map(m => m.name);
    const outlined = [...document.querySelectorAll("table.xsrc tr")].slice(1)
      .flatMap(tr => [...tr.children].slice(1).map((td, k) => td.querySelector(".xbox.top") ? ths[k] : null));
    r.foilWordRanksNothing = $("xsay").textContent.includes("rank nothing for it") &&
                             ths.some(n => grads.includes(n)) && !outlined.some(n => grads.includes(n));
  } else r.foilWordRanksNothing = null;
  $("pane-maps").click(); /* the maps' own checks follow, on the pane that shows them, from no query chosen */
  chooseQuery(-1);
  r.ok = Object.values(r).every(v => v !== false);
  return r;
}

/* #selftest: drive the controls as a user would (click a query, switch what the heatmap
 * shows, sort the keys, move the step slider) and report whether each action changed the
 * picture; a headless browser reads the result from the page. */
/* every picture on the page now measured (tests/svg_fit.js, added with these checks): the
   faults into the set `into`, each said to be seen after `when` if given */
function fitInto(into, when) {
  for (const f of typeof svgFitFaults === "function" ? svgFitFaults() : ["tests/svg_fit.js is not in the page"])
    into.add(when ? `after ${when}: ${f}` : f);
  return into;
}

function selftest() {
  const out = $("selftest");
  out.style.display = "block";
  if (!state.maps) { /* a heads view without sentences */
    out.textContent = JSON.stringify({ ok: false, errors: state.errors, problem: "no sentences: no maps to check" });
    document.title = "selftest: FAIL";
    return;
  }
  const initial = { kind: state.kind, layer: state.layer, head: state.head };
  const picture = () => $("view").innerHTML + $("anatomy").innerHTML + $("curves").innerHTML;
  const fit = fitInto(new Set());
  const act = (what, fn) => { const before = picture(); fn(); fitInto(fit, what); return { change: what, changed: picture() !== before,
                                                                       cells: $("view").querySelectorAll(".cell").length }; };
  const choose = (id, value) => () => { $(id).value = String(value); $(id).dispatchEvent(new Event(id === "step" ? "input" : "change")); };
  const click = sel => () => { const e = document.querySelector(sel); if (e) e.dispatchEvent(new MouseEvent("click", { bubbles: true })); };
  const checks = [];
  const explain = EXPLAIN ? selftestExplain(checks) : undefined;
  const steps = [["kind", "encoder_self"], ["kind", "decoder_self"], ["kind", "cross"], ["head", 0], ["head", state.maps.heads - 1],
                 ["layer", 0], ["mode", "grid"], ["mode", "lines"], ["mode", "heatmap"]];
  for (const [id, value] of steps) checks.push(act(`${id}=${value}`, choose(id, value)));
  checks.push(act("click a query row", click("#view rect.cell:last-of-type")));
  checks.push(act("value=scores", choose("value", "scores")));
  checks.push(act("value=contrib", choose("value", "contrib")));
  checks.push(act("sort keys by weight", click("#anatomy button[data-sort=weight]")));
  checks.push(act("mode=qk", choose("mode", "qk")));
  if (WATCH) {
    checks.push(act("step slider to the start", choose("step", 0)));
    checks.push(act("step slider to the end", choose("step", DATA.snapshots.length - 1)));
  }
  const rows = $("anatomy").querySelectorAll("tr").length - 1;
  const softmax = /softmax\(scores\) \u2212 weights: at most ([0-9.e+-]+)/.exec($("anatomy").textContent);
  /* the head is named in brackets, never as a superscript that reads as a power of W_O */
  const formula = $("anatomy").querySelector(".formula");
  const headNotPower = !!formula && formula.textContent.includes(`W_O[head ${headOf()}]`) && !/W_O\^/.test(formula.textContent) &&
                       $("help").querySelector("sup") === null;
  const every = f => (WATCH ? DATA.snapshots.flatMap(s => s.sentences) : state.sentences).every(f);
  const rowsSumToOne = every(M => ["encoder_self", "decoder_self", "cross"].every(k => M[k].every(layer => layer.every(m =>
    m.every(row => Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-3)))));
  const heads = HEADS ? selftestHeads(act, choose, checks, initial) : undefined;
  const ok = state.errors.length === 0 && rowsSumToOne && rows === labels(state.kind).cols.length && softmax !== null &&
             parseFloat(softmax[1]) <= 1e-5 && headNotPower && checks.every(c => c.changed && c.cells > 0) && (!heads || heads.ok) &&
             (!explain || explain.ok) && fit.size === 0;
  out.textContent = JSON.stringify({ ok, errors: state.errors, rowsSumToOne, anatomyRows: rows, softmaxError: softmax && softmax[1], headNotPower,
                                     heads, explain, fit: [...fit], checks });
  document.title = ok ? "selftest: pass" : "selftest: FAIL";
}

/* #selftest-live&text=T[&ckpt=C]: types T and presses Enter, waits for the maps, then picks
 * checkpoint C (else the next in the menu) and checks that the map changed; the result as
 * #selftest's. */
async function selftestLive() {
  const out = $("selftest");
  out.style.display = "block";
  const text = decodeURIComponent((/[#&]text=([^&]*)/.exec(location.hash) || [])[1] || "");
  const panel = () => [...$("view").querySelectorAll("rect.cell")].map(e => e.getAttribute("fill")).join(" ");
  const r = { typed: text };
  $("live-src").value = text;
  $("live-src").dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  $("live").requestSubmit();
  const until = async f => { for (let i = 0; i < 600 && !f(); i++) await new Promise(ok => setTimeout(ok, 50)); return f(); };
  r.mapAppeared = await until(() => state.maps && $("view").querySelectorAll("rect.cell").length > 0);
  r.nbestListed = $("live-nbest").querySelectorAll("li").length > 0;
  r.sourceShown = !!state.maps && $("src").textContent === state.maps.source.slice(0, -1).join(" ");
  /* &unk=state.whatif: the typed word state.whatif is not in the source vocabulary: the source line, its note and
     the cross-attention map's column say the model read it as <unk> */
  const unk = decodeURIComponent((/[#&]unk=([^&]*)/.exec(location.hash) || [])[1] || "");
  if (unk && state.maps) {
    const j = text.split(/\s+/).filter(Boolean).indexOf(unk), marked = `${unk}${UNK_MARK}`;
    const columns = [...$("view").querySelectorAll("text")].map(e => e.textContent);
    r.unknownMarked = j >= 0 && Array.isArray(state.maps.source_unk) && state.maps.source_unk.includes(j) && state.maps.source[j] === marked &&
                      [...$("src").querySelectorAll(".unk")].map(e => e.textContent).join(" ") === marked &&
                      $("src-unk").textContent.includes(`read as <unk>: '${unk}'`) && state.kind === "cross" && columns.includes(marked);
  }
  const before = panel(), first = state.maps;
  const asked = decodeURIComponent((/[#&]ckpt=([^&]*)/.exec(location.hash) || [])[1] || "");
  const other = DATA.model.checkpoints.find(c => c === asked) || DATA.model.checkpoints.find(c => c !== $("live-ckpt").value);
  r.otherCheckpoint = other || null;
  if (other) {
    $("live-ckpt").value = other;
    $("live-ckpt").dispatchEvent(new Event("change"));
    r.checkpointAnswered = await until(() => state.maps !== first);
    r.checkpointChangesMap = r.checkpointAnswered && state.maps.checkpoint === other && panel() !== before && panel().length > 0;
    r.titleFollows = $("title").textContent.includes(`${other}, step ${state.maps.step}`);
  }
  if (HEAD_LIST) { /* the grid of qkv heads' output: a cell per listed head; a click opens that head's map */
    const cells = [...document.querySelectorAll("#heads .hcell")];
    r.headGridCells = cells.length;
    const h = HEAD_LIST.find(h => state.maps[h.kind] && h.layer < state.maps[h.kind].length && h.head < state.maps.heads &&
                                  (h.kind !== state.kind || h.layer !== state.layer || h.head !== state.head));
    const mapBefore = panel();
    if (h) document.querySelector(`#heads .hcell[data-head="${headKey(h.kind, h.layer, h.head)}"]`)
             .dispatchEvent(new MouseEvent("click", { bubbles: true }));
    r.headClickOpensIt = !!h && state.kind === h.kind && state.layer === h.layer && state.head === h.head &&
                         $("kind").value === h.kind && panel() !== mapBefore;
    r.headGrid = cells.length === HEAD_LIST.length && r.headClickOpensIt;
  }
  r.fit = [...fitInto(new Set())];
  r.errors = state.errors;
  r.ok = r.fit.length === 0 && state.errors.length === 0 && r.mapAppeared && r.nbestListed && r.sourceShown && (!other || r.checkpointChangesMap && r.titleFollows) &&
         (!HEAD_LIST || r.headGrid) && (!unk || r.unknownMarked);
  out.textContent = JSON.stringify(r);
  document.title = r.ok ? "selftest: pass" : "selftest: FAIL";
}

/* #selftest-whatif&text=T&control=C: types T, waits for the maps and the what-if panels, then
 * works control C as a user would (mask: a head's toggle; pin: a cell of a cross map; prefix:
 * a word of the output; lens, tree: their panels; patch: the two boxes and the button), waits
 * for the answer, checks what it shows and scrolls its panel into view (for a screenshot);
 * the result as #selftest's. */
async function selftestWhatif() {
  const out = $("selftest");
  const arg = k => decodeURIComponent((new RegExp(`[#&]${k}=([^&]*)`).exec(location.hash) || [])[1] || "");
  const control = arg("control"), r = { control };
  const until = async f => { for (let i = 0; i < 600 && !f(); i++) await new Promise(ok => setTimeout(ok, 50)); return f(); };
  $("live-src").value = arg("text");
  if (control === "explain") $("live-beam").value = "1"; /* explainbeam: the beam's best, explained all the same */
  $("live").requestSubmit();
  r.answered = !!(await until(() => state.whatif.answer && $("w-steps-table")));
  let panel = $("w-output");
  if (r.answered && control === "mask") {
    const first = state.whatif.answer, b = document.querySelector('#w-heads .wtoggle[data-head="cross/0/0"]');
    b.click();
    const b2 = document.querySelector('#w-heads .wtoggle[data-head="cross/1/0"]');
    await until(() => state.whatif.answer !== first);
    const mid = state.whatif.answer;
    b2.click();
    r.shown = await until(() => state.whatif.answer !== mid && $("w-diff"));
    r.ok = r.shown && state.whatif.answer.change.length === state.whatif.answer.tokens.length && state.whatif.off.size === 2 &&
           document.querySelectorAll("#w-heads .wtoggle.off").length === 2 && /mask_heads/.test(JSON.stringify(whatifBody()));
    panel = $("w-heads");
  } else if (r.answered && control === "pin") {
    state.kind = "cross", state.layer = state.maps.cross.length - 1, state.head = 0, state.mode = "heatmap";
    sync();
    $("w-pinmode").click();
    const first = state.whatif.answer, cells = [...$("view").querySelectorAll("rect.cell")], cols = state.maps.source.length;
    cells[1 * cols + 0].dispatchEvent(new MouseEvent("click", { bubbles: true })); /* step 1 onto source 0 */
    r.shown = await until(() => state.whatif.answer !== first && $("w-pin").querySelector("table"));
    r.ok = r.shown && state.whatif.pin.query === 1 && state.whatif.pin.key === 0 && state.whatif.answer.change[0] === 0;
    panel = $("w-pin");
  } else if (r.answered && (control === "explain" || control === "explainbeam")) {
    /* the explain pane: asked once opened, drawn as qkv explain's page draws it (its own
       self-test), its heads opening the maps of the same words; a word read as <unk> (&unk=state.whatif)
       marked there too */
    const checks = [];
    $("pane-explain").click();
    r.shown = await until(() => state.explained && state.explained.maps && $("xsummary").querySelector("table"));
    const said = control === "explainbeam" ? /the translation shown/ : /the translation shown|the one shown was refused/;
    r.sameWords = r.shown && sameMaps(state.explained.maps, state.maps) && said.test($("xstatus").textContent);
    r.beam = $("live-beam").value;
    r.explain = r.shown ? selftestExplain(checks) : null;
    r.checks = checks;
    const unk = arg("unk");
    r.unknownMarked = !unk || r.shown && state.explained.maps.source.includes(`${unk}${UNK_MARK}`) &&
                      [...document.querySelectorAll("table.xsrc td.tok")].some(td => td.textContent === `${unk}${UNK_MARK}`);
    r.ok = r.sameWords && r.explain.ok && checks.every(c => c.changed) && r.unknownMarked;
    $("pane-explain").click();
    panel = $("explain");
  } else if (r.answered && control === "pinavg") {
    /* the heads' average: a click pins nothing, asks nothing, and says why; a head chosen
       then pins that head, not another */
    state.kind = "cross", state.layer = state.maps.cross.length - 1, state.head = "avg", state.mode = "heatmap";
    sync();
    $("w-pinmode").click();
    const first = state.whatif.answer, asked = state.whatif.busy, cols = state.maps.source.length;
    r.noteBefore = $("w-pinnote").textContent;
    $("view").querySelectorAll("rect.cell")[1 * cols + 0].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await new Promise(ok => setTimeout(ok, 300));
    r.noteAfter = $("w-pinnote").textContent;
    r.averageNotPinned = state.whatif.pin === null && state.whatif.busy === asked && state.whatif.answer === first && !$("w-pin").querySelector("table") &&
                         /cannot be pinned/.test(r.noteBefore) && /^not pinned: .*cannot be pinned/.test(r.noteAfter);
    const head = state.maps.heads - 1;
    $("head").value = String(head);
    $("head").dispatchEvent(new Event("change"));
    $("view").querySelectorAll("rect.cell")[1 * cols + 0].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    r.shown = await until(() => state.whatif.answer !== first && $("w-pin").querySelector("table"));
    r.headPinned = r.shown && state.whatif.pin.head === head && state.whatif.pin.layer === state.maps.cross.length - 1 && state.whatif.pin.query === 1 && state.whatif.pin.key === 0 &&
                   $("w-pinnote").textContent.includes(`head ${head}`);
    r.ok = r.averageNotPinned && r.headPinned;
    panel = $("whatif");
  } else if (r.answered && control === "prefix") {
    const first = state.whatif.answer, words = $("w-output").querySelectorAll(".wword");
    words[Math.min(1, words.length - 2)].click();
    r.shown = await until(() => state.whatif.answer !== first && state.whatif.answer.forced);
    r.ok = r.shown && state.whatif.answer.tokens.length === Math.min(1, words.length - 2) + 2 && $("w-steps-table").rows.length === state.whatif.answer.tokens.length + 1;
    panel = $("w-output");
  } else if (r.answered && control === "newsentence") {
    /* every intervention made on one sentence (a head off, a pin in pin mode, a forced
       prefix, a patching), then another sentence typed and Enter: it starts clean, and the
       page says what it cleared; a forced target in the form goes when the source is edited */
    const w = state.whatif, next = arg("corrupt");
    let first = w.answer;
    document.querySelector('#w-heads .wtoggle[data-head="cross/0/0"]').click();
    await until(() => w.answer !== first);
    state.kind = "cross", state.layer = state.maps.cross.length - 1, state.head = 0, state.mode = "heatmap";
    sync();
    $("w-pinmode").click();
    first = w.answer;
    $("view").querySelectorAll("rect.cell")[1 * state.maps.source.length].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await until(() => w.answer !== first);
    first = w.answer;
    $("w-output").querySelectorAll(".wword")[0].click();
    await until(() => w.answer !== first && w.answer.forced);
    $("p-run").click();
    await until(() => w.patch);
    r.intervened = w.off.size === 1 && w.pin !== null && w.pinMode && w.prefix !== "" && !!w.patch && w.answer.forced;
    $("live-tgt").value = "a forced target";
    $("live-src").value = next;
    $("live-src").dispatchEvent(new Event("input", { bubbles: true }));
    r.targetCleared = $("live-tgt").value === "";
    first = w.answer;
    $("live").requestSubmit();
    r.shown = await until(() => w.answer !== first && state.asked && state.asked.src === next && $("w-steps-table"));
    const body = whatifBody();
    r.cleared = w.off.size === 0 && w.pin === null && !w.pinMode && !$("w-pinmode").checked && w.prefix === "" &&
                $("w-prefix").value === "" && !w.patch && $("p-view").textContent === "" && $("p-clean").value === next &&
                !body.mask_heads && !body.pin && !body.tgt && !w.answer.forced && !w.answer.changed &&
                document.querySelectorAll("#w-heads .wtoggle.off").length === 0 && !$("w-pin").querySelector("table");
    r.note = $("w-cleared").textContent;
    r.said = /interventions cleared/.test(r.note) && ["head", "pin", "forced prefix", "patching"].every(t => r.note.includes(t));
    r.ok = r.intervened && r.targetCleared && r.shown && r.cleared && r.said;
    panel = $("whatif");
  } else if (r.answered && control === "lens") {
    r.ok = $("w-lens-table").rows.length === state.whatif.answer.model.lens.length + 1;
    panel = $("w-lens");
  } else if (r.answered && control === "tree") {
    r.ok = $("w-tree-svg").querySelectorAll("circle").length === state.whatif.answer.beam_tree.length &&
           $("w-tree-svg").querySelectorAll("circle.fate-finished").length > 0;
    panel = $("w-tree");
  } else if (r.answered && control === "patch") {
    $("p-corrupt").value = arg("corrupt") || $("p-clean").value;
    $("p-run").click();
    r.shown = await until(() => state.whatif.patch && $("p-svg"));
    /* red where the patch raised the metric, blue where it lowered it, as patch.svg */
    const cells = [...$("p-svg").querySelectorAll("rect.pcell")], effect = e => parseFloat(e.getAttribute("data-effect"));
    r.coloursBySign = cells.every(e => effect(e) > 0 ? e.getAttribute("fill").startsWith("rgb(255,")
                                                   : e.getAttribute("fill").endsWith(",255)")) &&
                      cells.some(e => effect(e) !== 0);
    r.ok = r.shown && cells.length === state.whatif.patch.components.length && r.coloursBySign &&
           $("p-svg").querySelectorAll("circle.pdot").length === state.whatif.patch.components.length;
    panel = $("w-patch");
  }
  /* a panel low on the page: the panels above it folded away, so that it is in view */
  if (["lens", "tree", "patch", "explain"].includes(control))
    for (const e of document.querySelectorAll("#whatif .wpanel")) if (e !== panel) e.style.display = "none";
  panel.scrollIntoView();
  r.fit = [...fitInto(new Set())];
  r.errors = state.errors;
  r.ok = !!r.ok && state.errors.length === 0 && r.fit.length === 0;
  out.textContent = JSON.stringify(r);
  out.style.display = "block";
  document.title = r.ok ? "selftest: pass" : "selftest: FAIL";
}

if (LIVE) {
  if (location.hash.includes("selftest-live")) selftestLive();
  else if (location.hash.includes("selftest-whatif")) selftestWhatif();
} else if (location.hash.includes("selftest")) selftest();
