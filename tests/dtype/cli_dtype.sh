#!/usr/bin/env bash
# --dtype bf16 end to end on the tiny example: braid-generate and braid-score run with bf16
# weights and agree with each other (same weights, same storage) and with f32 to bf16
# rounding; braid-train sft with bf16 storage writes an f32 checkpoint that the tools
# open; a value other than f32|bf16 exits 2 naming --dtype.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"

"$B/braid" -q init -c "$CONFIG" --seed 1 -o actor.h5 > /dev/null
"$B/braid" -q init -c "$CONFIG" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
for i in 1 2 3 4 5 6; do echo "{\"text\": \"prompt $i\"}"; done > prompts.jsonl

"$B/braid-generate" --help > help.txt
grep -q -- "--dtype" help.txt || fail "braid-generate --help does not list --dtype"
for t in f32 bf16; do
  "$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o "gen-$t" --temperature 0 --max-new-tokens 12 \
    --threads 1 --dtype "$t" > "gen-$t.out" || fail "braid-generate --dtype $t"
  [[ $(cat "gen-$t.out") == "gen-$t/gen-00000.h5" ]] || fail "braid-generate --dtype $t: stdout"
done
# Score the bf16 rollouts with the actor as reference, in bf16 and in f32.
for t in f32 bf16; do
  "$B/braid-score" -q gen-bf16/gen-00000.h5 -o "score-$t" --ref actor.h5 --critic critic.h5 \
    --reward-rule length:32 --threads 1 --dtype "$t" > /dev/null || fail "braid-score --dtype $t"
done
"$B/braid" inspect --json gen-bf16/gen-00000.h5 > gen.json
"$B/braid" inspect --json score-bf16/scored-00000.h5 > s16.json
"$B/braid" inspect --json score-f32/scored-00000.h5 > s32.json
python3 - <<'PY' || fail "logprobs"
import json
gen = json.load(open("gen.json"))["token_arrays"]
s16 = json.load(open("s16.json"))["token_arrays"]
s32 = json.load(open("s32.json"))["token_arrays"]
ref = [k for k in s16 if "ref" in k]
assert ref, s16.keys()
a, b, c = gen["logprobs/actor"]["mean"], s16[ref[0]]["mean"], s32[ref[0]]["mean"]
print("mean logprob: generate bf16", a, "score bf16", b, "score f32", c)
# Same bf16 weights: the decode path and the scoring pass agree to f32 rounding.
assert abs(a - b) < 1e-4 * abs(a), (a, b)
# f32 weights: to bf16 rounding of the weights, and not bit for bit (the storage differs).
assert abs(b - c) < 2e-2 * abs(c) and b != c, (b, c)
PY

# braid-train sft with bf16 storage: a checkpoint (written from the f32 master) the tools open.
printf '%s\n' '{"prompt": "Say a:", "response": "aaa"}' '{"prompt": "Say b:", "response": "bbb"}' > sft.jsonl
"$B/braid-train" -q sft sft.jsonl --actor actor.h5 --actor-out sft-actor.h5 --lr 1e-3 --epochs 2 --threads 1 \
  --dtype bf16 > train.out || fail "braid-train sft --dtype bf16"
"$B/braid" check sft-actor.h5 > /dev/null || fail "the bf16-trained checkpoint does not check"
"$B/braid" inspect --json sft-actor.h5 > sft-actor.json
grep -q '"step": 1' sft-actor.json || fail "the checkpoint is not step 1"
"$B/braid-generate" -q --actor sft-actor.h5 --prompts prompts.jsonl -o gen-sft --max-new-tokens 4 --threads 1 \
  --dtype bf16 > /dev/null || fail "generating from the bf16-trained checkpoint"

# Bad values exit 2 and name the option.
set +e
"$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o bad --dtype f16 > bad.out 2> bad.err
rc=$?
set -e
[[ $rc == 2 ]] || fail "--dtype f16: exit $rc, expected 2"
grep -q -- "--dtype" bad.err || { cat bad.err >&2; fail "--dtype f16: stderr does not name --dtype"; }
[[ ! -e bad ]] || fail "--dtype f16 created the output folder"
echo "dtype cli ok"
