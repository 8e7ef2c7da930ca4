#!/usr/bin/env bash
# Plans with tensor and pipeline parallelism run end to end (docs/tools/run.md, "Running a
# plan"): braid-meshplan plans the tiny PPO for this machine as 1 node of 2 devices with
# every call fixed at tp 2 (--fix all=d1t2p1), then with the training fixed at pp 2
# (--fix train=d1t1p2, train.fuse: the fused pipeline of 2 stages). Each runs 2 iterations
# with held-out evaluation of the tp 2 and the staged checkpoints. Checks: the checkpoints
# are tp files and stage files as planned; the names braid run prints open in braid eval,
# braid export, braid inspect and braid check; a deleted checkpoint file is trained again
# on a rerun (resume), a finished run does nothing again.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
needs_mpirun

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
cp "$BRAID_SOURCE/examples/plan-run/cluster-1x2.json" cluster.json
cp "$BRAID_SOURCE/examples/plan-run/profile.json" profile.json
questions 1 8 > prompts.jsonl
questions 11 14 3 > heldout.jsonl
/usr/bin/python3 - <<'PY'
import json
lens = [len(l.encode()) + 1 for l in open("prompts.jsonl").read().split("\n") if l for _ in range(2)]
json.dump({"format": "braid.experiment", "version": 1, "algorithm": "ppo",
           "models": {r: {"config": "config.json"} for r in ("actor", "ref", "critic", "reward")},
           "batch": {"global": 16, "mini": 8}, "ppo_epochs": 1,
           "prompt_len": {"dist": "samples", "values": lens}, "response_len": {"dist": "fixed", "value": 8}},
          open("experiment.json", "w"))
PY
run_file() {  # $1: braid-meshplan's --fix options (JSON words), $2: more train keys
  cat <<JSON
{"format": "braid.run", "version": 1, "algorithm": "ppo",
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
            "critic": {"init": {"config": "config.json", "seed": 2}},
            "reward": {"init": {"config": "config.json", "seed": 3}}},
 "prompts": "prompts.jsonl", "iterations": 2, "seed": 0, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 8, "limit": 8, "shard_size": 4},
 "train": {"lr": 0.001, "critic_lr": 0.001, "mini_batch": 8 $2},
 "eval": {"prompts": "heldout.jsonl", "every": 2, "samples": 1, "rule": "digits", "max_new_tokens": 8},
 "mpirun": {"options": ["--oversubscribe"]},
 "plan": {"experiment": "experiment.json", "cluster": "cluster.json", "profile": "profile.json",
          "options": ["--time-limit", "1", $1]}}
JSON
}

# check NAME CKPT...: the printed checkpoints open in every reader.
check_readers() {
  local name=$1; shift
  for ckpt in "$@"; do
    "$B/braid" check "$ckpt" || fail "$name: braid check $ckpt"
    "$B/braid" inspect --json "$ckpt" > /dev/null || fail "$name: braid inspect $ckpt"
  done
  "$B/braid" -q export "$1" -o "$name-hf" > /dev/null || fail "$name: braid export $1"
  "$B/braid" -q eval "$1" --prompts heldout.jsonl --reward-rule digits --max-new-tokens 4 -o "$name-eval.json" \
    || fail "$name: braid eval $1"
  [[ -f "$name-eval.json" ]] || fail "$name: braid eval wrote nothing"
}

# --- tp 2 everywhere ---
run_file '"--fix", "all=d1t2p1"' "" > tp.json
"$B/braid" run tp.json -o tp > tp.out 2> tp.err || { cat tp.err; fail "the tp 2 plan's run failed"; }
for m in actor critic; do
  for r in 0 1; do [[ -f tp/iter-0002/$m.tp$r-of-2.h5 ]] || fail "tp: no $m.tp$r-of-2.h5: $(ls tp/iter-0002)"; done
done
[[ -f tp/iter-0002/eval.json && -f tp/iter-0000/eval.json ]] || fail "tp: the held-out evaluations are missing"
mapfile -t printed < tp.out
[[ ${#printed[@]} == 2 ]] || fail "tp: braid run printed $(cat tp.out)"
check_readers tp "${printed[@]}"
# Resume: a checkpoint file of the last iteration lost, trained again; then nothing to do.
rm tp/iter-0002/actor.tp1-of-2.h5
"$B/braid" run tp.json -o tp > tp2.out 2> tp2.err || { cat tp2.err; fail "tp: the rerun failed"; }
grep -q "iteration 2 of 2: iteration 2 train" tp2.err || fail "tp: iteration 2's training was not redone: $(cat tp2.err)"
grep -q "iteration 1 of 2" tp2.err && fail "tp: the rerun redid iteration 1: $(cat tp2.err)"
[[ -f tp/iter-0002/actor.tp1-of-2.h5 ]] || fail "tp: the lost file was not written again"
"$B/braid" run tp.json -o tp > tp3.out 2> tp3.err || { cat tp3.err; fail "tp: the second rerun failed"; }
grep -q "all 2 iterations were already complete" tp3.err || fail "tp: a finished run did work again: $(cat tp3.err)"

# --- pp 2: the fused actor+critic pipeline of 2 stages ---
run_file '"--fix", "train=d1t1p2"' ', "fuse": true' > pp.json
"$B/braid" run pp.json -o pp > pp.out 2> pp.err || { cat pp.err; fail "the pp 2 plan's run failed"; }
for m in actor critic; do
  for s in 0 1; do [[ -f pp/iter-0002/$m.stage$s-of-2.h5 ]] || fail "pp: no $m.stage$s-of-2.h5: $(ls pp/iter-0002)"; done
  for s in 0 1; do [[ -f pp/iter-0002/$m.optim.stage$s-of-2.h5 ]] || fail "pp: no $m optimizer state stage $s"; done
done
[[ -f pp/iter-0002/eval.json ]] || fail "pp: the held-out evaluation is missing"
mapfile -t printed < pp.out
check_readers pp "${printed[@]}"
rm pp/iter-0002/critic.stage1-of-2.h5
"$B/braid" run pp.json -o pp > pp2.out 2> pp2.err || { cat pp2.err; fail "pp: the rerun failed"; }
grep -q "iteration 2 of 2: iteration 2 train" pp2.err || fail "pp: iteration 2's training was not redone: $(cat pp2.err)"
[[ -f pp/iter-0002/critic.stage1-of-2.h5 ]] || fail "pp: the lost stage file was not written again"
# The same checkpoint resharded to tp 2 x 1 stage, with its optimizer state, trains on.
"$B/braid" -q reshard "${printed[0]}" --tp 2 --pp 1 -o resharded.h5 > resharded.list
grep -q "resharded.optim.tp1-of-2.h5" resharded.list || fail "the optimizer state did not move: $(cat resharded.list)"
echo "cli_plan_parallel: ok"
