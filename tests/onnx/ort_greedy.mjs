// Runs an exported qkv model (qkv export --format onnx --reference FILE) in onnxruntime-node
// and compares it with qkv's own figures in the folder's reference.json:
//   - the encoder's output for each line alone, and for all lines in one padded batch;
//   - greedy search with the decoder's key/value cache, one line at a time and all lines in
//     one batch, each step's log-probabilities against qkv's (while the ids agree);
//   - each step's cross-attention weights (the decoder's cross_attentions.{layer} outputs)
//     against reference.json's, at the line's source positions;
//   - the greedy ids themselves.
// Usage: node ort_greedy.mjs EXPORT_DIR TGT_VOCAB HYP_OUT (NODE_MODULES: where onnxruntime-node
// is installed). Prints one JSON line of figures; writes the greedy output, one line per
// reference line, as the target vocabulary's tokens joined by spaces (the word tokenizer's
// detokenization). Exits 0 whatever it finds: the calling test judges the figures.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

import { greedySearch } from './greedy.mjs';

const [dir, vocabPath, hypPath] = process.argv.slice(2);
const require = createRequire(path.resolve(process.env.NODE_MODULES) + '/');
const ort = require('onnxruntime-node');

const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8'));
const vocab = fs.readFileSync(vocabPath, 'utf8').split('\n');
const H = config.decoder_attention_heads, L = config.decoder_layers, D = config.d_model;
// the export's ids (qkv export's joint vocabulary): the target vocabulary's ids first, at
// qkv's own ids, then the source's own tokens, which the decoder never emits
const V = config.vocab_size, VT = ref.target_vocab_size;

const opts = { intraOpNumThreads: 1, interOpNumThreads: 1 };
const encoder = await ort.InferenceSession.create(path.join(dir, 'onnx/encoder_model.onnx'), opts);
const decoder = await ort.InferenceSession.create(path.join(dir, 'onnx/decoder_model_merged.onnx'), opts);

function logSoftmax(z) {
  let mx = -Infinity;
  for (const x of z) mx = Math.max(mx, x);
  let s = 0;
  for (const x of z) s += Math.exp(x - mx);
  const norm = mx + Math.log(s);
  return Array.from(z, (x) => x - norm);
}

const greedy = greedySearch(ort, encoder, decoder, config);

const lines = ref.lines, n = lines.length;
let neverMax = -Infinity; // the largest log-probability of an id past the target vocabulary
let encDiff = 0, lpDiff = 0, stepsCompared = 0, identical = 0, batchIdentical = 0, batchEncDiff = 0, batchLpDiff = 0;
let crossDiff = 0, batchCrossDiff = 0, crossCompared = 0;
const hyps = [];
// step t's log-probabilities and cross-attention weights against qkv's, while the ids so far
// are qkv's; diffOf(d, cross) takes each difference
const compareSteps = (line, diffOf) => (b, t, z, sofar, r) => {
  const want = line.log_probs[t];
  if (!want || sofar.length !== t || line.output.slice(0, t).some((x, i) => x !== sofar[i])) return;
  const lp = logSoftmax(z);
  for (let v = 0; v < VT; v++) diffOf(Math.abs(lp[v] - want[v]), false);
  for (let v = VT; v < V; v++) neverMax = Math.max(neverMax, lp[v]);
  for (let l = 0; l < L; l++) {
    const a = r[`cross_attentions.${l}`], Sp = a.dims[3]; // (B, H, 1, S padded)
    for (let h = 0; h < H; h++)
      line.cross_attentions[l][h][t].forEach((x, s) => diffOf(Math.abs(a.data[(b * H + h) * Sp + s] - x), true));
  }
  crossCompared++;
  stepsCompared++;
};
const t0 = performance.now();
for (const line of lines) {
  const res = await greedy([line.source], compareSteps(line, (d, cross) => cross ? (crossDiff = Math.max(crossDiff, d)) :
    (lpDiff = Math.max(lpDiff, d))));
  const h = res.enc.hidden.data;
  line.encoder.forEach((row, s) => row.forEach((x, c) => (encDiff = Math.max(encDiff, Math.abs(h[s * D + c] - x)))));
  if (JSON.stringify(res.outs[0]) === JSON.stringify(line.output)) identical++;
  hyps.push(res.outs[0].map((id) => vocab[id]).join(' '));
}
const seconds = (performance.now() - t0) / 1000;
// every line in one padded batch: the same ids, the same figures at the real positions
const batchSteps = (b, t, z, sofar, r) => compareSteps(lines[b], (d, cross) => cross ?
  (batchCrossDiff = Math.max(batchCrossDiff, d)) : (batchLpDiff = Math.max(batchLpDiff, d)))(b, t, z, sofar, r);
const batch = await greedy(lines.map((l) => l.source), batchSteps);
const S = batch.enc.S, bh = batch.enc.hidden.data;
lines.forEach((line, b) => {
  line.encoder.forEach((row, s) =>
    row.forEach((x, c) => (batchEncDiff = Math.max(batchEncDiff, Math.abs(bh[(b * S + s) * D + c] - x)))));
  if (JSON.stringify(batch.outs[b]) === JSON.stringify(line.output)) batchIdentical++;
});
fs.writeFileSync(hypPath, hyps.map((h) => h + '\n').join(''));
console.log(JSON.stringify({
  lines: n, identical, batch_identical: batchIdentical, encoder_max_diff: encDiff, batch_encoder_max_diff: batchEncDiff,
  log_prob_max_diff: lpDiff, batch_log_prob_max_diff: batchLpDiff, steps_compared: stepsCompared,
  cross_attention_max_diff: crossDiff, batch_cross_attention_max_diff: batchCrossDiff, cross_steps_compared: crossCompared,
  export_ids: V, target_ids: VT, source_only_max_log_prob: V > VT ? neverMax : null, sentences_per_second: n / seconds,
}));
