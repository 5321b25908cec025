// The CUDA flash-attention backward: FlashAttention-2's backward in f32 on the device,
// recomputing P from the forward's LSE. The same math, step for step, as the host
// reference ops/attention/backward.cpp (flash_bwd_host):
//   P  = exp(logit - lse)  (0 where masked, 0 for a row with lse = -inf)
//   dV = P^T dO                   dP = dO V^T
//   D  = rowsum(dO * O)           dS = P * (dP - D) * (1 - tanh^2(s / softcap) with softcap)
//   dQ = scale * dS K             dK = scale * dS^T Q
// Logits and visibility come from the attention contract (kernels/flash/contract.h), like
// the forward kernels, so the backward sees exactly the forward's mask and logit.
//
// Steps (index maps in flash_bwd_params.h):
//   1. dsum kernel: one warp per (query row i, head h, sequence b): D = sum_d dO * O.
//   2. key-tile kernel: one block per (key tile of bc keys, kv head hk, sequence b).
//      a. the tile's K and V rows go to shared memory as f32 (row pitch head_size + 1,
//         so lane j reading row j at the same d hits a different bank)
//      b. every query row that can see the tile, for every query head of hk's group, is
//         handed to one warp; lane j scores key t0 + j: qk, P_j, dP_j, dS_j
//      c. lane j adds P_j dO and scale dS_j q into row j of the tile's dV and dK (shared
//         memory atomics: the block's warps share the tile); the warp then adds
//         scale * sum_j dS_j K_j into the row's dQ (global f32 atomics: other tiles too)
//      d. the tile's dK, dV are added into the f32 accumulators (atomics, so blocks of a
//         paged cache shared by two sequences still sum)
//      Rows that cannot see the tile are skipped by the window bounds; with mm-prefix
//      ranges every row is visited and the per-key rule decides.
//   3. cast kernel: f32 accumulators to the output dtype, every element (unused rows 0).
// The tensor-core kernels (flash_bwd_mma.cuh) replace step 2 for head sizes up to 256: by
// default one fused kernel that adds dQ with atomics; with `deterministic`, that kernel
// without dQ and a second one for dQ, each owning its outputs. Unless paged, dK and dV are
// stored in the output dtype directly. On an sm_90 GPU the fused form's calls up to head
// size 128 without ALiBi, softcap or mm-prefix ranges go to the warpgroup-MMA kernel
// (flash_bwd_sm90.cu); WICK_FLASH_SM90=0 keeps them on these.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_fwd_sm90.h"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash_bwd/flash_bwd.h"
#include "kernels/flash_bwd/flash_bwd_mma.h"
#include "kernels/flash_bwd/flash_bwd_sm90.h"
#include "tensor/cuda_check.h"
#include "tensor/error.h"

namespace wick::kernels {
namespace flash_bwd_detail {
namespace {

using namespace wick::kernels::flash;

constexpr int kWarps = 4;  // warps per block in steps 1 and 2

// 1. D = rowsum(dO * O) per (row, head).
template <class Elem>
__global__ void __launch_bounds__(kWarps * 32) dsum_kernel(const FlashBwdParams bp) {
  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;  // the cast kernel writes NaN gradients
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int i = blockIdx.x * kWarps + warp;
  const SeqBounds s = seq_bounds(p, b);
  if (i >= s.sq) return;
  const Elem* o = static_cast<const Elem*>(p.out) + o_offset(p, b, s, i, h);
  const Elem* g = static_cast<const Elem*>(bp.dout) + do_offset(bp, b, s, i, h);
  float acc = 0.f;
  for (int d = lane; d < p.head_size; d += 32) acc += to_float(o[d]) * to_float(g[d]);
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) bp.dsum[dsum_index(p, s.q_row0 + i, h)] = acc;
}

// The same with 16-byte loads, when the head size is a multiple of 8 and the rows of out and
// dO are 16-byte aligned: G lanes per row (G >= head_size / 8, a power of two up to 32, then
// each lane takes several 8-channel chunks), 32 / G rows per warp, so a warp's loads are
// whole rows and more rows are in flight per SM.
template <class Elem, int G>
__global__ void __launch_bounds__(kWarps * 32) dsum_kernel_vec(const FlashBwdParams bp) {
  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;  // the cast kernel writes NaN gradients
  constexpr int kRowsPerWarp = 32 / G;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, c = lane % G;
  const int h = blockIdx.y, b = blockIdx.z;
  const int i = (blockIdx.x * kWarps + warp) * kRowsPerWarp + lane / G;
  const SeqBounds s = seq_bounds(p, b);
  float acc = 0.f;
  if (i < s.sq) {
    const Elem* o = static_cast<const Elem*>(p.out) + o_offset(p, b, s, i, h);
    const Elem* g = static_cast<const Elem*>(bp.dout) + do_offset(bp, b, s, i, h);
    for (int d = 8 * c; d < p.head_size; d += 8 * G) {
      const uint4 x = *reinterpret_cast<const uint4*>(o + d), y = *reinterpret_cast<const uint4*>(g + d);
      const Elem* xe = reinterpret_cast<const Elem*>(&x);
      const Elem* ye = reinterpret_cast<const Elem*>(&y);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc += to_float(xe[e]) * to_float(ye[e]);
    }
  }
#pragma unroll
  for (int off = G / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (c == 0 && i < s.sq) bp.dsum[dsum_index(p, s.q_row0 + i, h)] = acc;
}

template <class Elem, int G>
void launch_dsum_vec(const FlashBwdParams& bp, int max_sq, cudaStream_t st) {
  constexpr int kRowsPerBlock = kWarps * (32 / G);
  const dim3 grid((max_sq + kRowsPerBlock - 1) / kRowsPerBlock, bp.fwd.num_heads, bp.fwd.batch);
  dsum_kernel_vec<Elem, G><<<grid, kWarps * 32, 0, st>>>(bp);
  WICK_CUDA_CHECK(cudaGetLastError());
}

// 2. dK, dV of one key tile (all of it: every query head of the group), dQ by atomics.
template <class Elem>
__global__ void __launch_bounds__(kWarps * 32) tile_kernel(const FlashBwdParams bp, int bc) {
  extern __shared__ float smem[];
  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;  // the cast kernel writes NaN gradients
  const int D = p.head_size, ld = D + 1;
  float* sK = smem;
  float* sV = sK + bc * ld;
  float* sdK = sV + bc * ld;
  float* sdV = sdK + bc * ld;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* sQ = sdV + bc * ld + warp * (2 * D + 32);  // this warp's query row
  float* sdO = sQ + D;                             // this warp's dO row
  float* sdS = sdO + D;                            // this warp's dS_j, j < 32

  const int hk = blockIdx.y, b = blockIdx.z, t0 = blockIdx.x * bc;
  const SeqBounds s = seq_bounds(p, b);
  if (t0 >= s.sk || s.sq == 0) return;  // the whole block leaves together
  const int nk = min(bc, s.sk - t0);

  // a. the tile
  const Elem* kbase = static_cast<const Elem*>(p.k);
  const Elem* vbase = static_cast<const Elem*>(p.v);
  for (int e = threadIdx.x; e < bc * D; e += blockDim.x) {
    const int j = e / D, d = e % D;
    float kf = 0.f, vf = 0.f;
    if (j < nk) {
      kf = to_float(kbase[k_offset(p, b, s, t0 + j, hk) + d]);
      vf = to_float(vbase[v_offset(p, b, s, t0 + j, hk) + d]);
    }
    sK[j * ld + d] = kf, sV[j * ld + d] = vf;
    sdK[j * ld + d] = 0.f, sdV[j * ld + d] = 0.f;
  }
  __syncthreads();

  // The query rows whose window reaches a key of [t0, t0 + nk) (contract: window_rows);
  // with mm-prefix ranges every row is visited and the per-key rule decides.
  const int shift = static_cast<int>(key_position(s, 0));  // pos(i) = i + shift
  int lo = 0, hi = s.sq;                                    // [lo, hi) in query rows
  if (!mm_ranges_of(p, b)) {
    const Range<int> pos = window_rows<int>(p, t0, t0 + nk - 1, shift, shift + s.sq);
    lo = pos.begin - shift, hi = pos.end - shift;
  }
  const int nrows = hi > lo ? hi - lo : 0;
  const int group = group_size(p);
  const float scale = p.softmax_scale;

  for (int w = warp; w < group * nrows; w += kWarps) {
    const int h = hk * group + w / nrows, i = static_cast<int>(lo) + w % nrows;
    const float lse = p.lse[lse_offset(p, b, s, i, h)];
    if (lse == -INFINITY) continue;  // the row sees no key: P = 0 (uniform across the warp)
    const Elem* q = static_cast<const Elem*>(p.q) + q_offset(p, b, s, i, h);
    const Elem* g = static_cast<const Elem*>(bp.dout) + do_offset(bp, b, s, i, h);
    for (int d = lane; d < D; d += 32) sQ[d] = to_float(q[d]), sdO[d] = to_float(g[d]);
    __syncwarp();

    // b. lane j: key t0 + j
    const int pos = i + shift, t = t0 + lane;
    const float slope = alibi_slope(p, h);
    float pj = 0.f, dsj = 0.f;
    if (lane < nk && key_visible<int>(p, b, pos, t, s.sk)) {
      float qk = 0.f, dp = 0.f;
      const float* kr = sK + lane * ld;
      const float* vr = sV + lane * ld;
      for (int d = 0; d < D; ++d) qk += sQ[d] * kr[d], dp += sdO[d] * vr[d];
      pj = expf(logit(qk, scale, p.softcap, slope, pos, t) - lse);
      dsj = pj * (dp - bp.dsum[dsum_index(p, s.q_row0 + i, h)]);
      if (p.softcap > 0.f) {
        const float th = tanhf(qk * scale / p.softcap);
        dsj *= 1.f - th * th;
      }
    }
    sdS[lane] = dsj;
    const bool mine = pj != 0.f || dsj != 0.f;
    if (__ballot_sync(0xffffffffu, mine) != 0u) {
      // c. dV_j += P_j dO, dK_j += scale dS_j q; then dQ_i += scale sum_j dS_j K_j
      if (mine) {
        float* dkr = sdK + lane * ld;
        float* dvr = sdV + lane * ld;
        const float cs = scale * dsj;
        for (int d = 0; d < D; ++d) atomicAdd(dvr + d, pj * sdO[d]), atomicAdd(dkr + d, cs * sQ[d]);
      }
      __syncwarp();
      float* dq = bp.dq_accum + ((s.q_row0 + i) * p.num_heads + h) * D;
      for (int d = lane; d < D; d += 32) {
        float acc = 0.f;
        for (int j = 0; j < nk; ++j) acc += sdS[j] * sK[j * ld + d];
        atomicAdd(dq + d, scale * acc);
      }
    }
    __syncwarp();  // the next row overwrites sQ, sdO, sdS
  }
  __syncthreads();

  // d. into the accumulators
  for (int e = threadIdx.x; e < nk * D; e += blockDim.x) {
    const int j = e / D, d = e % D;
    const int64_t at = (kv_row(p, b, s, t0 + j) * p.num_heads_k + hk) * D + d;
    atomicAdd(bp.dk_accum + at, sdK[j * ld + d]);
    atomicAdd(bp.dv_accum + at, sdV[j * ld + d]);
  }
}

// 3. f32 -> output dtype; NaN everywhere for a call whose forward failed the device checks.
// kVec: src 16-byte and dst 8-byte aligned, four elements per load and store (the last
// n % 4 one by one).
template <class Elem, bool kVec>
__global__ void cast_kernel(const float* src, Elem* dst, int64_t n, const uint32_t* verdict) {
  const bool faulted = verdict && *verdict != 0;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if constexpr (kVec) {
    done = n / 4 * 4;
    for (int64_t e = first; e < n / 4; e += stride) {
      const float4 x = faulted ? make_float4(NAN, NAN, NAN, NAN) : reinterpret_cast<const float4*>(src)[e];
      reinterpret_cast<uint2*>(dst)[e] = make_uint2(pack2<Elem>(x.x, x.y), pack2<Elem>(x.z, x.w));
    }
  }
  for (int64_t e = done + first; e < n; e += stride) dst[e] = from_float<Elem>(faulted ? NAN : src[e]);
}

template <class Elem>
void cast(const float* src, void* dst, int64_t n, const uint32_t* verdict, cudaStream_t st) {
  if (n <= 0) return;
  const bool vec = reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0;
  const int64_t per_thread = vec ? 4 : 1;
  const int64_t blocks = std::min<int64_t>((n / per_thread + 255) / 256 + 1, 65535);
  if (vec)
    cast_kernel<Elem, true><<<static_cast<unsigned>(blocks), 256, 0, st>>>(src, static_cast<Elem*>(dst), n, verdict);
  else
    cast_kernel<Elem, false><<<static_cast<unsigned>(blocks), 256, 0, st>>>(src, static_cast<Elem*>(dst), n, verdict);
  WICK_CUDA_CHECK(cudaGetLastError());
}

// NaN into dst when the call faulted (its kernels returned at once); otherwise nothing.
template <class Elem>
__global__ void poison_kernel(Elem* dst, int64_t n, const uint32_t* verdict) {
  if (*verdict == 0) return;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[e] = from_float<Elem>(NAN);
}

template <class Elem>
void poison(void* dst, int64_t n, const uint32_t* verdict, cudaStream_t st) {
  if (n <= 0 || !verdict) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
  poison_kernel<Elem><<<static_cast<unsigned>(blocks), 256, 0, st>>>(static_cast<Elem*>(dst), n, verdict);
  WICK_CUDA_CHECK(cudaGetLastError());
}

// Keys per tile: 32 (one per lane) while the four f32 tiles fit in about 100 KiB of
// shared memory, else fewer so head sizes up to 512 still fit.
int tile_keys(int head_size) {
  const int per_key = 4 * (head_size + 1) * static_cast<int>(sizeof(float));
  for (int bc : {32, 16, 8})
    if (bc * per_key <= 100 * 1024) return bc;
  return 8;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }
bool strides8(int64_t a, int64_t b, int64_t c) { return a % 8 == 0 && b % 8 == 0 && c % 8 == 0; }

// Can the tensor-core kernels read every row of q, k, v and dO with 16-byte copies?
bool tensor_core_friendly(const FlashBwdParams& bp) {
  const FlashFwdParams& p = bp.fwd;
  return !bp.scalar && p.head_size <= 256 && p.head_size % 8 == 0 && aligned16(p.q) && aligned16(p.k) &&
         aligned16(p.v) && aligned16(bp.dout) && strides8(p.q_batch_stride, p.q_row_stride, p.q_head_stride) &&
         strides8(p.k_batch_stride, p.k_row_stride, p.k_head_stride) &&
         strides8(p.v_batch_stride, p.v_row_stride, p.v_head_stride) &&
         strides8(bp.do_batch_stride, bp.do_row_stride, bp.do_head_stride);
}

// The tensor-core path: on an sm_90 GPU the Hopper kernel where it covers the call, else
// the fused form, or the deterministic one.
template <int kD, class Elem>
void launch_tensor_cores(const FlashBwdParams& bp, cudaStream_t st) {
#if WICK_FLASH_SM90
  if (flash_bwd_sm90::covers(bp) && flash::sm90::available()) {
    flash_bwd_sm90::launch(bp, st);
    return;
  }
#endif
  if (bp.deterministic)
    flash_bwd_mma::launch<kD, Elem>(bp, st);
  else
    flash_bwd_mma::launch_fused<kD, Elem>(bp, st);
}

template <class Elem>
void run(const FlashBwdParams& bp_in, cudaStream_t st) {
  FlashBwdParams bp = bp_in;
  const FlashFwdParams& p = bp.fwd;
  const int64_t nq = p.total_q * p.num_heads * p.head_size;
  const int64_t nk = bp.kv_rows * p.num_heads_k * p.head_size;
  const bool tensor_cores = tensor_core_friendly(bp);
  bp.kv_direct = !flash_bwd_accumulates_kv(bp);
  WICK_CUDA_CHECK(cudaMemsetAsync(bp.dq_accum, 0, nq * sizeof(float), st));
  // A fixed-length call with queries writes every row of dK and dV (each key tile's CTA
  // stores all its rows, seen or not); varlen rows past the last sequence, or a call without
  // queries, must read 0.
  const bool every_kv_row = !p.cu_seqlens_q && !p.cu_seqlens_k && p.seqlen_q > 0 && p.num_heads > 0;
  if (bp.kv_direct && !every_kv_row) {
    WICK_CUDA_CHECK(cudaMemsetAsync(bp.dk, 0, nk * sizeof(Elem), st));
    WICK_CUDA_CHECK(cudaMemsetAsync(bp.dv, 0, nk * sizeof(Elem), st));
  } else if (!bp.kv_direct) {
    WICK_CUDA_CHECK(cudaMemsetAsync(bp.dk_accum, 0, nk * sizeof(float), st));
    WICK_CUDA_CHECK(cudaMemsetAsync(bp.dv_accum, 0, nk * sizeof(float), st));
  }
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  if (p.batch > 0 && p.num_heads > 0 && max_sq > 0 && max_sk > 0) {
    const bool vec_rows = p.head_size % 8 == 0 && aligned16(p.out) && aligned16(bp.dout) &&
                          strides8(p.o_batch_stride, p.o_row_stride, p.o_head_stride) &&
                          strides8(bp.do_batch_stride, bp.do_row_stride, bp.do_head_stride);
    const int chunks = p.head_size / 8;  // 16-byte chunks per row
    if (vec_rows && chunks <= 2)
      launch_dsum_vec<Elem, 2>(bp, max_sq, st);
    else if (vec_rows && chunks <= 4)
      launch_dsum_vec<Elem, 4>(bp, max_sq, st);
    else if (vec_rows && chunks <= 8)
      launch_dsum_vec<Elem, 8>(bp, max_sq, st);
    else if (vec_rows && chunks <= 16)
      launch_dsum_vec<Elem, 16>(bp, max_sq, st);
    else if (vec_rows)
      launch_dsum_vec<Elem, 32>(bp, max_sq, st);
    else {
      const dim3 g1((max_sq + kWarps - 1) / kWarps, p.num_heads, p.batch);
      dsum_kernel<Elem><<<g1, kWarps * 32, 0, st>>>(bp);
      WICK_CUDA_CHECK(cudaGetLastError());
    }
    if (tensor_cores) {
      if (p.head_size <= 64)
        launch_tensor_cores<64, Elem>(bp, st);
      else if (p.head_size <= 128)
        launch_tensor_cores<128, Elem>(bp, st);
      else
        launch_tensor_cores<256, Elem>(bp, st);
    } else {
      const int bc = tile_keys(p.head_size);
      const size_t smem = (4 * static_cast<size_t>(bc) * (p.head_size + 1) + kWarps * (2 * p.head_size + 32)) *
                          sizeof(float);
      WICK_CUDA_CHECK(cudaFuncSetAttribute(tile_kernel<Elem>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
      const dim3 g2((max_sk + bc - 1) / bc, p.num_heads_k, p.batch);
      tile_kernel<Elem><<<g2, kWarps * 32, smem, st>>>(bp, bc);
      WICK_CUDA_CHECK(cudaGetLastError());
    }
  }
  cast<Elem>(bp.dq_accum, bp.dq, nq, p.verdict, st);
  if (bp.kv_direct) {
    poison<Elem>(bp.dk, nk, p.verdict, st);
    poison<Elem>(bp.dv, nk, p.verdict, st);
  } else {
    cast<Elem>(bp.dk_accum, bp.dk, nk, p.verdict, st);
    cast<Elem>(bp.dv_accum, bp.dv, nk, p.verdict, st);
  }
}

}  // namespace
}  // namespace flash_bwd_detail

// The key-tile kernel owns each (key row, kv head) of dK and dV unless the cache is paged
// (two sequences may share a block), so it stores them in the output dtype directly.
bool flash_bwd_accumulates_kv(const FlashBwdParams& bp) {
  return !flash_bwd_detail::tensor_core_friendly(bp) || bp.fwd.block_table;
}

void flash_bwd(const FlashBwdParams& bp, void* stream) {
  const FlashFwdParams& p = bp.fwd;
  if (p.head_size <= 0 || p.head_size > 512)
    throw Error("C17", "flash_bwd: head_size " + std::to_string(p.head_size) + " is outside [1, 512]");
  if (p.num_heads_k <= 0 || p.num_heads % p.num_heads_k != 0)
    throw Error("C18", "flash_bwd: num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_heads_k " +
                std::to_string(p.num_heads_k));
  if (!p.lse || !p.out || !bp.dout)
    throw Error("C19", "flash_bwd: the forward's out and lse and the gradient of out are required");
  if (!bp.dsum || !bp.dq_accum || (flash_bwd_accumulates_kv(bp) && (!bp.dk_accum || !bp.dv_accum)))
    throw Error("C20", std::string("flash_bwd: the f32 scratch buffers dsum, dq_accum") +
                           (flash_bwd_accumulates_kv(bp) ? ", dk_accum and dv_accum" : "") + " are required");
  auto st = static_cast<cudaStream_t>(stream);
  if (p.dtype == FlashDType::BF16)
    flash_bwd_detail::run<__nv_bfloat16>(bp, st);
  else
    flash_bwd_detail::run<__half>(bp, st);
}

}  // namespace wick::kernels
