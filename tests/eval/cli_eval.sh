#!/usr/bin/env bash
# braid synth and braid eval from the command line, and braid run's "eval" section:
# synth is deterministic; eval of a policy checkpoint gives pass@1 <= pass@n in [0, 1] and a
# breakdown by a prompt field; eval of a reward model its pair accuracy; bad input exits 2
# naming the file and field; a run evaluates the start and every iteration, puts the
# figures in metrics.jsonl and writes report.json and a well-formed report.svg; a rerun
# evaluates nothing again.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
T="$BRAID_BIN/braid-train"
cat > config.json <<'JSON'
{"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "intermediate_size": 64, "vocab_size": 259, "max_position_embeddings": 64,
 "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}
JSON

"$B" synth -o task --task sort,add --min-digits 2 --max-digits 8 --prompts 8 --sft 64 --pairs 32 --heldout 12 --seed 5 > synth1.json
"$B" synth -o task2 --task sort,add --min-digits 2 --max-digits 8 --prompts 8 --sft 64 --pairs 32 --heldout 12 --seed 5 > /dev/null
for f in prompts.jsonl sft.jsonl pairs.jsonl heldout.jsonl heldout-pairs.jsonl; do
  cmp -s "task/$f" "task2/$f" || fail "braid synth is not deterministic: $f differs"
done
expect_bad synth_digits "--max-digits" -- "$B" synth -o bad --max-digits 30

"$B" init -c config.json -o actor0.h5 --seed 1 -q > /dev/null
"$T" sft task/sft.jsonl --actor actor0.h5 --actor-out actor1.h5 --lr 3e-3 --mini-batch 16 -q > /dev/null
"$B" eval actor1.h5 --prompts task/heldout.jsonl --reward-rule math --max-new-tokens 10 -o greedy.json -q
"$B" eval actor1.h5 --prompts task/heldout.jsonl --reward-rule math --max-new-tokens 10 -n 3 --temperature 1 \
  --seed 4 --by task --k 2 -q > sampled.json
"$B" eval actor1.h5 --prompts task/heldout.jsonl --reward-rule math --max-new-tokens 10 -n 3 --temperature 1 \
  --seed 4 --by task --k 2 -q > sampled2.json
cmp -s sampled.json sampled2.json || python3 - <<'PY' || fail "a seeded evaluation is not reproducible"
import json
a, b = json.load(open("sampled.json")), json.load(open("sampled2.json"))
for d in (a, b): d.pop("seconds")
assert a == b, (a, b)
PY
"$B" init -c config.json -o rm0.h5 --seed 2 --value-head --no-lm-head -q > /dev/null
"$B" eval rm0.h5 --pairs task/heldout-pairs.jsonl -o rm.json -q
python3 - <<'PY' || fail "braid eval's figures"
import json
g, s, r = (json.load(open(f)) for f in ("greedy.json", "sampled.json", "rm.json"))
assert g["format"] == "braid.eval" and g["kind"] == "policy" and g["greedy"] is True, g
assert g["prompts"] == 12 and g["samples_per_prompt"] == 1, g
assert 0 <= g["pass@1"] <= 1 and g["accuracy"] == g["pass@1"] and g["pass@1"] == g["mean_reward"], g
assert 1 <= g["mean_response_length"] <= 10, g
assert s["greedy"] is False and s["samples_per_prompt"] == 3, s
assert 0 <= s["pass@1"] <= s["pass@3"] <= 1, s
# pass@k for every k <= n, rising with k; maj@k in [0, 1] (maj@1 = pass@1: one sample votes alone).
assert len(s["pass_at_k"]) == 3 and s["pass_at_k"][0] == s["pass@1"] and s["pass_at_k"][2] == s["pass@3"], s
assert all(a <= b + 1e-12 for a, b in zip(s["pass_at_k"], s["pass_at_k"][1:])), s["pass_at_k"]
assert len(s["maj_at_k"]) == 3 and all(0 <= m <= 1 for m in s["maj_at_k"]), s
assert abs(s["maj_at_k"][0] - s["pass@1"]) < 1e-12, s
# --k 2: pass@2 and maj@2 as keys, the arrays' second entries.
assert s["pass@2"] == s["pass_at_k"][1] and s["maj@2"] == s["maj_at_k"][1], s
groups = s["by"]["groups"]
assert set(groups) == {"sort", "add"}, groups
for v in groups.values():
    assert len(v["pass_at_k"]) == 3 and len(v["maj_at_k"]) == 3, v
    assert v["pass@2"] == v["pass_at_k"][1] and v["maj@2"] == v["maj_at_k"][1], v
assert sum(v["prompts"] for v in groups.values()) == 12, groups
right = sum(v["pass@1"] * v["prompts"] for v in groups.values()) / 12
assert abs(right - s["pass@1"]) < 1e-9, (right, s["pass@1"])
assert r["kind"] == "reward_model" and r["pairs"] == 12 and 0 <= r["accuracy"] <= 1, r
assert abs(r["mean_margin"] - (r["mean_chosen"] - r["mean_rejected"])) < 1e-9, r
PY

# A DPO policy on held-out pairs: its implicit reward beta*(log pi - log pi_ref). Against
# itself every margin is 0 (no pair right, loss log 2); against another reference the
# figures are those braid-train dpo reports before its first step (one step of the whole file).
"$B" eval actor1.h5 --pairs task/heldout-pairs.jsonl --ref actor1.h5 -o dpo_self.json -q
"$B" eval actor1.h5 --pairs task/heldout-pairs.jsonl --ref actor0.h5 --beta 0.5 -o dpo.json -q
"$T" dpo task/heldout-pairs.jsonl --actor actor1.h5 --actor-out dpo1.h5 --ref actor0.h5 --beta 0.5 --lr 1e-9 \
  --stats dpo_train.json -q > /dev/null
python3 - <<'PY' || fail "braid eval of a DPO policy"
import json, math
me, d, t = (json.load(open(f)) for f in ("dpo_self.json", "dpo.json", "dpo_train.json"))
assert me["kind"] == "dpo_policy" and me["pairs"] == 12, me
assert me["accuracy"] == 0 and abs(me["mean_margin"]) < 1e-6 and abs(me["loss"] - math.log(2)) < 1e-6, me
step = t["calls"]["actor_train"]["per_step"][0]
assert abs(d["accuracy"] - step["accuracy"]) < 1e-9, (d, step)
assert abs(d["mean_margin"] - step["margin"]) < 1e-4 * max(1, abs(step["margin"])), (d, step)
assert abs(d["loss"] - step["loss"]) < 1e-4 * max(1, step["loss"]), (d, step)
PY
expect_bad eval_k_above_n "--k" "k = 4 is above the 3 samples" -- "$B" eval actor1.h5 --prompts task/heldout.jsonl \
  --reward-rule math -n 3 --k 2,4
expect_bad eval_k_pairs "--k" -- "$B" eval rm0.h5 --pairs task/heldout-pairs.jsonl --k 1
expect_bad eval_beta_alone "--beta" -- "$B" eval rm0.h5 --pairs task/heldout-pairs.jsonl --beta 0.5
expect_bad eval_ref_prompts "--ref" -- "$B" eval actor1.h5 --prompts task/heldout.jsonl --reward-rule math --ref actor0.h5

# Bad input: a prompt without the answer the verifier needs; both kinds at once; a policy
# option with --pairs; a reward model that is a policy.
printf '%s\n' '{"prompt": "sort 21=", "answer": "21"}' '{"prompt": "sort 12="}' > noanswer.jsonl
expect_bad eval_noanswer "noanswer.jsonl:2" "answer" -- "$B" eval actor1.h5 --prompts noanswer.jsonl --reward-rule math
expect_bad eval_both "exactly one of --prompts" -- "$B" eval actor1.h5 --prompts task/heldout.jsonl --pairs task/pairs.jsonl
expect_bad eval_rule_with_pairs "--reward-rule" -- "$B" eval rm0.h5 --pairs task/pairs.jsonl --reward-rule math
expect_bad eval_no_head "actor1.h5" "score.weight" -- "$B" eval actor1.h5 --pairs task/pairs.jsonl

# braid run with an "eval" section: the start and every iteration evaluated.
cat > run.json <<'JSON'
{"format": "braid.run", "version": 1, "algorithm": "grpo",
 "models": {"actor": "actor1.h5", "reward": {"rule": "math"}},
 "prompts": "task/prompts.jsonl", "iterations": 2, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 8, "shard_size": 8},
 "train": {"lr": 0.001},
 "eval": {"prompts": "task/heldout.jsonl", "samples": 2, "temperature": 1.0, "by": "digits", "k": [2]}}
JSON
"$B" run run.json -o out > /dev/null 2> run.log || { cat run.log >&2; fail "braid run with eval failed"; }
grep -q "held-out accuracy" run.log || fail "the summary line shows no held-out accuracy"
python3 - <<'PY' || fail "metrics.jsonl and the report"
import json
import xml.etree.ElementTree as ET
rows = [json.loads(l) for l in open("out/metrics.jsonl")]
assert [r["iteration"] for r in rows] == [0, 1, 2], rows
for r in rows:
    assert 0 <= r["eval"]["accuracy"] <= r["eval"]["pass@2"] <= 1 and r["eval"]["maj@2"] == r["eval"]["maj_at_k"][1], r
    assert r["eval"]["prompts"] == 12 and r["seconds"]["eval"] > 0, r
assert "mean_reward" in rows[1] and "mean_reward" not in rows[0]
rep = json.load(open("out/report.json"))
assert rep["format"] == "braid.report" and [r["iteration"] for r in rep["iterations"]] == [0, 1, 2], rep
for r, m in zip(rep["iterations"], rows):
    assert r["heldout_accuracy"] == m["eval"]["accuracy"], (r, m)
assert rep["iterations"][2]["mean_reward"] == rows[2]["mean_reward"]
# Each stage's seconds, and the driver's wall time of the iteration (metrics' seconds.iteration).
assert set(rep["iterations"][1]["seconds"]) == {"generate", "score", "train", "eval", "iteration"}, rep["iterations"][1]
svg = ET.parse("out/report.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
series = {p.get("data-series") for p in svg.iter(ns + "path") if p.get("class") == "series"}
assert {"mean_reward", "heldout_accuracy", "kl", "mean_response_length", "entropy"} <= series, series
# pass@k against k: a curve per evaluated iteration.
assert {"iteration 0", "iteration 1", "iteration 2"} <= series, series
assert len(rep["iterations"][2]["heldout_pass_at_k"]) == 2, rep["iterations"][2]
assert len([r for r in svg.iter(ns + "rect") if r.get("class") == "stage-train"]) == 2
json.load(open("out/iter-0002/eval.json"))["by"]["groups"]
PY
before=$(stat -c %Y out/iter-0002/eval.json out/iter-0000/eval.json)
"$B" run run.json -o out > /dev/null 2> rerun.log
[[ "$(stat -c %Y out/iter-0002/eval.json out/iter-0000/eval.json)" == "$before" ]] || fail "a rerun evaluated again"
"$B" run run.json -o out -n > dry.txt
[[ ! -s dry.txt ]] || { cat dry.txt; fail "a finished run with eval still has steps to do"; }
"$B" makefile run.json -d out -o run.mk
grep -q '$(BRAID) eval actor1.h5' run.mk || fail "the Makefile has no eval rule for the start"
grep -q 'out/iter-0002/eval.json:' run.mk || fail "the Makefile has no eval rule for iteration 2"

# eval.k above eval.samples is refused, naming the field.
python3 -c 'import json; r = json.load(open("run.json")); r["eval"]["k"] = [1, 4]; json.dump(r, open("krun.json", "w"))'
expect_bad run_eval_k "eval.k" "k = 4 is above eval.samples (2)" -- "$B" run krun.json -o out3

# A reward model's run must say what decides right from wrong.
sed 's|"reward": {"rule": "math"}|"reward": "rm0.h5"|' run.json > rmrun.json
expect_bad run_eval_rule "eval.rule" -- "$B" run rmrun.json -o out2
echo "ok"
