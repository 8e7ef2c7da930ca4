#!/usr/bin/env bash
# The ablation in one run (the run file's "ablation"; docs/fusion.md): a PPO run on 2 ranks
# with migration and fusion runs each iteration again the serial way (as braid run would
# run it: the generation piped into braid-score, then braid-train) in iter-i/ablation/ and
# writes iter-i/ablation.json. Checks: --dry-run shows the serial re-run; ablation.json is a
# valid braid.ablation (read into report.json) with both ways, each one's tools' times, its
# steps' wall times (their sum the total), its calls and the plan's predicted totals; the
# serial re-run's scored shards hold the same tokens as the fused ones (values to
# rounding); the iteration's own files are not touched by it; a rerun keeps a complete
# ablation.json, and measures a damaged one again; with train.schedule too, the serial
# re-run trains without it; bad "ablation" sections exit 2 naming the field, and braid
# makefile refuses a run file with one.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
needs_mpirun

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
questions 1 12 > prompts.jsonl
# braid-meshplan's prediction as the run reads it: predicted.fused_s and .serial_s.
cat > plan.json <<'JSON'
{"format": "braid.plan", "version": 1, "predicted": {"iteration_s": 1.5, "fused_s": 1.5, "serial_s": 2.25}}
JSON
run_file() {  # $1: the "ablation" section
  ppo_run '{"generate": {"samples_per_prompt": 2, "max_new_tokens": 24, "shard_size": 4, "max_batch": 8,
                         "ranks": 2, "migrate_threshold": 0.3, "migrate_to": 1},
            "mpirun": {"options": ["--oversubscribe"]},
            "train": {"lr": 0.001, "critic_lr": 0.001, "mini_batch": 8}}' | jq --argjson a "$1" '.ablation = $a'
}
run_file '{"every": 1, "plan": "plan.json"}' > run.json

"$B/braid" run run.json -o out --dry-run > dry.txt
grep -q "^# iteration 1: the ablation" dry.txt || fail "--dry-run does not show iteration 1's ablation: $(cat dry.txt)"
grep -q "^# iteration 2: the ablation" dry.txt || fail "--dry-run does not show iteration 2's ablation: $(cat dry.txt)"
serial=$(grep -- "-o out/iter-0001/ablation/iter-0001/samples" dry.txt) || fail "no serial rollout line: $(cat dry.txt)"
[[ $serial == *"mpirun --oversubscribe -np 2 "* ]] || fail "the serial generation is not on the same 2 ranks: $serial"
[[ $serial != *"--migrate"* && $serial != *" -- "* ]] || fail "the serial generation migrates or fuses: $serial"
[[ $serial == *" | "*"braid-score - -o out/iter-0001/ablation/iter-0001/scored "* ]] \
  || fail "the serial rollout does not pipe into braid-score: $serial"
grep -q "braid-train ppo out/iter-0001/ablation/iter-0001/scored/scored-\*.h5" dry.txt \
  || fail "no serial training line: $(cat dry.txt)"

"$B/braid" run run.json -o out > run1.out 2> run1.err || { cat run1.err; fail "the run failed"; }
for i in 1 2; do
  d=out/iter-000$i
  [[ -f $d/ablation.json ]] || fail "$d/ablation.json missing"
  /usr/bin/python3 "$BRAID_SOURCE/tests/fuse/compare_scored.py" $d/scored $d/ablation/iter-000$i/scored --atol 1e-4 --rtol 1e-4 \
    || fail "iteration $i: the serial re-run's scored shards differ from the fused ones"
  # The iteration's own shards are its fused rollout's, not the re-run's.
  [[ $(ls $d/scored/scored-*.h5 | wc -l) == 6 && $(ls $d/samples/gen-*.h5 | wc -l) == 6 ]] || fail "$d: shards missing"
  [[ -f $d/ablation/iter-000$i/actor.h5 && -f $d/actor.h5 ]] || fail "$d: the serial re-run did not train beside the run"
done
/usr/bin/python3 - <<'PY' || fail "ablation.json"
import json
for i in (1, 2):
    d = f"out/iter-{i:04d}"
    a = json.load(open(f"{d}/ablation.json"))
    assert a["format"] == "braid.ablation" and a["version"] == 1 and a["iteration"] == i, a
    v = {x["name"]: x for x in a["variants"]}
    assert list(v) == ["inter-stage", "serial"], v
    assert v["inter-stage"]["fusions"] == ["inter_stage"] and v["serial"]["fusions"] == [], v
    for name, folder in (("inter-stage", d), ("serial", f"{d}/ablation/iter-{i:04d}")):
        m = v[name]["measured"]
        steps = json.load(open(f"{folder}/steps.json"))
        assert m["rollout_step"] == steps["rollout"] and m["train_step"] == steps["train"], (m, steps)
        assert abs(m["total"] - steps["rollout"] - steps["train"]) < 1e-9, m
        for stage in ("generate", "train") + (("score",) if name == "serial" else ()):
            assert m[stage] == json.load(open(f"{folder}/{stage}.stats.json"))["wall_seconds"], (name, stage, m)
        # The steps hold their tools' own times and more (process start, loads).
        assert m["rollout_step"] >= m["generate"] and m["train_step"] >= m["train"], m
        calls = v[name]["calls"]["measured"]
        assert set(calls) == {"actor_gen", "ref_inf", "critic_inf", "reward_inf", "actor_train", "critic_train"}, calls
        assert calls["actor_gen"] == json.load(open(f"{folder}/generate.stats.json"))["calls"]["actor_gen"]["seconds"]
    assert "score" not in v["inter-stage"]["measured"], v  # the fused rollout's scoring is inside its generation
    assert v["inter-stage"]["predicted"]["total"] == 1.5 and v["serial"]["predicted"]["total"] == 2.25, v
    # The serial generation ran on the same 2 ranks, without migration.
    sgs = json.load(open(f"{d}/ablation/iter-{i:04d}/generate.stats.json"))
    assert len(sgs["ranks"]) == 2 and all("fusion" not in r for r in sgs["ranks"]), sgs["ranks"]
r = json.load(open("out/report.json"))
assert [a["iteration"] for a in r["ablation"]] == [1, 2], r.get("ablation")
svg = open("out/report.svg").read()
assert 'id="ablation-1"' in svg and 'id="ablation-2"' in svg
PY

# A rerun keeps a complete ablation.json; a damaged one is measured again.
stamp1=$(stat -c %y out/iter-0001/ablation.json)
sum1=$(md5sum < out/iter-0001/ablation.json)
echo '{"format": "braid.ablation", "version": 1, "iteration": 2}' > out/iter-0002/ablation.json
sleep 1.1
"$B/braid" run run.json -o out > run2.out 2> run2.err || { cat run2.err; fail "the rerun failed"; }
[[ $(stat -c %y out/iter-0001/ablation.json) == "$stamp1" && $(md5sum < out/iter-0001/ablation.json) == "$sum1" ]] \
  || fail "the rerun rewrote a complete ablation.json"
grep -q "iteration 1 ablation: serial" run2.err && fail "the rerun measured iteration 1's ablation again: $(cat run2.err)"
grep -q "iteration 2 ablation: serial rollout" run2.err || fail "the damaged ablation.json was not measured again: $(cat run2.err)"
/usr/bin/python3 -c "
import json; a = json.load(open('out/iter-0002/ablation.json')); assert len(a['variants']) == 2, a" \
  || fail "iteration 2's ablation.json was not rewritten whole"
"$B/braid" run run.json -o out --dry-run > dry2.txt
[[ ! -s dry2.txt ]] || fail "--dry-run of a finished run with its ablations shows work: $(cat dry2.txt)"

# Both fusions: the fused training pipeline (train.schedule) as well. The serial re-run then
# trains without the schedule (whole checkpoints, in the scratch folder, from the
# iteration before's stage files).
tiny_schedule 4 --iterations 20000 --time-limit 0 --mem-iterations 2000 -q
run_file '{"iterations": [2]}' | sed 's/"train": {/"train": {"schedule": "schedule.json", /' > both.json
"$B/braid" run both.json -o both > both.out 2> both.err || { cat both.err; fail "the run with both fusions failed"; }
[[ ! -e both/iter-0001/ablation.json && -f both/iter-0002/ablation.json ]] || fail "ablation.iterations [2] not followed"
[[ -f both/iter-0002/ablation/iter-0002/actor.h5 && -f both/iter-0002/ablation/iter-0002/critic.h5 ]] \
  || fail "the serial re-run wrote no whole checkpoints"
for m in actor critic; do
  for s in 0 1; do [[ -f both/iter-0002/$m.stage$s-of-2.h5 ]] || fail "the iteration's own $m stage $s is gone"; done
done
[[ ! -e both/iter-0002/actor.h5 ]] || fail "the serial re-run wrote into the iteration's folder"
/usr/bin/python3 "$BRAID_SOURCE/tests/fuse/compare_scored.py" both/iter-0002/scored both/iter-0002/ablation/iter-0002/scored \
  --atol 1e-4 --rtol 1e-4 || fail "both fusions: the serial re-run's scored shards differ"
/usr/bin/python3 - <<'PY' || fail "ablation.json with both fusions"
import json
a = json.load(open("both/iter-0002/ablation.json"))
v = {x["name"]: x for x in a["variants"]}
assert list(v) == ["fused", "serial"], list(v)
assert v["fused"]["fusions"] == ["inter_stage", "intra_stage"], v["fused"]
t_fused = json.load(open("both/iter-0002/train.stats.json"))["wall_seconds"]
t_serial = json.load(open("both/iter-0002/ablation/iter-0002/train.stats.json"))["wall_seconds"]
assert v["fused"]["measured"]["train"] == t_fused and v["serial"]["measured"]["train"] == t_serial, v
# Fused, each model is credited with the pipeline's step time; serial, each its own.
c = v["fused"]["calls"]["measured"]
assert c["actor_train"] == c["critic_train"], c
PY

# Bad sections: exit 2 naming the field.
run_file '{}' > bad1.json
expect_bad bad1 "bad1.json" "ablation" "every" -- "$B/braid" run bad1.json -o bad --dry-run
run_file '{"iterations": [3]}' > bad2.json
expect_bad bad2 "bad2.json" "ablation.iterations[0]" -- "$B/braid" run bad2.json -o bad --dry-run
run_file '{"every": 1, "plan": "nowhere.json"}' > bad3.json
expect_bad bad3 "bad3.json" "ablation.plan" -- "$B/braid" run bad3.json -o bad --dry-run
run_file '{"every": 1}' | sed 's/"iterations": 2,/"iterations": 2, "async": true,/' > bad4.json
expect_bad bad4 "bad4.json" "ablation" "async" -- "$B/braid" run bad4.json -o bad --dry-run
# braid makefile refuses it: make -j would run the re-run's timed stages beside other work.
expect_bad makefile "run.json" "ablation" "braid run" -- "$B/braid" makefile run.json -d out -o ablation.mk
echo "cli_ablation: ok"
