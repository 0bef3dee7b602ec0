"""Lab 06 fixtures: cross-attention with key-padding and additive masks, from PyTorch.

Each case folder holds

    query.npy                  (B, T, d_model)
    key.npy, value.npy         (B, S, d_model), separate inputs (encoder-decoder attention)
    w_q.npy ... w_o.npy        (d_model, d_model), applied as x @ W
    b_q.npy ... b_o.npy        (d_model), only when the case has biases (meta "bias")
    key_padding_mask.npy       (B, S) numpy bool, True = ignore that key (torch's convention)
    attn_mask.npy              (T, S) float32 additive mask, only in cross_attn_mask; it holds
                               -inf at some positions, as a torch user would write it
    y.npy                      (B, T, d_model)
    attn.npy                   (B, H, T, S), per head (average_attn_weights=False)
    meta.json

torch.nn.MultiheadAttention(d_model, H, bias, batch_first=True) runs in float64 on the float32
inputs; y and attn are rounded to float32. No query row is fully masked: torch returns NaN there,
and the workbook returns zeros (its tests check that as an invariant, not against torch).
Before writing, every case is recomputed with plain NumPy in float64 and must agree to 1e-6.
"""

import numpy as np
import torch

import make_fixtures

LAB = "06"

# name, seed, B, T, S, d_model, H, bias, padded keys per sequence, attn_mask kind, description
CASES = [
    ("cross_padding", 6000, 2, 4, 6, 16, 4, True, [[], [4, 5]], None,
     "Cross-attention: 4 queries over 6 keys, d_model 16, 4 heads, random biases; sequence 1 "
     "has its last 2 keys padded."),
    ("cross_attn_mask", 6001, 2, 5, 7, 12, 3, True, [[6], [5, 6]], "mixed",
     "A (T, S) float additive mask (0, finite negatives, a positive value and -inf) combined with "
     "key padding (key 6 of sequence 0, keys 5-6 of sequence 1); 5 queries over 7 keys, "
     "d_model 12, 3 heads, random biases."),
    ("cross_no_bias", 6002, 3, 3, 5, 8, 2, False, [[], [0], [3, 4]], None,
     "bias=False: no b_q ... b_o files; 3 sequences, 3 queries over 5 keys, d_model 8, 2 heads; "
     "padding at the front of sequence 1 and at the end of sequence 2."),
]


def draw(seed, B, T, S, d_model, bias):
    """query, key, value, the four weights and (if bias) the four biases, all float32, in order."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    query = rng.standard_normal((B, T, d_model), dtype=f32)
    key = rng.standard_normal((B, S, d_model), dtype=f32)
    value = rng.standard_normal((B, S, d_model), dtype=f32)
    w_scale = f32(1.0 / np.sqrt(d_model))
    weights = [rng.standard_normal((d_model, d_model), dtype=f32) * w_scale for _ in range(4)]
    biases = [rng.standard_normal(d_model, dtype=f32) * f32(0.5) for _ in range(4)] if bias else None
    return query, key, value, weights, biases


def make_attn_mask(kind, T, S):
    """(T, S) float32 additive mask, or None. Row t keeps at least its keys 0..S-3 partly open."""
    if kind is None:
        return None
    mask = np.zeros((T, S), dtype=np.float32)
    for t in range(T):
        mask[t, (t + 1) % (S - 2)] = -np.inf       # one key removed per row, never a padded one
        mask[t, (t + 3) % (S - 2)] = -2.5          # a finite penalty
    mask[0, 0] = 1.5                                # a positive additive value
    mask[T - 1, 2] = -0.75
    return mask


def torch_cross(query, key, value, weights, biases, n_heads, padding, attn_mask):
    """nn.MultiheadAttention in float64 -> y (B, T, d), attn (B, H, T, S) as float64 NumPy."""
    d_model = query.shape[-1]
    f64 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    mha = torch.nn.MultiheadAttention(d_model, n_heads, bias=biases is not None,
                                      batch_first=True, dtype=torch.float64)
    # Training mode with dropout 0 (numerically the same as eval): keeps torch 1.13 off its eval
    # "fast path", see make_fixtures.torch_mha.
    mha.train()
    w_q, w_k, w_v, w_o = weights
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([f64(w_q).T, f64(w_k).T, f64(w_v).T]))
        mha.out_proj.weight.copy_(f64(w_o).T)
        if biases is not None:
            b_q, b_k, b_v, b_o = biases
            mha.in_proj_bias.copy_(torch.cat([f64(b_q), f64(b_k), f64(b_v)]))
            mha.out_proj.bias.copy_(f64(b_o))
        y, attn = mha(f64(query), f64(key), f64(value),
                      key_padding_mask=torch.from_numpy(padding),
                      attn_mask=None if attn_mask is None else f64(attn_mask),
                      need_weights=True, average_attn_weights=False)
    return y.numpy(), attn.numpy()


def numpy_cross(query, key, value, weights, biases, n_heads, padding, attn_mask):
    """The same in plain float64 NumPy, to check the convention mapping."""
    B, T, d_model = query.shape
    S = key.shape[1]
    d_head = d_model // n_heads
    zeros = [np.zeros(d_model)] * 4
    b_q, b_k, b_v, b_o = [np.asarray(b, np.float64) for b in (biases or zeros)]
    w_q, w_k, w_v, w_o = [np.asarray(w, np.float64) for w in weights]

    def split(x, w, b, length):  # (B, L, d) -> (B, H, L, d_head)
        return (np.asarray(x, np.float64) @ w + b).reshape(B, length, n_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = split(query, w_q, b_q, T), split(key, w_k, b_k, S), split(value, w_v, b_v, S)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)  # (B, H, T, S)
    if attn_mask is not None:
        scores = scores + np.asarray(attn_mask, np.float64)
    scores = np.where(padding[:, None, None, :], -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = e / e.sum(axis=-1, keepdims=True)
    context = (attn @ v).transpose(0, 2, 1, 3).reshape(B, T, d_model)
    return context @ w_o + b_o, attn


def generate(out_dir):
    for name, seed, B, T, S, d_model, n_heads, bias, padded, mask_kind, description in CASES:
        query, key, value, weights, biases = draw(seed, B, T, S, d_model, bias)
        padding = np.zeros((B, S), dtype=bool)
        for b, keys in enumerate(padded):
            padding[b, keys] = True
        attn_mask = make_attn_mask(mask_kind, T, S)

        y, attn = torch_cross(query, key, value, weights, biases, n_heads, padding, attn_mask)
        if not (np.isfinite(y).all() and np.isfinite(attn).all()):
            raise SystemExit(f"lab06.py: {name}: torch returned NaN; a query row is fully masked")
        y_np, attn_np = numpy_cross(query, key, value, weights, biases, n_heads, padding, attn_mask)
        diff = max(make_fixtures.max_diff(y, y_np), make_fixtures.max_diff(attn, attn_np))
        if diff > make_fixtures.NUMPY_TOLERANCE:
            raise SystemExit(f"lab06.py: {name}: torch and NumPy disagree by {diff:.3g}")

        arrays = {"query": query, "key": key, "value": value}
        arrays.update(zip(["w_q", "w_k", "w_v", "w_o"], weights))
        if bias:
            arrays.update(zip(["b_q", "b_k", "b_v", "b_o"], biases))
        if attn_mask is not None:
            arrays["attn_mask"] = attn_mask
        arrays.update({"y": y, "attn": attn})
        meta = {
            "case": name,
            "lab": LAB,
            "n_heads": n_heads,
            "bias": bias,
            "attn_mask": attn_mask is not None,
            "seed": seed,
            "generator": "scripts/fixture_cases/lab06.py",
            "torch": torch.__version__,
            "numpy": np.__version__,
            "description": description,
        }
        folder = out_dir / name
        make_fixtures.write_case(folder, arrays, meta)
        with open(folder / "key_padding_mask.npy", "wb") as f:
            np.save(f, np.ascontiguousarray(padding, dtype=np.bool_), allow_pickle=False)

        size_kb = sum(p.stat().st_size for p in folder.iterdir()) / 1024
        print(f"{name:24s} lab {LAB}  query ({B}, {T}, {d_model}) key/value ({B}, {S}, {d_model}) "
              f"H {n_heads}  bias {'yes' if bias else 'no '}  padded keys {int(padding.sum())}  "
              f"attn_mask {'yes' if attn_mask is not None else 'no '}  "
              f"numpy-vs-torch {diff:.1e}  {size_kb:.1f} KB")
