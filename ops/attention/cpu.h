// The CPU flash-attention forward: the tiled online-softmax algorithm that the CUDA kernels
// follow, step for step (the numbered steps in cpu.cpp), reading everything from
// FlashFwdParams (kernels/flash/flash_params.h; every pointer a host pointer).
#pragma once
#include "kernels/flash/flash_params.h"

namespace wick::attention {

// Writes out (and lse when non-null) for every query row of every sequence. The plan has
// checked the arguments: lengths, block-table entries and windows are trusted here.
// Runs on all hardware threads (std::thread over (sequence, head, query-block) items);
// num_threads > 0 forces a count (1 = on the calling thread).
void cpu_flash_fwd(const kernels::FlashFwdParams& params, int num_threads = 0);

}  // namespace wick::attention
