"""models_check.py — the several-models test's own computations (models.sh):

  hash DIR                 the model's content hash, recomputed here from the files as
                           docs/api.md defines it: JSON {"hash", "tokenizer", "predictor"}
  entry ENTRY_JSON DIR     a GET /models entry against the folder: hashes, shapes from the
                           config.json files, parameters from the safetensors headers
  bodies WORK CSV          the request bodies the test sends (forecast, series, evaluate,
                           generate, tokenize), each without a model field
  same A B                 two answers byte for byte, or equal but for their elapsed_ms (the
                           time they took)
  same_forecast A B        two forecast answers equal but for their usage (a restored
                           session's cache is rebuilt later)
  flip FILE                one weight of a safetensors file changed (its last data byte)
"""
import hashlib
import json
import struct
import sys


def part_digest(d):
    both = b"".join(hashlib.sha256(open(f"{d}/{name}", "rb").read()).digest()
                    for name in ("config.json", "model.safetensors"))
    return hashlib.sha256(both).digest()


def model_hash(d):
    t, p = part_digest(d + "/tokenizer"), part_digest(d + "/predictor")
    return {"hash": hashlib.sha256(t + p).hexdigest(), "tokenizer": t.hex(), "predictor": p.hex()}


# tensors a checkpoint holds that inference does not use: the half-token decoder's input,
# the quantizer's constant bases, the dependency layer's rotary table (it has no positions)
UNUSED = ("post_quant_embed_pre.", "tokenizer.bsq.", "dep_layer.cross_attn.rotary.")


def safetensors_params(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    total = 0
    for name, t in header.items():
        if name == "__metadata__" or name.startswith(UNUSED):
            continue
        k = 1
        for s in t["shape"]:
            k *= s
        total += k
    return total


def entry(entry_path, d):
    e = json.load(open(entry_path))
    h = model_hash(d)
    problems = []
    if e["hash"] != h["hash"]:
        problems.append(f"hash {e['hash']} != {h['hash']}")
    if e["tokenizer"]["hash"] != h["tokenizer"]:
        problems.append("tokenizer hash")
    if e["predictor"]["hash"] != h["predictor"]:
        problems.append("predictor hash")
    tc = json.load(open(d + "/tokenizer/config.json"))
    pc = json.load(open(d + "/predictor/config.json"))
    for key in ("d_model", "n_heads", "ff_dim", "s1_bits", "s2_bits"):
        if e["predictor"][key] != pc[key]:
            problems.append(f"predictor.{key} {e['predictor'][key]} != {pc[key]}")
        if e["tokenizer"][key] != tc[key]:
            problems.append(f"tokenizer.{key} {e['tokenizer'][key]} != {tc[key]}")
    if e["predictor"]["n_layers"] != pc["n_layers"]:
        problems.append("predictor.n_layers")
    # the weights inference uses, as the files' headers list them
    files = (safetensors_params(d + "/tokenizer/model.safetensors") +
             safetensors_params(d + "/predictor/model.safetensors"))
    if e["parameters"] != files:
        problems.append(f"parameters {e['parameters']} != {files} in the files")
    print("; ".join(problems) if problems else "ok")
    return not problems


def bodies(work, csv_path):
    import csv
    rows = list(csv.DictReader(open(csv_path)))
    def cols(rs):
        c = {"timestamps": [r["timestamps"] for r in rs]}
        for k in ("open", "high", "low", "close", "volume", "amount"):
            c[k] = [float(r[k]) for r in rs]
        return c
    def dump(name, obj):
        json.dump(obj, open(f"{work}/{name}.json", "w"))
    dump("forecast", {"candles": cols(rows[:120]), "horizon": 8, "samples": 6, "seed": 11,
                      "quantiles": [0.1, 0.9], "return_paths": True})
    dump("series", {"series": [{"candles": cols(rows[:80])}, {"candles": cols(rows[200:290])}],
                    "horizon": 4, "samples": 3, "seed": 5})
    dump("evaluate", {"candles": cols(rows[:160]), "lookback": 64, "horizon": 4, "stride": 16,
                      "samples": 4, "seed": 3})
    dump("tokenize", {"candles": cols(rows[:40])})
    tokens = [[(i * 37) % 1024, (i * 91) % 1024] for i in range(24)]
    stamps = [[5 * (i % 12), 9 + i // 12, 1, 3, 6] for i in range(32)]
    dump("generate", {"tokens": tokens, "stamps": stamps[:24], "max_new_tokens": 8,
                      "future_stamps": stamps[24:], "seed": 9, "top_k": 0, "top_p": 0.95})
    dump("load", {"candles": cols(rows[:300]), "horizon": 24, "samples": 16, "seed": 1})


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "elapsed_ms"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def same(a, b):
    ta, tb = open(a, "rb").read(), open(b, "rb").read()
    if ta == tb:
        return True
    try:
        return strip(json.loads(ta)) == strip(json.loads(tb)) and b"elapsed_ms" in ta
    except ValueError:
        return False


def flip(path):
    b = bytearray(open(path, "rb").read())
    b[-1] ^= 0x01  # the last byte of the last tensor's data: one weight, slightly changed
    open(path, "wb").write(bytes(b))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "hash":
        print(json.dumps(model_hash(sys.argv[2])))
    elif cmd == "entry":
        sys.exit(0 if entry(sys.argv[2], sys.argv[3]) else 1)
    elif cmd == "bodies":
        bodies(sys.argv[2], sys.argv[3])
    elif cmd == "same":
        sys.exit(0 if same(sys.argv[2], sys.argv[3]) else 1)
    elif cmd == "same_forecast":
        a, b = (json.load(open(x)) for x in sys.argv[2:4])
        a.pop("usage"), b.pop("usage")
        sys.exit(0 if a == b else 1)
    elif cmd == "flip":
        flip(sys.argv[2])
