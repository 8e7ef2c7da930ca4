#!/usr/bin/env bash
# braid-meshplan end to end: the plan file, the summary, fusion, exit codes.
set -euo pipefail
plan=$BRAID_BIN/braid-meshplan
fx=$BRAID_FIXTURES/plan
cd "$BRAID_SCRATCH"
rm -f *.json out.txt err.txt

fail() { echo "FAIL: $*" >&2; exit 1; }

# A PPO plan on a cluster of 2 x 4 devices: one summary line naming every call and both times.
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-2x4.json" --hardware h100 -o plan.json --time-limit 5 --iterations 3000 \
  > out.txt 2> err.txt
[[ $(wc -l < out.txt) -eq 1 ]] || fail "summary is not one line: $(cat out.txt)"
grep -Eq '^actor_gen [dtp0-9]+ \| .*iter [0-9.]+ s \(serial [0-9.]+ s\)$' out.txt || fail "summary: $(cat out.txt)"
grep -q 'searching plans' err.txt || fail "no progress on stderr"
python3 - plan.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "braid.plan" and p["version"] == 1
names = [c["name"] for c in p["calls"]]
assert names == ["actor_gen", "ref_inf", "reward_inf", "critic_inf", "actor_train", "critic_train"], names
for c in p["calls"]:
    s = c["strategy"]
    assert s["dp"] * s["tp"] * s["pp"] == c["mesh"]["devices"], c
    assert 0 <= c["mesh"]["first_device"] and c["mesh"]["first_device"] + c["mesh"]["devices"] <= 8
pr = p["predicted"]
assert pr["fused_s"] <= pr["serial_s"] + 1e-9, pr
b = pr["breakdown"]
assert abs(sum(b.values()) - pr["iteration_s"]) < 0.01, (b, pr)
assert p["memory"]["peak_gb"] <= p["memory"]["capacity_gb"]
intra = p["fusion"]["intra_stage"]
if intra["used"]:
    spec = intra["schedspec"]
    assert spec["format"] == "braid.schedspec"
    assert [m["name"] for m in spec["models"]] == ["actor", "critic"]
    for m in spec["models"]:
        assert len(m["fwd"]) == m["stages"] and all(x > 0 for x in m["fwd"] + m["bwd"])
PY

# Without fusion the plan says so and fused == serial.
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-2x4.json" --hardware h100 -o serial.json --iterations 3000 -q \
  --no-inter-fusion --no-intra-fusion > out.txt
python3 -c "
import json; p = json.load(open('serial.json'))
assert p['predicted']['fused_s'] == p['predicted']['serial_s']
assert not p['fusion']['inter_stage']['used'] and not p['fusion']['intra_stage']['used']"

# braid-schedgen's schedule of the plan's own schedspec replaces the bound (its makespan, at or
# above the bound); one made for another spec does not; a damaged one is refused as --verify
# refuses it (the file and the field named).
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 -o first.json --search exhaustive --max-micro 1 -q > /dev/null
python3 - first.json <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))["fusion"]["intra_stage"]
assert i["used"], i
spec = i["schedspec"]
json.dump(spec, open("spec.json", "w"))
m = spec["models"][0]
m["fwd"] = [2 * f for f in m["fwd"]] if isinstance(m["fwd"], list) else 2 * m["fwd"]
json.dump(spec, open("other-spec.json", "w"))
PY
for s in spec other-spec; do
  "$BRAID_BIN/braid-schedgen" $s.json -o ${s%spec}sched.json --iterations 20000 --mem-iterations 2000 -q
done
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 -o sched-plan.json --search exhaustive \
  --max-micro 1 --schedule sched.json -q > /dev/null
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 -o other-plan.json --search exhaustive \
  --max-micro 1 --schedule other-sched.json 2> err.txt > /dev/null
grep -q "made for another fused training spec" err.txt || fail "no warning for a foreign schedule"
python3 - first.json sched-plan.json other-plan.json sched.json <<'PY'
import json, sys
first, sched, other = (json.load(open(f))["fusion"]["intra_stage"] for f in sys.argv[1:4])
schedule = json.load(open(sys.argv[4]))
assert sched["source"] == "schedule" and other["source"] == "lower_bound", (sched["source"], other["source"])
assert schedule["makespan"] >= first["step_bound_s"] * 1000 * (1 - 1e-6), (schedule["makespan"], first["step_bound_s"])
assert sched["train_fused_s"] >= first["train_fused_s"] - 1e-3, (sched, first)
if schedule["lower_bound_reached"]:
    assert abs(sched["train_fused_s"] - first["train_fused_s"]) < 1e-3, (sched, first)
PY
jq '.devices[0].subtasks[0].end += 1' sched.json > bad-sched.json
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 -o never.json --schedule bad-sched.json -q 2> err.txt
code=$?
set -e
[[ $code == 2 ]] && grep -q 'bad-sched.json' err.txt && grep -q 'devices\[0\].subtasks\[0\].end' err.txt \
  && [[ ! -e never.json ]] || fail "a damaged schedule: exit $code: $(cat err.txt)"

# The search's options: --search names the method; --seed and --iterations steer
# Metropolis-Hastings (the same seed, the same plans costed); --time-limit stops it long
# before 10^8 proposals; --max-micro bounds a generation or inference call's micro-batches;
# --fix pins calls' strategies (a name that is no call exits 2).
search() {  # $1: output, the rest: options
  local out=$1; shift
  "$plan" "$fx/ppo-tiny.json" "$fx/cluster-2x4.json" --hardware h100 --search mh -o "$out" -q "$@" > /dev/null
}
search s1.json --iterations 500 --seed 1
search s1-again.json --iterations 500 --seed 1
search s3.json --iterations 500 --seed 3
search long.json --iterations 3000 --seed 1
search timed.json --iterations 100000000 --time-limit 0.5
search micro1.json --iterations 500 --seed 1 --max-micro 1
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 --search exhaustive --max-micro 1 \
  --fix train=d1t1p2 -o fixed.json -q > /dev/null
python3 - first.json s1.json s1-again.json s3.json long.json timed.json micro1.json fixed.json <<'PY' || fail "search options"
import json, sys
first, s1, again, s3, long, timed, micro1, fixed = (json.load(open(f)) for f in sys.argv[1:])
assert first["search"]["method"] == "exhaustive" and s1["search"]["method"] == "mh", (first["search"], s1["search"])
n = lambda p: p["search"]["plans_evaluated"]
assert n(s1) == n(again) and s1["calls"] == again["calls"], "one seed, two searches"
assert n(s1) != n(s3), ("--seed changed nothing", n(s1), n(s3))
assert n(s1) < n(long), ("--iterations changed nothing", n(s1), n(long))
assert timed["search"]["seconds"] < 10, timed["search"]
assert micro1["search"]["plan_space"] < s1["search"]["plan_space"], "--max-micro changed nothing"
for p in (first, micro1):
    assert all(c["strategy"]["micro_batches"] == 1 for c in p["calls"] if c["kind"] != "train"), p["calls"]
for c in fixed["calls"]:
    if c["kind"] == "train":
        s = c["strategy"]
        assert (s["dp"], s["tp"], s["pp"]) == (1, 1, 2), c
PY
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 --fix nosuch=d1t1p1 -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 && ! -e never.json ]] && grep -q nosuch err.txt || fail "--fix nosuch: exit $rc: $(cat err.txt)"
# A negative seed is refused, not wrapped to 2^64 - 1.
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 --seed -1 -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 && ! -e never.json ]] && grep -q -- "--seed" err.txt || fail "--seed -1: exit $rc: $(cat err.txt)"

# '-' writes the plan to stdout and nothing else.
"$plan" "$fx/grpo-tiny.json" "$fx/cluster-1x2.json" --hardware h100 -o - -q --max-micro 1 > out.txt
python3 -c "import json; assert json.load(open('out.txt'))['format'] == 'braid.plan'"

# Bad input: exit 2, the file and fields named, no plan written.
cat > bad.json <<'J'
{"format": "braid.experiment", "version": 1, "algorithm": "ppo",
 "models": {"actor": {"config": "nowhere.json"}},
 "batch": {"global": 10, "mini": 4}, "prompt_len": {"dist": "fixed", "value": 8},
 "response_len": {"dist": "fixed", "value": 8}}
J
set +e
"$plan" bad.json "$fx/cluster-1x2.json" --hardware h100 -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "bad experiment exit $rc"
[[ ! -e never.json ]] || fail "a plan was written for bad input"
for field in models.actor.config models.critic batch.mini; do
  grep -q "$field" err.txt || fail "error does not name $field: $(cat err.txt)"
done
grep -q 'bad.json' err.txt || fail "error does not name the file"
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "missing profile exit $rc"
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --profile h100.json --hardware h100 -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "not both" err.txt || fail "--profile with --hardware: exit $rc: $(cat err.txt)"
echo ok
