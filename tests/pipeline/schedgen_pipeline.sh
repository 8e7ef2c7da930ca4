#!/usr/bin/env bash
# The whole chain: a schedspec, braid-schedgen's annealed schedule file (checked by
# its own dry run), and the fused braid-train path executing it on 2 MPI ranks.
set -euo pipefail
S="${BRAID_SCRATCH:?}"
mkdir -p "$S"
cat > "$S/spec.json" <<'JSON'
{"format": "braid.schedspec", "version": 1, "devices": 2,
 "models": [
   {"name": "actor", "stages": 2, "micro_batches": 4, "fwd": [1.0, 1.2], "bwd": [2.0, 2.4], "act_mem": 1},
   {"name": "critic", "stages": 2, "micro_batches": 4, "fwd": [0.8, 1.0], "bwd": [1.6, 2.0], "act_mem": 1}]}
JSON
"$BRAID_BIN/braid-schedgen" "$S/spec.json" -o "$S/schedule.json" --iterations 20000 --time-limit 0 \
  --mem-iterations 2000 --seed 3 -q
"$BRAID_BIN/braid-schedgen" --verify "$S/schedule.json" -q
BRAID_PIPELINE_SCHEDULE="$S/schedule.json" \
  mpirun -np 2 "$BRAID_BIN/../tests/test_pipeline_command" --log_level=warning
echo "OK: braid-schedgen's schedule ran on the fused pipeline"
