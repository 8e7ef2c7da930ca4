#!/usr/bin/env bash
# braid-schedgen under mpirun: help and usage errors printed once, two ranks reproducible and
# never worse than one with the same per-rank budget, the rank at the bound stopping its
# peers (cli_schedgen.sh: the one-process cases).
. "$BRAID_SOURCE/tests/common/cli.sh"
GEN="$BRAID_BIN/braid-schedgen"
FIX="$BRAID_FIXTURES/sched"
INT="$BRAID_SOURCE/examples/schedgen/table3int_65B_33B_pp16_8_gbs16.json"
repro=(--iterations 300000 --mem-iterations 50000 -q)
no_clock() { jq -S 'del(.search.seconds, .search.seconds_to_best, .search.seconds_to_bound, .search.mem_seconds)' "$1"; }

needs_mpirun
jq '.anneal = {"sync_every": 20000}' "$INT" > "$S/int_sync.json"

# Rank 0 of two ranks does exactly what one rank does; the best of two is never worse.
# Help and usage errors come once, from the first rank, not once a rank.
n=$(mpirun -np 2 --oversubscribe "$GEN" --help 2>&1 | grep -c '^Options:' || true)
[[ $n == 1 ]] || fail "--help under mpirun -np 2 printed $n times"
n=$(mpirun -np 2 --oversubscribe "$GEN" --no-such-option 2>&1 | grep -c 'no-such-option' || true)
[[ $n == 1 ]] || fail "a usage error under mpirun -np 2 printed $n times"
# Two ranks that share schedules: still a function of spec, seed and rank count.
mpirun -np 2 --oversubscribe "$GEN" "$S/int_sync.json" -o "$S/m1.json" "${repro[@]}" --seed 3
mpirun -np 2 --oversubscribe "$GEN" "$S/int_sync.json" -o "$S/m2.json" "${repro[@]}" --seed 3
cmp <(no_clock "$S/m1.json") <(no_clock "$S/m2.json") > /dev/null || fail "two runs under mpirun -np 2 differ"
budget=(--iterations 30000 --time-limit 0 --mem-iterations 20000 --seed 7 -q)
jq '.anneal = {"share": false}' "$FIX/uneven.json" > "$S/uneven_no_share.json"
mpirun -np 1 "$GEN" "$S/uneven_no_share.json" -o "$S/np1.json" "${budget[@]}"
mpirun -np 2 --oversubscribe "$GEN" "$S/uneven_no_share.json" -o "$S/np2.json" "${budget[@]}"
[[ $(jq .search.ranks "$S/np2.json") == 2 ]] || fail "two ranks did not both search"
jq -n --slurpfile a "$S/np1.json" --slurpfile b "$S/np2.json" \
  '$b[0].makespan <= $a[0].makespan + 1e-9 and ($b[0].makespan < $a[0].makespan or $b[0].peak_memory <= $a[0].peak_memory + 1e-9)' \
  | grep -q true || fail "2 ranks worse than 1: $(jq .makespan "$S/np2.json") vs $(jq .makespan "$S/np1.json")"
"$GEN" --verify "$S/np2.json" -q || fail "the reduced schedule does not verify"
# The first rank at the bound stops the others: with a generous time limit no rank
# anneals on (it would run for minutes and the counts would not add up).
mpirun -np 3 --oversubscribe "$GEN" "$BRAID_SOURCE/examples/schedgen/table3_33B_13B_pp8_4_gbs8.json" \
  -o "$S/np3.json" --time-limit 300 --mem-iterations 100000 --start greedy -q
jq -e '.search | .ranks_at_bound >= 1 and .ranks_at_bound + .ranks_stopped_by_peer == 3' "$S/np3.json" > /dev/null \
  || fail "ranks did not stop at the bound: $(jq -c .search "$S/np3.json")"
# Meeting by the clock, the rank at the bound calls the other at once, not at its next
# meeting: rank 1 walks at 1e300 x t0 (it never cools to the bound in 20 s) and meets
# every 1000 s, so a rank 0 that waited for it would stop only at the time limit.
jq '.anneal = {"sync_seconds": 1000, "t0_cycle": [1, 1e300]}' "$BRAID_SOURCE/examples/schedgen/table3_33B_13B_pp8_4_gbs8.json" \
  > "$S/hot_rank.json"
mpirun -np 2 --oversubscribe "$GEN" "$S/hot_rank.json" \
  -o "$S/call.json" --time-limit 20 --mem-iterations 100000 --start greedy -q
jq -e '.search | .ranks_at_bound == 1 and .ranks_stopped_by_peer == 1 and .seconds_to_bound < 10' "$S/call.json" \
  > /dev/null || fail "the rank at the bound did not call its peer at once: $(jq -c .search "$S/call.json")"
echo "ok"
