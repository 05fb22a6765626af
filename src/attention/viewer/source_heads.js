/* source: the heads view (qkv-heads-view-1, from qkv heads): the grid of every head
 * (heads_grid.js) above the maps of a few sentences, opened on the first-ranked head. */
if (HEADS) {
  state.sentences = DATA.sentences || [];
  state.maps = state.sentences[0];
  document.title = "qkv attention heads";
  $("title").textContent = "qkv attention heads";
  $("heads").style.display = "block";
  $("sentence-box").style.display = "";
  fillSelect($("sentence"), state.sentences.map((_, i) => i), state.sentences.map((s, i) => `${i + 1}: ${s.source.slice(0, -1).join(" ")}`));
}
function headsSync() {
  state.maps = state.sentences[state.sentence];
  $("sentence").value = state.sentence;
}
/* the chosen sentence, on the first-ranked head (the address may then name another) */
function headsHash() {
  state.maps = state.sentences[state.sentence];
  const top = topHead();
  if (top && state.maps[top.kind] && top.layer < state.maps[top.kind].length && top.head < state.maps.heads)
    state.kind = top.kind, state.layer = top.layer, state.head = top.head;
}
