#!/usr/bin/env bash
# braid-train's LR schedule from the command line (docs/tools/train.md): warmup, then a
# cosine or linear decay over the optimizer's global steps. The learning rates --stats
# records at each step are those of the formula; a second call that loads the first's
# optimizer state continues the same curve (--lr-calls 2, then 1); --total-steps fixes
# the end; bad values exit 2.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"

cat > config.json <<'JSON'
{"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "vocab_size": 259,
 "max_position_embeddings": 64}
JSON
"$B/braid" init -q -c config.json --seed 1 -o a0.h5 > /dev/null
for i in 1 2 3 4 5 6 7 8; do printf '{"prompt": "q%d", "response": " a%d"}\n' "$i" "$i"; done > sft.jsonl
COMMON=(--mini-batch 2 --threads 1 --lr 1e-3 --warmup-steps 2 --min-lr 1e-4 -q)

# 4 steps a call; the decay spans two calls: global steps 0..7, ending at step 8.
"$B/braid-train" sft sft.jsonl --actor a0.h5 --actor-out a1.h5 --lr-schedule cosine --lr-calls 2 \
  --stats s1.json "${COMMON[@]}" > /dev/null
"$B/braid-train" sft sft.jsonl --actor a1.h5 --actor-out a2.h5 --lr-schedule cosine --lr-calls 1 \
  --stats s2.json "${COMMON[@]}" > /dev/null
# linear, the end fixed at global step 6 (past it: --min-lr).
"$B/braid-train" sft sft.jsonl --actor a0.h5 --actor-out l1.h5 --lr-schedule linear --total-steps 3 \
  --epochs 2 --stats s3.json "${COMMON[@]}" > /dev/null

python3 - <<'PY' || fail "learning rates differ from the schedule"
import json, math
def lrs(path):
    return [s["lr"] for s in json.load(open(path))["calls"]["actor_train"]["per_step"]]
def expect(step, kind, total, peak=1e-3, low=1e-4, warmup=2):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / (total - warmup))
    if kind == "linear":
        return low + (peak - low) * (1 - p)
    return low + 0.5 * (peak - low) * (1 + math.cos(math.pi * p))
got = lrs("s1.json") + lrs("s2.json")
want = [expect(s, "cosine", 8) for s in range(8)]
assert len(got) == 8, got
for g, w in zip(got, want):
    assert abs(g - w) <= 1e-12 + 1e-9 * w, (got, want)
assert got[0] < got[1] and got[2] > got[4] > got[7] > 1e-4, got   # warmup, then down, not to the floor yet
got = lrs("s3.json")
want = [expect(s, "linear", 3) for s in range(8)]
assert len(got) == 8, got
for g, w in zip(got, want):
    assert abs(g - w) <= 1e-12 + 1e-9 * w, (got, want)
assert got[-1] == 1e-4, got
PY

expect_exit2() {
  local what=$1; shift
  set +e
  "$B/braid-train" sft sft.jsonl --actor a0.h5 --actor-out bad.h5 "$@" 2> err.txt > /dev/null
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat err.txt)"
  [ ! -e bad.h5 ] || fail "$what: wrote a checkpoint"
}
expect_exit2 "unknown schedule" --lr-schedule step
grep -q "lr-schedule" err.txt || fail "unknown schedule not named: $(cat err.txt)"
expect_exit2 "min-lr above lr" --lr 1e-4 --lr-schedule cosine --min-lr 1e-3
grep -q -- "--min-lr" err.txt || fail "min-lr not named: $(cat err.txt)"
expect_exit2 "zero lr-calls" --lr-schedule cosine --lr-calls 0
echo OK
