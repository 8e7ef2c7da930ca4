#!/usr/bin/env bash
# braid-generate as a pipe stage: shard paths stream out on stdout while generation
# goes on; bad inputs exit 2 naming the file and field, and leave no shard behind.
. "$BRAID_SOURCE/tests/common/cli.sh"
G="$BRAID_BIN/braid-generate"

llama_config 128 4 4 2 344 259 256 > "$S/config.json"
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 1 -o "$S/actor.h5" > /dev/null
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 1 --value-head --no-lm-head -o "$S/critic.h5" > /dev/null
for i in $(seq 1 24); do echo "{\"text\": \"prompt $i\"}"; done > "$S/prompts.jsonl"

"$G" --help > "$S/help.txt"  # to a file: grep -q would leave the rest of the text unread (SIGPIPE)
grep -q -- "--migrate-threshold" "$S/help.txt" || fail "--help does not list --migrate-threshold"

# Streaming: one sequence at a time and a shard per 2 samples, so 12 shards complete
# one after another, the first after a twelfth of the run (about a second in all).
# When the consumer reads the first path, that file is complete and the last shard
# does not exist yet: the path came out while work went on.
"$G" -q --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/out" --max-batch 1 --shard-size 2 \
  --max-new-tokens 100 --threads 1 --stats "$S/stats.json" |
  {
    read -r first
    [ ! -e "$S/out/gen-00011.h5" ] || { echo "the last shard already existed at the first line"; exit 1; }
    [ "$first" = "$S/out/gen-00000.h5" ] || { echo "first line: '$first'"; exit 1; }
    "$BRAID_BIN/braid" check "$first" > /dev/null || { echo "first shard not complete when printed"; exit 1; }
    n=1
    while read -r line; do
      [ -f "$line" ] || { echo "printed '$line' is not a file"; exit 1; }
      n=$((n + 1))
      sleep 0.05  # a slow consumer holds nothing up: lines wait in the pipe
    done
    [ "$n" -eq 12 ] || { echo "$n lines, expected 12"; exit 1; }
  } || fail "streaming"
grep -q '"stage": "generate"' "$S/stats.json" || fail "no stats"
[ -z "$(find "$S/out" -name '.*')" ] || fail "temporary files left in the output folder"

# A complete folder: nothing generated, each skip logged, and every shard still printed
# (a braid-score - downstream that was interrupted must see the shards it missed).
"$G" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/out" --max-batch 1 --shard-size 2 \
  --max-new-tokens 100 --threads 1 > "$S/again.out" 2> "$S/again.err"
[ "$(sort -u "$S/again.out" | wc -l)" -eq 12 ] || fail "a rerun over complete shards printed $(wc -l < "$S/again.out") paths, not 12"
while read -r line; do [ -f "$line" ] || fail "rerun printed '$line', not a shard"; done < "$S/again.out"
[ "$(grep -c 'is complete: skipped' "$S/again.err")" -eq 12 ] || fail "a rerun did not log 12 skips"
# Other settings into the same folder: refused, naming the shard and the setting.
set +e
"$G" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/out" --max-batch 1 --shard-size 2 \
  --max-new-tokens 100 --seed 9 > /dev/null 2> "$S/seed.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "another seed into a used folder exited $rc, not 2"
grep -q "gen-00000.h5: meta.config: .*seed 0 there, 9 here" "$S/seed.err" || fail "seed clash not named: $(cat "$S/seed.err")"

# Prompts on stdin under mpirun: only rank 0 has stdin, and shares the prompts.
if command -v mpirun > /dev/null; then
  mpirun -np 2 "$G" -q --actor "$S/actor.h5" --prompts - -o "$S/mpi" --shard-size 2 --max-new-tokens 4 \
    --threads 1 < "$S/prompts.jsonl" > "$S/mpi.out"
  [ "$(sort -u "$S/mpi.out" | wc -l)" -eq 12 ] || fail "mpirun with --prompts - printed $(wc -l < "$S/mpi.out") paths, not 12"
else
  echo "SKIP: no mpirun, --prompts - under MPI not run"
fi

# Bad inputs: exit 2, the file and the field named, no shard written.
expect_bad() {  # name, expected stderr pattern, args...
  local name=$1 pattern=$2
  shift 2
  set +e
  "$G" -o "$S/bad-$name" "$@" > "$S/bad-$name.out" 2> "$S/bad-$name.err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, expected 2 ($(cat "$S/bad-$name.err"))"
  grep -q -- "$pattern" "$S/bad-$name.err" || fail "$name: stderr lacks '$pattern': $(cat "$S/bad-$name.err")"
  [ ! -s "$S/bad-$name.out" ] || fail "$name: printed something on stdout"
  [ -z "$(find "$S/bad-$name" -name '*.h5' 2> /dev/null)" ] || fail "$name: left a shard behind"
}
printf '{"text": "fine"}\n{"text": "oops",\n' > "$S/badjson.jsonl"
printf '{"text": "fine"}\n\n{"tokens": [256, 12, 259]}\n' > "$S/badtoken.jsonl"
printf '{"text": ""}\n' > "$S/empty.jsonl"
expect_bad json "badjson.jsonl:2: not valid JSON" --actor "$S/actor.h5" --prompts "$S/badjson.jsonl"
expect_bad token "badtoken.jsonl:3: tokens\[2\]: 259 is outside the model's vocabulary" \
  --actor "$S/actor.h5" --prompts "$S/badtoken.jsonl"
expect_bad empty "empty.jsonl:1: text: is empty" --actor "$S/actor.h5" --prompts "$S/empty.jsonl"
expect_bad nockpt "missing.h5: no such weight file" --actor "$S/missing.h5" --prompts "$S/prompts.jsonl"
expect_bad nohead "critic.h5: lm_head.weight: the model has no LM head" --actor "$S/critic.h5" --prompts "$S/prompts.jsonl"
expect_bad noprompts "nothere.jsonl: no such file" --actor "$S/actor.h5" --prompts "$S/nothere.jsonl"
expect_bad threshold "migrate-threshold must be" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" --migrate-threshold 1.5
# A rerun whose actor has other weights under the same name and step is refused: the
# shards record the actor's content (made_from), not only its path and step.
cp "$S/actor.h5" "$S/swapped.h5"
"$G" -q --actor "$S/swapped.h5" --prompts "$S/prompts.jsonl" -o "$S/swap" --max-new-tokens 2 --threads 1 > /dev/null
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 9 -o "$S/swapped.h5" > /dev/null
set +e
"$G" --actor "$S/swapped.h5" --prompts "$S/prompts.jsonl" -o "$S/swap" --max-new-tokens 2 --threads 1 \
  > "$S/swap.out" 2> "$S/swap.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "gen-00000.h5: made_from: was generated from another actor" "$S/swap.err" ||
  fail "a swapped actor: exit $rc ($(cat "$S/swap.err"))"

# Lengths and sizes the actor cannot hold are refused, not taken (the config has 256 positions).
expect_bad positions "max-new-tokens 256 cannot fit: the actor" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" \
  --max-new-tokens 256
expect_bad huge_length "max-new-tokens: is 2147483648, must be >= 1 and <= 2147483647" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" \
  --max-new-tokens 2147483648
expect_bad tiny_cache "but the pool has room for 0" --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" \
  --kv-cache-mb 1e-9
echo "cli_generate: ok"
