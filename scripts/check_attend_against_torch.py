#!/usr/bin/python3
"""Checks `workbook attend` against PyTorch on random cases that are not in the repository.

A maintainer's tool; CI never runs it. It draws random inputs, runs

    workbook attend --impl IMPL --x X.npy --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy
                    --heads H [--kv-heads N] [--causal] [--rope-theta 10000 [--positions P.npy]]
                    --out Y.npy [--attn-out A.npy]

and compares Y (X's shape) and, when asked for, A ((H, T, T) for a 2-D X, (B, H, T, T) for a 3-D
X) with torch run in float64 on the same float32 inputs. Each case is one of three kinds:

  * plain (about half): --heads H [--causal] --attn-out, lab 01/02's layer, against
    nn.MultiheadAttention (scripts/make_fixtures.py's torch_mha, so the convention mapping is the
    fixtures' one);
  * grouped-query (about 30 %): --kv-heads N --causal, lab 08's layer, with N a random divisor of
    H (N = H and N = 1, multi-query, included), W_K and W_V of shape (d, N * d_head), without
    --attn-out (the layer never forms the weights), so only Y is compared;
  * RoPE without --kv-heads (about 20 %): --rope-theta 10000 --causal, lab 06's layer with RoPE
    as its transform_qk, half of them with --attn-out (lab 06's forward) and half without (lab
    07's efficient_forward);
the last two against scripts/fixture_cases/lab08.py's torch_gqa, the referee of lab 08's fixtures
(with N = H for the third kind: repeat_interleave by 1 is no repeat). Half of the grouped-query
cases and all of the RoPE ones add --rope-theta 10000 (interleaved pairs (2k, 2k + 1), angle
pos * theta^(-2k/d_head)), and then --positions is either absent (0 .. T-1), a (T) row shared by
every sequence, or a (B, T) file, one row per sequence (lab 08's (B, T) overload of RoPE, on both
layers); for a 2-D X the (B, T) file is (1, T), which attend accepts as its one sequence's row.
Each row starts at its own random offset in 0..499 and then steps by 1 to 3 at random: with
consecutive positions the scores, which depend on position differences only, would not show
whether the command read the file at all. RoPE cases have an even d_head. The cases cover
batched and unbatched inputs, causal and not, T = 1, d_head = 1, H = 1 and large logits (W_Q and
W_K scaled so that scores grow 30 to 100 times), with B in 1..4, T in 1..16, H in 1..8, d_head in
1..16 and d_model = H * d_head.

Tolerance. The command computes in float32 and torch in float64, and the softmax's sensitivity
grows with the size of its scores: at scores in the thousands a correct float32 result differs
from float64 by far more than 1e-5. So the allowed max abs diff is --tolerance scaled by the
case (both figures are printed on every line):

    attn: tolerance * k                 k = max(1, max |score| the softmax sees)
    y:    tolerance * k * max(1, max |y|)

For ordinary cases k is a few units and this is close to an absolute 1e-5; a float32 NumPy
implementation stays 40 to 100 times inside it on both kinds of case. For the cases refereed by
torch_gqa, the scores are its own: RoPE'd queries against its repeated, RoPE'd keys, causal.

Then it feeds the command bad inputs (a missing file, a truncated .npy, float64 data, a weight of
the wrong shape, heads that do not divide d_model, a rank-4 X; --kv-heads that does not divide
--heads, is 0, comes without --causal or with --attn-out, or has W_K of (d, d); --positions of the
wrong shape, on both layers) and checks that each exits with status 2, prints exactly one line on
stderr and writes no file.

Exit statuses. The command is expected to exit 0 on every random case (1, "a TODO stub was
reached", is what --impl learner gives before the lab is done, and counts as that case failing)
and 2 on every bad input. This script exits 0 if every check passed, 1 if one failed, and 2 if it
could not check at all: a usage error, no workbook program, or no numpy or torch.

    /usr/bin/python3 scripts/check_attend_against_torch.py [--impl learner] [--cases 200]
    /usr/bin/python3 scripts/check_attend_against_torch.py --seed 1712345678   # replay a run

Case i depends only on the seed and i, so --seed S --cases N replays the first N cases of a run.
"""

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import numpy as np
    import torch
except ImportError as error:
    print(f"check_attend_against_torch.py: cannot import {error.name}. "
          "HINT: run scripts/install-deps.sh --fixtures and use /usr/bin/python3", file=sys.stderr)
    sys.exit(2)

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: make_fixtures, fixture_cases
from make_fixtures import numpy_mha, torch_mha  # noqa: E402  (the referee of the fixtures)
from fixture_cases.lab08 import split_heads, torch_gqa, torch_rope  # noqa: E402  (lab 08's)

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_SECONDS = 60
ROPE_THETA = 10000.0
MAX_OFFSET = 500  # positions of a (T) or (B, T) file start in 0 .. MAX_OFFSET - 1


def shape_str(shape):
    return "(" + ", ".join(map(str, shape)) + ")"


# ---- Random cases -------------------------------------------------------------------------------

# The first cases force every property the run must cover, so that even --cases 18 covers them;
# the rest are free draws. A forced case is plain unless it says otherwise.
FORCED = [
    {"batched": True, "causal": False, "large": False},
    {"batched": False, "causal": True, "large": False},
    {"T": 1, "batched": True, "causal": True},
    {"T": 1, "batched": False, "causal": False},
    {"d_head": 1, "H": 4},
    {"H": 1},
    {"large": True, "causal": True, "batched": True},
    {"large": True, "causal": False, "batched": False},
    {"kind": "gqa", "H": 8, "N": 2, "rope": True, "positions": "BT", "batched": True, "B": 3},
    {"kind": "gqa", "H": 4, "N": 1, "rope": True, "positions": "T", "batched": True, "B": 2},
    {"kind": "gqa", "H": 6, "N": 6, "rope": False, "batched": True},
    {"kind": "gqa", "H": 4, "N": 2, "rope": True, "positions": "BT", "batched": False},
    {"kind": "gqa", "N": 1, "rope": True, "positions": "T", "batched": False},
    {"kind": "gqa", "T": 1, "rope": True, "positions": "BT", "batched": True, "B": 3},
    {"kind": "gqa", "large": True, "rope": True, "positions": None, "batched": True},
    {"kind": "rope", "positions": "BT", "batched": True, "B": 3, "attn": True},
    {"kind": "rope", "positions": "BT", "batched": True, "B": 2, "attn": False},
    {"kind": "rope", "positions": "BT", "batched": False, "attn": True},
]


def draw_case(seed, index):
    """Case `index` of the run with `seed`: a dict of sizes and flags plus the float32 inputs."""
    rng = np.random.default_rng([seed, index])
    case = {
        "B": int(rng.integers(1, 5)),
        "T": int(rng.integers(1, 17)),
        "H": int(rng.integers(1, 9)),
        "d_head": int(rng.integers(1, 17)),
        "batched": bool(rng.random() < 0.7),
        "causal": bool(rng.random() < 0.5),
        "large": bool(rng.random() < 0.25),
    }
    large_scale = float(rng.uniform(30.0, 100.0))
    kind_draw = float(rng.random())
    case["kind"] = "plain" if kind_draw < 0.5 else "gqa" if kind_draw < 0.8 else "rope"
    n_draw = float(rng.random())       # picks N among H's divisors once H is known
    even_d_head = 2 * int(rng.integers(1, 9))
    case["rope"] = bool(rng.random() < 0.5)
    positions_draw = float(rng.random())
    case["positions"] = None if positions_draw < 0.25 else "T" if positions_draw < 0.5 else "BT"
    case["attn"] = bool(rng.random() < 0.5)
    offsets = rng.choice(MAX_OFFSET, size=4, replace=False)  # a different start per sequence
    steps = rng.integers(1, 4, size=(4, 15))                  # and its own gaps: see below
    if index < len(FORCED):
        case.update({"kind": "plain", **FORCED[index]})
    kind, H = case["kind"], case["H"]
    if kind == "plain":
        case.update(N=None, rope=False, attn=True)
    else:  # lab 08's layer, or lab 06's with RoPE: torch_gqa's referee is causal
        case["causal"] = True
        if kind == "rope":
            case.update(N=H, rope=True)
        else:
            case["attn"] = False  # --kv-heads refuses --attn-out
            if "N" not in case:
                divisors = [n for n in range(1, H + 1) if H % n == 0]
                case["N"] = divisors[int(n_draw * len(divisors))]
    if not case["rope"]:
        case["positions"] = None
    elif case["d_head"] % 2:
        case["d_head"] = even_d_head  # RoPE rotates pairs
    case["scale"] = large_scale if case["large"] else 1.0
    d_model = case["H"] * case["d_head"]
    kv_width = case["N"] * case["d_head"] if kind == "gqa" else d_model
    shape = (case["B"], case["T"], d_model) if case["batched"] else (case["T"], d_model)
    x = rng.standard_normal(shape, dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d_model))
    case["x"] = x
    case["w"] = [rng.standard_normal((d_model, cols), dtype=np.float32) * w_scale
                 for cols in (d_model, kv_width, kv_width, d_model)]
    # Large logits: scale W_Q and W_K, so every score grows by `scale` while y stays O(1).
    for role in (0, 1):
        case["w"][role] *= np.float32(np.sqrt(case["scale"]))
    # --positions: (T), or one row per sequence ((1, T) for a 2-D X). A row is its offset plus
    # increasing steps of 1 to 3: RoPE's scores depend on position differences only, so rows of
    # consecutive positions would give every offset the output of 0 .. T-1, and a command that
    # ignored the file, or used its first row for every sequence, would pass.
    T, B = case["T"], (case["B"] if case["batched"] else 1)
    rows = offsets[:, None] + np.concatenate([np.zeros((4, 1), np.int64), steps.cumsum(1)], 1)
    case["p"] = {"T": rows[0, :T], "BT": rows[:B, :T], None: None}[case["positions"]]
    return case


def save_inputs(folder, x, weights, positions=None):
    """Writes X.npy, WQ.npy, WK.npy, WV.npy, WO.npy (and P.npy) and returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, value in zip(["x", "wq", "wk", "wv", "wo"], [x, *weights]):
        paths[name] = folder / f"{name.upper()}.npy"
        np.save(paths[name], value, allow_pickle=False)
    if positions is not None:
        paths["positions"] = folder / "P.npy"
        np.save(paths["positions"], positions.astype("<i8"), allow_pickle=False)
    return paths


def attend_command(workbook, impl, paths, heads, causal, y_path, attn_path, kv_heads=None,
                   rope_theta=None):
    """The command line; no --attn-out when attn_path is None, --positions when paths has one."""
    cmd = [str(workbook), "attend", "--impl", impl,
           "--x", str(paths["x"]), "--wq", str(paths["wq"]), "--wk", str(paths["wk"]),
           "--wv", str(paths["wv"]), "--wo", str(paths["wo"]), "--heads", str(heads)]
    if kv_heads is not None:
        cmd += ["--kv-heads", str(kv_heads)]
    if causal:
        cmd.append("--causal")
    if rope_theta is not None:
        cmd += ["--rope-theta", f"{rope_theta:g}"]
    if "positions" in paths:
        cmd += ["--positions", str(paths["positions"])]
    cmd += ["--out", str(y_path)]
    return cmd + (["--attn-out", str(attn_path)] if attn_path is not None else [])


def run(cmd):
    """Runs cmd; returns (exit status, stdout, stderr); a timeout is status None."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT_SECONDS} s"
    return proc.returncode, proc.stdout, proc.stderr


def first_line(text):
    lines = text.strip().splitlines()
    return lines[0] if lines else "(nothing on stderr)"


def load_output(path, expected_shape, what):
    """Loads a float32 output of the expected shape; returns (array, None) or (None, reason)."""
    if not path.exists():
        return None, f"{what} was not written"
    try:
        value = np.load(path, allow_pickle=False)
    except Exception as error:  # a broken file is a failure of the command, not of this script
        return None, f"{what} cannot be read: {error}"
    if value.dtype != np.float32:
        return None, f"{what} is {value.dtype}, not float32"
    if value.shape != expected_shape:
        return None, f"{what} is {shape_str(value.shape)}, expected {shape_str(expected_shape)}"
    if not np.all(np.isfinite(value)):
        return None, f"{what} holds inf or NaN"
    return value, None


def plain_reference(case):
    """torch_mha's y (X's shape) and attn (B, H, T, T), and the scaled, unmasked scores."""
    x, weights, H, causal = case["x"], case["w"], case["H"], case["causal"]
    y_ref, attn_ref = torch_mha(x, *weights, H, causal)
    return y_ref, attn_ref, numpy_mha(x, *weights, H, causal)[2]


def gqa_reference(case):
    """lab08.torch_gqa's y and attn (B, H, T, T) for a causal case with N key/value heads (N = H
    without --kv-heads), and the scores it computed, from its own rotated keys and its RoPE."""
    x, weights, H = case["x"], case["w"], case["H"]
    x3 = x.reshape(-1, *x.shape[-2:])                      # (B, T, d), B = 1 for a 2-D X
    B, T, d_model = x3.shape
    p = case["p"] if case["p"] is not None else np.arange(T, dtype=np.int64)
    rows = np.broadcast_to(p.reshape(-1, T), (B, T)).copy()  # torch_gqa takes (B, T)
    theta = ROPE_THETA if case["rope"] else None
    y_ref, attn_ref, _, _, k_repeated = torch_gqa(x3, *weights, H, case["N"], rows, theta)
    q = split_heads(torch.from_numpy(x3.astype(np.float64)) @
                    torch.from_numpy(weights[0].astype(np.float64)), H)
    if theta is not None:
        q = torch_rope(q, torch.from_numpy(rows), theta)
    scores = (q @ torch.from_numpy(k_repeated).transpose(-2, -1)).numpy() / np.sqrt(d_model // H)
    return y_ref.reshape(x.shape), attn_ref, scores


def case_command(args, case, paths, y_path, attn_path):
    return attend_command(args.workbook, args.impl, paths, case["H"], case["causal"], y_path,
                          attn_path if case["attn"] else None,
                          kv_heads=case["N"] if case["kind"] == "gqa" else None,
                          rope_theta=ROPE_THETA if case["rope"] else None)


def check_case(args, index, folder):
    """Runs one random case; prints its line and returns True if it passed."""
    case = draw_case(args.seed, index)
    x, H, causal = case["x"], case["H"], case["causal"]
    paths = save_inputs(folder, x, case["w"], case["p"])
    y_path, attn_path = folder / "Y.npy", folder / "A.npy"

    reference = plain_reference if case["kind"] == "plain" else gqa_reference
    y_ref, attn_ref, scores = reference(case)  # attn_ref, scores: (B, H, T, T), B = 1 if 2-D
    if x.ndim == 2:
        attn_ref = attn_ref[0]                  # the command writes (H, T, T)
    kept = np.ones(scores.shape[-2:], dtype=bool)
    if causal:
        kept = np.tril(kept)
    k = max(1.0, float(np.max(np.abs(scores[..., kept]))))
    tol_attn = args.tolerance * k
    tol_y = args.tolerance * k * max(1.0, float(np.max(np.abs(y_ref))))

    layer = f"kv-heads {case['N']}" if case["kind"] == "gqa" else ""
    if case["rope"]:
        layer += (" " if layer else "") + "rope " + (
            "pos 0..T-1" if case["p"] is None else f"pos {shape_str(case['p'].shape)}")
    label = (f"case {index:3d}  x {shape_str(x.shape):13s} H {H} d_head {case['d_head']:2d}  "
             f"{'causal' if causal else 'full  '}  {layer:28s}  logits*{case['scale']:5.1f}  "
             f"max|score| {k:8.1f}")
    cmd = case_command(args, case, paths, y_path, attn_path)
    status, _, stderr = run(cmd)
    problem = None
    if status != 0:
        problem = f"exit status {status}: {first_line(stderr)}"
    else:
        y, problem = load_output(y_path, y_ref.shape, "Y")
        if problem is None and case["attn"]:
            attn, problem = load_output(attn_path, attn_ref.shape, "A")
        elif problem is None and attn_path.exists():
            problem = "A was written without --attn-out"
    if problem is not None:
        print(f"{label}  FAIL  {problem}")
        return False

    dy = float(np.max(np.abs(y.astype(np.float64) - y_ref)))
    dattn = float(np.max(np.abs(attn.astype(np.float64) - attn_ref))) if case["attn"] else 0.0
    ok = dy <= tol_y and dattn <= tol_attn
    attn_text = (f"dattn {dattn:.1e} (tol {tol_attn:.0e})" if case["attn"]
                 else "dattn  (no --attn-out)")
    print(f"{label}  dy {dy:.1e} (tol {tol_y:.0e})  {attn_text}  {'PASS' if ok else 'FAIL'}")
    if not ok and args.keep:
        print(f"          rerun: {shlex.join(cmd)}")
    return ok


# ---- Bad inputs ---------------------------------------------------------------------------------

def bad_input_cases():
    """(name, how to spoil a valid set of inputs) pairs; each function edits paths and the
    command's options (heads, kv_heads, causal, attn_out, rope_theta) in place."""

    def missing_file(folder, paths, opts):
        paths["x"] = folder / "does_not_exist.npy"

    def truncated(folder, paths, opts):
        data = paths["x"].read_bytes()
        paths["x"].write_bytes(data[: len(data) // 2])

    def float64_x(folder, paths, opts):
        np.save(paths["x"], np.load(paths["x"]).astype(np.float64), allow_pickle=False)

    def w_not_square(folder, paths, opts):
        d = np.load(paths["wo"]).shape[0]
        np.save(paths["wo"], np.zeros((d, d + 2), dtype=np.float32), allow_pickle=False)

    def w_wrong_size(folder, paths, opts):
        d = np.load(paths["wk"]).shape[0]
        np.save(paths["wk"], np.zeros((d + 2, d + 2), dtype=np.float32), allow_pickle=False)

    def heads_not_dividing(folder, paths, opts):
        opts["heads"] = 3  # d_model is 8

    def heads_zero(folder, paths, opts):
        opts["heads"] = 0

    def x_rank_4(folder, paths, opts):
        x = np.load(paths["x"])
        np.save(paths["x"], x.reshape((1, *x.shape)), allow_pickle=False)

    # Lab 08's layer, valid but for the one spoilt thing: H 4 (d_head 2), N 2, so W_K and W_V
    # are (8, 4); causal, no --attn-out.
    def grouped(paths, opts):
        for role in ("wk", "wv"):
            np.save(paths[role], np.load(paths[role])[:, :4], allow_pickle=False)
        opts.update(heads=4, kv_heads=2, attn_out=False)

    def kv_heads_not_dividing(folder, paths, opts):
        grouped(paths, opts)
        opts["kv_heads"] = 3

    def kv_heads_zero(folder, paths, opts):
        grouped(paths, opts)
        opts["kv_heads"] = 0

    def kv_heads_not_causal(folder, paths, opts):
        grouped(paths, opts)
        opts["causal"] = False

    def kv_heads_attn_out(folder, paths, opts):
        grouped(paths, opts)
        opts["attn_out"] = True

    def kv_heads_w_square(folder, paths, opts):
        grouped(paths, opts)
        d = np.load(paths["wq"]).shape[0]
        np.save(paths["wk"], np.zeros((d, d), dtype=np.float32), allow_pickle=False)

    # --positions for X (2, 4, 8), or (4, 8) once made 2-D: must be (4) or (2, 4), (1, 4).
    def positions(paths, opts, shape):
        paths["positions"] = paths["x"].parent / "P.npy"
        np.save(paths["positions"], np.zeros(shape, dtype=np.int64), allow_pickle=False)
        opts["rope_theta"] = ROPE_THETA

    def positions_t_plus_1(folder, paths, opts):  # lab 06's layer
        positions(paths, opts, (5,))

    def positions_b_plus_1(folder, paths, opts):  # lab 08's
        grouped(paths, opts)
        positions(paths, opts, (3, 4))

    def positions_rows_2d_x(folder, paths, opts):  # lab 08's, 2-D X: one sequence, not 2
        grouped(paths, opts)
        np.save(paths["x"], np.load(paths["x"])[0], allow_pickle=False)
        positions(paths, opts, (2, 4))

    def positions_rank_3(folder, paths, opts):  # lab 06's
        positions(paths, opts, (2, 4, 1))

    return [
        ("missing X file", missing_file),
        ("truncated X .npy", truncated),
        ("float64 X", float64_x),
        ("W_O of shape (d, d+2)", w_not_square),
        ("W_K of shape (d+2, d+2)", w_wrong_size),
        ("heads 3 with d_model 8", heads_not_dividing),
        ("heads 0", heads_zero),
        ("X of rank 4", x_rank_4),
        ("kv-heads 3 of heads 4", kv_heads_not_dividing),
        ("kv-heads 0", kv_heads_zero),
        ("kv-heads without causal", kv_heads_not_causal),
        ("kv-heads with attn-out", kv_heads_attn_out),
        ("kv-heads 2, W_K (d, d)", kv_heads_w_square),
        ("positions (5), X (2,4,8)", positions_t_plus_1),
        ("positions (3,4), kv-heads", positions_b_plus_1),
        ("positions (2,4), X (4,8)", positions_rows_2d_x),
        ("positions (2,4,1)", positions_rank_3),
    ]


def check_bad_input(args, name, spoil, folder):
    """Prints one line; returns True if the command refused the input as it should."""
    rng = np.random.default_rng([args.seed, 1_000_000])
    x = rng.standard_normal((2, 4, 8), dtype=np.float32)
    weights = [rng.standard_normal((8, 8), dtype=np.float32) for _ in range(4)]
    paths = save_inputs(folder / "in", x, weights)
    opts = {"heads": 2, "kv_heads": None, "causal": True, "attn_out": True, "rope_theta": None}
    spoil(folder / "in", paths, opts)
    out = folder / "out"
    out.mkdir()
    status, _, stderr = run(attend_command(args.workbook, args.impl, paths, opts["heads"],
                                           opts["causal"], out / "Y.npy",
                                           out / "A.npy" if opts["attn_out"] else None,
                                           kv_heads=opts["kv_heads"],
                                           rope_theta=opts["rope_theta"]))
    lines = stderr.splitlines()
    written = sorted(p.name for p in out.iterdir())
    problems = []
    if status != 2:
        problems.append(f"exit status {status}, expected 2")
    if len(lines) != 1 or not lines[0].strip():
        problems.append(f"{len(lines)} lines on stderr, expected 1")
    if written:
        problems.append(f"wrote {', '.join(written)}")
    verdict = "PASS" if not problems else "FAIL  " + "; ".join(problems)
    print(f"bad input  {name:26s} {verdict}  | {first_line(stderr)}")
    return not problems


# ---- Main ---------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(
        description="Check `workbook attend` against torch.nn.MultiheadAttention and lab 08's "
                    "torch_gqa referee (--kv-heads, RoPE at (T) or (B, T) positions) on random "
                    "cases.",
        epilog="The allowed max abs diff is tolerance * k for attn and tolerance * k * "
               "max(1, max|y|) for y, with k = max(1, max |score| the softmax sees): float32 "
               "cannot do better at large logits. Exit status: 0 all passed, 1 a check failed, "
               "2 could not check (usage error, no workbook, no numpy or torch).")
    parser.add_argument("--workbook", type=Path, default=REPO / "build/bin/workbook",
                        help="the workbook program (default: %(default)s)")
    parser.add_argument("--impl", choices=["reference", "learner"], default="reference",
                        help="implementation to check (default: %(default)s)")
    parser.add_argument("--cases", type=int, default=40,
                        help="number of random cases (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the run (default: the current time, printed for replay)")
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="base max abs diff, scaled per case as below (default: %(default)s)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary folder with every case's inputs and outputs")
    args = parser.parse_args()
    if args.cases < 0:
        parser.error("--cases must be 0 or more")
    if args.seed is None:
        args.seed = int(time.time())
    if not args.workbook.is_file():
        print(f"check_attend_against_torch.py: {args.workbook} not found. "
              "HINT: cmake --preset default && cmake --build --preset default, or pass --workbook PATH", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(1)

    print(f"workbook {args.workbook}  impl {args.impl}  seed {args.seed}  cases {args.cases}  "
          f"tolerance {args.tolerance:g}  (replay: --seed {args.seed})")
    tmp = Path(tempfile.mkdtemp(prefix="check_attend_"))
    passed = failed = 0
    try:
        for index in range(args.cases):
            ok = check_case(args, index, tmp / f"case{index:03d}")
            passed, failed = passed + ok, failed + (not ok)
        for number, (name, spoil) in enumerate(bad_input_cases()):
            ok = check_bad_input(args, name, spoil, tmp / f"bad{number}")
            passed, failed = passed + ok, failed + (not ok)
    finally:
        if args.keep:
            print(f"inputs and outputs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
