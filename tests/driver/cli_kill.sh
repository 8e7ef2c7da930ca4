#!/usr/bin/env bash
# A braid run killed with SIGKILL (no handler sees it) leaves no stage tool running:
# each child asked the kernel for SIGTERM on the driver's death. The tools are found
# by the run's folder, which only their command lines hold. A rerun then completes.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
for i in $(seq 1 64); do echo "{\"text\": \"prompt number $i\"}"; done > prompts.jsonl
ppo_run '{"iterations": 1, "generate": {"samples_per_prompt": 16, "max_new_tokens": 48, "shard_size": 256}}' > run.json
OUT="$S/killed-run"
children() { pgrep -f -- "$OUT/iter-0001" || true; }

"$B" run run.json -o "$OUT" > /dev/null 2> log &
driver=$!
for _ in $(seq 1 300); do
  [ -n "$(children)" ] && break
  kill -0 "$driver" 2> /dev/null || { cat log >&2; fail "braid run ended before its stage tools were seen"; }
  sleep 0.05
done
[ -n "$(children)" ] || { kill -9 "$driver"; fail "no stage tool of $OUT seen running"; }
kill -9 "$driver" || fail "braid run ended before it could be killed"
wait "$driver" 2> /dev/null || true
for _ in $(seq 1 100); do
  [ -z "$(children)" ] && break
  sleep 0.05
done
left=$(children)
if [ -n "$left" ]; then
  ps -o pid,args -p "$(echo $left | tr ' ' ',')" >&2 || true
  kill $left 2> /dev/null || true
  fail "stage tools still running 5 s after the driver was killed"
fi
"$B" run run.json -o "$OUT" > /dev/null 2> log2 || { cat log2 >&2; fail "the rerun after the kill failed"; }
"$B" check "$OUT/iter-0001/actor.h5" || fail "the resumed actor fails braid check"
echo "ok"
