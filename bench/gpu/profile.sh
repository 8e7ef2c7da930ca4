#!/usr/bin/env bash
# Where a GPU step's time goes, kernel by kernel: Nsight Compute (ncu) times every kernel of
# a few decode steps (bench_gpu_decode, no graphs, so each kernel is seen) and of one
# training step (bench_gpu --part train), and bench/gpu/kernel_summary.py sums the
# durations by kernel name. Run after bench/gpu/run.sh has built its targets (same machine):
#
#   bench/gpu/run.sh OUTDIR decode train && bench/gpu/profile.sh OUTDIR
#
# Writes OUTDIR/profile.log (the tables). ncu serialises kernels, so these are kernel times
# without overlap, for ranking, not step times.
set -uo pipefail
out=$(cd "${1:?usage: bench/gpu/profile.sh OUTDIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BRAID_GPU_BUILD:-/tmp/braid-gpu-build}
P=${BRAID_GPU_PREFIX:-/tmp/braid-gpu-deps}/usr
L=$P/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prof() {  # NAME COMMAND...: per-kernel durations as CSV, then the summary
  local name=$1; shift
  echo "== $name: $*" | tee -a "$out/profile.log"
  timeout "${BRAID_PROFILE_TIMEOUT:-240}" "$ncu" --metrics gpu__time_duration.sum --csv --print-units base \
    --clock-control none --launch-count "${BRAID_PROFILE_KERNELS:-4000}" "$@" > "/tmp/$name.csv" 2> "/tmp/$name.err"
  echo "ncu exit $?" | tee -a "$out/profile.log"
  tail -3 "/tmp/$name.err" >> "$out/profile.log"
  python3 "$root/bench/gpu/kernel_summary.py" "/tmp/$name.csv" | tee -a "$out/profile.log"
}
: > "$out/profile.log"
prof decode_b1 "$build/bench/bench_gpu_decode" --device cuda --dtype bf16 --batches 1 --steps 3 --long-tail 0 --no-graphs
prof decode_b64 "$build/bench/bench_gpu_decode" --device cuda --dtype bf16 --batches 64 --steps 3 --long-tail 0 --no-graphs
prof train "$build/bench/bench_gpu" --device cuda --part train --config 1b --dtype bf16 --batch 4 --seq 2048 --steps 1
