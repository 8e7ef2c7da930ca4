#!/usr/bin/env bash
# The default experiment (`make demo`): every stage of braid, end to end, on this machine.
# Outputs go to ${DEMO_OUT:-out/demo}; the tools are taken from ${BRAID_BIN:-build/bin}.
#
#   1. the build: what braid was built with, and the devices it sees
#   2. PPO from random weights (examples/ppo-tiny): `braid run` drives braid-generate piped
#      into braid-score, then braid-train, iteration after iteration; the reward (the
#      fraction of response characters that are digits) rises
#   3. what the run wrote: a scored sample shard and the last actor checkpoint
#   4. the tiny model's layer costs measured on this machine (braid-profile measure)
#   5. the RLHFuse paper's LLaMA-65B actor / 33B critic on 32x8 H100, planned from an
#      analytic H100 profile (braid-profile analytic, braid-meshplan)
#   6. the fused actor+critic pipeline schedule of that plan's training stage, found by
#      simulated annealing and verified by a dry run of its instruction streams
#   7. every file written, checked
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
export PATH="$bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "1. the build"
braid info

step "2. PPO on a tiny Llama from random weights (examples/ppo-tiny/run.json)"
braid run examples/ppo-tiny/run.json -o "$out/ppo"
/usr/bin/env python3 - "$out/ppo/metrics.jsonl" <<'PY' || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("iteration  mean reward")
for r in rows:
    print(f"{r.get('iteration', '?'):>9}  {r.get('mean_reward', float('nan')):.3f}")
PY

step "3. what the run wrote: a scored sample shard and the last actor"
last=$(ls -d "$out"/ppo/iter-* | tail -n 1)
braid inspect "$(ls "$last"/scored/*.h5 | head -n 1)" | head -n 16
braid inspect "$last/actor.h5" | head -n 6

step "4. the tiny model's layer costs measured on this machine"
braid-profile measure --model examples/tiny/config.json --quick --repeats 3 -o "$out/tiny-profile.json"
braid inspect "$out/tiny-profile.json" | head -n 12

step "5. RLHFuse's 65B actor / 33B critic on 32x8 H100: profile and plan"
braid-profile analytic --hardware h100 --experiment examples/plan/rlhfuse-65b-33b-len1024.json \
  -o "$out/h100-profile.json"
braid-meshplan examples/plan/rlhfuse-65b-33b-len1024.json examples/plan/cluster-32x8-h100.json \
  --profile "$out/h100-profile.json" --time-limit 15 -o "$out/plan.json"

step "6. the fused actor+critic training schedule of that plan"
braid-schedgen "$out/plan.json" --time-limit 10 -o "$out/schedule.json" --svg "$out/schedule.svg"
braid-schedgen --verify "$out/schedule.json"
braid inspect "$out/schedule.json"

step "7. every file checked"
files=("$out"/*.json "$last"/*.h5 "$last"/scored/*.h5 "$last"/samples/*.h5)
braid check -v "${files[@]}"
echo "all ${#files[@]} files are complete braid files; outputs in $out/"
