// wick: a small C++20 tensor framework whose headline operator is varlen, paged
// flash-attention mirroring candle-flash-attn. Include this one header.
#pragma once
#include "autograd/autograd.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/op.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/reference.h"
#include "ops/ops.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/grad_node.h"
#include "tensor/half.h"
#include "tensor/layout.h"
#include "tensor/shape.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"
