// The plan section of `wick explain`: what the operator decided for a valid configuration.
#pragma once
#include <ostream>

#include "tools/config.h"

namespace wick::cli {

void print_plan(std::ostream& out, const Built& b);

}  // namespace wick::cli
