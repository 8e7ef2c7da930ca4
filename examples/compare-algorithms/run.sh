#!/usr/bin/env bash
# The algorithms compared on the default experiment's task (scripts/demo.sh steps 2-3: the
# sort task, the 32-step SFT warm start): GRPO, DAPO, RLOO and REINFORCE++ (and any other
# names given; "dapo-norefill" is DAPO without dynamic sampling's refill rollouts, the
# others' rollout budget) each run run.json from the same warm start with the same seeds
# and budget, one after another; then one table of held-out pass@1 (and pass@4) before
# and after.
#
#   examples/compare-algorithms/run.sh [OUT] [ALGORITHM...]
#       (default out/compare-algorithms, grpo dapo dapo-norefill rloo reinforce++; tools from ${BRAID_BIN:-build/bin})
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
out=${1:-out/compare-algorithms}
shift $(( $# > 0 ? 1 : 0 ))
algorithms=("$@")
[[ ${#algorithms[@]} -gt 0 ]] || algorithms=(grpo dapo dapo-norefill rloo reinforce++)
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
export PATH="$bin:$PATH"
mkdir -p "$out/sft"

# The demo's task and warm start (scripts/demo.sh steps 2 and 3).
braid synth -o "$out/task" --task sort --min-digits 2 --max-digits 16 --tail 1.5 \
  --prompts 256 --sft 2048 --pairs 0 --heldout 128 --seed 1 > /dev/null
cp examples/tiny/config.json "$out/config.json"
[[ -e "$out/sft/actor.h5" ]] || {
  braid init --config "$out/config.json" --seed 1 -o "$out/sft/actor0.h5" > /dev/null
  braid-train sft "$out/task/sft.jsonl" --actor "$out/sft/actor0.h5" --actor-out "$out/sft/actor.h5" \
    --lr 3e-3 --mini-batch 64 --epochs 1 --seed 1 > /dev/null
}
for a in "${algorithms[@]}"; do
  /usr/bin/env python3 - "$here/run.json" "$a" > "$out/$a.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["algorithm"] = sys.argv[2].removesuffix("-norefill")
if sys.argv[2].endswith("-norefill"):
    r["data"]["dynamic_sampling"] = False
print(json.dumps(r, indent=2))
PY
  start=$(date +%s)
  [[ -e "$out/$a/iter-0012/actor.h5" ]] || braid run "$out/$a.json" -o "$out/$a" -q
  echo "$a: $(( $(date +%s) - start )) s" >&2
done
/usr/bin/env python3 - "$out" "${algorithms[@]}" <<'PY'
import glob, json, sys
out, algorithms = sys.argv[1], sys.argv[2:]
print("| algorithm | held-out pass@1, start | after 6 | after 12 | pass@4, start | after 12 | samples generated |")
print("|---|---:|---:|---:|---:|---:|---:|")
for a in algorithms:
    rows = {r["iteration"]: r for r in map(json.loads, open(f"{out}/{a}/metrics.jsonl"))}
    ev = {i: r["eval"] for i, r in rows.items() if "eval" in r}
    samples = sum(json.load(open(f))["sequences"] for f in glob.glob(f"{out}/{a}/iter-*/generate*.stats.json"))
    print(f"| {a} | {ev[0]['pass@1']:.3f} | {ev[6]['pass@1']:.3f} | {ev[12]['pass@1']:.3f} | "
          f"{ev[0]['pass@4']:.3f} | {ev[12]['pass@4']:.3f} | {samples} |")
PY
