#!/usr/bin/env bash
# bench_model of two builds (say, before and after a change) on the same shapes and
# threads, alternating round by round so that both see the same machine, then a table of
# mean tokens/s per build and the ratio. Build the two bench_model binaries first, e.g.
#   git worktree add ../before <rev> && cmake -S ../before -B ../before/build && cmake --build ../before/build --target bench_model
# Usage (from the repository root):
#   bench/model/compare_builds.sh BEFORE_BUILD AFTER_BUILD [THREADS] [ROUNDS] [CONFIGS...]
set -euo pipefail
before=${1:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD [THREADS] [ROUNDS] [CONFIGS...]}
after=${2:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD [THREADS] [ROUNDS] [CONFIGS...]}
threads=${3:-2}
rounds=${4:-3}
shift $(( $# >= 4 ? 4 : $# ))
configs=("$@")
[[ ${#configs[@]} -eq 0 ]] && configs=(tiny 100m)
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for c in "${configs[@]}"; do
  args=(--config "$c" --threads "$threads" --json)
  if [[ $c == 100m ]]; then args+=(--repeats 2 --decode-context 32 --decode-steps 8); fi
  for ((r = 1; r <= rounds; ++r)); do
    echo "round $r/$rounds, $c, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    "$before/bench/bench_model" "${args[@]}" | sed 's/^{/{"build": "before", /' >> "$lines"
    "$after/bench/bench_model" "${args[@]}" | sed 's/^{/{"build": "after", /' >> "$lines"
  done
done
cat "$lines"
python3 - "$lines" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    rows.setdefault((j["config"], j["measure"], j["shape"]), {}).setdefault(j["build"], []).append(j["tokens_per_s"])
print("\n| config | measure | shape | before tokens/s | after tokens/s | after / before |")
print("|---|---|---|---:|---:|---:|")
for (c, m, s), b in rows.items():
    mb, ma = statistics.mean(b["before"]), statistics.mean(b["after"])
    sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
    print(f"| {c} | {m} | {s} | {mb:.0f} ± {sd(b['before']):.0f} | {ma:.0f} ± {sd(b['after']):.0f} | {ma / mb:.2f} |")
PY
