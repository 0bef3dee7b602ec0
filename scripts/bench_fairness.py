#!/usr/bin/python3
"""The fairness machinery of the maintainers' benchmarks against PyTorch (scripts/bench_torch.py,
scripts/bench_gpt.py), in one place: the machine named (CPU, caches, OpenBLAS's core), the child
processes' environment (threads, glibc's allocator told to keep freed memory), CPU time against
wall time × threads for each child, what other processes used meanwhile (/proc/stat), and the
loud warnings that make a run "NOT A FAIR RUN". Standard library only: importing it imports no
torch."""
import ctypes
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time

# The program's name in its error messages: bench_torch, bench_gpt.
PROGRAM = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "bench"

TORCH_PYTHON = "/usr/bin/python3"  # Debian's, beside python3-torch
# glibc keeps freed memory: no munmap of large blocks, no trimming of the heap's top.
ALLOCATOR = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "68719476736"}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# Passed on to both children as they are, and recorded: they choose OpenBLAS's kernels.
INHERITED = ("OPENBLAS_CORETYPE", "OPENBLAS_VERBOSE")
TOLERANCE = 0.15  # CPU time / (wall time × threads) within 1 ± this, or the run is flagged
IDLE_CPUS = 0.15  # other processes' average CPU use above this: the machine was not idle


def geometric_mean(values):
    return math.exp(statistics.mean(math.log(v) for v in values)) if values else None


def rounded(value, digits=4):
    return float(f"{value:.{digits}g}")


# ---------------------------------------------------------------------------------------------
# The machine


def cpu_info():
    """The first processor of /proc/cpuinfo, its caches, and what the kernel says of the host."""
    fields = {}
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    caches = []
    for index in sorted(os.listdir("/sys/devices/system/cpu/cpu0/cache")
                        if os.path.isdir("/sys/devices/system/cpu/cpu0/cache") else []):
        if not index.startswith("index"):
            continue
        folder = os.path.join("/sys/devices/system/cpu/cpu0/cache", index)
        try:
            read = lambda name: open(os.path.join(folder, name)).read().strip()
            kind = {"Data": "d", "Instruction": "i", "Unified": ""}.get(read("type"), "?")
            caches.append(f"L{read('level')}{kind} {read('size')}")
        except OSError:
            pass
    return {
        "model_name": fields.get("model name", "unknown"),
        "vendor": fields.get("vendor_id", "unknown"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "stepping": fields.get("stepping"),
        "simd": [f for f in ("avx", "avx2", "fma", "avx512f", "avx512_bf16") if f in flags],
        "caches_per_core": caches,
        "cpus": os.cpu_count(),
        "virtual_machine": "hypervisor" in flags,
        "kernel": platform.release(),
    }


def cpu_text(cpu):
    return (f"{cpu['model_name']} ({cpu['vendor']} family {cpu['family']} model {cpu['model']} "
            f"stepping {cpu['stepping']}; {' '.join(cpu['simd']).upper()}; "
            f"{', '.join(cpu['caches_per_core'])}), {cpu['cpus']} CPUs"
            + (", a virtual machine" if cpu["virtual_machine"] else ""))


def openblas_libraries():
    """The OpenBLAS files this process has loaded (libblas.so.3 is OpenBLAS too on Debian)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().endswith(".so")
                 or ".so." in line.rsplit("/", 1)[-1]}
    return sorted(p for p in paths if p.startswith("/") and (
        "openblas" in p or os.path.basename(p).startswith("libblas.so")))


def openblas_core(library=None):
    """OpenBLAS's core type (the kernels DYNAMIC_ARCH chose for this CPU), config and threads,
    from `library` (a name dlopen finds), or from the OpenBLAS this process has loaded (torch's)
    when None."""
    for path in [library] if library else openblas_libraries():
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            return {"library": next(iter(openblas_libraries()), path) if library else path,
                    "core": lib.openblas_get_corename().decode(),
                    "config": lib.openblas_get_config().decode(),
                    "threads": lib.openblas_get_num_threads()}
        except (OSError, AttributeError):
            continue
    return {"library": library or "none loaded", "core": "unknown", "config": "",
            "threads": None}


def load_average():
    with open("/proc/loadavg") as loadavg:
        return [float(value) for value in loadavg.read().split()[:3]]


def busy_cpu_seconds():
    """CPU seconds all processes have used since boot, and those the hypervisor took (steal)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


# ---------------------------------------------------------------------------------------------
# CPU time against wall time


def check_cpu_wall(cpu_s, wall_s, threads):
    """CPU time / (wall time × threads): 1 when every requested thread ran all the time."""
    ratio = cpu_s / (wall_s * threads) if wall_s > 0 else float("nan")
    return {"cpu_s": rounded(cpu_s), "wall_s": rounded(wall_s), "threads": threads,
            "ratio": rounded(ratio, 3), "ok": abs(ratio - 1.0) <= TOLERANCE}


def why_off(ratio):
    return ("more CPU than the threads asked for: a thread setting was ignored" if ratio > 1
            else "less CPU than the threads asked for: the machine was busy, or threads idled")


def run_measured(command, env, threads, capture_stdout):
    """Runs `command` to its end; its stdout (if captured) and the check of its CPU time (its
    processes and the children they waited for) against its wall time."""
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before, steal_before = busy_cpu_seconds()
    start = time.perf_counter()
    run = subprocess.run(command, env=env, text=True,
                         stdout=subprocess.PIPE if capture_stdout else None)
    wall = time.perf_counter() - start
    busy_after, steal_after = busy_cpu_seconds()
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.exit(f"{PROGRAM}: {shlex.join(command)} failed (exit status {run.returncode})")
    cpu = ((usage_after.ru_utime + usage_after.ru_stime)
           - (usage_before.ru_utime + usage_before.ru_stime))
    check = check_cpu_wall(cpu, wall, threads)
    # What the rest of the machine used meanwhile (this script's own share is negligible).
    check["other_processes_cpus"] = rounded(max(0.0, busy_after - busy_before - cpu) / wall, 2)
    check["steal_cpus"] = rounded(max(0.0, steal_after - steal_before) / wall, 2)
    check["idle_otherwise"] = check["other_processes_cpus"] <= IDLE_CPUS and \
        check["steal_cpus"] <= IDLE_CPUS
    return run.stdout, check


def describe_check(name, check):
    return (f"{name}: CPU {check['cpu_s']:.1f} s / (wall {check['wall_s']:.1f} s × "
            f"{check['threads']} thread{'s' if check['threads'] != 1 else ''}) = "
            f"{check['ratio']:.2f}; other processes used {check['other_processes_cpus']:.2f} "
            f"CPUs meanwhile, the hypervisor stole {check['steal_cpus']:.2f}")


def loudly(lines, warnings):
    """A warning nobody scrolls past, kept for the record."""
    print("!" * 100, flush=True)
    for line in lines:
        print(f"!! WARNING: {line}", flush=True)
    print("!" * 100, flush=True)
    warnings.extend(lines)


def flag(name, check, warnings, ratio=True):
    problems = []
    if ratio and not check["ok"]:
        problems.append(f"{name}: CPU/wall {check['ratio']:.2f}, not 1 ± {TOLERANCE:.2f}: "
                        + why_off(check["ratio"]) + "; its times are not a fair result")
    if not check.get("idle_otherwise", True):
        problems.append(f"{name}: other processes used {check['other_processes_cpus']:.2f} "
                        f"CPUs and the hypervisor {check['steal_cpus']:.2f} during the run: "
                        "the caches and memory were shared; rerun on an idle machine")
    if problems:
        loudly(problems, warnings)


# ---------------------------------------------------------------------------------------------
# Child processes


# torch's OpenMP threads sleep when idle instead of spinning: on Debian's torch, built with
# OpenBLAS's own (pthread) threads, a spinning OpenMP thread and an OpenBLAS thread fight for the
# same core between calls. Measured here on 2 threads: a training step 435 ms spinning, 148 ms
# passive (and 1 thread: 238 ms); sampling without a cache 1464 against 331 ms.
TORCH_OPENMP = {"OMP_WAIT_POLICY": "PASSIVE"}


def child_environment(threads, allocator):
    env = {variable: str(threads) for variable in THREAD_VARIABLES}
    if allocator:
        env.update(ALLOCATOR)
    return env


def median_ms(call, repetitions, cpu_ms=None):
    """Median ms of `repetitions` calls after one warm-up, and the CPU/wall of all of them; with
    a list `cpu_ms`, the median CPU ms of a call is appended to it."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    call()  # warm-up: first-touch of fresh memory, thread-pool start
    times, cpu_times = [], []
    for _ in range(repetitions):
        start, cpu_call = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - start) * 1e3)
        cpu_times.append((time.process_time() - cpu_call) * 1e3)
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    if cpu_ms is not None:
        cpu_ms.append(statistics.median(cpu_times))
    return statistics.median(times), cpu, wall


def reexec_with(wanted, drop):
    """Runs this script again in a process whose environment has `wanted` and lacks `drop`, unless
    this one already does: glibc reads its allocator settings, and torch and OpenBLAS their
    threads, when the process starts."""
    if all(os.environ.get(k) == v for k, v in wanted.items()) and \
            not any(k in os.environ for k in drop):
        return
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(wanted)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def base_environment():
    """This process's environment without the variables the children get set explicitly."""
    return {k: v for k, v in os.environ.items()
            if k not in THREAD_VARIABLES and k not in ALLOCATOR}
