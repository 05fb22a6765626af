/* source: one explained sentence (qkv-explain-1, from qkv explain --text): the explain pane
 * (explain.js, summary.js) on its maps, DATA.maps, with the maps pane one click away. */
if (EXPLAIN) {
  state.sentences = [DATA.maps];
  state.maps = DATA.maps;
  state.explained = DATA;
  state.pane = "explain";
  document.title = "qkv explain";
  $("title").textContent = `qkv explain: ${state.maps.source.slice(0, -1).join(" ")}`;
  $("panes").style.display = "block";
}
