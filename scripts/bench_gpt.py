#!/usr/bin/python3
"""Lab 13's speed against PyTorch, in one command: one training step of the lab's default GPT
(forward, loss, backward, clipping, AdamW) on the same model and the same batch, and sampling
token by token with and without a KV cache, the reference's against PyTorch's, side by side on
1 and 2 threads. Maintainers only (Debian's python3-torch); nothing builds or tests with it.

    cmake --build --preset default --target gpt-bench
    /usr/bin/python3 scripts/bench_gpt.py [--threads 1 2] [--repetitions 10] [--rounds 1]
                                          [--quick] [--malloc both|torch|default]
                                          [--omp passive|default] [--build-dir build]
                                          [--record FILE]

For each thread count N it runs two child processes one after the other, with bench_torch.py's
fairness machinery (scripts/bench_fairness.py): OMP_NUM_THREADS = OPENBLAS_NUM_THREADS =
MKL_NUM_THREADS = N and glibc's allocator told to keep freed memory, in both, and for torch
OMP_WAIT_POLICY=PASSIVE (--omp default to leave it out: on 2 threads Debian's torch then spends
its time in OpenMP threads spinning against OpenBLAS's, 2.9 times slower a step):
  1. `build/bin/gpt-bench --json --threads N --repetitions R --dump DIR` (workbench/gpt_twin/,
     linked with the reference): it initialises the default model, writes it and one batch into
     DIR (gpt_twin.py's format), and times, after a warm-up, the median of R training steps
     (the library's), then sampling: a prompt, then new tokens one at a time through the KV cache,
     and the same tokens by a full forward over the growing sequence (no cache);
  2. this script with --torch-only DIR: the same parameters and batch in gpt_twin.py's Twin
     (PyTorch autograd, torch.optim.AdamW, clip_grad_norm_), with torch.set_num_threads(N), the
     same timing, and sampling through a KV cache of its own (and without one).
Each timed part's CPU time is checked against wall time × N (on one thread it must be 1 ± 0.15;
on N threads above 1.15 means a thread setting was ignored, below 0.85 is noted, since a part may
leave threads idle), and what other processes used meanwhile (/proc/stat, per child). A CPU/wall
off makes "NOT A FAIR RUN", others above 0.15 CPUs "A NOISY RUN": quote no ratio from either.

Tokens per second: a training step processes B·T tokens; sampling counts new tokens. The ratio
is ours / torch in tokens per second (above 1: the reference is faster). The issue asks for at
least 1.5 on one thread and on two. A shared virtual machine's speed drifts from minute to minute
(the same step took 153 to 175 ms within half an hour, torch's 225 to 264), and the two children
run one after the other: --rounds K runs the pair K times, alternating, and gives the median of
the K training-step ratios beside each round's.
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time

from bench_fairness import (ALLOCATOR, TOLERANCE, TORCH_OPENMP, TORCH_PYTHON, base_environment,
                            check_cpu_wall, child_environment, cpu_info, cpu_text, describe_check,
                            flag, load_average, loudly, openblas_core, reexec_with, rounded,
                            run_measured, why_off)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(call, repetitions, warmup=1):
    """(median seconds, CPU s, wall s) of `repetitions` calls after `warmup` calls."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), time.process_time() - cpu_start, \
        time.perf_counter() - wall_start


# ---------------------------------------------------------------------------------------------
# The torch child


def torch_sampler(model, torch):
    """Greedy decoding with and without a KV cache of its own: functions (prompt, new) -> tokens."""

    def step_cached(token, position, cache):
        # token: int; cache: per layer [k (1, H, t, d_head), v (1, H, t, d_head)] -> logits (V,)
        x = (model.p["wte"][token] + model.p["wpe"][position]).view(1, 1, -1)
        d, H = x.shape[-1], model.n_heads
        for i in range(model.n_layers):
            h = model.norm(x, f"h{i}.ln_1")
            q, k, v = ((h @ model.layer(i, f"attn.w_{r}") + model.layer(i, f"attn.b_{r}"))
                       .view(1, 1, H, d // H).transpose(1, 2) for r in "qkv")
            if cache[i] is None:
                cache[i] = [k, v]
            else:
                cache[i] = [torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)]
            keys, values = cache[i]
            weights = torch.softmax(q @ keys.transpose(-1, -2) / (d // H) ** 0.5, dim=-1)
            context = (weights @ values).transpose(1, 2).reshape(1, 1, d)
            x = x + context @ model.layer(i, "attn.w_o") + model.layer(i, "attn.b_o")
            x = x + model.mlp(model.norm(x, f"h{i}.ln_2"), i)
        return (model.norm(x, "ln_f") @ model.p["wte"].T).view(-1)

    def cached(prompt, new):
        cache, tokens = [None] * model.n_layers, list(prompt)
        with torch.no_grad():
            for position, token in enumerate(tokens[:-1]):
                step_cached(token, position, cache)
            for _ in range(new):
                logits = step_cached(tokens[-1], len(tokens) - 1, cache)
                tokens.append(int(torch.argmax(logits)))
        return tokens

    def uncached(prompt, new):
        tokens = list(prompt)
        with torch.no_grad():
            for _ in range(new):
                logits = model.logits(torch.tensor([tokens]))[0, -1]
                tokens.append(int(torch.argmax(logits)))
        return tokens

    return cached, uncached



def torch_environment(threads, allocator, omp):
    env = child_environment(threads, allocator)
    if omp == "passive":
        env.update(TORCH_OPENMP)
    return env


def torch_only(args):
    allocator = args.malloc != "default"
    drop = (() if allocator else tuple(ALLOCATOR)) + (() if args.omp == "passive"
                                                      else tuple(TORCH_OPENMP))
    reexec_with(torch_environment(args.threads, allocator, args.omp), drop)
    import numpy as np
    import gpt_twin
    torch = gpt_twin.import_torch(args.threads)
    blas = openblas_core()
    run = gpt_twin.load_folder(args.torch_only)
    model = gpt_twin.Twin(run["config"], run["init"], run["tensors"], torch.float32)
    optimizer = gpt_twin.make_optimizer(model, run)
    windows = run["tokens"][0]
    B, T = windows.shape[0], windows.shape[1] - 1
    train = timed(lambda: gpt_twin.train_step(model, optimizer, windows, 0, run),
                  args.repetitions)
    prompt = [int(t) for t in np.load(os.path.join(args.torch_only, "prompt.npy"))]
    new = run["sample_new_tokens"]
    cached, uncached = torch_sampler(model, torch)
    same = cached(prompt, new) == uncached(prompt, new)
    sample_cached = timed(lambda: cached(prompt, new), args.repetitions)
    sample_uncached = timed(lambda: uncached(prompt, new), max(1, args.repetitions // 2))
    result = {
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
        "openblas_core": blas["core"], "openblas_threads": blas["threads"],
        "environment": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                   "MKL_NUM_THREADS", *ALLOCATOR, *TORCH_OPENMP)
                        if k in os.environ},
        "train_step": {"median_ms": train[0] * 1e3, "tokens_per_s": B * T / train[0],
                       "cpu_wall": check_cpu_wall(train[1], train[2], args.threads)},
        "sampling": {"prompt": len(prompt), "new_tokens": new,
                     "cached_equals_uncached": same},
    }
    for name, (seconds, cpu, wall) in (("cached", sample_cached), ("uncached", sample_uncached)):
        result["sampling"][name] = {"median_ms": seconds * 1e3, "tokens_per_s": new / seconds,
                                    "cpu_wall": check_cpu_wall(cpu, wall, args.threads)}
    with open(args.record, "w") as out:
        json.dump(result, out, indent=2)
    return 0


# ---------------------------------------------------------------------------------------------
# The comparison


def compare_one(args, threads, warnings, cpu_wall_bad):
    workbook_env = child_environment(threads, args.malloc == "both")
    torch_env = torch_environment(threads, args.malloc != "default", args.omp)
    with tempfile.TemporaryDirectory(prefix="bench_gpt_") as folder:
        dump = os.path.join(folder, "dump")
        command = [os.path.join(args.build_dir, "bin", "gpt-bench"), "--json", "--threads",
                   str(threads), "--repetitions", str(args.repetitions), "--dump", dump] + \
            (["--quick"] if args.quick else [])
        print("running: " + " ".join(f"{k}={v}" for k, v in workbook_env.items()) + " "
              + shlex.join(command), flush=True)
        stdout, ours_check = run_measured(command, {**base_environment(), **workbook_env},
                                          threads, capture_stdout=True)
        ours = json.loads(stdout)
        print(describe_check("gpt-bench (the whole process: setup included)", ours_check),
              flush=True)
        flag("gpt-bench", ours_check, warnings, ratio=False)
        record = os.path.join(folder, "torch.json")
        command = [args.torch_python, os.path.abspath(__file__), "--torch-only", dump,
                   "--threads", str(threads), "--repetitions", str(args.repetitions),
                   "--malloc", args.malloc, "--omp", args.omp, "--record", record]
        print("running: " + " ".join(f"{k}={v}" for k, v in torch_env.items()) + " "
              + shlex.join(command), flush=True)
        _, torch_check = run_measured(command, {**base_environment(), **torch_env}, threads,
                                      capture_stdout=False)
        with open(record) as file:
            theirs = json.load(file)
    print(describe_check("torch child (with `import torch`)", torch_check), flush=True)
    # The CPU/wall verdicts come from the timed parts: each whole child also counts its setup
    # (`import torch`, the model's initialisation and files), which runs on one thread.
    flag("torch child", torch_check, warnings, ratio=False)
    parts = [("gpt-bench", "train step", ours["train_step"]["cpu_wall"]),
             ("gpt-bench", "sampling (cache)", ours["sampling"]["cached"]["cpu_wall"]),
             ("torch", "train step", theirs["train_step"]["cpu_wall"]),
             ("torch", "sampling (cache)", theirs["sampling"]["cached"]["cpu_wall"])]
    for side, part, check in parts:
        print(f"  {side} {part}: CPU/wall {check['ratio']:.2f}", flush=True)
        if check["ratio"] > 1 + TOLERANCE or (threads == 1 and check["ratio"] < 1 - TOLERANCE):
            # One thread must keep its CPU busy; more CPU than threads means a setting was ignored.
            loudly([f"{side} {part}: CPU/wall {check['ratio']:.2f}, not 1 ± {TOLERANCE:.2f}: "
                    + why_off(check["ratio"])], warnings)
            cpu_wall_bad.append(part)
        elif check["ratio"] < 1 - TOLERANCE:
            # On N threads a part may idle some of them (single-threaded loops, small products):
            # a property of the code, not of the machine, which the /proc/stat check covers.
            print(f"  note: {side} {part} kept {check['ratio'] * threads:.2f} of its {threads} "
                  "threads busy on average", flush=True)
    if theirs["torch_threads"] != threads:
        loudly([f"torch ran with {theirs['torch_threads']} threads, not {threads}"], warnings)
    return {"threads": threads, "ours": ours, "torch": theirs,
            "cpu_wall": {"ours": ours_check, "torch": torch_check}}


def compare(args):
    warnings = []
    cpu = cpu_info()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    blas = openblas_core("libopenblas.so.0")
    load_before = load_average()
    print(f"bench_gpt {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {cpu_text(cpu)}")
    print(f"OpenBLAS core {blas['core']} ({blas['library']}: {blas['config']}); load average "
          f"{load_before[0]:.2f}", flush=True)
    cpu_wall_bad = []
    runs = [compare_one(args, threads, warnings, cpu_wall_bad) for threads in args.threads
            for _ in range(args.rounds)]
    first = runs[0]["ours"]
    c = first["config"]
    print(f"\nthe model: V {c['vocab']}, d_model {c['d_model']}, H {c['n_heads']}, "
          f"{c['n_layers']} layers, context {first['context']}, batch {first['batch']} "
          f"({first['parameters']} parameters); torch {runs[0]['torch']['torch']} (OpenBLAS "
          f"{runs[0]['torch']['openblas_core']}); median of {args.repetitions} after a warm-up")
    print(f"{'threads':>7} {'':<28} {'ours ms':>9} {'tokens/s':>10} {'torch ms':>9} "
          f"{'tokens/s':>10} {'ours/torch':>10}")
    rows = []
    for r in runs:
        o, t = r["ours"], r["torch"]
        lines = [("training step (B·T tokens)", o["train_step"], t["train_step"])]
        for kind in ("cached", "uncached"):
            lines.append((f"sampling, {'KV cache' if kind == 'cached' else 'no cache'} "
                          f"({o['sampling']['new_tokens']} new)", o["sampling"][kind],
                          t["sampling"][kind]))
        for name, ours, theirs in lines:
            ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
            rows.append({"threads": r["threads"], "what": name, "ours": ours, "torch": theirs,
                         "ratio": rounded(ratio, 3)})
            print(f"{r['threads']:>7} {name:<28} {ours['median_ms']:>9.2f} "
                  f"{ours['tokens_per_s']:>10.0f} {theirs['median_ms']:>9.2f} "
                  f"{theirs['tokens_per_s']:>10.0f} {ratio:>10.2f}")
        speedup = o["sampling"]["cached"]["tokens_per_s"] / o["sampling"]["uncached"]["tokens_per_s"]
        print(f"{'':>7} {'KV cache / no cache':<28} ours {speedup:.2f}×, torch "
              f"{t['sampling']['cached']['tokens_per_s'] / t['sampling']['uncached']['tokens_per_s']:.2f}×"
              + ("" if t["sampling"]["cached_equals_uncached"] else
                 "  (torch's cached and uncached greedy tokens differ!)"))
    for threads in args.threads if args.rounds > 1 else []:
        ratios = [row["ratio"] for row in rows
                  if row["threads"] == threads and row["what"].startswith("training step")]
        print(f"{threads:>7} training step over {len(ratios)} rounds: ours/torch median "
              f"{statistics.median(ratios):.2f} (each: {', '.join(f'{r:.2f}' for r in ratios)})")
    quiet = all(r["cpu_wall"][side].get("idle_otherwise", True) for r in runs
                for side in ("ours", "torch"))
    fair = not warnings
    print("verdict: " + ("a fair run" if fair else (
        ("NOT A FAIR RUN" if cpu_wall_bad else "A NOISY RUN" if not quiet else
         "NOT A FAIR RUN (thread settings)")
        + f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''} above): quote no ratio "
        "from it")))
    if args.record:
        with open(args.record, "w") as out:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "command": shlex.join([sys.executable] + sys.argv),
                       "machine": {"cpu": cpu, "openblas": blas, "load_average_before": load_before,
                                   "load_average_after": load_average()},
                       "repetitions": args.repetitions, "rounds": args.rounds, "fair": fair,
                       "warnings": warnings,
                       "runs": runs, "rows": rows}, out, indent=2, ensure_ascii=False)
            out.write("\n")
        print(f"wrote {args.record}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run ours and torch this many times, alternating (median ratio)")
    parser.add_argument("--quick", action="store_true", help="a small model: a smoke test")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--torch-python", default=TORCH_PYTHON)
    parser.add_argument("--malloc", choices=("both", "torch", "default"), default="both")
    parser.add_argument("--omp", choices=("passive", "default"), default="passive",
                        help="torch's OpenMP threads sleep when idle (OMP_WAIT_POLICY=PASSIVE, "
                             "the default here) or spin as OpenMP's default does")
    parser.add_argument("--record", metavar="FILE")
    parser.add_argument("--torch-only", metavar="DIR", help="the torch child on gpt-bench's dump")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.torch_only:
        if not args.record or len(args.threads) != 1:
            parser.error("--torch-only takes one --threads and a --record file")
        args.threads = args.threads[0]
        return torch_only(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
