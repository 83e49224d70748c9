#!/usr/bin/env bash
# Fetches into .debs/ (git-ignored) the Debian packages the GPU host's image lacks, for
# scripts/device_build.sh to unpack there (carry .debs with the call). Only what the image lacks:
# it has its own nlohmann_json, CLI11, GoogleTest and Google Benchmark, and unpacking Debian's copies
# beside them mixes two nlohmann versions in one link (undefined json_abi_v3_11_2 symbols).
# Usage (on a Debian 12 machine with apt): scripts/fetch_device_debs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(bubblewrap libseccomp-dev libseccomp2 libsqlite3-dev libsqlite3-0 libhiredis-dev libhiredis0.14
      redis-server redis-tools libjemalloc2 liblzf1 libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev)
mkdir -p .debs
rm -f .debs/*.deb
apt-get update -qq >/dev/null 2>&1 || true
(cd .debs && apt-get download "${pkgs[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
n=$(ls .debs/*.deb 2>/dev/null | wc -l)
[ "$n" -eq "${#pkgs[@]}" ] || { echo "fetch_device_debs: got $n of ${#pkgs[@]} packages" >&2; exit 1; }
echo "fetch_device_debs: ${n} packages in .debs ($(du -sh .debs | cut -f1))"
