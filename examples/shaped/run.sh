#!/usr/bin/env bash
# The GSM8K- and MATH-shaped worked examples: braid synth writes a task in a dataset's own
# shape, the tiny byte-level model learns its answers by SFT, then braid run trains it on a
# stream of the lines read through the run file's field map, holding 64 out for braid eval's
# pass@k (docs/tools/run.md, "The GSM8K- and MATH-shaped worked examples"):
#
#   gsm8k  the sort task as {"question", "answer": "<worked>\n#### N"}; GRPO (gsm8k.json)
#   math   fractions to reduce as {"problem", "solution": "... \boxed{\frac{p}{q}}"}, LaTeX
#          answers the verifier compares by value; DAPO with dynamic sampling (math.json)
#
#   examples/shaped/run.sh gsm8k|math [OUT]   (default out/SHAPE-shaped; tools from ${BRAID_BIN:-build/bin})
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shape=${1:?give the shape: gsm8k or math}
cd "$here/../.."
out=${2:-out/$shape-shaped}
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
export PATH="$bin:$PATH"
mkdir -p "$out/sft"

case $shape in
  gsm8k) task=(--task sort --min-digits 2 --max-digits 8) ;;
  math) task=(--task frac --min-digits 1 --max-digits 2) ;;
  *) echo "run.sh: the shape is gsm8k or math, not $shape" >&2; exit 2 ;;
esac
braid synth -o "$out/task" "${task[@]}" --format "$shape" --tail 1.5 \
  --prompts 384 --sft 4096 --pairs 0 --heldout 0 --seed 3 > /dev/null
cp examples/tiny/config.json "$out/config.json"
braid init --config "$out/config.json" --seed 1 -o "$out/sft/actor0.h5" > /dev/null
braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor0.h5" --actor-out "$out/sft/actor.h5" \
  --lr 3e-3 --mini-batch 64 --epochs 2 --seed 1 > /dev/null
cp "$here/$shape.json" "$out/run.json"
braid run "$out/run.json" -o "$out/run"
"$here/../pass_at_k_table.py" "$out/run"
