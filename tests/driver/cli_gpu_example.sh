#!/usr/bin/env bash
# examples/gpu-grpo (examples/gpu-grpo/README.md), which only a GPU machine runs whole:
# its run.sh with DRY_RUN=1 makes the task and passes braid run's checks of the run file;
# the dry run shows 10 fused iterations on cuda in bf16, each with its serial ablation;
# 32 prompts x 8 samples = 256 of at most 512 tokens (the longest prompt with its BOS plus
# max_new_tokens). Where no GPU is usable, braid run refuses the file before anything
# starts, exit 2, naming the run file, "device" and cuda:0.
set -euo pipefail
S="${BRAID_SCRATCH:?}"
B="${BRAID_BIN:?}"
rm -rf "${S:?}"/* && cd "$S"
. "$BRAID_SOURCE/tests/common/expect.sh"

DRY_RUN=1 BRAID_BIN="$B" "$BRAID_SOURCE/examples/gpu-grpo/run.sh" "$S/out" > dry.txt 2> dry.err ||
  fail "run.sh with DRY_RUN=1 failed: $(cat dry.err)"
python3 - out/run.json out/task/prompts.jsonl dry.txt <<'PY'
import json, sys
run, prompts, lines = json.load(open(sys.argv[1])), sys.argv[2], open(sys.argv[3]).read().splitlines()
def fail(msg):
    sys.exit(f"FAIL: {msg}")
g = run["generate"]
if run["device"] != "cuda" or run["dtype"] != "bf16" or run["iterations"] != 10:
    fail(f"device {run['device']}, dtype {run['dtype']}, {run['iterations']} iterations")
if g["limit"] * g["samples_per_prompt"] != 256:
    fail(f"{g['limit']} prompts x {g['samples_per_prompt']} samples is not 256")
longest = max(len(json.loads(l)["prompt"].encode()) for l in list(open(prompts))[: g["limit"]]) + 1  # BOS
if longest + g["max_new_tokens"] > 512:
    fail(f"a prompt of {longest} tokens + {g['max_new_tokens']} new ones is past 512")
rollouts = [l for l in lines if "braid-generate" in l and not l.startswith("#")]
fused = [l for l in rollouts if "--migrate-threshold" in l and " -- " in l]
serial = [l for l in rollouts if "| " in l and "braid-score -" in l]
if len(fused) != 10 or len(serial) != 10:
    fail(f"{len(fused)} fused and {len(serial)} serial rollouts, not 10 of each")
if not all("-np 2 " in l and l.count("--device cuda") == 2 for l in fused):
    fail("a fused rollout is not on 2 ranks with --device cuda for generation and scoring")
trains = [l for l in lines if "braid-train grpo" in l]
if len(trains) != 20 or not all("--device cuda --dtype bf16" in l for l in trains):
    fail(f"{len(trains)} braid-train grpo lines, not 20 on cuda in bf16")
PY

info=$("$B/braid" info)
if grep -qE 'cuda +(not built|built, .* 0 device)' <<< "$info"; then
  expect_bad refused "out/run.json: device: cuda:0: " "every stage tool would refuse it" -- \
    "$B/braid" run out/run.json -o out/grpo
  [[ ! -e out/grpo/iter-0000 ]] || fail "the refused run started: out/grpo/iter-0000 is there"
else
  echo "a GPU is usable here: the refusal is not checked"
fi
echo "cli_gpu_example: ok"
