#!/usr/bin/env bash
# Regenerates the diagrams of docs/varlen-paged-attention.md (docs/img/*.svg) from real
# wick layouts: each one is `wick explain ... --svg`, run on the configuration the lesson
# describes, so a drawing cannot drift from what the operator does.
#   scripts/make-lesson-diagrams.sh [BUILD_DIR]     (default: build; configures it if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja >/dev/null
cmake --build "$build" --target wick_cli >/dev/null
wick="$build/tools/wick"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=docs/img
mkdir -p "$out"

# explain NAME FLAGS...: runs wick explain with --svg into the scratch folder.
explain() {
  local name=$1; shift
  "$wick" explain "$@" --svg "$tmp/$name" >"$tmp/$name.txt"
}

# Four sequences as in the demo: a prefill chunk of each (3, 8, 1, 5 queries) over its
# whole history (40, 63, 9, 100 keys), K/V in a PagedKvCache of 32-row pages filled by
# interleaved appends, 8 query heads over 2 kv heads, causal.
explain paged --seqlens-q 3,8,1,5 --seqlens-k 40,63,9,100 --page 32 --cache --shuffle \
  --heads 8 --heads-k 2 --head-dim 64 --causal
cp "$tmp/paged-packing.svg" "$out/packing.svg"
cp "$tmp/paged-pages.svg" "$out/pages.svg"
cp "$tmp/paged-heads.svg" "$out/gqa.svg"

# Masks: 3 queries over 8 keys (causal, bottom-right); a sliding window; a multimodal
# prefix attended both ways; ALiBi's probabilities with q = k = 0 (only the bias speaks).
explain causal --seqlens-q 3 --seqlens-k 8 --heads 1 --head-dim 8 --causal
cp "$tmp/causal-mask-seq0.svg" "$out/mask-causal-3x8.svg"
explain square --seqlens-q 8 --seqlens-k 8 --heads 1 --head-dim 8 --causal
cp "$tmp/square-mask-seq0.svg" "$out/mask-causal-8x8.svg"
explain window --seqlens-q 12 --seqlens-k 12 --heads 1 --head-dim 8 --causal --window-left 3
cp "$tmp/window-mask-seq0.svg" "$out/mask-window.svg"
explain prefix --seqlens-q 10 --seqlens-k 10 --heads 1 --head-dim 8 --causal --mm-prefix 1-5
cp "$tmp/prefix-mask-seq0.svg" "$out/mask-mm-prefix.svg"
explain alibi --seqlens-q 6 --seqlens-k 12 --heads 4 --head-dim 16 --causal --alibi --zero-qk --probs --head 0
cp "$tmp/alibi-mask-seq0.svg" "$out/probs-alibi.svg"

echo "wrote $(ls "$out"/*.svg | wc -l) diagrams to $out/"
