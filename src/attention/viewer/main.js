/* main: the page opens. Every part is loaded and each data source has filled in state;
 * the maps open on their last layer, in the view the address names. */
/* maps that carry "source_unk" (qkv serve's answers; any file that holds it): their words read as <unk> marked */
(WATCH ? DATA.snapshots.flatMap(s => s.sentences) : state.sentences).forEach(M => markUnknown(M, M.source_unk));
if (EXPLAIN) markUnknown(DATA.maps, DATA.source_unk);
/* (the live page waits for a sentence to be typed: source_live.js) */
if (state.maps && !LIVE) {
  state.layer = state.maps.cross.length - 1;
  readHash();
  sync();
} else if (!LIVE) { /* a heads view without sentences: the grid alone */
  for (const e of document.querySelectorAll(".sentence, .controls, .main, #help")) e.style.display = "none";
  renderHeads();
}
