"""Lab 09 fixtures: the backward pass of attention, refereed by PyTorch's autograd.

Called by scripts/make_fixtures.py as generate(out_dir). One sequence, no batch axis. Each case
feeds an upstream gradient d_out = dL/d(output) to torch (output.backward(d_out), i.e. the loss
L = sum(output * d_out)) and stores the gradients of the inputs and parameters:

    backward_attention         one head, softmax(q k^T / sqrt(d_head) + mask) v
        q.npy (5, 4), k.npy (7, 4), v.npy (7, 3)
        mask.npy (5, 7)        additive: 0 keeps, -1e9 removes; key 6 is removed for every
                               query, plus 6 scattered entries; every query keeps 4 or 5 keys
        d_out.npy (5, 3)
        out.npy (5, 3)         the forward
        dq.npy (5, 4), dk.npy (7, 4), dv.npy (7, 3)
    backward_mha               multi-head attention with biases, causal
    backward_block_post_ln     y = layer_norm(x + mha(x)), causal
    backward_block_pre_ln      y = x + mha(layer_norm(x)), causal
        x.npy (6, 8)
        w_q.npy, w_k.npy, w_v.npy, w_o.npy (8, 8), applied as x @ W + b
        b_q.npy, b_k.npy, b_v.npy, b_o.npy (8)
        d_out.npy (6, 8)       dL/dy
        y.npy (6, 8)           the forward
        dx.npy (6, 8)
        dw_q.npy, dw_k.npy, dw_v.npy, dw_o.npy (8, 8), in the x @ W layout (torch's
                               parameter gradients transposed back)
        db_q.npy, db_k.npy, db_v.npy, db_o.npy (8); db_k is 0 up to rounding (|db_k| < 1e-14):
                               a key bias adds the same amount to every score of a row, which
                               the softmax ignores
    meta.json                  case, lab, (n_heads, causal, bias, norm, eps), seed, generator,
                               versions, description

All arrays are float32. The inputs are drawn in float32 from numpy.random.default_rng(seed):
backward_attention in the order q, k, v, d_out (standard normal); the other cases in the order x,
w_q, w_k, w_v, w_o (exactly as make_fixtures.draw_inputs draws them, weights scaled by
1/sqrt(d_model)), then b_q, b_k, b_v, b_o (0.5 * N(0, 1), nonzero so that every bias takes part)
and d_out (standard normal). torch runs in float64 on exactly those values and every output is
rounded to float32 at the end.

The referee: for backward_attention, torch.softmax on the float64 scores plus the float mask,
differentiated by autograd. For the other three, nn.MultiheadAttention(8, 2, bias=True,
batch_first=True) in float64 with minimodel's weights mapped onto torch's as make_fixtures.py
describes (in_proj_weight = cat(W_Q^T, W_K^T, W_V^T), in_proj_bias = cat(b_q, b_k, b_v),
out_proj.weight = W_O^T, out_proj.bias = b_o), called on a batch of one with torch's own boolean
causal mask (triu(ones(T, T), diagonal=1)), and F.layer_norm(., (8,), eps=1e-5) without weight or
bias (lab04.py's). x requires grad; dw_* are the row blocks of in_proj_weight.grad (and
out_proj.weight.grad) transposed, db_* the blocks of in_proj_bias.grad and out_proj.bias.grad.

Two checks run before anything is written, and either stops the script:
  * the forward is recomputed with plain NumPy in float64 (lab06.py's numpy_cross with minimodel's
    additive -1e9 causal mask, lab04.py's numpy_layer_norm) and must agree with torch to
    make_fixtures.NUMPY_TOLERANCE;
  * the gradients are checked independently of autograd by central finite differences in float64
    NumPy on that forward: L = sum(y * d_out), (L(p + h) - L(p - h)) / 2h with h = 1e-6, at
    randomly chosen entries of every input and parameter (8 of each of q, k, v in
    backward_attention, 24 in all; 3 of each of x and the eight parameters in the others, 27 in
    all; the mask is a constant), compared with torch's gradient g as
    |fd - g| / max(|fd|, |g|, FD_FLOOR); the script stops if any exceeds 1e-6. FD_FLOOR (1e-3)
    turns the error into an absolute one, scaled by 1000, for gradients that are 0: those of the
    removed key 6 (both sides exactly 0) and db_k (torch below 2e-15, finite differences up to
    about 5e-10, the noise of a float64 difference quotient with h = 1e-6). Nonzero gradients
    agree to about 1e-7 relative or better.
"""

import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

import make_fixtures
from fixture_cases.lab04 import EPS, numpy_layer_norm
from fixture_cases.lab06 import numpy_cross
from make_fixtures import draw_inputs, max_diff, write_case

LAB = "09"
BIAS_STD = 0.5
MASKED = -1e9              # minimodel's additive mask value
FD_STEP = 1e-6             # central-difference step, float64
FD_TOLERANCE = 1e-6        # relative error allowed between finite differences and autograd
FD_FLOOR = 1e-3            # smallest denominator of that relative error
FD_ENTRIES_PER_ARRAY = 3   # per input / parameter array (8 per array in backward_attention)

ATTENTION_CASE = ("backward_attention", 9001, 5, 7, 4, 3,
                  "One head's backward: out = softmax(q k^T / sqrt(4) + mask) v with 5 queries, "
                  "7 keys, d_head 4 and value width 3; the additive mask (0 or -1e9) removes key "
                  "6 for every query and 6 scattered entries, every query keeping at least 4 "
                  "keys. dq, dk, dv are torch autograd's for the upstream gradient d_out; dk and "
                  "dv of key 6 are exactly 0.")
# Removed (query, key) entries besides key 6, which every query loses.
ATTENTION_MASKED = [(0, 2), (1, 0), (1, 4), (2, 5), (3, 1), (4, 3)]
ATTENTION_FD_ENTRIES = 8

# name, seed, T, d_model, n_heads, norm (None: the attention layer alone), description
MHA_CASES = [
    ("backward_mha", 9002, 6, 8, 2, None,
     "Multi-head attention's backward: 6 tokens, d_model 8, 2 heads of width 4, biases, causal. "
     "dx, dw_* and db_* are torch autograd's for the upstream gradient d_out = dL/dy; dw_* are "
     "in minimodel's x @ W layout. db_k is 0 up to rounding (a key bias shifts a whole row of "
     "scores, which the softmax ignores)."),
    ("backward_block_post_ln", 9003, 6, 8, 2, "post_ln",
     "Post-LN block's backward: y = layer_norm(x + mha(x)), 6 tokens, d_model 8, 2 heads, "
     "biases, causal, eps 1e-5; gradients from torch autograd for d_out = dL/dy."),
    ("backward_block_pre_ln", 9004, 6, 8, 2, "pre_ln",
     "Pre-LN block's backward: y = x + mha(layer_norm(x)), 6 tokens, d_model 8, 2 heads, "
     "biases, causal, eps 1e-5; dx adds the residual path's d_out to the attention path's."),
]
PARAM_NAMES = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"]


def f64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def shape(a):
    return "(" + ", ".join(map(str, a.shape)) + ")"


# ---- backward_attention ------------------------------------------------------------------------

def attention_mask(T, S):
    """(T, S) float32 additive mask: key S - 1 and ATTENTION_MASKED removed."""
    mask = np.zeros((T, S), dtype=np.float32)
    mask[:, S - 1] = np.float32(MASKED)
    for t, s in ATTENTION_MASKED:
        mask[t, s] = np.float32(MASKED)
    if not (mask == 0).any(axis=1).all():
        sys.exit("make_fixtures.py: backward_attention: a query has no key left")
    return mask


def torch_attention(q, k, v, mask, d_out):
    """out and {dq, dk, dv} as float64 NumPy, from autograd in float64."""
    qt, kt, vt = (f64(a).requires_grad_() for a in (q, k, v))
    probs = torch.softmax(qt @ kt.T / math.sqrt(q.shape[-1]) + f64(mask), dim=-1)
    out = probs @ vt
    out.backward(f64(d_out))
    return out.detach().numpy(), {"dq": qt.grad.numpy(), "dk": kt.grad.numpy(),
                                  "dv": vt.grad.numpy()}


def numpy_attention(inputs, mask):
    """The same forward in float64 NumPy; inputs holds q, k, v."""
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    scores = q @ k.T / np.sqrt(q.shape[-1]) + np.asarray(mask, dtype=np.float64)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


# ---- backward_mha and the blocks ---------------------------------------------------------------

def draw_mha(seed, T, d_model):
    """x (T, d_model), W_Q, W_K, W_V, W_O (d_model, d_model), b_q, b_k, b_v, b_o (d_model) and
    d_out (T, d_model), all float32, drawn in that order from default_rng(seed)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d_model), dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d_model))
    weights = [rng.standard_normal((d_model, d_model), dtype=np.float32) * w_scale
               for _ in range(4)]
    # The same stream as make_fixtures.draw_inputs, continued past the weights.
    x_ref, weights_ref = draw_inputs(seed, (T, d_model), 1.0)
    if not (np.array_equal(x, x_ref) and all(map(np.array_equal, weights, weights_ref))):
        sys.exit("make_fixtures.py: lab09.draw_mha no longer draws as make_fixtures.draw_inputs")
    biases = [rng.standard_normal(d_model, dtype=np.float32) * np.float32(BIAS_STD)
              for _ in range(4)]
    d_out = rng.standard_normal((T, d_model), dtype=np.float32)
    return x, weights, biases, d_out


def torch_block_backward(x, weights, biases, n_heads, norm, d_out):
    """y and {dx, dw_*, db_*} as float64 NumPy, from nn.MultiheadAttention and autograd."""
    T, d = x.shape
    mha = torch.nn.MultiheadAttention(d, n_heads, bias=True, batch_first=True,
                                      dtype=torch.float64)
    mha.train()  # dropout is 0; training mode keeps torch 1.13 off its eval-mode fast path
    w_q, w_k, w_v, w_o = weights
    b_q, b_k, b_v, b_o = biases
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([f64(w_q).T, f64(w_k).T, f64(w_v).T]))
        mha.in_proj_bias.copy_(torch.cat([f64(b_q), f64(b_k), f64(b_v)]))
        mha.out_proj.weight.copy_(f64(w_o).T)
        mha.out_proj.bias.copy_(f64(b_o))
    causal = torch.triu(torch.ones(T, T), diagonal=1).bool()  # True = may not attend

    def attend(h):  # (T, d) -> (T, d), through a batch of one
        h = h.unsqueeze(0)
        return mha(h, h, h, attn_mask=causal, need_weights=False)[0].squeeze(0)

    xt = f64(x).requires_grad_()
    if norm is None:
        y = attend(xt)
    elif norm == "post_ln":
        y = F.layer_norm(xt + attend(xt), (d,), eps=EPS)
    else:
        y = xt + attend(F.layer_norm(xt, (d,), eps=EPS))
    y.backward(f64(d_out))

    w_grad, b_grad = mha.in_proj_weight.grad, mha.in_proj_bias.grad  # (3d, d), (3d)
    grads = {"dx": xt.grad}
    for i, n in enumerate(("q", "k", "v")):
        grads[f"dw_{n}"] = w_grad[i * d:(i + 1) * d].T  # weight.T is minimodel's W
        grads[f"db_{n}"] = b_grad[i * d:(i + 1) * d]
    grads["dw_o"] = mha.out_proj.weight.grad.T
    grads["db_o"] = mha.out_proj.bias.grad
    return y.detach().numpy(), {n: g.numpy() for n, g in grads.items()}


def numpy_block(inputs, n_heads, norm):
    """The forward in float64 NumPy; inputs holds x and the eight parameters."""
    x = np.asarray(inputs["x"], dtype=np.float64)
    T = x.shape[0]
    weights = [inputs[n] for n in PARAM_NAMES[:4]]
    biases = [inputs[n] for n in PARAM_NAMES[4:]]
    causal = np.where(np.triu(np.ones((T, T), dtype=bool), k=1), MASKED, 0.0)  # minimodel's mask
    no_padding = np.zeros((1, T), dtype=bool)

    def mha(h):
        h = h[np.newaxis]
        return numpy_cross(h, h, h, weights, biases, n_heads, no_padding, causal)[0][0]

    if norm is None:
        return mha(x)
    if norm == "post_ln":
        return numpy_layer_norm(x + mha(x))
    return x + mha(numpy_layer_norm(x))


# ---- the finite-difference check ---------------------------------------------------------------

def finite_difference_check(name, seed, forward, inputs, grads, d_out, per_array):
    """Central differences of L = sum(forward(inputs) * d_out) against grads["d" + input name]
    at per_array random entries of every input; returns the worst relative error and the count."""
    rng = np.random.default_rng((seed, 0xFD))
    inputs = {n: np.asarray(a, dtype=np.float64) for n, a in inputs.items()}
    d_out = np.asarray(d_out, dtype=np.float64)
    loss = lambda values: float(np.sum(forward(values) * d_out))
    worst, count = 0.0, 0
    for n, value in inputs.items():
        for i in rng.choice(value.size, size=min(per_array, value.size), replace=False):
            shifted = {}
            for sign in (1, -1):
                moved = value.copy()
                moved.flat[i] += sign * FD_STEP
                shifted[sign] = loss({**inputs, n: moved})
            fd = (shifted[1] - shifted[-1]) / (2 * FD_STEP)
            g = float(grads["d" + n].flat[i])
            error = abs(fd - g) / max(abs(fd), abs(g), FD_FLOOR)
            if error > FD_TOLERANCE:
                index = np.unravel_index(i, value.shape)
                sys.exit(f"make_fixtures.py: {name}: d{n}{list(index)} is {g:.10g} from torch but "
                         f"{fd:.10g} by finite differences (relative error {error:.3g})")
            worst, count = max(worst, error), count + 1
    return worst, count


def meta_for(name, seed, description, **extra):
    return {"case": name, "lab": LAB, **extra, "seed": seed,
            "generator": make_fixtures.GENERATOR, "torch": torch.__version__,
            "numpy": np.__version__, "description": description}


def check_forward(name, diff):
    if diff > make_fixtures.NUMPY_TOLERANCE:
        sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree (max |dy| {diff:.3g}); "
                 "the convention mapping is wrong")


def generate(out_dir):
    torch.set_num_threads(1)  # one summation order, so reruns are byte-identical

    name, seed, T, S, d_head, d_v, description = ATTENTION_CASE
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, d_head), dtype=np.float32)
    k = rng.standard_normal((S, d_head), dtype=np.float32)
    v = rng.standard_normal((S, d_v), dtype=np.float32)
    d_out = rng.standard_normal((T, d_v), dtype=np.float32)
    mask = attention_mask(T, S)
    out, grads = torch_attention(q, k, v, mask, d_out)
    inputs = {"q": q, "k": k, "v": v}
    forward = lambda values: numpy_attention(values, mask)
    diff = max_diff(out, forward(inputs))
    check_forward(name, diff)
    fd_error, fd_count = finite_difference_check(name, seed, forward, inputs, grads, d_out,
                                                 ATTENTION_FD_ENTRIES)
    write_case(out_dir / name, {**inputs, "mask": mask, "d_out": d_out, "out": out, **grads},
               meta_for(name, seed, description, n_heads=1, masked_value=MASKED))
    print(f"{name:24s} lab {LAB}  q {shape(q)} k {shape(k)} v {shape(v)}  "
          f"removed {int((mask != 0).sum())} of {mask.size}  numpy-vs-torch dy {diff:.1e}  "
          f"finite differences: {fd_count} entries, max rel. error {fd_error:.1e}")

    for name, seed, T, d_model, n_heads, norm, description in MHA_CASES:
        x, weights, biases, d_out = draw_mha(seed, T, d_model)
        y, grads = torch_block_backward(x, weights, biases, n_heads, norm, d_out)
        inputs = {"x": x, **dict(zip(PARAM_NAMES, weights + biases))}
        forward = lambda values, n_heads=n_heads, norm=norm: numpy_block(values, n_heads, norm)
        diff = max_diff(y, forward(inputs))
        check_forward(name, diff)
        fd_error, fd_count = finite_difference_check(name, seed, forward, inputs, grads, d_out,
                                                     FD_ENTRIES_PER_ARRAY)
        extra = {"n_heads": n_heads, "causal": True, "bias": True}
        if norm is not None:
            extra.update(norm=norm, eps=EPS)
        grad_names = ["dx"] + ["d" + n for n in PARAM_NAMES]
        write_case(out_dir / name, {**inputs, "d_out": d_out, "y": y,
                                    **{n: grads[n] for n in grad_names}},
                   meta_for(name, seed, description, **extra))
        print(f"{name:24s} lab {LAB}  x {shape(x)} H {n_heads}  {norm or 'no norm':7s}  causal  "
              f"max|y| {np.max(np.abs(y)):5.2f}  numpy-vs-torch dy {diff:.1e}  "
              f"finite differences: {fd_count} entries, max rel. error {fd_error:.1e}")
