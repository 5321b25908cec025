"""Compares two flash_bench binaries on one GPU (a change against the tree it came from).

Runs BASE and NEW for --rounds rounds in alternating order (BASE first in odd rounds, NEW
first in even ones, so a drift in clock or temperature falls on both), then prints for each
configuration both ranges and the ratio of the medians of the times (above 1: NEW is
faster), and the geometric mean of those ratios. A change that moves one configuration by
less than the spread of its own rounds has not been shown to move it.

Usage: python3 bench/flash_ab.py BASE NEW [--rounds 3] [--only ABCE] [--filter TEXT]
                                 [--json FILE]
  BASE, NEW  paths of two flash_bench binaries
  --only, --filter  passed to both (flash_bench's groups and name filter)
  --json FILE  every run's lines, tagged with the binary and the round
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

NON_METRIC = {"impl", "name", "ms", "max_diff"}


def run(binary, only, name_filter):
    cmd = [binary, "--only", only]
    if name_filter:
        cmd += ["--filter", name_filter]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{binary} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    rows = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def rate(row):
    """The row's own figure (TFLOP/s, GB/s, ...) as (unit, value); time when it has none."""
    for key, value in row.items():
        if key not in NON_METRIC:
            return key, value
    return "ms", row["ms"]


def span(values):
    return f"{min(values):.2f}-{max(values):.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="ABCE")
    ap.add_argument("--filter", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    for path in (args.base, args.new):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            sys.exit(f"{path}: not an executable file (expected a flash_bench binary)")

    runs = {}  # name -> {"base": [rows], "new": [rows]}, names in the order first seen
    log = open(args.json, "w") if args.json else None
    for r in range(1, args.rounds + 1):
        sides = ["base", "new"] if r % 2 else ["new", "base"]
        for side in sides:
            for row in run(getattr(args, side), args.only, args.filter):
                runs.setdefault(row["name"], {"base": [], "new": []})[side].append(row)
                if log:
                    log.write(json.dumps(dict(row, side=side, round=r)) + "\n")
        print(f"round {r} of {args.rounds} done", file=sys.stderr, flush=True)
    if log:
        log.close()

    logs = []
    width = max((len(n) for n in runs), default=4)
    print(f"{'config':{width}}  {'unit':6}  {'base (min-max)':19}  {'new (min-max)':19}  new/base")
    for name, sides in runs.items():
        base, new = sides["base"], sides["new"]
        if not base or not new:
            print(f"{name:{width}}  (ran in one binary only)")
            continue
        ratio = statistics.median(r["ms"] for r in base) / statistics.median(r["ms"] for r in new)
        logs.append(math.log(ratio))
        unit = rate(base[0])[0]
        b, n = [rate(r)[1] for r in base], [rate(r)[1] for r in new]
        print(f"{name:{width}}  {unit:6}  {span(b):19}  {span(n):19}  {ratio:.3f}")
    if logs:
        print(f"geometric mean of new/base over {len(logs)} configurations: {math.exp(sum(logs) / len(logs)):.3f}")


if __name__ == "__main__":
    main()
