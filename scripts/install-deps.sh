#!/usr/bin/env bash
# Installs the Debian packages xfmr builds and tests with. Idempotent: a package
# already present is not fetched again, and apt-get update runs only when
# something is missing.
set -euo pipefail

PKGS=(
  cmake ninja-build ccache g++ pkg-config libgtest-dev
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  clang-22 libclang-rt-22-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  nlohmann-json3-dev libopenblas-dev libomp-22-dev libssl-dev
  libpcre2-dev libutf8proc-dev
  libboost-dev
  python3-venv
  libopenmpi-dev openmpi-bin
)
if [[ "${XFMR_WITH_PYTHON_MODELS:-0}" == 1 ]]; then
  PKGS+=(python3-torch libopenblas0-pthread)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
