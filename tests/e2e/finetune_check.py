#!/usr/bin/python3
"""finetune_check.py BASE OUT CSV: what `kronosd finetune` wrote, checked independently.

  * OUT/tokenizer is BASE's, byte for byte; OUT/predictor/config.json is BASE's;
    OUT/predictor/model.safetensors has BASE's tensor names, shapes and dtypes (the released
    layout: header padded to 8, offsets contiguous in name order), buffers unchanged and
    trained weights moved;
  * finetune.json's bookkeeping: the window counts from the CSV's rows and the split, a loss
    per step, a validation at the steps eval_every gives, the best step the lowest
    validation's, training and validation losses lower at the end than at the start;
  * the validation loss recomputed with numpy (its own tokenizer encode and predictor
    forward, teacher-forced: upstream's model code written out from the spec) for the base
    model (the step-0 validation) and for the written checkpoint (the best validation).
"""
import csv
import datetime
import json
import struct
import sys

import numpy as np

BASE, OUT, CSV = sys.argv[1:4]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    t = {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                          dtype=np.float32).reshape(v["shape"]) for k, v in h.items() if v["dtype"] == "F32"}
    return n, h, t


# ---- layout ----
for f in ("config.json", "model.safetensors"):
    check(open(f"{BASE}/tokenizer/{f}", "rb").read() == open(f"{OUT}/tokenizer/{f}", "rb").read(),
          f"tokenizer/{f} is the base's")
check(json.load(open(f"{BASE}/predictor/config.json")) == json.load(open(f"{OUT}/predictor/config.json")),
      "predictor/config.json is the base's")
_, hb, tb = read_st(f"{BASE}/predictor/model.safetensors")
n_out, ho, to = read_st(f"{OUT}/predictor/model.safetensors")
check(sorted(hb) == sorted(ho), "the same tensor names as the base")
check(all(hb[k]["shape"] == ho[k]["shape"] and ho[k]["dtype"] == "F32" for k in hb), "the same shapes, F32")
check(n_out % 8 == 0, "header padded to 8 bytes")
off, contiguous = 0, True
for k in sorted(ho):
    contiguous &= ho[k]["data_offsets"][0] == off
    off = ho[k]["data_offsets"][1]
check(contiguous, "offsets contiguous in name order")
check(all(np.array_equal(tb[k], to[k]) for k in tb if k.endswith("inv_freq")), "buffers unchanged")
moved = [k for k in tb if not k.endswith("inv_freq") and not np.array_equal(tb[k], to[k])]
check(len(moved) == len([k for k in tb if not k.endswith("inv_freq")]), f"every parameter trained ({len(moved)})")

# ---- bookkeeping ----
r = json.load(open(f"{OUT}/finetune.json"))
s = r["settings"]
rows = list(csv.DictReader(open(CSV)))
n, W = len(rows), s["lookback"] + s["predict"] + 1
cut = n - int(np.floor(n * s["validation_share"]))
check(r["train_windows"] == cut - W + 1 and r["validation_windows"] == n - cut - W + 1,
      f"windows: {r['train_windows']} training, {r['validation_windows']} validation")
check(len(r["loss"]) == s["steps"], f"a loss per step ({s['steps']})")
steps = [v["step"] for v in r["validation"]]
check(steps == list(range(0, s["steps"] + 1, s["eval_every"])), f"validations at {steps}")
vals = [v["loss"] for v in r["validation"]]
check(r["best_step"] == steps[int(np.argmin(vals))] and abs(r["best_validation"] - min(vals)) < 1e-9,
      f"best step {r['best_step']}: the lowest validation")
check(vals[-1] < vals[0] - 0.1, f"validation loss lower: {vals[0]:.4f} -> {vals[-1]:.4f}")
k = max(1, len(r["loss"]) // 4)
check(np.mean(r["loss"][-k:]) < np.mean(r["loss"][:k]) - 0.1, "training loss lower at the end")

# ---- numpy: the validation loss ----
cols = ["open", "high", "low", "close", "volume", "amount"]
X = np.array([[float(row[c]) for c in cols] for row in rows], dtype=np.float32)
T = [datetime.datetime.fromisoformat(row["timestamps"]) for row in rows]
tcfg = json.load(open(f"{BASE}/tokenizer/config.json"))
_, _, tok = read_st(f"{BASE}/tokenizer/model.safetensors")


def rms(x, w):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-5) * w


def rope(x, inv):
    t = np.arange(x.shape[-2])[:, None] * inv[None, :]
    c, s_ = np.cos(np.concatenate([t, t], -1)), np.sin(np.concatenate([t, t], -1))
    h = x.shape[-1] // 2
    return x * c + np.concatenate([-x[..., h:], x[..., :h]], -1) * s_


def mha(q, k, v, heads, inv):
    L, d = q.shape
    hd = d // heads
    q, k, v = (a.reshape(L, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
    q, k = rope(q, inv), rope(k, inv)
    sc = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    sc = np.where(np.tril(np.ones((L, L), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(L, d)


def lin(w, p, x, bias=True):
    y = x @ w[p + ".weight"].astype(np.float64).T
    return y + w[p + ".bias"] if bias else y


def block(w, p, x, heads):
    h = rms(x, w[p + ".norm1.weight"])
    a = mha(lin(w, p + ".self_attn.q_proj", h), lin(w, p + ".self_attn.k_proj", h),
            lin(w, p + ".self_attn.v_proj", h), heads, w[p + ".self_attn.rotary.inv_freq"].astype(np.float64))
    x = x + lin(w, p + ".self_attn.out_proj", a)
    h = rms(x, w[p + ".norm2.weight"])
    g = lin(w, p + ".ffn.w1", h, False)
    return x + lin(w, p + ".ffn.w2", g / (1 + np.exp(-g)) * lin(w, p + ".ffn.w3", h, False), False)


def encode(xn):
    z = lin(tok, "embed", xn.astype(np.float64))
    for i in range(tcfg["n_enc_layers"] - 1):
        z = block(tok, f"encoder.{i}", z, tcfg["n_heads"])
    bits = (lin(tok, "quant_embed", z) > 0).astype(np.int64)
    b1, b2 = tcfg["s1_bits"], tcfg["s2_bits"]
    return bits[:, :b1] @ (1 << np.arange(b1)), bits[:, b1:b1 + b2] @ (1 << np.arange(b2))


def window(start):
    x = X[start:start + W]
    past = x[:s["lookback"]]
    xn = np.clip((x - past.mean(0)) / (past.std(0) + np.float32(1e-5)), -5, 5).astype(np.float32)
    s1, s2 = encode(xn)
    st = np.array([[t.minute, t.hour, t.weekday(), t.day, t.month] for t in T[start:start + W]])
    return s1, s2, st


def ce(logits, target):
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[:, 0]
    return np.mean(lse - logits[np.arange(len(target)), target])


def loss(w, cfg, s1, s2, st):
    d = cfg["d_model"]
    e = np.concatenate([w["embedding.emb_s1.weight"][s1[:-1]] * np.sqrt(d),
                        w["embedding.emb_s2.weight"][s2[:-1]] * np.sqrt(d)], -1)
    x = lin(w, "embedding.fusion_proj", e.astype(np.float64))
    te = "_embed.weight" if cfg.get("learn_te", True) else "_embed.emb.weight"
    for j, name in enumerate(("minute", "hour", "weekday", "day", "month")):
        x = x + w["time_emb." + name + te][st[:-1, j]]
    for i in range(cfg["n_layers"]):
        x = block(w, f"transformer.{i}", x, cfg["n_heads"])
    h = rms(x, w["norm.weight"])
    sib = w["embedding.emb_s1.weight"][s1[1:]].astype(np.float64)
    inv = w["dep_layer.cross_attn.rotary.inv_freq"].astype(np.float64)
    a = mha(lin(w, "dep_layer.cross_attn.q_proj", sib), lin(w, "dep_layer.cross_attn.k_proj", h),
            lin(w, "dep_layer.cross_attn.v_proj", h), 4, inv)
    g = rms(h + lin(w, "dep_layer.cross_attn.out_proj", a), w["dep_layer.norm.weight"])
    return (ce(lin(w, "head.proj_s1", h), s1[1:]) + ce(lin(w, "head.proj_s2", g), s2[1:])) / 2


nv = min(r["validation_windows"], 256)
wins = [window(cut + i * r["validation_windows"] // nv) for i in range(nv)]
pcfg = json.load(open(f"{BASE}/predictor/config.json"))
for name, w, ref in (("base (step 0)", tb, vals[0]), ("written checkpoint", to, r["best_validation"])):
    mine = np.mean([loss(w, pcfg, *win) for win in wins])
    check(abs(mine - ref) <= 1e-3 * abs(ref), f"numpy validation loss of the {name}: {mine:.6f} (kronosd {ref:.6f})")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
