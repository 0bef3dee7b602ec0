"""Lab 04 fixtures: LayerNorm and the attention block (residual + LayerNorm), post-LN and pre-LN.

Called by scripts/make_fixtures.py as generate(out_dir). Each case is one folder:

    layer_norm:     x.npy (B, T, d_model), y.npy = F.layer_norm(x, (d_model,), eps=1e-5)
    block_*:        x.npy (B, T, d_model), w_q/w_k/w_v/w_o.npy (d_model, d_model), y.npy
                    post-LN: y = F.layer_norm(x + mha(x))
                    pre-LN:  y = x + mha(F.layer_norm(x))
    meta.json       case, lab, eps, (n_heads, causal, norm), seed, generator, versions, description

mha is nn.MultiheadAttention(bias=False) with minimodel's weights mapped onto torch's as in
make_fixtures.py (make_fixtures.torch_mha); F.layer_norm has no weight or bias, like minimodel's.
Everything runs in float64 on the float32 inputs, nothing is rounded in between, and y is rounded
to float32 at the end. Before writing, every case is recomputed with plain NumPy in float64 and
the script stops if the two differ by more than make_fixtures.NUMPY_TOLERANCE.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

import make_fixtures
from make_fixtures import draw_inputs, max_diff, numpy_mha, torch_mha, write_case

LAB = "04"
EPS = 1e-5

# name, seed, x shape, n_heads, norm, causal, description
BLOCK_CASES = [
    ("block_post_ln", 4001, (2, 5, 16), 4, "post_ln", False,
     "Post-LN block (Vaswani et al. 2017): y = layer_norm(x + mha(x)); B 2, T 5, d_model 16, "
     "4 heads, no mask."),
    ("block_pre_ln", 4002, (2, 5, 16), 4, "pre_ln", False,
     "Pre-LN block (GPT-2): y = x + mha(layer_norm(x)); B 2, T 5, d_model 16, 4 heads, no mask."),
    ("block_pre_ln_causal", 4003, (2, 5, 16), 4, "pre_ln", True,
     "Pre-LN block with a causal mask: torch gets its boolean triu mask, minimodel its additive "
     "causal_mask(T)."),
]

LAYER_NORM_SEED = 4000


def f64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def torch_layer_norm(x):
    """F.layer_norm over the last axis in float64, no weight or bias -> float64 NumPy."""
    return F.layer_norm(f64(x), (x.shape[-1],), eps=EPS).numpy()


def numpy_layer_norm(x):
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as torch
    return (x - mean) / np.sqrt(var + EPS)


def torch_block(x, weights, n_heads, norm, causal):
    mha = lambda h: torch_mha(h, *weights, n_heads, causal)[0]
    if norm == "post_ln":
        return torch_layer_norm(np.asarray(x, dtype=np.float64) + mha(x))
    return np.asarray(x, dtype=np.float64) + mha(torch_layer_norm(x))


def numpy_block(x, weights, n_heads, norm, causal):
    mha = lambda h: numpy_mha(h, *weights, n_heads, causal)[0]
    if norm == "post_ln":
        return numpy_layer_norm(np.asarray(x, dtype=np.float64) + mha(x))
    return np.asarray(x, dtype=np.float64) + mha(numpy_layer_norm(x))


def meta_for(name, seed, description, **extra):
    return {"case": name, "lab": LAB, "eps": EPS, **extra, "seed": seed,
            "generator": make_fixtures.GENERATOR, "torch": torch.__version__,
            "numpy": np.__version__, "description": description}


def check(name, diff):
    if diff > make_fixtures.NUMPY_TOLERANCE:
        sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree (max |dy| {diff:.3g})")


def generate(out_dir):
    torch.set_num_threads(1)  # one summation order, so reruns are byte-identical

    # LayerNorm alone: rows with a mean far from 0 and a spread far from 1, and one constant row,
    # which torch maps to exactly 0 (var = 0, so 0 / sqrt(eps)).
    rng = np.random.default_rng(LAYER_NORM_SEED)
    x = (rng.standard_normal((2, 4, 16), dtype=np.float32) * np.float32(3.0) + np.float32(2.0))
    x[1, 2, :] = np.float32(0.75)
    y = torch_layer_norm(x)
    diff = max_diff(y, numpy_layer_norm(x))
    check("layer_norm", diff)
    write_case(out_dir / "layer_norm", {"x": x, "y": y}, meta_for(
        "layer_norm", LAYER_NORM_SEED,
        "F.layer_norm(x, (16,), eps=1e-5) without weight or bias, on rows of mean about 2 and "
        "standard deviation about 3; row x[1, 2] is constant (0.75) and becomes exactly 0."))
    print(f"{'layer_norm':24s} lab {LAB}  x (2, 4, 16)    eps {EPS:g}  constant row x[1, 2]  "
          f"numpy-vs-torch dy {diff:.1e}")

    for name, seed, x_shape, n_heads, norm, causal, description in BLOCK_CASES:
        x, weights = draw_inputs(seed, x_shape, 1.0)
        y = torch_block(x, weights, n_heads, norm, causal)
        diff = max_diff(y, numpy_block(x, weights, n_heads, norm, causal))
        check(name, diff)
        w_q, w_k, w_v, w_o = weights
        write_case(out_dir / name, {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o, "y": y},
                   meta_for(name, seed, description, n_heads=n_heads, norm=norm, causal=causal))
        shape = "(" + ", ".join(map(str, x.shape)) + ")"
        print(f"{name:24s} lab {LAB}  x {shape:12s} H {n_heads}  {norm:7s}  "
              f"causal {'yes' if causal else 'no ':3s}  max|y| {np.max(np.abs(y)):5.2f}  "
              f"numpy-vs-torch dy {diff:.1e}")
