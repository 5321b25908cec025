"""PyTorch peers of bench/bench_attention_op.cpp, the same shapes timed the same way: wall
clock per call over back-to-back calls from Python with one synchronize at the end, median of
5 rounds, after half a second of calls (as there, so a power-bound GPU runs at its sustained
clock). Decode: one query per sequence, GQA 32/8, d128, through
torch.nn.functional.scaled_dot_product_attention with the cuDNN and flash backends on
contiguous K/V. Prefill A: torch.nn.attention.varlen.varlen_attn over the 32 sequences of
bench_util.h's varlen_lengths, d128 h16, causal. Prefill B: SDPA (cuDNN, flash) over 16k
tokens in sequences of 1k, 4k and 16k, d128 h16 and d256 h8, full and causal. Prints one
JSON line per (backend, case) and writes them to --json FILE."""
import argparse
import inspect
import json
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flash_peers import pairs, varlen_lengths

OUT = None
LONG_ITERS = 20  # bench_attention_op's kLongIters, for the prefill calls


def emit(rec):
    print(json.dumps(rec), flush=True)
    if OUT:
        OUT.write(json.dumps(rec) + "\n")


def us_per_call(fn, iters):
    t0 = time.perf_counter()
    while True:
        fn()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= 0.5:
            break
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) * 1e6 / iters)
    return sorted(rounds)[2]


def tflops(flops, us):
    return round(flops / (us * 1e-6) / 1e12, 3)


def decode(iters):
    h, hk, d = 32, 8, 128
    for B, ctx in [(1, 512), (1, 32768), (8, 4096), (64, 4096)]:
        q = torch.randn(B, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, hk, ctx, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, hk, ctx, d, device="cuda", dtype=torch.bfloat16)
        for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            try:
                with sdpa_kernel(backend):
                    us = us_per_call(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), iters)
            except RuntimeError as e:
                emit({"impl": f"torch_{name}", "name": f"op_decode_B{B}_ctx{ctx}", "error": str(e)[:120]})
                continue
            emit({"impl": f"torch_{name}", "name": f"op_decode_B{B}_ctx{ctx}", "us_per_call": round(us, 2),
                  "tbps": round(2.0 * B * ctx * hk * d * 2 / (us * 1e-6) / 1e12, 3)})


def prefill_varlen():
    from torch.nn.attention.varlen import varlen_attn
    h, d, lens = 16, 128, varlen_lengths()
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    T, mx = int(cu[-1]), max(lens)
    q, k, v = (torch.randn(T, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    params = inspect.signature(varlen_attn).parameters
    kw = {"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)}
    us = us_per_call(lambda: varlen_attn(q, k, v, cu, cu, mx, mx, **kw), LONG_ITERS)
    emit({"impl": "torch_varlen", "name": "op_prefill_A_varlen_d128_h16_causal", "us_per_call": round(us, 2),
          "tflops": tflops(4.0 * pairs(lens, True) * h * d, us)})


def prefill_batched():
    for d, S in ((d, S) for d in (128, 256) for S in (1024, 4096, 16384)):
        h, B = 2048 // d, 16384 // S
        q, k, v = (torch.randn(B, S, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
        for causal in (False, True):
            case = f"op_prefill_B_S{S}_d{d}" + ("_causal" if causal else "")
            for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
                try:
                    with sdpa_kernel(backend):
                        us = us_per_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                         LONG_ITERS)
                except RuntimeError as e:
                    emit({"impl": f"torch_{name}", "name": case, "error": str(e)[:120]})
                    continue
                emit({"impl": f"torch_{name}", "name": case, "us_per_call": round(us, 2),
                      "tflops": tflops(4.0 * pairs([S] * B, causal) * h * d, us)})
        del q, k, v
        torch.cuda.empty_cache()


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--only", default="decode,prefill", help="comma-separated: decode, prefill")
    args = ap.parse_args()
    OUT = open(args.json, "w") if args.json else None
    only = args.only.split(",")
    if "decode" in only:
        decode(args.iters)
    if "prefill" in only:
        prefill_varlen()
        prefill_batched()


if __name__ == "__main__":
    main()
