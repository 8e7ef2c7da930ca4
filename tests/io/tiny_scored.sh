# Shared by the io CLI tests: source it from the scratch folder with B (the tools' folder)
# and CONFIG (the tiny model's config.json) set. Writes actor.h5 and critic.h5 (seeds 1 and
# 2), four prompts, one generated shard gen/gen-00000.h5 and its scored shard
# scored/scored-00000.h5 (length:32 rule).
"$B/braid" -q init -c "$CONFIG" --seed 1 -o actor.h5 > /dev/null
"$B/braid" -q init -c "$CONFIG" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
for i in 1 2 3 4; do echo "{\"text\": \"prompt $i\"}"; done > prompts.jsonl
"$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o gen --max-new-tokens 6 --threads 1 > /dev/null
"$B/braid-score" -q gen/gen-00000.h5 -o scored --ref actor.h5 --critic critic.h5 --reward-rule length:32 \
  --threads 1 > /dev/null
