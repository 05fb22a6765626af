/* source: the watch view (qkv-watch-view-1, from qkv attention --watch and the report): the
 * maps of the watched sentences at every recorded training step, a step slider, and the
 * curves over training (curves.js). It opens on the last step. */
if (WATCH) {
  state.sentences = DATA.snapshots[DATA.snapshots.length - 1].sentences;
  state.step = DATA.snapshots.length - 1;
  state.maps = DATA.snapshots[0].sentences[0];
  $("stepbar").style.display = "flex";
  $("step").max = DATA.snapshots.length - 1;
  $("sentence-box").style.display = "";
  fillSelect($("sentence"), DATA.snapshots[0].sentences.map((_, i) => i),
             DATA.snapshots[DATA.snapshots.length - 1].sentences.map((s, i) => `${i + 1}: ${s.source.slice(0, -1).join(" ")}`));
}
/* the chosen sentence's maps at the chosen step, and the slider and menu saying which */
function watchSync() {
  state.maps = DATA.snapshots[state.step].sentences[state.sentence];
  $("step").value = state.step;
  $("steplabel").textContent = `step ${DATA.snapshots[state.step].step} (${state.step + 1} of ${DATA.snapshots.length})`;
  $("sentence").value = state.sentence;
}
/* the step an address names (int: its integer fields) */
function watchHash(int) {
  if (int("step") >= 0 && int("step") < DATA.snapshots.length) state.step = int("step");
  state.maps = DATA.snapshots[state.step].sentences[state.sentence];
}
