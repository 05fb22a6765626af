#!/usr/bin/python3
"""Numerical parity of qkv against PyTorch.

Usage: parity.py DUMP_DIR

DUMP_DIR holds what `qkv grads` wrote: batch.json (token ids, lengths, qkv's loss, the
checkpoint used) and grads.safetensors (qkv's gradient of every parameter). This script
loads the same checkpoint's weights into the same architecture written with PyTorch
(float64, autograd), runs the same batch, and compares the loss and every gradient
tensor. Prints one row per tensor with its worst error relative to the tensor's largest
gradient; exits 1 if any error (or the loss's) is above 1e-4.
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
import yaml

TOLERANCE = 1e-4


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[base + begin : base + end], dtype="<f4").reshape(info["shape"])
        tensors[name] = arr
    return tensors, meta


def positions(T, d):
    pe = torch.zeros(T, d, dtype=torch.float64)
    for i in range(0, d, 2):
        freq = math.exp(-math.log(10000.0) * i / d)
        t = torch.arange(T, dtype=torch.float64)
        pe[:, i] = torch.sin(t * freq)
        if i + 1 < d:
            pe[:, i + 1] = torch.cos(t * freq)
    return pe


def attention(p, prefix, xq, xkv, kv_len, causal, heads):
    B, Tq, d = xq.shape
    Tk = xkv.shape[1]
    dh = d // heads
    q = xq @ p[prefix + ".w_q"] + p[prefix + ".b_q"]
    k = xkv @ p[prefix + ".w_k"] + p[prefix + ".b_k"]
    v = xkv @ p[prefix + ".w_v"] + p[prefix + ".b_v"]
    q = q.view(B, Tq, heads, dh).transpose(1, 2)
    k = k.view(B, Tk, heads, dh).transpose(1, 2)
    v = v.view(B, Tk, heads, dh).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    keys = torch.arange(Tk).view(1, 1, 1, Tk)
    mask = keys < kv_len.view(B, 1, 1, 1)
    if causal:
        mask = mask & (keys <= torch.arange(Tq).view(1, 1, Tq, 1))
    s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    o = o.transpose(1, 2).reshape(B, Tq, d)
    return o @ p[prefix + ".w_o"] + p[prefix + ".b_o"]


def layernorm(p, prefix, x):
    return F.layer_norm(x, (x.shape[-1],), p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)


def ffn(p, prefix, x):
    return torch.relu(x @ p[prefix + ".w_1"] + p[prefix + ".b_1"]) @ p[prefix + ".w_2"] + p[prefix + ".b_2"]


def block(p, norm, x, sublayer, pre):
    """One residual sub-layer: pre-LN x + f(LN(x)), post-LN LN(x + f(x))."""
    if pre:
        return x + sublayer(layernorm(p, norm, x))
    return layernorm(p, norm, x + sublayer(x))


def forward(p, cfg, batch):
    m = cfg["model"]
    d, heads, pre = m["d_model"], m["heads"], m["norm"] == "pre"
    B, S, T = batch["B"], batch["S"], batch["T"]
    src = torch.tensor(batch["src"]).view(B, S)
    tgt_in = torch.tensor(batch["tgt_in"]).view(B, T)
    tgt_out = torch.tensor(batch["tgt_out"]).view(B, T)
    src_len = torch.tensor(batch["src_len"])
    tgt_len = torch.tensor(batch["tgt_len"])
    pe = positions(max(S, T), d)

    x = p["encoder.embed_tokens"][src] * math.sqrt(d) + pe[:S]
    for l in range(m["encoder_layers"]):
        n = f"encoder.layers.{l}"
        x = block(p, n + ".norm1", x, lambda h: attention(p, n + ".self_attn", h, h, src_len, False, heads), pre)
        x = block(p, n + ".norm2", x, lambda h: ffn(p, n + ".ffn", h), pre)
    memory = layernorm(p, "encoder.norm", x) if pre else x

    y = p["decoder.embed_tokens"][tgt_in] * math.sqrt(d) + pe[:T]
    for l in range(m["decoder_layers"]):
        n = f"decoder.layers.{l}"
        y = block(p, n + ".norm1", y, lambda h: attention(p, n + ".self_attn", h, h, tgt_len, True, heads), pre)
        y = block(p, n + ".norm2", y, lambda h: attention(p, n + ".cross_attn", h, memory, src_len, False, heads), pre)
        y = block(p, n + ".norm3", y, lambda h: ffn(p, n + ".ffn", h), pre)
    if pre:
        y = layernorm(p, "decoder.norm", y)
    generator = p["decoder.embed_tokens"] if m["tie_embeddings"] else p["generator"]
    logits = y @ generator.T
    return F.cross_entropy(
        logits.reshape(B * T, -1),
        tgt_out.reshape(-1),
        ignore_index=0,
        label_smoothing=cfg["train"]["label_smoothing"],
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    torch.set_num_threads(1)
    with open(f"{out}/batch.json") as f:
        batch = json.load(f)
    weights, meta = read_safetensors(batch["checkpoint"])
    grads, _ = read_safetensors(f"{out}/grads.safetensors")
    cfg = yaml.safe_load(meta["config"])
    params = {
        name: torch.tensor(w, dtype=torch.float64, requires_grad=True)
        for name, w in weights.items()
        if not name.startswith("optim.")
    }
    loss = forward(params, cfg, batch)
    loss.backward()

    m = cfg["model"]
    print(f"checkpoint {batch['checkpoint']}")
    print(
        f"model d_model {m['d_model']}, {m['heads']} heads, {m['encoder_layers']}+{m['decoder_layers']} layers, "
        f"{m['norm']}-LN, {'tied' if m['tie_embeddings'] else 'separate'} embeddings; batch of {batch['B']} pairs, "
        f"{batch['tokens']} target tokens"
    )
    loss_err = abs(batch["loss"] - loss.item()) / abs(loss.item())
    print(f"loss: qkv {batch['loss']:.9f}  pytorch {loss.item():.9f}  relative error {loss_err:.2e}")
    print(f"{'tensor':46s} {'shape':>12s} {'max |grad|':>11s} {'rel. error':>11s}")
    worst = loss_err
    missing = sorted(set(params) ^ set(grads))
    # Errors are measured against the tensor's largest gradient, floored at 1e-3 of the
    # model's largest: the key biases' gradient is exactly 0 in theory (softmax ignores a
    # shift shared by a row), and float32 rounding there is not an error.
    floor = 1e-3 * max(np.abs(p.grad.numpy()).max() for p in params.values())
    for name in params:
        if name not in grads:
            continue
        ref = params[name].grad.numpy()
        ours = grads[name].astype(np.float64)
        scale = np.abs(ref).max()
        err = np.abs(ours - ref).max() / max(scale, floor)
        worst = max(worst, err)
        shape = "x".join(str(s) for s in ref.shape)
        flag = "" if err <= TOLERANCE else "  <-- above 1e-4"
        print(f"{name:46s} {shape:>12s} {scale:11.3e} {err:11.2e}{flag}")
    if missing:
        print(f"tensors in only one of the two: {missing}")
        sys.exit(1)
    print(f"worst relative error {worst:.2e} over {len(grads)} gradient tensors and the loss (limit {TOLERANCE:.0e})")
    sys.exit(0 if worst <= TOLERANCE else 1)


if __name__ == "__main__":
    main()
