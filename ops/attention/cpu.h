// The CPU flash-attention forward: the tiled online-softmax algorithm that the CUDA kernels
// follow, step for step (the numbered steps in cpu.cpp), reading everything from
// FlashFwdParams (kernels/flash/flash_params.h; every pointer a host pointer).
#pragma once
#include "kernels/flash/flash_params.h"
#include "ops/cpu/isa.h"

namespace wick::attention {

// Writes out (and lse when non-null) for every query row of every sequence. The plan has
// checked the arguments: lengths, block-table entries and windows are trusted here.
// Runs on the shared CPU thread pool (ops/cpu/parallel.h) over (sequence, kv head, query
// blocks) items; num_threads > 0 caps the thread count (1 = on the calling thread), and
// small problems run on the calling thread. Uses the best code path of this CPU
// (cpu::best_isa()).
void cpu_flash_fwd(const kernels::FlashFwdParams& params, int num_threads = 0);

// The same on a given code path (a path the CPU lacks falls back to its best): for tests
// that compare the paths, and for benchmarks.
void cpu_flash_fwd(const kernels::FlashFwdParams& params, int num_threads, cpu::Isa isa);

}  // namespace wick::attention
