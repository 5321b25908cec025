// Host-side entry of one compiled head-size instance (defined in flash_launch.cuh,
// instantiated by kernels/flash/flash_fwd_hdim<D>.cu as kernels/flash/flash_instances.h lists).
#pragma once
#include "kernels/flash/flash_params.h"

namespace wick::kernels::flash {

// Runs the tensor-core forward on head-size instance D (D >= params.head_size).
// decode: use the decode tile shape with the GQA group packed into rows (the caller checked
// that max_seqlen_q * group fits one 16-row tile and that the instance has the variant).
template <int D, FlashDType DT>
void run_flash_hdim(const FlashFwdParams& params, void* stream, bool decode);

}  // namespace wick::kernels::flash
