#!/usr/bin/env bash
# Installs the Debian packages wick builds with, when any is missing. Idempotent.
#   scripts/install-deps.sh          what `make test` and `make demo` need
#   scripts/install-deps.sh clang    also clang (the sanitizer build and the fuzz target, .ci/run)
#   scripts/install-deps.sh mkl      also MKL (libmkl-dev, in Debian's non-free component, which
#                                    this enables; a 280 MB download): wick::matmul's large f32
#                                    products run MKL's GEMM on Intel CPUs (ops/cpu/gemm.h)
set -euo pipefail
pkgs=(cmake ninja-build g++ make libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev libdlpack-dev libdnnl-dev)
[ "${1:-}" = clang ] && pkgs+=(clang libclang-rt-14-dev)  # the sanitizer and libFuzzer runtimes
[ "${1:-}" = mkl ] && pkgs+=(libmkl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "wick: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ "${1:-}" = mkl ] && ! apt-cache policy libmkl-dev 2>/dev/null | grep -q "Candidate: [0-9]"; then
  # Debian 12's sources list: the same archive, the non-free component
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: %s\n' \
    /usr/share/keyrings/debian-archive-keyring.gpg | $sudo tee /etc/apt/sources.list.d/wick-non-free.sources >/dev/null
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
