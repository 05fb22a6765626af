// The greedy search both node scripts run on an exported qkv model in onnxruntime-node
// (ort_greedy.mjs checks it against qkv, ort_bench.mjs times it): the encoder over padded
// rows, then the merged decoder one token at a time with its key/value cache, qkv's greedy
// rule and its length cap (2 tokens a source token, <eos> aside, and 10 more, within the
// positions).
export const PAD = 0, BOS = 1, EOS = 2, UNK = 3, SPECIAL = 4;

// qkv's greedy choice (decode.c): EOS first, then the first ordinary token at the maximum
// if it beats EOS, then UNK only when strictly better; never PAD or BOS
export function choose(z, V) {
  let best = EOS;
  for (let v = SPECIAL; v < V; v++) if (z[v] > z[best]) best = v;
  if (z[UNK] > z[best]) best = UNK;
  return best;
}

// A searcher over the two sessions of an export whose config.json is config.
export function greedySearch(ort, encoder, decoder, config) {
  const H = config.decoder_attention_heads, L = config.decoder_layers, dh = config.d_model / H;
  const V = config.vocab_size, maxPositions = config.max_position_embeddings;
  const int64 = (rows, dims) => new ort.Tensor('int64', BigInt64Array.from(rows.flat(), BigInt), dims);
  // the encoder over rows of ids, padded with PAD to the longest and masked
  async function encode(rows) {
    const S = Math.max(...rows.map((r) => r.length));
    const ids = rows.map((r) => [...r, ...Array(S - r.length).fill(PAD)]);
    const mask = int64(rows.map((r) => [...Array(r.length).fill(1), ...Array(S - r.length).fill(0)]), [rows.length, S]);
    const out = await encoder.run({ input_ids: int64(ids, [rows.length, S]), attention_mask: mask });
    return { hidden: out.last_hidden_state, mask, S };
  }
  // greedy search over rows (source ids, EOS last) at once; onStep(row, t, logits, ids so
  // far, the step's outputs), when given, sees each live row's step
  return async function greedy(rows, onStep) {
    const B = rows.length, enc = await encode(rows);
    const feeds = { encoder_hidden_states: enc.hidden, encoder_attention_mask: enc.mask };
    for (let l = 0; l < L; l++)
      for (const kv of ['key', 'value'])
        feeds[`past_key_values.${l}.decoder.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [B, H, 0, dh]);
    const outs = rows.map(() => []), done = rows.map(() => false);
    const limit = rows.map((r) => Math.min(2 * (r.length - 1) + 10, maxPositions - 1));
    let tokens = rows.map(() => BOS);
    for (let t = 0; t < maxPositions - 1 && done.some((x) => !x); t++) {
      feeds.input_ids = int64(tokens.map((x) => [x]), [B, 1]);
      const r = await decoder.run(feeds);
      for (let l = 0; l < L; l++)
        for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.decoder.${kv}`] = r[`present.${l}.decoder.${kv}`];
      tokens = tokens.map((prev, b) => {
        if (done[b]) return PAD;
        const z = r.logits.data.subarray(b * V, (b + 1) * V);
        if (onStep) onStep(b, t, z, outs[b], r);
        const best = choose(z, V);
        if (best !== EOS) outs[b].push(best);
        if (best === EOS || outs[b].length >= limit[b]) done[b] = true;
        return best;
      });
    }
    return { outs, enc };
  };
}
