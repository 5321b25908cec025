"""PyTorch peers of bench/bench_attention_bwd.cpp: the backward pass alone, same workloads,
same FLOP count (2.5 x the forward's), bf16. B: scaled_dot_product_attention with the flash
and cuDNN backends on (batch, heads, S, d) views of (batch, S, heads, d) tensors; A:
torch.nn.attention.varlen.varlen_attn. The forward runs once; the backward is timed with
CUDA events (retain_graph), median of many runs. One JSON line per (impl, config); --json
FILE writes them too."""
import argparse
import inspect
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

OUT = None


def emit(impl, name, ms, tflops):
    rec = {"impl": impl, "name": name, "ms": round(ms, 4), "tflops": round(tflops, 2)}
    print(json.dumps(rec), flush=True)
    if OUT:
        OUT.write(json.dumps(rec) + "\n")


def pairs(lens, causal):
    return sum(l * (l + 1) / 2 if causal else l * l for l in lens)


def backward_ms(out, grad, reps=20):
    for _ in range(3):
        out.backward(grad, retain_graph=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out.backward(grad, retain_graph=True)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def leaf(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16).requires_grad_(True)


def varlen_lengths():
    x, mask, v = 12345, (1 << 64) - 1, []
    for _ in range(32):
        x = (x * 6364136223846793005 + 1442695040888963407) & mask
        v.append(128 + (x >> 33) % (4096 - 128 + 1))
    return v


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", default="AB")
    args = ap.parse_args()
    OUT = open(args.json, "w") if args.json else None
    if "B" in args.only:
        for S in (1024, 4096, 16384):
            for d in (64, 128):
                h, B = 2048 // d, 16384 // S
                for causal in (False, True):
                    name = f"B_S{S}_d{d}" + ("_causal" if causal else "")
                    flop = 2.5 * 4.0 * d * h * pairs([S] * B, causal)
                    for impl, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION),
                                          ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
                        q, k, v = (leaf(B, S, h, d) for _ in range(3))
                        try:
                            with sdpa_kernel(backend):
                                out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                     v.transpose(1, 2), is_causal=causal)
                                ms = backward_ms(out, torch.randn_like(out))
                        except RuntimeError as e:
                            print(json.dumps({"impl": impl, "name": name, "error": str(e)[:100]}))
                            continue
                        emit(impl, name, ms, flop / ms / 1e9)
    if "A" in args.only:
        from torch.nn.attention.varlen import varlen_attn
        params = inspect.signature(varlen_attn).parameters
        lens = varlen_lengths()
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
        T, mx = int(cu[-1]), max(lens)
        for d, h in ((128, 16), (64, 32)):
            for causal in (False, True):
                kw = {"is_causal": causal} if "is_causal" in params else {"window_size": (-1, 0) if causal else (-1, -1)}
                q, k, v = leaf(T, h, d), leaf(T, h, d), leaf(T, h, d)
                out = varlen_attn(q, k, v, cu, cu, mx, mx, **kw)
                ms = backward_ms(out, torch.randn_like(out))
                tag = f"A_varlen_d{d}_h{h}" + ("_causal" if causal else "")
                emit("torch_varlen", tag, ms, 2.5 * 4.0 * d * h * pairs(lens, causal) / ms / 1e9)


if __name__ == "__main__":
    main()
