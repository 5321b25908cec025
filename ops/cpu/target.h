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
