// wick: a small C++20 tensor framework whose headline operator is varlen, paged
// flash-attention mirroring candle-flash-attn. Include this one header.
#pragma once
#include "tensor/device.h"
#include "tensor/device_fault.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/layout.h"
#include "tensor/shape.h"
#include "tensor/storage.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"
#if __has_include("ops/ops.h")
#include "ops/ops.h"
#endif
#if __has_include("ops/attention/flash_attn.h")
#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/reference.h"
#endif
#if __has_include("autograd/autograd.h")
#include "autograd/autograd.h"
#endif
