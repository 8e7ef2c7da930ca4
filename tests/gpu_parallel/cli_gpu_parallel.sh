#!/usr/bin/env bash
# Data and tensor parallelism on --device cuda under mpirun, two processes on one GPU (the
# MPI fallback of comm::cuda_group: they share GPU 0, so device buffers are staged through
# host memory; docs/parallel.md), against one process on the same GPU:
#  * braid-score --device cuda over 2 ranks (dp 2, and tp 2): each scored shard written
#    once, listed once, the integer arrays equal to one process's and every float array
#    within 1e-4 relative (‖a − b‖ / ‖b‖; the order of the sums differs);
#  * braid-train sft over 2 ranks (dp 2 with ZeRO-1; and tp 2) and ppo over 2 ranks (dp 2):
#    every tensor after 6 AdamW steps within 1e-4 relative of one process's at dp 2 and
#    2e-4 at tp 2 (on --device cpu the largest absolute differences are 1.6e-7 and 4.7e-5;
#    a GPU's products also differ with the rows each rank has);
#  * the transport is logged once: "device buffers between ranks: MPI, staged ...";
#  * BRAID_DEVICE_COMM=nccl where the ranks share a GPU exits 2 naming the variable.
# Without mpirun or a usable GPU it exits 77 (skipped).
# Usage: cli_gpu_parallel.sh COMPARE   (the compare_outputs executable)
. "$BRAID_SOURCE/tests/common/cli.sh"
CMP=${1:?compare_outputs}
B="${BRAID_BIN:?}"
needs_mpirun

cp "${BRAID_FIXTURES:?}/model/tiny_llama_config.json" config.json   # hidden 32, 2 layers, 4/2 heads, vocab 259
"$B/braid" init -q -c config.json --seed 1 --init-std 0.08 -o actor.h5 > /dev/null
"$B/braid" init -q -c config.json --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
sft_examples 11 > sft.jsonl
COMMON=(--device cuda --lr 1e-2 --mini-batch 4 --epochs 2 --micro-tokens 48 --seed 5 --max-grad-norm 0.5
        --weight-decay 0.01)

# One process on the GPU first: where there is none, skip.
set +e
"$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-1.h5 "${COMMON[@]}" > sft-1.out 2> sft-1.err
rc=$?
set -e
if [[ $rc == 2 ]] && grep -qE "no CUDA GPU|built without CUDA" sft-1.err; then
  echo "SKIP: $(grep -m1 -- '--device' sft-1.err)"; exit 77
fi
[[ $rc == 0 ]] || { cat sft-1.err; fail "sft alone on the GPU: exit $rc"; }

# Two ranks on one GPU: the MPI fallback, because they share it (or, in a build without
# NCCL, because there is none).
fallback="device buffers between ranks: MPI, staged through host memory \((ranks 0 and 1 share the GPU|this build has no NCCL)"
logged_once() {   # NAME.err holds the transport line exactly once
  [[ $(grep -c "device buffers between ranks:" "$1.err") == 1 ]] && grep -qE "$fallback" "$1.err" \
    || { cat "$1.err"; fail "$1: the transport should be logged once, as the MPI fallback"; }
}

# ---- braid-train sft: dp 2 (ZeRO-1), then tp 2.
mpirun -np 2 "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-dp2.h5 "${COMMON[@]}" \
  > sft-dp2.out 2> sft-dp2.err || { cat sft-dp2.err; fail "sft over 2 ranks on the GPU"; }
[[ $(cat sft-dp2.out) == sft-dp2.h5 ]] || fail "sft dp 2: stdout should list the checkpoint once: $(cat sft-dp2.out)"
grep -q "data parallel over 2 ranks" sft-dp2.err || { cat sft-dp2.err; fail "sft dp 2: not data parallel"; }
grep -q "optimizer state sharded over 2 ranks" sft-dp2.err || fail "sft dp 2: the optimizer state is not sharded"
logged_once sft-dp2
"$CMP" weights sft-1.h5 sft-dp2.h5 1e-4 || fail "sft dp 2 differs from one process"

mpirun -np 2 "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out sft-tp2.h5 --tp 2 "${COMMON[@]}" \
  > sft-tp2.out 2> sft-tp2.err || { cat sft-tp2.err; fail "sft at tp 2 on the GPU"; }
logged_once sft-tp2
"$B/braid" reshard -q sft-tp2.h5 --tp 1 -o sft-tp2-whole.h5 > /dev/null
"$CMP" weights sft-1.h5 sft-tp2-whole.h5 2e-4 || fail "sft tp 2 differs from one process"

# ---- braid-score --device cuda: dp 2 and tp 2 against one process.
head -8 "$BRAID_SOURCE/examples/ppo-tiny/prompts.jsonl" > prompts.jsonl
"$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o gen --samples-per-prompt 2 --max-new-tokens 8 \
  --shard-size 4 --seed 3 > /dev/null
n=$(ls gen/gen-*.h5 | wc -l)
SCORE=(gen/gen-*.h5 --ref actor.h5 --critic critic.h5 --reward-rule digits --device cuda)
"$B/braid-score" "${SCORE[@]}" -o scored1 > score1.out 2> score1.err || { cat score1.err; fail "score alone"; }
for how in dp2 tp2; do
  extra=(); [[ $how == tp2 ]] && extra=(--tp 2)
  mpirun -np 2 "$B/braid-score" "${SCORE[@]}" "${extra[@]}" -o scored-$how > score-$how.out 2> score-$how.err \
    || { cat score-$how.err; fail "score $how on the GPU"; }
  [[ $(wc -l < score-$how.out) == "$n" && $(sort -u score-$how.out | wc -l) == "$n" ]] \
    || fail "score $how: stdout should name each of the $n shards once: $(cat score-$how.out)"
  [[ $(ls scored-$how/scored-*.h5 | wc -l) == "$n" ]] || fail "score $how: expected $n scored shards"
  for f in scored1/scored-*.h5; do
    "$CMP" shards "$f" "scored-$how/${f##*/}" 1e-4 > cmp-$how.out || { cat cmp-$how.out; fail "score $how: ${f##*/} differs from one process"; }
  done
done
logged_once score-tp2

# ---- braid-train ppo: dp 2 against one process, from the scored shards.
PPO=(scored1/scored-*.h5 --actor actor.h5 --critic critic.h5 --device cuda --lr 1e-2 --critic-lr 1e-2 --mini-batch 6
     --epochs 2 --micro-tokens 40 --seed 5 --max-grad-norm 0.5)
"$B/braid-train" ppo "${PPO[@]}" --actor-out ppo-1-actor.h5 --critic-out ppo-1-critic.h5 > /dev/null 2> ppo-1.err \
  || { cat ppo-1.err; fail "ppo alone"; }
mpirun -np 2 "$B/braid-train" ppo "${PPO[@]}" --actor-out ppo-2-actor.h5 --critic-out ppo-2-critic.h5 > ppo-2.out \
  2> ppo-2.err || { cat ppo-2.err; fail "ppo over 2 ranks on the GPU"; }
logged_once ppo-2
"$CMP" weights ppo-1-actor.h5 ppo-2-actor.h5 1e-4 || fail "ppo dp 2: the actor differs from one process"
"$CMP" weights ppo-1-critic.h5 ppo-2-critic.h5 1e-4 || fail "ppo dp 2: the critic differs from one process"

# ---- NCCL asked for where it cannot run.
BRAID_DEVICE_COMM=nccl expect_bad nccl_shared "BRAID_DEVICE_COMM=nccl" "share the GPU" -- \
  mpirun -np 2 -x BRAID_DEVICE_COMM "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out bad.h5 "${COMMON[@]}"
[[ ! -e bad.h5 ]] || fail "a refused run wrote its checkpoint"
echo "cli_gpu_parallel: ok"
