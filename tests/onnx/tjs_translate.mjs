// Translates lines with transformers.js (npm's @huggingface/transformers) from an exported
// qkv model (qkv export --format onnx --reference FILE), offline: the folder's own
// tokenizer.json encodes each line and decodes the output, pipeline('translation') runs
// the graphs with the folder's generation_config.json.
// Usage: node tjs_translate.mjs EXPORT_DIR SRC_FILE HYP_OUT (NODE_MODULES: where the package
// is installed). Writes one translation per line of SRC_FILE; prints one JSON line of
// figures: the lines, those whose tokenizer ids equal qkv's (reference.json's source, both
// read as the source ids the encoder sees), the first line that differs, reference.json's
// id sequences whose decoded text is qkv's and the first that is not, generate()'s
// cross-attention weights against reference.json's (the largest difference, the steps
// compared), sentences/s, and
// how many times anything asked for a URL off this machine (the run must stay offline).
// Exits 0 whatever it finds: the calling test judges the figures.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [dir, srcPath, hypPath] = process.argv.slice(2);
let remote = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (url, ...rest) => {
  if (/^(https?|wss?):/i.test(String(url?.url ?? url))) {
    remote++;
    return Promise.reject(new Error(`offline test: ${url}`));
  }
  return realFetch(url, ...rest);
};
const require = createRequire(path.resolve(process.env.NODE_MODULES) + '/');
const tjs = await import(pathToFileURL(require.resolve('@huggingface/transformers')).href);
const { env, pipeline } = tjs;
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.useBrowserCache = false;
env.useFSCache = false;
env.localModelPath = path.dirname(path.resolve(dir)) + '/';

const lines = fs.readFileSync(srcPath, 'utf8').split('\n');
if (lines.at(-1) === '') lines.pop();
const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8'));
const translator = await pipeline('translation', path.basename(path.resolve(dir)), { dtype: 'fp32', device: 'cpu' });

// the ids each side gives, as the source ids the encoder reads them
const asSource = (ids) => JSON.stringify(ids.map((id) => ref.source_of_id[id]));
let idsEqual = 0, compared = 0, firstDiff = null;
const real = lines.filter((l) => l.trim() !== '');
real.forEach((line, i) => {
  const ids = Array.from(translator.tokenizer(line).input_ids.data, Number);
  compared++;
  if (asSource(ids) === asSource(ref.lines[i].source)) idsEqual++;
  else firstDiff ??= { line, transformers_js: ids, qkv: ref.lines[i].source };
});
// reference.json's id sequences, decoded as the pipeline decodes an output (specials
// skipped): the text qkv writes for each
let decodingEqual = 0, firstDecodingDiff = null;
for (const c of ref.decoding ?? []) {
  const text = translator.tokenizer.decode(c.ids, { skip_special_tokens: true });
  if (text === c.text) decodingEqual++;
  else firstDecodingDiff ??= { ids: c.ids, transformers_js: text, qkv: c.text };
}
// qkv's length cap, 2 tokens a source token (<eos> aside) and 10 more, within the positions:
// a bound of the line's, which generation_config.json cannot state (the pipeline's default
// is 256 new tokens). One new token more: the folder's forced_eos_token_id spends the
// last one on <eos>.
const maxPositions = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).max_position_embeddings;
const cap = (line) => Math.min(2 * (translator.tokenizer(line).input_ids.dims.at(-1) - 1) + 10, maxPositions - 1);
// generate() with output_attentions: each step's cross_attentions.{layer} outputs, against
// reference.json's weights at the line's source positions while the output is qkv's
const H = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).decoder_attention_heads;
let crossDiff = 0, crossSteps = 0;
for (let i = 0; i < real.length; i++) {
  const want = ref.lines[i], enc = translator.tokenizer(real[i]);
  const res = await translator.model.generate({ ...enc, max_new_tokens: cap(real[i]) + 1, output_attentions: true,
    return_dict_in_generate: true });
  const seq = Array.from(res.sequences.data, Number).slice(1); // <bos> first
  (res.cross_attentions ?? []).forEach((layers, t) => {
    if (t > want.output.length || want.output.slice(0, t).some((x, k) => x !== seq[k])) return;
    layers.forEach((a, l) => {
      const S = a.dims.at(-1);
      for (let h = 0; h < H; h++)
        want.cross_attentions[l][h][t].forEach((x, s) => (crossDiff = Math.max(crossDiff, Math.abs(a.data[h * S + s] - x))));
    });
    crossSteps++;
  });
}
const out = [];
const t0 = performance.now();
for (const line of lines)
  out.push(line.trim() === '' ? '' : (await translator(line, { max_new_tokens: cap(line) + 1 }))[0].translation_text);
const seconds = (performance.now() - t0) / 1000;
fs.writeFileSync(hypPath, out.map((x) => x + '\n').join(''));
console.log(JSON.stringify({
  lines: lines.length, tokenizer_compared: compared, tokenizer_ids_equal: idsEqual, first_ids_difference: firstDiff,
  cross_attention_max_diff: crossDiff, cross_steps_compared: crossSteps,
  decoding_compared: (ref.decoding ?? []).length, decoding_equal: decodingEqual, first_decoding_difference: firstDecodingDiff,
  sentences_per_second: lines.length / seconds, remote_requests: remote,
}));
