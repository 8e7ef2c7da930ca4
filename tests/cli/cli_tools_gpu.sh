#!/usr/bin/env bash
# The tools on a GPU against the same tools on the CPU, on the tiny random model of
# examples/tiny (docs/gpu.md, "What each test checks", tools_cuda):
#
#   sft   braid-train sft, 8 steps, f32 and bf16 weights: the per-step losses and gradient
#         norms (--stats) within 1e-4 relative in f32 (and the written weights), 3e-2 in bf16
#         (the GPU rounds every product's operands to bf16, activations and gradients
#         included; the CPU multiplies them in f32 with the weights bf16-rounded: the bound
#         of the bf16 model-parity test)
#   rm, dpo   braid-train rm and dpo, f32: losses within 1e-4
#   ppo   one PPO iteration on each device: braid-generate (greedy) -> braid-score (reference,
#         critic, digits rule) -> braid-train ppo; the shards (tokens equal, every array within
#         1e-4), the actor's and critic's losses and weights within 1e-4; braid-train grpo from
#         the same scored shard on both devices, losses within 1e-4
#   memory  the peak device memory of the sft and score runs within their prediction, and a
#         run whose prediction exceeds the free memory (--micro-tokens 50000000) refused with
#         exit 2 naming the activations and the free memory, before anything is written
#   profile  braid-profile measure --device cuda --dtype bf16 writes a profile braid check
#         accepts, every measured time positive, its hardware block the device's (name, memory,
#         rates, bf16's 2 bytes)
#
# Exit 77 (ctest: Skipped) where the CUDA backend cannot be made (no GPU, a build without
# CUDA). BRAID_TOOLS_DEVICE (default cuda) names the device compared with the CPU; "cpu"
# runs the whole script against the CPU itself, to try its plumbing on a machine without a GPU.
set -euo pipefail
B="$BRAID_BIN"
S="$BRAID_SCRATCH"
CMP="${COMPARE_OUTPUTS:?the compare_outputs helper (tests/cli/CMakeLists.txt sets it)}"
DEV="${BRAID_TOOLS_DEVICE:-cuda}"
rm -rf "${S:?}"/* && mkdir -p "$S" && cd "$S"
fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ $DEV == cuda* ]]; then
  why=$("$B/braid" info --json | python3 -c '
import json, sys
cuda = json.load(sys.stdin)["cuda"]
print("braid was built without CUDA" if not cuda["built"] else "no CUDA GPU is usable here" if not cuda["devices"] else "")')
  if [[ -n $why ]]; then echo "skipped: $why"; exit 77; fi
fi
echo "comparing --device $DEV with --device cpu"

# Runs a tool, its stdout and stderr kept in NAME.out / NAME.err; a failure shows stderr.
run() {
  local name=$1; shift
  local rc=0
  "$@" > "$name.out" 2> "$name.err" < /dev/null || rc=$?
  (( rc == 0 )) || { tail -20 "$name.err" >&2; fail "$name: exit $rc ($*)"; }
}

# Per-step loss and gradient norm of every call of two braid-train --stats files, within rtol.
compare_losses() {
  python3 - "$@" <<'PY' || fail "loss curves: $1 against $2"
import json, math, sys
a, b, rtol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
ok = True
for call in sorted(b["calls"]):
    sa, sb = a["calls"][call]["per_step"], b["calls"][call]["per_step"]
    assert len(sa) == len(sb) and len(sb) >= 2, (call, len(sa), len(sb))
    for key in ("loss", "grad_norm"):
        xs, ys = [s[key] for s in sa], [s[key] for s in sb]
        rel = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(xs, ys))
        good = all(math.isfinite(x) for x in xs) and rel <= rtol
        ok = ok and good
        print(f"{sys.argv[1]} {call} {key}: {' '.join(f'{x:.6g}' for x in xs)}")
        print(f"{sys.argv[2]} {call} {key}: {' '.join(f'{y:.6g}' for y in ys)}")
        print(f"  largest relative difference {rel:.3e} (bound {rtol:g}){'' if good else '  OVER'}")
    # The curve moves: the steps trained something.
    assert len(set(s["loss"] for s in sb)) > 1, f"{call}: the loss never changed"
sys.exit(0 if ok else 1)
PY
}

# The "device memory: peak P (N bytes) of Q predicted (M bytes)" line of a run's stderr:
# the peak within the prediction (the CUDA pool rounds each allocation up to 256 bytes).
check_peak() {
  local err=$1
  python3 - "$err" <<'PY' || fail "$err: the peak device memory against the prediction"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"device memory: peak .* \((\d+) bytes\) of .* predicted \((\d+) bytes\)", text)
assert m, "no peak line"
peak, predicted = int(m.group(1)), int(m.group(2))
print(f"{sys.argv[1]}: peak {peak} bytes, predicted {predicted} ({peak / predicted:.4f})")
assert 0.9 * predicted <= peak <= 1.01 * predicted + (1 << 20), (peak, predicted)
PY
}

"$B/braid" -q init -c "$BRAID_SOURCE/examples/tiny/config.json" --seed 1 -o actor.h5 > /dev/null
"$B/braid" -q init -c "$BRAID_SOURCE/examples/tiny/config.json" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
"$B/braid" -q init -c "$BRAID_SOURCE/examples/tiny/config.json" --seed 3 --value-head --no-lm-head -o reward.h5 > /dev/null
for i in 1 2 3 4 5 6 7 8; do
  echo "{\"prompt\": \"Question $i:\", \"response\": \" answer $((i * 7)) and more\"}"
done > sft.jsonl
for i in 1 2 3 4 5 6 7 8; do
  echo "{\"prompt\": \"Pick $i:\", \"chosen\": \" $((i * 3)) apples\", \"rejected\": \" no idea at all\"}"
done > pairs.jsonl
for i in 1 2 3 4 5 6; do echo "{\"text\": \"Count to $i:\"}"; done > prompts.jsonl
common=(--lr 1e-3 --seed 1 --threads 2)

echo "== sft: f32 within 1e-4, bf16 within 3e-2"
for dt in f32 bf16; do
  for d in cpu "$DEV"; do
    run "sft-$dt-$d" "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out "sft-$dt-$d.h5" --epochs 2 \
      --mini-batch 2 --dtype "$dt" --device "$d" --stats "sft-$dt-$d.json" "${common[@]}"
  done
done
compare_losses "sft-f32-cpu.json" "sft-f32-$DEV.json" 1e-4
compare_losses "sft-bf16-cpu.json" "sft-bf16-$DEV.json" 3e-2
"$CMP" weights "sft-f32-$DEV.h5" sft-f32-cpu.h5 1e-4 || fail "sft f32: the trained weights differ"

echo "== rm and dpo (f32): within 1e-4"
for d in cpu "$DEV"; do
  run "rm-$d" "$B/braid-train" rm pairs.jsonl --reward reward.h5 --reward-out "rm-$d.h5" --epochs 2 --mini-batch 2 \
    --device "$d" --stats "rm-$d.json" "${common[@]}"
  run "dpo-$d" "$B/braid-train" dpo pairs.jsonl --actor actor.h5 --actor-out "dpo-$d.h5" --epochs 2 --mini-batch 2 \
    --device "$d" --stats "dpo-$d.json" "${common[@]}"
done
compare_losses rm-cpu.json "rm-$DEV.json" 1e-4
compare_losses dpo-cpu.json "dpo-$DEV.json" 1e-4

echo "== one PPO iteration on each device: generate -> score -> train, within 1e-4 (loss curves 1e-3)"
for d in cpu "$DEV"; do
  run "gen-$d" "$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o "gen-$d" --temperature 0 \
    --max-new-tokens 12 --kv-cache-mb 64 --threads 2 --device "$d"
  run "score-$d" "$B/braid-score" "gen-$d/gen-00000.h5" -o "score-$d" --ref actor.h5 --critic critic.h5 \
    --reward-rule digits --threads 2 --device "$d"
  run "ppo-$d" "$B/braid-train" ppo "score-$d/scored-00000.h5" --actor actor.h5 --critic critic.h5 \
    --actor-out "ppo-actor-$d.h5" --critic-out "ppo-critic-$d.h5" --critic-lr 1e-3 --epochs 2 --mini-batch 2 \
    --device "$d" --stats "ppo-$d.json" "${common[@]}"
done
"$CMP" shards "gen-$DEV/gen-00000.h5" gen-cpu/gen-00000.h5 1e-4 || fail "generate: the shards differ"
"$CMP" shards "score-$DEV/scored-00000.h5" score-cpu/scored-00000.h5 1e-4 || fail "score: the shards differ"
# The critic's curve within 1e-3: a fresh critic's value loss over 6 AdamW steps grows the
# summation-order differences of f32 step by step (the H200: 1e-7 at steps 1-2, 3.0e-4 at step 5).
compare_losses ppo-cpu.json "ppo-$DEV.json" 1e-3
"$CMP" weights "ppo-actor-$DEV.h5" ppo-actor-cpu.h5 1e-4 || fail "ppo: the actors differ"
"$CMP" weights "ppo-critic-$DEV.h5" ppo-critic-cpu.h5 1e-4 || fail "ppo: the critics differ"
for d in cpu "$DEV"; do
  run "grpo-$d" "$B/braid-train" grpo score-cpu/scored-00000.h5 --actor actor.h5 --actor-out "grpo-$d.h5" \
    --kl-coef 0.04 --epochs 2 --mini-batch 2 --device "$d" --stats "grpo-$d.json" "${common[@]}"
done
compare_losses grpo-cpu.json "grpo-$DEV.json" 1e-4

echo "== memory"
if [[ $DEV == cuda* ]]; then
  check_peak "sft-f32-$DEV.err"
  check_peak "sft-bf16-$DEV.err"
  check_peak "score-$DEV.err"
  set +e
  "$B/braid-train" sft sft.jsonl --actor actor.h5 --actor-out huge.h5 --micro-tokens 50000000 --device "$DEV" \
    > huge.out 2> huge.err < /dev/null
  rc=$?
  set -e
  cat huge.err
  [[ $rc == 2 ]] || fail "a run the device cannot hold: exit $rc, expected 2"
  for text in "device memory" "activations (50000000 tokens" "are free" "Lower --micro-tokens (now 50000000"; do
    grep -qF "$text" huge.err || fail "the refusal does not say '$text'"
  done
  [[ ! -e huge.h5 && ! -s huge.out ]] || fail "the refused run wrote something"
  set +e
  "$B/braid-score" - -o huge-score --critic critic.h5 --reward-rule digits --micro-tokens 50000000 \
    --device "$DEV" > huge-score.out 2> huge-score.err <<< "gen-cpu/gen-00000.h5"
  rc=$?
  set -e
  cat huge-score.err
  [[ $rc == 2 ]] || fail "braid-score on a run the device cannot hold: exit $rc, expected 2"
  grep -qF "critic activations (50000000 tokens" huge-score.err || fail "braid-score's refusal names no activations"
  [[ ! -e huge-score/scored-00000.h5 ]] || fail "the refused braid-score wrote a shard"
else
  echo "(--device $DEV reports no device memory: nothing is predicted or refused there)"
fi

echo "== braid-profile measure --device $DEV"
run profile "$B/braid-profile" measure --model "$BRAID_SOURCE/examples/tiny/config.json" --quick --repeats 1 \
  --threads 2 --device "$DEV" --dtype bf16 -o "profile-$DEV.json"
"$B/braid" check "profile-$DEV.json" > /dev/null || fail "braid check refuses the profile"
python3 - "profile-$DEV.json" "$DEV" <<'PY' || fail "the profile"
import json, math, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "braid.profile" and p["source"] == "measured", (p["format"], p["source"])
# The hardware block is the measured device's: its name, its memory, its measured rates.
hw = p["hardware"]
assert hw["name"].startswith(sys.argv[2]), ("hardware name", hw["name"], "measured on", sys.argv[2])
assert hw["peak_tflops"] > 0 and hw["mem_bandwidth_gbs"] > 0 and hw["mem_capacity_gb"] > 0, hw
# --dtype bf16: the layers' weights, and a GPU's rates measured, in bf16 (the CPU's hardware
# block is the host's, f32).
assert hw["dtype_bytes"] == (4 if sys.argv[2] == "cpu" else 2), hw
print(f"{sys.argv[1]}: hardware {hw['name']}: {hw['peak_tflops']:.1f} TFLOP/s, {hw['mem_bandwidth_gbs']:.0f} GB/s, "
      f"{hw['mem_capacity_gb']:.1f} GB")
m = p["models"][0]
n = 0
for key in ("layer_fwd", "layer_bwd", "layer_decode", "head_fwd"):
    values = m[key]["seconds"]
    flat = [x for row in values for x in (row if isinstance(row, list) else [row])]
    assert flat and all(math.isfinite(x) and x > 0 for x in flat), key
    n += len(flat)
print(f"{sys.argv[1]}: {n} measured times, all positive")
PY
echo "ok"
