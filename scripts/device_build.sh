#!/usr/bin/env bash
# Configures and builds KernelEvo on a GPU host where some Debian dev packages are missing:
# .debs/ (fetched elsewhere with `apt-get download`) are unpacked into a private prefix, LibTorch
# comes from PyTorch's pip package. Usage: scripts/device_build.sh [ninja targets...]
# Then `source build-gpu/env.sh` sets LD_LIBRARY_PATH/PATH for the unpacked packages.
set -euo pipefail
prefix=${KEVO_DEVICE_PREFIX:-/tmp/kevo-prefix}
mkdir -p "$prefix"
if compgen -G ".debs/*.deb" >/dev/null; then
  for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
fi
torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
libdir="$prefix/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}"
export PATH="$prefix/usr/bin:$PATH"
extra=()
[ -f "$prefix/usr/include/sqlite3.h" ] && extra+=(-DSQLite3_INCLUDE_DIR="$prefix/usr/include" -DSQLite3_LIBRARY="$libdir/libsqlite3.so")
[ -d /usr/include/x86_64-linux-gnu/curl ] && extra+=(-DCURL_INCLUDE_DIR=/usr/include/x86_64-linux-gnu)
# Packages unpacked into the prefix carry .pc files that point at /usr: point them at the prefix,
# so pkg-config (searched through CMAKE_PREFIX_PATH) finds hiredis and cpp-httplib there. Without
# hiredis, build without the Redis backend, the workers and their GPU tests. Those tests also
# need redis-server on PATH (.debs/: redis-server redis-tools libjemalloc2 liblzf1).
for pc in "$libdir"/pkgconfig/*.pc; do
  [ -f "$pc" ] || continue
  # hiredis.pc names .../include/hiredis, while the code includes <hiredis/hiredis.h>: its parent.
  sed -i -E "s#^includedir=/usr/include/hiredis\$#includedir=/usr/include#; s#^(prefix|exec_prefix|includedir)=/usr#\1=$prefix/usr#; s#^libdir=/usr/lib\$#libdir=$libdir#; s#^libdir=/usr#libdir=$prefix/usr#" "$pc"
done
if [ ! -f /usr/include/hiredis/hiredis.h ] && [ ! -f "$prefix/usr/include/hiredis/hiredis.h" ]; then
  extra+=(-DKERNELEVO_ENABLE_REDIS=OFF)
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_prefix" "${extra[@]}" ${KEVO_CMAKE_ARGS:-}
printf 'export LD_LIBRARY_PATH=%q\nexport PATH=%q\n' "$LD_LIBRARY_PATH" "$PATH" > build-gpu/env.sh
ninja -C build-gpu -j"$(nproc)" "$@"
