#!/usr/bin/env bash
# examples/grpo-math with LoRA adapters (docs/tools/train.md, "LoRA"): the same synthetic
# arithmetic and SFT warm start (one epoch), then
#   - LoRA SFT: a second epoch of SFT training only rank-16 adapters on the frozen warm start;
#   - LoRA GRPO (run.json): twelve iterations training rank-16 adapters on the warm start;
# greedy braid eval of the held-out prompts for the warm start and both adapted models.
#
#   examples/grpo-math-lora/run.sh [OUT]   (default out/grpo-math-lora; tools from ${BRAID_BIN:-build/bin})
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
out=${1:-out/grpo-math-lora}
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
export PATH="$bin:$PATH"
mkdir -p "$out/sft"

braid synth -o "$out/task" --task add --min-digits 1 --max-digits 4 --tail 1.5 \
  --prompts 256 --sft 4096 --pairs 0 --heldout 128 --seed 2 > /dev/null
cp examples/tiny/config.json "$out/config.json"
braid init --config "$out/config.json" --seed 1 -o "$out/sft/actor0.h5" > /dev/null
braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor0.h5" --actor-out "$out/sft/actor.h5" \
  --lr 3e-3 --mini-batch 64 --epochs 1 --seed 1 > /dev/null
braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor.h5" --actor-out "$out/sft/lora.h5" \
  --lora-rank 16 --lora-alpha 32 --lr 3e-3 --mini-batch 64 --epochs 1 --seed 2 > /dev/null
cp "$here/run.json" "$out/run.json"
braid run "$out/run.json" -o "$out/grpo"
last=$(ls -d "$out"/grpo/iter-* | tail -n 1)
for m in start:sft/actor.h5 lora-sft:sft/lora.h5 lora-grpo:${last#"$out"/}/actor.h5; do
  braid eval "$out/${m#*:}" --prompts "$out/task/heldout.jsonl" --reward-rule math --max-new-tokens 12 \
    -o "$out/eval-${m%%:*}-greedy.json"
done
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
for w in ("start", "lora-sft", "lora-grpo"):
    print(f"greedy pass@1 {w}: {json.load(open(f'{out}/eval-{w}-greedy.json'))['pass@1']:.3f}")
PY
