#!/usr/bin/env bash
# braid-train keeps an output only when it was made from the same inputs and options: each
# checkpoint records what made it (io/fingerprint.hpp), and a rerun compares. Before, an
# output that existed was "already complete: skipped" (exit 0) whatever the data, learning
# rate or tokenizer. And the AdamW state of another stage (SFT's, under DPO or PPO) is
# loaded only when asked (--optimizer-state PATH): a new stage starts fresh (warmup runs).
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
"$B/braid" synth -o task --task sort --prompts 8 --sft 16 --pairs 16 --heldout 4 --seed 1 > /dev/null 2>&1
"$B/braid" init --config config.json --seed 1 -o a0.h5 > /dev/null 2>&1
T=(--threads 1 -q)
json_of() { "$B/braid" inspect --json "$1"; }
optim_step() { json_of "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }

"$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 "${T[@]}" > /dev/null
cp a1.h5 first.h5
# The same inputs and options (the number spelled otherwise, another thread count): skipped.
"$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 0.001 --mini-batch 4 --threads 2 > out 2> err
grep -q "already complete (step 1), made from the same inputs and options: skipped" err || { cat err; fail "no skip"; }
[ "$(cat out)" = a1.h5 ] || fail "the skipped output is not listed"
cmp -s a1.h5 first.h5 || fail "the skip changed a1.h5"

# Another learning rate, data file, tokenizer or start: refused, naming what differs; nothing written.
expect_bad lr "a1.h5: made_from" "option --lr: 0.001 there, 0.002 now" "--force" -- \
  "$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 2e-3 --mini-batch 4 "${T[@]}"
head -n 8 task/sft.jsonl > half.jsonl
expect_bad data "input data: task/sft.jsonl there, half.jsonl now, with other contents" -- \
  "$B/braid-train" sft half.jsonl --actor a0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 "${T[@]}"
"$B/braid" init --config config.json --seed 2 -o b0.h5 > /dev/null 2>&1
expect_bad start "input model: a0.h5 there, b0.h5 now, with other contents" -- \
  "$B/braid-train" sft task/sft.jsonl --actor b0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 "${T[@]}"
mkdir tok && printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' > tok/tokenizer.json
expect_bad tokenizer "input tokenizer: byte there, tok now" -- \
  "$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 --tokenizer tok "${T[@]}"
expect_bad epochs "option --epochs: 1 there, 2 now" -- \
  "$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 --epochs 2 "${T[@]}"
cmp -s a1.h5 first.h5 || fail "a refusal changed a1.h5"
# Data read from stdin cannot be compared: refused too.
expect_bad stdin "read from standard input" -- \
  "$B/braid-train" sft - --actor a0.h5 --actor-out a1.h5 --lr 1e-3 --mini-batch 4 "${T[@]}" < task/sft.jsonl
# --force trains it again with the new settings; the record says so.
"$B/braid-train" sft task/sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr 2e-3 --mini-batch 4 --force "${T[@]}" > /dev/null
json_of a1.h5 > a1.json; grep -q '"--lr": "0.002"' a1.json || fail "the forced output does not record --lr 0.002"
"$B/braid" inspect a1.h5 > a1.txt   # read whole: grep -q in a pipe would leave inspect a SIGPIPE
grep -q "made from: braid-train sft, output actor (fingerprint xxh3-64:" a1.txt ||
  fail "braid inspect does not show what made a1.h5"
# An output that is the input itself is trained in place, as before.
cp a0.h5 inplace.h5
"$B/braid-train" sft task/sft.jsonl --actor inplace.h5 --actor-out inplace.h5 --lr 1e-3 --mini-batch 4 "${T[@]}" > /dev/null
[ "$(json_of inplace.h5 | grep -o '"step": [0-9]*' | head -1)" = '"step": 1' ] || fail "in place: not trained"

# A new stage starts fresh: DPO after SFT does not load SFT's AdamW state (its 4 steps).
"$B/braid-train" dpo task/pairs.jsonl --actor a1.h5 --actor-out d1.h5 --mini-batch 4 --threads 1 > /dev/null 2> dpo.err
grep -q "a1.h5 was made by braid-train sft, not braid-train dpo: a new stage, so AdamW starts from zero" dpo.err ||
  { cat dpo.err; fail "DPO after SFT: no word of a fresh optimizer"; }
[ "$(optim_step d1.optim.h5)" = 4 ] || fail "DPO's optimizer state is at step $(optim_step d1.optim.h5), not 4 (its own steps)"
# Asked for, it is loaded: SFT's 4 steps and DPO's 4.
"$B/braid-train" dpo task/pairs.jsonl --actor a1.h5 --actor-out d2.h5 --mini-batch 4 --optimizer-state a1.optim.h5 "${T[@]}" > /dev/null
[ "$(optim_step d2.optim.h5)" = 8 ] || fail "--optimizer-state a1.optim.h5: step $(optim_step d2.optim.h5), not 8"
# The same stage goes on with its own state; --optimizer-state fresh starts it from zero.
"$B/braid-train" dpo task/pairs.jsonl --actor d1.h5 --actor-out d3.h5 --mini-batch 4 "${T[@]}" > /dev/null
[ "$(optim_step d3.optim.h5)" = 8 ] || fail "DPO after DPO: step $(optim_step d3.optim.h5), not 8"
"$B/braid-train" dpo task/pairs.jsonl --actor d1.h5 --actor-out d4.h5 --mini-batch 4 --optimizer-state fresh "${T[@]}" > /dev/null
[ "$(optim_step d4.optim.h5)" = 4 ] || fail "--optimizer-state fresh: step $(optim_step d4.optim.h5), not 4"
# The state's source is part of what made the output.
expect_bad source "input optimizer_state" -- \
  "$B/braid-train" dpo task/pairs.jsonl --actor d1.h5 --actor-out d4.h5 --mini-batch 4 "${T[@]}"
expect_bad nostate "--optimizer-state" "no optimizer state beside it" -- \
  "$B/braid-train" dpo task/pairs.jsonl --actor a1.h5 --actor-out d5.h5 --optimizer-state a0.h5 "${T[@]}"
echo "reuse: ok"
