#!/usr/bin/env bash
# The run file's "checkpoints" (docs/formats-run.md): save_every 2 and keep_last 2 over 5
# GRPO iterations keep the weights and AdamW state of iterations 4 and 5 only (and the
# start models); the others leave a pruned.json and a rerun does nothing. A run killed
# (SIGKILL) in iteration 3 and resumed ends with the same weights, bit for bit, as the
# uninterrupted one; iteration 5 deleted is trained again from 4; redoing one whose start
# was removed is refused (exit 2 naming checkpoints), as is a Makefile of such a run.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
PY=/usr/bin/python3  # with h5py
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
"$PY" - <<'PY'
import json
r = json.load(open("run.json"))
r["algorithm"] = "grpo"
del r["models"]["critic"]
r["iterations"] = 5
r["generate"] = {"samples_per_prompt": 2, "max_new_tokens": 4, "shard_size": 4}
r["train"] = {"lr": 0.001}
r["checkpoints"] = {"save_every": 2, "keep_last": 2}
json.dump(r, open("keep.json", "w"))
PY

same_tensors() { "$PY" "$BRAID_SOURCE/tests/driver/same_tensors.py" "$1" "$2"; }
kept_files() {
  for i in 1 2 3 4 5; do
    d="$1/iter-000$i"
    [[ -e $d/actor.h5 ]] && echo "$i actor" || true
    [[ -e $d/actor.optim.h5 ]] && echo "$i optim" || true
    [[ -e $d/pruned.json ]] && echo "$i pruned" || true
  done
}

"$B" run keep.json -o whole -q > /dev/null 2> log || { cat log >&2; fail "braid run"; }
expected=$'1 pruned\n2 pruned\n3 pruned\n4 actor\n4 optim\n5 actor\n5 optim'
[[ "$(kept_files whole)" == "$expected" ]] || fail "kept files: $(kept_files whole)"
[[ -e whole/iter-0000/actor.h5 ]] || fail "the start actor was removed"
[[ $(wc -l < whole/metrics.jsonl) == 5 ]] || fail "metrics of every iteration"
"$B" run keep.json -o whole -n > dry.txt
[[ ! -s dry.txt ]] || fail "a finished run with removed checkpoints has steps to do: $(cat dry.txt)"

# Killed in iteration 3, resumed: the same weights as straight through.
"$B" run keep.json -o killed -q > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [[ -e killed/iter-0003/samples ]] && break
  sleep 0.1
done
kill -9 "$pid" 2> /dev/null || fail "the run ended before iteration 3"
wait "$pid" 2> /dev/null || true
sleep 1
"$B" run keep.json -o killed -q > /dev/null 2> log || { cat log >&2; fail "resumed run"; }
same_tensors whole/iter-0005/actor.h5 killed/iter-0005/actor.h5 || fail "the resumed run's weights differ"
same_tensors whole/iter-0005/actor.optim.h5 killed/iter-0005/actor.optim.h5 || fail "the resumed run's optimizer state differs"
[[ "$(kept_files killed)" == "$expected" ]] || fail "kept files after the resumption: $(kept_files killed)"

# Iteration 5 again from 4 (kept); then iteration 4 cannot be redone from 3 (removed).
rm killed/iter-0005/actor.h5 killed/iter-0005/actor.optim.h5
"$B" run keep.json -o killed -q > /dev/null 2> log || { cat log >&2; fail "iteration 5 again"; }
same_tensors whole/iter-0005/actor.h5 killed/iter-0005/actor.h5 || fail "iteration 5 redone differs"
rm killed/iter-0004/actor.h5
set +e
"$B" run keep.json -o killed > /dev/null 2> err; rc=$?
"$B" makefile keep.json -d whole -o keep.mk 2> err2; rc2=$?
set -e
[[ $rc == 2 ]] && grep -q "checkpoints" err && grep -q "iteration 3" err || fail "redo from a removed start: exit $rc $(cat err)"
[[ $rc2 == 2 ]] && grep -q "checkpoints" err2 || fail "a Makefile of a run with retention: exit $rc2 $(cat err2)"

# A checkpoint made with other options (iteration 5's in iteration 4's place) that --force
# would train again, whose step cannot run (iteration 3's were removed): refused, and the
# file left there (it was removed first, then the run refused).
cp whole/iter-0005/actor.h5 whole/iter-0004/actor.h5
set +e
"$B" run keep.json -o whole --force > /dev/null 2> err3; rc3=$?
set -e
[[ $rc3 == 2 ]] && grep -q "iteration 3" err3 || fail "a checkpoint whose step cannot run again: exit $rc3 $(cat err3)"
[[ -e whole/iter-0004/actor.h5 ]] || fail "the checkpoint was removed, then the run refused"
echo OK
