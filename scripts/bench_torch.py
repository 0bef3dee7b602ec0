#!/usr/bin/python3
"""Times PyTorch's CPU attention on the shapes `workbook bench` measured, in the same run, and
prints both side by side with their ratio. Maintainers only (needs Debian's python3-torch:
scripts/install-deps.sh --fixtures); nothing builds or tests with it.

    /usr/bin/python3 scripts/bench_torch.py [--threads N] [--repetitions R] [--quick]
                                            [--build-dir DIR] [--record FILE]

It first runs `build/bin/workbook bench --json --impl reference` with the same threads, then, per
shape and causal or not, the median of R timed calls (after one warm-up) of:
  - torch.nn.MultiheadAttention(d, H).eval(), need_weights=False, with biases (batch_first=True,
    torch's fast path) and without (batch_first=False: the fast path fails without biases in
    torch 1.13, pytorch/pytorch#88669);
  - a plain torch implementation: four matmuls, softmax(Q Kᵀ/√d_head + mask) V per head.
A ratio above 1 means the workbook's layer is faster.

--record FILE also writes torch's figures as JSON: the date, the machine, the command, and per
shape and causal or not the median ms and GF/s of each variant, with FLOPs counted as `workbook
bench` counts them (causal at the full count).

--torch-only --shape T D H [--shape …] times torch MHA alone (with biases, batch_first=True) on
those shapes, causal and not, without running `workbook bench`: lab 07's verify program runs it
this way with --record into a temporary file when given --torch, so that torch's GF/s in its
figure come from the same run on the same machine as the learner's.
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_ms(call, repetitions):
    call()  # warm-up: first-touch of fresh memory, thread-pool start
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def attention_flops(T, d):
    """workbench/bench/bench_suite.hpp's count: 8·T·d² + 4·T²·d, causal or not."""
    return 8.0 * T * d * d + 4.0 * T * T * d


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def plain_attention(x, w_q, w_k, w_v, w_o, n_heads, mask):
    batch, T, d = x.shape
    d_head = d // n_heads

    def heads(t):  # (B, T, d) -> (B, H, T, d_head)
        return t.view(batch, T, n_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    context = torch.softmax(scores, dim=-1) @ v
    return context.transpose(1, 2).reshape(batch, T, d) @ w_o


def time_torch(T, d, H, causal, repetitions, mha_only=False):
    torch.manual_seed(2024)
    x = torch.randn(1, T, d)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if causal else None
    times = {}
    with torch.inference_mode():
        layer = torch.nn.MultiheadAttention(d, H, batch_first=True).eval()
        times["torch MHA"] = median_ms(
            lambda: layer(x, x, x, attn_mask=mask, need_weights=False), repetitions)
        if mha_only:
            return times
        # Without biases torch 1.13's batch_first fast path fails (pytorch/pytorch#88669): this
        # one takes the (T, B, d) path, F.multi_head_attention_forward.
        layer = torch.nn.MultiheadAttention(d, H, bias=False).eval()
        x_tbd = x.transpose(0, 1)
        times["torch MHA no bias"] = median_ms(
            lambda: layer(x_tbd, x_tbd, x_tbd, attn_mask=mask, need_weights=False), repetitions)
        w = [torch.randn(d, d) / math.sqrt(d) for _ in range(4)]
        times["plain torch"] = median_ms(lambda: plain_attention(x, *w, H, mask), repetitions)
    return times


def write_record(path, args, recorded, blas):
    record = {
        "about": "PyTorch's CPU attention timed by scripts/bench_torch.py on the shapes of "
                 "`workbook bench`: the median of `repetitions` calls after one warm-up. GF/s "
                 "counts 8·T·d_model² + 4·T²·d_model FLOPs per call, causal or not.",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": {"cpu": cpu_model(), "threads": args.threads,
                    "torch": torch.__version__, "blas": blas},
        "command": shlex.join([sys.executable] + sys.argv),
        "repetitions": args.repetitions,
        "results": recorded,
    }
    with open(path, "w") as out:
        json.dump(record, out, indent=2, ensure_ascii=False)
        out.write("\n")
    print(f"wrote {path}")


def record_row(T, d, H, causal, times, digits=4):
    def rounded(value):
        return float(f"{value:.{digits}g}")
    return {"T": T, "d_model": d, "n_heads": H, "causal": causal,
            "median_ms": {name: rounded(ms) for name, ms in times.items()},
            "gflops_per_s": {name: rounded(attention_flops(T, d) / (ms * 1e6))
                             for name, ms in times.items()}}


def torch_only(args):
    """Torch MHA on the given shapes, one line per case as it finishes."""
    print(f"torch {torch.__version__}, threads {args.threads}, median of {args.repetitions} "
          "after a warm-up", flush=True)
    recorded = []
    for T, d, H in args.shape:
        for causal in (False, True):
            times = time_torch(T, d, H, causal, args.repetitions, mha_only=True)
            recorded.append(record_row(T, d, H, causal, times, digits=9))
            print(f"{T:>6} {d:>8} {H:>4} {'yes' if causal else 'no':>7} torch MHA "
                  f"{times['torch MHA']:10.3f} ms", flush=True)
    if args.record:
        write_record(args.record, args, recorded, "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for both (default 1)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed calls per case")
    parser.add_argument("--quick", action="store_true", help="the tiny shapes of --quick")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--record", metavar="FILE", help="also write torch's figures as JSON")
    parser.add_argument("--torch-only", action="store_true",
                        help="time torch MHA alone on the --shape shapes; no workbook bench")
    parser.add_argument("--shape", nargs=3, type=int, action="append", metavar=("T", "D", "H"),
                        help="with --torch-only: a shape (T, d_model, H) to time, causal and not")
    args = parser.parse_args()
    if args.torch_only != bool(args.shape):
        parser.error("--torch-only and --shape go together")
    # Torch's own threads and those of the BLAS beneath it, both fixed before torch loads.
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    global torch
    import torch

    if args.torch_only:
        torch.set_num_threads(args.threads)
        return torch_only(args)

    command = [os.path.join(args.build_dir, "bin", "workbook"), "bench", "--json", "--impl",
               "reference", "--threads", str(args.threads), "--repetitions",
               str(args.repetitions)] + (["--quick"] if args.quick else [])
    print("running: " + " ".join(command), file=sys.stderr)
    workbook = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)

    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, median of {args.repetitions}; torch {torch.__version__}, "
          f"{workbook['machine']['blas']}")
    for impl, sgemm in workbook["machine"].get("sgemm", {}).items():
        print(f"OpenBLAS SGEMM {sgemm['n']} x {sgemm['n']} in bench-{impl}'s run: "
              f"{sgemm['gflops_per_s']:.1f} GF/s")
    # The workbook's layers per shape: {(T, d, H, causal): {"lab01": ms, "lab07": ms}}.
    shapes = {}
    for row in workbook["results"]:
        if "error" not in row:
            key = (row["T"], row["d_model"], row["n_heads"], row["causal"])
            shapes.setdefault(key, {})[row["layer"]] = row["median_ms"]
    layers = sorted({layer for timings in shapes.values() for layer in timings})
    print(f"{'T':>6} {'d_model':>8} {'H':>4} {'causal':>7} {'layer':>20} {'ms':>10} "
          + " ".join(f"{'vs ' + layer:>9}" for layer in layers))
    ratios = {}  # (torch variant, workbook layer) -> [torch ms / workbook ms]
    recorded = []  # torch's figures per shape, for --record
    for (T, d, H, causal), ours in shapes.items():
        shape = f"{T:>6} {d:>8} {H:>4} {'yes' if causal else 'no':>7}"
        for layer in layers:
            print(f"{shape} {layer + ' reference':>20} {ours[layer]:>10.3f}")
        times = time_torch(T, d, H, causal, args.repetitions)
        recorded.append(record_row(T, d, H, causal, times))
        for name, ms in times.items():
            for layer in layers:
                ratios.setdefault((name, layer), []).append(ms / ours[layer])
            print(f"{shape} {name:>20} {ms:>10.3f} "
                  + " ".join(f"{ms / ours[layer]:>9.2f}" for layer in layers))
    print("ratio = torch ms / workbook ms; above 1: the workbook's layer is faster. "
          "Geometric means over the shapes:")
    for (name, layer), values in ratios.items():
        geometric_mean = math.exp(statistics.mean(math.log(v) for v in values))
        print(f"  {name} vs {layer}: {geometric_mean:.2f}")

    if args.record:
        write_record(args.record, args, recorded, workbook["machine"]["blas"])


if __name__ == "__main__":
    main()
