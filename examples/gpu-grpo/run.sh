#!/usr/bin/env bash
# GRPO on the GPU (examples/gpu-grpo/README.md): makes the synthetic addition task
# (braid synth --task add, prompts of at most 24 tokens), copies run.json and the actor's
# config beside it and runs it with braid run (the actor's random init is the run's first
# step), then prints the report's figures: each iteration's time fused and serial (the
# ablation), each stage's share of it, and tokens per second.
#
#   examples/gpu-grpo/run.sh [OUT]        (default out/gpu-grpo; tools from ${BRAID_BIN:-build/bin})
#
# Environment: DEVICE (default: the run file's, cuda) sets the run file's "device";
# SHAPE=tiny (default full) runs the same file on config-tiny.json (2 layers, 128 wide),
# 2 iterations of 2 prompts x 8 samples of up to 24 new tokens: the whole path on a CPU,
# DEVICE=cpu SHAPE=tiny examples/gpu-grpo/run.sh out/gpu-grpo-tiny; DRY_RUN=1 prints the
# commands braid run would start (braid run -n) and runs nothing; ITERATIONS=N runs N
# iterations instead of the file's (braid run --iterations); TIMEOUT=S stops braid run after
# S seconds (SIGTERM, which it passes on to its tools; SIGKILL 20 s later; run.sh again
# resumes) and still prints the figures of the iterations done, exit 124.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
out=${1:-out/gpu-grpo}
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
export PATH="$bin:$PATH"
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
shape=${SHAPE:-full}
[[ $shape == full || $shape == tiny ]] || { echo "run.sh: SHAPE must be full or tiny, not '$shape'" >&2; exit 2; }
mkdir -p "$out"

# The task, the configs and the run file are (re)written only when they change, so that a
# rerun resumes (braid run redoes the steps whose inputs are newer than their outputs).
[[ -f $out/task/prompts.jsonl ]] || braid synth -o "$out/task" --task add --min-digits 1 --max-digits 8 \
  --tail 1.5 --prompts 256 --sft 0 --pairs 0 --heldout 0 --seed 2 > /dev/null
for f in config.json config-tiny.json; do cmp -s "$here/$f" "$out/$f" || cp "$here/$f" "$out/$f"; done
# The run file with DEVICE and SHAPE applied.
python3 - "$here/run.json" "$out/run.json" "${DEVICE:-}" "$shape" <<'PY'
import json, os, sys
src, dst, device, shape = sys.argv[1:]
run = json.load(open(src))
if device:
    run["device"] = device
if shape == "tiny":
    run["models"]["actor"]["init"]["config"] = "config-tiny.json"
    run["iterations"] = 2
    run["generate"].update(limit=2, max_new_tokens=24, shard_size=8, max_batch=8)
    run["train"].update(mini_batch=8, micro_tokens=4096)
text = json.dumps(run, indent=2) + "\n"
if not os.path.exists(dst) or open(dst).read() != text:
    open(dst, "w").write(text)
PY
iterations=(${ITERATIONS:+--iterations "$ITERATIONS"})
if [[ ${DRY_RUN:-0} == 1 ]]; then exec braid run -n "$out/run.json" -o "$out/grpo" "${iterations[@]}"; fi
limit=(${TIMEOUT:+timeout --foreground -k 20 "$TIMEOUT"})
rc=0
"${limit[@]}" braid run "$out/run.json" -o "$out/grpo" "${iterations[@]}" || rc=$?
if [[ $rc == 0 || -f $out/grpo/report.json ]]; then
  python3 "$here/summary.py" "$out/grpo" || [[ $rc != 0 ]] || rc=1
fi
exit "$rc"
