#!/usr/bin/python3
"""Numerical parity of qkv against PyTorch.

Usage: parity.py DUMP_DIR

DUMP_DIR holds what `qkv grads` wrote: batch.json (token ids, lengths, qkv's loss, the
checkpoint used) and grads.safetensors (qkv's gradient of every parameter). This script
loads the same checkpoint's weights into the same architecture written with PyTorch
(float64, autograd), runs the same batch, and compares the loss and every gradient
tensor. Prints one row per tensor with its worst error relative to the tensor's largest
gradient; exits 1 if any error (or the loss's) is above 1e-4.

A ReLU input within float32 rounding of zero that carries gradient makes the batch unfit:
qkv's float32 may put it on the other side of zero than float64 does, and a whole hidden
unit's gradient then differs, legitimately. Such a batch exits 3 (parity.sh takes the
next) before any comparison.
"""
import json
import struct
import sys

import numpy as np
import torch
import yaml

import qkv_torch
from qkv_torch import forward

TOLERANCE = 1e-4
# A ReLU input this close to zero, relative to the sum of its terms' magnitudes, is within
# float32 rounding of the kink (a sum of 64-256 float32 products rounds at about 1e-7 of
# that; seen: inputs at 1.5e-9 and 9e-9 of it took the other side in qkv, one at 2e-7 did
# not).
KINK_MARGIN = 1e-7


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
    qkv_torch.relu_inputs = []
    loss = forward(params, cfg, batch)
    loss.backward()
    for i, (h, terms, out) in enumerate(qkv_torch.relu_inputs):
        # an input on either side of zero matters where its output's gradient is not 0
        near = (h.detach().abs() < KINK_MARGIN * terms) & (out.grad != 0)
        if near.any():
            print(f"batch unfit: {int(near.sum())} ReLU input(s) of feed-forward {i} within float32 rounding of zero")
            sys.exit(3)

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
