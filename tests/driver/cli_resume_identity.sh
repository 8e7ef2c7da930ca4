#!/usr/bin/env bash
# braid run resumes from what a file is, not only from its being whole: a checkpoint in
# an iteration's place that is another iteration's (or another model's, or at another
# step) is trained again, and a folder trained with other options than the run file now
# gives is refused (exit 2, naming the option) unless --force. Before, each of these was
# resumed from with exit 0 and a result other than a clean run's (or, for the options,
# "all iterations were already complete"). Each case: a finished 2-iteration run whose
# iteration 2 is removed (an interrupted run), iteration 1's files then tampered with,
# their times kept; the resumed run must end as the clean run did.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
PY=/usr/bin/python3
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
"$B" run run.json -o out > /dev/null 2> log || { cat log >&2; fail "braid run failed"; }
cp out/iter-0002/actor.h5 clean-actor2.h5
cp out/iter-0002/critic.h5 clean-critic2.h5

# same_tensors A B: every tensor equal
same_tensors() {
  "$PY" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert sorted(a) == sorted(b), "other tensors"
bad = [n for n in a if not np.array_equal(a[n][()], b[n][()])]
sys.exit(1 if bad else 0)
PY
}
# interrupted: iteration 2 gone, as if the run had stopped after iteration 1
interrupted() { rm -rf out/iter-0002 out/metrics.jsonl; }
# resume WHAT PATTERN: braid run exits 0 naming PATTERN, and ends as the clean run did
resume() {
  local rc=0
  "$B" run run.json -o out > /dev/null 2> log || rc=$?
  [ "$rc" = 0 ] || { cat log >&2; fail "$1: braid run exited $rc"; }
  grep -qE "$2" log || { cat log >&2; fail "$1: the log does not say '$2'"; }
  same_tensors out/iter-0002/actor.h5 clean-actor2.h5 || fail "$1: the final actor differs from the clean run's"
  same_tensors out/iter-0002/critic.h5 clean-critic2.h5 || fail "$1: the final critic differs from the clean run's"
}
# put SOURCE DEST: DEST replaced by SOURCE's bytes, DEST's time kept
put() { touch -r "$2" stamp; cp "$1" "$2"; touch -r stamp "$2"; }

# Iteration 2's actor in iteration 1's place.
cp out/iter-0002/actor.h5 next-actor.h5
interrupted
put next-actor.h5 out/iter-0001/actor.h5
resume "next iteration's actor" "iteration 1 train: out/iter-0001/actor.h5 is at step 2, but iteration 1 trains .*it is done again"

# The actor in the critic's place.
interrupted
put out/iter-0001/actor.h5 out/iter-0001/critic.h5
resume "actor as critic" "iteration 1 train: out/iter-0001/critic.h5 was written as braid-train's actor, not its critic; it is done again"

# A step counter of 2^62 (the seal removed, as the docs say to edit a file on purpose).
interrupted
touch -r out/iter-0001/actor.h5 stamp
"$PY" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f.attrs["step"] = 2**62; f.close()' out/iter-0001/actor.h5
dd if=/dev/zero of=out/iter-0001/actor.h5 bs=512 count=1 conv=notrunc status=none
touch -r stamp out/iter-0001/actor.h5
resume "huge step" "iteration 1 train: out/iter-0001/actor.h5.*it is done again"

# The learning rate changed in the run file: refused, naming it; --force trains again.
sed 's/"lr": 0.001/"lr": 0.002/' run.json > run2.json
expect_bad options "out/iter-0001/actor.h5: made_from: iteration 1 was trained with other options" \
  "--lr: 0.001 there, 0.002 now" "braid run --force" -- "$B" run run2.json -o out
"$B" run run2.json -o out --force > /dev/null 2> log || { cat log >&2; fail "--force failed"; }
grep -q "iteration 1 train: trained with other options (--lr: 0.001 there, 0.002 now); it is done again (--force)" log ||
  { cat log >&2; fail "--force: no word of redoing iteration 1"; }
"$B" inspect --json out/iter-0002/actor.h5 > actor2.json   # whole: grep -q in a pipe would leave inspect a SIGPIPE
grep -q '"--lr": "0.002"' actor2.json || fail "--force: iteration 2 not trained at lr 0.002"
"$B" run run2.json -o out > /dev/null 2> log
grep -q "all 2 iterations were already complete" log || { cat log >&2; fail "the forced run is not complete"; }
echo "resume identity: ok"
