"""PyTorch peers of bench/bench_attention_op.cpp: the same decode shapes (one query per
sequence, GQA 32/8, d128) through torch.nn.functional.scaled_dot_product_attention with the
cuDNN and flash backends on contiguous K/V, timed the same way: wall clock per call over
back-to-back calls from Python with one synchronize at the end, median of 5 rounds.
Prints one JSON line per (backend, shape) and writes them to --json FILE."""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def us_per_call(fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) * 1e6 / iters)
    return sorted(rounds)[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    out = open(args.json, "w") if args.json else None
    h, hk, d = 32, 8, 128
    for B, ctx in [(1, 512), (1, 32768), (8, 4096), (64, 4096)]:
        q = torch.randn(B, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, hk, ctx, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, hk, ctx, d, device="cuda", dtype=torch.bfloat16)
        for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            try:
                with sdpa_kernel(backend):
                    us = us_per_call(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), args.iters)
            except RuntimeError as e:
                print(json.dumps({"impl": name, "B": B, "ctx": ctx, "error": str(e)[:120]}))
                continue
            rec = {"impl": f"torch_{name}", "name": f"op_decode_B{B}_ctx{ctx}", "us_per_call": round(us, 2),
                   "tbps": round(2.0 * B * ctx * hk * d * 2 / (us * 1e-6) / 1e12, 3)}
            print(json.dumps(rec), flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
