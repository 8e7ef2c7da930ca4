#!/usr/bin/env bash
# The whole iteration, predicted against measured, fused and serial (docs/tools/meshplan.md,
# "The whole iteration, predicted and measured"). For each shape it measures the models'
# profile here (braid-profile measure: layer tables and the host costs), runs the PPO with
# a plan braid run makes (braid-meshplan for this machine as 1 node of DEVICES devices),
# which chooses the fusions from the prediction, with the ablation every iteration (the
# iteration run again the other way), and prints, per way (fused: every fusion the run can
# take; serial: none), each call's and step's and the iteration's seconds, predicted beside
# measured (the median over the iterations after the first, the warm-up), and whether the
# way predicted faster was the faster one measured in each iteration.
#
#   [OUT=out/bench-iteration] [ITERS=4] bench/plan/bench_iteration.sh [SHAPE...]
#
# Shapes (default: all three):
#   default   the default experiment's PPO (make demo): the tiny model (examples/tiny) from
#             an SFT warm start on the synthetic sort task, 128 prompts x 4 samples of up to
#             20 new tokens, the math verifier, mini-batches of 128, 2 epochs; 2 devices
#   larger    the same PPO on a larger tiny model (bench/plan/cpu-small.json: 256 wide,
#             4 layers; random weights, so responses run to 20 tokens); 2 devices
#   ranks4    the default experiment's PPO on 4 devices (4 ranks on this machine's cores)
#
# Run it on a quiet machine: the figures are wall times. The load average before and after
# each shape is printed with its table. Tools from ${BRAID_BIN:-build/bin}.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(cd "${BRAID_BIN:-$root/build/bin}" && pwd)"
out="${OUT:-out/bench-iteration}"
iters="${ITERS:-4}"
export PATH="$bin:$PATH"
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
shapes=("$@")
[[ ${#shapes[@]} -gt 0 ]] || shapes=(default larger ranks4)
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The task and the SFT warm start, as scripts/demo.sh steps 2-3 make them (once).
task="$out/task"
if [[ ! -f $task/sft-actor.h5 ]]; then
  braid synth -q -o "$task" --task sort --min-digits 2 --max-digits 16 --tail 1.5 \
    --prompts 256 --sft 2048 --pairs 16 --heldout 16 --seed 1
  braid init -q --config "$root/examples/tiny/config.json" --seed 1 -o "$task/actor0.h5" > /dev/null
  braid-train -q sft "$task/sft.jsonl" --actor "$task/actor0.h5" --actor-out "$task/sft-actor.h5" \
    --lr 3e-3 --mini-batch 64 --epochs 1 --seed 1 > /dev/null
fi

for shape in "${shapes[@]}"; do
  case $shape in
    default) config="$root/examples/tiny/config.json"; devices=2; actor="$task/sft-actor.h5" ;;
    larger) config="$root/bench/plan/cpu-small.json"; devices=2; actor="" ;;
    ranks4) config="$root/examples/tiny/config.json"; devices=4; actor="$task/sft-actor.h5" ;;
    *) echo "unknown shape $shape (default, larger, ranks4)" >&2; exit 2 ;;
  esac
  dir="$out/$shape"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$config" "$dir/config.json"
  # The start actor's response lengths, measured (as the run samples them), so that the
  # cost model is tested and not a guess of the lengths: what a user's experiment would
  # state from a previous run.
  start="$actor"
  if [[ -z $start ]]; then start="$dir/start.h5"; braid init -q --config "$dir/config.json" --seed 1 -o "$start" > /dev/null; fi
  braid-generate -q --actor "$start" --prompts "$task/prompts.jsonl" --limit 128 --samples-per-prompt 4 \
    --max-new-tokens 20 --temperature 1 --seed 1 --threads 1 -o "$dir/lengths" > /dev/null
  /usr/bin/python3 - "$dir/lengths" > "$dir/response-lengths.json" <<'PY'
import glob, json, sys
import h5py
lengths = []
for f in sorted(glob.glob(f"{sys.argv[1]}/gen-*.h5")):
    with h5py.File(f) as h:
        off, pl = h["offsets"][()], h["prompt_len"][()]
        lengths += [int(off[i + 1] - off[i] - pl[i]) for i in range(len(pl))]
json.dump(lengths, sys.stdout)
PY
  # The PPO as braid-meshplan sees it (as scripts/demo.sh writes it), this machine as
  # DEVICES devices of one thread, and the run file.
  python3 - "$dir" "$task" "$devices" "$actor" "$iters" <<'PY'
import json, sys
d, task, devices, actor, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rows = [json.loads(l) for l in open(f"{task}/prompts.jsonl")][:128]
responses = json.load(open(f"{d}/response-lengths.json"))
json.dump({"format": "braid.experiment", "version": 1, "algorithm": "ppo",
           "models": {r: {"config": "config.json"} for r in ("actor", "ref", "critic", "reward")},
           "batch": {"global": 512, "mini": 128}, "ppo_epochs": 2,
           "prompt_len": {"dist": "samples", "values": [len(r["prompt"].encode()) + 1 for r in rows]},
           "response_len": {"dist": "samples", "values": responses}}, open(f"{d}/experiment.json", "w"), indent=1)
json.dump({"format": "braid.cluster", "version": 1, "nodes": 1, "devices_per_node": devices, "device_memory_gb": 4},
          open(f"{d}/cluster.json", "w"))
models = {"actor": actor or {"init": {"config": "config.json", "seed": 1}},
          "critic": {"init": {"config": "config.json", "seed": 2}}, "reward": {"rule": "math"}}
json.dump({"format": "braid.run", "version": 1, "algorithm": "ppo", "models": models,
           "prompts": f"{task}/prompts.jsonl", "iterations": iters, "seed": 0, "threads": 1,
           "generate": {"samples_per_prompt": 4, "max_new_tokens": 20, "temperature": 1.0, "limit": 128,
                        "shard_size": 32},
           "mpirun": {"options": ["--oversubscribe"]},
           "score": {"kl_coef": 0.01},
           "train": {"lr": 0.002, "critic_lr": 0.002, "epochs": 2, "mini_batch": 128},
           "plan": {"experiment": "experiment.json", "cluster": "cluster.json", "profile": "profile.json",
                    "options": ["--time-limit", "5", "--seed", "1"]},
           "ablation": {"every": 1}}, open(f"{d}/run.json", "w"), indent=1)
PY
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  braid-profile measure -q --experiment "$dir/experiment.json" --quick --repeats 3 --threads 1 --max-batch 256 \
    -o "$dir/profile.json"
  braid run -q "$dir/run.json" -o "$dir/run" > /dev/null
  after=$(cut -d' ' -f1-3 /proc/loadavg)
  echo
  echo "== $shape: $(python3 -c "import json; print(json.load(open('$dir/run/prediction.json'))['reason'])")"
  echo "   load average before $before, after $after ($(nproc) cores)"
  python3 - "$dir/run" "$iters" <<'PY'
import json, os, statistics, sys
run, iters = sys.argv[1], int(sys.argv[2])
report = json.load(open(f"{run}/report.json"))
by_iteration = {it["iteration"]: it for it in report["iterations"]}
ways = {}
for i in range(2, iters + 1):  # iteration 1 is the warm-up
    ablation = f"{run}/iter-{i:04d}/ablation.json"
    if os.path.exists(ablation):
        for v in json.load(open(ablation))["variants"]:
            ways.setdefault(v["name"], []).append(v)
        continue
    # A plan with one way only (no fusion to ablate, e.g. tp > 1): the report's iteration.
    it = by_iteration[i]
    pred = it["predicted"]
    ways.setdefault(report["prediction"]["chosen"], []).append({
        "calls": {"predicted": pred["calls"], "measured": it["calls"]},
        "predicted": {"rollout_step": pred["steps"]["rollout"]["seconds"],
                      "train_step": pred["steps"]["train"]["seconds"], "total": pred["iteration"]},
        "measured": {"rollout_step": it["steps"]["rollout"], "train_step": it["steps"]["train"],
                     "total": it["iteration_seconds"]}})
def median(xs):
    return statistics.median(xs) if xs else float("nan")
rows = []
for name, vs in ways.items():
    calls = [c for c in vs[0]["calls"].get("predicted", {}) if c in vs[0]["calls"]["measured"]]
    for c in calls:
        rows.append((name, c, median([v["calls"]["predicted"][c] for v in vs]), median([v["calls"]["measured"][c] for v in vs])))
    for step in ("rollout_step", "train_step"):
        rows.append((name, step, median([v["predicted"][step] for v in vs]), median([v["measured"][step] for v in vs])))
    rows.append((name, "iteration", median([v["predicted"]["total"] for v in vs]), median([v["measured"]["total"] for v in vs])))
print(f"   {'way':<12} {'figure':<13} {'predicted s':>11} {'measured s':>11} {'pred/meas':>9}")
worst = 0
for name, what, p, m in rows:
    r = p / m if m > 0 else float("nan")
    worst = max(worst, abs(r - 1))
    print(f"   {name:<12} {what:<13} {p:>11.3f} {m:>11.3f} {r:>9.2f}")
print(f"   worst deviation {100 * worst:.0f}%")
# Whether fusion pays as predicted, iteration by iteration.
names = list(ways)
if len(names) == 2:
    f = next(n for n in names if n != "serial")
    # The planner predicts that fusion pays when it takes it; a lead it gives a fusion under
    # the driver's margin (5%) is a tie: no prediction either way, the run stays serial.
    taken = report["prediction"]["chosen"] != "serial"
    agree = ties = 0
    for vf, vs in zip(ways[f], ways["serial"]):
        lead = 1 - vf["predicted"]["total"] / vs["predicted"]["total"]
        meas = vf["measured"]["total"] < vs["measured"]["total"]
        tie = not taken and 0 < lead < 0.05
        ties += tie
        agree += not tie and taken == meas
        verdict = "a tie predicted" if tie else "as predicted" if taken == meas else "NOT as predicted"
        print(f"   iteration: {f} predicted {vf['predicted']['total']:.3f} vs serial {vs['predicted']['total']:.3f} "
              f"({'taken' if taken else 'not taken'}); measured {vf['measured']['total']:.3f} vs "
              f"{vs['measured']['total']:.3f}: {verdict}")
    n = len(ways["serial"])
    if ties:
        print(f"   a tie predicted in {ties} of {n} iterations (fused measured faster in "
              f"{sum(a['measured']['total'] < b['measured']['total'] for a, b in zip(ways[f], ways['serial']))})")
    if n > ties:
        print(f"   fusion pays as predicted in {agree} of {n - ties} iterations")
PY
done
