#!/usr/bin/env bash
# The whole chain: a schedspec, braid-schedgen's annealed schedule file (checked by
# its own dry run), and the fused braid-train path executing it on 2 MPI ranks.
. "$BRAID_SOURCE/tests/common/cli.sh"
tiny_schedule 4 --iterations 20000 --time-limit 0 --mem-iterations 2000 --seed 3 -q
"$BRAID_BIN/braid-schedgen" --verify "$S/schedule.json" -q
BRAID_PIPELINE_SCHEDULE="$S/schedule.json" \
  mpirun -np 2 "$BRAID_BIN/../tests/test_pipeline_command" --log_level=warning

# The same schedule with one defect each, as a hand edit makes them: braid-schedgen
# --verify refuses them, and so does braid-train on every rank before any message moves
# (they crashed with SIGSEGV or hung the job): exit 2, the file and the device named.
# The inputs do not exist: the schedule is checked first.
for defect in send-before-f deleted-send send-to-itself cut-in-half; do
  python3 - "$S/schedule.json" "$S/bad-$defect.json" "$defect" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ins = doc["devices"][0]["instructions"]
send = next(i for i, x in enumerate(ins) if x["op"] == "SEND_F")
key = lambda x: (x["model"], x["replica"], x["stage"], x["micro_batch"])
defect = sys.argv[3]
if defect == "send-before-f":
    f = next(i for i, x in enumerate(ins) if x["op"] == "F" and key(x) == key(ins[send]))
    ins.insert(f, ins.pop(send))
elif defect == "deleted-send":
    del ins[send]
elif defect == "send-to-itself":
    ins[send]["peer"] = 0
else:
    other = doc["devices"][1]["instructions"]
    del other[len(other) // 2:]
json.dump(doc, open(sys.argv[2], "w"))
PY
  set +e
  "$BRAID_BIN/braid-schedgen" --verify "$S/bad-$defect.json" -q 2> "$S/verify.err"
  rc=$?
  timeout 120 mpirun -np 2 "$BRAID_BIN/braid-train" ppo "$S/none.h5" --actor "$S/a.h5" --actor-out "$S/a1.h5" \
    --critic "$S/c.h5" --critic-out "$S/c1.h5" --schedule "$S/bad-$defect.json" > "$S/train.out" 2> "$S/train.err"
  trc=$?
  set -e
  [ "$rc" = 2 ] || { echo "FAIL: $defect: braid-schedgen --verify exit $rc, expected 2"; exit 1; }
  [ "$trc" = 2 ] || { cat "$S/train.err"; echo "FAIL: $defect: braid-train exit $trc, expected 2"; exit 1; }
  # Every rank checks the streams before any message moves; mpirun ends the job at the first
  # rank's exit 2, so on a loaded machine the slower rank may be stopped before it prints.
  # A stream cut in half computes fewer subtasks than its device runs: the file's reader
  # refuses it, naming the device's instructions, before any dry run.
  want="devices: the instruction streams do not run: .*device"
  [ "$defect" = cut-in-half ] && want="devices\[1\].instructions: compute 8 subtasks"
  [ "$(grep -c "braid-train: error: $S/bad-$defect.json: $want" "$S/train.err")" -ge 1 ] ||
    { cat "$S/train.err"; echo "FAIL: $defect: not refused with the file and the device named"; exit 1; }
  echo "ok: $defect refused: $(grep -m1 -o 'error: .*' "$S/train.err")"
done
echo "OK: braid-schedgen's schedule ran on the fused pipeline; broken streams are refused"
