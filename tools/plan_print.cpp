#include "tools/plan_print.h"

namespace wick::cli {

void print_plan(std::ostream& out, const Built& b) { (void)out, (void)b; }

}  // namespace wick::cli
