#!/usr/bin/env bash
# braid run from a plan (docs/formats-run.md, "Running a plan"): examples/plan-run asks the
# driver to make the plan (braid-meshplan, this machine's profile of the tiny model, 1 node
# of 4 devices). Checks: `braid run --dry-run` makes OUT/plan.json, and every command line
# carries its calls' planned ranks (-np), --tp and micro-batch flags, as the plan says;
# the run file's generate.ranks wins, reported; a plan for another batch is refused naming
# batch.global; braid makefile writes the same lines with the layouts as comments; the plan
# is kept by its record of what made it, and made again when an option of it changed.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
mkdir -p examples
cp -r "$BRAID_SOURCE/examples/plan-run" "$BRAID_SOURCE/examples/tiny" "$BRAID_SOURCE/examples/ppo-tiny" examples/

"$B/braid" run examples/plan-run/run.json -o out --dry-run > dry.txt
# Its prediction is a braid JSON file braid check and inspect read.
"$B/braid" check out/prediction.json || fail "braid check refuses out/prediction.json"
[[ -f out/plan.json ]] || fail "the dry run made no out/plan.json"
grep -q '^# .*braid-meshplan .*examples/plan-run/experiment.json' dry.txt || fail "the dry run does not show braid-meshplan's line"
grep -q '^# plan out/plan.json: predicted iteration' dry.txt || fail "no plan summary"

# Each call's layout in the plan against the command lines that run it.
python3 - out/plan.json dry.txt out <<'PY'
import json, math, re, sys
plan, lines, out = json.load(open(sys.argv[1])), open(sys.argv[2]).read().splitlines(), sys.argv[3]
calls = {c["name"]: c for c in plan["calls"]}
samples, mini = 128, 64
def fail(msg):
    sys.exit(f"FAIL: {msg}")
def command(tool):  # the first command line running the tool, and its part for that tool
    for l in lines:
        if l.startswith("#"):
            continue
        for part in l.split(" && "):
            if f" {tool} " in part or part.startswith(f"{tool} ") or f"/{tool} " in part:
                return part
    fail(f"no command line runs {tool}")
def np_of(part):
    m = re.search(r"-np (\d+) ", part)
    return int(m.group(1)) if m else 1
def flag(part, name):
    m = re.search(rf"{name} (\S+)", part)
    return m.group(1) if m else None
def devices(names):
    ds = set()
    for n in names:
        m = calls[n]["mesh"]
        ds |= set(range(m["first_device"], m["first_device"] + m["devices"]))
    return len(ds)
def as_planned(tool, names, what):  # the tool on the calls' devices (whole tp groups), at their tp
    part = command(tool)
    want = devices(names)
    tp = max(calls[n]["strategy"]["tp"] for n in names)
    if np_of(part) != want - want % tp:
        fail(f"{tool} runs on {np_of(part)} ranks, the {what} calls' devices are {want}")
    if (flag(part, "--tp") or "1") != str(tp):
        fail(f"{tool} --tp {flag(part, '--tp')}, planned {tp}")
    if flag(part, "--micro-tokens") is None:
        fail(f"{tool} has no --micro-tokens")
for name in calls:
    s = calls[name]["strategy"]
    want = f"# {name}: planned d{s['dp']}t{s['tp']}p{s['pp']} x{s['micro_batches']}"
    if not any(l.startswith(want) for l in lines) and not (name.endswith("_train") and plan["fusion"]["intra_stage"].get("used")):
        fail(f"no line '{want} ...' before the command that runs it")

g = calls["actor_gen"]["strategy"]
gen = command("braid-generate")
replicas = g["dp"] * g["pp"]
if np_of(gen) != replicas * g["tp"]:
    fail(f"braid-generate runs on {np_of(gen)} ranks, the plan's actor_gen on {replicas * g['tp']}")
if (flag(gen, "--tp") or "1") != str(g["tp"]):
    fail(f"braid-generate --tp {flag(gen, '--tp')}, planned {g['tp']}")
mb = math.ceil(math.ceil(samples / replicas) / g["micro_batches"])
if flag(gen, "--max-batch") != str(mb):
    fail(f"braid-generate --max-batch {flag(gen, '--max-batch')}, planned {mb} ({samples} samples, {replicas} replicas, {g['micro_batches']} micro-batches)")
inter = plan["fusion"]["inter_stage"]
if inter.get("used") and replicas > 1:
    if flag(gen, "--migrate-threshold") is None or " -- " not in gen:
        fail("the plan fuses generation and inference: no migration or fused rollout")
    if float(flag(gen, "--migrate-threshold")) != inter["r_t_fraction"]:
        fail("R_t is not the plan's")
else:
    as_planned("braid-score", [n for n in ("ref_inf", "critic_inf", "reward_inf") if n in calls], "inference")
train = command("braid-train")
intra = plan["fusion"]["intra_stage"]
if intra.get("used"):
    spec = intra["schedspec"]
    tp = max(m.get("tp", 1) for m in spec["models"])
    if np_of(train) != spec["devices"] * intra["groups"] * tp:
        fail(f"braid-train runs on {np_of(train)} ranks, the fused training on {spec['devices'] * intra['groups'] * tp}")
    if flag(train, "--schedule") != f"{out}/plan.schedule.json":
        fail("braid-train does not run the plan's fused schedule")
else:
    as_planned("braid-train", [n for n in ("actor_train", "critic_train") if n in calls], "training")
if "--oversubscribe -np" not in gen:
    fail("mpirun.options do not reach the rollout's mpirun")
PY

# The plan records what made it (braid inspect shows it); a dry run again keeps it; a plan
# newer than its inputs but made with another option of the run file's plan.options is made
# again, the option named.
"$B/braid" inspect out/plan.json > inspect.txt
grep -q '^  made from: braid-meshplan' inspect.txt && grep -q 'input experiment: examples/plan-run/experiment.json' inspect.txt \
  || fail "braid inspect shows no record of what made the plan: $(cat inspect.txt)"
"$B/braid" run examples/plan-run/run.json -o out --dry-run > again.txt
grep -q '^# out/plan.json: kept' again.txt || fail "the same plan was made again"
sed 's/"--time-limit", "5"/"--time-limit", "0.5"/' examples/plan-run/run.json > examples/plan-run/quick.json
touch out/plan.json
"$B/braid" run examples/plan-run/quick.json -o out --dry-run > quick.txt 2> quick.err
grep -q 'out/plan.json: made again, made from other options or inputs: --time-limit: 5 there, 0.5 now' quick.err \
  || fail "a plan made with another --time-limit was kept: $(cat quick.err)"

# The run file's key wins, and says so.
sed 's/"limit": 32,/"limit": 32, "ranks": 2,/' examples/plan-run/run.json > examples/plan-run/ranks.json
"$B/braid" run examples/plan-run/ranks.json -o out --dry-run > ranks.txt
grep -q -- '-np 2 [^ ]*braid-generate ' ranks.txt || fail "generate.ranks 2 did not win"
grep -q '^#   run file wins: generate.ranks 2' ranks.txt || fail "the conflict is not reported"

# A plan for another batch is refused, naming the field.
python3 - <<'PY'
import json
run = json.load(open("examples/plan-run/run.json"))
run["generate"]["limit"] = 16
run["plan"] = {"file": "../../out/plan.json", "experiment": "experiment.json"}
json.dump(run, open("examples/plan-run/other.json", "w"))
PY
expect_bad other "plan: " "batch.global: is 128, but the run generates 64 samples" -- \
  "$B/braid" run examples/plan-run/other.json -o out2 --dry-run

# braid makefile: the same commands, the layouts as comments.
"$B/braid" makefile examples/plan-run/run.json -d out -o plan.mk
grep -q '^# actor_gen: planned ' plan.mk || fail "the Makefile has no layout comment"
grep -q '$(MPIRUN) --oversubscribe -np ' plan.mk || fail "the Makefile has no mpirun line"
echo "ok"
