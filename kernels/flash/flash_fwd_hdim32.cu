// Tensor-core forward instances for head size 32 (see kernels/flash/flash_instances.h).
#include "kernels/flash/flash_instances.h"
#if WICK_FLASH_WANT(32)
#include "kernels/flash/flash_launch.cuh"
WICK_FLASH_INSTANTIATE(32)
#endif
