// What the CPU running wick can do, asked once at run time: the vector extensions the hot
// loops have code paths for. A portable build (WICK_PORTABLE=ON) is compiled for the baseline
// x86-64 and still runs AVX2, AVX-512, AVX512-BF16 or AMX code where the CPU has it; a native
// build does the same (the paths are picked by the CPU, not by the compiler flags).
#pragma once
#include <string>

namespace wick::cpu {

// The code paths, each needing everything the ones before it need (on x86-64):
//   Generic     plain C++ (whatever the compiler targets)
//   Avx2        AVX2 + FMA + F16C, f32 arithmetic 8 lanes wide
//   Avx512      AVX-512 F/BW/VL/DQ, f32 arithmetic 16 lanes wide
//   Avx512Bf16  AVX-512 with VDPBF16PS: bf16 pair dot products accumulated in f32
//   Amx         AMX-TILE + AMX-BF16 tiles (16 x 32 bf16 by 32 x 16 bf16 into 16 x 16 f32),
//               once the kernel has granted the process the tile state
enum class Isa : int { Generic = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3, Amx = 4 };

// The best path this CPU (and OS) supports. Cached after the first call; asking for AMX
// requests the tile state from Linux once (arch_prctl). The environment variable WICK_CPU_ISA,
// set to one of the names below, caps the path. Amx is reported when the CPU lists AMX, the
// tile state is granted and a probe tile multiply runs under a SIGILL handler (some virtual
// machines list AMX and still fault).
Isa best_isa();

// True on a CPU whose vendor is Intel ("GenuineIntel").
bool intel_cpu();

// "generic", "avx2", "avx512", "avx512_bf16", "amx".
const char* isa_name(Isa isa);

// True when the CPU can run code for `isa` (every path up to best_isa()).
inline bool isa_supported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

}  // namespace wick::cpu
