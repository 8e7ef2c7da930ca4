#!/usr/bin/env bash
# Every plan braid-meshplan writes runs under braid run, for any cluster size: the tiny PPO
# of examples/plan-run on 1, 2 and 4 devices, the 7B actor/critic of
# examples/plan/small-7b.json on 1 x 8 and 2 x 8 H100s, and the RLHFuse 65B/33B of
# examples/plan on 16 x 8 and 32 x 8, planned from the analytic H100 profile. Each `braid run --dry-run` makes the plan (and the fused training's schedule
# when the run fuses it), checks it against the run and prints every command: exit 0, an
# mpirun line for each stage, and the ranks braid-train runs the schedule on a multiple of
# its devices (the plan's groups). A cluster too small for the models ends with
# braid-meshplan's exit 3 and reason; an output folder under a file is refused naming it.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
P="$BRAID_SOURCE/examples/plan"

cluster() {  # nodes devices_per_node
  printf '{"format": "braid.cluster", "version": 1, "nodes": %d, "devices_per_node": %d, "device_memory_gb": 80, "inter_node_gbs": 25}\n' "$1" "$2"
}
run_file() {  # experiment actor_config critic_config prompts mini max_new_tokens cluster
  cat <<JSON
{"format": "braid.run", "version": 1, "algorithm": "ppo",
 "models": {"actor": {"init": {"config": "$2", "seed": 1}}, "ref": {"init": {"config": "$2", "seed": 1}},
            "critic": {"init": {"config": "$3", "seed": 2}}, "reward": {"init": {"config": "$3", "seed": 3}}},
 "prompts": "prompts-$4.jsonl", "iterations": 1,
 "generate": {"max_new_tokens": $6},
 "train": {"mini_batch": $5},
 "mpirun": {"options": ["--oversubscribe"]},
 "plan": {"experiment": "$1", "cluster": "$7", "hardware": "h100", "options": ["--time-limit", "2"],
          "schedgen_options": ["--time-limit", "0.5"]}}
JSON
}
for n in 128 512; do for i in $(seq 1 $n); do echo "{\"text\": \"prompt $i\"}"; done > prompts-$n.jsonl; done

check() {  # name: the dry run's lines
  local name=$1
  grep -q '^# plan .*: predicted iteration' $name.txt || fail "$name: no plan summary"
  grep -q 'braid-generate ' $name.txt || fail "$name: no generation"
  grep -q 'braid-train ppo ' $name.txt || fail "$name: no training"
  local train np devices groups
  train=$(grep 'braid-train ppo ' $name.txt | head -1)
  if [[ $train == *"--schedule"* ]]; then
    np=$(sed -E 's/.*-np ([0-9]+) .*/\1/' <<< "$train")
    devices=$(/usr/bin/python3 -c "import json; print(json.load(open('$name/plan.schedule.json'))['spec']['devices'])")
    tp=$(sed -nE 's/.*--tp ([0-9]+).*/\1/p' <<< "$train"); tp=${tp:-1}
    (( np % (devices * tp) == 0 )) || fail "$name: braid-train on $np ranks runs a schedule of $devices devices at tp $tp"
  fi
}

T="$BRAID_SOURCE/examples/plan-run"
sizes=("$T/experiment.json 1 1 128 64 16 ../tiny/config ../tiny/config"
       "$T/experiment.json 1 2 128 64 16 ../tiny/config ../tiny/config"
       "$T/experiment.json 1 4 128 64 16 ../tiny/config ../tiny/config"
       "small-7b 1 8 128 32 512 llama-7b llama-7b"
       "small-7b 2 8 128 32 512 llama-7b llama-7b"
       "rlhfuse-65b-33b-len1024 16 8 512 64 1024 llama-65b llama-33b"
       "rlhfuse-65b-33b-len1024 32 8 512 64 1024 llama-65b llama-33b")
for line in "${sizes[@]}"; do
  read -r exp nodes per prompts mini new actor critic <<< "$line"
  if [[ $exp == /* ]]; then  # an experiment file, its models beside it
    file=$exp; models=$(dirname "$exp"); name="tiny-${nodes}x$per"
  else
    file="$P/$exp.json"; models="$P/models"; name="$exp-${nodes}x$per"
  fi
  cluster "$nodes" "$per" > "$name.cluster.json"
  run_file "$file" "$models/$actor.json" "$models/$critic.json" "$prompts" "$mini" "$new" "$name.cluster.json" > "$name.json"
  "$B/braid" run "$name.json" -o "$name" --dry-run > "$name.txt" 2> "$name.err" || { cat "$name.err"; fail "$name: the dry run failed"; }
  check "$name"
done

# 7B on two devices does not fit: refused before anything runs.
cluster 1 2 > one.cluster.json
run_file "$P/small-7b.json" "$P/models/llama-7b.json" "$P/models/llama-7b.json" 128 32 512 one.cluster.json > one.json
set +e
"$B/braid" run one.json -o one --dry-run > one.out 2> one.err; rc=$?
set -e
[[ $rc == 3 ]] || fail "a plan that does not fit: exit $rc, not braid-meshplan's 3"
grep -q "no plan found fits in device memory" one.err || fail "the refusal does not say why: $(cat one.err)"

# An output folder under a file: the dry run names it instead of printing commands that would fail.
touch afile
expect_bad under_file "afile" -- "$B/braid" run small-7b-1x8.json -o afile/out --dry-run
echo "cli_plan_sizes: ok"
