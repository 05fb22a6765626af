#!/usr/bin/python3
"""The PyTorch side of `make race`: the qkv architecture (scripts/qkv_torch.py) trained
on the batches qkv would train on, in the same order, for a given number of seconds of
training (reading the batches is not counted), with the optimizer step of
scripts/bench_torch.py and its faster thread setting (1 or 2 torch threads, measured on a
few steps first).

The trained weights then go into a copy of a checkpoint of the qkv run over the same
vocabulary and data (the template): its tensors are overwritten in place and both of its
checksums computed again, so `qkv translate` decodes the PyTorch model exactly as it
decodes qkv's, and the two BLEU scores differ by the training alone.

Usage: race_torch.py JOB.json SECONDS TEMPLATE.safetensors OUT.safetensors
  (JOB.json from `qkv bench --batches-only --dump JOB.json`)
Prints one JSON line: steps, target tokens, seconds, threads, last loss.
"""
import json
import os
import re
import struct
import sys
import time

import numpy as np
import torch

from bench_torch import Trainer

M64 = (1 << 64) - 1


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def checksum64(data):
    """qkv's checksum64 (src/util/checksum.c) of a bytes-like object."""
    n = len(data)
    h = 0x27D4EB2F165667C5 ^ n
    whole = n // 8 * 8
    words = np.frombuffer(data, dtype="<u8", count=n // 8)
    for at in range(0, len(words), 1 << 20):
        for w in words[at : at + (1 << 20)].tolist():
            h = (rotl(h ^ ((w * 0x9E3779B185EBCA87) & M64), 31) * 0xC2B2AE3D27D4EB4F) & M64
    for b in bytes(data[whole:]):
        h = (rotl(h ^ ((b * 0x165667B19E3779F9) & M64), 23) * 0x9E3779B185EBCA87) & M64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    return h


def set_digits(header, key, value):
    """header (bytearray) with the 16 hex digits after "key":" replaced."""
    m = re.search(rb'"' + key + rb'":"([0-9a-f]{16})"', header)
    if not m:
        sys.exit(f"race_torch.py: the template has no {key.decode()} field")
    header[m.start(1) : m.end(1)] = b"%016x" % value


def write_checkpoint(template, out, params):
    with open(template, "rb") as f:
        blob = bytearray(f.read())
    (n,) = struct.unpack("<Q", blob[:8])
    header = bytearray(blob[8 : 8 + n])
    info = json.loads(bytes(header))
    meta = info.pop("__metadata__")
    data = memoryview(blob)[8 + n :]
    if checksum64(data) != int(meta["checksum"], 16):
        sys.exit(f"race_torch.py: {template}: its data checksum does not verify (this port of checksum64 is wrong, "
                 "or the file is damaged)")
    for name, w in params.items():
        begin, end = info[name]["data_offsets"]
        a = w.detach().numpy().astype("<f4")
        if list(a.shape) != info[name]["shape"]:
            sys.exit(f"race_torch.py: {name}: shape {list(a.shape)}, the template's is {info[name]['shape']}")
        data[begin:end] = a.tobytes()
    set_digits(header, b"checksum", checksum64(data))
    set_digits(header, b"header_checksum", 0)
    set_digits(header, b"header_checksum", checksum64(header))
    blob[8 : 8 + n] = header
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, out)


def batches(job):
    with open(job["batches_file"]) as f:
        for line in f:
            yield json.loads(line)


def pick_threads(job, probe_steps=6):
    """1 or 2 torch threads, whichever runs the first steps faster (first step untimed)."""
    best, best_t = 1, None
    for threads in (1, 2):
        torch.set_num_threads(threads)
        torch.manual_seed(1)
        trainer = Trainer(job)
        elapsed = 0.0
        for k, batch in zip(range(probe_steps), batches(job)):
            t0 = time.perf_counter()
            trainer.step(batch)
            if k > 0:
                elapsed += time.perf_counter() - t0
        if best_t is None or elapsed < best_t:
            best, best_t = threads, elapsed
    return best


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    job_path, seconds, template, out = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(job_path) as f:
        job = json.load(f)
    threads = pick_threads(job)
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    trainer = Trainer(job)
    spent, tokens, loss = 0.0, 0, float("nan")
    for batch in batches(job):
        t0 = time.perf_counter()
        loss = float(trainer.step(batch))
        spent += time.perf_counter() - t0
        tokens += batch["tokens"]
        if trainer.step_no % 50 == 0:
            print(f"pytorch step {trainer.step_no}  loss {loss:.4f}  {tokens / spent:.0f} tok/s  {spent:.0f}s",
                  file=sys.stderr, flush=True)
        if spent >= seconds:
            break
    else:
        sys.exit(f"race_torch.py: {job['batches_file']}: ran out of batches after {spent:.0f}s; dump more")
    write_checkpoint(template, out, trainer.params)
    print(json.dumps({"impl": "pytorch", "steps": trainer.step_no, "tokens": tokens, "seconds": round(spent, 1),
                      "threads": threads, "loss": loss, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
