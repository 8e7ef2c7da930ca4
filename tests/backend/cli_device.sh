#!/usr/bin/env bash
# --device on every tool that runs a model, and the run file's "device" key: a device
# this machine or build cannot give exits 2 with the reason (braid built without CUDA,
# or no GPU or driver, whichever holds here, as `braid info` tells), and a value that is
# no device exits 2 naming the option. Where a GPU is present `--device cuda` is the CUDA
# backend, and only the refusals that still hold there are checked.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"

# Expects exit 2, nothing on stdout, and the text on stderr.
expect_2() {
  local name=$1 text=$2; shift 2
  set +e
  "$@" > "$name.out" 2> "$name.err" < /dev/null
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { cat "$name.err" >&2; fail "$name: exit $rc, expected 2"; }
  grep -qF -- "$text" "$name.err" || { cat "$name.err" >&2; fail "$name: stderr does not say '$text'"; }
  [[ ! -s "$name.out" ]] || fail "$name: wrote to stdout"
}

# What `--device cuda` must say on this machine.
info=$("$B/braid" info --json)
why=$(python3 -c '
import json, sys
cuda = json.loads(sys.argv[1])["cuda"]
if not cuda["built"]: print("braid was built without CUDA")
elif not cuda["devices"]: print("no CUDA GPU is usable here")
else: print("")' "$info")
gpus=$(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])["cuda"]["devices"]))' "$info")
echo "expecting: ${why:-a working CUDA backend ($gpus GPU(s))}"

# The inputs are never opened: the device is checked first.
TOOLS=(
  "generate|$B/braid-generate --actor a.h5 --prompts p.jsonl -o gen"
  "score|$B/braid-score - -o scored --critic c.h5 --reward-rule digits"
  "train-ppo|$B/braid-train ppo s.h5 --actor a.h5 --actor-out a1.h5 --critic c.h5 --critic-out c1.h5"
  "train-grpo|$B/braid-train grpo s.h5 --actor a.h5 --actor-out a1.h5"
  "train-fused|$B/braid-train ppo s.h5 --actor a.h5 --actor-out a1.h5 --critic c.h5 --critic-out c1.h5 --schedule sched.json"
  "train-sft|$B/braid-train sft d.jsonl --actor a.h5 --actor-out a1.h5"
  "train-rm|$B/braid-train rm d.jsonl --reward r.h5 --reward-out r1.h5"
  "profile-measure|$B/braid-profile measure --model $BRAID_SOURCE/examples/tiny/config.json -o p.json"
)
for entry in "${TOOLS[@]}"; do
  name=${entry%%|*}
  read -r -a cmd <<< "${entry#*|}"
  if [[ -n $why ]]; then expect_2 "$name-cuda" "$why" "${cmd[@]}" --device cuda; fi
  if (( gpus < 2 )); then expect_2 "$name-cuda1" "--device cuda:1" "${cmd[@]}" --device cuda:1; fi
  expect_2 "$name-bogus" "--device" "${cmd[@]}" --device gpu
  grep -qF "'gpu' is not a device (cpu or cuda[:N])" "$name-bogus.err" || fail "$name: the bogus value is not named"
  expect_2 "$name-badindex" "--device" "${cmd[@]}" --device cuda:x
done

# The run file: a bad value is an error of the file, naming the key; a good one reaches
# every stage tool (braid run stops at the first with the tool's exit 2 and message).
cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' > prompts.jsonl
write_run() {
  cat > run.json <<JSON
{"format": "braid.run", "version": 1, "algorithm": "ppo",
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
            "critic": {"init": {"config": "config.json", "seed": 2}},
            "reward": {"rule": "digits"}},
 "prompts": "prompts.jsonl", "iterations": 1, "threads": 1, "device": "$1",
 "generate": {"max_new_tokens": 4}}
JSON
}
write_run gpu
expect_2 run-bogus "device" "$B/braid" run run.json -o out
grep -qF "'gpu' is not a device" run-bogus.err || fail "run file: the bad device is not explained"
write_run cuda
if [[ -n $why ]]; then expect_2 run-cuda "$why" "$B/braid" run run.json -o out; fi
"$B/braid" makefile run.json -d mk -o Makefile
for stage in GENERATE SCORE TRAIN; do
  grep -E "\\\$\(BRAID_$stage\) [^|]*--device cuda( |$)" Makefile > /dev/null ||
    fail "the Makefile does not pass --device to \$(BRAID_$stage)"
done
write_run cpu
"$B/braid" run run.json -o out > run-cpu.out 2> run-cpu.err || { cat run-cpu.err >&2; fail "braid run with device cpu failed"; }
[[ -s out/iter-0001/actor.h5 ]] || fail "device cpu: no trained actor"
echo "ok"
