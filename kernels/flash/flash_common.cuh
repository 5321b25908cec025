// Device helpers shared by every flash-attention kernel: element types and conversions,
// and the attention contract (contract.h) brought into the kernels' namespace.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/flash/contract.h"
#include "kernels/flash/flash_mma.cuh"  // fast_exp2
#include "kernels/pdl.cuh"

namespace wick::kernels::flash {

constexpr float kLog2e = 1.4426950408889634f;  // exp(x) == exp2(x * kLog2e)
constexpr float kLn2 = 0.6931471805599453f;    // log(x) == log2(x) * kLn2

// Device element type of a FlashDType.
template <FlashDType> struct ElemOf;
template <> struct ElemOf<FlashDType::BF16> { using type = __nv_bfloat16; };
template <> struct ElemOf<FlashDType::F16> { using type = __half; };

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class Elem> __device__ __forceinline__ Elem from_float(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }

// The attention contract (sequence bounds, row offsets, visibility, the logit) is written
// once for host and device in contract.h; the kernels use it unqualified.
using namespace ::wick::kernels::attn;

// The general logit of the Hopper kernels (softcap, ALiBi, any softmax scale): the contract's
// logit (step 4) in log2 units, so the softmax that follows runs with scale 1:
//   x = softcap * tanh(scale * qk / softcap) - slope * |pos - t|   (times log2 e)
// in float arithmetic only. tanh(z) = 1 - 2 / (exp(2 z) + 1) from the fast exp2 and
// reciprocal: its absolute error is about 1e-7, so the logit's is about softcap * 1e-7 (the
// hardware's tanh approximation, 2^-11 relative, moved softcapped outputs past the tests'
// accuracy bound). The caller passes the key distance pos - t as a float (exact below 2^24),
// formed from one distance per row minus a constant per element, so no element needs an
// integer-to-float conversion (those issue at the rate of the exponentials). capped() and
// uncapped() are the two forms; callers pick one per tile (softcap > 0 or not).
struct GeneralLogit {
  float pre, post, nslope;
  bool has_cap;
  __device__ GeneralLogit(const FlashFwdParams& p, float slope)
      : pre(p.softcap > 0.f ? p.softmax_scale / p.softcap * (2.f * kLog2e) : p.softmax_scale * kLog2e),
        post(p.softcap * kLog2e),
        nslope(-slope * kLog2e),
        has_cap(p.softcap > 0.f) {}
  __device__ __forceinline__ float capped(float qk, float dist) const {
    return fmaf(nslope, fabsf(dist), post * (1.f - __fdividef(2.f, fast_exp2(qk * pre) + 1.f)));
  }
  __device__ __forceinline__ float uncapped(float qk, float dist) const { return fmaf(nslope, fabsf(dist), qk * pre); }
};

// Every attention kernel is launched programmatically (kernels/pdl.cuh): it may start while
// the kernel before it (the device checks, a K/V write, anything) finishes, so call_faulted,
// its first statement, waits for that kernel before any global memory access.
// True when the call's index values failed the device checks (FlashFwdParams::verdict).
__device__ __forceinline__ bool call_faulted(const FlashFwdParams& p) {
  wait_for_prior_grid();
  return p.verdict && *p.verdict != 0;
}

// The defined output of a faulted call: NaN in every out and lse element of the varlen
// outputs, spread over CTA `cta` of `ctas` by (row, head) pair. Reads no index value.
template <class Elem>
__device__ void write_fault_outputs(const FlashFwdParams& p, int64_t cta, int64_t ctas) {
  const int64_t pairs = p.total_q * p.num_heads;
  const Elem nan = from_float<Elem>(NAN);
  for (int64_t pr = cta * blockDim.x + threadIdx.x; pr < pairs; pr += ctas * blockDim.x) {
    const int64_t r = pr / p.num_heads;
    const int h = static_cast<int>(pr % p.num_heads);
    Elem* o = static_cast<Elem*>(p.out) + r * p.o_row_stride + h * p.o_head_stride;
    for (int c = 0; c < p.head_size; ++c) o[c] = nan;
    if (p.lse) p.lse[h * p.lse_head_stride + r] = NAN;
  }
}

}  // namespace wick::kernels::flash
