"""Lab 03 fixtures: GPT-2's fused QKV attention, refereed by torch.nn.MultiheadAttention.

Each case folder holds

    x.npy              (B, T, d_model), or (T, d_model) for an unbatched case
    c_attn_weight.npy  (d_model, 3 d_model)  GPT-2 Conv1D layout: x @ W + b, columns Q | K | V
    c_attn_bias.npy    (3 d_model)
    c_proj_weight.npy  (d_model, d_model)
    c_proj_bias.npy    (d_model)
    y.npy              the output, with x's shape
    attn.npy           the attention weights per head, (B, H, T, T); B = 1 for a 2-D x
    meta.json          case, lab, n_heads, causal, seed, generator, versions, description

x, the weights (scaled by 1/sqrt(d_model)) and the biases (N(0, 0.5²), nonzero so that every
bias is exercised) are drawn in float32 from numpy.random.default_rng(seed). torch runs in
float64 on exactly those values; y and attn are rounded to float32 at the end.

GPT-2's Conv1D applies x @ W + b with W (in, out); nn.MultiheadAttention applies x @ weight.T + b.
So in_proj_weight = c_attn_weight.T (its rows are then [q; k; v], as torch expects),
in_proj_bias = c_attn_bias, out_proj.weight = c_proj_weight.T, out_proj.bias = c_proj_bias.
The mask is torch's own boolean causal mask (True = may not attend). Before writing, every case is
recomputed in float64 NumPy the GPT-2 way (fused GEMM, split, per-head softmax, c_proj), and the
script stops if the two disagree by more than make_fixtures.NUMPY_TOLERANCE.
"""

import sys

import numpy as np
import torch

import make_fixtures

BIAS_STD = 0.5

# name, seed, x shape, n_heads, description
CASES = [
    ("gpt2_causal", 3000, (2, 6, 24), 4,
     "GPT-2 attention, causal: 2 sequences of 6 tokens, d_model 24, 4 heads of width 6; "
     "random nonzero biases in c_attn and c_proj."),
    ("gpt2_unbatched", 3001, (5, 12), 3,
     "GPT-2 attention, causal, unbatched (T, d_model) input: 5 tokens, d_model 12, 3 heads of "
     "width 4; random nonzero biases. attn is stored as (1, H, T, T)."),
]


def draw_inputs(seed, x_shape):
    """x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, all float32, in that order."""
    rng = np.random.default_rng(seed)
    d = x_shape[-1]
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d))
    c_attn_weight = rng.standard_normal((d, 3 * d), dtype=np.float32) * w_scale
    c_attn_bias = rng.standard_normal(3 * d, dtype=np.float32) * np.float32(BIAS_STD)
    c_proj_weight = rng.standard_normal((d, d), dtype=np.float32) * w_scale
    c_proj_bias = rng.standard_normal(d, dtype=np.float32) * np.float32(BIAS_STD)
    return x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias


def torch_gpt2(x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, n_heads):
    """nn.MultiheadAttention(bias=True) in float64, causal; y (x's shape) and attn (B, H, T, T)."""
    d, T = x.shape[-1], x.shape[-2]
    f64 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    mha = torch.nn.MultiheadAttention(d, n_heads, bias=True, batch_first=True, dtype=torch.float64)
    mha.train()  # dropout is 0; training mode keeps torch 1.13 off its eval-mode fast path
    with torch.no_grad():
        mha.in_proj_weight.copy_(f64(c_attn_weight).T)
        mha.in_proj_bias.copy_(f64(c_attn_bias))
        mha.out_proj.weight.copy_(f64(c_proj_weight).T)
        mha.out_proj.bias.copy_(f64(c_proj_bias))
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool()
        xt = f64(x)
        y, attn = mha(xt, xt, xt, attn_mask=mask, need_weights=True, average_attn_weights=False)
    y, attn = y.numpy(), attn.numpy()
    if x.ndim == 2:
        attn = attn[np.newaxis]  # (H, T, T) -> (1, H, T, T)
    return y, attn


def numpy_gpt2(x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, n_heads):
    """GPT-2's attention written out in float64 NumPy, causal."""
    x3 = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-2], x.shape[-1])  # (B, T, d)
    B, T, d = x3.shape
    d_head = d // n_heads
    fused = x3 @ c_attn_weight.astype(np.float64) + c_attn_bias  # (B, T, 3d)
    split = lambda a: a.reshape(B, T, n_heads, d_head).transpose(0, 2, 1, 3)
    q, k, v = (split(fused[..., r * d:(r + 1) * d]) for r in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)  # (B, H, T, T)
    scores[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = e / e.sum(axis=-1, keepdims=True)
    context = (attn @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
    y = context @ c_proj_weight.astype(np.float64) + c_proj_bias
    return y.reshape(x.shape), attn


def generate(out_dir):
    torch.set_num_threads(1)  # one summation order, so reruns are byte-identical
    for name, seed, x_shape, n_heads, description in CASES:
        arrays = draw_inputs(seed, x_shape)
        y, attn = torch_gpt2(*arrays, n_heads)
        y_np, attn_np = numpy_gpt2(*arrays, n_heads)
        diff_y = make_fixtures.max_diff(y, y_np)
        diff_attn = make_fixtures.max_diff(attn, attn_np)
        if max(diff_y, diff_attn) > make_fixtures.NUMPY_TOLERANCE:
            sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree (max |dy| {diff_y:.3g}, "
                     f"max |dattn| {diff_attn:.3g}); the Conv1D-to-torch mapping is wrong")
        meta = {
            "case": name,
            "lab": "03",
            "n_heads": n_heads,
            "causal": True,
            "seed": seed,
            "generator": "scripts/fixture_cases/lab03.py",
            "torch": torch.__version__,
            "numpy": np.__version__,
            "description": description,
        }
        x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias = arrays
        make_fixtures.write_case(out_dir / name, {
            "x": x, "c_attn_weight": c_attn_weight, "c_attn_bias": c_attn_bias,
            "c_proj_weight": c_proj_weight, "c_proj_bias": c_proj_bias, "y": y, "attn": attn}, meta)
        shape = lambda a: "(" + ", ".join(map(str, a.shape)) + ")"
        print(f"{name:24s} lab 03  x {shape(x):12s} c_attn {shape(c_attn_weight):8s} H {n_heads}  "
              f"causal yes  y {shape(y):12s} attn {shape(attn):14s} "
              f"numpy-vs-torch dy {diff_y:.1e} dattn {diff_attn:.1e}")
