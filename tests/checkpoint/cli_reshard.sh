#!/usr/bin/env bash
# braid reshard end to end: a 2-stage checkpoint taken from tp 1 to 2 to 4 and back to 1
# exports to the same safetensors bytes, and so does the tp 4 checkpoint exported by its
# name (its slices joined); the stage count changes with --pp, the optimizer state beside
# a checkpoint moving with it; inspect and check take a checkpoint's name; a degree the
# key/value heads do not divide, and exporting one rank's slice alone, exit 2 naming the cause.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"

llama_config 16 4 8 4 22 259 64 > "$S/config.json"

"$B" -q init -c "$S/config.json" --seed 3 --stages 2 -o "$S/w.h5" > /dev/null
"$B" -q reshard "$S/w.h5" --tp 2 -o "$S/t2.h5" > "$S/files2"
[ "$(wc -l < "$S/files2")" -eq 4 ] || fail "tp 2 of 2 stages did not print 4 files"
"$B" -q reshard "$S/t2.h5" --tp 4 -o "$S/t4.h5" > /dev/null
"$B" -q reshard "$S"/t4.tp*-of-4.stage*-of-2.h5 --tp 1 -o "$S/back.h5" > /dev/null
"$B" check "$S"/t4.tp*-of-4.*.h5 > /dev/null || fail "braid check refused resharded files"
"$B" inspect --json "$S/t4.tp3-of-4.stage1-of-2.h5" | grep -q '"tp_rank": *3' || fail "tp_rank not recorded"
"$B" inspect --json "$S/t4.tp3-of-4.stage1-of-2.h5" | grep -q '"tp_size": *4' || fail "tp_size not recorded"

"$B" -q export "$S"/w.stage*-of-2.h5 -o "$S/hf1" > /dev/null
"$B" -q export "$S"/back.stage*-of-2.h5 -o "$S/hfb" > /dev/null
cmp "$S/hf1/model.safetensors" "$S/hfb/model.safetensors" || fail "tp 1 -> 2 -> 4 -> 1 changed the weights"
"$B" -q export "$S/t4.h5" -o "$S/hf4" > /dev/null
cmp "$S/hf1/model.safetensors" "$S/hf4/model.safetensors" || fail "the tp 4 checkpoint exported by name differs"
"$B" check "$S/t4.h5" || fail "braid check of the tp 4 checkpoint by its name"
[ "$("$B" inspect --json "$S/t4.h5" | grep -c '"tp_size": *4')" -eq 8 ] || fail "inspect by name did not show the 8 files"

# The stage count, with the optimizer state beside the checkpoint: one SFT step writes it.
printf '{"prompt": "ab", "response": "cd"}\n{"prompt": "ef", "response": "gh"}\n' > "$S/sft.jsonl"
"$BRAID_BIN/braid-train" -q sft "$S/sft.jsonl" --actor "$S/w.h5" --actor-out "$S/s.h5" --threads 1 > /dev/null
"$B" -q reshard "$S/s.h5" --tp 2 --pp 4 -o "$S/s4.h5" > "$S/files_s"
[ "$(grep -c 'optim' "$S/files_s")" -eq 8 ] || fail "the optimizer state did not move with the checkpoint: $(cat "$S/files_s")"
"$B" -q reshard "$S/s.h5" --tp 2 --no-optimizer -o "$S/bare.h5" > "$S/files_bare"
[ "$(wc -l < "$S/files_bare")" -eq 2 ] && ! ls "$S"/bare.optim* > /dev/null 2>&1 \
  || fail "--no-optimizer: the optimizer state moved along: $(cat "$S/files_bare")"
"$B" -q reshard "$S/s4.h5" --tp 1 --pp 1 -o "$S/s1.h5" > /dev/null
# Every tensor the same (h5diff, dataset by dataset; only the created_by attribute differs).
h5diff -v "$S/s.optim.h5" "$S/s1.optim.h5" > "$S/diff" || true
datasets=$(grep -c '^dataset:' "$S/diff")
same=$(grep -A1 '^dataset:' "$S/diff" | grep -c '^0 differences found')
[ "$datasets" -gt 0 ] && [ "$same" -eq "$datasets" ] || fail "the optimizer state changed on its way ($same of $datasets tensors equal)"
"$B" -q reshard "$S/t2.h5" --pp 4 -o "$S/p4.h5" > "$S/files4"
[ "$(wc -l < "$S/files4")" -eq 8 ] || fail "--pp 4 at tp 2 did not print 8 files"
"$B" -q reshard "$S/p4.h5" --tp 1 --pp 1 -o "$S/one.h5" > /dev/null
"$B" -q export "$S/one.h5" -o "$S/hfo" > /dev/null
cmp "$S/hf1/model.safetensors" "$S/hfo/model.safetensors" || fail "2 stages -> 4 -> 1 changed the weights"

set +e
"$B" -q reshard "$S/w.h5" --tp 3 -o "$S/t3.h5" 2> "$S/err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--tp 3 exited $rc, not 2"
grep -q "key/value heads" "$S/err" || fail "--tp 3 message does not name the heads: $(cat "$S/err")"
ls "$S"/t3.* > /dev/null 2>&1 && fail "a refused reshard left files behind"
set +e
"$B" -q export "$S"/t2.tp0-of-2.stage*-of-2.h5 -o "$S/hfx" 2> "$S/err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "exporting one rank's slice exited $rc, not 2"
grep -q "tp_rank: no file of tp rank 1 of 2" "$S/err" || fail "export of one slice does not name the missing rank: $(cat "$S/err")"
echo "reshard ok"
