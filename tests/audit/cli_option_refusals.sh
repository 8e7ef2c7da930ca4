#!/usr/bin/env bash
# The option audit's refusals (tests/audit/option_effects.tsv): an option given where
# nothing reads it exits 2 naming it, writes nothing, and the same call without it runs.
# braid-train: the decay's options under a constant rate, the LoRA shape without
# adapters; braid-score: λ, γ, the std's ε, the group size, the overlong penalty, the
# scorer's timeout and the KL estimator where the algorithm, the reward or a KL coefficient of 0
# does not read them; braid-generate: --top-p and --top-k at temperature 0, --migrate-to
# without --migrate-threshold; a negative --threads (generate, score, train).
set -euo pipefail
S="${BRAID_SCRATCH:?}"
B="${BRAID_BIN:?}"
rm -rf "${S:?}"/*
cd "$S"
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > config.json <<'JSON'
{"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "vocab_size": 259,
 "max_position_embeddings": 64}
JSON
"$B/braid" init -q -c config.json --seed 1 -o a0.h5 > /dev/null
for i in 1 2 3 4; do printf '{"prompt": "q%d", "response": " a%d"}\n' "$i" "$i"; done > sft.jsonl
for i in 1 2; do printf '{"text": "%d+%d="}\n' "$i" "$i"; done > prompts.jsonl
"$B/braid-generate" -q --actor a0.h5 --prompts prompts.jsonl -o gen --samples-per-prompt 2 --max-new-tokens 4 \
  --shard-size 4 --threads 1 --prefix gen > /dev/null
[ -e gen/gen-00000.h5 ] || fail "--prefix gen: no gen/gen-00000.h5"

# refused WHAT OPTION -- COMMAND...: exit 2, the message names OPTION, no output folder/file.
refused() {
  local what=$1 option=$2; shift 3
  set +e
  "$@" > /dev/null 2> err.txt
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat err.txt)"
  grep -q -- "$option" err.txt || fail "$what: $option not named: $(cat err.txt)"
  [ ! -e out.h5 ] && [ ! -e scored ] || fail "$what: wrote an output"
}
TRAIN=("$B/braid-train" sft sft.jsonl --actor a0.h5 --actor-out out.h5 --threads 1 -q)
refused "min-lr, constant rate" --min-lr -- "${TRAIN[@]}" --min-lr 1e-6
refused "total-steps, constant rate" --total-steps -- "${TRAIN[@]}" --total-steps 3
refused "lr-calls, constant rate" --lr-calls -- "${TRAIN[@]}" --lr-calls 2
refused "lora-alpha without adapters" --lora-alpha -- "${TRAIN[@]}" --lora-alpha 8
refused "lora-dropout without adapters" --lora-dropout -- "${TRAIN[@]}" --lora-dropout 0.1
refused "rslora without adapters" --rslora -- "${TRAIN[@]}" --rslora
refused "lora-targets without adapters" --lora-targets -- "${TRAIN[@]}" --lora-targets q,v
"${TRAIN[@]}" --lr-schedule cosine --min-lr 1e-6 --total-steps 3 --lr-calls 2 > /dev/null || fail "cosine decay refused"
[ -e out.h5 ] || fail "cosine decay wrote no checkpoint"
rm -f out.h5 out.optim.h5
"${TRAIN[@]}" --lora-rank 2 --lora-alpha 8 --lora-dropout 0.1 --rslora --lora-targets q,v > /dev/null ||
  fail "adapters refused"
rm -f out.h5 out.optim.h5

SCORE=("$B/braid-score" -q gen/gen-00000.h5 -o scored --reward-rule digits --threads 1)
refused "lambda under grpo" --lambda -- "${SCORE[@]}" --algorithm grpo --lambda 0.9
refused "gamma under grpo" --gamma -- "${SCORE[@]}" --algorithm grpo --gamma 0.9
refused "std-eps without the std" --std-eps -- "${SCORE[@]}" --algorithm grpo --no-norm-by-std --std-eps 0.1
refused "std-eps under rloo" --std-eps -- "${SCORE[@]}" --algorithm rloo --std-eps 0.1
refused "samples-per-prompt under reinforce++" --samples-per-prompt -- "${SCORE[@]}" --algorithm reinforce++ \
  --samples-per-prompt 2
refused "overlong-penalty without shaping" --overlong-penalty -- "${SCORE[@]}" --algorithm grpo --overlong-penalty 2
refused "reward-cmd-timeout without a command" --reward-cmd-timeout -- "${SCORE[@]}" --algorithm grpo \
  --reward-cmd-timeout 5
refused "kl-estimator without a KL penalty" --kl-estimator -- "${SCORE[@]}" --algorithm grpo --kl-estimator k3
refused "kl-estimator with kl-coef 0" --kl-estimator -- "${SCORE[@]}" --algorithm reinforce++ --ref a0.h5 \
  --kl-coef 0 --kl-estimator k1
# braid-generate: sampling's shape at temperature 0 (greedy), --migrate-to without a migration.
GEN=("$B/braid-generate" -q --actor a0.h5 --prompts prompts.jsonl -o scored --max-new-tokens 4 --threads 1)
refused "top-p, greedy" --top-p -- "${GEN[@]}" --temperature 0 --top-p 0.9
# A negative thread count is no count (0 is every core): refused by each stage tool.
refused "generate, negative threads" --threads -- "${GEN[@]}" --threads -1
refused "score, negative threads" --threads -- "${SCORE[@]}" --threads -2
refused "train, negative threads" --threads -- "${TRAIN[@]}" --threads -1
refused "top-k, greedy" --top-k -- "${GEN[@]}" --temperature 0 --top-k 5
refused "migrate-to without a threshold" --migrate-to -- "${GEN[@]}" --migrate-to 1
# Where they act they are taken: γ by reinforce++'s returns-to-go, the penalty by dapo's shaping.
"${SCORE[@]}" --algorithm reinforce++ --gamma 0.9 > /dev/null || fail "gamma under reinforce++ refused"
rm -rf scored
"${SCORE[@]}" --algorithm dapo --overlong-penalty 2 --std-eps 0.1 --samples-per-prompt 2 --prefix s > /dev/null \
  || fail "dapo's options refused"
[ -e scored/s-00000.h5 ] || fail "--prefix s: no scored/s-00000.h5"

# --critic-optimizer-state acts: ppo's critic continues its own AdamW state (auto), or
# starts from zero (fresh), as its state's step says.
"$B/braid" init -q -c config.json --seed 2 --value-head --no-lm-head -o c0.h5 > /dev/null
"$B/braid-score" -q gen/gen-00000.h5 -o scored-ppo --algorithm ppo --critic c0.h5 --reward-rule digits --threads 1 \
  > /dev/null
PPO=("$B/braid-train" ppo scored-ppo/scored-00000.h5 --mini-batch 2 --threads 1 -q)
"${PPO[@]}" --actor a0.h5 --critic c0.h5 --actor-out a1.h5 --critic-out c1.h5 > /dev/null
"${PPO[@]}" --actor a1.h5 --critic c1.h5 --actor-out a2.h5 --critic-out c2.h5 > /dev/null
"${PPO[@]}" --actor a1.h5 --critic c1.h5 --actor-out a3.h5 --critic-out c3.h5 --critic-optimizer-state fresh > /dev/null
step() { "$B/braid" inspect --json "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }
[ "$(step c2.optim.h5)" = 4 ] || fail "critic state auto: step $(step c2.optim.h5), not 4"
[ "$(step c3.optim.h5)" = 2 ] || fail "--critic-optimizer-state fresh: step $(step c3.optim.h5), not 2"
[ "$(step a3.optim.h5)" = 4 ] || fail "the actor's state (auto) followed the critic's option: step $(step a3.optim.h5)"
# --value-clip acts: a tiny ε clips the critic's second step, 0 (unclipped) never does.
"${PPO[@]}" --actor a0.h5 --critic c0.h5 --actor-out a4.h5 --critic-out c4.h5 --value-clip 1e-6 --stats v1.json > /dev/null
"${PPO[@]}" --actor a0.h5 --critic c0.h5 --actor-out a5.h5 --critic-out c5.h5 --value-clip 0 --stats v0.json > /dev/null
python3 - <<'PY' || fail "--value-clip did not change the critic's clipping"
import json
clipped = lambda p: json.load(open(p))["calls"]["critic_train"]["value_clip_fraction"]
assert clipped("v1.json") > 0 and clipped("v0.json") == 0, (clipped("v1.json"), clipped("v0.json"))
PY
echo "audit_option_refusals: ok"
