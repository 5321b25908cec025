#!/usr/bin/env bash
# Runs wick's flash-attention benchmark and its PyTorch peers on the same GPU in one go,
# then prints the ratio table. Usage: bench/run_flash_bench.sh [BUILD_DIR] [OUT_DIR] [GROUPS]
#   BUILD_DIR holds bench/flash_bench (default build-cuda); OUT_DIR receives
#   flash_wick.json, flash_torch.json, flash_report.txt (default .); GROUPS e.g. "ABCD".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-cuda}
out=${2:-.}
groups=${3:-copyABCD}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true
"$build/bench/flash_bench" --only "$groups" --json "$out/flash_wick.json"
PYTHONUNBUFFERED=1 python3 "$here/flash_peers.py" --only "$groups" --json "$out/flash_torch.json"
python3 "$here/flash_report.py" "$out/flash_wick.json" "$out/flash_torch.json" | tee "$out/flash_report.txt"
