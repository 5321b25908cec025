// Tensor-core forward instances for head size 96 (see kernels/flash/flash_instances.h).
#include "kernels/flash/flash_instances.h"
#if WICK_FLASH_WANT(96)
#include "kernels/flash/flash_launch.cuh"
WICK_FLASH_INSTANTIATE(96)
#endif
