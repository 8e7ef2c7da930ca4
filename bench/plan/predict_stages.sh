#!/usr/bin/env bash
# Predicted against measured stage times on this machine: braid-meshplan's per-call
# predictions (from a profile measured here) beside the seconds the stage tools
# report in their --stats files for the same iteration.
#
#   [ITERS=3] bench/plan/predict_stages.sh [MODEL_CONFIG] [PROMPTS] [RESPONSE_TOKENS] [THREADS] [SHARD_SIZE]
#
# Defaults: bench/plan/cpu-small.json, 128 prompts, 64 new tokens, 1 thread, shards
# of 32 (the reference run in docs/tools/meshplan.md). The iteration runs ITERS + 1 times;
# the first is a warm-up, the table has the median of the rest.
#
# Tools from ${BRAID_BIN:-build/bin}; files in ${OUT:-out/predict-stages}/. The
# experiment handed to the planner carries the measured response lengths (dist
# "samples"), so the comparison tests the cost model, not a length guess.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cfg="${1:-$here/cpu-small.json}"
prompts="${2:-128}"
resp="${3:-64}"
threads="${4:-1}"
shard="${5:-32}"
iters="${ITERS:-3}"
bin="$(cd "${BRAID_BIN:-build/bin}" && pwd)"
out="${OUT:-out/predict-stages}"
export PATH="$bin:$PATH"
rm -rf "$out" && mkdir -p "$out"
cfg="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"

# Models: actor = ref, critic = reward model (value heads), all random.
braid init --config "$cfg" --seed 1 -o "$out/actor.h5" -q > /dev/null
braid init --config "$cfg" --seed 2 --value-head --no-lm-head -o "$out/critic.h5" -q > /dev/null
braid init --config "$cfg" --seed 3 --value-head --no-lm-head -o "$out/reward.h5" -q > /dev/null

# Prompts of a fixed length (64 tokens) so that the planner's prompt length is exact.
python3 - "$prompts" > "$out/prompts.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"tokens": [256] + [32 + (7 * i + 3 * j) % 90 for j in range(63)]}))
PY

common=(--threads "$threads" -q)
# One iteration's stages, as `braid run` chains them; files of iteration k in $out/it$k.
# Iteration 0 is a warm-up: a process that starts after the machine sat idle first
# touches memory the host has taken back (docs/notes/meshplan-prediction-accuracy.md), the cold start that
# every later stage of a loop, started right after the one before, does not pay.
iteration() {
  local d="$out/it$1"
  mkdir -p "$d"
  braid-generate --actor "$out/actor.h5" --prompts "$out/prompts.jsonl" -o "$d/gen" --max-new-tokens "$resp" \
    --max-batch "$prompts" --shard-size "$shard" --seed 1 --stats "$d/generate.stats.json" "${common[@]}" > /dev/null
  braid-score "$d"/gen/*.h5 -o "$d/scored" --ref "$out/actor.h5" --critic "$out/critic.h5" \
    --reward "$out/reward.h5" --stats "$d/score.stats.json" "${common[@]}" > /dev/null
  braid-train ppo "$d"/scored/*.h5 --actor "$out/actor.h5" --critic "$out/critic.h5" \
    --actor-out "$d/actor-1.h5" --critic-out "$d/critic-1.h5" --mini-batch "$prompts" \
    --stats "$d/train.stats.json" "${common[@]}" > /dev/null
}
for ((k = 0; k <= iters; ++k)); do iteration "$k"; done
ln -sfn it1/gen "$out/gen"

# The experiment as the planner sees it: these models, this batch, the measured
# lengths (each sample's response length from `braid inspect --json`).
python3 - "$out" "$cfg" "$prompts" "$shard" > "$out/experiment.json" <<'PY'
import glob, json, subprocess, sys
out, cfg, n, shard = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lens = []
for f in sorted(glob.glob(out + "/gen/*.h5")):
    summary = json.loads(subprocess.run(["braid", "inspect", "--json", "-n", shard, f],
                                        check=True, capture_output=True, text=True).stdout)
    lens += [s["response_len"] for s in summary["first_samples"]]
assert len(lens) == n, f"{len(lens)} response lengths for {n} prompts"
json.dump({"format": "braid.experiment", "version": 1, "name": "predict-stages",
           "algorithm": "ppo",
           "models": {"actor": {"config": cfg}, "ref": {"config": cfg},
                      "critic": {"config": cfg}, "reward": {"config": cfg}},
           "batch": {"global": n, "mini": n, "micro": n},
           "prompt_len": {"dist": "fixed", "value": 64},
           "response_len": {"dist": "samples", "values": lens}}, sys.stdout, indent=1)
PY
cat > "$out/cluster.json" <<'JSON'
{"format": "braid.cluster", "version": 1, "name": "this machine", "nodes": 1, "devices_per_node": 1}
JSON
braid-profile measure --experiment "$out/experiment.json" --threads "$threads" --max-batch "$prompts" --repeats 5 -o "$out/profile.json" -q
braid-meshplan "$out/experiment.json" "$out/cluster.json" --profile "$out/profile.json" \
  --no-inter-fusion --no-intra-fusion --search exhaustive -o "$out/plan.json" -q > /dev/null

python3 - "$out" "$iters" <<'PY'
import json, statistics, sys
out, iters = sys.argv[1], int(sys.argv[2])
plan = json.load(open(out + "/plan.json"))
def seconds(k):
    got = {}
    for stage in ("generate", "score", "train"):
        s = json.load(open(f"{out}/it{k}/{stage}.stats.json"))
        for call, v in s["calls"].items():
            got[call] = v["seconds"]
    return got
runs = [seconds(k) for k in range(1, iters + 1)]
cold = seconds(0)
print(f"measured: median of {iters} iterations after a warm-up; cold = the warm-up iteration")
print("| call | predicted s | measured s (min-max) | predicted / measured | cold s |")
print("|---|---|---|---|---|")
worst = 0
for c in plan["calls"]:
    name = c["name"]
    if name not in cold:
        print(f"| {name} | {c['time_s']:.3f} | (not measured) | | |")
        continue
    v = [r[name] for r in runs]
    m = statistics.median(v)
    r = c["time_s"] / m
    worst = max(worst, abs(r - 1))
    print(f"| {name} | {c['time_s']:.3f} | {m:.3f} ({min(v):.3f}-{max(v):.3f}) | {r:.2f} | {cold[name]:.3f} |")
print(f"\nworst deviation {100 * worst:.0f}%")
PY
