#!/usr/bin/env bash
# Non-finite values never pass silently. A weight shard with one NaN tensor, a sample
# shard with a NaN in a float array, and a learning rate that makes the weights
# diverge: every tool that meets them exits 2 naming the file and the tensor or
# array, writes nothing under its output name, and braid check reports the files.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
POISON="$IO_POISON"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"
# braid check answers 1 for the file; -v names the file and the field.
expect_check_problem() {
  local file=$1 field=$2
  set +e
  "$B/braid" check "$file" > check.out 2> check.err
  local rc=$?
  "$B/braid" check -v "$file" > check.out 2> check.err
  set -e
  [[ $rc == 1 ]] || fail "braid check $file: exit $rc, expected 1"
  grep -qF -- "$file" check.err && grep -qF -- "$field" check.err && grep -qE "nan|inf" check.err ||
    { cat check.err >&2; fail "braid check -v $file does not name $field"; }
}

. "$BRAID_SOURCE/tests/io/tiny_scored.sh"
"$B/braid" check actor.h5 critic.h5 gen/gen-00000.h5 scored/scored-00000.h5 || fail "the good files do not check"

# --- A weight shard with one NaN tensor: refused by every tool that loads weights.
"$POISON" actor.h5 nan-actor.h5 model.norm.weight
expect_check_problem nan-actor.h5 model.norm.weight
"$POISON" actor.h5 inf-actor.h5 model.embed_tokens.weight inf
expect_check_problem inf-actor.h5 model.embed_tokens.weight
expect_bad generate nan-actor.h5 model.norm.weight nan -- \
  "$B/braid-generate" -q --actor nan-actor.h5 --prompts prompts.jsonl -o gen-nan --max-new-tokens 6 --threads 1
[[ ! -e gen-nan/gen-00000.h5 ]] || fail "braid-generate wrote a shard from NaN weights"
expect_bad score-ref nan-actor.h5 model.norm.weight -- \
  "$B/braid-score" -q gen/gen-00000.h5 -o scored-nan --ref nan-actor.h5 --critic critic.h5 --reward-rule length:32 --threads 1
[[ ! -e scored-nan/scored-00000.h5 ]] || fail "braid-score wrote a shard from NaN weights"
expect_bad train-actor nan-actor.h5 model.norm.weight -- \
  "$B/braid-train" -q ppo scored/scored-00000.h5 --actor nan-actor.h5 --actor-out a1.h5 --critic critic.h5 \
  --critic-out c1.h5 --threads 1
[[ ! -e a1.h5 && ! -e c1.h5 ]] || fail "braid-train wrote a checkpoint from NaN weights"
expect_bad export inf-actor.h5 model.embed_tokens.weight inf -- "$B/braid" export inf-actor.h5 -o hf-out

# --- Sample shards with a NaN in a float array: braid-score and braid-train refuse them.
"$POISON" gen/gen-00000.h5 nan-gen.h5 logprobs/actor
expect_check_problem nan-gen.h5 /logprobs/actor
expect_bad score-shard nan-gen.h5 /logprobs/actor -- \
  "$B/braid-score" -q nan-gen.h5 -o scored-nan2 --ref actor.h5 --critic critic.h5 --reward-rule length:32 --threads 1
[[ ! -e scored-nan2/scored-00000.h5 ]] || fail "braid-score wrote a shard from a NaN input"
for a in advantages returns values reward; do
  "$POISON" scored/scored-00000.h5 "nan-$a.h5" "$a"
  expect_check_problem "nan-$a.h5" "/$a"
done
expect_bad train-shard nan-advantages.h5 /advantages -- \
  "$B/braid-train" -q ppo nan-advantages.h5 --actor actor.h5 --actor-out a2.h5 --critic critic.h5 --critic-out c2.h5 --threads 1
[[ ! -e a2.h5 && ! -e c2.h5 ]] || fail "braid-train wrote a checkpoint from a NaN shard"

# --- Results: a KL coefficient of 3e38 against another reference overflows the advantages;
# braid-score refuses to write the shard, naming the array.
"$B/braid" -q init -c "$CONFIG" --seed 5 -o ref.h5 > /dev/null
expect_bad score-result scored-big/scored-00000.h5 /advantages "computed" -- \
  "$B/braid-score" -q gen/gen-00000.h5 -o scored-big --ref ref.h5 --critic critic.h5 --reward-rule length:32 \
  --threads 1 --kl-coef 3e38
[[ ! -e scored-big/scored-00000.h5 ]] || fail "braid-score wrote non-finite advantages"

# --- Results: a learning rate of 1e300 makes the weights infinite after the first step.
expect_bad train-lr a3.h5 "step 1" "model." -- \
  "$B/braid-train" -q ppo scored/scored-00000.h5 --actor actor.h5 --actor-out a3.h5 --critic critic.h5 \
  --critic-out c3.h5 --threads 1 --lr 1e300
[[ ! -e a3.h5 && ! -e a3.optim.h5 ]] || fail "braid-train wrote a diverged checkpoint"
ls a3*.tmp* .a3* 2> /dev/null && fail "braid-train left a temporary file"
# The same under mpirun with a fused pipeline schedule: every rank exits 2, no stage file.
if command -v mpirun > /dev/null; then
  tiny_schedule 4 --iterations 20000 --time-limit 0 --mem-iterations 2000 -q
  expect_bad train-lr-mpi "a4.stage" "step 1" -- \
    mpirun -np 2 "$B/braid-train" -q ppo scored/scored-00000.h5 --actor actor.h5 --actor-out a4.h5 \
    --critic critic.h5 --critic-out c4.h5 --schedule schedule.json --threads 1 --lr 1e300
  [[ -z $(ls a4* c4* 2> /dev/null) ]] || fail "braid-train under mpirun wrote a diverged checkpoint"
fi
echo "ok"
