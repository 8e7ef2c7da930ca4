#!/usr/bin/env bash
# Predicted against measured stage times on this machine: braid-meshplan's per-call
# predictions (from a profile measured here) beside the seconds the stage tools
# report in their --stats files for the same iteration.
#
#   bench/plan/predict_stages.sh [MODEL_CONFIG] [PROMPTS] [RESPONSE_TOKENS] [THREADS] [SHARD_SIZE]
#
# Tools from ${BRAID_BIN:-build/bin}; files in ${OUT:-out/predict-stages}/. The
# experiment handed to the planner carries the measured response lengths (dist
# "samples"), so the comparison tests the cost model, not a length guess.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cfg="${1:-$here/cpu-small.json}"
prompts="${2:-32}"
resp="${3:-96}"
threads="${4:-2}"
shard="${5:-32}"
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
/usr/bin/python3 - "$prompts" > "$out/prompts.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"tokens": [256] + [32 + (7 * i + 3 * j) % 90 for j in range(63)]}))
PY

common=(--threads "$threads" -q)
braid-generate --actor "$out/actor.h5" --prompts "$out/prompts.jsonl" -o "$out/gen" --max-new-tokens "$resp" \
  --max-batch "$prompts" --shard-size "$shard" --seed 1 --stats "$out/generate.stats.json" "${common[@]}" > /dev/null
braid-score "$out"/gen/*.h5 -o "$out/scored" --ref "$out/actor.h5" --critic "$out/critic.h5" \
  --reward "$out/reward.h5" --stats "$out/score.stats.json" "${common[@]}" > /dev/null
braid-train ppo "$out"/scored/*.h5 --actor "$out/actor.h5" --critic "$out/critic.h5" \
  --actor-out "$out/actor-1.h5" --critic-out "$out/critic-1.h5" --mini-batch "$prompts" \
  --stats "$out/train.stats.json" "${common[@]}" > /dev/null

# The experiment as the planner sees it: these models, this batch, the measured lengths.
/usr/bin/python3 - "$out" "$cfg" "$prompts" > "$out/experiment.json" <<'PY'
import json, sys, h5py, glob
out, cfg, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lens = []
for f in sorted(glob.glob(out + "/gen/*.h5")):
    with h5py.File(f, "r") as h:
        off, pl = h["offsets"][:], h["prompt_len"][:]
        lens += [int(off[i + 1] - off[i] - pl[i]) for i in range(len(pl))]
value = json.load(open(cfg))
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
braid-profile measure --experiment "$out/experiment.json" --threads "$threads" --repeats 3 -o "$out/profile.json" -q
braid-meshplan "$out/experiment.json" "$out/cluster.json" --profile "$out/profile.json" \
  --no-inter-fusion --no-intra-fusion --search exhaustive -o "$out/plan.json" -q > /dev/null

/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
plan = json.load(open(out + "/plan.json"))
measured = {}
for stage in ("generate", "score", "train"):
    s = json.load(open(f"{out}/{stage}.stats.json"))
    for call, v in s["calls"].items():
        measured[call] = v["seconds"]
print("| call | predicted s | measured s | predicted / measured |")
print("|---|---|---|---|")
worst = 0
for c in plan["calls"]:
    name = c["name"]
    if name not in measured:
        print(f"| {name} | {c['time_s']:.3f} | (not measured) | |")
        continue
    r = c["time_s"] / measured[name]
    worst = max(worst, abs(r - 1))
    print(f"| {name} | {c['time_s']:.3f} | {measured[name]:.3f} | {r:.2f} |")
print(f"\nworst deviation {100 * worst:.0f}%")
PY
