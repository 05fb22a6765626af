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
  const w = state.whatif;
  const body = { src: $("live-src").value, checkpoint: $("live-ckpt").value, lens: true, tree: true,
                 top: Math.max(1, Math.min(20, parseInt($("w-top").value, 10) || 5)),
                 beam: Math.max(2, Math.min(8, parseInt($("w-beam").value, 10) || 5)) };
  if (w.prefix) body.tgt = w.prefix;
  if (w.off.size) body.mask_heads = [...w.off].map(k => { const [kind, l, h] = k.split("/"); return `${MASK_KIND[kind]}.${l}.${h}`; }).join(",");
  if (w.pin) body.pin = w.pin;
  return body;
}
/* asks again with every change; keepNote: a new sentence's (ask()), whose note of what it
   cleared stays until the next change */
async function whatif(keepNote) {
  if (!keepNote) $("w-cleared").textContent = "";
  if (!$("live-src").value.trim()) return false;
  const w = state.whatif, ticket = ++w.busy;
  $("w-status").textContent = "asking\u2026";
  try {
    const a = await postJSON("/v1/whatif", whatifBody());
    if (ticket !== w.busy) return false; /* a later change is on its way */
    w.answer = a;
    $("w-status").textContent = `${a.checkpoint} (step ${a.step}): ` + (a.forced ? "the forced prefix" : "the greedy translation") +
      (w.off.size ? `, ${w.off.size} head${w.off.size > 1 ? "s" : ""} off` : "") +
      (w.pin ? `, cross L${w.pin.layer} H${w.pin.head} pinned at step ${w.pin.query} onto source ${w.pin.key}` : "");
    renderWhatif();
    return true;
  } catch (e) {
    if (ticket === w.busy) $("w-status").textContent = String(e.message || e);
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
      const key = headKey(kind, l, h), off = state.whatif.off.has(key);
      const b = html("button", { type: "button", class: "wtoggle" + (off ? " off" : ""), "data-head": key }, grp, String(h));
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
/* A new sentence starts clean: the heads switched off, the pin and pin mode, the forced
   prefix and the patching pair were the sentence before's. Clears them, the patching pair
   becoming the new sentence src; what was cleared, in words ("" for nothing). */
function clearInterventions(src) {
  const w = state.whatif, said = [];
  if (w.off.size) said.push(`${w.off.size} head${w.off.size > 1 ? "s" : ""} switched back on`);
  if (w.pin) said.push("the pin");
  if (w.pinMode) said.push("pin mode");
  if (w.prefix) said.push(`the forced prefix '${w.prefix}'`);
  if (w.patch) said.push("the patching");
  Object.assign(w, { pin: null, pinMode: false, prefix: "", patch: null });
  w.off.clear();
  $("w-pinmode").checked = false;
  $("w-prefix").value = $("p-a").value = $("p-b").value = "";
  $("p-clean").value = $("p-corrupt").value = src;
  $("p-view").textContent = $("p-status").textContent = "";
  pinNote();
  return said.length ? `A new sentence: interventions cleared (${said.join(", ")}).` : "";
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
  /* the forced target of the form was the sentence before's too */
  $("live-src").addEventListener("input", () => {
    if (!$("live-tgt").value) return;
    $("live-tgt").value = "";
    $("live-status").textContent = "A new sentence: the forced target cleared.";
  });
  $("w-reset").addEventListener("click", () => { state.whatif.off.clear(); state.whatif.pin = null; state.whatif.prefix = ""; $("w-prefix").value = ""; whatif(); });
  $("p-run").addEventListener("click", () => runPatch());
}
