// Compiling a region of a translation unit for one CPU code path (ops/cpu/isa.h), whatever
// the flags of the rest of the build:
//   WICK_TARGET_BEGIN("avx2,fma,f16c")
//   ... functions ...
//   WICK_TARGET_END
// Every function defined in between may use that path's instructions; callers reach them
// only after checking cpu::best_isa(). Keep such regions inside an anonymous namespace, so
// nothing compiled there is shared with (or picked by the linker for) other code.
#pragma once

#define WICK_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define WICK_TARGET_BEGIN(isa) WICK_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define WICK_TARGET_END WICK_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define WICK_TARGET_BEGIN(isa) WICK_PRAGMA(GCC push_options) WICK_PRAGMA(GCC target(isa))
#define WICK_TARGET_END WICK_PRAGMA(GCC pop_options)
#else
#define WICK_TARGET_BEGIN(isa)
#define WICK_TARGET_END
#endif

// Loads the 64-byte AMX tile configuration at `config` (LDTILECFG). The compiler's intrinsic
// (_tile_loadconfig) tells the optimiser that only the first 8 bytes are read, so the stores
// of the rows and bytes-per-row fields can be removed as dead: the tiles are then left
// unconfigured and the first tile instruction faults (SIGILL). The operand here is the whole
// 64-byte block. Call it only from a region compiled for amx-tile.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define WICK_LOAD_TILE_CONFIG(config) \
  __asm__ volatile("ldtilecfg %0" ::"m"(*reinterpret_cast<const unsigned char(*)[64]>(config)))
#endif
