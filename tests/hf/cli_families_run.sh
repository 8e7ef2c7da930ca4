#!/usr/bin/env bash
# `braid run` with the tiny Qwen3 and Gemma 3 of examples/ (docs/models.md, 'The default
# experiment with another family'): for each, a PPO loop of 2 iterations (actor and critic
# initialised from the example's config, the digits rule, braid eval of held-out prompts at
# iterations 0 and 2) and a GRPO loop of 2 iterations. Each run ends with checkpoints of steps
# 1 and 2, a metrics line per iteration with a finite mean reward, KL and losses, and the
# held-out evaluations; the trained actors keep the family's config (head_dim, Gemma's window
# and soft-cap) and export as the family's class.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
step_of() { "$B" inspect --json "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }

printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' '{"text": "Pi is"}' '{"text": "Total:"}' > prompts.jsonl
printf '%s\n' '{"text": "Dial 12"}' '{"text": "Room"}' > heldout.jsonl

for family in qwen3 gemma3; do
  echo "== $family"
  mkdir -p "$family" && cd "$family"
  cp "$BRAID_SOURCE/examples/tiny-$family/config.json" config.json
  cp ../prompts.jsonl ../heldout.jsonl .
  ppo_run '{"threads": 2,
    "generate": {"samples_per_prompt": 2, "max_new_tokens": 8, "shard_size": 4},
    "train": {"lr": 0.002, "critic_lr": 0.002},
    "eval": {"prompts": "heldout.jsonl", "every": 2, "samples": 2, "by": "digits"}}' > ppo.json
  jq '.algorithm = "grpo" | del(.models.critic, .train.critic_lr)' ppo.json > grpo.json
  for algo in ppo grpo; do
    "$B" run "$algo.json" -o "$algo" > "$algo.stdout" 2> "$algo.log" || { tail -20 "$algo.log" >&2; fail "$family $algo: braid run failed"; }
    for i in 1 2; do
      [[ $(step_of "$algo/iter-000$i/actor.h5") == "$i" ]] || fail "$family $algo: iteration $i's actor is not at step $i"
    done
    [[ -f $algo/iter-0000/eval.json && -f $algo/iter-0002/eval.json ]] || fail "$family $algo: no held-out evaluation"
    python3 - "$algo/metrics.jsonl" <<'PY' || fail "$family $algo: metrics"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["iteration"] for l in lines] == [0, 1, 2], lines  # 0: the initial actor's evaluation
assert "eval" in lines[0] and "eval" in lines[2], lines
for l in lines[1:]:
    numbers = [l["mean_reward"], l["kl"]] + list(l["train"].values())
    assert all(math.isfinite(v) for v in numbers), l
    print(f"iteration {l['iteration']}: mean reward {l['mean_reward']:.3f}, held-out "
          f"{l['eval']['mean_reward'] if 'eval' in l else '-'}")
PY
  done
  [[ $(step_of ppo/iter-0002/critic.h5) == 2 ]] || fail "$family ppo: the critic is not at step 2"

  # The trained actor is still the family's model, and exports as its class.
  "$B" -q export ppo/iter-0002/actor.h5 -o hf > export.out 2> export.err || { cat export.err >&2; fail "$family: export"; }
  python3 - "$family" hf/config.json <<'PY' || fail "$family: the exported config"
import json, sys
family, c = sys.argv[1], json.load(open(sys.argv[2]))
want = {"qwen3": ("qwen3", "Qwen3ForCausalLM"), "gemma3": ("gemma3_text", "Gemma3ForCausalLM")}[family]
assert (c["model_type"], c["architectures"][0]) == want, c
assert c["head_dim"] == 64, c
if family == "gemma3":
    assert c["sliding_window"] == 16 and c["final_logit_softcapping"] == 30.0, c
PY
  cd ..
done
echo "qwen3 and gemma3: braid run ppo and grpo, 2 iterations each"
