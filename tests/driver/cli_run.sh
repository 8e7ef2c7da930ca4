#!/usr/bin/env bash
# braid run and braid makefile end to end on the tiny model: 2 iterations give
# checkpoints of steps 1 and 2 and two metrics lines; a rerun does nothing; a
# deleted checkpoint is redone alone; the Makefile makes the same files and is
# then up to date; a broken prompts file stops the run with exit 2 naming the stage.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
step_of() { "$B" inspect --json "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }
# Every file of a run folder with its modification time (metrics.jsonl is rewritten on every
# run, and .braid-run.owner names each driver while it works: lib/driver/run_lock.hpp).
snapshot() { (cd "$1" && find . -type f ! -name metrics.jsonl ! -name .braid-run.owner -printf '%p %T@\n' | sort); }
h5_names() { (cd "$1" && find . -type f -name '*.h5' ! -name '.*' | sort); }

. "$BRAID_SOURCE/tests/driver/tiny_run.sh"

"$B" run run.json -o out > stdout 2> log || { cat log >&2; fail "braid run failed"; }
[ "$(cat stdout)" = "$(printf 'out/iter-0002/actor.h5\nout/iter-0002/critic.h5')" ] || fail "stdout: $(cat stdout)"
for i in 1 2; do
  for m in actor critic; do
    [ "$(step_of "out/iter-000$i/$m.h5")" = "$i" ] || fail "iteration $i's $m is not at step $i"
  done
  ls out/iter-000$i/samples/gen-*.h5 > /dev/null || fail "iteration $i has no samples"
  [ "$(ls out/iter-000$i/scored/scored-*.h5 | wc -l)" = "$(ls out/iter-000$i/samples/gen-*.h5 | wc -l)" ] ||
    fail "iteration $i: not every sample shard was scored"
  grep -q "iteration $i: reward " log || fail "no summary line for iteration $i"
done
[ "$(wc -l < out/metrics.jsonl)" = 2 ] || fail "metrics.jsonl has $(wc -l < out/metrics.jsonl) lines"
grep -q '^{"iteration":1,"sequences":8,' out/metrics.jsonl || fail "metrics line 1: $(head -1 out/metrics.jsonl)"
grep -q '^{"iteration":2,.*"mean_reward":' out/metrics.jsonl || fail "metrics line 2: $(tail -1 out/metrics.jsonl)"

# A rerun of a finished run touches nothing.
before=$(snapshot out)
"$B" run run.json -o out > /dev/null 2> log2
[ "$(snapshot out)" = "$before" ] || fail "a rerun of a finished run changed files"
grep -q "already complete" log2 || fail "the rerun did not say the run was complete"
[ -z "$("$B" run run.json -o out --dry-run)" ] || fail "--dry-run on a finished run would run something"

# While a driver works in a folder (here flock(1) holds its lock), a second one is refused.
set +e
flock out/.braid-run.lock "$B" run run.json -o out > /dev/null 2> lockedlog
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "out: pid [0-9]* on host .* is working in this run folder" lockedlog ||
  { cat lockedlog >&2; fail "a second driver in a busy folder: exit $rc"; }

# Deleting iteration 2's actor redoes iteration 2's training and nothing else.
iter1=$(snapshot out/iter-0001)
samples2=$(snapshot out/iter-0002/samples)
rm out/iter-0002/actor.h5
"$B" run run.json -o out --dry-run > dry
[ "$(wc -l < dry)" = 1 ] && grep -q "braid-train ppo out/iter-0002/scored/scored-\*.h5 --actor out/iter-0001/actor.h5 --actor-out out/iter-0002/actor.h5 " dry ||
  fail "--dry-run after deleting iteration 2's actor: $(cat dry)"
"$B" run run.json -o out > /dev/null 2> log3
[ "$(step_of out/iter-0002/actor.h5)" = 2 ] || fail "the redone actor is not at step 2"
[ "$(snapshot out/iter-0001)" = "$iter1" ] || fail "redoing iteration 2 touched iteration 1"
[ "$(snapshot out/iter-0002/samples)" = "$samples2" ] || fail "redoing iteration 2's training regenerated samples"
grep -q "iteration 2 of 2" log3 || fail "iteration 2 was not redone"
if grep -q "iteration 1 of 2" log3; then fail "iteration 1 was redone"; fi

# braid run's folder is up to date for its Makefile; a Makefile run makes the same files.
"$B" makefile run.json -d out -o out.mk
make -q -f out.mk || fail "make finds work left in braid run's finished folder"
"$B" makefile run.json -d mk -o Makefile
make -j2 -f Makefile > makelog 2>&1 || { cat makelog >&2; fail "make failed"; }
[ "$(h5_names mk)" = "$(h5_names out)" ] || fail "make and braid run made different files"
for f in iter-0001/actor.h5 iter-0001/critic.h5 iter-0002/actor.h5 iter-0002/critic.h5; do
  [ "$(step_of "mk/$f")" = "$(step_of "out/$f")" ] || fail "mk/$f is at another step than out/$f"
done
[ "$(wc -l < mk/metrics.jsonl)" = 2 ] || fail "make's metrics.jsonl has $(wc -l < mk/metrics.jsonl) lines"
make -q -f Makefile || fail "make -q: the finished Makefile run is not up to date"
[ -z "$(make -n -s -f Makefile)" ] || fail "make -n after completion would still run: $(make -n -s -f Makefile)"
# make takes the folder lock too: while a driver holds it, make's recipes are refused.
rm mk/iter-0002/actor.h5
set +e
flock mk/.braid-run.lock make -f Makefile > makelog2 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && grep -q "mk: pid [0-9]* on host .* is working in this run folder" makelog2 || { cat makelog2 >&2; fail "make in a busy folder: exit $rc"; }
[ ! -e mk/iter-0002/actor.h5 ] || fail "make trained in a busy folder"
make -f Makefile > makelog3 2>&1 || { cat makelog3 >&2; fail "make after the lock was released"; }
[ "$(step_of mk/iter-0002/actor.h5)" = 2 ] || fail "make did not train iteration 2 again"

# A broken prompts file: generate fails, the run stops with its exit code and names it.
printf '%s\n' '{"text": "ok"}' 'not json' > bad.jsonl
sed 's/"prompts.jsonl"/"bad.jsonl"/' run.json > bad.json
set +e
"$B" run bad.json -o badout > /dev/null 2> badlog
rc=$?
set -e
[ "$rc" = 2 ] || { cat badlog >&2; fail "a broken prompts file exited $rc, not 2"; }
grep -q "iteration 1 generate | score: generate failed with exit code 2: .*braid-generate" badlog ||
  { cat badlog >&2; fail "the failing stage is not named"; }
[ ! -e badout/iter-0001/actor.h5 ] || fail "a checkpoint was written after a failed stage"
# A braid without its stage tools (none beside it, none on PATH) stops before starting anything.
mkdir lonely && cp "$B" lonely/braid
set +e
PATH=/usr/bin:/bin lonely/braid run run.json -o lonely_out > /dev/null 2> lonelylog
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "cannot find braid-generate, braid-score, braid-train" lonelylog ||
  { cat lonelylog >&2; fail "missing stage tools: exit $rc"; }
[ ! -e lonely_out/iter-0000 ] || fail "the run started without its tools"

# GRPO with a reward model and a reference model of their own: no critic anywhere.
cat > grpo.json <<'JSON'
{"format": "braid.run", "version": 1, "algorithm": "grpo",
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
            "ref": {"init": {"config": "config.json", "seed": 1}},
            "reward": {"init": {"config": "config.json", "seed": 3}}},
 "prompts": "prompts.jsonl", "iterations": 1, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 4, "shard_size": 4},
 "train": {"lr": 0.001, "kl_coef": 0.04}}
JSON
"$B" run grpo.json -o grpo > stdout 2> grpolog || { cat grpolog >&2; fail "the GRPO run failed"; }
[ "$(cat stdout)" = grpo/iter-0001/actor.h5 ] || fail "GRPO stdout: $(cat stdout)"
[ "$(h5_names grpo/iter-0000)" = "$(printf './actor.h5\n./ref.h5\n./reward.h5')" ] || fail "GRPO start models: $(h5_names grpo/iter-0000)"
[ "$(step_of grpo/iter-0001/actor.h5)" = 1 ] || fail "the GRPO actor is not at step 1"
[ ! -e grpo/iter-0001/critic.h5 ] || fail "GRPO wrote a critic"
grep -q '"kl":' grpo/metrics.jsonl || fail "no KL with a reference model"

# PPO with the fused actor+critic pipeline: a braid-schedgen schedule for 2 stages of
# each model, braid-train --schedule under mpirun -np 2, two iterations, each
# checkpoint as stage files that the next iteration reads back.
if command -v mpirun > /dev/null; then
  tiny_schedule 4 --iterations 20000 --time-limit 0 --mem-iterations 2000 -q
  ppo_run '{"generate": {"samples_per_prompt": 2, "max_new_tokens": 4, "shard_size": 4},
    "train": {"lr": 0.001, "schedule": "schedule.json"}}' > fused.json
  "$B" run fused.json -o fused > stdout 2> fusedlog || { cat fusedlog >&2; fail "the fused PPO run failed"; }
  for m in actor critic; do
    for i in 0 1; do
      f=fused/iter-0002/$m.stage$i-of-2.h5
      [ -f "$f" ] || fail "the fused run wrote no $f"
      [ "$(step_of "$f")" = 2 ] || fail "$f is not at step 2"
      [ -f fused/iter-0002/$m.optim.stage$i-of-2.h5 ] || fail "no optimizer state beside $f"
    done
  done
  [ "$(wc -l < fused/metrics.jsonl)" = 2 ] || fail "the fused run logged $(wc -l < fused/metrics.jsonl) iterations"
  # The report draws the schedule's timeline (braid-schedgen's drawing) and names the schedule.
  grep -q 'id="schedule"' fused/report.svg || fail "the fused run's report.svg has no schedule"
  grep -q '"schedule": {' fused/report.json || fail "the fused run's report.json names no schedule"
  ! grep -q 'id="schedule"' out/report.svg || fail "a run without a schedule drew one"
  "$B" run fused.json -o fused > /dev/null 2> fusedlog2 || fail "the fused rerun failed"
  grep -q "already complete" fusedlog2 || { cat fusedlog2 >&2; fail "the fused rerun redid work"; }
fi
echo "ok"
