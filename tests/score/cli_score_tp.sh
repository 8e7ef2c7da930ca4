#!/usr/bin/env bash
# braid-score --tp 2 under mpirun -np NP (2: one device of tp 2; 4: two devices of tp 2,
# the shards dealt by device) against the single process (docs/parallel.md):
#  * PPO with a reference, a critic and a reward model: every dataset equal, the
#    reference logprobs, values, rewards, advantages and returns within 1e-4
#    (absolute + relative; the difference is the order of the tensor-parallel sums);
#  * GRPO with a text reward (an external scorer, started once per device, on its tp
#    rank 0) and groups straddling shards: the same;
#  * each output written once (one "wrote" line, printed once, counted once in --stats);
#  * a rerun skips every output (the skip is tp rank 0's decision) and rewrites nothing;
#  * a critic resharded to tp 2 (slice files) scores the same;
#  * bad inputs exit 2 naming what is wrong (checked with NP 2): -np not a multiple of
#    --tp, --tp without mpirun, a config that does not split, a checkpoint of another tp
#    degree, --device cuda where there is no GPU.
# Usage: cli_score_tp.sh NP
. "$BRAID_SOURCE/tests/common/cli.sh"
NP=${1:?NP}
B="${BRAID_BIN:?}"
PY=/usr/bin/python3
CMP=("$PY" "$BRAID_SOURCE/tests/fuse/compare_scored.py")
needs_mpirun
DEVICES=$((NP / 2))

CONFIG="$BRAID_SOURCE/examples/tiny/config.json"   # 4 heads, 2 key/value heads: tp 1 or 2
"$B/braid" init -q --config "$CONFIG" --init-std 0.08 --seed 3 -o actor.h5 > /dev/null
"$B/braid" init -q --config "$CONFIG" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
"$B/braid" init -q --config "$CONFIG" --seed 4 --value-head --no-lm-head -o rm.h5 > /dev/null
questions 1 8 > p.jsonl
"$B/braid-generate" -q --actor actor.h5 --prompts p.jsonl --samples-per-prompt 4 --shard-size 6 --max-new-tokens 24 \
  --temperature 0.9 --seed 5 --threads 1 -o gen > /dev/null
n=$(ls gen/gen-*.h5 | wc -l)   # 32 samples in shards of 6: groups of 4 straddle shards (3 units)
[[ $n == 6 ]] || fail "expected 6 generated shards, found $n"

PPO=(--ref actor.h5 --critic critic.h5 --reward rm.h5 --threads 1)
# One line per start of the scorer, then an answer per sample: its response's length.
SCORER="echo started >> $S/starts; while read -r line; do echo \${#line}; done"
GRPO=(--algorithm grpo --ref actor.h5 --reward-cmd "$SCORER" --threads 1)

# A tp run's outputs: each written once, printed once, counted once.
check_run() {
  local name=$1 dir=$2
  [[ $(wc -l < "$name.out") == "$n" && $(sort -u "$name.out" | wc -l) == "$n" ]] \
    || fail "$name: stdout should name each of the $n outputs once: $(cat "$name.out")"
  [[ $(grep -c "wrote $dir/" "$name.err") == "$n" ]] || { cat "$name.err"; fail "$name: each output should be written once"; }
  "$PY" - "$name.json" "$n" "$DEVICES" <<'PY' || fail "$name: stats"
import json, sys
s, n, devices = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
assert s["tp"] == 2 and s["shards_scored"] == n, s
ranks = s.get("ranks", [s])
assert len(ranks) == devices and all(r["shards_scored"] > 0 for r in ranks), ("one entry per device, each scored", ranks)
PY
}

# ---- PPO: reference, critic, reward model.
"$B/braid-score" gen/gen-*.h5 -q -o ppo1 "${PPO[@]}" > /dev/null
mpirun -np "$NP" "$B/braid-score" gen/gen-*.h5 -o ppo_tp "${PPO[@]}" --tp 2 --stats ppo_tp.json > ppo_tp.out 2> ppo_tp.err \
  || { cat ppo_tp.err; fail "PPO at tp 2 failed"; }
check_run ppo_tp ppo_tp
"${CMP[@]}" ppo_tp ppo1 --atol 1e-4 --rtol 1e-4 || fail "PPO: tp 2 differs from one process"

# A rerun: every output skipped, none rewritten.
touch -d 2000-01-01 ppo_tp/*.h5
mpirun -np "$NP" "$B/braid-score" gen/gen-*.h5 -o ppo_tp "${PPO[@]}" --tp 2 --stats again.json > again.out 2> again.err \
  || { cat again.err; fail "the rerun failed"; }
[[ $(sort -u again.out | wc -l) == "$n" ]] || fail "the rerun reported $(sort -u again.out | wc -l) outputs"
[[ $(find ppo_tp -newer p.jsonl -name '*.h5' | wc -l) == 0 ]] || fail "the rerun rewrote an output"
"$PY" -c 'import json; s = json.load(open("again.json")); assert s["shards_skipped"] == 6 and s["shards_scored"] == 0, s' \
  || fail "the rerun's stats"

# The critic as tp 2 slice files.
"$B/braid" reshard critic.h5 --tp 2 -o critic2.h5 > /dev/null
mpirun -np "$NP" "$B/braid-score" gen/gen-*.h5 -q -o sliced --ref actor.h5 --critic critic2.h5 --reward rm.h5 \
  --threads 1 --tp 2 > /dev/null 2> sliced.err || { cat sliced.err; fail "tp 2 from slice files failed"; }
"${CMP[@]}" sliced ppo1 --atol 1e-4 --rtol 1e-4 || fail "tp 2 from slice files differs from one process"
# ... and one process opens them joined: the same scores as from the whole file.
"$B/braid-score" gen/gen-*.h5 -q -o joined --ref actor.h5 --critic critic2.h5 --reward rm.h5 --threads 1 \
  > /dev/null 2> joined.err || { cat joined.err; fail "one process from tp 2 slice files failed"; }
"${CMP[@]}" joined ppo1 --atol 0 --rtol 0 || fail "one process from tp 2 slice files differs from the whole file"

# ---- GRPO with an external scorer: groups straddle shards, each unit on one device.
rm -f starts
"$B/braid-score" gen/gen-*.h5 -q -o grpo1 "${GRPO[@]}" > /dev/null
[[ $(wc -l < starts) == 1 ]] || fail "one process should start the scorer once"
rm -f starts
mpirun -np "$NP" "$B/braid-score" gen/gen-*.h5 -o grpo_tp "${GRPO[@]}" --tp 2 --stats grpo_tp.json > grpo_tp.out \
  2> grpo_tp.err || { cat grpo_tp.err; fail "GRPO at tp 2 failed"; }
check_run grpo_tp grpo_tp
[[ $(wc -l < starts) == "$DEVICES" ]] || fail "the scorer should start once per device, started $(wc -l < starts) times"
"${CMP[@]}" grpo_tp grpo1 --atol 1e-4 --rtol 1e-4 || fail "GRPO: tp 2 differs from one process"

# ---- Bad inputs (once, with NP 2).
[[ $NP == 2 ]] || { echo "cli_score_tp np $NP: ok"; exit 0; }
expect_bad not_multiple "--tp 2" "ranks = devices x tp" -- mpirun -np 3 "$B/braid-score" gen/gen-*.h5 -o bad1 "${PPO[@]}" --tp 2
expect_bad no_mpirun "--tp 2" "mpirun" -- "$B/braid-score" gen/gen-*.h5 -o bad2 "${PPO[@]}" --tp 2
expect_bad no_split "model_config" "num_key_value_heads" -- \
  mpirun -np 4 "$B/braid-score" gen/gen-*.h5 -o bad3 "${PPO[@]}" --tp 4
# --device cuda without a GPU: refused before any rank loads a model (with one: tests/gpu_parallel).
if ! nvidia-smi -L > /dev/null 2>&1; then
  expect_bad cuda "--device cuda:0" -- mpirun -np 2 "$B/braid-score" gen/gen-*.h5 -o bad5 "${PPO[@]}" --tp 2 --device cuda
fi
for d in bad1 bad2 bad3 bad4 bad5; do
  [[ ! -e $d ]] || [[ -z $(ls "$d") ]] || fail "$d: a refused run left outputs behind"
done
echo "cli_score_tp np $NP: ok"
