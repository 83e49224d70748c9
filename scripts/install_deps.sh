#!/usr/bin/env bash
# Installs what KernelEvo needs on Debian 12 (bookworm). The CUDA Toolkit (nvcc) must already be
# installed (NVIDIA's packages; Debian's own toolkit is too old); this script checks for it.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config python3
          libtorch-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev libcli11-dev
          libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev sqlite3 libhiredis-dev redis-server
          bubblewrap libseccomp-dev libcpp-httplib-dev chromium
          python3-torch python3-venv python3-pip python3-setuptools python3-wheel zsh ccache)
# python3-torch: `kernelevo import kernelbench` and the Python helper (import time only; CPU PyTorch);
# python3-venv/-pip/-setuptools/-wheel: the test of `pip install ./python` (offline, no build isolation);
# zsh: the test of `kernelevo completion bash|zsh` in real shells.
# ccache: a compiler cache the build uses when present (KERNELEVO_USE_CCACHE): a second build is mostly cache hits.
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do [ -x "$d/nvcc" ] && export PATH="$d:$PATH"; done
fi
command -v nvcc >/dev/null 2>&1 || { echo "install_deps: nvcc not found: install the CUDA Toolkit (12.x or 13.x) and put nvcc on PATH" >&2; exit 2; }
echo "install_deps: ok ($(nvcc --version | grep -o 'release [0-9.]*'))"
