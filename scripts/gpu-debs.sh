#!/usr/bin/env bash
# Downloads the .deb files of scripts/deps-gpu.txt (Debian 12, amd64) into DIR (default:
# .gpu-debs in the repository root, ignored by git), for a GPU machine that has CUDA, CMake
# and Python but not our Debian libraries: bench/gpu/run.sh unpacks them there. Run it on a
# Debian 12 machine with apt (no root needed for `apt-get download`); prints the folder's
# size, which counts toward what a remote run may carry. Re-running replaces the folder.
#
#   scripts/gpu-debs.sh [DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
dir=${1:-$root/.gpu-debs}
command -v apt-get > /dev/null || { echo "gpu-debs: apt-get not found (run this on Debian 12)" >&2; exit 2; }
mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/deps-gpu.txt" | grep -v '^$')
rm -rf "$dir"
mkdir -p "$dir"
# apt-get download writes into the current folder; as root it warns that _apt cannot write
# there, which is harmless.
(cd "$dir" && apt-get download -o APT::Architecture=amd64 "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
got=$(find "$dir" -name '*.deb' | wc -l)
if (( got != ${#pkgs[@]} )); then
  echo "gpu-debs: got $got of ${#pkgs[@]} packages in $dir" >&2
  exit 1
fi
du -sh "$dir" | awk -v n="$got" '{print "gpu-debs: " n " packages, " $1 " in " $2}'
