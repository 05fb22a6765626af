// Times greedy decoding of an exported qkv model (qkv export --format onnx) in
// onnxruntime-node, as a user who deploys it would run it: the encoder and the merged
// decoder with its key/value cache, graph optimizations on, intra-op threads THREADS, the
// lines sorted by length and decoded 64 at a time (as qkv translate groups them), qkv's
// greedy rule and length cap (greedy.mjs: the search ort_greedy.mjs checks against qkv).
// The folder's tokenizer.json (read by transformers.js) gives the ids and reads the
// outputs back. Tokenizing is not timed; the sessions are made and
// warmed on one group first.
// Usage: node tests/onnx/ort_bench.mjs EXPORT_DIR SRC_FILE THREADS HYP_OUT [REPEAT]
// (NODE_MODULES: where onnxruntime-node and @huggingface/transformers are installed:
// tests/onnx/node_modules, by scripts/deps.sh --with-onnx). Prints one JSON line: lines,
// sentences_per_second (the fastest of REPEAT runs, default 2 when run alone), the seconds of each run,
// the output tokens; writes the translations, one per line.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

import { greedySearch } from './greedy.mjs';

const [dir, srcPath, threadsArg, hypPath, repeatArg] = process.argv.slice(2);
const threads = Number(threadsArg), repeat = Number(repeatArg ?? 2);
const require = createRequire(path.resolve(process.env.NODE_MODULES) + '/');
const ort = require('onnxruntime-node');
const tjs = await import(pathToFileURL(require.resolve('@huggingface/transformers')).href);
tjs.env.allowRemoteModels = false;
tjs.env.localModelPath = path.dirname(path.resolve(dir)) + '/';
const tokenizer = await tjs.AutoTokenizer.from_pretrained(path.basename(path.resolve(dir)));

const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
const maxPositions = config.max_position_embeddings;
const opts = { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  executionMode: 'sequential' };
const encoder = await ort.InferenceSession.create(path.join(dir, 'onnx/encoder_model.onnx'), opts);
const decoder = await ort.InferenceSession.create(path.join(dir, 'onnx/decoder_model_merged.onnx'), opts);
const greedy = greedySearch(ort, encoder, decoder, config);

const lines = fs.readFileSync(srcPath, 'utf8').split('\n');
if (lines.at(-1) === '') lines.pop();
const src = lines.map((line) => Array.from(tokenizer(line).input_ids.data, Number).slice(0, maxPositions - 1));
const order = src.map((_, i) => i).filter((i) => src[i].length > 1).sort((a, b) => src[a].length - src[b].length);
const GROUP = 64;
const out = lines.map(() => []);
async function all() {
  for (let g = 0; g < order.length; g += GROUP) {
    const idx = order.slice(g, g + GROUP), res = await greedy(idx.map((i) => src[i]));
    idx.forEach((i, k) => (out[i] = res.outs[k]));
  }
}
await greedy(order.slice(0, GROUP).map((i) => src[i])); // the sessions warmed
const seconds = [];
for (let k = 0; k < repeat; k++) {
  const t0 = performance.now();
  await all();
  seconds.push((performance.now() - t0) / 1000);
}
fs.writeFileSync(hypPath, out.map((ids) => tokenizer.decode(ids, { skip_special_tokens: true }) + '\n').join(''));
console.log(JSON.stringify({
  lines: lines.length, threads, sentences_per_second: lines.length / Math.min(...seconds), seconds,
  output_tokens: out.reduce((a, o) => a + o.length, 0),
}));
