#!/usr/bin/env bash
# Downloads the .deb files of scripts/deps-gpu.txt (Debian 12, amd64), for a GPU machine that
# has CUDA, CMake and Python but not our Debian libraries, and packs their files into DIR
# (default: .gpu-debs in the repository root, ignored by git) as two tarballs that
# bench/gpu/run.sh unpacks there: DIR/base.tar.xz (the list before its first section) and
# DIR/nccl.tar.xz (the [nccl] section: mpirun and its runtime libraries, which the nccl part
# unpacks into a prefix of its own). What neither building nor running needs is left out
# (static archives that have a shared library beside them, documentation, manuals,
# translations), to stay within what a remote run may carry (64 MiB with the repository).
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
pack() {   # pack FOLDER_OF_DEBS TARBALL
  local tree a f
  tree=$(mktemp -d)
  for f in "$1"/*.deb; do dpkg-deb -x "$f" "$tree"; done
  while IFS= read -r a; do [[ -e ${a%.a}.so ]] && rm -f "$a"; done < <(find "$tree" -name '*.a')
  rm -rf "$tree/usr/share/doc" "$tree/usr/share/man" "$tree/usr/share/locale" "$tree/usr/share/lintian"
  XZ_OPT=-6 tar -C "$tree" -cJf "$2" .
  rm -rf "$tree"
}
mapfile -t base < <(section "")
mapfile -t nccl < <(section nccl)
rm -rf "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download "$work/base" "${base[@]}"
download "$work/nccl" "${nccl[@]}"
mkdir -p "$dir"
pack "$work/base" "$dir/base.tar.xz"
pack "$work/nccl" "$dir/nccl.tar.xz"
du -sh "$dir" | awk -v n="$(( ${#base[@]} + ${#nccl[@]} ))" '{print "gpu-debs: " n " packages, " $1 " in " $2}'
