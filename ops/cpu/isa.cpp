#include "ops/cpu/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <immintrin.h>

#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/cpu/target.h"

namespace wick::cpu {

namespace {

Isa cap_from_env(Isa found);

#if defined(__x86_64__) || defined(__i386__)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}
uint64_t xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
bool bit(unsigned word, int i) { return (word >> i) & 1u; }

// Linux keeps the AMX tile data state off until a process asks for it (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); the grant covers every thread of the process.
bool request_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// A tile multiply (1 x 2 bf16 by 2 x 1, = 2 * 3 + 1 * 4) run under a SIGILL handler: some
// hosts, virtual machines among them, list AMX in CPUID and grant the tile state, yet fault on
// the first tile instruction. The probe runs once, before any other thread uses AMX.
WICK_TARGET_BEGIN("amx-tile,amx-bf16")
void amx_probe(float* out) {
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;                                // palette 1
  for (int t = 0; t < 3; ++t) cfg[16 + 2 * t] = 4, cfg[48 + t] = 1;  // tiles 0-2: 1 row x 4 bytes
  alignas(64) uint16_t a[2] = {0x4000, 0x3f80};  // bf16 2, 1
  alignas(64) uint16_t b[2] = {0x4040, 0x4080};  // bf16 3, 4
  WICK_LOAD_TILE_CONFIG(cfg);
  _tile_zero(0);
  _tile_loadd(1, a, 4);
  _tile_loadd(2, b, 4);
  _tile_dpbf16ps(0, 1, 2);
  _tile_stored(0, out, 4);
  _tile_release();
}
WICK_TARGET_END

sigjmp_buf g_probe_jump;
void on_probe_sigill(int) { siglongjmp(g_probe_jump, 1); }

bool amx_runs() {
  struct sigaction handler = {}, previous = {};
  handler.sa_handler = on_probe_sigill;
  sigemptyset(&handler.sa_mask);
  if (sigaction(SIGILL, &handler, &previous) != 0) return false;
  volatile float result = 0;
  if (sigsetjmp(g_probe_jump, 1) == 0) {
    float out = 0;
    amx_probe(&out);
    result = out;
  }
  sigaction(SIGILL, &previous, nullptr);
  return result == 10.0f;
}

Isa detect() {
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  if (!osxsave) return Isa::Generic;
  const uint64_t xcr = xcr0();
  const bool os_avx = (xcr & 0x6) == 0x6;               // XMM and YMM state
  const bool os_avx512 = (xcr & 0xE6) == 0xE6;          // plus opmask and ZMM state
  const Regs l7 = cpuid(7, 0), l71 = cpuid(7, 1);
  const bool avx2 = os_avx && bit(l7.b, 5) && bit(l1.c, 12) /*FMA*/ && bit(l1.c, 29) /*F16C*/;
  if (!avx2) return Isa::Generic;
  const bool avx512 = os_avx512 && bit(l7.b, 16) /*F*/ && bit(l7.b, 17) /*DQ*/ && bit(l7.b, 30) /*BW*/ &&
                      bit(l7.b, 31) /*VL*/;
  if (!avx512) return Isa::Avx2;
  if (!bit(l71.a, 5)) return Isa::Avx512;  // AVX512_BF16
  const bool amx = bit(l7.d, 24) /*AMX-TILE*/ && bit(l7.d, 22) /*AMX-BF16*/;
  if (amx && request_amx() && (xcr0() & (3ull << 17)) == (3ull << 17) && amx_runs())
    return Isa::Amx;
  return Isa::Avx512Bf16;
}
#else
Isa detect() { return Isa::Generic; }
#endif

// WICK_CPU_ISA (one of isa_name's names) caps the path: a user can rule out a path this
// machine reports but should not use, and compare paths on one machine. The AMX path is
// used only when named there (see detect()).
Isa cap_from_env(Isa found) {
  const char* e = std::getenv("WICK_CPU_ISA");
  if (e == nullptr || *e == 0) return found;
  for (int i = 0; i <= static_cast<int>(Isa::Amx); ++i)
    if (std::strcmp(e, isa_name(static_cast<Isa>(i))) == 0)
      return static_cast<int>(found) < i ? found : static_cast<Isa>(i);
  return found;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = cap_from_env(detect());
  return isa;
}

bool intel_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = [] {
    const Regs r = cpuid(0, 0);
    char vendor[13] = {};
    std::memcpy(vendor, &r.b, 4), std::memcpy(vendor + 4, &r.d, 4), std::memcpy(vendor + 8, &r.c, 4);
    return std::strcmp(vendor, "GenuineIntel") == 0;
  }();
  return intel;
#else
  return false;
#endif
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512_bf16";
    case Isa::Amx: return "amx";
  }
  return "generic";
}

}  // namespace wick::cpu
