#!/usr/bin/env bash
# braid-schedgen on all 24 settings of RLHFuse Table 3: the twelve in braid's
# encoding (examples/schedgen/table3_*.json, real-valued costs from Table 2's
# shapes) and the same twelve as the paper's public code encodes them
# (table3int_*.json: small integer costs, the flat landscape). One row per run:
# makespan over the lower bound, the paper's result as the anchor, peak memory,
# time to the bound, iterations.
#
#   bench/sched/table3.sh [TIME_LIMIT_S] [RANKS] [SEEDS]      e.g. table3.sh 30 1 "1 2 3"
#
# braid-schedgen comes from $BRAID_BIN (default build/bin); schedules go to
# ${OUT:-table3-bench}/. ONLY=int or ONLY=real runs one encoding; PICK=regex
# runs the settings whose name matches. FLAGS="..." adds braid-schedgen options
# (e.g. --preset thorough); ANNEAL='{"share": false}' gives every spec that "anneal"
# block (the annealer's knobs, docs/tools/schedgen.md), in copies under the output folder.
#
# ITERATIONS=N (and MEM_ITERATIONS=M) replace the time limit by budgets of
# neighbours (latency search per rank / memory pass): the result is then a function
# of the spec, the seed and the rank count, whatever else the machine runs; the
# "cpu s" column (user time of the process) says what the budget cost.
#
# Anchors. int: the paper's code's own runs (FlexFusion results/trace_exp*.txt,
# 768 cores; the memory after its memory optimizer where the repository has
# one); real: the paper's Table 3 (makespan: reached its bound or not; memory
# relative to serial 1F1B).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
limit="${1:-30}"
ranks="${2:-1}"
seeds="${3:-1}"
gen="${BRAID_BIN:-$root/build/bin}/braid-schedgen"
out="${OUT:-table3-bench}"
mkdir -p "$out"
launch=()
if [[ "$ranks" -gt 1 ]]; then launch=(mpirun -np "$ranks" --oversubscribe); fi

# setting: paper makespan, paper peak memory (int: absolute; real: x serial 1F1B)
declare -A int_mk=( [33B_13B_pp8_4_gbs8]=225 [33B_13B_pp8_4_gbs16]=372 [33B_13B_pp8_4_gbs32]=708
                    [33B_13B_pp8_8_gbs8]=225 [33B_13B_pp8_8_gbs16]=366 [33B_13B_pp8_8_gbs32]=702
                    [65B_33B_pp16_8_gbs16]=186 [65B_33B_pp16_8_gbs32]=330 [65B_33B_pp16_8_gbs64]=618
                    [65B_33B_pp16_16_gbs16]=186 [65B_33B_pp16_16_gbs32]=318 [65B_33B_pp16_16_gbs64]=613 )
declare -A int_mem=( [33B_13B_pp8_4_gbs8]=15.60 [33B_13B_pp8_4_gbs16]=15.75 [33B_13B_pp8_4_gbs32]=19.70
                     [33B_13B_pp8_8_gbs8]=15.60 [33B_13B_pp8_8_gbs16]=18.55 [33B_13B_pp8_8_gbs32]=20.50
                     [65B_33B_pp16_8_gbs16]=26.24 [65B_33B_pp16_8_gbs32]=29.88 [65B_33B_pp16_8_gbs64]=39.72
                     [65B_33B_pp16_16_gbs16]=26.24 [65B_33B_pp16_16_gbs32]=32.16 [65B_33B_pp16_16_gbs64]=38.72 )
declare -A real_mem=( [33B_13B_pp8_4_gbs8]=1.0 [33B_13B_pp8_4_gbs16]=1.0 [33B_13B_pp8_4_gbs32]=1.26
                      [33B_13B_pp8_8_gbs8]=1.0 [33B_13B_pp8_8_gbs16]=1.19 [33B_13B_pp8_8_gbs32]=1.31
                      [65B_33B_pp16_8_gbs16]=1.0 [65B_33B_pp16_8_gbs32]=1.0 [65B_33B_pp16_8_gbs64]=1.26
                      [65B_33B_pp16_16_gbs16]=1.0 [65B_33B_pp16_16_gbs32]=1.22 [65B_33B_pp16_16_gbs64]=1.47 )
settings=(33B_13B_pp8_4_gbs8 33B_13B_pp8_4_gbs16 33B_13B_pp8_4_gbs32 33B_13B_pp8_8_gbs8 33B_13B_pp8_8_gbs16
          33B_13B_pp8_8_gbs32 65B_33B_pp16_8_gbs16 65B_33B_pp16_8_gbs32 65B_33B_pp16_8_gbs64
          65B_33B_pp16_16_gbs16 65B_33B_pp16_16_gbs32 65B_33B_pp16_16_gbs64)

echo "# $(date -u +%FT%TZ) limit ${limit}s ranks $ranks seeds $seeds load $(cut -d" " -f1-3 /proc/loadavg)${FLAGS:+ flags $FLAGS}${ANNEAL:+ anneal $ANNEAL}"
budget=(--time-limit "$limit")
if [[ -n "${ITERATIONS:-}" ]]; then
  budget=(--iterations "$ITERATIONS")
  [[ -n "${MEM_ITERATIONS:-}" ]] && budget+=(--mem-iterations "$MEM_ITERATIONS")
  echo "# budgets: --iterations $ITERATIONS --mem-iterations ${MEM_ITERATIONS:-default}"
fi
echo "| enc | setting | seed | makespan / bound | paper | peak mem | paper mem | s to bound | iterations | start | wall s | cpu s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for enc in real int; do
  [[ -n "${ONLY:-}" && "$ONLY" != "$enc" ]] && continue
  prefix=table3; [[ $enc == int ]] && prefix=table3int
  for s in "${settings[@]}"; do
    [[ -n "${PICK:-}" && ! "$s" =~ $PICK ]] && continue
    for seed in $seeds; do
      name="${prefix}_$s"
      spec="$root/examples/schedgen/$name.json"
      if [[ -n "${ANNEAL:-}" ]]; then
        mkdir -p "$out/specs"
        jq --argjson a "$ANNEAL" '.anneal = $a' "$spec" > "$out/specs/$name.json"
        spec="$out/specs/$name.json"
      fi
      t0=$(date +%s.%N)
      /usr/bin/time -f %U -o "$out/$name.s$seed.cpu" "${launch[@]}" "$gen" "$spec" \
        -o "$out/$name.s$seed.json" "${budget[@]}" --seed "$seed" -q ${FLAGS:-}
      t1=$(date +%s.%N)
      cpu=$(cat "$out/$name.s$seed.cpu")
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
      if [[ $enc == int ]]; then
        paper="${int_mk[$s]} ($(awk -v m="${int_mk[$s]}" -v b="$(jq .lower_bound "$out/$name.s$seed.json")" 'BEGIN { printf "%+.2f%%", (m / b - 1) * 100 }'))"
        pmem="${int_mem[$s]}"
        mem=$(jq -r '.peak_memory * 100 | round / 100' "$out/$name.s$seed.json")
      else
        paper="$([[ $s == 65B_33B_pp16_16_gbs64 ]] && echo "above (1.16 vs 1.17)" || echo "bound")"
        pmem="${real_mem[$s]}x"
        mem=$(jq -r '(.memory_over_serial_1f1b * 100 | round / 100 | tostring) + "x"' "$out/$name.s$seed.json")
      fi
      jq -r --arg enc "$enc" --arg s "$s" --arg seed "$seed" --arg paper "$paper" --arg pmem "$pmem" \
            --arg mem "$mem" --arg wall "$wall" --arg cpu "$cpu" '
        "| \($enc) | \($s) | \($seed) | \(.makespan * 1000 | round / 1000) / \(.lower_bound * 1000 | round / 1000)" +
        (if .lower_bound_reached then " (bound)" else " (+\((.makespan / .lower_bound - 1) * 10000 | round / 100)%)" end) +
        " | \($paper) | \($mem) | \($pmem) | " +
        (if .search.seconds_to_bound != null then (.search.seconds_to_bound * 100 | round / 100 | tostring) else "-" end) +
        " | \(.search.iterations_to_bound // .search.iterations) | \(.search.start_used) | \($wall) | \($cpu) |"' "$out/$name.s$seed.json"
    done
  done
done
