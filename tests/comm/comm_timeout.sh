#!/usr/bin/env bash
# A peer that stops answering ends the job within BRAID_COMM_TIMEOUT (plus start-up and
# teardown), with a nonzero exit and a message naming the waiting rank, the operation
# and the peer; a bad BRAID_COMM_TIMEOUT is refused.
set -uo pipefail
S="${BRAID_SCRATCH:?}"
mkdir -p "$S"
PROG="$BRAID_BIN/../tests/stalled_peer"
fail() { echo "FAIL: $*"; exit 1; }

check() {  # how op expected-message
  local start end rc
  start=$(date +%s)
  BRAID_COMM_TIMEOUT=2 timeout 60 mpirun -np 2 "$PROG" "$1" "$2" >"$S/out" 2>&1
  rc=$?
  end=$(date +%s)
  cat "$S/out"
  [ "$rc" -ne 0 ] || fail "$1/$2: the job exited 0"
  [ "$rc" -ne 124 ] || fail "$1/$2: the job hung past 60 s"
  [ $((end - start)) -le 30 ] || fail "$1/$2: the job took $((end - start)) s for a 2 s timeout"
  grep -q "$3" "$S/out" || fail "$1/$2: no message \"$3\""
  grep -qE "made no progress for|did not return in" "$S/out" || fail "$1/$2: no timeout message"
  echo "ok: $1/$2 ended in $((end - start)) s (exit $rc)"
}

check sleep recv "error: rank 0: recv with rank 1 (tag 7)"
check stop barrier "error: rank 0: barrier (collective)"
# The sleeping wait of a rank that is done (braid-score's gather, braid-generate's
# exchanges and migration, the fused rollout's scorers all wait so).
check stop asleep "error: rank 0: recv with rank 1 (tag 7)"
# A loop that polls its requests itself (the fused rollout's board).
check stop poll "error: rank 0: a polled recv from rank 1 made no progress"
# A peer stopped before MPI starts: the others wait inside MPI_Init.
check stop init "error: rank 0: MPI_Init did not return"

BRAID_COMM_TIMEOUT=soon timeout 60 mpirun -np 2 "$PROG" sleep recv >"$S/out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$S/out"; fail "a bad BRAID_COMM_TIMEOUT: exit $rc, expected 2"; }
grep -q 'BRAID_COMM_TIMEOUT is "soon"' "$S/out" || { cat "$S/out"; fail "a bad BRAID_COMM_TIMEOUT not named"; }
echo "OK: a stalled peer ends the job with the rank and operation named"
