/* source: the live server (qkv-live-1, qkv serve's page).
 * A sentence typed and Enter pressed asks the server for its n-best list and the anatomy of
 * the best translation (or of the forced target, or of an n-best entry clicked); the maps
 * then show as in any other view. The checkpoint menu asks again of another checkpoint. */
function showSections(on) {
  for (const e of document.querySelectorAll(".sentence:not(#live-status):not(#live-nbest), body > .controls, .main, #help"))
    e.style.display = on ? "" : "none";
}

async function ask(tgt) {
  const src = $("live-src").value, beam = Math.max(1, Math.min(64, parseInt($("live-beam").value, 10) || 5));
  const body = { src, beam, nbest: beam, checkpoint: $("live-ckpt").value };
  const forced = tgt !== undefined ? tgt : $("live-tgt").value;
  if (forced) body.tgt = forced;
  if ($("live-mask").value) body.mask_heads = $("live-mask").value;
  $("live-status").textContent = "translating\u2026";
  let answer;
  try {
    const r = await fetch("/v1/attention", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    answer = await r.json();
    if (!r.ok) { $("live-status").textContent = `${r.status}: ${answer.error}`; return false; }
  } catch (e) {
    $("live-status").textContent = `the server did not answer: ${e}`;
    return false;
  }
  if (!state.maps) state.layer = answer.cross.length - 1; /* the first map opens on the last layer, as the others do */
  markUnknown(answer, answer.source_unk);
  $("w-cleared").textContent = state.asked && state.asked.src !== src ? clearInterventions(src) : "";
  state.maps = answer;
  state.asked = body;
  state.sentences = [state.maps];
  $("title").textContent = `qkv serve: ${state.maps.checkpoint}, step ${state.maps.step}`; /* the checkpoint picked, not the one loaded first */
  $("live-status").textContent = `${state.maps.checkpoint} (step ${state.maps.step})` + (state.maps.forced ? ": the forced target's maps" : ": the best translation's maps") +
    (unknownWords(state.maps) ? `; not in the source vocabulary, read as <unk>: ${unknownWords(state.maps)}` : "");
  const list = $("live-nbest");
  list.textContent = "";
  state.maps.translations.forEach(h => {
    const li = html("li", {}, list);
    const a = html("a", { href: "#" }, li, h.text || "(empty)");
    a.addEventListener("click", ev => { ev.preventDefault(); $("live-tgt").value = h.text; ask(h.text); });
    html("span", {}, li, `  score ${h.score.toFixed(4)}`);
  });
  showSections(true);
  $("panes").style.display = "block";
  if (state.layer >= state.maps[state.kind].length) state.layer = state.maps[state.kind].length - 1;
  sync();
  $("whatif").style.display = "block";
  if (!$("p-clean").value) $("p-clean").value = $("p-corrupt").value = src;
  renderWhatifHeads();
  await whatif(true);
  return true;
}

/* ---- live: the explain pane (POST /v1/explain) ---------------------------------------------------
 * The pane explains the translation the maps show, forced (the maps' forced target, or the
 * best translation of their search: with beam 5 that is not the greedy one `qkv explain
 * --text` would explain), of the sentence, checkpoint and heads masked the maps were asked
 * for. A shown translation the target vocabulary cannot read back (an <unk> the model wrote,
 * shown as a source word) is refused by the server: then the greedy translation, said so.
 * It asks once the pane is opened, and again only when one of those changed. */
function explainBody(greedy) {
  const b = { src: state.asked.src, checkpoint: state.asked.checkpoint };
  if (state.asked.tgt) b.tgt = state.asked.tgt;
  else if (!greedy && state.maps && Array.isArray(state.maps.translations) && state.maps.translations.length) b.tgt = state.maps.translations[0].text;
  if (state.asked.mask_heads) b.mask_heads = state.asked.mask_heads;
  return b;
}
const explainKey = () => state.asked ? JSON.stringify(explainBody()) : "";
async function explainLive() {
  let body = explainBody(false), fellBack = "";
  const key = JSON.stringify(body);
  if (state.explained && state.explained.key === key || state.explaining === key) return;
  state.explaining = key;
  for (const id of ["xwords", "xsay", "xsource", "xprefix", "xkey", "xsummary"]) $(id).textContent = "";
  $("xstatus").textContent = "explaining\u2026";
  try {
    let a;
    try {
      a = await postJSON("/v1/explain", body);
    } catch (e) {
      if (state.asked.tgt || !body.tgt) throw e;
      fellBack = String(e.message || e), body = explainBody(true);
      a = await postJSON("/v1/explain", body);
    }
    if (state.explaining !== key) return; /* another sentence since */
    state.explaining = null;
    markUnknown(a.maps, a.source_unk);
    a.key = key;
    state.explained = a;
    $("xstatus").textContent = `${a.checkpoint} (step ${a.step}): ` +
      (state.asked.tgt ? "the forced target" : body.tgt ? "the translation shown" :
       "the greedy translation, as qkv explain --text explains it" + (fellBack ? ` (the one shown was refused: ${fellBack})` : "")) +
      (body.mask_heads ? `, with ${body.mask_heads} masked` : "") + (sameMaps(a.maps, state.maps) ? "." :
      "; the maps pane shows other words, so the heads named here do not open it.");
    if (state.pane === "explain") render();
  } catch (e) {
    if (state.explaining === key) state.explaining = null, $("xstatus").textContent = String(e.message || e);
  }
}

if (LIVE) {
  document.title = "qkv serve";
  $("title").textContent = `qkv serve: ${DATA.model.checkpoint}, step ${DATA.model.step}`;
  $("live").style.display = "";
  fillSelect($("live-ckpt"), DATA.model.checkpoints, DATA.model.checkpoints);
  $("live-ckpt").value = DATA.model.checkpoint;
  $("live").addEventListener("submit", ev => { ev.preventDefault(); if ($("live-src").value.trim()) ask(); });
  $("live-ckpt").addEventListener("change", () => { if (state.maps) ask(); });
  showSections(false);
  if (HEAD_LIST) {
    $("heads").style.display = "block";
    renderHeads();
  }
  /* an address that ends #text=SENTENCE asks that sentence at once: a link to its analysis */
  const linked = new URLSearchParams(location.hash.slice(1)).get("text");
  if (linked && linked.trim() && !location.hash.includes("selftest")) { $("live-src").value = linked; ask(); }
}
