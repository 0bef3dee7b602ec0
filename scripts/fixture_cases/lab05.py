"""Lab 05 fixtures: causal self-attention with rotary position embeddings (RoPE) on Q and K.

Each case folder holds make_fixtures.py's x, w_q, w_k, w_v, w_o, y, attn (float32), plus

    q_rot.npy, k_rot.npy   (B, H, T, d_head) float32: the projected, split and rotated q and k
    positions.npy          (T,) int64: the token positions
    meta.json              as make_fixtures.py's, plus theta, max_seq_len and pairing

The referee is torch, in float64 on the float32 inputs:
  * RoPE as Meta's LLaMA reference code writes it: each interleaved pair (2k, 2k + 1) of a head
    is read as one complex number (torch.view_as_complex) and multiplied by
    torch.polar(1, pos * theta^(-2k/d_head)). This is the interleaved convention of the lab, not
    GPT-NeoX's rotate-half.
  * attention as nn.MultiheadAttention with its own boolean causal mask. Its in-projection is set
    to the identity and it is given the rotated q, k and the plain v (heads merged back), so torch
    does the splitting, the scaled scores, the masked softmax, the merge and W_O.
Before writing, every case is recomputed with plain NumPy in float64 (rotation written as
cos/sin of each pair) and the script stops if the two differ by more than 1e-6.
"""

import sys

import numpy as np
import torch

import make_fixtures

THETA = 10000.0
MAX_SEQ_LEN = 16  # covers positions 3..8 of the offset case
NUMPY_TOLERANCE = 1e-6

# name, seed, x shape (B, T, d_model), n_heads, first position, description
CASES = [
    ("rope_causal", 1050, (2, 6, 16), 2, 0,
     "Causal self-attention with RoPE on q and k: 2 sequences of 6 tokens, d_model 16, 2 heads of "
     "width 8, theta 10000, positions 0..5."),
    ("rope_offset_positions", 1050, (2, 6, 16), 2, 3,
     "The inputs of rope_causal at positions 3..8: q_rot and k_rot differ from rope_causal's, "
     "while y and attn agree with it to float64 rounding, since scores depend on offsets only."),
]


def split_heads(a, n_heads):
    """(B, T, d_model) -> (B, H, T, d_head)."""
    B, T, d_model = a.shape
    return a.reshape(B, T, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(a):
    """(B, H, T, d_head) -> (B, T, H * d_head)."""
    B, H, T, d_head = a.shape
    return a.transpose(1, 2).reshape(B, T, H * d_head)


def torch_rope(heads, positions, theta):
    """LLaMA's apply_rotary_emb on (B, H, T, d_head) float64 heads at positions (T,)."""
    d_head = heads.shape[-1]
    freqs = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head))
    angles = torch.outer(positions.to(torch.float64), freqs)             # (T, d_head / 2)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)             # complex128
    pairs = torch.view_as_complex(heads.reshape(*heads.shape[:-1], d_head // 2, 2).contiguous())
    return torch.view_as_real(pairs * freqs_cis).flatten(-2)              # (B, H, T, d_head)


def torch_rope_attention(x, w_q, w_k, w_v, w_o, n_heads, positions, theta):
    """Returns y (B, T, d_model), attn (B, H, T, T), q_rot, k_rot (B, H, T, d_head), float64."""
    f64 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    xt = f64(x)
    pos = torch.from_numpy(positions)
    q_rot = torch_rope(split_heads(xt @ f64(w_q), n_heads), pos, theta)
    k_rot = torch_rope(split_heads(xt @ f64(w_k), n_heads), pos, theta)
    v = xt @ f64(w_v)
    y, attn = torch_causal_mha(merge_heads(q_rot), merge_heads(k_rot), v, w_o, n_heads)
    return y.numpy(), attn.numpy(), q_rot.numpy(), k_rot.numpy()


def torch_causal_mha(q, k, v, w_o, n_heads):
    """nn.MultiheadAttention on projected q, k, v (B, T, d_model) float64, heads side by side,
    with its in-projection set to the identity: torch splits the heads, scales, masks causally
    with its own boolean mask, takes the softmax, merges and applies W_O.
    Returns y (B, T, d_model) and attn (B, H, T, T) as tensors."""
    B, T, d_model = q.shape
    mha = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True,
                                      dtype=torch.float64)
    mha.train()  # avoids torch 1.13's eval fast path, which fails with bias=False; dropout is 0
    with torch.no_grad():
        eye = torch.eye(d_model, dtype=torch.float64)
        mha.in_proj_weight.copy_(torch.cat([eye, eye, eye]))  # q, k, v are projected already
        mha.out_proj.weight.copy_(torch.from_numpy(np.asarray(w_o, dtype=np.float64)).T)
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool()  # True = may not attend
        return mha(q, k, v, attn_mask=mask, need_weights=True, average_attn_weights=False)


def numpy_rope_attention(x, w_q, w_k, w_v, w_o, n_heads, positions, theta):
    """The same in float64 NumPy, the rotation written with cos and sin of each pair."""
    x = x.astype(np.float64)
    B, T, d_model = x.shape
    d_head = d_model // n_heads

    def split(w):
        return (x @ w.astype(np.float64)).reshape(B, T, n_heads, d_head).transpose(0, 2, 1, 3)

    k_index = np.arange(d_head // 2)
    angles = positions[:, None].astype(np.float64) * theta ** (-2.0 * k_index / d_head)  # (T, d/2)
    c, s = np.cos(angles), np.sin(angles)

    def rotate(a):
        out = np.empty_like(a)
        x0, x1 = a[..., 0::2], a[..., 1::2]
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    q, k, v = rotate(split(w_q)), rotate(split(w_k)), split(w_v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    scores[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = e / e.sum(axis=-1, keepdims=True)
    y = (attn @ v).transpose(0, 2, 1, 3).reshape(B, T, d_model) @ w_o.astype(np.float64)
    return y, attn, q, k


def generate(out_dir):
    results = {}
    for name, seed, x_shape, n_heads, first, description in CASES:
        x, (w_q, w_k, w_v, w_o) = make_fixtures.draw_inputs(seed, x_shape, 1.0)
        T = x_shape[1]
        positions = np.arange(first, first + T, dtype=np.int64)
        y, attn, q_rot, k_rot = torch_rope_attention(x, w_q, w_k, w_v, w_o, n_heads, positions, THETA)

        reference = numpy_rope_attention(x, w_q, w_k, w_v, w_o, n_heads, positions, THETA)
        diff = max(make_fixtures.max_diff(a, b) for a, b in zip((y, attn, q_rot, k_rot), reference))
        if diff > NUMPY_TOLERANCE:
            sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree by {diff:.3g}; "
                     "the RoPE convention or the mapping onto nn.MultiheadAttention is wrong")
        results[name] = (y, attn)

        meta = {
            "case": name,
            "lab": "05",
            "n_heads": n_heads,
            "causal": True,
            "theta": THETA,
            "max_seq_len": MAX_SEQ_LEN,
            "pairing": "interleaved (2k, 2k+1)",
            "seed": seed,
            "generator": make_fixtures.GENERATOR,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "description": description,
        }
        folder = out_dir / name
        make_fixtures.write_case(folder, {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o,
                                          "y": y, "attn": attn, "q_rot": q_rot, "k_rot": k_rot}, meta)
        with open(folder / "positions.npy", "wb") as f:
            np.save(f, np.ascontiguousarray(positions, dtype="<i8"), allow_pickle=False)

        shift = ""
        if first != 0:  # same inputs as rope_causal, shifted: scores depend on offsets only
            y0, attn0 = results["rope_causal"]
            shift = (f"  vs rope_causal dy {make_fixtures.max_diff(y, y0):.1e} "
                     f"dattn {make_fixtures.max_diff(attn, attn0):.1e}")
        print(f"{name:24s} lab 05  x {str(x_shape):12s} H {n_heads}  theta {THETA:g}  "
              f"positions {positions[0]}..{positions[-1]}  numpy-vs-torch {diff:.1e}{shift}")
