#!/usr/bin/env bash
# Idempotent, non-interactive set-up: installs the Debian 12 packages inca
# needs (only those missing), then configures and builds one CMake preset.
#
#   scripts/setup.sh [release|asan|fuzz] [extra cmake -D options...]
#
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
shift || true

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev lld clang-format clang-tidy
  libgtest-dev libgmock-dev libbenchmark-dev libabsl-dev libcli11-dev
  libgloo-dev libyaml-cpp-dev libspdlog-dev iproute2
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libcpp-httplib-dev libz3-dev chromium pkgconf tshark
  python3-dev pybind11-dev python3-torch libtorch-dev python3-numpy python3-pytest
  python3-matplotlib libbox2d-dev libeigen3-dev libbpf-dev liburing-dev libxdp-dev
  libns3-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm, for the repeated-code check (scripts/check-code.sh): Debian's, unless
# a Node.js install already brings its own.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q </dev/null
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi

jobs="$(nproc 2>/dev/null || echo 2)"
cmake --preset "$preset" "$@" >/dev/null
cmake --build "build/$preset" -j "$jobs"
