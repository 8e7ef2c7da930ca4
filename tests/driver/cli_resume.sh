#!/usr/bin/env bash
# What a rerun of braid run keeps, it verifies: a finished 2-iteration run whose
# checkpoint is truncated, unfinished (no completeness sentinel) or has a flipped
# byte, or whose scored shard is deleted or damaged, has that iteration (and the
# one after it) redone, names what was damaged, and completes with exit 0. The
# damaged files keep their modification times, so the file times alone would
# call the run complete. An undamaged finished run is still skipped. And
# braid-train refuses a missing output folder before it trains.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
step_of() { "$B" inspect --json "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }
PY=/usr/bin/python3

. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
"$B" run run.json -o out > /dev/null 2> log || { cat log >&2; fail "braid run failed"; }

# The whole run is good again: every checkpoint and scored shard passes braid check at its step.
all_good() {
  local what=$1
  for i in 0 1 2; do
    for m in actor critic; do
      "$B" check "out/iter-000$i/$m.h5" || fail "$what: out/iter-000$i/$m.h5 fails braid check"
      [ "$(step_of "out/iter-000$i/$m.h5")" = "$i" ] || fail "$what: out/iter-000$i/$m.h5 is not at step $i"
    done
  done
  for i in 1 2; do
    [ "$(ls out/iter-000$i/scored/scored-*.h5 | wc -l)" = 2 ] || fail "$what: iteration $i has not 2 scored shards"
    "$B" check out/iter-000$i/scored/scored-*.h5 || fail "$what: a scored shard of iteration $i fails braid check"
  done
}
# rerun WHAT WANT_LOG...: rerun, exit 0, each pattern found in the log, then the run is whole
# and a further rerun does nothing.
rerun() {
  local what=$1; shift
  local rc=0
  "$B" run run.json -o out > /dev/null 2> log || rc=$?
  [ "$rc" = 0 ] || { cat log >&2; fail "$what: braid run exited $rc"; }
  for pattern in "$@"; do
    grep -qE "$pattern" log || { cat log >&2; fail "$what: the log lacks '$pattern'"; }
  done
  all_good "$what"
  "$B" run run.json -o out > /dev/null 2> log2
  grep -q "all 2 iterations were already complete" log2 || { cat log2 >&2; fail "$what: the next rerun did work"; }
}
# flip FILE DATASET: one byte of the dataset's data changed, the file's time kept.
flip() {
  touch -r "$1" stamp
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, h5py
path, name = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:
    d = f[name].id
    offset = d.get_offset()
    if offset is None:  # chunked: the first chunk's bytes
        offset = d.get_chunk_info(0).byte_offset
with open(path, "r+b") as f:
    f.seek(offset + 5)
    b = f.read(1)
    f.seek(offset + 5)
    f.write(bytes([b[0] ^ 0x10]))
PYEOF
  touch -r stamp "$1"
}

# An undamaged finished run is skipped, with no warning.
"$B" run run.json -o out > /dev/null 2> log
grep -q "all 2 iterations were already complete" log || fail "the finished run was not skipped"
if grep -q "warning" log; then fail "a good run gave a warning: $(cat log)"; fi

# A truncated checkpoint of iteration 1: iterations 1 and 2 are trained again.
touch -r out/iter-0001/actor.h5 stamp
truncate -s 4000 out/iter-0001/actor.h5
touch -r stamp out/iter-0001/actor.h5
rerun "truncated actor" "iteration 1 train: out/iter-0001/actor.h5: .*it is done again" "iteration 1 of 2" "iteration 2 of 2"

# An unfinished checkpoint (no completeness sentinel) of the last iteration.
touch -r out/iter-0002/critic.h5 stamp
"$PY" -c 'import sys, h5py; f = h5py.File(sys.argv[1], "r+"); del f.attrs["complete"]; f.close()' out/iter-0002/critic.h5
touch -r stamp out/iter-0002/critic.h5
rerun "unfinished critic" "iteration 2 train: out/iter-0002/critic.h5: .*it is done again" "iteration 2 of 2"
if grep -q "iteration 1 of 2" log; then fail "unfinished critic of iteration 2: iteration 1 was redone"; fi

# One byte flipped inside a tensor of the last actor.
flip out/iter-0002/actor.h5 model.layers.1.mlp.up_proj.weight
rerun "flipped byte in the actor" "iteration 2 train: out/iter-0002/actor.h5: .*checksum" "iteration 2 of 2"

# The optimizer state beside a checkpoint is verified too.
flip out/iter-0001/actor.optim.h5 "$("$PY" -c 'import sys, h5py
f = h5py.File(sys.argv[1], "r"); names = []
f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.size > 16 else None)
print(names[0])' out/iter-0001/actor.optim.h5)"
rerun "flipped byte in the optimizer state" "iteration 1 train: out/iter-0001/actor.optim.h5: " "iteration 1 of 2"

# A deleted scored shard: iteration 2 scores it again and trains again.
rm out/iter-0002/scored/scored-00001.h5
rerun "deleted scored shard" "iteration 2 generate \| score: out/iter-0002/scored/scored-00001.h5 is missing" "iteration 2 of 2"

# A damaged scored shard of iteration 1: removed, scored again, both iterations trained again.
flip out/iter-0001/scored/scored-00000.h5 logprobs/actor
rerun "flipped byte in a scored shard" "iteration 1 generate \| score: out/iter-0001/scored/scored-00000.h5: " \
  "iteration 1 of 2" "iteration 2 of 2"

# A damaged start model (iteration 0) is made again, and everything after it.
truncate -s 100 out/iter-0000/critic.h5
rerun "truncated start critic" "init critic: out/iter-0000/critic.h5: .*it is done again" "iteration 1 of 2" "iteration 2 of 2"

# A damaged metrics.json (a disk that filled mid-write, an edit) is made again, with a
# warning; it blocked every rerun (exit 1, "internal error: parse_error").
touch -r out/iter-0001/metrics.json stamp
truncate -s 20 out/iter-0001/metrics.json
touch -r stamp out/iter-0001/metrics.json
rerun "truncated metrics.json" "out/iter-0001/metrics.json is damaged"
"$PY" -c 'import json, sys; m = json.load(open(sys.argv[1])); assert "sequences" in m' out/iter-0001/metrics.json ||
  fail "the remade metrics.json is not whole"
[ "$(wc -l < out/metrics.jsonl)" -ge 2 ] || fail "metrics.jsonl lacks the remade iteration"

# braid-train checks its output folders before it trains: a missing one is named, exit 2.
rc=0
"$BRAID_BIN/braid-train" ppo out/iter-0001/scored/scored-*.h5 --actor out/iter-0000/actor.h5 \
  --critic out/iter-0000/critic.h5 --actor-out out/iter-0001/actor-x.h5 --critic-out nosuch/critic.h5 \
  --threads 1 > /dev/null 2> trainlog || rc=$?
[ "$rc" = 2 ] && grep -q "nosuch/critic.h5: its folder nosuch does not exist" trainlog ||
  { cat trainlog >&2; fail "braid-train with a missing output folder: exit $rc"; }
if grep -q "sequences, .* tokens from" trainlog; then fail "braid-train read its shards before checking its outputs"; fi
[ ! -e out/iter-0001/actor-x.h5 ] || fail "braid-train wrote an actor although the critic's folder is missing"
echo "ok"
