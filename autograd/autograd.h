// The autograd engine in one include: graph nodes and the no-grad guard, backward passes
// and GradStore, finite-difference gradient checks, custom ops and optimizers.
// See docs/autograd.md for how the pieces fit.
#pragma once
#include "autograd/custom_op.h"
#include "autograd/engine.h"
#include "autograd/grad_store.h"
#include "autograd/gradcheck.h"
#include "autograd/optim.h"
#include "tensor/grad_node.h"
