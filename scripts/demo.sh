#!/usr/bin/env bash
# The default experiment (`make demo`): every stage of braid that exists today, end to end,
# on this machine. Outputs go to ${DEMO_OUT:-out/demo}; the tools are taken from
# ${BRAID_BIN:-build/bin}.
#
#   1. the build: what braid was built with, and the devices it sees
#   2. a tiny Llama, initialised as two pipeline-stage weight shards
#   3. its per-layer costs measured on this machine (braid-profile measure)
#   4. the RLHFuse paper's LLaMA-65B actor / 33B critic on 32x8 H100, planned from an
#      analytic H100 profile (braid-profile analytic, braid-meshplan)
#   5. the fused actor+critic pipeline schedule of that plan's training stage, found by
#      simulated annealing and verified by a dry run of its instruction streams
#   6. every file written, summarised and checked
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "${BRAID_BIN:-build/bin}" && pwd)
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
export PATH="$bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "1. the build"
braid info

step "2. a tiny Llama (examples/tiny/config.json) as two pipeline-stage weight shards"
braid init --config examples/tiny/config.json --stages 2 --seed 1 -o "$out/tiny.h5"
braid inspect "$out/tiny.stage0-of-2.h5" | head -n 8

step "3. its layer costs measured on this machine"
braid-profile measure --model examples/tiny/config.json --quick --repeats 3 -o "$out/tiny-profile.json"
braid inspect "$out/tiny-profile.json" | head -n 12

step "4. RLHFuse's 65B actor / 33B critic on 32x8 H100: profile and plan"
braid-profile analytic --hardware h100 --experiment examples/plan/rlhfuse-65b-33b-len1024.json \
  -o "$out/h100-profile.json"
braid-meshplan examples/plan/rlhfuse-65b-33b-len1024.json examples/plan/cluster-32x8-h100.json \
  --profile "$out/h100-profile.json" --time-limit 15 -o "$out/plan.json"

step "5. the fused actor+critic training schedule of that plan"
braid-schedgen "$out/plan.json" --time-limit 10 -o "$out/schedule.json" --svg "$out/schedule.svg"
braid-schedgen --verify "$out/schedule.json"
braid inspect "$out/schedule.json"

step "6. every file checked"
braid check -v "$out"/*.h5 "$out"/*.json
echo "all $(ls "$out"/*.h5 "$out"/*.json | wc -l) files are complete braid files; outputs in $out/"
