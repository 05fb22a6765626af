/* state: everything on the page that changes, in one object that every part reads, and
 * what the data says about the page, read once and never changed. No panel keeps
 * variables of its own: it draws from state and DATA, and a control changes state, then
 * calls sync() (controls.js). The data sources (source_*.js) fill in the sentences. */
const state = {
  /* the maps pane: the sentence and training step shown, and how (controls.js keeps the
     page's address in step with these) */
  sentence: 0, step: 0, kind: "cross", layer: 0, head: "avg", value: "weights", mode: "heatmap", query: -1, sort: "key",
  /* the explain pane: which pane is open, the word chosen, every method or the default ones */
  pane: "maps", word: 0, every: false,
  /* the sentences one can choose between (each a maps.json object), and the maps on screen */
  sentences: [], maps: null,
  /* the explanation on screen: qkv explain's data, or the live page's POST /v1/explain answer */
  explained: null,
  /* the live page: the body of the /v1/attention request the maps answer, and the key of
     the explanation on its way (null when none is) */
  asked: null, explaining: null,
  /* the live page's what-if: heads switched off (kind/layer/head keys), the pinned cell, whether
     a click pins, the forced prefix, the last answer, the number of the latest request, the
     last patching answer */
  whatif: { off: new Set(), pin: null, pinMode: false, prefix: "", answer: null, busy: 0, patch: null },
  /* the script errors seen, for the page's checks */
  errors: [],
};
window.addEventListener("error", e => state.errors.push(String(e.message)));
const DATA = JSON.parse(document.getElementById("attn-data").textContent);
const WATCH = DATA.format === "qkv-watch-view-1";
const HEADS = DATA.format === "qkv-heads-view-1"; /* the head grid, then the maps of DATA.sentences */
const LIVE = DATA.format === "qkv-live-1"; /* qkv serve's page: the maps come from POST /v1/attention */
const EXPLAIN = DATA.format === "qkv-explain-1"; /* qkv explain's page: its explain pane, then DATA.maps */
const MAPS = !WATCH && !HEADS && !LIVE && !EXPLAIN; /* one sentence's maps.json (qkv-attention-2) */
/* the head grid's heads: a heads view's, or qkv heads' output beside the served run */
const HEAD_LIST = HEADS ? DATA.heads : LIVE && DATA.head_analysis ? DATA.head_analysis.heads : null;
/* the score the grid is coloured and ranked by: the default order qkv heads chose from its
   pruning curves (a score field of every head), "importance" for files from before it */
const HEAD_ORDER = (() => {
  const o = HEADS ? DATA.default_order : LIVE && DATA.head_analysis ? DATA.head_analysis.default_order : undefined;
  return ["importance", "importance_raw", "delta_nll"].includes(o) ? o : "importance";
})();
