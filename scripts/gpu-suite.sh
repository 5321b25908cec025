#!/usr/bin/env bash
# The GPU check: every test on Cpu and Cuda, the CUDA gradient checks, the training examples
# (train_mlp, tiny_lm) and the demo on the GPU, and compute-sanitizer memcheck over the CUDA op and attention
# tests. Run on a machine with a GPU from the repository root:
#   scripts/gpu-suite.sh [BUILD_DIR] [OUT_DIR]
# BUILD_DIR holds tests/wick_tests, examples/train_mlp, examples/tiny_lm and examples/demo
# (default build);
# logs go to OUT_DIR (default .). Exits non-zero when any step fails.
set -uo pipefail
build=${1:-build}
out=${2:-.}
mkdir -p "$out"
status=0
step() {  # step NAME COMMAND...: runs COMMAND, logs to OUT/NAME.log, prints the tail
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$(date +%s)
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 6 "$out/$name.log"
  echo "=== $name: exit $rc in $(( $(date +%s) - t0 ))s"
  [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step tests "$build/tests/wick_tests"
step train_mlp "$build/examples/train_mlp"
step tiny_lm "$build/examples/tiny_lm" --device cuda --save "$out/tiny_lm.safetensors"
step demo "$build/examples/demo"
if command -v compute-sanitizer >/dev/null; then
  step memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$build/tests/wick_tests" -tc="ops:*,research ops*,rand*,dropout*,rope*,attention: random*,attention backward*,gradcheck cuda*,tiny_lm: greedy*,flash kernels: sanitizer subset"
fi
exit $status
