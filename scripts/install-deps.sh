#!/usr/bin/env bash
# Installs the Debian packages wick builds with, when any is missing. Idempotent.
set -euo pipefail
pkgs=(cmake ninja-build g++ make libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev libdlpack-dev)
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
