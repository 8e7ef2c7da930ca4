# Shared by the braid run CLI tests: source it after tests/common/cli.sh. Writes the tiny
# model's config, four prompts and run.json (cli.sh's ppo_run: 2 PPO iterations on the
# digits rule).
cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' '{"text": "Pi is"}' '{"text": "Total:"}' > prompts.jsonl
ppo_run > run.json
