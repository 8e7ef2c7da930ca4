#!/usr/bin/env bash
# Every model family (docs/models.md) through the tools, as a user runs them, on a tiny
# random model of each (byte tokenizer, the family's quirks on: biases, q/k norms, head_dim
# apart from hidden / heads, Gemma's norms and soft-caps, sliding windows shorter than the
# sequences, each rope type):
#
#   init, export, import   braid init of a policy, a critic and a reward model; braid export
#         (the policy as <Family>ForCausalLM, the reward model as
#         <Family>ForSequenceClassification) and braid import of the folders into 2 stages:
#         the imported checkpoints give the originals' logits and values bit for bit
#   train braid-generate -> braid-score (reference, critic, reward model) -> braid-train ppo,
#         then grpo, sft, rm and dpo, each a step or two: every call exits 0 with finite losses,
#         and the trained policy exports
#
# MODEL_OUTPUTS: the helper that writes a checkpoint's logits and values (tests/hf/CMakeLists.txt).
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
OUT="${MODEL_OUTPUTS:?the model_outputs helper (tests/hf/CMakeLists.txt sets it)}"
run() {
  local name=$1; shift
  local rc=0
  "$@" > "$name.out" 2> "$name.err" < /dev/null || rc=$?
  (( rc == 0 )) || { tail -20 "$name.err" >&2; fail "$name: exit $rc ($*)"; }
}

# The configs: 260 ids (the byte tokenizer's 259 and one more), 2 layers, 32 wide.
python3 - <<'PY'
import json
shape = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 48, "vocab_size": 260, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
         "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}
families = {
    "llama": {"model_type": "llama", "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False,
              "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 64}},
    "mistral": {"model_type": "mistral", "sliding_window": 6, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": True, "use_sliding_window": True, "sliding_window": 6,
              "max_window_layers": 1,
              "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}},
    "qwen3": {"model_type": "qwen3", "head_dim": 12, "tie_word_embeddings": True},
    "gemma2": {"model_type": "gemma2", "head_dim": 12, "query_pre_attn_scalar": 12, "attn_logit_softcapping": 20.0,
               "final_logit_softcapping": 10.0, "sliding_window": 6},
    "gemma3": {"model_type": "gemma3_text", "head_dim": 12, "query_pre_attn_scalar": 12,
               "final_logit_softcapping": 10.0, "sliding_window": 6, "sliding_window_pattern": 2,
               "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
}
for name, extra in families.items():
    json.dump(dict(shape, **extra), open(f"{name}.json", "w"), indent=1)
PY
for i in 1 2 3 4; do echo "{\"prompt\": \"Question $i:\", \"response\": \" answer $((i * 7))\"}"; done > sft.jsonl
for i in 1 2 3 4; do
  echo "{\"prompt\": \"Pick $i:\", \"chosen\": \" $((i * 3)) apples\", \"rejected\": \" no idea\"}"
done > pairs.jsonl
for i in 1 2 3 4; do echo "{\"text\": \"Count to $i:\"}"; done > prompts.jsonl
tokens="80,101,116,32,49,58,32,51,32,97,112,112,108,101,115;67,111,117,110,116,32,116,111"
common=(--lr 1e-3 --seed 1 --threads 2)

for f in llama mistral qwen2 qwen3 gemma2 gemma3; do
  echo "== $f"
  mkdir -p "$f" && cd "$f"
  run init-actor "$B/braid" -q init -c "../$f.json" --seed 1 -o actor.h5
  run init-critic "$B/braid" -q init -c "../$f.json" --seed 2 --value-head --no-lm-head -o critic.h5
  run init-reward "$B/braid" -q init -c "../$f.json" --seed 3 --value-head --no-lm-head -o reward.h5

  # Export and import: the same outputs, bit for bit.
  run export-actor "$B/braid" -q export actor.h5 -o hf-actor
  run export-reward "$B/braid" -q export reward.h5 -o hf-reward
  python3 - "$f" <<'PY' || fail "$f: the exported classes"
import json, sys
family = sys.argv[1]
prefix = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma2": "Gemma2",
          "gemma3": "Gemma3"}[family]
actor, reward = (json.load(open(f"hf-{w}/config.json")) for w in ("actor", "reward"))
assert actor["architectures"] == [prefix + "ForCausalLM"], actor["architectures"]
want = "Gemma3TextForSequenceClassification" if family == "gemma3" else prefix + "ForSequenceClassification"
assert reward["architectures"] == [want], reward["architectures"]
assert reward["id2label"] == {"0": "LABEL_0"}, reward
PY
  run import-actor "$B/braid" -q import hf-actor --stages 2 -o back-actor.h5
  run import-reward "$B/braid" -q import hf-reward -o back-reward.h5
  "$OUT" actor.h5 "$tokens" actor.st && "$OUT" back-actor.h5 "$tokens" back-actor.st
  cmp -s actor.st back-actor.st || fail "$f: the imported policy's logits differ from the original's"
  "$OUT" reward.h5 "$tokens" reward.st && "$OUT" back-reward.h5 "$tokens" back-reward.st
  cmp -s reward.st back-reward.st || fail "$f: the imported reward model's values differ from the original's"

  # One PPO iteration, then the other objectives.
  run gen "$B/braid-generate" --actor actor.h5 --prompts ../prompts.jsonl -o gen --temperature 0.8 --seed 1 \
    --max-new-tokens 10 --kv-cache-mb 16 --threads 2
  run score "$B/braid-score" gen/gen-00000.h5 -o scored --ref actor.h5 --critic critic.h5 --reward back-reward.h5 \
    --threads 2
  run ppo "$B/braid-train" ppo scored/scored-00000.h5 --actor back-actor.h5 --critic critic.h5 \
    --actor-out ppo-actor.h5 --critic-out ppo-critic.h5 --critic-lr 1e-3 --mini-batch 2 --stats ppo.json "${common[@]}"
  run grpo "$B/braid-train" grpo scored/scored-00000.h5 --actor actor.h5 --actor-out grpo.h5 --mini-batch 2 \
    --stats grpo.json "${common[@]}"
  run sft "$B/braid-train" sft ../sft.jsonl --actor actor.h5 --actor-out sft.h5 --mini-batch 2 --stats sft.json \
    "${common[@]}"
  run rm "$B/braid-train" rm ../pairs.jsonl --reward reward.h5 --reward-out rm.h5 --mini-batch 2 --stats rm.json \
    "${common[@]}"
  run dpo "$B/braid-train" dpo ../pairs.jsonl --actor actor.h5 --actor-out dpo.h5 --mini-batch 2 --stats dpo.json \
    "${common[@]}"
  python3 - ppo.json grpo.json sft.json rm.json dpo.json <<'PY' || fail "$f: a loss is not finite"
import json, math, sys
for path in sys.argv[1:]:
    calls = json.load(open(path))["calls"]
    steps = [s for c in calls.values() for s in c["per_step"]]
    assert steps, f"{path}: no steps"
    assert all(math.isfinite(s["loss"]) and math.isfinite(s["grad_norm"]) for s in steps), path
    print(path, " ".join(f"{s['loss']:.4g}" for s in steps))
PY
  run export-ppo "$B/braid" -q export ppo-actor.h5 -o hf-ppo
  cd ..
done

# Bad folders: each a good export with one thing changed; exit 2 naming the file and the
# field, and no checkpoint written.
mkdir -p bad && cd bad
edit() {  # edit NAME FROM PYTHON: a copy of folder FROM whose config PYTHON changes (as c)
  rm -rf "$1" && cp -r "$2" "$1"
  python3 -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); exec(sys.argv[2]); \
json.dump(c, open(p, 'w'))" "$1" "$3"
}
bad_import() {  # bad_import NAME TEXT...: braid import of folder NAME refused naming TEXT...
  local name=$1; shift
  expect_bad "$name" "$@" -- "$B/braid" -q import "$name" -o "$name.h5"
  ! ls "$name"*.h5 > /dev/null 2>&1 || fail "$name: a checkpoint was written"
}
edit unknown-key ../qwen3/hf-actor 'c["foo_bar"] = 1'
bad_import unknown-key unknown-key/config.json foo_bar
edit phi3 ../qwen3/hf-actor 'c["model_type"] = "phi3"'
bad_import phi3 phi3/config.json model_type phi3
edit longrope ../qwen2/hf-actor 'c["rope_scaling"] = {"rope_type": "longrope", "factor": 2.0}'
bad_import longrope longrope/config.json rope_scaling.rope_type longrope
edit yarn-no-factor ../qwen2/hf-actor 'c["rope_scaling"] = {"rope_type": "yarn"}'
bad_import yarn-no-factor yarn-no-factor/config.json rope_scaling.factor
edit window ../mistral/hf-actor 'c["sliding_window"] = 0'
bad_import window window/config.json sliding_window
edit qwen3-as-llama ../qwen3/hf-actor 'c["model_type"] = "llama"; c["architectures"] = ["LlamaForCausalLM"]'
bad_import qwen3-as-llama qwen3-as-llama/model.safetensors _norm.weight "does not explain"
edit no-bias ../llama/hf-actor 'c["attention_bias"] = False'
bad_import no-bias no-bias/model.safetensors _proj.bias "does not explain"
edit two-labels ../gemma2/hf-reward 'c["id2label"] = {"0": "bad", "1": "good"}'
bad_import two-labels two-labels/config.json id2label
python3 -c "import json; c = json.load(open('../gemma2.json')); c['hidden_act'] = 'silu'; \
json.dump(c, open('gemma2-silu.json', 'w'))"
expect_bad init-gemma-silu gemma2-silu.json hidden_act -- "$B/braid" -q init -c gemma2-silu.json -o silu.h5
[[ ! -e silu.h5 ]] || fail "init-gemma-silu: a checkpoint was written"
cd ..
echo "every family: import, export, generate, score, ppo, grpo, sft, rm and dpo; bad folders refused"
