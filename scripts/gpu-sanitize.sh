#!/usr/bin/env bash
# compute-sanitizer over the CUDA test suite: memcheck (out-of-bounds and misaligned device
# accesses), racecheck (shared-memory hazards), initcheck (reads of device memory never
# written) and synccheck (barriers in divergent code, bad warp masks). Each tool runs over the
# tests that exercise what it checks, so the four finish in a few minutes on an H200 (racecheck
# and initcheck slow kernels down 10-100x: their subsets are the smallest). Run on a machine
# with a GPU, from the repository root, after building with CUDA:
#   scripts/gpu-sanitize.sh [BUILD_DIR] [OUT_DIR] [TOOLS]
# BUILD_DIR holds tests/wick_tests (default build); one log per tool goes to OUT_DIR (default
# sanitize-logs); TOOLS picks some of "memcheck racecheck initcheck synccheck" (default: all,
# one after another; separate calls with one tool each can run side by side). The variable
# SANITIZE_LIMIT (seconds) caps each tool's run instead of the defaults below. Exits non-zero
# when a tool reports an error, a test fails under it, or it runs out of time.
set -uo pipefail
build=${1:-build}
out=${2:-sanitize-logs}
tools=${3:-memcheck racecheck initcheck synccheck}
tests="$build/tests/wick_tests"
mkdir -p "$out"
if ! command -v compute-sanitizer >/dev/null; then
  [ -x /usr/local/cuda/bin/compute-sanitizer ] && export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found (CUDA toolkit bin/)" >&2; exit 2; }
[ -x "$tests" ] || { echo "$tests not found: build with CUDA first (cmake -DWICK_CUDA=ON)" >&2; exit 2; }

# The subsets (doctest test-case name filters).
flash_small="flash kernels: sanitizer subset,flash kernels: decode*,flash kernels: split decode*"
many_tiles="flash kernels: more query tiles*,flash kernels: eager calls and captured graphs*"
attention="attention: random*,attention: NaN and inf propagate;*,attention: two runs*,attention: +inf*"
memcheck_set="ops:*,sizes:*,integers:*,copy_into:*,autograd: *,$attention,attention backward*,attention: long*,$flash_small,$many_tiles,flash kernels: paged*,gradcheck cuda*"
racecheck_set="flash kernels: sanitizer subset,flash kernels: split decode*,$many_tiles,attention backward: sweep*,attention backward: paged*,ops: long rows*"
initcheck_set="$flash_small,attention: random*,attention backward: paged*,ops: long rows*"
synccheck_set="$flash_small,attention backward: paged*,ops: long rows*"

status=0
run() {  # run TOOL TIMEOUT FILTER [EXTRA OPTIONS...]; LOG_NAME and RUN_ENV (NAME=VALUE) optional
  local tool=$1 limit=${SANITIZE_LIMIT:-$2} filter=$3; shift 3
  case " $tools " in *" $tool "*) ;; *) return ;; esac
  local log="$out/${LOG_NAME:-$tool}.log"
  echo "=== $tool ${RUN_ENV:-}: $filter"
  local t0=$(date +%s)
  env ${RUN_ENV:-} timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 "$@" \
    "$tests" -tc="$filter" >"$log" 2>&1
  local rc=$?
  grep -E "ERROR SUMMARY|test cases:|SKIPPED" "$log" | sort | uniq -c | tail -n 6
  echo "=== $tool: exit $rc in $(( $(date +%s) - t0 ))s (log: $log)"
  [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
compute-sanitizer --version | tail -n 1
# CUDA API errors are not memory errors: the out-of-memory tests ask for more than the GPU has
# on purpose (and assert the wick::Error), so memcheck does not count failed API calls.
run memcheck 900 "$memcheck_set" --report-api-errors no
# On a Hopper GPU the sm_90a kernels take most flash calls; the sm_80 family (Ampere's
# kernels, and Hopper's for what the sm_90a ones do not cover) gets its own memcheck pass.
LOG_NAME=memcheck-sm80 RUN_ENV=WICK_FLASH_SM90=0 run memcheck 300 "$flash_small"
# The Hopper forward's CTAs take several query tiles each by default (claimed from a counter
# in eager calls, the fixed walk in captured graphs: the many-tile tests run both); this pass
# runs it with one CTA per tile.
LOG_NAME=memcheck-per-tile RUN_ENV=WICK_FLASH_SM90_PERSISTENT=0 run memcheck 300 \
  "flash kernels: sanitizer subset,$many_tiles"
run racecheck 900 "$racecheck_set" --racecheck-report all
run initcheck 900 "$initcheck_set"
run synccheck 600 "$synccheck_set"
exit $status
