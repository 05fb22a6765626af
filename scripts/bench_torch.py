#!/usr/bin/python3
"""The PyTorch peer of `qkv bench`: the same architecture (scripts/qkv_torch.py), the same
batches in the same order, the same optimizer step (label-smoothed loss, backward, norm
clipping, Adam with the warmup schedule), dropout on, float32; then greedy decoding of the
same sentences the same way, twice: the decoder re-run over the whole prefix at each step,
and one position a step over cached keys and values (as fairseq and Hugging Face decode).

Usage: bench_torch.py DUMP.json THREADS     (DUMP.json from `qkv bench --dump`)
Prints one JSON line like qkv bench's. Run it with OPENBLAS_NUM_THREADS set as wanted.
"""
import json
import math
import resource
import sys
import time

import torch

from parity import read_safetensors
from qkv_torch import cross_keys_values, decode, decode_step, encode, forward, positions, x_dtype


def model_config(job):
    """The model and loss settings of a dump, as qkv_torch.forward takes them."""
    m = {k: job[k] for k in ("d_model", "heads", "encoder_layers", "decoder_layers")}
    m["norm"] = "pre" if job["pre_norm"] else "post"
    m["tie_embeddings"] = bool(job["tie_embeddings"])
    return {"model": m, "train": {"label_smoothing": job["label_smoothing"]}}


def init_params(job):
    """Fresh parameters named and shaped as qkv's, initialised as qkv initialises them."""
    d, ff, V_src, V_tgt = job["d_model"], job["d_ff"], job["src_vocab"], job["tgt_vocab"]
    m = model_config(job)["model"]
    shapes = {"encoder.embed_tokens": (V_src, d), "decoder.embed_tokens": (V_tgt, d)}
    if not m["tie_embeddings"]:
        shapes["generator"] = (V_tgt, d)
    attn = [("w_q", (d, d)), ("b_q", (d,)), ("w_k", (d, d)), ("b_k", (d,)), ("w_v", (d, d)), ("b_v", (d,)),
            ("w_o", (d, d)), ("b_o", (d,))]
    ffn = [("w_1", (d, ff)), ("b_1", (ff,)), ("w_2", (ff, d)), ("b_2", (d,))]
    norm = [("weight", (d,)), ("bias", (d,))]
    for side, layers, subs in (("encoder", m["encoder_layers"], ["self_attn", "norm1", "ffn", "norm2"]),
                               ("decoder", m["decoder_layers"],
                                ["self_attn", "norm1", "cross_attn", "norm2", "ffn", "norm3"])):
        for l in range(layers):
            for sub in subs:
                kind = attn if "attn" in sub else ffn if sub == "ffn" else norm
                for leaf, shape in kind:
                    shapes[f"{side}.layers.{l}.{sub}.{leaf}"] = shape
        if m["norm"] == "pre":
            for leaf, shape in norm:
                shapes[f"{side}.norm.{leaf}"] = shape
    params = {}
    for name, shape in shapes.items():
        if len(shape) == 2 and "embed" not in name and name != "generator":
            w = torch.empty(shape)
            torch.nn.init.xavier_uniform_(w)
        elif len(shape) == 2:
            w = torch.randn(shape) / math.sqrt(d)
        else:
            w = torch.ones(shape) if name.endswith("weight") else torch.zeros(shape)
        params[name] = w.requires_grad_()
    return params


class Trainer:
    """qkv's optimizer step: label-smoothed loss, backward, norm clipping, Adam with the
    noam schedule, dropout on, float32."""

    def __init__(self, job):
        self.job, self.cfg = job, model_config(job)
        self.params = init_params(job)
        self.plist = list(self.params.values())
        self.opt = torch.optim.Adam(self.plist, lr=1e-3, betas=(job["beta1"], job["beta2"]), eps=job["eps"])
        self.step_no = 0

    def lr_at(self, step):
        d, job = self.job["d_model"], self.job
        return job["lr_factor"] / math.sqrt(d) * min(step ** -0.5, step * job["warmup"] ** -1.5)

    def step(self, batch):
        self.step_no += 1
        self.opt.zero_grad(set_to_none=True)
        loss = forward(self.params, self.cfg, batch, dropout=self.job["dropout"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.plist, self.job["clip_norm"])
        for group in self.opt.param_groups:
            group["lr"] = self.lr_at(self.step_no)
        self.opt.step()
        return loss


def greedy(params, m, sources, cached):
    """The greedy translations (lists of token ids, EOS left out) of sources, in groups of
    64: the decoder re-run over the whole prefix at each step, or one position a step over
    cached keys and values."""
    outs = []
    pe = positions(max(2 * len(s) + 12 for s in sources), m["d_model"], x_dtype(params))
    with torch.no_grad():
        for g in range(0, len(sources), 64):
            group = sources[g : g + 64]
            B, S = len(group), max(len(s) for s in group) + 1
            src = torch.zeros(B, S, dtype=torch.long)
            for i, s in enumerate(group):
                src[i, : len(s)] = torch.tensor(s)
                src[i, len(s)] = 2
            src_len = torch.tensor([len(s) + 1 for s in group])
            memory = encode(params, m, src, src_len)
            if cached:
                cross = cross_keys_values(params, m, memory)
                cache = [None] * m["decoder_layers"]
                src_mask = (torch.arange(S).view(1, S) < src_len.view(B, 1)).view(B, 1, 1, S)
            limit = torch.tensor([2 * len(s) + 10 for s in group])
            out = torch.ones(B, 1, dtype=torch.long)  # BOS
            done = torch.zeros(B, dtype=torch.bool)
            for t in range(1, int(limit.max()) + 1):
                if cached:
                    last = decode_step(params, m, cross, cache, out[:, -1], t - 1, src_mask, pe)
                else:
                    last = decode(params, m, memory, src_len, out, torch.full((B,), t))[:, -1, :].clone()
                last[:, 0] = float("-inf")
                last[:, 1] = float("-inf")
                nxt = last.argmax(-1)
                nxt = torch.where(done, torch.zeros_like(nxt), nxt)
                done = done | (nxt == 2) | (t >= limit)
                out = torch.cat([out, nxt.view(B, 1)], dim=1)
                if bool(done.all()):
                    break
            for i in range(B):
                row = out[i, 1:].tolist()
                outs.append([x for x in row[: row.index(2) if 2 in row else len(row)] if x != 0])
    return outs


def main():
    dump, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    with open(dump) as f:
        job = json.load(f)
    m = model_config(job)["model"]
    trainer = Trainer(job)
    warm = job["warmup_steps"]
    # one JSON line per recorded step, written while qkv trained
    with open(job["batches_file"]) as f:
        batches = [json.loads(line) for line in f]
    tokens = 0
    t_train = 0.0
    loss = None
    for step, batch in enumerate(batches, start=1):
        t0 = time.perf_counter()
        loss = trainer.step(batch)
        dt = time.perf_counter() - t0
        if step > warm:
            t_train += dt
            tokens += batch["tokens"]
    steps = len(batches) - warm
    params = trainer.params

    # greedy decoding with the weights qkv trained (so both decode the same sentences to
    # the same translations: the same work), groups of 64, twice: the decoder re-run over
    # the whole prefix at each step, and with a key/value cache (as fairseq and Hugging
    # Face decode), which must give the same translations
    if job.get("weights"):
        trained, _ = read_safetensors(job["weights"])
        params = {name: torch.tensor(w) for name, w in trained.items()}
    sources = job["decode_src"]
    decoded = {}
    if sources:  # qkv bench --decode 0 dumps none: training alone is timed
        t0 = time.perf_counter()
        whole = greedy(params, m, sources, cached=False)
        t_decode = time.perf_counter() - t0
        t0 = time.perf_counter()
        cached = greedy(params, m, sources, cached=True)
        t_cached = time.perf_counter() - t0
        # the same translations but where float32 rounds a near-tie the other way: counted
        decoded = {
            "decode_sentences_per_s": len(sources) / t_decode, "decoded_tokens": int(sum(len(o) for o in whole)),
            "decode_cached_sentences_per_s": len(sources) / t_cached,
            "decode_cached_differ": sum(a != b for a, b in zip(whole, cached)),
        }
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({
        "impl": "pytorch", "threads": threads, "steps": steps, "tokens_per_s": tokens / t_train,
        "step_ms": 1e3 * t_train / steps, "peak_rss_mb": rss, **decoded,
        "final_loss": float(loss), "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
