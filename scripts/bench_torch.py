#!/usr/bin/python3
"""Compares lab 07's layer with PyTorch's CPU attention fairly, in one command: both sides on
the same threads in the same run, each checked for CPU time against wall time. Maintainers only
(needs Debian's python3-torch: scripts/install-deps.sh --fixtures); nothing builds or tests with
it.

    /usr/bin/python3 scripts/bench_torch.py [--threads N] [--repetitions R] [--quick]
                                            [--variants mha|all] [--malloc both|torch|default]
                                            [--build-dir DIR] [--torch-python PATH]
                                            [--record FILE]

It prints the date, the CPU (model, family, model number, SIMD) and OpenBLAS's core type (the
kernels it chose for this CPU), then runs two child processes one after the other, each with
OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = N and glibc's allocator told to keep
freed memory (MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736: without it PyTorch pays a
VM's first-touch page faults on its large buffers on every call; `workbook bench` reuses its
buffers):
  1. `build/bin/workbook bench --json --impl reference --threads N --repetitions R`;
  2. this script with --torch-only on the shapes bench reported, in --torch-python (default
     /usr/bin/python3, Debian's, which sees python3-torch), with torch.set_num_threads(N), timing
     per shape, causal and not, the median of R calls after one warm-up of
     - torch MHA: torch.nn.MultiheadAttention(d, H).eval(), need_weights=False, with biases
       (batch_first=True, torch's fast path);
     - with --variants all (the default here) also torch MHA no bias (batch_first=False: the fast
       path fails without biases in torch 1.13, pytorch/pytorch#88669) and plain torch: four
       matmuls, softmax(Q Kᵀ/√d_head + mask) V per head.
For each child it measures the CPU time its processes used (getrusage RUSAGE_CHILDREN) against
wall time × N, and what other processes used meanwhile (/proc/stat). A ratio off 1 by more than
15 % means the machine was busy or a thread setting was ignored; other processes above 0.15 CPUs
mean the caches and memory were shared. Either way the script says so loudly, records it, and
calls the run not fair. The workbook's figure covers its whole process: the up-to-date build
check, the engine's start, its SGEMM and both layers (build workbook and bench-reference first: a
rebuild inside the run would count too). Torch's verdict comes from each timed case
(time.process_time over the warm-up and calls, all its threads), as its whole process also counts
`import torch`.

The table gives per shape (T, d_model, H), causal and not, lab 07's ms (the reference's
efficient_forward), torch MHA's ms and ratio = torch ms / lab 07 ms (above 1: lab 07's layer is
faster), the other variants' ratios, and the geometric means of the ratios, causal, not causal
and over both. --malloc torch gives the allocator settings to the torch child only, --malloc
default to neither (to see what they are worth).

--record FILE writes both sides of the run as JSON: the date, the command, the machine, each
child's environment and CPU/wall check, per shape the ms and GF/s of each side (FLOPs counted as
`workbook bench` counts them, causal at the full count), the ratios and their geometric means.

--bounds (issue 28's bounds) times, instead of the comparison above and with the same settings,
each layer whole and its two parts alone: ours `build/bin/bench-reference --bounds` (the tuned
layer's four projection GEMMs alone, its attention core alone), torch's in- and out-projections
(F.linear with bias, as its MHA runs them) and its core (q·scale, bmm, softmax, bmm per head; the
causal one adds the mask as torch's slow path does: baddbmm). The projections are OpenBLAS GEMMs of
the same sizes on both sides, so torch whole / our projections is the largest ratio any attention
core of ours could reach, and (P + A/2) / (P + A) the smallest causal / not causal ratio of our
whole layer if the causal core did exactly half the work. It prints both sides per shape, these
bounds, their geometric mean, and CPU time beside wall time.

--torch-only --shape T D H [--shape …] is the torch child: torch MHA (and with --variants all
the other two) on those shapes, causal and not, without `workbook bench`. It re-executes itself
with the thread variables and allocator settings when they are not already in its environment.
Lab 07's verify program runs it this way with --record into a temporary file when given --torch,
so that torch's GF/s in its figure come from the same run on the same machine as the learner's.
"""
import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import time

from bench_fairness import (ALLOCATOR, IDLE_CPUS, INHERITED, THREAD_VARIABLES, TOLERANCE,
                            TORCH_OPENMP, TORCH_PYTHON, base_environment, check_cpu_wall,
                            child_environment, cpu_info, cpu_text, describe_check, flag,
                            geometric_mean, load_average, loudly, median_ms, openblas_core,
                            reexec_with, rounded, run_measured, why_off)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MHA = "torch MHA"


def attention_flops(T, d):
    """workbench/bench/bench_suite.hpp's count: 8·T·d² + 4·T²·d, causal or not."""
    return 8.0 * T * d * d + 4.0 * T * T * d


# ---------------------------------------------------------------------------------------------
# The torch child


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


def time_torch_parts(layer, x, H, mask, repetitions, cpu_ms):
    """Torch MHA's projections and its attention core, each alone (--bounds): the in-projection
    (one F.linear to 3·d with bias, as both of its paths run it) and the out-projection, then the
    core on heads laid out (H, T, d_head) as its paths lay them out: q scaled, Q Kᵀ (baddbmm with
    the additive mask when causal, as F.multi_head_attention_forward does), softmax, P V."""
    batch, T, d = x.shape
    d_head = d // H
    F = torch.nn.functional
    w_in, b_in = layer.in_proj_weight, layer.in_proj_bias
    w_out, b_out = layer.out_proj.weight, layer.out_proj.bias
    qkv = F.linear(x, w_in, b_in)
    heads = [t.reshape(T, H, d_head).transpose(0, 1).contiguous() for t in qkv[0].chunk(3, -1)]
    context = torch.randn(batch, T, d)
    additive = None
    if mask is not None:
        additive = torch.zeros(T, T).masked_fill(mask, float("-inf"))

    def core():
        q = heads[0] * (1.0 / math.sqrt(d_head))
        kt = heads[1].transpose(-1, -2)
        scores = torch.bmm(q, kt) if additive is None else torch.baddbmm(additive, q, kt)
        return torch.bmm(torch.softmax(scores, dim=-1), heads[2])

    return {"torch in-projection": median_ms(lambda: F.linear(x, w_in, b_in), repetitions,
                                             cpu_ms.setdefault("torch in-projection", [])),
            "torch out-projection": median_ms(lambda: F.linear(context, w_out, b_out),
                                              repetitions,
                                              cpu_ms.setdefault("torch out-projection", [])),
            "torch core": median_ms(core, repetitions, cpu_ms.setdefault("torch core", []))}


def time_torch(T, d, H, causal, repetitions, all_variants, parts=None):
    """{variant: (median ms, CPU s, wall s)} on one shape; with a dict `parts` (--bounds), also
    torch MHA's parts, and each one's median CPU ms of a call in parts[name]."""
    torch.manual_seed(2024)
    x = torch.randn(1, T, d)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if causal else None
    times = {}
    with torch.inference_mode():
        layer = torch.nn.MultiheadAttention(d, H, batch_first=True).eval()
        if parts is not None:
            times.update(time_torch_parts(layer, x, H, mask, repetitions, parts))
        times[MHA] = median_ms(
            lambda: layer(x, x, x, attn_mask=mask, need_weights=False), repetitions,
            None if parts is None else parts.setdefault(MHA, []))
        if not all_variants:
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


def torch_only(args):
    """The torch child: one line per case as it finishes, and with --record the JSON."""
    allocator = args.malloc != "default"
    reexec_with(child_environment(args.threads, allocator), () if allocator else ALLOCATOR)
    global torch
    import torch
    torch.set_num_threads(args.threads)
    blas = openblas_core()  # the OpenBLAS torch loaded, and the threads it took from the env
    environment = {k: os.environ[k] for k in THREAD_VARIABLES + tuple(ALLOCATOR) + INHERITED
                   if k in os.environ}
    print(f"torch {torch.__version__}, torch.get_num_threads() {torch.get_num_threads()}, "
          f"OpenBLAS {blas['core']} with {blas['threads']} threads; "
          + " ".join(f"{k}={v}" for k, v in environment.items())
          + f"; median of {args.repetitions} after a warm-up", flush=True)
    recorded, checks = [], []
    for T, d, H in args.shape:
        for causal in (False, True):
            cpu_ms = {} if args.bounds else None
            times = time_torch(T, d, H, causal, args.repetitions, args.variants == "all",
                               parts=cpu_ms)
            row = {"T": T, "d_model": d, "n_heads": H, "causal": causal,
                   "median_ms": {}, "gflops_per_s": {}, "cpu_wall": {}}
            if cpu_ms:
                row["median_cpu_ms"] = {name: rounded(v[0], 9) for name, v in cpu_ms.items()}
            for name, (ms, cpu, wall) in times.items():
                row["median_ms"][name] = rounded(ms, 9)
                row["gflops_per_s"][name] = rounded(attention_flops(T, d) / (ms * 1e6), 9)
                row["cpu_wall"][name] = check = check_cpu_wall(cpu, wall, args.threads)
                checks.append(check)
            recorded.append(row)
            print(f"{T:>6} {d:>8} {H:>4} {'yes' if causal else 'no':>7} "
                  + "  ".join(f"{name} {ms:.3f} ms (CPU/wall {row['cpu_wall'][name]['ratio']:.2f})"
                              for name, (ms, _, _) in times.items()), flush=True)
    off = [c for c in checks if not c["ok"]]
    if off:
        print(f"WARNING: CPU/wall off 1 by more than {TOLERANCE:.2f} in {len(off)} of "
              f"{len(checks)} torch cases (from {min(c['ratio'] for c in checks):.2f} to "
              f"{max(c['ratio'] for c in checks):.2f}): " + why_off(off[0]["ratio"]), flush=True)
    if args.record:
        record = {
            "about": "PyTorch's CPU attention timed by scripts/bench_torch.py --torch-only: the "
                     "median of `repetitions` calls after one warm-up. GF/s counts "
                     "8·T·d_model² + 4·T²·d_model FLOPs per call, causal or not. cpu_wall: the "
                     "process's CPU time over wall time × threads across the warm-up and calls.",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpu": cpu_info()["model_name"], "threads": args.threads,
                        "torch": torch.__version__, "blas": blas["config"],
                        "openblas_core": blas["core"], "openblas_threads": blas["threads"],
                        "torch_threads": torch.get_num_threads()},
            "environment": environment,
            "command": shlex.join([sys.executable] + sys.argv),
            "repetitions": args.repetitions,
            "cpu_wall_ok": not off,
            "results": recorded,
        }
        with open(args.record, "w") as out:
            json.dump(record, out, indent=2, ensure_ascii=False)
            out.write("\n")
        print(f"wrote {args.record}")


# ---------------------------------------------------------------------------------------------
# The comparison


def compare(args):
    warnings = []
    threads = args.threads
    cpu = cpu_info()
    # The OpenBLAS the workbook links (libopenblas.so.0), opened here only to ask it its core:
    # it starts no work in this process.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    workbook_blas = openblas_core("libopenblas.so.0")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = load_average()
    workbook_env = child_environment(threads, args.malloc == "both")
    torch_env = {**child_environment(threads, args.malloc != "default"), **TORCH_OPENMP}
    print(f"bench_torch {date}: {cpu_text(cpu)}")
    inherited = {k: os.environ[k] for k in INHERITED if k in os.environ}
    print(f"OpenBLAS core {workbook_blas['core']} ({workbook_blas['library']}: "
          f"{workbook_blas['config']})"
          + "".join(f"; {k}={v} from this environment" for k, v in inherited.items()))
    print(f"threads {threads} on both sides; workbook: "
          + " ".join(f"{k}={v}" for k, v in workbook_env.items())
          + "; torch: " + " ".join(f"{k}={v}" for k, v in torch_env.items())
          + f" and torch.set_num_threads({threads}); median of {args.repetitions} "
          f"(one warm-up first); load average {load_before[0]:.2f}", flush=True)
    if load_before[0] >= 0.5:
        print(f"note: the load average is {load_before[0]:.2f}; the CPU/wall checks below say "
              "whether it touched this run", flush=True)

    # 1. The workbook.
    command = [os.path.join(args.build_dir, "bin", "workbook"), "bench", "--json", "--impl",
               "reference", "--threads", str(threads), "--repetitions",
               str(args.repetitions)] + (["--quick"] if args.quick else [])
    print("running: " + " ".join(f"{k}={v}" for k, v in workbook_env.items()) + " "
          + shlex.join(command), flush=True)
    stdout, workbook_check = run_measured(command, {**base_environment(), **workbook_env},
                                          threads, capture_stdout=True)
    workbook = json.loads(stdout)
    print(describe_check("workbook bench", workbook_check), flush=True)
    if args.quick:
        print("note: --quick is a smoke test: in a run of seconds the workbook's CPU/wall is "
              "mostly its build check (about 1.5 s wall, a third of it CPU)", flush=True)
    flag("workbook bench", workbook_check, warnings)
    # {(T, d, H, causal): {"lab01": row, "lab07": row, "lab07_tuned": row}}
    shapes = {}
    for row in workbook["results"]:
        if "error" not in row:
            key = (row["T"], row["d_model"], row["n_heads"], row["causal"])
            shapes.setdefault(key, {})[row["layer"]] = row
    # The headline is the reference's fastest lab 07 layer: its tuned twin (workbench/fast_attention)
    # when bench-reference has it, else the plain reference.
    headline = next((layer for layer in ("lab07_tuned", "lab07")
                     if any(layer in layers for layers in shapes.values())), None)
    if headline is None:
        sys.exit("bench_torch: workbook bench reported no lab07 row: " + stdout[:2000])
    distinct = list(dict.fromkeys((T, d, H) for T, d, H, _ in shapes))

    # 2. PyTorch, in its own process.
    with tempfile.TemporaryDirectory(prefix="bench_torch_") as folder:
        torch_record = os.path.join(folder, "torch.json")
        command = [args.torch_python, os.path.abspath(__file__), "--torch-only", "--threads",
                   str(threads), "--repetitions", str(args.repetitions), "--variants",
                   args.variants, "--malloc", args.malloc, "--record", torch_record]
        for T, d, H in distinct:
            command += ["--shape", str(T), str(d), str(H)]
        print("running: " + " ".join(f"{k}={v}" for k, v in torch_env.items()) + " "
              + shlex.join(command), flush=True)
        _, torch_check = run_measured(command, {**base_environment(), **torch_env}, threads,
                                      capture_stdout=False)
        with open(torch_record) as file:
            torch_doc = json.load(file)
    case_checks = [check for row in torch_doc["results"] for check in row["cpu_wall"].values()]
    torch_check["cases_ratio_min"] = min(c["ratio"] for c in case_checks)
    torch_check["cases_ratio_max"] = max(c["ratio"] for c in case_checks)
    torch_check["cases_ok"] = all(c["ok"] for c in case_checks)
    print(describe_check("torch child (with `import torch`)", torch_check)
          + f"; per case {torch_check['cases_ratio_min']:.2f} to "
          f"{torch_check['cases_ratio_max']:.2f}", flush=True)
    # The verdict on torch's CPU/wall comes from its timed cases: the whole child also counts
    # `import torch`, which reads files and runs on one thread.
    flag("torch child", torch_check, warnings, ratio=False)
    if not torch_check["cases_ok"]:
        loudly([f"torch: CPU/wall of a timed case from {torch_check['cases_ratio_min']:.2f} to "
                f"{torch_check['cases_ratio_max']:.2f}, not 1 ± {TOLERANCE:.2f}: "
                + why_off(torch_check["cases_ratio_min"] if torch_check["cases_ratio_min"] <
                          1 - TOLERANCE else torch_check["cases_ratio_max"])], warnings)
    torch_machine = torch_doc["machine"]
    if torch_machine["openblas_threads"] not in (None, threads) or \
            torch_machine["torch_threads"] != threads:
        loudly([f"torch ran with torch.get_num_threads() {torch_machine['torch_threads']} and "
                f"OpenBLAS threads {torch_machine['openblas_threads']}, not {threads}"], warnings)

    # 3. Side by side.
    variants = list(torch_doc["results"][0]["median_ms"])
    torch_rows = {(r["T"], r["d_model"], r["n_heads"], r["causal"]): r
                  for r in torch_doc["results"]}
    print()
    print(f"torch {torch_machine['torch']} (OpenBLAS core {torch_machine['openblas_core']}), "
          f"{headline} = " + ("the reference's tuned twin of efficient_forward (workbench/"
                              "fast_attention)" if headline == "lab07_tuned" else
                              "the reference's efficient_forward")
          + f"; ratio = torch ms / {headline} ms, above 1: {headline} is faster")
    header = (f"{'T':>6} {'d_model':>8} {'H':>4} {'causal':>7} {headline + ' ms':>16} {'GF/s':>6} "
              f"{'torch MHA ms':>13} {'GF/s':>6} {'ratio':>6}"
              + "".join(f" {name.replace('torch ', '') + ' ratio':>19}" for name in variants[1:]))
    print(header)
    results, ratios = [], {}  # ratios: (variant, layer, causal) -> [torch ms / layer ms]
    for (T, d, H, causal), layers in shapes.items():
        theirs = torch_rows[(T, d, H, causal)]
        row = {"T": T, "d_model": d, "n_heads": H, "causal": causal,
               "workbook": {layer: {"median_ms": r["median_ms"],
                                    "median_cpu_ms": r.get("median_cpu_ms"),
                                    "gflops_per_s": rounded(r["gflops_per_s"])}
                            for layer, r in layers.items()},
               "torch": {name: {"median_ms": rounded(ms),
                                "gflops_per_s": rounded(theirs["gflops_per_s"][name]),
                                "cpu_wall": theirs["cpu_wall"][name]}
                         for name, ms in theirs["median_ms"].items()},
               "ratio": {}}
        for layer, r in layers.items():
            row["ratio"][layer] = {}
            for name, ms in theirs["median_ms"].items():
                ratio = ms / r["median_ms"]
                row["ratio"][layer][name] = rounded(ratio, 3)
                ratios.setdefault((name, layer, causal), []).append(ratio)
        results.append(row)
        if headline in layers:
            ours = layers[headline]
            print(f"{T:>6} {d:>8} {H:>4} {'yes' if causal else 'no':>7} "
                  f"{ours['median_ms']:>16.3f} {ours['gflops_per_s']:>6.1f} "
                  f"{theirs['median_ms'][MHA]:>13.3f} {theirs['gflops_per_s'][MHA]:>6.1f} "
                  f"{row['ratio'][headline][MHA]:>6.2f}"
                  + "".join(f" {row['ratio'][headline][name]:>19.2f}" for name in variants[1:]))
    means = {}
    for layer in sorted({layer for layers in shapes.values() for layer in layers}):
        for name in variants:
            plain = ratios.get((name, layer, False), [])
            masked = ratios.get((name, layer, True), [])
            means.setdefault(layer, {})[name] = {
                "not_causal": rounded(geometric_mean(plain), 3) if plain else None,
                "causal": rounded(geometric_mean(masked), 3) if masked else None,
                "all": rounded(geometric_mean(plain + masked), 3)}
    print("geometric mean of the ratio:")
    for layer, per_variant in means.items():
        for name, m in per_variant.items():
            print(f"  {name} / {layer}: not causal {m['not_causal']:.2f}, causal "
                  f"{m['causal']:.2f}, all {m['all']:.2f}"
                  + ("   <- the headline" if (layer, name) == (headline, MHA) else ""))
    for impl, sgemm in workbook["machine"].get("sgemm", {}).items():
        print(f"OpenBLAS SGEMM {sgemm['n']}³ in bench-{impl}'s run: "
              f"{sgemm['gflops_per_s']:.1f} GF/s")
    load_after = load_average()
    cpu_wall_ok = workbook_check["ok"] and torch_check["cases_ok"]
    quiet = workbook_check["idle_otherwise"] and torch_check["idle_otherwise"]
    fair = not warnings
    print(f"CPU/wall: workbook {workbook_check['ratio']:.2f}, torch {torch_check['ratio']:.2f} "
          f"(cases {torch_check['cases_ratio_min']:.2f}–{torch_check['cases_ratio_max']:.2f}); "
          f"other processes used {workbook_check['other_processes_cpus']:.2f} and "
          f"{torch_check['other_processes_cpus']:.2f} CPUs: "
          + ("a fair run" if fair else
             ("NOT A FAIR RUN" if not cpu_wall_ok else "A NOISY RUN" if not quiet else
              "NOT A FAIR RUN (thread settings)")
             + f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''} above): quote no "
             "ratio from it"))

    if args.record:
        record = {
            "about": "lab 07's layer (`workbook bench --json --impl reference`) and PyTorch's CPU "
                     "attention (scripts/bench_torch.py --torch-only), timed one after the other "
                     "in one run of scripts/bench_torch.py: medians of `repetitions` calls after "
                     "a warm-up. ratio = torch ms / workbook ms (above 1: the workbook is "
                     "faster). GF/s counts 8·T·d_model² + 4·T²·d_model FLOPs per call, causal or "
                     "not. cpu_wall: CPU time / (wall time × threads) of each child process, "
                     f"fair when within 1 ± {TOLERANCE} and other processes used at most "
                     f"{IDLE_CPUS} CPUs.",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": shlex.join([sys.executable] + sys.argv),
            "threads": threads,
            "repetitions": args.repetitions,
            "machine": {"cpu": cpu, "load_average_before": load_before,
                        "load_average_after": load_after,
                        "workbook_openblas": workbook_blas,
                        "workbook_bench": workbook["machine"],
                        "torch": torch_machine["torch"],
                        "torch_openblas": {"core": torch_machine["openblas_core"],
                                           "config": torch_machine["blas"],
                                           "threads": torch_machine["openblas_threads"]},
                        "torch_threads": torch_machine["torch_threads"]},
            "environment": {"workbook": {**workbook_env, **inherited},
                            "torch": torch_doc["environment"]},
            "cpu_wall": {"workbook": workbook_check, "torch": torch_check},
            "fair": fair,
            "cpu_wall_ok": cpu_wall_ok,
            "machine_quiet": quiet,
            "warnings": warnings,
            "results": results,
            "headline_layer": headline,
            "geometric_mean_ratio": means,
        }
        with open(args.record, "w") as out:
            json.dump(record, out, indent=2, ensure_ascii=False)
            out.write("\n")
        print(f"wrote {args.record}")
    return 0


def bounds(args):
    """--bounds: both sides' projections and attention core alone, and the ratios they allow."""
    warnings = []
    threads = args.threads
    cpu = cpu_info()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    workbook_blas = openblas_core("libopenblas.so.0")
    load_before = load_average()
    env = child_environment(threads, args.malloc == "both")
    torch_env = {**child_environment(threads, args.malloc != "default"), **TORCH_OPENMP}
    print(f"bench_torch --bounds {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"{cpu_text(cpu)}; OpenBLAS core {workbook_blas['core']}; threads {threads}; median of "
          f"{args.repetitions}; load average {load_before[0]:.2f}", flush=True)
    # 1. Ours: the tuned layer whole and its parts, Google Benchmark's medians (wall and CPU).
    engine = os.path.join(args.build_dir, "bin", "bench-reference")
    command = [engine, "--bounds", "--threads", str(threads), "--benchmark_format=json",
               f"--benchmark_repetitions={args.repetitions}",
               "--benchmark_report_aggregates_only=true"]
    if args.quick:
        command.append("--quick")
    print("running: " + " ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join(command),
          flush=True)
    stdout, check = run_measured(command, {**base_environment(), **env}, threads, True)
    print(describe_check("bench-reference --bounds", check), flush=True)
    flag("bench-reference --bounds", check, warnings)
    ours = {}  # (T, d, H, causal) -> {part: (wall ms, cpu ms)}
    sgemm = None
    for run in json.loads(stdout)["benchmarks"]:
        if run.get("aggregate_name") != "median":
            continue
        fields = run["run_name"].split("/")
        if fields[0].startswith("sgemm"):
            sgemm = run["flops"] / (run["real_time"] * 1e6)
            continue
        T, d, H = (int(f.split(":")[1]) for f in fields[1:4])
        ours.setdefault((T, d, H, "causal" in fields), {})[fields[0]] = (
            run["real_time"], run["cpu_time"])
    # 2. Torch, in its own process: MHA whole and its parts.
    distinct = list(dict.fromkeys((T, d, H) for T, d, H, _ in ours))
    with tempfile.TemporaryDirectory(prefix="bench_torch_") as folder:
        record = os.path.join(folder, "torch.json")
        command = [args.torch_python, os.path.abspath(__file__), "--torch-only", "--bounds",
                   "--threads", str(threads), "--repetitions", str(args.repetitions),
                   "--variants", "mha", "--malloc", args.malloc, "--record", record]
        for T, d, H in distinct:
            command += ["--shape", str(T), str(d), str(H)]
        print("running: " + shlex.join(command), flush=True)
        _, torch_check = run_measured(command, {**base_environment(), **torch_env}, threads,
                                      False)
        with open(record) as file:
            theirs = {(r["T"], r["d_model"], r["n_heads"], r["causal"]): r
                      for r in json.load(file)["results"]}
    print(describe_check("torch child (with `import torch`)", torch_check), flush=True)
    flag("torch child", torch_check, warnings, ratio=False)
    off = [(name, c["ratio"]) for r in theirs.values() for name, c in r["cpu_wall"].items()
           if not c["ok"]]
    if off:
        loudly([f"torch: CPU/wall of {len(off)} timed cases off 1 by more than {TOLERANCE}: "
                + ", ".join(f"{n} {r:.2f}" for n, r in off[:6])], warnings)
    # 3. The tables and the bounds: by wall time (what a fair run quotes), then by CPU time
    #    (steadier on a busy machine: the same calls, the CPU they took).
    rows = {}
    for metric, index, torch_field in (("wall", 0, "median_ms"), ("CPU", 1, "median_cpu_ms")):
        print()
        print(f"{metric} ms, medians; ours: P = the tuned layer's four projection GEMMs alone, "
              "A = its attention core alone; torch: P = in- + out-projection, A = scale, bmm, "
              "softmax, bmm; bound = torch MHA / our P (a free core), with torch's A = torch "
              "MHA / (our P + torch A)")
        print(f"{'T':>5} {'d':>5} {'H':>3} {'causal':>6} | {'ours':>8} {'P':>8} {'A':>8} "
              f"{'P+A':>8} | {'torch':>8} {'P':>8} {'A':>8} {'P+A':>8} | {'now':>5} "
              f"{'bound':>5} {'torch A':>7}")
        now, bound, matched = [], [], []
        for key, parts in ours.items():
            T, d, H, causal = key
            t = theirs[key][torch_field]
            whole, proj, core = (parts[n][index] for n in ("lab07_tuned", "projections", "core"))
            t_p = t["torch in-projection"] + t["torch out-projection"]
            t_a, t_w = t["torch core"], t[MHA]
            now.append(t_w / whole)
            bound.append(t_w / proj)  # a free core
            matched.append(t_w / (proj + t_a))  # torch's own core
            row = rows.setdefault(key, {"T": T, "d_model": d, "n_heads": H, "causal": causal})
            row[metric] = {"ours_ms": {"whole": rounded(whole), "projections": rounded(proj),
                                       "core": rounded(core)},
                           "torch_ms": {k: rounded(v) for k, v in t.items()},
                           "ratio_now": rounded(now[-1], 3),
                           "ratio_free_core": rounded(bound[-1], 3),
                           "ratio_torchs_core": rounded(matched[-1], 3)}
            print(f"{T:>5} {d:>5} {H:>3} {'yes' if causal else 'no':>6} | {whole:>8.2f} "
                  f"{proj:>8.2f} {core:>8.2f} {proj + core:>8.2f} | {t_w:>8.2f} {t_p:>8.2f} "
                  f"{t_a:>8.2f} {t_p + t_a:>8.2f} | {now[-1]:>5.2f} {bound[-1]:>5.2f} "
                  f"{matched[-1]:>7.2f}")
        print(f"geometric mean of torch MHA / ours ({metric}): now {geometric_mean(now):.2f}; "
              f"with a free core {geometric_mean(bound):.2f}; with torch's core "
              f"{geometric_mean(matched):.2f}")
        for (T, d, H, causal), parts in ours.items():
            if causal or (T, d, H, True) not in ours:
                continue
            p, a = parts["projections"][index], parts["core"][index]
            masked = ours[(T, d, H, True)]
            print(f"  causal / not causal at ({T}, {d}, {H}) ({metric}): whole "
                  f"{masked['lab07_tuned'][index] / parts['lab07_tuned'][index]:.2f}, core "
                  f"alone {masked['core'][index] / a:.2f}; a half-price core gives (P + A/2) / "
                  f"(P + A) = {(p + a / 2) / (p + a):.2f}, a free one P / (P + A) = "
                  f"{p / (p + a):.2f}")
    rows = list(rows.values())
    if sgemm:
        print(f"OpenBLAS SGEMM 2048³ in the same run: {sgemm:.1f} GF/s")
    print("a fair run" if not warnings else
          f"NOT A FAIR RUN ({len(warnings)} warnings above): quote no ratio from it")
    if args.record:
        with open(args.record, "w") as out:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "command": shlex.join([sys.executable] + sys.argv),
                       "machine": {"cpu": cpu, "load_average_before": load_before,
                                   "load_average_after": load_average(),
                                   "workbook_openblas": workbook_blas},
                       "threads": threads, "repetitions": args.repetitions,
                       "sgemm_gflops_per_s": sgemm, "cpu_wall": {"ours": check,
                                                                 "torch": torch_check},
                       "fair": not warnings, "warnings": warnings, "results": rows},
                      out, indent=2, ensure_ascii=False)
            out.write("\n")
        print(f"wrote {args.record}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for both (default 1)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed calls per case")
    parser.add_argument("--quick", action="store_true", help="the tiny shapes of --quick")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--torch-python", default=TORCH_PYTHON,
                        help=f"the Python that imports torch (default {TORCH_PYTHON})")
    parser.add_argument("--variants", choices=("mha", "all"),
                        help="torch MHA alone, or also MHA without biases and plain torch "
                             "(default: all, mha with --torch-only)")
    parser.add_argument("--malloc", choices=("both", "torch", "default"), default="both",
                        help="who gets glibc's keep-freed-memory settings (default both)")
    parser.add_argument("--record", metavar="FILE", help="also write the run as JSON")
    parser.add_argument("--bounds", action="store_true",
                        help="time each side's projections and attention core alone, and print "
                             "the ratios they allow (issue 28)")
    parser.add_argument("--torch-only", action="store_true",
                        help="time torch alone on the --shape shapes; no workbook bench")
    parser.add_argument("--shape", nargs=3, type=int, action="append", metavar=("T", "D", "H"),
                        help="with --torch-only: a shape (T, d_model, H) to time, causal and not")
    args = parser.parse_args()
    if args.torch_only != bool(args.shape):
        parser.error("--torch-only and --shape go together")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.variants is None:
        args.variants = "mha" if args.torch_only else "all"
    if args.torch_only:
        return torch_only(args)
    if args.bounds:
        return bounds(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
