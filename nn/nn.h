// nn: layers as modules with named parameters and safetensors state dicts, gradient
// clipping and a learning-rate schedule. Built on ops/, autograd/ and io/.
#pragma once
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/training.h"
