#!/usr/bin/env bash
# The dataset of braid run (docs/tools/run.md, "The dataset"): GSM8K-shaped lines read
# through a field map, one held out for the evaluation, and a stream of batches of 3 of
# the 4 training lines over 4 iterations (epochs of a seeded shuffle). Checked: every
# epoch trains every line once and the held-out line never; a run stopped after
# iteration 2 and resumed trains the same prompts in the same iterations as one run
# straight through (and a deleted iteration is redone with its own); with overcommit
# (deferred samples carried over) every stream position is trained once, none skipped,
# each epoch's positions cover every line once; braid data from the command line; bad
# keys exit 2 naming the field.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
PY=/usr/bin/python3  # with h5py

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
for i in 1 2 3 4 5; do
  printf '{"question": "%d+%d=", "answer": "%d + %d = %d\\n#### %d", "n": %d}\n' $i $i $i $i $((2 * i)) $((2 * i)) $i
done > gsm.jsonl
cat > run.json <<'JSON'
{"format": "braid.run", "version": 1, "algorithm": "grpo", "seed": 5,
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}}, "reward": {"rule": "math"}},
 "prompts": "gsm.jsonl", "iterations": 4, "threads": 1,
 "data": {"batch_prompts": 3, "fields": {"prompt": "question"}, "heldout": 1},
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 3, "shard_size": 4},
 "train": {"lr": 0.001},
 "eval": {"every": 4, "samples": 2, "temperature": 1.0}}
JSON

# The prompts each iteration trained, by their n (from the samples' prompt origins).
trained() {
  "$PY" - "$1" <<'PY'
import glob, json, sys
import h5py
out = sys.argv[1]
iters = []
for i in range(1, 5):
    ns = []
    for path in sorted(glob.glob(f"{out}/iter-{i:04d}/scored/scored-*.h5")):
        with h5py.File(path) as f:
            ids = list(f["sample_id"])
            offs, extra = list(f["prompt/extra_offsets"]), bytes(f["prompt/extra"][()])
            for k in range(len(ids)):
                if ids[k] % 2 == 0:  # one sample of each group
                    ns.append(json.loads(extra[offs[k]:offs[k + 1]])["n"])
    iters.append(ns)
print(json.dumps(iters))
PY
}

"$B" run run.json -o whole -q > /dev/null 2> log || { cat log >&2; fail "braid run"; }
trained whole > whole.json
"$PY" - <<'PY' || fail "epochs: $(cat whole.json)"
import json
iters = json.load(open("whole.json"))
heldout = [json.loads(l)["n"] for l in open("whole/data/heldout.jsonl")]
train = sorted(json.loads(l)["n"] for l in open("whole/data/train.jsonl"))
assert len(heldout) == 1 and len(train) == 4 and heldout[0] not in train, (heldout, train)
assert all(len(b) == 3 for b in iters), iters
stream = [n for b in iters for n in b]           # 12 positions: 3 epochs of 4
for e in range(3):
    assert sorted(stream[4 * e:4 * e + 4]) == train, (e, stream)
assert stream[0:4] != stream[4:8] or stream[4:8] != stream[8:12], "every epoch in one order: not shuffled"
for i in range(4):
    m = json.load(open(f"whole/iter-{i + 1:04d}/metrics.json"))
    assert m["data"]["first_prompt"] == 3 * i and m["data"]["epoch"] == (3 * i) // 4, m["data"]
ev = json.load(open("whole/iter-0004/eval.json"))
assert ev["prompts"] == 1 and ev["prompts_file"].endswith("data/heldout.jsonl"), ev
PY

# Stopped after iteration 2, resumed: the same prompts in the same iterations.
"$B" run run.json -o resumed --iterations 2 -q > /dev/null 2> log || { cat log >&2; fail "first half"; }
"$B" run run.json -o resumed -q > /dev/null 2> log || { cat log >&2; fail "resumed"; }
trained resumed > resumed.json
cmp -s whole.json resumed.json || fail "resumed run trained other prompts: $(cat resumed.json) vs $(cat whole.json)"
same_tensors() { "$PY" "$BRAID_SOURCE/tests/driver/same_tensors.py" "$1" "$2"; }
same_tensors whole/iter-0004/actor.h5 resumed/iter-0004/actor.h5 || fail "resumed run's last actor differs"
rm -rf resumed/iter-0003
"$B" run run.json -o resumed -q > /dev/null 2> log || { cat log >&2; fail "redo of iteration 3"; }
trained resumed > redone.json
cmp -s whole.json redone.json || fail "a redone iteration took other prompts"

# Overcommit: deferred samples carry over; every position trained once, none skipped.
"$PY" - <<'PY'
import json
r = json.load(open("run.json"))
r["generate"]["overcommit"] = 2
r["generate"]["max_new_tokens"] = 6
r["generate"]["temperature"] = 3.0
del r["eval"]
json.dump(r, open("over.json", "w"))
PY
"$B" run over.json -o over -q > /dev/null 2> log || { cat log >&2; fail "overcommit run"; }
"$PY" - <<'PY' || fail "overcommit's stream"
import glob, json
import h5py
train = sorted(json.loads(l)["n"] for l in open("over/data/train.jsonl"))
pos_n = {}
trained = []
for i in range(1, 5):
    for path in sorted(glob.glob(f"over/iter-{i:04d}/scored/scored-*.h5")):
        with h5py.File(path) as f:
            ids = list(f["sample_id"])
            offs, extra = list(f["prompt/extra_offsets"]), bytes(f["prompt/extra"][()])
            for k, sid in enumerate(ids):
                trained.append(sid)
                pos_n[sid // 2] = json.loads(extra[offs[k]:offs[k + 1]])["n"]
assert len(trained) == len(set(trained)), "a sample trained twice"
with h5py.File("over/iter-0004/deferred.h5") as f:
    deferred = list(f["sample_id"])
stats = json.load(open("over/iter-0004/generate.stats.json"))
next_prompt = stats["overcommit"]["next_prompt"]
started = sorted(set(trained) | set(deferred))
assert started == list(range(2 * next_prompt)), ("started samples are not every position's", started, next_prompt)
# Each whole epoch of trained positions takes every line once.
for e in range(next_prompt // 4):
    ns = [pos_n.get(p) for p in range(4 * e, 4 * e + 4)]
    if None in ns:
        continue  # a position still deferred
    assert sorted(ns) == train, (e, ns)
assert next_prompt >= 12, next_prompt
PY

# braid data from the command line.
"$B" data gsm.jsonl -o prepared --field prompt=question --heldout 0.4 --seed 2 > summary.json
"$PY" - <<'PY' || fail "braid data"
import json
s = json.load(open("summary.json"))
assert s["train"]["lines"] == 3 and s["heldout"]["lines"] == 2, s
for f in ("prepared/train.jsonl", "prepared/heldout.jsonl"):
    for l in open(f):
        d = json.loads(l)
        assert "prompt" in d and "question" not in d and "#### " in d["answer"], d
PY
expect_bad data_missing_key "query: is missing" -- "$B" data gsm.jsonl -o p2 --field prompt=query
expect_bad data_unknown_name "--field" -- "$B" data gsm.jsonl -o p2 --field ask=question
echo OK
