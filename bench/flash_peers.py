"""PyTorch peers of bench/flash_bench.cu, same workloads, same GPU, bf16.

A: torch.nn.attention.varlen.varlen_attn; B: scaled_dot_product_attention with the flash and
cuDNN backends (E: the same at head sizes 96 and 192, only when named); D: SDPA cuDNN on
contiguous K/V (enable_gqa; H: the same at head sizes 192 and 256 and with 8 or 4 queries per
sequence, only when named); G: softcap and ALiBi through FlexAttention, compiled (only when
named). Times are CUDA-event medians after warm-up; every input set is larger than 3x the L2
cache. Prints one JSON line per config (and writes them to --json FILE)."""
import argparse
import inspect
import json
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DEV = "cuda"
DT = torch.bfloat16
OUT = None


def varlen_lengths():
    """Workload A's lengths: the 64-bit LCG of flash_bench.cu."""
    x, mask, v = 12345, (1 << 64) - 1, []
    for _ in range(32):
        x = (x * 6364136223846793005 + 1442695040888963407) & mask
        v.append(128 + (x >> 33) % (4096 - 128 + 1))
    return v


def time_median(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    first = a.elapsed_time(b)
    runs = max(15, min(200, int(400.0 / max(first, 0.01))))
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in ev)
    return ms[runs // 2]


def emit(impl, name, ms, unit, value, note=""):
    rec = {"impl": impl, "name": name, "ms": round(ms, 5), unit: round(value, 2)}
    if note:
        rec["note"] = note
    line = json.dumps(rec)
    print(line, flush=True)
    if OUT:
        OUT.write(line + "\n")


def rand(*shape):
    return torch.empty(*shape, device=DEV, dtype=DT).uniform_(-1, 1)


def pairs(lens, causal):
    return sum(0.5 * L * (L + 1) if causal else float(L) * L for L in lens)


def run_a():
    from torch.nn.attention.varlen import varlen_attn
    params = inspect.signature(varlen_attn).parameters
    lens = varlen_lengths()
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device=DEV, dtype=torch.int32)
    T, mx = int(cu[-1]), max(lens)
    for d, h in ((128, 16), (64, 32)):
        q, k, v = rand(T, h, d), rand(T, h, d), rand(T, h, d)
        for causal in (False, True):
            kw = {"is_causal": causal} if "is_causal" in params else {"window_size": (-1, 0) if causal else (-1, -1)}
            ms = time_median(lambda: varlen_attn(q, k, v, cu, cu, mx, mx, **kw))
            tag = f"d{d}_h{h}" + ("_causal" if causal else "")
            emit("torch_varlen", "A_varlen_" + tag, ms, "tflops", 4.0 * d * h * pairs(lens, causal) / ms / 1e9)


def run_b(group="B", sizes=(1024, 4096, 16384), dims=(64, 128, 256), heads=None):
    for S in sizes:
        for d in dims:
            h, B = heads or 2048 // d, 16384 // S
            q, k, v = (rand(B, S, h, d).transpose(1, 2) for _ in range(3))
            for causal in (False, True):
                name = f"{group}_S{S}_d{d}" + ("_causal" if causal else "")
                flops = 4.0 * d * h * pairs([S] * B, causal)
                for impl, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION),
                                      ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            ms = time_median(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        emit(impl, name, ms, "tflops", flops / ms / 1e9)
                    except Exception as e:  # a backend that rejects the shape
                        emit(impl, name, float("nan"), "tflops", float("nan"), note=str(e)[:120])


def run_g():
    """G: softcap and ALiBi through FlexAttention (compiled; SDPA's backends have neither)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention, dynamic=False)
    S, B = 4096, 4
    for tag, softcap, alibi in (("softcap30", 30.0, False), ("alibi", 0.0, True)):
        for d in (128, 256):
            h = 2048 // d
            q, k, v = (rand(B, S, h, d).transpose(1, 2) for _ in range(3))
            slopes = torch.exp2(-8.0 * torch.arange(1, h + 1, device=DEV) / h)
            if alibi:
                def mod(score, b, hh, qi, ki):
                    return score - slopes[hh] * (qi - ki).abs()
            else:
                def mod(score, b, hh, qi, ki):
                    return softcap * torch.tanh(score / softcap)
            for causal in (False, True):
                name = f"G_S{S}_d{d}_{tag}" + ("_causal" if causal else "")
                flops = 4.0 * d * h * pairs([S] * B, causal)
                try:
                    mask = create_block_mask(lambda b, hh, qi, ki: qi >= ki, None, None, S, S) if causal else None
                    ms = time_median(lambda: flex(q, k, v, score_mod=mod, block_mask=mask))
                    emit("torch_flex", name, ms, "tflops", flops / ms / 1e9)
                except Exception as e:  # no compiler on the machine, or a shape it rejects
                    emit("torch_flex", name, float("nan"), "tflops", float("nan"), note=str(e)[:120])
            del q, k, v
            torch.cuda.empty_cache()


def run_d(group="D", shapes=((64, 4096), (64, 16384), (128, 8192), (1, 32768)), dims=(128,), sq=1):
    """sq > 1: that many queries per sequence, no mask (flash_bench's are causal, bottom-right:
    each of the sq queries misses at most sq - 1 of the keys)."""
    h, hk = 32, 8
    for d, (B, ctx) in ((d, s) for d in dims for s in shapes):
        q = rand(B, h, sq, d)
        k, v = rand(B, hk, ctx, d), rand(B, hk, ctx, d)
        nbytes = 2.0 * B * hk * ctx * d * 2
        name = f"{group}_decode_B{B}_ctx{ctx}" + (f"_d{d}" if d != 128 else "") + (f"_sq{sq}" if sq > 1 else "")
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ms = time_median(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
            emit("torch_cudnn", name, ms, "gbps", nbytes / ms / 1e6)
        except Exception as e:
            # cuDNN without GQA support: heads expanded to 32 (4x the bytes read); bandwidth
            # is still reported against the GQA byte count so it compares with wick's.
            ke, ve = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
            try:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    ms = time_median(lambda: F.scaled_dot_product_attention(q, ke, ve))
                emit("torch_cudnn", name, ms, "gbps", nbytes / ms / 1e6, note="expanded kv: " + str(e)[:80])
            except Exception as e2:
                emit("torch_cudnn", name, float("nan"), "gbps", float("nan"), note=str(e2)[:120])
            del ke, ve
        del q, k, v
        torch.cuda.empty_cache()


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", default="ABD")
    args = ap.parse_args()
    OUT = open(args.json, "w") if args.json else None
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    if "A" in args.only:
        run_a()
    if "B" in args.only:
        run_b()
    if "D" in args.only:
        run_d()
    if "E" in args.only:  # the other head sizes: 16 heads of 96 or 192 channels
        run_b("E", (1024, 4096, 16384), (96, 192), 16)
    if "G" in args.only:  # softcap and ALiBi (FlexAttention)
        run_g()
    if "H" in args.only:  # D at head sizes 192 and 256, and with 8 and 4 queries per sequence
        run_d("H", ((64, 4096), (1, 32768)), (192, 256))
        for sq in (8, 4):
            run_d("H", ((64, 4096), (1, 32768)), (128,), sq)


if __name__ == "__main__":
    main()
