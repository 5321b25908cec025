"""Merges bench/flash_bench.cu and bench/flash_peers.py JSON lines into a ratio table
against the issue-4 targets: A, B >= 0.7x torch FA2 (varlen_attn / SDPA flash);
C >= 0.95x wick non-paged; D >= 2.5 TB/s (B = 64, 128) and >= 2.0 TB/s (B = 1)."""
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


def main():
    rec = {}
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
