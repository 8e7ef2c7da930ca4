#!/usr/bin/env bash
# The GRPO worked example: synthetic arithmetic with answers (braid synth --task add), an
# SFT warm start of the tiny byte-level model, then GRPO rewarded by the math verifier
# (run.json), braid eval of the held-out prompts before, during and after.
#
#   examples/grpo-math/run.sh [OUT]        (default out/grpo-math; tools from ${BRAID_BIN:-build/bin})
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
out=${1:-out/grpo-math}
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
export PATH="$bin:$PATH"
mkdir -p "$out/sft"

braid synth -o "$out/task" --task add --min-digits 1 --max-digits 4 --tail 1.5 \
  --prompts 256 --sft 4096 --pairs 0 --heldout 128 --seed 2 > /dev/null
cp examples/tiny/config.json "$out/config.json"
braid init --config "$out/config.json" --seed 1 -o "$out/sft/actor0.h5" > /dev/null
braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor0.h5" --actor-out "$out/sft/actor.h5" \
  --lr 3e-3 --mini-batch 64 --epochs 2 --seed 1 > /dev/null
cp "$here/run.json" "$out/run.json"
braid run "$out/run.json" -o "$out/grpo"
# The start and the end, greedy, beside the run's sampled figures.
braid eval "$out/sft/actor.h5" --prompts "$out/task/heldout.jsonl" --reward-rule math --max-new-tokens 12 \
  -o "$out/eval-start-greedy.json"
last=$(ls -d "$out"/grpo/iter-* | tail -n 1)
braid eval "$last/actor.h5" --prompts "$out/task/heldout.jsonl" --reward-rule math --max-new-tokens 12 \
  -o "$out/eval-end-greedy.json"
/usr/bin/env python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("iteration  mean reward  held-out pass@1  pass@4")
for l in open(f"{out}/grpo/metrics.jsonl"):
    r = json.loads(l)
    if "eval" not in r:
        continue
    rew = f"{r['mean_reward']:11.3f}" if "mean_reward" in r else f"{'(start)':>11}"
    print(f"{r['iteration']:>9}  {rew}  {r['eval']['pass@1']:15.3f}  {r['eval']['pass@4']:6.3f}")
s, e = (json.load(open(f"{out}/eval-{w}-greedy.json")) for w in ("start", "end"))
print(f"greedy pass@1: {s['pass@1']:.3f} at the start, {e['pass@1']:.3f} at the end")
PY
