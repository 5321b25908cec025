#!/usr/bin/env python3
"""wick's CPU attention and matmul beside PyTorch's on the same CPU, in one run.

Workload (the same as bench/bench_attention_cpu): 8 sequences of 512..2048 tokens (q and k
alike), 8 heads, bf16, head size 64 and 128, full and causal masks; wick runs its varlen
forward over the whole batch, torch runs torch.nn.functional.scaled_dot_product_attention
once per sequence ((1, heads, len, d) bf16, is_causal for the causal mask). FLOPs count
4 * visible (query, key) pairs * head size * heads for both. Matmul: f32 n x n, wick::matmul
(bench_matmul) against torch.matmul.

Each round runs every build's benchmarks and then torch's, so the machine's load is shared
alike; the table gives each number's median over the rounds and the ratio to torch.
Only the build folders and Python with torch are needed:

  python3 bench/cpu_peers.py --build build [--build old=other-build] [--threads 16]
      [--rounds 3] [--reps 3] [--matmul 2048]

--build LABEL=DIR names a build in the table (plain DIR: its folder name). Threads: wick's
pool and torch both get --threads (default: this process's CPUs).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

LENS = [512, 731, 951, 1170, 1390, 1609, 1829, 2048]
HEADS = 8


def attention_flop(d, causal):
    pairs = sum(0.5 * l * (l + 1) if causal else float(l) * l for l in LENS)
    return 4.0 * pairs * HEADS * d


def run_wick(build, threads, reps, n, path):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [os.path.join(build, "bench", "bench_attention_cpu"), str(reps), str(threads)]
    if path:
        cmd.append(path)
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    header = out.splitlines()[0] if out else ""
    for line in out.splitlines():
        m = re.match(r"\s+(\d+)\s+(full|causal)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            res[("attention", int(m.group(1)), m.group(2))] = float(m.group(4))
    if n:
        out = subprocess.run([os.path.join(build, "bench", "bench_matmul"), str(n), str(max(reps, 5))], env=env,
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"wick::matmul\s+([\d.]+) ms\s+([\d.]+) GFLOP/s", out)
        if m:
            res[("matmul", n, "f32")] = float(m.group(2))
    return res, header


def median_time(reps, f):
    f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def run_torch(torch, reps, n):
    import torch.nn.functional as F
    res = {}
    for d in (64, 128):
        g = torch.Generator().manual_seed(d)
        qkv = [[torch.randn(1, HEADS, l, d, generator=g).to(torch.bfloat16) for _ in range(3)] for l in LENS]
        for causal in (False, True):
            def call():
                for q, k, v in qkv:
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            s = median_time(reps, call)
            res[("attention", d, "causal" if causal else "full")] = attention_flop(d, causal) / s * 1e-9
    if n:
        a, b = torch.randn(n, n), torch.randn(n, n)
        s = median_time(max(reps, 5), lambda: torch.matmul(a, b))
        res[("matmul", n, "f32")] = 2.0 * n ** 3 / s * 1e-9
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, help="LABEL=DIR or DIR (repeatable)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--matmul", type=int, default=2048, help="matmul size (0: none)")
    ap.add_argument("--path", default="", help="wick CPU code path for the attention (default: the best)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()

    builds = []
    for b in args.build:
        label, _, d = b.rpartition("=")
        builds.append((label or os.path.basename(os.path.normpath(d)), d))
    torch = None
    if not args.no_torch:
        import torch as torch_module
        torch = torch_module
        torch.set_num_threads(args.threads)

    samples = {}  # (who, key) -> [GFLOP/s per round]
    headers = {}
    for r in range(args.rounds):
        for label, d in builds:
            res, headers[label] = run_wick(d, args.threads, args.reps, args.matmul, args.path)
            for k, v in res.items():
                samples.setdefault((label, k), []).append(v)
        if torch is not None:
            for k, v in run_torch(torch, args.reps, args.matmul).items():
                samples.setdefault(("torch", k), []).append(v)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    load = os.getloadavg()
    print(f"# {args.threads} threads, {args.rounds} rounds (median), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for label, _ in builds:
        print(f"# {label}: {headers[label]}")
    if torch is not None:
        print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads")
    keys = sorted({k for (_, k) in samples}, key=lambda k: (k[0] != "attention", k[1], k[2] != "full"))
    who = [label for label, _ in builds] + (["torch"] if torch is not None else [])
    cols = "".join(f" {w + ' GFLOP/s':>22}" for w in who)
    ratios = "".join(f" {label + ' / torch':>18}" for label, _ in builds) if torch is not None else ""
    if len(builds) > 1:
        ratios += f" {builds[-1][0] + ' / ' + builds[0][0]:>18}"
    print(f"{'case':<24}{cols}{ratios}")
    for k in keys:
        med = {w: statistics.median(samples[(w, k)]) for w in who if (w, k) in samples}
        name = f"{k[0]} d{k[1]} {k[2]}" if k[0] == "attention" else f"matmul {k[1]}^3 {k[2]}"
        line = f"{name:<24}" + "".join(f" {med.get(w, float('nan')):>22.1f}" for w in who)
        if torch is not None:
            line += "".join(f" {med.get(label, float('nan')) / med['torch']:>18.2f}" for label, _ in builds)
        if len(builds) > 1:
            line += f" {med.get(builds[-1][0], float('nan')) / med.get(builds[0][0], float('nan')):>18.2f}"
        print(line)


if __name__ == "__main__":
    main()
