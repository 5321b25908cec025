#!/usr/bin/env bash
# Installs the Debian packages wick builds with, when any is missing. Idempotent.
#   scripts/install-deps.sh          what `make test` and `make demo` need
#   scripts/install-deps.sh clang    also clang (the sanitizer build and the fuzz target, .ci/run)
set -euo pipefail
pkgs=(cmake ninja-build g++ make libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev libdlpack-dev libdnnl-dev)
[ "${1:-}" = clang ] && pkgs+=(clang libclang-rt-14-dev)  # the sanitizer and libFuzzer runtimes
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "wick: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
