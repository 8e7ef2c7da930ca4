#!/usr/bin/env bash
# Downloads the .deb files of scripts/deps-gpu.txt (Debian 12, amd64) into DIR (default:
# .gpu-debs in the repository root, ignored by git), for a GPU machine that has CUDA, CMake
# and Python but not our Debian libraries: bench/gpu/run.sh unpacks them there. The
# packages of the list's [nccl] section go into DIR/nccl/ (mpirun and the runtime
# dependencies of braid's tools: the nccl part unpacks them into a prefix of its own).
# Run it on a Debian 12 machine with apt (no root needed for `apt-get download`); prints
# the folder's size, which counts toward what a remote run may carry. Re-running replaces
# the folder.
#
#   scripts/gpu-debs.sh [DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
dir=${1:-$root/.gpu-debs}
command -v apt-get > /dev/null || { echo "gpu-debs: apt-get not found (run this on Debian 12)" >&2; exit 2; }
# section NAME: the packages of [NAME] ("" for those before the first section).
section() {
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/deps-gpu.txt" | grep -v '^$' |
    awk -v want="$1" '/^\[.*\]$/ { s = substr($0, 2, length($0) - 2); next } s == want'
}
download() {   # download FOLDER PACKAGES...
  local to=$1; shift
  mkdir -p "$to"
  # apt-get download writes into the current folder; as root it warns that _apt cannot
  # write there, which is harmless.
  (cd "$to" && apt-get download -o APT::Architecture=amd64 "$@" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
  local got
  got=$(find "$to" -maxdepth 1 -name '*.deb' | wc -l)
  if (( got != $# )); then
    echo "gpu-debs: got $got of $# packages in $to" >&2
    exit 1
  fi
}
mapfile -t base < <(section "")
mapfile -t nccl < <(section nccl)
rm -rf "$dir"
download "$dir" "${base[@]}"
download "$dir/nccl" "${nccl[@]}"
du -sh "$dir" | awk -v n="$(( ${#base[@]} + ${#nccl[@]} ))" '{print "gpu-debs: " n " packages, " $1 " in " $2}'
