#include "ops/cpu/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <cstdint>

namespace wick::cpu {

namespace {

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
  if (amx && request_amx() && (xcr0() & (3ull << 17)) == (3ull << 17)) return Isa::Amx;
  return Isa::Avx512Bf16;
}
#else
Isa detect() { return Isa::Generic; }
#endif

}  // namespace

Isa best_isa() {
  static const Isa isa = detect();
  return isa;
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
