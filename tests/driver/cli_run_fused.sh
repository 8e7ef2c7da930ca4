#!/usr/bin/env bash
# braid run with a rollout on 2 ranks, migration and fusion (generate.ranks, .migrate_threshold,
# .migrate_to; fusion on by default; mpirun.options): --dry-run shows the mpirun line; the
# run is interrupted while the freed ranks score (an external scorer holds on a file after
# its first shard), a rerun resumes, keeps every shard scored before the interruption
# (same file, untouched) and completes both iterations.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
needs_mpirun

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
questions 1 12 > prompts.jsonl
# The reward: the response's length. While the file "hold" exists, the scorer stops
# answering after its first 4 samples (one shard) until the rank that started it is gone.
cat > scorer.py <<'PY'
import json, os, sys, time
parent, answered = os.getppid(), 0
for line in sys.stdin:
    while answered >= 4 and os.path.exists("hold") and os.getppid() == parent:
        time.sleep(0.05)
    print(len(json.loads(line)["response"]) / 100.0, flush=True)
    answered += 1
PY
ppo_run '{"generate": {"samples_per_prompt": 2, "max_new_tokens": 24, "shard_size": 4, "max_batch": 8,
                       "ranks": 2, "migrate_threshold": 0.3, "migrate_to": 1},
          "mpirun": {"options": ["--oversubscribe"]},
          "train": {"lr": 0.001, "critic_lr": 0.001, "mini_batch": 8}}' |
  jq '.models.reward = {"command": "python3 scorer.py"}' > run.json

"$B/braid" run run.json -o out --dry-run > dry.txt
grep -q "mpirun --oversubscribe -np 2 .*braid-generate --actor out/iter-0000/actor.h5 .*--migrate-threshold 0.3 --migrate-to 1 --threads 1 -- -o out/iter-0001/scored " dry.txt \
  || fail "--dry-run does not show the fused mpirun line: $(cat dry.txt)"
grep -q " | " dry.txt && fail "a fused rollout should not be a pipe: $(cat dry.txt)"

touch hold
"$B/braid" run run.json -o out > run1.out 2> run1.err &
driver=$!
for _ in $(seq 1 1200); do
  [[ -n $(ls out/iter-0001/scored/scored-*.h5 2> /dev/null) ]] && break
  kill -0 "$driver" 2> /dev/null || { cat run1.err; fail "braid run ended before a shard was scored"; }
  sleep 0.05
done
sleep 0.5  # the other rank's first shard, if it comes
kept=$(ls out/iter-0001/scored/scored-*.h5 2> /dev/null || true)
[[ -n $kept ]] || { kill "$driver"; fail "no shard was scored within 60 s"; }
[[ ! -e out/iter-0001/score.stats.json ]] || fail "the rollout finished although the scorer held"
kill -TERM "$driver"
wait "$driver" 2> /dev/null && fail "the interrupted run exited 0"
for _ in $(seq 1 100); do
  pgrep -f -- "$S/out/iter-0001" > /dev/null || pgrep -f -- "out/iter-0001" > /dev/null || break
  sleep 0.05
done
declare -A stamp
for f in $kept; do stamp[$f]=$(stat -c %y "$f"); done
sleep 1.1  # a rewritten file would get a later time stamp
rm hold
"$B/braid" run run.json -o out > run2.out 2> run2.err || { cat run2.err; fail "the rerun failed"; }
for f in $kept; do
  [[ -f $f ]] || fail "$f, scored before the interruption, is gone"
  [[ $(stat -c %y "$f") == "${stamp[$f]}" ]] || fail "$f was scored again"
done
grep -q "already scored in" run2.err || fail "the rerun did not skip the scored shards: $(cat run2.err)"
for i in 1 2; do
  d=out/iter-000$i
  [[ $(ls $d/samples/gen-*.h5 | wc -l) == 6 && $(ls $d/scored/scored-*.h5 | wc -l) == 6 ]] || fail "$d: shards missing"
  "$B/braid" check $d/actor.h5 $d/critic.h5 $d/scored/*.h5 > /dev/null || fail "$d: a file fails braid check"
done
/usr/bin/python3 - <<'PY' || fail "stats"
import json
s = json.load(open("out/iter-0001/score.stats.json"))
assert s["shards_scored"] + s["shards_skipped"] == 6 and s["shards_skipped"] >= 1, s
g = json.load(open("out/iter-0002/generate.stats.json"))
assert len(g["ranks"]) == 2 and all("fusion" in r for r in g["ranks"]), g["ranks"]
assert sum(r["fusion"]["shards_scored"] for r in g["ranks"]) == 6, g["ranks"]
m = [json.loads(l) for l in open("out/metrics.jsonl")]
assert [x["iteration"] for x in m] == [1, 2] and all(x["sequences"] == 24 for x in m), m
# generate's seconds hold the scoring: the report must not add the two
assert all(x.get("rollout") == "fused" for x in m), m
r = json.load(open("out/report.json"))
assert all(row.get("rollout") == "fused" for row in r["iterations"] if row["iteration"] > 0), r["iterations"]
PY
echo "cli_run_fused: ok"
