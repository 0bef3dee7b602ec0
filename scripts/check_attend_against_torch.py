#!/usr/bin/python3
"""Checks `workbook attend` against PyTorch on random cases that are not in the repository.

A maintainer's tool; CI never runs it. It draws random inputs, runs

    workbook attend --impl IMPL --x X.npy --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy
                    --heads H [--causal] --out Y.npy --attn-out A.npy

and compares Y (X's shape) and A ((H, T, T) for a 2-D X, (B, H, T, T) for a 3-D X) with
nn.MultiheadAttention run in float64 on the same float32 inputs (scripts/make_fixtures.py's
torch_mha, so the convention mapping is the fixtures' one). The cases cover batched and unbatched
inputs, causal and not, T = 1, d_head = 1, H = 1 and large logits (W_Q and W_K scaled so that scores grow 30 to 100 times), with
B in 1..4, T in 1..16, H in 1..8, d_head in 1..16 and d_model = H * d_head.

Tolerance. The command computes in float32 and torch in float64, and the softmax's sensitivity
grows with the size of its scores: at scores in the thousands a correct float32 result differs
from float64 by far more than 1e-5. So the allowed max abs diff is --tolerance scaled by the
case (both figures are printed on every line):

    attn: tolerance * k                 k = max(1, max |score| the softmax sees)
    y:    tolerance * k * max(1, max |y|)

For ordinary cases k is a few units and this is close to an absolute 1e-5; a float32 NumPy
implementation stays 40 to 100 times inside it on both kinds of case.

Then it feeds the command bad inputs (a missing file, a truncated .npy, float64 data, a weight of
the wrong shape, heads that do not divide d_model, a rank-4 X) and checks that each exits with
status 2, prints exactly one line on stderr and writes no file.

    /usr/bin/python3 scripts/check_attend_against_torch.py [--impl learner] [--cases 200]
    /usr/bin/python3 scripts/check_attend_against_torch.py --seed 1712345678   # replay a run

Case i depends only on the seed and i, so --seed S --cases N replays the first N cases of a run.
Exit status: 0 if every check passed, 1 if one failed, 2 on a usage error.
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
    sys.exit(f"check_attend_against_torch.py: cannot import {error.name}. "
             "HINT: run scripts/install-deps.sh --fixtures and use /usr/bin/python3")

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import numpy_mha, torch_mha  # noqa: E402  (the referee of the fixtures)

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_SECONDS = 60


def shape_str(shape):
    return "(" + ", ".join(map(str, shape)) + ")"


# ---- Random cases -------------------------------------------------------------------------------

# The first cases force every property the run must cover, so that even --cases 8 covers them;
# the rest are free draws.
FORCED = [
    {"batched": True, "causal": False, "large": False},
    {"batched": False, "causal": True, "large": False},
    {"T": 1, "batched": True, "causal": True},
    {"T": 1, "batched": False, "causal": False},
    {"d_head": 1, "H": 4},
    {"H": 1},
    {"large": True, "causal": True, "batched": True},
    {"large": True, "causal": False, "batched": False},
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
    if index < len(FORCED):
        case.update(FORCED[index])
    case["scale"] = large_scale if case["large"] else 1.0
    d_model = case["H"] * case["d_head"]
    shape = (case["B"], case["T"], d_model) if case["batched"] else (case["T"], d_model)
    x = rng.standard_normal(shape, dtype=np.float32)
    w_scale = np.float32(1.0 / np.sqrt(d_model))
    case["x"] = x
    case["w"] = [rng.standard_normal((d_model, d_model), dtype=np.float32) * w_scale
                 for _ in range(4)]
    # Large logits: scale W_Q and W_K, so every score grows by `scale` while y stays O(1).
    for role in (0, 1):
        case["w"][role] *= np.float32(np.sqrt(case["scale"]))
    return case


def save_inputs(folder, x, weights):
    """Writes X.npy, WQ.npy, WK.npy, WV.npy, WO.npy and returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, value in zip(["x", "wq", "wk", "wv", "wo"], [x, *weights]):
        paths[name] = folder / f"{name.upper()}.npy"
        np.save(paths[name], value, allow_pickle=False)
    return paths


def attend_command(workbook, impl, paths, heads, causal, y_path, attn_path):
    cmd = [str(workbook), "attend", "--impl", impl,
           "--x", str(paths["x"]), "--wq", str(paths["wq"]), "--wk", str(paths["wk"]),
           "--wv", str(paths["wv"]), "--wo", str(paths["wo"]), "--heads", str(heads)]
    if causal:
        cmd.append("--causal")
    return cmd + ["--out", str(y_path), "--attn-out", str(attn_path)]


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


def check_case(args, index, folder):
    """Runs one random case; prints its line and returns True if it passed."""
    case = draw_case(args.seed, index)
    x, weights, H, causal = case["x"], case["w"], case["H"], case["causal"]
    paths = save_inputs(folder, x, weights)
    y_path, attn_path = folder / "Y.npy", folder / "A.npy"

    y_ref, attn_ref = torch_mha(x, *weights, H, causal)  # attn_ref: (B, H, T, T), B = 1 if 2-D
    if x.ndim == 2:
        attn_ref = attn_ref[0]                            # the command writes (H, T, T)
    scores = numpy_mha(x, *weights, H, causal)[2]         # (B, H, T, T), scaled, unmasked
    kept = np.ones(scores.shape[-2:], dtype=bool)
    if causal:
        kept = np.tril(kept)
    k = max(1.0, float(np.max(np.abs(scores[..., kept]))))
    tol_attn = args.tolerance * k
    tol_y = args.tolerance * k * max(1.0, float(np.max(np.abs(y_ref))))

    label = (f"case {index:3d}  x {shape_str(x.shape):13s} H {H} d_head {case['d_head']:2d}  "
             f"{'causal' if causal else 'full  '}  logits*{case['scale']:5.1f}  max|score| {k:8.1f}")
    status, _, stderr = run(attend_command(args.workbook, args.impl, paths, H, causal,
                                           y_path, attn_path))
    problem = None
    if status != 0:
        problem = f"exit status {status}: {first_line(stderr)}"
    else:
        y, problem = load_output(y_path, y_ref.shape, "Y")
        if problem is None:
            attn, problem = load_output(attn_path, attn_ref.shape, "A")
    if problem is not None:
        print(f"{label}  FAIL  {problem}")
        return False

    dy = float(np.max(np.abs(y.astype(np.float64) - y_ref)))
    dattn = float(np.max(np.abs(attn.astype(np.float64) - attn_ref)))
    ok = dy <= tol_y and dattn <= tol_attn
    print(f"{label}  dy {dy:.1e} (tol {tol_y:.0e})  dattn {dattn:.1e} (tol {tol_attn:.0e})  "
          f"{'PASS' if ok else 'FAIL'}")
    if not ok and args.keep:
        cmd = attend_command(args.workbook, args.impl, paths, H, causal, y_path, attn_path)
        print(f"          rerun: {shlex.join(cmd)}")
    return ok


# ---- Bad inputs ---------------------------------------------------------------------------------

def bad_input_cases():
    """(name, how to spoil a valid set of inputs) pairs; each function edits paths/heads."""

    def missing_file(folder, paths, heads):
        paths["x"] = folder / "does_not_exist.npy"
        return heads

    def truncated(folder, paths, heads):
        data = paths["x"].read_bytes()
        paths["x"].write_bytes(data[: len(data) // 2])
        return heads

    def float64_x(folder, paths, heads):
        np.save(paths["x"], np.load(paths["x"]).astype(np.float64), allow_pickle=False)
        return heads

    def w_not_square(folder, paths, heads):
        d = np.load(paths["wo"]).shape[0]
        np.save(paths["wo"], np.zeros((d, d + 2), dtype=np.float32), allow_pickle=False)
        return heads

    def w_wrong_size(folder, paths, heads):
        d = np.load(paths["wk"]).shape[0]
        np.save(paths["wk"], np.zeros((d + 2, d + 2), dtype=np.float32), allow_pickle=False)
        return heads

    def heads_not_dividing(folder, paths, heads):
        return 3  # d_model is 8

    def heads_zero(folder, paths, heads):
        return 0

    def x_rank_4(folder, paths, heads):
        x = np.load(paths["x"])
        np.save(paths["x"], x.reshape((1, *x.shape)), allow_pickle=False)
        return heads

    return [
        ("missing X file", missing_file),
        ("truncated X .npy", truncated),
        ("float64 X", float64_x),
        ("W_O of shape (d, d+2)", w_not_square),
        ("W_K of shape (d+2, d+2)", w_wrong_size),
        ("heads 3 with d_model 8", heads_not_dividing),
        ("heads 0", heads_zero),
        ("X of rank 4", x_rank_4),
    ]


def check_bad_input(args, name, spoil, folder):
    """Prints one line; returns True if the command refused the input as it should."""
    rng = np.random.default_rng([args.seed, 1_000_000])
    x = rng.standard_normal((2, 4, 8), dtype=np.float32)
    weights = [rng.standard_normal((8, 8), dtype=np.float32) for _ in range(4)]
    paths = save_inputs(folder / "in", x, weights)
    heads = spoil(folder / "in", paths, 2)
    out = folder / "out"
    out.mkdir()
    status, _, stderr = run(attend_command(args.workbook, args.impl, paths, heads, True,
                                           out / "Y.npy", out / "A.npy"))
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
    print(f"bad input  {name:24s} {verdict}  | {first_line(stderr)}")
    return not problems


# ---- Main ---------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(
        description="Check `workbook attend` against torch.nn.MultiheadAttention on random cases.",
        epilog="The allowed max abs diff is tolerance * k for attn and tolerance * k * "
               "max(1, max|y|) for y, with k = max(1, max |score| the softmax sees): float32 "
               "cannot do better at large logits. Exit status: 0 all passed, 1 a check failed, "
               "2 usage error.")
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
