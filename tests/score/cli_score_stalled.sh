#!/usr/bin/env bash
# braid-score under mpirun with a rank that stops (SIGSTOP) ends in bounded time under
# BRAID_COMM_TIMEOUT, naming the waiting rank: rank 1 stopped by its own --reward-cmd
# scorer while rank 0, done with its shard, waits for it in the gather of the figures
# (a sleeping wait, which had no deadline: the job hung); and rank 1 stopped before it
# starts MPI, while rank 0 waits inside MPI_Init (it hung there).
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"
needs_mpirun

"$B/braid" -q init -c "$CONFIG" --seed 1 -o actor.h5 > /dev/null
for i in 1 2 3 4; do echo "{\"text\": \"prompt $i\"}"; done > prompts.jsonl
"$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o gen --max-new-tokens 4 --shard-size 2 \
  --threads 1 > /dev/null
[[ -f gen/gen-00001.h5 ]] || fail "expected two generated shards"

# stalled NAME TEXT -- COMMAND...: COMMAND (an mpirun of 2 ranks) ends nonzero within 60 s
# (BRAID_COMM_TIMEOUT=3) with TEXT in its output.
stalled() {
  local name=$1 text=$2; shift 3
  local start rc=0
  start=$(date +%s)
  BRAID_COMM_TIMEOUT=3 timeout 60 "$@" > "$name.log" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "$name: the job exited 0"
  [[ $rc != 124 ]] || { cat "$name.log" >&2; fail "$name: the job hung past 60 s"; }
  grep -qF -- "$text" "$name.log" || { cat "$name.log" >&2; fail "$name: no message '$text'"; }
  echo "ok: $name ended in $(( $(date +%s) - start )) s (exit $rc)"
}

# Rank 1's scorer stops its braid-score (its parent) at its first line.
scorer='if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -STOP $PPID; fi; while read l; do echo 1; done'
stalled gather "error: rank 0: recv with rank 1" -- \
  mpirun -np 2 "$B/braid-score" gen/gen-00000.h5 gen/gen-00001.h5 -o scored --algorithm reinforce++ --reward-cmd "$scorer" --threads 1

# Rank 1 stops before braid-score starts (and so before MPI_Init).
stalled init "error: rank 0: MPI_Init did not return" -- \
  mpirun -np 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -STOP $$; fi; exec "$@"' braid-score \
  "$B/braid-score" gen/gen-00000.h5 gen/gen-00001.h5 -o scored-init --algorithm reinforce++ --reward-rule length:8 --threads 1
echo "braid-score: a stopped rank ends the job in bounded time"
