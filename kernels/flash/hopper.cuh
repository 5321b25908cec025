// Hopper (sm_90a) building blocks for the warpgroup kernels, one PTX instruction or idiom
// each, with the ordering rule it needs. Compiled only for sm_90a (the arch-specific target
// that has wgmma); the sm_80 kernels use flash_mma.cuh.
//
// Warpgroup MMA (wgmma.mma_async): four consecutive warps (a warpgroup, 128 threads) issue
// one asynchronous D (64 x N, f32) += A (64 x 16) * B (16 x N) on the tensor cores. B, and A
// unless it comes from registers, are read from shared memory through 64-bit descriptors.
// Register layouts, with warp w of the warpgroup, g = lane / 4, t = lane % 4 (PTX ISA,
// "wgmma register fragments"); they are the m16n8k16 layouts of flash_mma.cuh, warp w
// holding rows 16w .. 16w + 15:
//   D (64 x N, f32):  d[4j + 2i + c] = D[16w + g + 8i][8j + 2t + c]        (i, c in {0, 1})
//   A (64 x 16):      a[0] = A[16w+g][2t..2t+1]   a[1] = A[16w+g+8][2t..]
//                     a[2] = A[16w+g][2t+8..]     a[3] = A[16w+g+8][2t+8..]
// Ordering: wgmma_fence() before the first wgmma of a batch, after every ordinary access
// to the registers the batch uses (A, and D); wgmma_commit() closes the batch;
// wgmma_wait<n>() returns when at most n batches are still running, and only then may D be
// read or A, D and the shared-memory operands be changed; fence_operands() after the wait
// keeps the compiler from moving accesses of D above it. Shared memory written by ordinary
// stores or cp.async must be made visible to the tensor cores' (async) proxy with
// fence_proxy_async() by the writing threads, before the barrier that publishes it.
//
// Shared-memory tiles use the 128-byte swizzle: a panel holds 64 16-bit elements per row
// (128 bytes), rows back to back; 16-byte chunk c of row r sits at chunk c ^ (r % 8). Panels
// start at 1024-byte boundaries (the swizzle's period). A tile wider than 64 elements is
// several panels, one after the other.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace wick::kernels::flash::sm90 {

// Byte offset of element (row, col) in a swizzled tile of `rows` rows (col < 64 * panels).
__host__ __device__ constexpr uint32_t swizzled_offset(int rows, int row, int col) {
  return static_cast<uint32_t>((col / 64) * rows * 128 + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

// Descriptor of a swizzled operand at shared address `addr` (PTX ISA, "matrix descriptor"):
// bits 0-13 addr / 16, 16-29 leading byte offset / 16, 32-45 stride byte offset / 16,
// 62-63 swizzle mode (1 = 128 bytes).
//   K-major (the 16 reduction elements contiguous in a row: Q and K for S = Q K^T): rows are
//   M or N; stride = 1024 (8 rows of 128 bytes); the leading offset is unused (1). Step k16
//   of a panel starts 32 bytes further.
//   MN-major (N contiguous: V for O = P V, read transposed): rows are the reduction dim;
//   leading = the distance between 64-wide panels along N; stride = 1024 (8 rows). Step
//   k16 starts 16 rows (2048 bytes) further.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((leading & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((stride & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// The descriptor of the operand `bytes` further on (a multiple of 16): the address field is
// the low 14 bits of the descriptor and shared-memory addresses stay below 2^18, so adding to
// the descriptor never carries out of that field. One add per product instead of rebuilding
// the descriptor.
__device__ __forceinline__ uint64_t desc_step(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// The same for A fragments held in registers.
template <int M, int N>
__device__ __forceinline__ void fence_operands(uint32_t (&a)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}
// Orders this thread's earlier generic-proxy writes to shared memory (stores, cp.async
// after its wait) before later async-proxy reads (wgmma operands).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Zeroes 16 bytes of shared memory at `addr`.
__device__ __forceinline__ void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0) : "memory");
}

// Memory barriers in shared memory (mbarrier): a 64-bit object that counts arrivals, and
// bytes of asynchronous copies, for one phase at a time. A phase completes when `count`
// threads have arrived and every byte announced with arrive_expect_tx has landed; the
// barrier then starts the next phase (phases alternate parity 0, 1, 0, ...). Ordering: a
// thread that waits for a phase sees every write made before the arrivals of that phase,
// and the bytes the tensor memory accelerator wrote for it.
// Initialises the barrier at shared address `bar` for `count` arrivals per phase. One
// thread initialises; fence_barrier_init() and a block barrier publish it before use.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised barriers visible to the asynchronous proxy (the copy engine).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival on the current phase.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` more bytes to land in the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Tensor memory accelerator: one thread asks the copy engine to move a box of a tensor
// (described by a CUtensorMap made on the host, passed as a __grid_constant__ kernel
// parameter) from global to shared memory at `dst`, at element coordinates c0..c3
// (innermost first); coordinates past the tensor's extent read as zeros. The copy writes in
// the map's swizzle and completes on barrier `bar` (count its bytes with
// mbar_arrive_expect_tx); threads that wait for that phase may then read `dst`, also through
// wgmma, with no further fence.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// tma_load_4d for a 5-d map (coordinates c0..c4, innermost first; make_kv_maps' description
// of all 64-channel panels of a K/V tile as one box); the same ordering rule.
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], "
      "[%7];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}

// An L2 cache policy for data read once: its lines are the first the L2 evicts, so a stream
// of them does not push out what other loads reuse. Pass it to the tma_load_4d below.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// tma_load_4d with an L2 cache policy (l2_evict_first_policy) for the lines it brings in;
// the same ordering rule.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "l"(policy)
      : "memory");
}

// Thread block clusters: CTAs launched as one cluster (launch_programmatic_clusters,
// kernels/pdl.cuh) run at the same time on one GPU processing cluster and may read each
// other's shared memory. cluster_rank() is this CTA's index in its cluster; peer_smem(addr,
// rank) is the address of the same shared-memory byte in CTA `rank`, for the ld_peer_*
// loads. cluster_sync() waits until every thread of every CTA of the cluster has arrived;
// ordering: shared-memory writes made before it (release) are visible to peer reads after
// it (acquire). A CTA must not exit while a peer may still read its shared memory: a last
// barrier after the peer reads (cluster_sync_relaxed() suffices) keeps it there. Every non-exited thread of the
// cluster takes part in each cluster_sync().
__device__ __forceinline__ int cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return static_cast<int>(r);
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// cluster_sync without the ordering of memory (no wait for this thread's global stores to
// complete): for the last barrier of a kernel, which only keeps the cluster's CTAs resident
// until every thread has arrived (a thread's earlier peer loads have returned by then: their
// values were used before the arrival).
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t peer_smem(uint32_t addr, int rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
__device__ __forceinline__ float ld_peer_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_peer_f32x4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
// Issues the fetch of a tensor map (a __grid_constant__ kernel parameter) into the copy
// engine's descriptor cache, so the first copy through it does not wait for it. Reads no
// global memory a prior kernel writes: may run before wait_for_prior_grid().
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// Asks L2 to fetch the line that holds global address `src` ahead of a later load; no data
// reaches the SM and nothing waits for it (a hint: the later load reads whatever is there).
__device__ __forceinline__ void prefetch_l2(const void* src) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(src));
}

// Named barriers 1..15 for a subset of the block: bar_sync waits until `threads` threads
// (a multiple of 32) have reached barrier `id`, through bar_sync or bar_arrive; bar_arrive
// counts the calling warp without waiting. Id 0 is __syncthreads'.
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register budget per warpgroup (setmaxnreg): a block launches with the same registers per
// thread everywhere (from __launch_bounds__); a warpgroup that needs few hands some back with
// setmaxnreg_dec<N>() and one that needs many takes them with setmaxnreg_inc<N>() (which waits
// until the block's pool has them). Every warp of the warpgroup executes the same call, N is a
// multiple of 8 in 24..256, and the warpgroups' totals must fit what the block launched with.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Accumulator operands of an m64nN wgmma (N / 2 per thread) and their register lists.
#define WICK_WGMMA_D32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WICK_WGMMA_D64 \
  WICK_WGMMA_D32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WICK_WGMMA_D40 \
  WICK_WGMMA_D32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define WICK_WGMMA_D48 \
  WICK_WGMMA_D40, \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define WICK_WGMMA_D56 \
  WICK_WGMMA_D48, \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define WICK_WGMMA_R32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define WICK_WGMMA_R64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define WICK_WGMMA_R40 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}"
#define WICK_WGMMA_R56 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55}"
#define WICK_WGMMA_R48 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}"
// One wgmma statement: SHAPE "m64nNk16", TYPES "bf16.bf16" or "f16.f16", REGS the accumulator
// list, the numbers of the operands after it, then the accumulator operands.
#define WICK_WGMMA_SS(SHAPE, TYPES, REGS, IA, IB, IACC, TRANS, ...)                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IACC ", 0;\n"                            \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPES " " REGS ", %" IA ", %" IB  \
               ", p, 1, 1, " TRANS ";\n}\n"                                                   \
               : __VA_ARGS__                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))
#define WICK_WGMMA_RS(SHAPE, TYPES, REGS, IA, IB, IACC, ...)                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IACC ", 0;\n"                               \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPES " " REGS ", " IA ", %" IB     \
               ", p, 1, 1, 1;\n}\n"                                                              \
               : __VA_ARGS__                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))

// D (64 x N) (+)= A * B for N = 64 or 128, A and B from shared memory, both K-major, or
// with kTransposed both MN-major (A's M and B's N contiguous: read transposed). accumulate = 0
// sets D = A * B (the previous D is ignored).
template <int N, class Elem, bool kTransposed = false>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128 || ((N == 80 || N == 96 || N == 112) && !kTransposed),
                "m64n64k16, m64n128k16, or K-major m64n80k16 / m64n96k16");
  static_assert(std::is_same_v<Elem, __nv_bfloat16> || std::is_same_v<Elem, __half>, "bf16 or f16 inputs");
#define WICK_SS_N80(TYPES, T) WICK_WGMMA_SS("m64n80k16", TYPES, WICK_WGMMA_R40, "40", "41", "42", T, WICK_WGMMA_D40)
#define WICK_SS_N96(TYPES, T) WICK_WGMMA_SS("m64n96k16", TYPES, WICK_WGMMA_R48, "48", "49", "50", T, WICK_WGMMA_D48)
#define WICK_SS_N112(TYPES, T) WICK_WGMMA_SS("m64n112k16", TYPES, WICK_WGMMA_R56, "56", "57", "58", T, WICK_WGMMA_D56)
#define WICK_SS_N64(TYPES, T) WICK_WGMMA_SS("m64n64k16", TYPES, WICK_WGMMA_R32, "32", "33", "34", T, WICK_WGMMA_D32)
#define WICK_SS_N128(TYPES, T) \
  WICK_WGMMA_SS("m64n128k16", TYPES, WICK_WGMMA_R64, "64", "65", "66", T, WICK_WGMMA_D64)
#define WICK_SS_TYPES(N_MACRO, T)                                          \
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) N_MACRO("bf16.bf16", T); \
  if constexpr (std::is_same_v<Elem, __half>) N_MACRO("f16.f16", T);
  if constexpr (N == 64 && !kTransposed) { WICK_SS_TYPES(WICK_SS_N64, "0, 0") }
  if constexpr (N == 64 && kTransposed) { WICK_SS_TYPES(WICK_SS_N64, "1, 1") }
  if constexpr (N == 128 && !kTransposed) { WICK_SS_TYPES(WICK_SS_N128, "0, 0") }
  if constexpr (N == 128 && kTransposed) { WICK_SS_TYPES(WICK_SS_N128, "1, 1") }
  if constexpr (N == 80) { WICK_SS_TYPES(WICK_SS_N80, "0, 0") }
  if constexpr (N == 96) { WICK_SS_TYPES(WICK_SS_N96, "0, 0") }
  if constexpr (N == 112) { WICK_SS_TYPES(WICK_SS_N112, "0, 0") }
#undef WICK_SS_TYPES
#undef WICK_SS_N112
#undef WICK_SS_N96
#undef WICK_SS_N80
#undef WICK_SS_N128
#undef WICK_SS_N64
}

// D (64 x N) (+)= A * B for N = 64 or 128, A from registers (layout above), B from shared
// memory MN-major (read transposed).
template <int N, class Elem>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  static_assert(std::is_same_v<Elem, __nv_bfloat16> || std::is_same_v<Elem, __half>, "bf16 or f16 inputs");
#define WICK_RS_N64(TYPES) \
  WICK_WGMMA_RS("m64n64k16", TYPES, WICK_WGMMA_R32, "{%32,%33,%34,%35}", "36", "37", WICK_WGMMA_D32)
#define WICK_RS_N128(TYPES) \
  WICK_WGMMA_RS("m64n128k16", TYPES, WICK_WGMMA_R64, "{%64,%65,%66,%67}", "68", "69", WICK_WGMMA_D64)
  if constexpr (N == 64 && std::is_same_v<Elem, __nv_bfloat16>) WICK_RS_N64("bf16.bf16");
  if constexpr (N == 64 && std::is_same_v<Elem, __half>) WICK_RS_N64("f16.f16");
  if constexpr (N == 128 && std::is_same_v<Elem, __nv_bfloat16>) WICK_RS_N128("bf16.bf16");
  if constexpr (N == 128 && std::is_same_v<Elem, __half>) WICK_RS_N128("f16.f16");
#undef WICK_RS_N128
#undef WICK_RS_N64
}

#undef WICK_WGMMA_RS
#undef WICK_WGMMA_SS
#undef WICK_WGMMA_R64
#undef WICK_WGMMA_R56
#undef WICK_WGMMA_R48
#undef WICK_WGMMA_R40
#undef WICK_WGMMA_R32
#undef WICK_WGMMA_D64
#undef WICK_WGMMA_D56
#undef WICK_WGMMA_D48
#undef WICK_WGMMA_D40
#undef WICK_WGMMA_D32

}  // namespace wick::kernels::flash::sm90
