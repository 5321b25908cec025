// Tensor-core backward instances for head sizes up to 64 (kernels/flash_bwd/flash_bwd_mma.cuh).
#include "kernels/flash_bwd/flash_bwd_mma.cuh"
#include "tensor/cuda_check.h"
WICK_FLASH_BWD_INSTANTIATE(64)
