#!/usr/bin/env bash
# braid run's inter-step overlap end to end on the tiny model (docs/overlap.md):
# "async": true trains iteration i beside iteration i+1's generate | score, which reads
# the actor one step older: every sample is at most one step stale, and braid-train
# refuses staler ones; generate.overcommit carries deferred samples from iteration to
# iteration, recorded in metrics.jsonl, and a rollout redone after an interruption
# resumes the same deferred file.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' '{"text": "Pi is"}' '{"text": "Total:"}' > prompts.jsonl
# Temperature 3 on random weights: EOS after a few tokens or after many, a long tail.
run_file() {
  cat <<JSON
{"format": "braid.run", "version": 1, "algorithm": "grpo", $1
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}}, "reward": {"rule": "digits"}},
 "prompts": "prompts.jsonl", "iterations": 3, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 120, "temperature": 3.0, "shard_size": 4 $2},
 "train": {"lr": 0.002}}
JSON
}
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }
policy_step_of() { "$B" inspect --json "$1" | json_get /dev/stdin 'd["policy_step"]'; }

# ---- async
run_file '"async": true,' '' > async.json
"$B" run async.json -o async --dry-run > dry
grep -q -- "--max-staleness 1 .* & .*braid-generate --actor async/iter-0000/actor.h5 .* -o async/iter-0002/samples .*; wait$" dry ||
  fail "--dry-run does not show iteration 1's training beside iteration 2's rollout: $(cat dry)"
"$B" run async.json -o async > /dev/null 2> log || { cat log >&2; fail "async braid run failed"; }
grep -q "iteration 1 train beside iteration 2 generate | score" log || fail "no concurrent steps in the log"
grep -q "iteration 2 train beside iteration 3 generate | score" log || fail "no concurrent steps in the log"
for i in 1 2 3; do
  want=$(( i >= 2 ? i - 2 : 0 ))
  for f in async/iter-000$i/scored/scored-*.h5; do
    [ "$(policy_step_of "$f")" = "$want" ] || fail "iteration $i's $f is from policy step $(policy_step_of "$f"), not $want"
  done
  stale=$(json_get async/iter-000$i/train.stats.json 'd["staleness"]["max"]')
  [ "$stale" = "$(( i >= 2 ? 1 : 0 ))" ] || fail "iteration $i trained samples $stale steps stale"
done
grep -q '"staleness":{"max":1,' async/metrics.jsonl || fail "metrics.jsonl has no staleness: $(cat async/metrics.jsonl)"
# Samples one step stale are refused by a trainer that allows none.
expect_bad stale "/policy_step" "--max-staleness 0" -- \
  "$BRAID_BIN/braid-train" grpo async/iter-0003/scored/scored-00000.h5 --actor async/iter-0002/actor.h5 \
  --actor-out stale.h5 --max-staleness 0 --threads 1 -q

# ---- overcommit
run_file '' ', "overcommit": 2' > oc.json
"$B" run oc.json -o oc > /dev/null 2> log || { cat log >&2; fail "overcommit braid run failed"; }
[ "$(wc -l < oc/metrics.jsonl)" = 3 ] || fail "metrics.jsonl: $(cat oc/metrics.jsonl)"
for i in 1 2 3; do
  [ -f oc/iter-000$i/deferred.h5 ] || fail "iteration $i wrote no deferred file"
  [ "$(json_get oc/iter-000$i/metrics.json 'd["overcommit"]["batch_samples"]')" = 8 ] || fail "iteration $i's batch"
  [ "$(json_get oc/iter-000$i/metrics.json 'd["sequences"]')" = 8 ] || fail "iteration $i trained another batch"
done
carried=$(json_get oc/iter-0001/metrics.json 'd["overcommit"]["deferred_samples"]')
[ "$carried" -gt 0 ] || fail "overcommit 2 deferred nothing"
[ "$(json_get oc/iter-0002/metrics.json 'd["overcommit"]["resumed_samples"] + d["overcommit"]["carried_finished"]')" = "$carried" ] ||
  fail "iteration 2 did not take up all of iteration 1's $carried deferred samples"
# An interrupted rollout (its stats never written) is done again from the same deferred file.
cp oc/iter-0002/generate.stats.json first.json
iter1=$(cd oc/iter-0001 && find . -type f -printf '%p %T@\n' | sort)
rm oc/iter-0002/generate.stats.json oc/iter-0002/samples/gen-00001.h5
"$B" run oc.json -o oc > /dev/null 2> log2 || { cat log2 >&2; fail "the rerun failed"; }
grep -q "iteration 2 of 3" log2 || fail "iteration 2 was not redone"
[ "$(cd oc/iter-0001 && find . -type f -printf '%p %T@\n' | sort)" = "$iter1" ] || fail "redoing iteration 2 touched iteration 1"
for key in batch_samples resumed_samples resumed_tokens deferred_samples next_prompt; do
  [ "$(json_get first.json "d['overcommit']['$key']")" = "$(json_get oc/iter-0002/generate.stats.json "d['overcommit']['$key']")" ] ||
    fail "the redone rollout differs in $key"
done

# ---- both at once is refused
run_file '"async": true,' ', "overcommit": 1' > both.json
expect_bad both "both.json" "async" "overcommit" -- "$B" run both.json -o both
echo ok
