#!/usr/bin/env bash
# The default experiment (`make demo`): every stage of braid, end to end, on this machine.
# Outputs go to ${DEMO_OUT:-out/demo}; the tools are taken from ${BRAID_BIN:-build/bin}; the
# model is ${DEMO_CONFIG:-examples/tiny/config.json} (any family of docs/models.md, e.g.
# examples/tiny-qwen3/config.json or examples/tiny-gemma3/config.json).
#
#   1. the build: what braid was built with, and the devices it sees
#   2. the task: `braid synth` writes a synthetic verifiable task (sort a string of
#      digits; the number of digits drawn from a Pareto tail, so a few responses are
#      much longer than most), with answers, SFT examples, preference pairs and held-out
#      prompts and pairs
#   3. the SFT warm start of the tiny byte-level model (braid-train sft), and its
#      held-out accuracy (braid eval)
#   4. a reward model trained on the task's preference pairs (braid-train rm), and its
#      accuracy on held-out pairs (braid eval --pairs)
#   5. the tiny model's layer costs and this machine's fixed costs (process and MPI start-up,
#      memory first touch, HDF5 files) measured here (braid-profile measure)
#   6. PPO from the warm start (examples/demo/ppo.json): `braid run` has braid-meshplan plan
#      it for this machine (1 node, 2 devices), predicts the whole iteration each way it can
#      run (the rollout on 2 ranks fused with scoring or piped into braid-score; the actor
#      and critic trained as one fused pipeline or data parallel) and runs the fastest; the
#      math verifier against each prompt's answer; braid eval on the held-out prompts every
#      2 iterations; every 4th iteration runs again the other way (the ablation, measured
#      in the same run beside the prediction of each way); the held-out accuracy rises;
#      OUT/ppo/report.svg draws every figure, the prediction beside the measurement
#   7. what the run wrote: a scored sample shard and the last actor checkpoint
#   8. the RLHFuse paper's LLaMA-65B actor / 33B critic on 32x8 H100, planned from an
#      analytic H100 profile (braid-profile analytic, braid-meshplan)
#   9. the fused actor+critic pipeline schedule of that plan's training stage, found by
#      simulated annealing and verified by a dry run of its instruction streams
#  10. every file written, checked
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
export PATH="$bin:$PATH"
# The PPO's rollout runs under mpirun, which refuses root unless told.
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

step() { printf '\n== %s\n' "$*"; }

step "1. the build"
braid info

step "2. the task: sort digit strings, lengths from a Pareto tail (braid synth)"
braid synth -o "$out/task" --task sort --min-digits 2 --max-digits 16 --tail 1.5 \
  --prompts 256 --sft 2048 --pairs 2048 --heldout 128 --seed 1
head -n 3 "$out/task/prompts.jsonl"

step "3. SFT warm start of the tiny byte-level model (32 steps), its held-out accuracy"
cp "${DEMO_CONFIG:-examples/tiny/config.json}" "$out/config.json"
mkdir -p "$out/sft" "$out/rm"
braid init --config "$out/config.json" --seed 1 -o "$out/sft/actor0.h5" > /dev/null
braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor0.h5" --actor-out "$out/sft/actor.h5" \
  --lr 3e-3 --mini-batch 64 --epochs 1 --seed 1 > /dev/null
braid eval "$out/sft/actor.h5" --prompts "$out/task/heldout.jsonl" --reward-rule math --max-new-tokens 20 \
  -o "$out/sft/eval.json"

step "4. a reward model on the task's preference pairs, its held-out pair accuracy"
braid init --config "$out/config.json" --seed 3 --value-head --no-lm-head -o "$out/rm/reward0.h5" > /dev/null
braid-train rm "$out/task/pairs.jsonl" --reward "$out/rm/reward0.h5" --reward-out "$out/rm/reward.h5" \
  --lr 3e-3 --mini-batch 64 --epochs 4 --seed 1 > /dev/null
braid eval "$out/rm/reward.h5" --pairs "$out/task/heldout-pairs.jsonl" -o "$out/rm/eval.json"

step "5. the tiny model's layer costs and this machine's fixed costs, measured here"
# The PPO of step 6 as braid-meshplan sees it: its four models (the tiny config), 128
# prompts x 4 samples, mini-batches of 128, 2 epochs, the task's prompt and answer
# lengths; this machine as a cluster of 1 node with 2 devices (one rank each).
/usr/bin/env python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/task/prompts.jsonl")][:128]
experiment = {
    "format": "braid.experiment", "version": 1,
    "name": "the default experiment's PPO (examples/demo/ppo.json) on the sort task",
    "algorithm": "ppo",
    "models": {role: {"config": "config.json"} for role in ("actor", "ref", "critic", "reward")},
    "batch": {"global": 512, "mini": 128}, "ppo_epochs": 2,
    "prompt_len": {"dist": "samples", "values": [len(r["prompt"].encode()) + 1 for r in rows]},
    "response_len": {"dist": "samples", "values": [min(20, len(r["answer"].encode()) + 1) for r in rows]},
}
json.dump(experiment, open(f"{out}/ppo-experiment.json", "w"), indent=1)
cluster = {"format": "braid.cluster", "version": 1, "name": "this machine: 1 node, 2 devices (one process of one thread each)",
           "nodes": 1, "devices_per_node": 2, "device_memory_gb": 4}
json.dump(cluster, open(f"{out}/cluster-here.json", "w"), indent=1)
PY
braid-profile measure --experiment "$out/ppo-experiment.json" --quick --repeats 3 --threads 1 --max-batch 64 \
  -o "$out/tiny-profile.json"
braid inspect "$out/tiny-profile.json" | head -n 12

step "6. PPO from the warm start, planned for 2 devices, the fusions chosen by the prediction (examples/demo/ppo.json)"
cp examples/demo/ppo.json "$out/ppo.json"
braid run "$out/ppo.json" -o "$out/ppo"
/usr/bin/env python3 - "$out/ppo/metrics.jsonl" <<'PY' || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("iteration  mean reward      KL  held-out pass@1  pass@4")
for r in rows:
    e = r.get("eval", {})
    acc = f"{e['accuracy']:15.3f}  {e.get('pass@4', float('nan')):6.3f}" if e else f"{'':15}  {'':6}"
    rew = f"{r['mean_reward']:11.3f}" if "mean_reward" in r else f"{'(start)':>11}"
    kl = f"{r['kl']:7.3f}" if "kl" in r else f"{'':7}"
    print(f"{r['iteration']:>9}  {rew}  {kl}  {acc}")
PY
/usr/bin/env python3 - "$out/ppo" <<'PY' || true
import glob, json, sys
run = sys.argv[1]
p = json.load(open(f"{run}/prediction.json"))
print(f"the way braid run took: {p['chosen']} ({p['reason']})")
print("ablation  way           rollout  train  iteration (measured s)  predicted s")
for f in sorted(glob.glob(f"{run}/iter-*/ablation.json")):
    a = json.load(open(f))
    for v in a["variants"]:
        m, pr = v["measured"], v.get("predicted", {})
        print(f"{a['iteration']:>8}  {v['name']:<12} {m.get('rollout_step', 0):7.2f}  {m.get('train_step', 0):5.2f}  "
              f"{m['total']:21.2f}  {pr.get('total', float('nan')):11.2f}")
PY
echo "the report: $out/ppo/report.svg and $out/ppo/report.json"

step "7. what the run wrote: a scored sample shard, the last actor"
last=$(ls -d "$out"/ppo/iter-* | tail -n 1)
braid inspect "$(ls "$last"/scored/*.h5 | head -n 1)" | head -n 16
# The checkpoint's name stands for its files (the fused pipeline writes stage files).
braid inspect "$last/actor.h5" | head -n 6

step "8. RLHFuse's 65B actor / 33B critic on 32x8 H100: profile and plan"
braid-profile analytic --hardware h100 --experiment examples/plan/rlhfuse-65b-33b-len1024.json \
  -o "$out/h100-profile.json"
braid-meshplan examples/plan/rlhfuse-65b-33b-len1024.json examples/plan/cluster-32x8-h100.json \
  --profile "$out/h100-profile.json" --time-limit 15 -o "$out/plan.json"

step "9. the fused actor+critic training schedule of that plan"
braid-schedgen "$out/plan.json" --time-limit 10 -o "$out/schedule.json" --svg "$out/schedule.svg"
braid-schedgen --verify "$out/schedule.json"
braid inspect "$out/schedule.json"

step "10. every file checked"
files=("$out"/tiny-profile.json "$out"/ppo/plan.json "$out"/ppo/prediction.json "$out"/h100-profile.json "$out"/plan.json "$out"/schedule.json "$out"/ppo.json "$out"/sft/eval.json "$out"/rm/eval.json "$out"/ppo/report.json "$out"/sft/actor.h5 "$out"/rm/reward.h5 "$last"/*.h5 "$last"/scored/*.h5 "$last"/samples/*.h5)
braid check -v "${files[@]}"
echo "all ${#files[@]} files are complete braid files; outputs in $out/"
