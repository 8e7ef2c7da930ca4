#!/usr/bin/env bash
# An iteration's time with OPPO's overcommit and with the one-step asynchronous mode, each
# on and off (docs/overlap.md): PPO on the tiny model (examples/tiny/config.json) from
# random weights, sampled at temperature 3 so that response lengths are long-tailed (the
# EOS comes at a rate of about 1 in 175 tokens: median ~120, p90 ~440, capped at
# MAX_NEW_TOKENS), run by `braid run` three ways:
#   sync        generate | score, then train, one after the other (today's loop)
#   overcommit  generate.overcommit = OVERCOMMIT extra groups; the long tail is deferred
#   async       "async": true; iteration i+1's rollout runs beside iteration i's training
# Prints one line per mode: seconds per iteration (the driver's wall time for the steps of
# iterations 2..N, so the first, un-overlapped rollout is left out), the stage tools' own
# mean times, generation's forward steps (decode steps: what an iteration costs where a
# decode step costs the same however few sequences run, as on a GPU), the mean response
# length trained on and the samples deferred per iteration.
#
#   bench/overlap/bench_overlap.sh [BIN_DIR] [OUT_DIR]     (defaults: build/bin, /tmp/braid-overlap)
# Settings: ITERATIONS (4), PROMPTS (16), SAMPLES (1 per prompt), MAX_NEW_TOKENS (400),
# OVERCOMMIT (4 groups), THREADS (1 per process), REPEATS (3; the fastest is shown).
set -euo pipefail
BIN=$(cd "${1:-build/bin}" && pwd)
OUT=${2:-/tmp/braid-overlap}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ITERATIONS=${ITERATIONS:-4} PROMPTS=${PROMPTS:-16} SAMPLES=${SAMPLES:-1} MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-400}
OVERCOMMIT=${OVERCOMMIT:-4} THREADS=${THREADS:-1} REPEATS=${REPEATS:-3}
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
cp "$SRC/examples/tiny/config.json" config.json
for i in $(seq 1 "$PROMPTS"); do echo "{\"text\": \"Number $i is\"}"; done > prompts.jsonl
run_file() {
  cat <<JSON
{"format": "braid.run", "version": 1, "algorithm": "ppo", $1
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
            "critic": {"init": {"config": "config.json", "seed": 2}}, "reward": {"rule": "digits"}},
 "prompts": "prompts.jsonl", "iterations": $ITERATIONS, "threads": $THREADS,
 "generate": {"samples_per_prompt": $SAMPLES, "max_new_tokens": $MAX_NEW_TOKENS, "temperature": 3.0,
              "max_batch": 64, "shard_size": $SAMPLES $2},
 "train": {"lr": 0.002, "critic_lr": 0.001}}
JSON
}
run_file '' '' > sync.json
run_file '' ", \"overcommit\": $OVERCOMMIT" > overcommit.json
run_file '"async": true,' '' > async.json
# Interleaved (sync, overcommit, async, sync, ...), so that a change of the machine's load
# falls on every mode alike.
for r in $(seq 1 "$REPEATS"); do
  for mode in sync overcommit async; do
    "$BIN/braid" run "$mode.json" -o "$mode-$r" -q > /dev/null
  done
done
python3 - "$ITERATIONS" "$REPEATS" <<'PY'
import json, sys
iterations, repeats = int(sys.argv[1]), int(sys.argv[2])
print(f"{'mode':<11} {'s/iter':>7} {'generate':>9} {'score':>6} {'train':>6} {'steps':>6} {'length':>7} {'deferred':>9}")
for mode in ("sync", "overcommit", "async"):
    best = None
    for r in range(1, repeats + 1):
        m = [json.loads(l) for l in open(f"{mode}-{r}/metrics.jsonl")]
        later = m[1:]
        per_iter = sum(x["seconds"]["iteration"] for x in later) / len(later)
        row = (per_iter,
               sum(x["seconds"]["generate"] for x in m) / len(m),
               sum(x["seconds"]["score"] for x in m) / len(m),
               sum(x["seconds"]["train"] for x in m) / len(m),
               sum(json.load(open(f"{mode}-{r}/iter-{x['iteration']:04d}/generate.stats.json"))["calls"]["actor_gen"]["steps"]
                   for x in m) / len(m),
               sum(x["mean_response_length"] for x in m) / len(m),
               sum(x.get("overcommit", {}).get("deferred_samples", 0) for x in m) / len(m))
        best = row if best is None or row[0] < best[0] else best
    print(f"{mode:<11} {best[0]:7.2f} {best[1]:9.2f} {best[2]:6.2f} {best[3]:6.2f} {best[4]:6.0f} {best[5]:7.1f} {best[6]:9.1f}")
PY
