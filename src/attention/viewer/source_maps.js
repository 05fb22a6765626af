/* source: one sentence's maps (maps.json, qkv-attention-2, from qkv attention --text), and
 * any data no other source claims. */
if (MAPS) {
  state.sentences = [DATA];
  state.maps = DATA;
}
