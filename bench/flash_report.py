"""Merges bench/flash_bench.cu and bench/flash_peers.py JSON lines into a ratio table
against the issue-4 targets: A, B >= 0.7x torch FA2 (varlen_attn / SDPA flash);
C >= 0.95x wick non-paged; D >= 2.5 TB/s (B = 64, 128) and >= 2.0 TB/s (B = 1).
With `--ladder`, prints instead the markdown table of docs/kernels.md's kernel ladder from the
L group (flash_bench --only L) and, when present, torch varlen_attn's A_varlen_d128_h16 runs."""
import json
import sys


def load(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["impl"], r["name"])] = r
    return out


LADDER = [
    ("L1_lesson", "1", "`flash_naive.cu`", "one warp per query row, keys one per lane, online softmax in f32, scalar loads"),
    ("L2_mma_16rows_2stages", "2", "`flash_fwd_kernel.cuh`, `FlashConfig<128, 128, 4, 1, 1, 32, 2>`",
     "tensor cores (`mma.sync m16n8k16`, `ldmatrix`), `cp.async` K/V tiles in two shared-memory stages, P kept in registers; 16 query rows per warp"),
    ("L3_mma_32rows_2stages", "3", "`FlashConfig<128, 128, 4, 2, 1, 32, 2>`",
     "two 16-row tiles per warp: each K/V fragment read from shared memory feeds two mmas"),
    ("L4_library", "4", "`PrefillConfig<128>` = `FlashConfig<128, 128, 4, 2, 1, 32, 3>`",
     "a third stage of K/V in flight: the library's d128 instance"),
]


def ladder(rec):
    get = lambda impl, n, k: rec.get((impl, n), {}).get(k, float("nan"))
    print("| level | kernel | what it adds | TFLOP/s | causal | max diff vs level 1 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, lvl, where, what in LADDER:
        t, c = get("wick", name, "tflops"), get("wick", name + "_causal", "tflops")
        diff = max(get("wick", name, "max_diff"), get("wick", name + "_causal", "max_diff"))
        print(f"| {lvl} | {where} | {what} | {t:.1f} | {c:.1f} | {diff:.2g} |")
    peer, peer_c = get("torch_varlen", "A_varlen_d128_h16", "tflops"), get("torch_varlen", "A_varlen_d128_h16_causal", "tflops")
    if peer == peer:
        print(f"| peer | torch `varlen_attn` (FlashAttention-2) | same inputs | {peer:.1f} | {peer_c:.1f} | |")


def main():
    rec = {}
    args = [a for a in sys.argv[1:] if a != "--ladder"]
    if len(args) != len(sys.argv) - 1:
        for path in args:
            rec.update(load(path))
        ladder(rec)
        return
    for path in sys.argv[1:]:
        rec.update(load(path))
    names = sorted({n for (_, n) in rec}, key=lambda n: (n[0], n))
    get = lambda impl, n, k: rec.get((impl, n), {}).get(k, float("nan"))
    copy = get("wick", "copy_d2d_2GiB", "gbps")
    print(f"device-to-device copy: {copy:.0f} GB/s")
    print(f"{'config':34s} {'wick':>9s} {'peer':>9s} {'ratio':>6s}  target")
    for n in names:
        if n.startswith("A_"):
            w, t = get("wick", n, "tflops"), get("torch_varlen", n, "tflops")
            print(f"{n:34s} {w:9.1f} {t:9.1f} {w / t:6.2f}  >=0.70 vs varlen_attn {'MET' if w / t >= 0.7 else 'missed'}")
        elif n.startswith("B_"):
            w, f, c = get("wick", n, "tflops"), get("torch_flash", n, "tflops"), get("torch_cudnn", n, "tflops")
            print(f"{n:34s} {w:9.1f} {f:9.1f} {w / f:6.2f}  >=0.70 vs SDPA flash {'MET' if w / f >= 0.7 else 'missed'}"
                  f"  (cuDNN {c:.1f}, ratio {w / c:.2f})")
        elif n.startswith("C_"):
            base = "A_varlen_" + n[len("C_paged64_"):]
            w, t = get("wick", n, "tflops"), get("wick", base, "tflops")
            print(f"{n:34s} {w:9.1f} {t:9.1f} {w / t:6.2f}  >=0.95 vs wick non-paged {'MET' if w / t >= 0.95 else 'missed'}")
        elif n.startswith("V_order_"):
            # launch-order variant vs the library's choice for the same workload
            base = n.split("_", 3)[3]
            w, t = get("wick", n, "tflops"), get("wick", base, "tflops")
            print(f"{n:34s} {w:9.1f} {t:9.1f} {w / t:6.2f}  order variant vs library ({base})")
        elif n.startswith("V_"):
            # tile-shape variant vs the library's choice for the same workload
            d = n.split("_")[1]
            causal = "_causal" if n.endswith("_causal") else ""
            if "_A" in n:
                base = f"A_varlen_{d}_h{32 if d == 'd64' else 16}{causal}"
            else:
                base = f"B_S1024_{d}{causal}"
            w, t = get("wick", n, "tflops"), get("wick", base, "tflops")
            print(f"{n:34s} {w:9.1f} {t:9.1f} {w / t:6.2f}  variant vs library ({base})")
        elif n.startswith("D_"):
            w, c = get("wick", n, "gbps"), get("torch_cudnn", n, "gbps")
            goal = 2000 if "_B1_" in n else 2500
            print(f"{n:34s} {w:9.0f} {c:9.0f} {w / c:6.2f}  >={goal} GB/s {'MET' if w >= goal else 'missed'}"
                  f"  ({w / copy:.2f} of copy; peer = SDPA cuDNN GB/s)")


if __name__ == "__main__":
    main()
