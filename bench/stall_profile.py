#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's per-instruction view.

Collect it on the GPU machine (one launch, after a few warm-up ones):

  ncu --cache-control none --clock-control none --kernel-name regex:fwd_kernel_tma \\
      --launch-skip 3 --launch-count 1 --section SourceCounters -o prof \\
      build/bench/flash_bench --only B --filter B_S1024_d128
  ncu -i prof.ncu-rep --page source --csv --print-source sass > prof.csv

then read it anywhere:

  python3 bench/stall_profile.py prof.csv                 # the kernel's parts
  python3 bench/stall_profile.py prof.csv --runs 16384    # one part, in runs of 40 instructions
  python3 bench/stall_profile.py prof.csv --top 20        # the 20 instructions sampled most

A kernel's parts show up as how many times their instructions ran: every instruction of
the key loop ran as often as the loop turned, every instruction of a query tile's start
and end once per tile and warp, the producer's once per key tile. So the instructions are
grouped by that count, and each group's share of the warp stall samples says how much of
the warps' time that part takes, and its leading stall reasons what they wait for there.
"""
import argparse
import collections
import csv
import signal
import sys

# One instruction: its address, SASS text, warp stall samples, how many times it ran (per
# warp, summed over warps) and its samples by stall reason.
Instr = collections.namedtuple("Instr", "addr sass samples runs reasons")


def read(path):
    """The instructions (Instr) of an `ncu --page source --csv --print-source sass` export, by address."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for at, row in enumerate(rows):
        if "Address" in row and "Source" in row:
            header, body = row, rows[at + 1:]
            break
    else:
        sys.exit(f"{path}: no header row with 'Address' and 'Source' (an ncu source-page CSV?)")
    col = {name: i for i, name in enumerate(header)}
    for need in ("Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if need not in col:
            sys.exit(f"{path}: no '{need}' column (collect with --section SourceCounters)")
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def number(row, name):
        text = row[col[name]].strip() if col[name] < len(row) else ""
        return float(text) if text else 0.0

    out = []
    for row in body:
        if len(row) <= col["Source"] or not row[col["Address"]].strip():
            continue
        out.append(Instr(int(row[col["Address"]], 16), row[col["Source"]].strip(),
                         number(row, "Warp Stall Sampling (All Samples)"), int(number(row, "Instructions Executed")),
                         {r[len("stall_"):]: number(row, r) for r in reasons}))
    out.sort()
    return out


def opcode(sass):
    words = sass.split()
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def percent(x, total):
    return f"{100 * x / total:5.1f}%"


def summed(part):
    """The stall reasons' samples over a list of instructions."""
    reasons = collections.Counter()
    for i in part:
        reasons.update(i.reasons)
    return reasons


def leading(reasons, total, k=3):
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:k]
    return ", ".join(f"{name} {100 * v / total:.1f}%" for name, v in top if v > 0)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--runs", type=int, help="show the group of instructions that ran this many times")
    ap.add_argument("--block", type=int, default=40, help="instructions per line with --runs (40)")
    ap.add_argument("--top", type=int, help="list the instructions with the most samples")
    ap.add_argument("--groups", type=int, default=12, help="groups to list (12)")
    args = ap.parse_args()
    if args.block < 1:
        sys.exit("--block must be at least 1")

    ins = read(args.csv)
    total = sum(i.samples for i in ins)
    if total <= 0:
        sys.exit(f"{args.csv}: no stall samples")
    print(f"{len(ins)} instructions, {total:.0f} warp stall samples")

    if args.top:
        for i in sorted(ins, key=lambda i: -i.samples)[:args.top]:
            print(f"{i.addr & 0xfffff:6x} {percent(i.samples, total)} runs {i.runs:9d}  {i.sass[:60]:60s} "
                  f"{leading(i.reasons, total)}")
        return

    if args.runs is not None:
        part = [i for i in ins if i.runs == args.runs]
        if not part:
            sys.exit(f"no instruction ran {args.runs} times")
        for start in range(0, len(part), args.block):
            chunk = part[start:start + args.block]
            n = sum(i.samples for i in chunk)
            ops = collections.Counter(opcode(i.sass) for i in chunk)
            kinds = " ".join(f"{op}x{c}" for op, c in ops.most_common(5))
            print(f"{chunk[0].addr & 0xfffff:6x} {percent(n, total)}  {kinds:48s} {leading(summed(chunk), total)}")
        return

    groups = collections.defaultdict(list)
    for i in ins:
        groups[i.runs].append(i)
    print(f"{'runs':>10} {'instrs':>6} {'samples':>8}  leading stall reasons")
    for runs, part in sorted(groups.items(), key=lambda kv: -sum(i.samples for i in kv[1]))[:args.groups]:
        samples = sum(i.samples for i in part)
        print(f"{runs:10d} {len(part):6d} {percent(samples, total):>8}  {leading(summed(part), total)}")
    print(f"all: {leading(summed(ins), total, 6)}")


if __name__ == "__main__":
    main()
