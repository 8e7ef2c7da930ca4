#!/usr/bin/env bash
# Runs braid-schedgen on every Table 3 spec here and prints one markdown table
# row per setting: speedup over serial 1F1B (greedy, braid), the bound's
# speedup, whether braid reached it, peak memory relative to serial 1F1B, wall time.
#
#   examples/schedgen/run_table3.sh [TIME_LIMIT_S] [RANKS]     (braid-schedgen on PATH or in $BRAID_BIN)
# Schedules and SVGs go to ${OUT:-table3-out}/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
limit="${1:-30}"
ranks="${2:-1}"
gen="${BRAID_BIN:+$BRAID_BIN/}braid-schedgen"
out="${OUT:-table3-out}"
mkdir -p "$out"
launch=()
if [[ "$ranks" -gt 1 ]]; then launch=(mpirun -np "$ranks" --oversubscribe); fi

echo "| models | PP0 | PP1 | GBS | greedy speedup | braid speedup | LB speedup | LB reached | greedy mem | braid mem | wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for gbs_models in 33B_13B:8:4:8 33B_13B:8:4:16 33B_13B:8:4:32 33B_13B:8:8:8 33B_13B:8:8:16 33B_13B:8:8:32 \
                  65B_33B:16:8:16 65B_33B:16:8:32 65B_33B:16:8:64 65B_33B:16:16:16 65B_33B:16:16:32 65B_33B:16:16:64; do
  IFS=: read -r models pp0 pp1 gbs <<< "$gbs_models"
  name="table3_${models}_pp${pp0}_${pp1}_gbs${gbs}"
  t0=$(date +%s.%N)
  "${launch[@]}" "$gen" "$here/$name.json" -o "$out/$name.schedule.json" --svg "$out/$name.svg" \
    --time-limit "$limit" -q
  t1=$(date +%s.%N)
  jq -r --arg m "${models/_//}" --arg p0 "$pp0" --arg p1 "$pp1" --arg g "$gbs" \
        --arg wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" '
    def r2: (. * 100 | round) / 100;
    "| \($m) | \($p0) | \($p1) | \($g) | \(.baselines.serial_1f1b.makespan / .baselines.greedy.makespan | r2) | \(.speedup_over_serial_1f1b | r2) | \(.baselines.serial_1f1b.makespan / .lower_bound | r2) | \(if .lower_bound_reached then "yes" else "no (+\((.makespan / .lower_bound - 1) * 10000 | round / 100)%)" end) | \(.baselines.greedy.peak_memory / .baselines.serial_1f1b.peak_memory | r2) | \(.memory_over_serial_1f1b | r2) | \($wall | tonumber | . * 10 | round / 10) |"' \
    "$out/$name.schedule.json"
done
