#!/usr/bin/env bash
# braid-schedgen end to end in one process: a schedule that checks itself, its refusals, a
# corrupted schedule caught by --verify, reproducible searches, the exact search
# (cli_schedgen_mpi.sh: the same under mpirun).
. "$BRAID_SOURCE/tests/common/cli.sh"
GEN="$BRAID_BIN/braid-schedgen"
FIX="$BRAID_FIXTURES/sched"

# 1. The issue's example: output keys, the bound is never above the makespan, SVG drawn.
"$GEN" "$FIX/issue_example.json" -o "$S/s.json" --svg "$S/s.svg" --time-limit 5 -q
for key in format version makespan lower_bound peak_memory baselines devices; do
  jq -e "has(\"$key\")" "$S/s.json" > /dev/null || fail "schedule.json lacks $key"
done
[[ $(jq -r .format "$S/s.json") == braid.schedule ]] || fail "wrong format name"
jq -e '.makespan >= .lower_bound - 1e-9' "$S/s.json" > /dev/null || fail "makespan below the lower bound"
jq -e '.makespan <= .baselines.greedy.makespan + 1e-9 and .makespan < .baselines.serial_1f1b.makespan' "$S/s.json" > /dev/null \
  || fail "worse than a baseline"
jq -e '[.devices[].instructions[] | select(.op=="SEND_F" or .op=="RECV_B")] | length > 0' "$S/s.json" > /dev/null \
  || fail "no communication in the instruction streams"
grep -q "<svg" "$S/s.svg" || fail "no SVG written"
"$GEN" --verify "$S/s.json" -q || fail "--verify refuses a fresh schedule"

# 2. stdin in, stdout out.
"$GEN" - --time-limit 1 -q < "$FIX/issue_example.json" | jq -e '.format == "braid.schedule"' > /dev/null \
  || fail "stdin/stdout round trip"

# 3. A memory cap is respected.
jq '.mem_capacity = 17' "$FIX/issue_example.json" > "$S/capped.json"
"$GEN" "$S/capped.json" -o "$S/capped_out.json" --time-limit 2 -q
jq -e '.peak_memory <= 17 + 1e-9 and ([.devices[].peak_memory] | max) <= 17 + 1e-9' "$S/capped_out.json" > /dev/null \
  || fail "memory cap exceeded"

# 4. Refusals: exit 2, the file and the field named, nothing written.
jq '.models[1].stages = 3' "$FIX/issue_example.json" > "$S/bad.json"
set +e
"$GEN" "$S/bad.json" -o "$S/bad_out.json" 2> "$S/bad.err"; code=$?
set -e
[[ $code == 2 ]] || fail "bad spec: exit $code, expected 2"
grep -q "bad.json" "$S/bad.err" && grep -q "models\[1\]" "$S/bad.err" || fail "bad spec: message does not name file and field"
[[ ! -e "$S/bad_out.json" ]] || fail "output written for a refused spec"
jq '.mem_capacity = 3' "$FIX/issue_example.json" > "$S/tiny_cap.json"
set +e
"$GEN" "$S/tiny_cap.json" -o "$S/tiny_out.json" 2> "$S/tiny.err"; code=$?
set -e
[[ $code == 2 ]] && grep -q mem_capacity "$S/tiny.err" || fail "an impossible memory cap is not refused"
# The spec's "anneal" block (the annealer's knobs) is read strictly: a knob out of bounds,
# a negative count, an unknown key, a wrong type.
for knob in '{"mem_level_margin": -1}' '{"mem_polish": -1}' '{"alpah": 0.99}' '{"restart": "no"}'; do
  jq --argjson k "$knob" '.anneal = $k' "$FIX/issue_example.json" > "$S/knob.json"
  set +e
  "$GEN" "$S/knob.json" -o "$S/knob_out.json" 2> "$S/knob.err"; code=$?
  set -e
  [[ $code == 2 ]] && grep -q "knob.json: anneal.$(jq -r 'keys[0]' <<< "$knob")" "$S/knob.err" && [[ ! -e "$S/knob_out.json" ]] \
    || fail "the anneal block $knob is not refused naming its field (exit $code: $(cat "$S/knob.err"))"
done
# Counts are unsigned: -1 must be refused, not wrapped to 2^64 - 1 (an endless run).
for o in --mem-exact-nodes --iterations --mem-iterations --seed; do
  set +e
  timeout 20 "$GEN" "$FIX/issue_example.json" -o "$S/count_out.json" "$o" -1 2> "$S/count.err"; code=$?
  set -e
  [[ $code == 2 ]] && grep -q -- "$o" "$S/count.err" && [[ ! -e "$S/count_out.json" ]] \
    || fail "a negative $o is not refused (exit $code)"
done

# 5. A corrupted schedule: device 0 waits first for a gradient -> deadlock, shown as a grid.
jq '.devices[0].instructions |= ([.[] | select(.op=="RECV_B")][0:1] + .)' "$S/s.json" > "$S/broken.json"
set +e
"$GEN" --verify "$S/broken.json" 2> "$S/broken.err"; code=$?
set -e
[[ $code == 2 ]] || fail "--verify of a broken schedule: exit $code, expected 2"
grep -q deadlock "$S/broken.err" && grep -q "step" "$S/broken.err" || fail "deadlock not reported with a grid"

# 6. Reproducible: with an iteration budget alone, the same spec, seed and rank count
# give the same file bit for bit, but for the wall-clock figures of the search.
INT="$BRAID_SOURCE/examples/schedgen/table3int_65B_33B_pp16_8_gbs16.json"
repro=(--iterations 300000 --mem-iterations 50000 -q)
jq '.anneal = {"sync_every": 20000}' "$INT" > "$S/int_sync.json"
no_clock() { jq -S 'del(.search.seconds, .search.seconds_to_best, .search.seconds_to_bound, .search.mem_seconds)' "$1"; }
"$GEN" "$S/int_sync.json" -o "$S/r1.json" "${repro[@]}" --seed 3
"$GEN" "$S/int_sync.json" -o "$S/r2.json" "${repro[@]}" --seed 3
[[ $(jq .search.time_limit "$S/r1.json") == 0 ]] || fail "--iterations alone still set a time limit"
jq -e '.search.preset == "default" and .search.anneal.sync_every == 20000 and .search.anneal.alpha == 0.999995' "$S/r1.json" \
  > /dev/null || fail "the spec's anneal block is not what the run records: $(jq -c .search.anneal "$S/r1.json")"
cmp <(no_clock "$S/r1.json") <(no_clock "$S/r2.json") > /dev/null || fail "two runs with --iterations differ"
"$GEN" "$S/int_sync.json" -o "$S/r3.json" "${repro[@]}" --seed 4
cmp <(no_clock "$S/r1.json") <(no_clock "$S/r3.json") > /dev/null && fail "seeds 3 and 4 gave the same file"

# 6b. --start both: the second search (from 1F1B) runs only when the first reached the
# bound within a tenth of the budget. int 8/4 GBS 16 is at the bound in greedy itself;
# int 16/8 GBS 16 with seed 1 needs 353,088 neighbours, more than a tenth of 2M.
"$GEN" "$BRAID_SOURCE/examples/schedgen/table3int_33B_13B_pp8_4_gbs16.json" -o "$S/quick.json" \
  --iterations 200000 --mem-iterations 20000 --seed 1 -q
"$GEN" "$INT" -o "$S/slow.json" --iterations 2000000 --mem-iterations 20000 --seed 1 -q
for f in quick slow; do
  jq -e '.lower_bound_reached and .search.iterations_to_bound != null and
         (.search.mem_candidates == (if .search.iterations_to_bound <= .search.iterations_limit / 10 then 2 else 1 end))' \
    "$S/$f.json" > /dev/null || fail "--start both, $f first search: $(jq -c .search "$S/$f.json")"
done
[[ $(jq .search.mem_candidates "$S/quick.json") == 2 && $(jq .search.mem_candidates "$S/slow.json") == 1 ]] \
  || fail "--start both: the second search ran or was skipped where it should not"
# 6c. The exact search at the end of the memory phase (a small grid): it ran within its
# budget, and without it (--mem-exact-nodes 0) the same run ends no lower. The knobs of
# the run without it come from all three places, each over the last: --preset thorough,
# the spec's anneal block (thorough's level margin back at the default's; 5 exact nodes),
# the flag (0 nodes): the default's knobs but for the exact search.
jq '.anneal = {"mem_level_margin": 2, "mem_exact_nodes": 5}' \
  "$BRAID_SOURCE/examples/schedgen/table3int_33B_13B_pp8_4_gbs16.json" > "$S/int84_knobs.json"
"$GEN" "$S/int84_knobs.json" -o "$S/no_exact.json" --preset thorough \
  --iterations 200000 --mem-iterations 20000 --seed 1 --mem-exact-nodes 0 -q
jq -n --slurpfile a "$S/quick.json" --slurpfile b "$S/no_exact.json" \
  '$b[0].search.anneal.mem_exact_nodes == 0 and ($a[0].search.anneal | del(.mem_exact_nodes)) == ($b[0].search.anneal | del(.mem_exact_nodes))' \
  | grep -q true || fail "preset < anneal block < flag does not hold: $(jq -c .search.anneal "$S/no_exact.json")"
jq -e '.search.mem_exact_nodes > 0 and .search.mem_exact_nodes <= .search.anneal.mem_exact_nodes' "$S/quick.json" > /dev/null \
  || fail "the exact search did not run, or ran past its budget: $(jq -c .search "$S/quick.json")"
jq -e '.search.mem_exact_nodes == 0 and .search.mem_exact_levels == 0' "$S/no_exact.json" > /dev/null \
  || fail "--mem-exact-nodes 0 still searched"
jq -n --slurpfile a "$S/quick.json" --slurpfile b "$S/no_exact.json" \
  '$a[0].makespan == $b[0].makespan and $a[0].peak_memory <= $b[0].peak_memory + 1e-9 and
   (($a[0].search.mem_exact_levels > 0) == ($a[0].peak_memory < $b[0].peak_memory - 1e-9))' | grep -q true \
  || fail "the exact search changed the makespan or raised the peak: $(jq -c '[.makespan, .peak_memory]' "$S/quick.json" "$S/no_exact.json")"

# 6d. Table 3's real 8/4 GBS 16 at its bound with serial 1F1B's peak (the paper's 1.0x),
# which only the exact search reaches (the memory pass alone stops at 1.0032x or above).
"$GEN" "$BRAID_SOURCE/examples/schedgen/table3_33B_13B_pp8_4_gbs16.json" -o "$S/t3_84.json" \
  --iterations 500000 --mem-iterations 20000 --mem-exact-nodes 20000 --seed 1 -q
jq -e '.lower_bound_reached and .memory_over_serial_1f1b <= 1 + 1e-9' "$S/t3_84.json" > /dev/null \
  || fail "real 8/4 GBS 16 not at the bound with serial 1F1B's peak: $(jq -c '[.makespan, .lower_bound, .memory_over_serial_1f1b, .search.mem_exact_nodes]' "$S/t3_84.json")"
"$GEN" --verify "$S/t3_84.json" -q || fail "real 8/4 GBS 16's schedule does not verify"

# 6e. Table 3's real 16/8 GBS 32 at its bound with serial 1F1B's peak (5M neighbours of
# memory pass and 40,000 nodes of exact search: most of this test's time) is measured by
# bench/sched/table3.sh with the other 23 settings (docs/tools/schedgen.md), not here.

# 7. A file-size limit (a disk that fills): exit 2 naming the schedule and the reason,
# nothing under its name and no temp file left. One process starts no MPI (whose start-up
# writes files of its own and failed first, exit 1).
set +e
( ulimit -f 4; exec "$GEN" "$FIX/issue_example.json" -o "$S/capped_file.json" --time-limit 1 -q ) 2> "$S/capped_file.err"
code=$?
set -e
[[ $code == 2 ]] || { cat "$S/capped_file.err" >&2; fail "under ulimit -f: exit $code, expected 2"; }
grep -q "capped_file.json" "$S/capped_file.err" && grep -q "File too large" "$S/capped_file.err" \
  || { cat "$S/capped_file.err" >&2; fail "under ulimit -f: the file or the reason not named"; }
[[ ! -e "$S/capped_file.json" && -z $(find "$S" -name '.capped_file.json.tmp-*') ]] || fail "under ulimit -f: a file left"

echo "ok"
