#!/usr/bin/env bash
# `braid run` from a plan, measured against the plan: the run file (default
# examples/plan-run/run.json: PPO on the tiny model, planned by braid-meshplan for this
# machine as 1 node of 4 devices) runs with every call laid out as planned (4 ranks,
# mpirun --oversubscribe), then each call's planned layout, predicted seconds and measured
# seconds are printed side by side, and the iteration's total beside the plan's prediction.
#
#   [OUT=out/run-plan] [MEASURE=1] [ITERS=N] [CLUSTER=FILE] bench/plan/run_plan.sh [RUN_FILE]
#
# CLUSTER plans for another cluster description (a file of the run file's folder, e.g.
# cluster-1x2.json: this machine's 2 cores as 2 devices, no oversubscription).
# MEASURE=1 measures the profile again here first (braid-profile measure, one thread, the
# experiment's models, batches up to 32) into the copy of the run file's folder; else the
# profile the run file names is used as it is. ITERS overrides the run file's iterations.
# Tools from ${BRAID_BIN:-build/bin}. The run file's folder and examples/tiny, ppo-tiny
# are copied into OUT/examples/, so the run leaves the repository untouched.
#
# Measured seconds per call: each stage's --stats "calls" seconds (a call's compute time;
# under mpirun braid-generate and braid-score sum it over their ranks, so it is divided by
# the ranks; braid-train's rank 0 reports its own) and each stage's wall_seconds (from its
# first step: process start and model loads not in it). The first iteration is a warm-up
# (cold memory, docs/notes/meshplan-prediction-accuracy.md); the table is the last iteration's.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
run_file="${1:-$root/examples/plan-run/run.json}"
bin="$(cd "${BRAID_BIN:-$root/build/bin}" && pwd)"
out="${OUT:-out/run-plan}"
export PATH="$bin:$PATH"
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
rm -rf "$out" && mkdir -p "$out/examples"
src="$(cd "$(dirname "$run_file")" && pwd)"
cp -r "$src" "$root/examples/tiny" "$root/examples/ppo-tiny" "$out/examples/"
run="$out/examples/$(basename "$src")/$(basename "$run_file")"
if [[ -n "${CLUSTER:-}" ]]; then
  python3 - "$run" "$CLUSTER" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["plan"]["cluster"] = sys.argv[2]
json.dump(run, open(sys.argv[1], "w"), indent=1)
PY
fi
if [[ -n "${ITERS:-}" ]]; then iters=(--iterations "$ITERS"); else iters=(); fi

if [[ "${MEASURE:-0}" == 1 ]]; then
  python3 - "$run" <<'PY' > "$out/profile-target"
import json, os, sys
run = json.load(open(sys.argv[1]))
print(os.path.join(os.path.dirname(sys.argv[1]), run["plan"]["profile"]))
print(os.path.join(os.path.dirname(sys.argv[1]), run["plan"]["experiment"]))
PY
  profile=$(sed -n 1p "$out/profile-target"); experiment=$(sed -n 2p "$out/profile-target")
  braid-profile measure --experiment "$experiment" --quick --repeats 3 --threads 1 --max-batch 32 -o "$profile" -q
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
braid run "$run" -o "$out/run" "${iters[@]}" --dry-run > "$out/dry-run.txt"
start=$(date +%s.%N)
braid run "$run" -o "$out/run" "${iters[@]}" > /dev/null
end=$(date +%s.%N)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); braid run took $(python3 -c "print(f'{$end - $start:.1f}')") s"
echo "the commands (braid run --dry-run): $out/dry-run.txt"

python3 - "$out/run" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
plan = json.load(open(os.path.join(out, "plan.json")))
last = sorted(glob.glob(os.path.join(out, "iter-0*")))[-1]
stats = {s: json.load(open(os.path.join(last, f"{s}.stats.json"))) for s in ("generate", "score", "train")}
def ranks(s):
    return max(1, len(s.get("ranks", [])) or 1)
measured = {}
for stage, s in stats.items():
    for call, v in s.get("calls", {}).items():
        per_rank = v["seconds"] / (ranks(s) if stage != "train" else 1)
        measured[call] = measured.get(call, 0) + per_rank
dry = open(os.path.join(os.path.dirname(out), "dry-run.txt")).read().splitlines()
runs_as = {}
for l in dry:
    if l.startswith("#   ") and "planned" in l and "->" in l:
        name = l.split()[1]
        runs_as[name] = l.split("-> ", 1)[1]
print(f"\niteration {os.path.basename(last)}; plan {plan['inputs'].get('profile', '')} "
      f"(search {plan['search']['method']}, {plan['search']['plans_evaluated']} plans)")
# Training's optimizer steps: the first pays the ranks' start (connections, cold memory);
# "steady" is the fastest step times the steps, the pipeline's own cost.
steady = {}
for call, v in stats["train"].get("calls", {}).items():
    steps = [p["seconds"] for p in v.get("per_step", []) if "seconds" in p]
    if steps:
        steady[call] = min(steps) * len(steps)
print("| call | planned (dp, tp, pp, micro-batches, devices) | runs as | predicted s | measured s | measured / predicted | steady s |")
print("|---|---|---|---:|---:|---:|---:|")
def row(name, layout, runs, predicted, m, st=None):
    ms = f"{m:.3f}" if m is not None else "(not run)"
    ratio = f"{m / predicted:.2f}" if m is not None and predicted > 0 else ""
    sts = f"{st:.3f} ({st / predicted:.2f})" if st is not None and predicted > 0 else ""
    print(f"| {name} | {layout} | {runs} | {predicted:.3f} | {ms} | {ratio} | {sts} |")
for c in plan["calls"]:
    s = c["strategy"]
    layout = f"d{s['dp']}t{s['tp']}p{s['pp']} x{s['micro_batches']} on {c['mesh']['where']}"
    row(c["name"], layout, runs_as.get(c["name"], ""), c["time_s"], measured.get(c["name"]), steady.get(c["name"]))
intra = plan["fusion"]["intra_stage"]
if intra.get("used"):
    m = measured.get("actor_train")
    row("actor+critic training, fused", f"{intra['groups']} group(s), schedule {intra.get('source', '')}",
        "braid-train --schedule", intra["train_fused_s"], m, steady.get("actor_train"))
walls = {k: v["wall_seconds"] for k, v in stats.items()}
metrics = json.load(open(os.path.join(last, "metrics.json")))
fused = plan["fusion"]["inter_stage"].get("used") and plan["fusion"]["inter_stage"].get("replicas", 1) > 1
stage_total = walls["generate"] + walls["train"] + (0 if fused else walls["score"])
print(f"\nstages' wall_seconds: generate {walls['generate']:.3f}, score {walls['score']:.3f}, train {walls['train']:.3f}"
      f" (sum {stage_total:.3f} s)")
it = metrics.get("seconds", {}).get("iteration")
print(f"iteration: predicted {plan['predicted']['iteration_s']:.3f} s (serial {plan['predicted']['serial_s']:.3f} s); "
      f"measured {stage_total:.3f} s of stages" + (f", {it:.3f} s wall with process starts and model loads" if it else ""))
PY
