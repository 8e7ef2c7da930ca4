#!/usr/bin/env bash
# A disk that fills while a stage writes: braid init, braid-generate and braid-train
# exit 2 naming the file and the reason, leave nothing under the output name and
# remove their temp files; no signal deaths. The full disk is simulated by a file
# size cap (ulimit -f); the tools ignore SIGXFSZ themselves (it killed braid init and
# braid-train, leaving temp files), so a write past it fails with EFBIG ("File too
# large") the way a full disk fails with ENOSPC. Temp files left by a
# killed writer (SIGKILL: no handler runs) are removed by the next run writing the
# same output.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"

# capped KIB NAME OUTPUT -- COMMAND...: runs COMMAND with files capped at KIB KiB and
# expects exit 2, OUTPUT and "File too large" on stderr, no OUTPUT and no temp file.
capped() {
  local kib=$1 name=$2 output=$3; shift 4
  set +e
  ( ulimit -f "$kib"; exec "$@" ) > "$name.out" 2> "$name.err"
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { cat "$name.err" >&2; fail "$name: exit $rc, expected 2 (over 128: a signal)"; }
  grep -qF -- "$output" "$name.err" || { cat "$name.err" >&2; fail "$name: stderr does not name $output"; }
  grep -qF "File too large" "$name.err" || { cat "$name.err" >&2; fail "$name: stderr does not give the reason"; }
  if grep -q "HDF5-DIAG" "$name.err"; then cat "$name.err" >&2; fail "$name: HDF5 printed its error stack"; fi
  [[ ! -e $output ]] || fail "$name: $output exists after a failed write"
  local temps
  temps=$(find . -name '.*.tmp-*')
  [[ -z $temps ]] || fail "$name: temp files left: $temps"
}

. "$BRAID_SOURCE/tests/io/tiny_scored.sh"

# --- A weight shard (3 MB) that cannot be finished.
capped 64 init full-init.h5 -- "$B/braid" -q init -c "$CONFIG" --seed 1 -o full-init.h5
# --- A sample shard (15 KB) that cannot be finished.
capped 4 generate full-gen/gen-00000.h5 -- \
  "$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o full-gen --max-new-tokens 6 --threads 1
# --- A checkpoint and its optimizer state.
capped 64 train full-actor -- \
  "$B/braid-train" -q ppo scored/scored-00000.h5 --actor actor.h5 --actor-out full-actor.h5 --critic critic.h5 \
  --critic-out full-critic.h5 --threads 1
for f in full-actor.h5 full-actor.optim.h5 full-critic.h5 full-critic.optim.h5; do
  [[ ! -e $f ]] || fail "train: $f exists after a failed write"
done

# --- Temp files of a writer killed by SIGKILL: the next run writing the same output
# removes those whose PID has ended, and keeps a running process's, another output's
# and anything not of braid's form.
bash -c 'exit 0' & dead=$!; wait $dead
printf partial > ".init.h5.tmp-$dead-0"
printf partial > ".init.h5.tmp-$$-1"
printf partial > ".init.h5.tmp-$dead-0.keep"
printf partial > ".other.h5.tmp-$dead-0"
"$B/braid" -q init -c "$CONFIG" --seed 1 -o init.h5 > /dev/null
[[ -e init.h5 ]] || fail "braid init wrote no init.h5"
[[ ! -e .init.h5.tmp-$dead-0 ]] || fail "the dead writer's temp file was not removed"
[[ -e .init.h5.tmp-$$-1 ]] || fail "a running process's temp file was removed"
[[ -e .init.h5.tmp-$dead-0.keep && -e .other.h5.tmp-$dead-0 ]] || fail "a file not of the output's temp form was removed"

# A real SIGKILL in the middle of writing a weight shard, then a rerun.
mkdir killed
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  "$B/braid" -q init -c "$CONFIG" --seed 1 -o killed/w.h5 > /dev/null 2>&1 & pid=$!
  for _ in $(seq 200); do compgen -G "killed/.w.h5.tmp-$pid-*" > /dev/null && break; sleep 0.005; done
  kill -9 $pid 2> /dev/null || true
  wait $pid 2> /dev/null || true
  compgen -G "killed/.w.h5.tmp-*" > /dev/null && break
  rm -f killed/w.h5
done
if compgen -G "killed/.w.h5.tmp-*" > /dev/null; then
  "$B/braid" -q init -c "$CONFIG" --seed 1 -o killed/w.h5 > /dev/null
  ! compgen -G "killed/.w.h5.tmp-*" > /dev/null || fail "the rerun left the killed run's temp file: $(ls -a killed)"
  "$B/braid" check killed/w.h5 > /dev/null || fail "the rerun's shard does not check"
else
  echo "note: no SIGKILL landed mid-write in 10 attempts; the fixture case above still ran"
fi
echo "disk full: all writers exit 2 cleanly; stale temps removed"
