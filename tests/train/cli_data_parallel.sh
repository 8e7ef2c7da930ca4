#!/usr/bin/env bash
# braid-train under mpirun without --schedule is data parallel (docs/tools/train.md):
#  * sft and ppo over 2 and 3 ranks (3: parts of different sizes) write the checkpoints the
#    single process writes on the same mini-batches: every weight within 2e-5 (absolute,
#    after 6 AdamW steps at lr 1e-2 with braid-train's eps 1e-8, which lets an element of
#    near-zero gradient step by up to lr on rounding; measured at most 2.1e-6), the
#    per-step losses of --stats within 1e-5 (relative; measured equal to 6 digits) and
#    the optimizer state within 1e-4 of its largest element (measured 2e-7);
#  * the checkpoint files are listed on stdout once, not once per rank;
#  * exactly one rank writes: run as mpirun MPMD, rank 1 is given its own output names,
#    and nothing appears under them (rank 0's outputs do);
#  * the moments are sharded: the log gives this rank's share.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
PY=/usr/bin/python3

cp "${BRAID_FIXTURES:?}/model/tiny_llama_config.json" config.json   # hidden 32, 2 layers, 4/2 heads, vocab 259
"$B/braid" init -q -c config.json --seed 1 -o actor.h5 > /dev/null
"$B/braid" init -q -c config.json --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null

# 11 SFT examples of different lengths: mini-batches of 4 (4, 4, 3 over two epochs) do not
# split evenly over 3 ranks.
sft_examples 11 > sft.jsonl
COMMON=(--lr 1e-2 --mini-batch 4 --epochs 2 --micro-tokens 48 --threads 1 --seed 5 --max-grad-norm 0.5
        --weight-decay 0.01)

# compare A B: weights and optimizer state of two checkpoints, and (if given) two stats files.
compare() {
  "$PY" "$BRAID_SOURCE/tests/train/compare_checkpoints.py" "$@"
}

# --- sft ---
"$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-1.h5 --stats sft-1.json "${COMMON[@]}" \
  > sft-1.out 2> sft-1.err || { cat sft-1.err; fail "sft alone"; }
for np in 2 3; do
  mpirun -np $np "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-$np.h5 --stats sft-$np.json \
    "${COMMON[@]}" > sft-$np.out 2> sft-$np.err || { cat sft-$np.err; fail "sft over $np ranks"; }
  [ "$(cat sft-$np.out)" = "sft-$np.h5" ] || { cat sft-$np.out; fail "sft over $np ranks: stdout is not the checkpoint, once"; }
  grep -q "data parallel over $np ranks" sft-$np.err || { cat sft-$np.err; fail "sft over $np ranks: not data parallel"; }
  grep -q "optimizer state sharded over $np ranks" sft-$np.err || fail "sft over $np ranks: no shard report"
  compare sft-1.h5 sft-$np.h5 sft-1.json sft-$np.json
done
grep -o "optimizer state sharded.*" sft-2.err

# --- ppo: scored shards from the real tools ---
head -8 "$BRAID_SOURCE/examples/ppo-tiny/prompts.jsonl" > prompts.jsonl
"$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o gen --samples-per-prompt 2 --max-new-tokens 8 \
  --threads 1 --shard-size 8 --seed 3 | "$B/braid-score" -q - -o scored --critic critic.h5 --reward-rule digits \
  --threads 1 > scored.list
[ "$(wc -l < scored.list)" = 2 ] || { cat scored.list; fail "expected 2 scored shards"; }
PPO=(scored/scored-*.h5 --actor actor.h5 --critic critic.h5 --lr 1e-2 --critic-lr 1e-2 --mini-batch 6 --epochs 2
     --micro-tokens 40 --threads 1 --seed 5 --max-grad-norm 0.5)
"$B/braid-train" ppo "${PPO[@]}" --actor-out ppo-1-actor.h5 --critic-out ppo-1-critic.h5 --stats ppo-1.json \
  > ppo-1.out 2> ppo-1.err || { cat ppo-1.err; fail "ppo alone"; }
for np in 2 3; do
  mpirun -np $np "$B/braid-train" ppo "${PPO[@]}" --actor-out ppo-$np-actor.h5 --critic-out ppo-$np-critic.h5 \
    --stats ppo-$np.json > ppo-$np.out 2> ppo-$np.err || { cat ppo-$np.err; fail "ppo over $np ranks"; }
  [ "$(cat ppo-$np.out)" = "$(printf 'ppo-%s-actor.h5\nppo-%s-critic.h5' $np $np)" ] ||
    { cat ppo-$np.out; fail "ppo over $np ranks: stdout is not the two checkpoints, once each"; }
  compare ppo-1-actor.h5 ppo-$np-actor.h5 ppo-1.json ppo-$np.json
  compare ppo-1-critic.h5 ppo-$np-critic.h5
done

# --- exactly one rank writes: rank 1 names other outputs, which must not appear ---
mpirun -np 1 "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out w0.h5 --stats w0.json "${COMMON[@]}" : \
       -np 1 "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out w1.h5 --stats w1.json "${COMMON[@]}" \
       > w.out 2> w.err || { cat w.err; fail "MPMD sft"; }
for f in w0.h5 w0.optim.h5 w0.json; do [ -s "$f" ] || fail "rank 0 did not write $f"; done
for f in w1.h5 w1.optim.h5 w1.json; do [ ! -e "$f" ] || fail "rank 1 wrote $f"; done
[ "$(cat w.out)" = "w0.h5" ] || { cat w.out; fail "MPMD sft: stdout is not rank 0's checkpoint"; }
compare sft-1.h5 w0.h5

# --- a rerun finds the outputs complete on every rank and lists them once ---
mpirun -np 2 "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-2.h5 "${COMMON[@]}" \
  > rerun.out 2> rerun.err || { cat rerun.err; fail "rerun"; }
grep -q "already complete" rerun.err || { cat rerun.err; fail "rerun did not skip"; }
[ "$(cat rerun.out)" = "sft-2.h5" ] || { cat rerun.out; fail "rerun: stdout"; }

# --- stdin cannot feed every rank: refused, exit 2 ---
set +e
mpirun -np 2 "$B/braid-train" sft - --actor actor.h5 --actor-out x.h5 "${COMMON[@]}" < sft.jsonl > x.out 2> x.err
rc=$?
set -e
[ "$rc" = 2 ] || { cat x.err; fail "sft - under mpirun: exit $rc, expected 2"; }
grep -q "name the data file as arguments" x.err || { cat x.err; fail "sft - under mpirun: message"; }
# --- a sequence too long for --micro-tokens reaches one rank only: every rank exits 2 at once
# (not after BRAID_COMM_TIMEOUT), the rank holding it naming the way out ---
printf '{"prompt": "%s", "response": "x"}\n' "$(printf '%*s' 60 '' | tr ' ' 'y')" >> long.jsonl
head -3 sft.jsonl >> long.jsonl
set +e
BRAID_COMM_TIMEOUT=60 timeout 50 mpirun -np 2 "$B/braid-train" sft long.jsonl --actor actor.h5 --actor-out y.h5 \
  --micro-tokens 40 --threads 1 > y.out 2> y.err
rc=$?
set -e
[ "$rc" = 2 ] || { cat y.err; fail "a sequence over --micro-tokens under mpirun: exit $rc, expected 2"; }
grep -q "does not fit a micro-batch of 40 tokens" y.err || { cat y.err; fail "too long: the message"; }
[ ! -e y.h5 ] || fail "too long: a checkpoint was written"
echo "OK: sft and ppo over 2 and 3 ranks train as one process; one rank writes"
