#!/usr/bin/env bash
# braid run on a bad day: a run folder whose name holds a newline (shard paths went one per
# line between the stages), a run folder it cannot write, a lock path that is a folder
# (both exit 1 before: "cannot open"), and a --reward-cmd scorer that never answers, which
# was stopped but left what it started running with the pipes.
chattr -i "${BRAID_SCRATCH:?}/ro" 2> /dev/null || true  # an immutable folder a failed run of this test left
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
sed -i 's/"iterations": 2/"iterations": 1/' run.json

# A newline in the run folder's name.
nl=$'out\nline'
"$B" run run.json -o "$nl" > run.out 2> run.err || { cat run.err >&2; fail "braid run into a folder named out\\nline failed"; }
"$B" check "$nl/iter-0001/actor.h5" "$nl/iter-0001/critic.h5" > /dev/null
shards=("$nl"/iter-0001/scored/scored-*.h5)
[[ ${#shards[@]} == 2 && -f ${shards[1]} ]] || fail "out\\nline: not 2 scored shards"
grep -qF '"out\nline/iter-0001/actor.h5"' run.out || fail "braid run did not print the actor's path as a JSON string"

# A run folder braid cannot write: exit 2 naming it (root writes through permissions, so an
# immutable folder stands in for a read-only one where chattr works; else a non-root chmod).
mkdir ro
if chattr +i ro 2> /dev/null; then
  trap 'chattr -i ro 2> /dev/null || true' EXIT
  expect_bad read-only "ro/.braid-run.lock" -- "$B" run run.json -o ro
  chattr -i ro
elif [[ $(id -u) != 0 ]]; then
  chmod 555 ro
  expect_bad read-only "ro/.braid-run.lock" -- "$B" run run.json -o ro
  chmod 755 ro
else
  echo "note: no read-only folder here (root, no chattr): case skipped"
fi

# The lock path is a folder.
mkdir -p locked/.braid-run.lock
expect_bad lock-folder "locked/.braid-run.lock" "is a folder" -- "$B" run run.json -o locked

# A scorer that never answers: braid run ends with exit 2 after its timeout, and nothing the
# scorer started is left running (a caller reading braid run's output waited for it).
jq --arg cmd "sleep 60 & echo \$! > $S/scorer-child.pid; wait" '.models.reward = {"command": $cmd, "timeout": 1}' \
  run.json > run-cmd.json
grep -q '"command"' run-cmd.json || fail "could not write run-cmd.json"
start=$(date +%s)
set +e
out=$(timeout 50 "$B" run run-cmd.json -o cmd-out 2>&1)
rc=$?
set -e
(( $(date +%s) - start < 40 )) || fail "braid run with a silent scorer took $(( $(date +%s) - start )) s"
[[ $rc == 2 ]] || { echo "$out" >&2; fail "braid run with a silent scorer: exit $rc, expected 2"; }
grep -q "gave no answer for 1 s" <<< "$out" || { echo "$out" >&2; fail "the scorer's timeout is not named"; }
child=$(cat scorer-child.pid)
for _ in $(seq 100); do
  state=$(awk '{print $3}' "/proc/$child/stat" 2> /dev/null || true)
  [[ -z $state || $state == Z ]] && break
  sleep 0.05
done
[[ -z $state || $state == Z ]] || fail "the scorer's child $child is still running"
echo "braid run: newline folder works; unwritable folder, folder lock and silent scorer refused"
