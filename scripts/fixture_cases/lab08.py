"""Lab 08 fixtures: grouped-query causal self-attention (GQA, MQA) with RoPE at per-sequence positions.

Each case folder holds

    x.npy                      (B, T, d_model)
    w_q.npy, w_o.npy           (d_model, d_model), applied as x @ W
    w_k.npy, w_v.npy           (d_model, H_kv * d_head), applied as x @ W; column block g
                               (g*d_head .. (g+1)*d_head - 1) is key/value head g
    y.npy                      (B, T, d_model), the output
    attn.npy                   (B, H, T, T), the attention weights of every query head
    k_rot.npy                  (B, H_kv, T, d_head): the keys after RoPE, what a KV cache holds
                               (the plain projected keys when the case has no RoPE)
    v_heads.npy                (B, H_kv, T, d_head): the projected values, split into kv heads
    k_repeated.npy             (B, H, T, d_head): torch.repeat_interleave(k_rot, n_rep, dim=1),
                               the tensor torch attended to (LLaMA's repeat_kv)
    positions.npy              (B, T) int64: row b holds sequence b's token positions
    meta.json                  as make_fixtures.py's, plus n_kv_heads, theta, max_seq_len and
                               pairing (all three null for a case without RoPE)

d_head = d_model / H, n_rep = H / H_kv, and query head h reads key/value head h // n_rep. The
float32 inputs are drawn from numpy.random.default_rng(seed).standard_normal in the order x, w_q,
w_k, w_v, w_o, the weights scaled by 1/sqrt(d_model) (w_k and w_v are not square, so they are
drawn here rather than by make_fixtures.draw_inputs). Every array is float32 apart from positions.

The referee is torch, in float64 on the float32 inputs:
  * RoPE as Meta's LLaMA reference code writes it (lab05.py's torch_rope): each interleaved pair
    (2k, 2k + 1) of a head is one complex number (torch.view_as_complex) multiplied by
    torch.polar(1, pos * theta^(-2k/d_head)), except that positions are (B, T): sequence b is
    rotated at its own row of positions. RoPE touches q and k, never v.
  * the key and value heads are repeated literally with torch.repeat_interleave(., n_rep, dim=1)
    on (B, H_kv, T, d_head) tensors, and the H query heads then run ordinary multi-head attention:
    nn.MultiheadAttention with its in-projection set to the identity, fed the rotated q and the
    repeated k and v (heads merged back), its own boolean causal mask (by token index within the
    sequence: query t sees keys j <= t) and out_proj.weight = W_O.T, so torch does the splitting,
    the scaled scores, the masked softmax, the merge and W_O.
Before writing, every case is recomputed with plain NumPy in float64, which does not repeat any
head: query head h indexes key/value head h // n_rep directly (the rotation written with cos/sin).
The script stops if the two differ by more than 1e-6.
"""

import sys

import numpy as np
import torch

import make_fixtures
from fixture_cases.lab05 import merge_heads, split_heads, torch_causal_mha  # any head count

LAB = "08"
NUMPY_TOLERANCE = 1e-6
PAIRING = "interleaved (2k, 2k+1)"

# name, seed, x shape (B, T, d_model), n_heads, n_kv_heads, theta (None: no RoPE), max_seq_len,
# first position of each sequence, description
CASES = [
    ("gqa_rope", 1080, (2, 6, 16), 4, 2, 10000.0, 16, (0, 3),
     "Grouped-query causal self-attention with RoPE: 2 sequences of 6 tokens, d_model 16, 4 query "
     "heads of width 4 sharing 2 key/value heads (n_rep 2), theta 10000; sequence 0 at positions "
     "0..5, sequence 1 at positions 3..8."),
    ("mqa_rope", 1081, (2, 5, 16), 4, 1, 10000.0, 16, (2, 0),
     "Multi-query attention (one key/value head shared by all 4 query heads) with RoPE: 2 "
     "sequences of 5 tokens, d_model 16, head width 4, theta 10000; sequence 0 at positions 2..6, "
     "sequence 1 at positions 0..4."),
    ("gqa_no_rope", 1082, (1, 7, 32), 8, 2, None, None, (0,),
     "Grouped-query causal self-attention without RoPE: 1 sequence of 7 tokens, d_model 32, 8 "
     "query heads of width 4 sharing 2 key/value heads (n_rep 4). positions.npy holds 0..6 for "
     "uniformity only; k_rot holds the unrotated keys."),
]


def draw(seed, x_shape, n_heads, n_kv_heads):
    """x (B, T, d_model), w_q (d, d), w_k, w_v (d, H_kv * d_head), w_o (d, d): float32, in order."""
    rng = np.random.default_rng(seed)
    d_model = x_shape[-1]
    kv_width = n_kv_heads * (d_model // n_heads)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d_model))
    shapes = [(d_model, d_model), (d_model, kv_width), (d_model, kv_width), (d_model, d_model)]
    w_q, w_k, w_v, w_o = (rng.standard_normal(shape, dtype=np.float32) * w_scale
                          for shape in shapes)
    return x, w_q, w_k, w_v, w_o


def torch_rope(heads, positions, theta):
    """LLaMA's apply_rotary_emb on (B, H, T, d_head) float64 heads, sequence b at positions[b]."""
    d_head = heads.shape[-1]
    freqs = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head))
    angles = positions.to(torch.float64)[..., None] * freqs               # (B, T, d_head / 2)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)[:, None]     # (B, 1, T, d_head / 2)
    pairs = torch.view_as_complex(heads.reshape(*heads.shape[:-1], d_head // 2, 2).contiguous())
    return torch.view_as_real(pairs * freqs_cis).flatten(-2)              # (B, H, T, d_head)


def torch_gqa(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, positions, theta):
    """Returns y (B, T, d_model), attn (B, H, T, T), k_rot, v_heads (B, H_kv, T, d_head) and
    k_repeated (B, H, T, d_head), all float64 NumPy."""
    f64 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    xt = f64(x)
    n_rep = n_heads // n_kv_heads
    q = split_heads(xt @ f64(w_q), n_heads)                                # (B, H, T, d_head)
    k = split_heads(xt @ f64(w_k), n_kv_heads)                             # (B, H_kv, T, d_head)
    v = split_heads(xt @ f64(w_v), n_kv_heads)
    if theta is not None:
        pos = torch.from_numpy(positions)
        q, k = torch_rope(q, pos, theta), torch_rope(k, pos, theta)
    k_repeated = torch.repeat_interleave(k, n_rep, dim=1)                  # (B, H, T, d_head)
    v_repeated = torch.repeat_interleave(v, n_rep, dim=1)
    y, attn = torch_causal_mha(merge_heads(q), merge_heads(k_repeated), merge_heads(v_repeated),
                               w_o, n_heads)
    return y.numpy(), attn.numpy(), k.numpy(), v.numpy(), k_repeated.numpy()


def numpy_gqa(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, positions, theta):
    """The same in float64 NumPy without repeating heads: query head h reads kv head h // n_rep.

    Returns y, attn, k_rot, v_heads and, for comparison with torch's k_repeated, the key head
    each query head indexed, stacked (B, H, T, d_head).
    """
    x = x.astype(np.float64)
    B, T, d_model = x.shape
    d_head = d_model // n_heads
    n_rep = n_heads // n_kv_heads

    def split(w, heads):
        return (x @ w.astype(np.float64)).reshape(B, T, heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = split(w_q, n_heads), split(w_k, n_kv_heads), split(w_v, n_kv_heads)
    if theta is not None:
        k_index = np.arange(d_head // 2)
        angles = positions[..., None].astype(np.float64) * theta ** (-2.0 * k_index / d_head)
        c, s = np.cos(angles)[:, None], np.sin(angles)[:, None]  # (B, 1, T, d_head / 2)

        def rotate(a):
            out = np.empty_like(a)
            x0, x1 = a[..., 0::2], a[..., 1::2]
            out[..., 0::2] = x0 * c - x1 * s
            out[..., 1::2] = x0 * s + x1 * c
            return out

        q, k = rotate(q), rotate(k)

    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    attn = np.empty((B, n_heads, T, T))
    context = np.empty((B, T, d_model))
    k_read = np.empty((B, n_heads, T, d_head))
    for h in range(n_heads):
        g = h // n_rep
        k_read[:, h] = k[:, g]
        scores = q[:, h] @ k[:, g].transpose(0, 2, 1) / np.sqrt(d_head)  # (B, T, T)
        scores[:, future] = -np.inf
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn[:, h] = e / e.sum(axis=-1, keepdims=True)
        context[..., h * d_head:(h + 1) * d_head] = attn[:, h] @ v[:, g]
    y = context @ w_o.astype(np.float64)
    return y, attn, k, v, k_read


def generate(out_dir):
    for (name, seed, x_shape, n_heads, n_kv_heads, theta, max_seq_len, firsts,
         description) in CASES:
        B, T, _ = x_shape
        x, w_q, w_k, w_v, w_o = draw(seed, x_shape, n_heads, n_kv_heads)
        positions = np.stack([np.arange(first, first + T, dtype=np.int64) for first in firsts])
        if max_seq_len is not None and positions.max() >= max_seq_len:
            sys.exit(f"make_fixtures.py: {name}: position {positions.max()} >= max_seq_len "
                     f"{max_seq_len}")
        outputs = torch_gqa(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, positions, theta)
        y, attn, k_rot, v_heads, k_repeated = outputs

        reference = numpy_gqa(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, positions, theta)
        diff = max(make_fixtures.max_diff(a, b) for a, b in zip(outputs, reference))
        if diff > NUMPY_TOLERANCE:
            sys.exit(f"make_fixtures.py: {name}: torch and NumPy disagree by {diff:.3g}; the "
                     "grouping of heads, the RoPE convention or the mapping onto "
                     "nn.MultiheadAttention is wrong")

        meta = {
            "case": name,
            "lab": LAB,
            "n_heads": n_heads,
            "n_kv_heads": n_kv_heads,
            "causal": True,
            "theta": theta,
            "max_seq_len": max_seq_len,
            "pairing": PAIRING if theta is not None else None,
            "seed": seed,
            "generator": make_fixtures.GENERATOR,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "description": description,
        }
        folder = out_dir / name
        make_fixtures.write_case(folder, {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o,
                                          "y": y, "attn": attn, "k_rot": k_rot,
                                          "v_heads": v_heads, "k_repeated": k_repeated}, meta)
        with open(folder / "positions.npy", "wb") as f:
            np.save(f, np.ascontiguousarray(positions, dtype="<i8"), allow_pickle=False)

        shape = lambda a: "(" + ", ".join(map(str, a.shape)) + ")"
        rows = " ".join(f"{row[0]}..{row[-1]}" for row in positions)
        rope = f"theta {theta:g}" if theta is not None else "no RoPE"
        print(f"{name:24s} lab {LAB}  x {shape(x):12s} H {n_heads}  H_kv {n_kv_heads}  "
              f"w_k {shape(w_k):8s} {rope:11s} positions {rows:9s} attn {shape(attn):14s} "
              f"k_rot {shape(k_rot):14s} numpy-vs-torch {diff:.1e}")
