"""The qkv architecture written with PyTorch, for checking (scripts/parity.py) and for
measuring against (scripts/bench_torch.py). Parameters are a dict of tensors named and
laid out as in a qkv checkpoint (matrices [in, out], so x @ w); the batch is a dict with
qkv's token ids and lengths (see `qkv grads` / `qkv bench --dump`)."""
import math

import torch
import torch.nn.functional as F


def positions(T, d, dtype=torch.float64):
    pe = torch.zeros(T, d, dtype=dtype)
    for i in range(0, d, 2):
        freq = math.exp(-math.log(10000.0) * i / d)
        t = torch.arange(T, dtype=dtype)
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


# When a list, every feed-forward's ReLU input is appended to it with the sum of its
# terms' magnitudes (parity.py looks for inputs within float32 rounding of zero, where
# float32 and float64 may fall on different sides of the kink).
relu_inputs = None


def ffn(p, prefix, x):
    h = x @ p[prefix + ".w_1"] + p[prefix + ".b_1"]
    a = torch.relu(h)
    if relu_inputs is not None:
        a.retain_grad()  # the gradient reaching the ReLU's output: 0 where nothing reads it
        with torch.no_grad():
            terms = x.abs() @ p[prefix + ".w_1"].abs() + p[prefix + ".b_1"].abs()
        relu_inputs.append((h, terms, a))
    return a @ p[prefix + ".w_2"] + p[prefix + ".b_2"]


def block(p, norm, x, sublayer, pre, dropout):
    """One residual sub-layer: pre-LN x + drop(f(LN(x))), post-LN LN(x + drop(f(x)))."""
    if pre:
        return x + F.dropout(sublayer(layernorm(p, norm, x)), dropout)
    return layernorm(p, norm, x + F.dropout(sublayer(x), dropout))


def encode(p, m, src, src_len, dropout=0.0):
    d, heads, pre = m["d_model"], m["heads"], m["norm"] == "pre"
    S = src.shape[1]
    x = F.dropout(p["encoder.embed_tokens"][src] * math.sqrt(d) + positions(S, d, x_dtype(p))[:S], dropout)
    for l in range(m["encoder_layers"]):
        n = f"encoder.layers.{l}"
        x = block(p, n + ".norm1", x, lambda h: attention(p, n + ".self_attn", h, h, src_len, False, heads), pre, dropout)
        x = block(p, n + ".norm2", x, lambda h: ffn(p, n + ".ffn", h), pre, dropout)
    return layernorm(p, "encoder.norm", x) if pre else x


def decode(p, m, memory, src_len, tgt_in, tgt_len, dropout=0.0):
    """Logits (B, T, V) of every decoder position."""
    d, heads, pre = m["d_model"], m["heads"], m["norm"] == "pre"
    T = tgt_in.shape[1]
    y = F.dropout(p["decoder.embed_tokens"][tgt_in] * math.sqrt(d) + positions(T, d, x_dtype(p))[:T], dropout)
    for l in range(m["decoder_layers"]):
        n = f"decoder.layers.{l}"
        y = block(p, n + ".norm1", y, lambda h: attention(p, n + ".self_attn", h, h, tgt_len, True, heads), pre, dropout)
        y = block(p, n + ".norm2", y, lambda h: attention(p, n + ".cross_attn", h, memory, src_len, False, heads), pre,
                  dropout)
        y = block(p, n + ".norm3", y, lambda h: ffn(p, n + ".ffn", h), pre, dropout)
    if pre:
        y = layernorm(p, "decoder.norm", y)
    generator = p["decoder.embed_tokens"] if m["tie_embeddings"] else p["generator"]
    return y @ generator.T


def cross_keys_values(p, m, memory):
    """Every decoder layer's cross-attention keys and values of the encoder's output, once
    per sentence group: (B, heads, S, d_head) each."""
    B, S, d = memory.shape
    heads = m["heads"]
    kv = []
    for l in range(m["decoder_layers"]):
        n = f"decoder.layers.{l}.cross_attn"
        k = (memory @ p[n + ".w_k"] + p[n + ".b_k"]).view(B, S, heads, d // heads).transpose(1, 2)
        v = (memory @ p[n + ".w_v"] + p[n + ".b_v"]).view(B, S, heads, d // heads).transpose(1, 2)
        kv.append((k, v))
    return kv


def attend_one(p, prefix, x, k, v, mask, heads):
    """One query position per sequence (x: B, 1, d) over keys and values k, v (B, heads, Tk,
    d_head); mask (B, 1, 1, Tk) or None."""
    B, _, d = x.shape
    dh = d // heads
    q = (x @ p[prefix + ".w_q"] + p[prefix + ".b_q"]).view(B, 1, heads, dh).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, 1, d)
    return o @ p[prefix + ".w_o"] + p[prefix + ".b_o"]


def decode_step(p, m, cross, cache, token, t, src_mask, pe):
    """Logits (B, V) of target position t from its input token (B,), as fairseq and Hugging
    Face decode: the self-attention keys and values of positions before t come from cache
    (a list with one [k, v] per decoder layer, None before the first step; extended here),
    the cross-attention ones from cross_keys_values; pe holds the positions' encodings."""
    d, heads, pre = m["d_model"], m["heads"], m["norm"] == "pre"
    B = token.shape[0]
    y = (p["decoder.embed_tokens"][token] * math.sqrt(d) + pe[t]).view(B, 1, d)
    for l in range(m["decoder_layers"]):
        n = f"decoder.layers.{l}"

        def self_attention(h, l=l, n=n):
            k = (h @ p[n + ".self_attn.w_k"] + p[n + ".self_attn.b_k"]).view(B, 1, heads, d // heads).transpose(1, 2)
            v = (h @ p[n + ".self_attn.w_v"] + p[n + ".self_attn.b_v"]).view(B, 1, heads, d // heads).transpose(1, 2)
            cache[l] = [k, v] if cache[l] is None else [torch.cat([cache[l][0], k], 2), torch.cat([cache[l][1], v], 2)]
            return attend_one(p, n + ".self_attn", h, cache[l][0], cache[l][1], None, heads)

        y = block(p, n + ".norm1", y, self_attention, pre, 0.0)
        y = block(p, n + ".norm2", y, lambda h, l=l, n=n: attend_one(p, n + ".cross_attn", h, cross[l][0], cross[l][1],
                                                                    src_mask, heads), pre, 0.0)
        y = block(p, n + ".norm3", y, lambda h, n=n: ffn(p, n + ".ffn", h), pre, 0.0)
    if pre:
        y = layernorm(p, "decoder.norm", y)
    generator = p["decoder.embed_tokens"] if m["tie_embeddings"] else p["generator"]
    return (y @ generator.T)[:, 0, :]


def x_dtype(p):
    return p["encoder.embed_tokens"].dtype


def forward(p, cfg, batch, dropout=0.0):
    """The label-smoothed loss of a batch, as qkv computes it."""
    m = cfg["model"]
    B, S, T = batch["B"], batch["S"], batch["T"]
    src = torch.tensor(batch["src"]).view(B, S)
    tgt_in = torch.tensor(batch["tgt_in"]).view(B, T)
    tgt_out = torch.tensor(batch["tgt_out"]).view(B, T)
    src_len = torch.tensor(batch["src_len"])
    tgt_len = torch.tensor(batch["tgt_len"])
    memory = encode(p, m, src, src_len, dropout)
    logits = decode(p, m, memory, src_len, tgt_in, tgt_len, dropout)
    return F.cross_entropy(
        logits.reshape(B * T, -1),
        tgt_out.reshape(-1),
        ignore_index=0,
        label_smoothing=cfg["train"]["label_smoothing"],
    )
