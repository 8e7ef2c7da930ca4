# Shared by the braid run CLI tests: source it from the scratch folder. Writes the tiny
# model's config, four prompts and run.json (2 PPO iterations on the digits rule).
cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' '{"text": "Pi is"}' '{"text": "Total:"}' > prompts.jsonl
cat > run.json <<'JSON'
{"format": "braid.run", "version": 1, "algorithm": "ppo",
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
            "critic": {"init": {"config": "config.json", "seed": 2}},
            "reward": {"rule": "digits"}},
 "prompts": "prompts.jsonl", "iterations": 2, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 6, "shard_size": 4},
 "train": {"lr": 0.001, "critic_lr": 0.001}}
JSON
