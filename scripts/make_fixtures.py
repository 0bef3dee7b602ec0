#!/usr/bin/python3
"""Writes the golden fixtures of labs 01 and 02 from PyTorch's nn.MultiheadAttention.

What it writes
--------------
One folder per case under tests/fixtures/ (or --out), each holding

    x.npy                      (B, T, d_model), or (T, d_model) for an unbatched case
    w_q.npy w_k.npy w_v.npy    (d_model, d_model), applied as x @ W
    w_o.npy                    (d_model, d_model), applied as concat(heads) @ W_O
    y.npy                      the output, with x's shape
    attn.npy                   the attention weights per head, (B, H, T, T); B = 1 for a 2-D x
    meta.json                  case, lab, n_heads, causal, seed, generator, versions, description

All arrays are float32, C order, little-endian. x and the weights are drawn in float32 from
numpy.random.default_rng(seed).standard_normal (weights scaled by 1/sqrt(d_model)); torch then
runs in float64 on exactly those float32 values, and y and attn are rounded to float32 at the
end. The fixtures are therefore as exact as float32 allows, and the files are byte-identical
from run to run.

How minimodel's convention maps onto torch's
--------------------------------------------
minimodel projects with x @ W, each W of shape (d_model, d_model); head h owns the columns
h*d_head .. (h+1)*d_head - 1 of W_Q, W_K, W_V and the matching rows of W_O.
nn.MultiheadAttention(d_model, H, bias=False, batch_first=True) applies x @ weight.T, with
in_proj_weight (3*d_model, d_model) = [q; k; v] and out_proj.weight (d_model, d_model), and
splits heads the same way. So

    in_proj_weight  = cat([W_Q.T, W_K.T, W_V.T])
    out_proj.weight = W_O.T

Causal cases pass torch its own boolean mask, triu(ones(T, T), diagonal=1) (True = may not
attend), not minimodel's additive -1e9 mask: torch's masking is the referee. Before writing
anything the script recomputes every case with plain NumPy in float64 (softmax(q k^T /
sqrt(d_head) + mask) v per head, then @ W_O) and stops if it differs from torch by more than
1e-6, which checks the mapping above.

How to rerun it
---------------
    scripts/install-deps.sh --fixtures          # python3-torch and python3-numpy, from apt
    /usr/bin/python3 scripts/make_fixtures.py [--out tests/fixtures]

Use Debian's interpreter, /usr/bin/python3: that is where apt puts torch. CI never runs this
script; it only reads the committed .npy files.
"""

import argparse
import importlib
import json
import sys
from pathlib import Path

try:
    import numpy as np
    import torch
except ImportError as error:
    sys.exit(f"make_fixtures.py: cannot import {error.name}. "
             "HINT: run scripts/install-deps.sh --fixtures and use /usr/bin/python3")

GENERATOR = "scripts/make_fixtures.py"
NUMPY_TOLERANCE = 1e-6  # float64 NumPy vs float64 torch; disagreement means a convention slip

# name, seed, lab, x shape, n_heads, causal, logit scale, description
# The logit scale multiplies W_Q and W_K, hence every score by its square, and leaves y O(1).
CASES = [
    ("mha_batched", 1000, "01", (2, 5, 16), 4, False, 1.0,
     "A batch of 2 sequences of 5 tokens, d_model 16, 4 heads of width 4, no mask."),
    ("mha_unbatched", 1001, "01", (7, 12), 3, False, 1.0,
     "An unbatched (T, d_model) input: 7 tokens, d_model 12, 3 heads of width 4, no mask. "
     "attn is stored as (1, H, T, T)."),
    ("mha_one_head", 1002, "01", (1, 4, 8), 1, False, 1.0,
     "One head of width 8: multi-head attention reduces to single-head attention then W_O."),
    ("mha_head_width_one", 1003, "01", (2, 3, 4), 4, False, 1.0,
     "4 heads of width 1 (d_head = 1), so every score is a product of two scalars."),
    ("mha_causal", 1004, "02", (3, 6, 16), 2, True, 1.0,
     "Causal self-attention: 3 sequences of 6 tokens, d_model 16, 2 heads of width 8."),
    ("mha_causal_large_logits", 1005, "02", (2, 5, 8), 2, True, 8.0,
     "Causal, with W_Q and W_K multiplied by 8 so that scaled scores exceed 100: a softmax "
     "that does not subtract the row maximum loses precision or overflows here. The weights are "
     "almost one-hot while y stays O(1), so 1e-5 absolute remains a fair tolerance."),
    ("mha_single_token", 1006, "02", (2, 1, 8), 2, True, 1.0,
     "Causal with T = 1: each token attends only to itself, so every weight is 1."),
]


def draw_inputs(seed, x_shape, logit_scale):
    """x (x_shape) and W_Q, W_K, W_V, W_O (d_model, d_model), all float32, in that order."""
    rng = np.random.default_rng(seed)
    d_model = x_shape[-1]
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d_model))
    weights = [rng.standard_normal((d_model, d_model), dtype=np.float32) * w_scale
               for _ in range(4)]
    weights[0] *= np.float32(logit_scale)  # W_Q
    weights[1] *= np.float32(logit_scale)  # W_K
    return x, weights


def torch_mha(x, w_q, w_k, w_v, w_o, n_heads, causal):
    """nn.MultiheadAttention in float64 on the given float32 arrays.

    Returns y (x's shape) and attn (B, H, T, T) as float64 NumPy arrays; for a 2-D x,
    B = 1 (torch itself returns (H, T, T) there).
    """
    d_model = x.shape[-1]
    T = x.shape[-2]
    f64 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    mha = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True,
                                      dtype=torch.float64)
    # Training mode on purpose (dropout is 0, so it changes nothing numerically): in eval mode
    # torch 1.13 takes its "fast path" for batched, unmasked self-attention with an even H, and
    # that path fails with bias=False ("qkv_bias must be Tensor, not NoneType").
    mha.train()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([f64(w_q).T, f64(w_k).T, f64(w_v).T]))
        mha.out_proj.weight.copy_(f64(w_o).T)
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool() if causal else None
        xt = f64(x)
        y, attn = mha(xt, xt, xt, attn_mask=mask, need_weights=True,
                      average_attn_weights=False)
    y, attn = y.numpy(), attn.numpy()
    if x.ndim == 2:
        attn = attn[np.newaxis]  # (H, T, T) -> (1, H, T, T)
    return y, attn


def numpy_mha(x, w_q, w_k, w_v, w_o, n_heads, causal):
    """The same computation written out in float64 NumPy; also returns the scaled scores."""
    x3 = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-2], x.shape[-1])  # (B, T, d_model)
    B, T, d_model = x3.shape
    d_head = d_model // n_heads

    def split(w):  # (B, T, d_model) @ (d_model, d_model) -> (B, H, T, d_head)
        return (x3 @ w.astype(np.float64)).reshape(B, T, n_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = split(w_q), split(w_k), split(w_v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)  # (B, H, T, T)
    masked = scores.copy()
    if causal:
        masked[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    e = np.exp(masked - masked.max(axis=-1, keepdims=True))
    attn = e / e.sum(axis=-1, keepdims=True)
    context = (attn @ v).transpose(0, 2, 1, 3).reshape(B, T, d_model)
    y = context @ w_o.astype(np.float64)
    return y.reshape(x.shape), attn, scores


def max_diff(a, b):
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def write_case(folder, arrays, meta):
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in arrays.items():
        value = np.ascontiguousarray(value, dtype="<f4")
        with open(folder / f"{name}.npy", "wb") as f:
            np.save(f, value, allow_pickle=False)
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures"),
                        help="folder that receives one sub-folder per case (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one summation order, so reruns are byte-identical

    for name, seed, lab, x_shape, n_heads, causal, logit_scale, description in CASES:
        x, (w_q, w_k, w_v, w_o) = draw_inputs(seed, x_shape, logit_scale)
        y, attn = torch_mha(x, w_q, w_k, w_v, w_o, n_heads, causal)

        y_np, attn_np, scores = numpy_mha(x, w_q, w_k, w_v, w_o, n_heads, causal)
        diff_y, diff_attn = max_diff(y, y_np), max_diff(attn, attn_np)
        if max(diff_y, diff_attn) > NUMPY_TOLERANCE:
            sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree (max |dy| {diff_y:.3g}, "
                     f"max |dattn| {diff_attn:.3g}); the convention mapping is wrong")
        kept = np.ones(scores.shape[-2:], dtype=bool)  # (T, T)
        if causal:
            kept = np.tril(kept)
        max_score = float(np.max(np.abs(scores[..., kept])))  # over scores the softmax sees
        if name == "mha_causal_large_logits" and max_score <= 100:
            sys.exit(f"make_fixtures.py: {name}: max |score| is {max_score:.1f}, not > 100")

        meta = {
            "case": name,
            "lab": lab,
            "n_heads": n_heads,
            "causal": causal,
            "seed": seed,
            "generator": GENERATOR,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "description": description,
        }
        write_case(args.out / name, {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o,
                                     "y": y, "attn": attn}, meta)
        shape = lambda a: "(" + ", ".join(map(str, a.shape)) + ")"
        print(f"{name:24s} lab {lab}  x {shape(x):12s} W {shape(w_q):8s} H {n_heads}  "
              f"causal {'yes' if causal else 'no ':3s}  y {shape(y):12s} attn {shape(attn):14s} "
              f"max|score| {max_score:7.2f}  numpy-vs-torch dy {diff_y:.1e} dattn {diff_attn:.1e}")

    # Labs 03 and later: each scripts/fixture_cases/labNN.py has generate(out_dir), which writes
    # its own cases (it may import this module's helpers: `import make_fixtures`).
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for module_path in sorted((Path(__file__).resolve().parent / "fixture_cases").glob("lab*.py")):
        importlib.import_module(f"fixture_cases.{module_path.stem}").generate(args.out)


if __name__ == "__main__":
    main()
