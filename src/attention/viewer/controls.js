/* controls: render() draws every panel from state; sync() brings the maps on screen, the
 * menus and the page's address in step with state, then renders; readHash() reads a state
 * from the address; the listeners of the maps pane's controls. */

function render() {
  const view = $("view");
  view.textContent = "";
  const svg = el("svg", { "font-family": "sans-serif" }, view);
  const size = state.mode === "grid" ? renderGrid(svg) : state.mode === "lines" ? renderLines(svg)
             : state.mode === "qk" ? renderQK(svg) : renderHeatmap(svg);
  svg.setAttribute("width", size.width);
  svg.setAttribute("height", size.height);
  renderAnatomy();
  renderCurves();
  if (HEAD_LIST) renderHeads();
  if (EXPLAIN || LIVE && state.pane === "explain" && state.explained && state.explained.key === explainKey()) renderExplain();
  if (LIVE) pinNote();
}

function sync() {
  if (WATCH) watchSync();
  if (HEADS) headsSync();
  if (EXPLAIN || LIVE) {
    $("explain").style.display = state.pane === "explain" ? "block" : "none";
    for (const e of document.querySelectorAll("body > .controls, .main, #help, #curves")) e.style.display = state.pane === "maps" ? "" : "none";
    for (const b of document.querySelectorAll("#panes button")) b.classList.toggle("on", b.getAttribute("data-pane") === state.pane);
    $("xevery").checked = state.every;
  }
  showSource();
  $("tgt").textContent = state.maps.target_out.slice(0, -1).join(" ");
  if (LIVE && state.pane === "explain") explainLive();
  const layers = state.maps[state.kind].length;
  if (state.layer >= layers) state.layer = layers - 1;
  if (state.query >= labels(state.kind).rows.length) state.query = -1;
  fillSelect($("layer"), [...Array(layers).keys()], [...Array(layers).keys()].map(String));
  fillSelect($("head"), ["avg"].concat([...Array(state.maps.heads).keys()]), ["average"].concat([...Array(state.maps.heads).keys()].map(String)));
  for (const id of ["kind", "layer", "head", "value", "mode"]) $(id).value = state[id];
  render();
  /* a framed copy (the report's srcdoc frames) has no address of its own to keep the view in,
     and an address that asks for the page's checks (tests/viewer_selftest.js) stays theirs */
  if (!location.hash.includes("selftest") && location.href !== "about:srcdoc")
    history.replaceState(null, "", `#kind=${state.kind}&layer=${state.layer}&head=${state.head}&view=${state.mode}` +
                         `&value=${state.value}&query=${state.query}` + (WATCH ? `&sentence=${state.sentence}&step=${state.step}` : "") +
                         (HEADS ? `&sentence=${state.sentence}` : "") +
                         (EXPLAIN ? `&pane=${state.pane}&word=${state.word}&every=${state.every ? 1 : 0}` : ""));
}

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1)), int = k => parseInt(h.get(k), 10);
  if ((WATCH || HEADS) && int("sentence") >= 0 && int("sentence") < state.sentences.length) state.sentence = int("sentence");
  if (WATCH) watchHash(int);
  if (HEADS) headsHash();
  if (["encoder_self", "decoder_self", "cross"].includes(h.get("kind"))) state.kind = h.get("kind");
  if (int("layer") >= 0 && int("layer") < state.maps[state.kind].length) state.layer = int("layer");
  const head = h.get("head");
  if (head === "avg" || (int("head") >= 0 && int("head") < state.maps.heads)) state.head = head === "avg" ? "avg" : int("head");
  if (["heatmap", "grid", "lines", "qk"].includes(h.get("view"))) state.mode = h.get("view");
  if (["weights", "scores", "contrib"].includes(h.get("value"))) state.value = h.get("value");
  if (int("query") >= 0) state.query = int("query");
  if (EXPLAIN) {
    if (["explain", "maps"].includes(h.get("pane"))) state.pane = h.get("pane");
    if (int("word") >= 0 && int("word") < state.maps.target_out.length) state.word = int("word");
    state.every = h.get("every") === "1";
  }
}

for (const id of ["kind", "layer", "head", "value", "mode", "sentence"]) {
  $(id).addEventListener("change", ev => {
    const v = ev.target.value;
    state[id] = id === "layer" || id === "sentence" ? parseInt(v, 10) : id === "head" ? (v === "avg" ? "avg" : parseInt(v, 10)) : v;
    sync();
  });
}
$("step").addEventListener("input", ev => { state.step = parseInt(ev.target.value, 10); sync(); });
for (const b of document.querySelectorAll("#panes button")) {
  b.addEventListener("click", () => {
    state.pane = b.getAttribute("data-pane");
    if (state.pane === "maps" && state.query < 0 && state.kind !== "encoder_self") state.query = state.word; /* the word's row */
    sync();
  });
}
$("xevery").addEventListener("change", ev => { state.every = ev.target.checked; sync(); });

function chooseQuery(i) {
  state.query = i;
  if (state.explained && sameMaps(state.explained.maps, state.maps) && i >= 0 && state.kind !== "encoder_self") state.word = i; /* a target row: the explain pane's word too */
  render();
}
