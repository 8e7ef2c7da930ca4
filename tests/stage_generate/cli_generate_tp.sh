#!/usr/bin/env bash
# braid-generate --tp 2 under mpirun -np NP (2: one device of tp 2; 4: two devices of
# tp 2) against the single process at tp 1 (docs/parallel.md):
#  * greedy and sampled (temperature 0.9, top-p 0.95, a seed): the same shards, tokens
#    equal and logprobs within 1e-4 (absolute + relative; the difference is the order of
#    the tensor-parallel sums);
#  * each shard written once (printed once on stdout, counted once in --stats);
#  * a checkpoint resharded to tp 2 (braid reshard) loads its slice files and gives the
#    same shards;
#  * NP 4: long-tail migration between the two devices (each tp rank hands over to the
#    same tp rank of the receiver) gives the same shards too;
#  * bad inputs exit 2 naming what is wrong: -np not a multiple of --tp, --tp without
#    mpirun, a config that does not split (tp 4, 2 key/value heads), a checkpoint of
#    another tp degree, --device cuda where there is no GPU, --overcommit and the fused rollout with --tp
#    (checked with NP 2).
# Usage: cli_generate_tp.sh NP
. "$BRAID_SOURCE/tests/common/cli.sh"
NP=${1:?NP}
B="${BRAID_BIN:?}"
PY=/usr/bin/python3
CMP=("$PY" "$BRAID_SOURCE/tests/fuse/compare_scored.py" --pattern 'gen-*.h5')
needs_mpirun

CONFIG="$BRAID_SOURCE/examples/tiny/config.json"   # 4 heads, 2 key/value heads: tp 1 or 2
# --init-std 0.08: responses of very different lengths (a long tail to migrate).
"$B/braid" init -q --config "$CONFIG" --init-std 0.08 --seed 3 -o actor.h5 > /dev/null
questions 1 8 > p.jsonl
OPTS=(--prompts p.jsonl --samples-per-prompt 2 --shard-size 3 --max-new-tokens 40 --max-batch 4
     --threads 1)
GEN=(--actor actor.h5 "${OPTS[@]}")
SAMPLED=(--temperature 0.9 --top-p 0.95 --seed 5)
GREEDY=(--temperature 0)
SHARDS=6   # 8 prompts x 2 samples in shards of 3

# A tp run's stdout and stats: every shard printed once, written once.
check_run() {
  local name=$1
  [[ $(wc -l < "$name.out") == "$SHARDS" && $(sort -u "$name.out" | wc -l) == "$SHARDS" ]] \
    || fail "$name: stdout should name each of the $SHARDS shards once: $(cat "$name.out")"
  "$PY" - "$name.json" "$SHARDS" "$NP" <<'PY' || fail "$name: stats"
import json, sys
s, shards, np_ = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
assert s["tp"] == 2, s
assert s["shards_written"] == shards, ("each shard written once", s["shards_written"])
assert len(s["ranks"]) == np_ // 2, ("one entry per device", s["ranks"])
PY
}

"$B/braid-generate" -q "${GEN[@]}" "${GREEDY[@]}" -o greedy1 > /dev/null
"$B/braid-generate" -q "${GEN[@]}" "${SAMPLED[@]}" -o sampled1 > /dev/null

mpirun -np "$NP" "$B/braid-generate" -q "${GEN[@]}" "${GREEDY[@]}" --tp 2 -o greedy_tp --stats greedy_tp.json \
  > greedy_tp.out 2> greedy_tp.err || { cat greedy_tp.err; fail "greedy at tp 2 failed"; }
check_run greedy_tp
"${CMP[@]}" greedy_tp greedy1 --atol 1e-4 --rtol 1e-4 || fail "greedy: tp 2 differs from tp 1"

mpirun -np "$NP" "$B/braid-generate" -q "${GEN[@]}" "${SAMPLED[@]}" --tp 2 -o sampled_tp --stats sampled_tp.json \
  > sampled_tp.out 2> sampled_tp.err || { cat sampled_tp.err; fail "sampled at tp 2 failed"; }
check_run sampled_tp
"${CMP[@]}" sampled_tp sampled1 --atol 1e-4 --rtol 1e-4 || fail "sampled: tp 2 differs from tp 1"

# The checkpoint as tp 2 slice files: each tp rank opens its own.
"$B/braid" reshard actor.h5 --tp 2 -o actor2.h5 > /dev/null
[[ -f actor2.tp0-of-2.h5 && -f actor2.tp1-of-2.h5 ]] || fail "braid reshard --tp 2 made no slice files"
mpirun -np "$NP" "$B/braid-generate" -q --actor actor2.h5 "${OPTS[@]}" "${SAMPLED[@]}" --tp 2 -o sliced \
  > /dev/null 2> sliced.err || { cat sliced.err; fail "tp 2 from slice files failed"; }
"${CMP[@]}" sliced sampled1 --atol 1e-4 --rtol 1e-4 || fail "tp 2 from slice files differs from tp 1"
# ... and one process opens them joined: the whole model's bits, the same samples.
"$B/braid-generate" -q --actor actor2.h5 "${OPTS[@]}" "${SAMPLED[@]}" -o joined > /dev/null 2> joined.err \
  || { cat joined.err; fail "one process from tp 2 slice files failed"; }
"${CMP[@]}" joined sampled1 --atol 0 --rtol 0 || fail "one process from tp 2 slice files differs from the whole file"

if [[ $NP == 4 ]]; then
  # Two devices: the long tail moves to one of them.
  mpirun -np 4 "$B/braid-generate" "${GEN[@]}" "${SAMPLED[@]}" --tp 2 --migrate-threshold 0.5 --migrate-to 1 \
    -o migrated --stats migrated.json > migrated.out 2> migrated.err || { cat migrated.err; fail "migration at tp 2 failed"; }
  check_run migrated
  "$PY" -c 'import json; s = json.load(open("migrated.json")); m = s["migration"]; assert m is not None and m["moved_shards"] > 0, m' \
    || { cat migrated.err; fail "no migration between the devices"; }
  grep -q "device(s) [01] take them over" migrated.err || fail "the migration is not announced by device"
  "${CMP[@]}" migrated sampled1 --atol 1e-4 --rtol 1e-4 || fail "migration at tp 2 differs from tp 1"
fi

# ---- Bad inputs (once, with NP 2).
[[ $NP == 2 ]] || { echo "cli_generate_tp np $NP: ok"; exit 0; }
expect_bad not_multiple "--tp 2" "ranks = devices x tp" -- \
  mpirun -np 3 "$B/braid-generate" "${GEN[@]}" --tp 2 -o bad1
expect_bad no_mpirun "--tp 2" "mpirun" -- "$B/braid-generate" "${GEN[@]}" --tp 2 -o bad2
expect_bad no_split "actor.h5" "model_config" "num_key_value_heads" -- \
  mpirun -np 4 "$B/braid-generate" "${GEN[@]}" --tp 4 -o bad3
# --device cuda without a GPU: refused before any rank loads a model (with one: tests/gpu_parallel).
if ! nvidia-smi -L > /dev/null 2>&1; then
  expect_bad cuda "--device cuda:0" -- mpirun -np 2 "$B/braid-generate" "${GEN[@]}" --tp 2 --device cuda -o bad5
fi
expect_bad overcommit "--overcommit" "--tp 2" -- \
  mpirun -np 2 "$B/braid-generate" "${GEN[@]}" --tp 2 --overcommit 1 --deferred-out d.h5 -o bad6
expect_bad fused "fused rollout" "--tp 1 only" -- \
  mpirun -np 2 "$B/braid-generate" "${GEN[@]}" --tp 2 -o bad7 -- -o bad7s --algorithm grpo --reward-rule digits
for d in bad1 bad2 bad3 bad4 bad5 bad6 bad7; do
  [[ ! -e $d ]] || [[ -z $(ls "$d") ]] || fail "$d: a refused run left shards behind"
done
echo "cli_generate_tp np $NP: ok"
