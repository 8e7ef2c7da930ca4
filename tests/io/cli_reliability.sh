#!/usr/bin/env bash
# docs/reliability.md's promises on a bad day, one case each: JSON nested 100,000 deep,
# special files (/dev/zero, /dev/urandom, a FIFO nobody writes to), links planted at temp
# names, a diverging critic, a step counter at 2^63-1, --threads past what the system gives,
# the probe's internal command line not reachable from the environment, and inputs whose
# values are each in range but whose sizes cannot fit. Every refusal is exit 2 with the file
# or option named, in bounded time, with nothing left under a final name.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"
PY=/usr/bin/python3
export BRAID_READ_TIMEOUT=1

# bounded NAME TEXT -- COMMAND...: expect_bad under a 30 s limit (a hang is a failure, not a wait).
bounded() {
  local name=$1; shift
  local texts=()
  while [[ $1 != -- ]]; do texts+=("$1"); shift; done
  shift
  expect_bad "$name" "${texts[@]}" -- timeout 30 "$@"
}
# checked_bad NAME FILE TEXT: braid check answers 1 (not good; quickcheck's convention) in
# bounded time, and -v says why.
checked_bad() {
  local rc=0
  timeout 30 "$B/braid" -v check "$2" > "$1.out" 2> "$1.err" || rc=$?
  [[ $rc == 1 ]] || { cat "$1.err" >&2; fail "$1: braid check exit $rc, expected 1"; }
  grep -qF -- "$3" "$1.err" || { cat "$1.err" >&2; fail "$1: braid check -v does not say '$3'"; }
}

. "$BRAID_SOURCE/tests/io/tiny_scored.sh"

# --- JSON nested 100,000 deep: refused where it starts (was SIGSEGV, exit 139).
"$PY" - "$CONFIG" <<'PYEOF'
import json, sys
deep = "[" * 100000 + "]" * 100000
config = open(sys.argv[1]).read().rstrip().rstrip("}")
open("deep-config.json", "w").write(config + ', "x": ' + deep + "}")
open("deep-prompts.jsonl", "w").write('{"text": "hi", "x": ' + deep + "}\n")
open("deep-run.json", "w").write('{"format": "braid.run", "version": 1, "x": ' + deep + "}")
PYEOF
bounded deep-config "deep-config.json" "nested deeper than 512 levels" -- "$B/braid" init -c deep-config.json -o d.h5
[[ ! -e d.h5 ]] || fail "deep-config: d.h5 written"
bounded deep-prompt "deep-prompts.jsonl:1" "nested deeper than 512 levels" -- \
  "$B/braid-generate" --actor actor.h5 --prompts deep-prompts.jsonl -o deep-gen --max-new-tokens 2 --threads 1
bounded deep-run "deep-run.json" "nested deeper than 512 levels" -- "$B/braid" run deep-run.json -o deep-out
# A weight shard whose stored model_config nests that deep: braid export refuses it and
# leaves no folder, whole or half-written.
"$PY" - <<'PYEOF'
import shutil, h5py
shutil.copy("actor.h5", "deep-actor.h5")
with open("deep-actor.h5", "r+b") as f:
    f.write(b"\0" * 512)  # no seal: the file is read as h5py's would be
with h5py.File("deep-actor.h5", "r+") as f:
    config = f.attrs["model_config"]
    config = config.decode() if isinstance(config, bytes) else config
    f.attrs["model_config"] = config.rstrip().rstrip("}") + ', "x": ' + "[" * 100000 + "]" * 100000 + "}"
PYEOF
bounded deep-export "deep-actor.h5" "model_config" -- "$B/braid" export deep-actor.h5 -o exported
[[ ! -e exported ]] || fail "deep-export: the folder exported exists: $(ls -a exported)"
! compgen -G ".exported.tmp-*" > /dev/null || fail "deep-export: a temp folder is left"
"$B/braid" -q export actor.h5 -o exported > export.out
[[ -f exported/config.json && -f exported/model.safetensors ]] || fail "export wrote no folder"
! compgen -G ".exported.tmp-*" > /dev/null || fail "export left its temp folder"

# --- Special files: refused by their type, a FIFO without a writer after BRAID_READ_TIMEOUT.
mkfifo fifo
for dev in /dev/zero /dev/urandom fifo; do
  what=$(basename "$dev")
  checked_bad "check-$what" "$dev" "$dev"
  bounded "inspect-$what" "$dev" -- "$B/braid" inspect "$dev"
  bounded "prompts-$what" "$dev" -- \
    "$B/braid-generate" --actor actor.h5 --prompts "$dev" -o special-gen --max-new-tokens 2 --threads 1
  bounded "init-$what" "$dev" -- "$B/braid" init --config "$dev" -o special.h5
  bounded "run-$what" "$dev" -- "$B/braid" run "$dev" -o special-run
  bounded "experiment-$what" "$dev" -- \
    "$B/braid-meshplan" "$dev" "$BRAID_SOURCE/examples/plan/cluster-1x8-h100.json" --hardware h100
done
grep -q "no data came for 1 s" check-fifo.err || fail "a FIFO's refusal does not say it waited"
grep -q "is a character device" check-zero.err || fail "/dev/zero's refusal does not say what it is"

# --- Links planted at the temp names a writer would use (.NAME.tmp-PID-N, PID known to
# whoever starts the writer): nothing is written through them, and the outputs are files.
printf precious > target
plant() {  # DIR NAME...: links at N = 0..15 of each name, for the pid of the shell that execs next
  local dir=$1; shift
  for name in "$@"; do
    for n in $(seq 0 15); do ln -sf "$PWD/target" "$dir/.$name.tmp-$BASHPID-$n"; done
  done
}
mkdir -p planted/gen
( plant planted init.h5; exec "$B/braid" -q init -c "$CONFIG" --seed 1 -o planted/init.h5 ) > /dev/null
( plant planted a.h5 a.optim.h5 c.h5 c.optim.h5 train.json
  exec "$B/braid-train" -q ppo scored/scored-00000.h5 --actor actor.h5 --actor-out planted/a.h5 --critic critic.h5 \
    --critic-out planted/c.h5 --threads 1 --stats planted/train.json ) > /dev/null
( plant planted/gen gen-00000.h5; plant planted gen.json
  exec "$B/braid-generate" -q --actor actor.h5 --prompts prompts.jsonl -o planted/gen --max-new-tokens 6 --threads 1 \
    --stats planted/gen.json ) > /dev/null
[[ $(cat target) == precious ]] || fail "a writer wrote through a link planted at its temp name"
for f in init.h5 a.h5 a.optim.h5 c.h5 c.optim.h5 train.json gen/gen-00000.h5 gen.json; do
  [[ -f planted/$f && ! -L planted/$f ]] || fail "planted/$f is not a regular file"
done
"$B/braid" check planted/init.h5 planted/a.h5 planted/c.h5 planted/gen/gen-00000.h5 > /dev/null

# --- A diverging critic: exit 2, and nothing at all written (the actor and both states too).
bounded critic-diverges "c2.h5" "nothing written" -- \
  "$B/braid-train" ppo scored/scored-00000.h5 --actor actor.h5 --actor-out a2.h5 --critic critic.h5 \
  --critic-out c2.h5 --threads 1 --critic-lr 1e30 --epochs 3
for f in a2.h5 a2.optim.h5 c2.h5 c2.optim.h5; do [[ ! -e $f ]] || fail "critic-diverges: $f written"; done
! compgen -G ".*.tmp-*" > /dev/null || fail "critic-diverges: temp files left: $(compgen -G '.*.tmp-*')"

# --- A step counter at 2^63-1: refused on read, nothing trained or written.
"$PY" - <<'PYEOF'
import shutil, h5py, numpy
shutil.copy("actor.h5", "step-max.h5")
with open("step-max.h5", "r+b") as f:
    f.write(b"\0" * 512)
with h5py.File("step-max.h5", "r+") as f:
    f.attrs["step"] = numpy.int64(2**63 - 1)
PYEOF
bounded step-max "step-max.h5" "attribute step" -- \
  "$B/braid-train" ppo scored/scored-00000.h5 --actor step-max.h5 --actor-out a3.h5 --critic critic.h5 \
  --critic-out c3.h5 --threads 1
for f in a3.h5 a3.optim.h5 c3.h5 c3.optim.h5; do [[ ! -e $f ]] || fail "step-max: $f written"; done
checked_bad check-step-max step-max.h5 "attribute step"

# --- --threads: bounded, and a pool the system cannot start ends cleanly (it deadlocked).
bounded threads-bound "--threads 100000" "at most 1024" -- \
  "$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o t-gen --max-new-tokens 2 --threads 100000
bounded threads-limit "--threads 1000" "could be started" -- \
  bash -c 'ulimit -v 4000000; exec "$0" "$@"' "$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o t-gen \
  --max-new-tokens 2 --threads 1000

# --- The HDF5 probe's internal channel cannot be set from the environment (every tool
# turned into an exit-0 no-op when it was).
BRAID_INTERNAL_H5_PROBE_FILE=actor.h5 BRAID_INTERNAL_H5_PROBE_PARENT=$$ "$B/braid" inspect actor.h5 > probe-env.out
grep -q "parameters" probe-env.out || fail "braid inspect under BRAID_INTERNAL_H5_PROBE_* printed nothing"
BRAID_INTERNAL_H5_PROBE_FILE=x BRAID_INTERNAL_H5_PROBE_PARENT=$$ checked_bad probe-env-check step-max.h5 "attribute step"

# --- Tokenizers: an added token with empty content (encoding looped forever) and ids of 1e9.
"$PY" - "$CONFIG" "$BRAID_FIXTURES/tokenizer/gpt2_style/tokenizer.json" <<'PYEOF'
import json, sys
config = json.load(open(sys.argv[1]))
config["vocab_size"] = 512
json.dump(config, open("config-512.json", "w"))
tok = json.load(open(sys.argv[2]))
tok["added_tokens"].append({"id": 300, "content": "", "special": False})
json.dump(tok, open("tok-empty.json", "w"))
tok["added_tokens"][-1] = {"id": 1000000000, "content": "<big>", "special": False}
json.dump(tok, open("tok-big-id.json", "w"))
PYEOF
"$B/braid" -q init -c config-512.json --seed 1 -o actor-512.h5 > /dev/null
bounded tok-empty "tok-empty.json" "content: is empty" -- \
  "$B/braid-generate" --actor actor-512.h5 --tokenizer tok-empty.json --prompts prompts.jsonl -o tok-gen \
  --max-new-tokens 2 --threads 1
bounded tok-big-id "tok-big-id.json" "added_tokens[1]" -- \
  "$B/braid-generate" --actor actor-512.h5 --tokenizer tok-big-id.json --prompts prompts.jsonl -o tok-gen \
  --max-new-tokens 2 --threads 1

# --- Values each in range whose sizes cannot fit: refused from the predicted size, at once.
echo '{"text": "1+1=", "answer": 1e400}' > huge-answer.jsonl
bounded answer-1e400 "huge-answer.jsonl:1" "not valid JSON" -- \
  "$B/braid-generate" --actor actor.h5 --prompts huge-answer.jsonl -o a-gen --max-new-tokens 2 --threads 1
"$PY" - "$CONFIG" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=8192, num_hidden_layers=32, num_attention_heads=64, num_key_value_heads=8,
         intermediate_size=28672, vocab_size=128256)
json.dump(c, open("config-8b.json", "w"))
PYEOF
bounded init-too-big "config-8b.json" "GiB of memory this process can have" -- \
  bash -c 'ulimit -v 8000000; exec "$0" "$@"' "$B/braid" init -c config-8b.json -o big.h5
[[ ! -e big.h5 ]] || fail "init-too-big: big.h5 written"
bounded samples-1e9 "--samples-per-prompt must be in [1, 65536]" -- \
  "$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o s-gen --samples-per-prompt 1000000000 --threads 1
bounded synth-1e12 "--prompts" "GiB of memory" -- "$B/braid" synth --prompts 1000000000000 -o synth
[[ ! -e synth/prompts.jsonl ]] || fail "synth-1e12: prompts.jsonl written"

echo "reliability: every case refused in bounded time with exit 2; nothing written under a final name"
