#include "kernels/common.h"

#include "tensor/error.h"

namespace wick::kernels {

void throw_error(const char* msg) { throw Error(msg); }

}  // namespace wick::kernels
