#!/usr/bin/env bash
# Runs bench_model (braid) and torch_bench.py (PyTorch on CPU) on the same shapes and
# threads, alternating per config so both see the same machine load, and prints the
# JSON lines of both. Usage (from the repository root, after building bench_model):
#   bench/model/compare.sh BUILD_DIR [THREADS] [CONFIGS...]      e.g.  build 2 tiny 100m
set -euo pipefail
build=${1:?usage: compare.sh BUILD_DIR [THREADS] [CONFIGS...]}
threads=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
configs=("${@:-tiny}")
[[ ${#configs[@]} -eq 0 ]] && configs=(tiny)
here=$(cd "$(dirname "$0")" && pwd)
for c in "${configs[@]}"; do
  args=(--config "$c" --threads "$threads" --json)
  if [[ $c == 100m ]]; then args+=(--repeats 2 --decode-context 32 --decode-steps 8); fi
  "$build/bench/bench_model" "${args[@]}"
  /usr/bin/python3 "$here/torch_bench.py" "${args[@]}"
done
