#!/usr/bin/env bash
# braid-generate's paged KV cache: a pool too small for the batch preempts sequences and
# resumes them, and the shards hold the same samples as with an ample pool; a pool too
# small for one sequence is refused up front (exit 2) with the figures.
. "$BRAID_SOURCE/tests/common/cli.sh"
G="$BRAID_BIN/braid-generate"

# 2 layers, 2 kv heads of 16: a block of 16 tokens holds 2·2·16·32·4 = 8 KiB of keys and values.
llama_config 64 2 4 2 128 259 256 > "$S/config.json"
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 1 -o "$S/actor.h5" > /dev/null
for i in $(seq 1 16); do echo "{\"text\": \"prompt number $i is here\"}"; done > "$S/prompts.jsonl"
run() {  # OUT, extra options...
  local out="$1"; shift
  "$G" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/$out" --max-new-tokens 40 --max-batch 8 \
    --shard-size 8 --threads 1 --temperature 0.8 --seed 3 "$@" > /dev/null 2> "$S/$out.err"
}
# The samples of a folder's shards: ids, prompts and responses as text.
samples() {
  for f in "$S/$1"/gen-*.h5; do
    "$BRAID_BIN/braid" inspect --json -n 100 "$f" | sed -n '/"first_samples"/,$p'
  done
}

run ample
grep -q "KV cache: 40 blocks of 16 tokens .*room for 8 sequences of 65 tokens" "$S/ample.err" ||
  fail "the pool is not reported: $(cat "$S/ample.err")"
grep -q "0 preemptions" "$S/ample.err" || fail "an ample pool preempted: $(cat "$S/ample.err")"
# Prompts of up to 25 tokens + 40 new = 65 tokens = 5 blocks a sequence at its longest.
# 0.078125 MiB = 10 blocks: 2 sequences at their longest, 8 wanted.
run tiny --kv-cache-mb 0.078125
grep -q "KV cache: 10 blocks of 16 tokens .*room for 2 sequences" "$S/tiny.err" || fail "tiny pool: $(cat "$S/tiny.err")"
grep -Eq "[1-9][0-9]* preemptions?" "$S/tiny.err" || fail "a tiny pool did not preempt: $(cat "$S/tiny.err")"
grep -q "0 preemptions" "$S/tiny.err" && fail "a tiny pool did not preempt: $(cat "$S/tiny.err")"
samples ample > "$S/ample.txt"
samples tiny > "$S/tiny.txt"
[ "$(grep -c '"response"' "$S/ample.txt")" -eq 16 ] || fail "expected 16 samples"
cmp -s "$S/ample.txt" "$S/tiny.txt" || fail "preempted samples differ: $(diff "$S/ample.txt" "$S/tiny.txt" | head)"

# 4 blocks cannot hold one sequence of 65 tokens: exit 2 before any work, with the figures.
set +e
run refused --kv-cache-mb 0.03125
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a pool too small for one sequence exited $rc, not 2"
grep -q -- "--kv-cache-mb: KV cache: one sequence of up to 65 tokens needs 5 blocks of 16 tokens .*room for 4" \
  "$S/refused.err" || fail "refusal without the figures: $(cat "$S/refused.err")"
[ -z "$(ls "$S/refused" 2> /dev/null)" ] || fail "a refused run left shards"
set +e
"$G" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/neg" --kv-cache-mb -1 > /dev/null 2> "$S/neg.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--kv-cache-mb -1 exited $rc, not 2"
echo OK
