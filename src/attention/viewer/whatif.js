/* what if: the live page's interventions (POST /v1/whatif).
 * One request carries every change at once (heads off, a pin, a forced prefix) and every
 * panel is drawn again from its answer: the translation and what changed in it, the
 * distributions at each step, the pinned step before and after, the logit lens, the beam
 * tree. The patch panel asks /v1/patch for two sentences of its own. */
const MASK_KIND = { encoder_self: "enc", decoder_self: "dec", cross: "cross" };
const piecesText = toks => toks.join(" ").replace(/ ?\u2581/g, " ").trim();
async function postJSON(path, body) {
  const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const a = await r.json();
  return r.ok ? a : Promise.reject(new Error(`${r.status}: ${a.error}`));
}
function whatifBody() {
  const body = { src: $("live-src").value, checkpoint: $("live-ckpt").value, lens: true, tree: true,
                 top: Math.max(1, Math.min(20, parseInt($("w-top").value, 10) || 5)),
                 beam: Math.max(2, Math.min(8, parseInt($("w-beam").value, 10) || 5)) };
  if (state.whatif.prefix) body.tgt = state.whatif.prefix;
  if (state.whatif.off.size) body.mask_heads = [...state.whatif.off].map(k => { const [kind, l, h] = k.split("/"); return `${MASK_KIND[kind]}.${l}.${h}`; }).join(",");
  if (state.whatif.pin) body.pin = state.whatif.pin;
  return body;
}
async function whatif() {
  if (!$("live-src").value.trim()) return false;
  const ticket = ++state.whatif.busy;
  $("w-status").textContent = "asking\u2026";
  try {
    const a = await postJSON("/v1/whatif", whatifBody());
    if (ticket !== state.whatif.busy) return false; /* a later change is on its way */
    state.whatif.answer = a;
    $("w-status").textContent = `${a.checkpoint} (step ${a.step}): ` + (a.forced ? "the forced prefix" : "the greedy translation") +
      (state.whatif.off.size ? `, ${state.whatif.off.size} head${state.whatif.off.size > 1 ? "s" : ""} off` : "") + (state.whatif.pin ? `, cross L${state.whatif.pin.layer} H${state.whatif.pin.head} pinned at step ${state.whatif.pin.query} onto source ${state.whatif.pin.key}` : "");
    renderWhatif();
    return true;
  } catch (e) {
    if (ticket === state.whatif.busy) $("w-status").textContent = String(e.message || e);
    return false;
  }
}
function renderWhatifHeads() {
  const box = $("w-heads");
  box.textContent = "";
  if (!state.maps) return;
  html("h3", {}, box, "heads: click to switch off and on (green on, red off)");
  const wrap = html("div", { class: "wtoggles" }, box);
  KINDS.forEach(kind => state.maps[kind].forEach((_, l) => {
    const grp = html("div", { class: "grp" }, wrap);
    html("span", {}, grp, `${MASK_KIND[kind]} L${l}`);
    for (let h = 0; h < state.maps.heads; h++) {
      const key = headKey(kind, l, h), b = html("button", { type: "button", class: "wtoggle" + (state.whatif.off.has(key) ? " off" : ""), "data-head": key }, grp, String(h));
      b.addEventListener("click", () => { toggleHead(key); });
    }
  }));
}
function toggleHead(key) {
  if (state.whatif.off.has(key)) state.whatif.off.delete(key); else state.whatif.off.add(key);
  renderWhatifHeads();
  return whatif();
}
function pinAt(layer, head, query, key) {
  state.whatif.pin = { layer, head, query, key };
  return whatif();
}
/* what a click on the map would pin, beside the "pin" box: a pin takes one head's query,
   and the heads' average has none of its own, so on the average a click pins nothing */
function pinNote() {
  const note = $("w-pinnote");
  note.classList.remove("refused");
  note.textContent = !state.whatif.pinMode ? ""
    : state.kind !== "cross" || state.mode !== "heatmap" ? "choose a cross-attention heatmap below, then one head"
    : state.head === "avg" ? "the map below shows the heads' average, which cannot be pinned: choose one head in its head menu"
    : `a click on a cell pins cross-attention layer ${state.layer}, head ${state.head}`;
}
function pinRefused() {
  pinNote();
  $("w-pinnote").classList.add("refused");
  $("w-pinnote").textContent = "not pinned: " + $("w-pinnote").textContent;
  return false;
}
/* every what-if panel, from the last answer */
function renderWhatif() {
  const a = state.whatif.answer;
  renderWhatifHeads();
  if (!a) return;
  renderOutput(a), renderPin(a), renderSteps(a), renderLens(a), renderTree(a);
}
if (LIVE) {
  $("w-pinmode").addEventListener("change", () => { state.whatif.pinMode = $("w-pinmode").checked; pinNote(); });
  $("w-prefix").addEventListener("change", () => { state.whatif.prefix = $("w-prefix").value.trim(); whatif(); });
  for (const id of ["w-top", "w-beam"]) $(id).addEventListener("change", () => whatif());
  $("w-reset").addEventListener("click", () => { state.whatif.off.clear(); state.whatif.pin = null; state.whatif.prefix = ""; $("w-prefix").value = ""; whatif(); });
  $("p-run").addEventListener("click", () => runPatch());
}
