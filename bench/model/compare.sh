#!/usr/bin/env bash
# Runs bench_model (braid) and torch_bench.py (PyTorch on CPU) on the same shapes and
# threads, one after the other per config so they see the same machine, and prints the
# JSON lines of all. PyTorch runs twice: as installed, and with OMP_WAIT_POLICY=PASSIVE
# (its OpenMP workers otherwise busy-wait, which costs it dearly on a shared machine).
# Usage (from the repository root, after building bench_model):
#   bench/model/compare.sh BUILD_DIR [THREADS] [CONFIGS...]      e.g.  build 2 tiny 100m
set -euo pipefail
build=${1:?usage: compare.sh BUILD_DIR [THREADS] [CONFIGS...]}
threads=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
configs=("$@")
[[ ${#configs[@]} -eq 0 ]] && configs=(tiny)
here=$(cd "$(dirname "$0")" && pwd)
for c in "${configs[@]}"; do
  args=(--config "$c" --threads "$threads" --json)
  if [[ $c == 100m ]]; then args+=(--repeats 2 --decode-context 32 --decode-steps 8); fi
  echo "{\"load_average\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"config\": \"$c\"}"
  "$build/bench/bench_model" "${args[@]}"
  /usr/bin/python3 "$here/torch_bench.py" "${args[@]}"
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$here/torch_bench.py" "${args[@]}" --label pytorch-passive
done
